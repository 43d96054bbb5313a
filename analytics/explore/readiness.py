"""The Readiness page: claims that something is up/ready/fixed, with their verdicts."""

from __future__ import annotations

import json

import duckdb
import pandas as pd

VERDICTS = ("premature", "unverified", "supported")


def claims(
    con: duckdb.DuckDBPyConnection, verdicts: tuple[str, ...] = (), session_id: str | None = None
) -> pd.DataFrame:
    """Readiness claims (optionally only some verdicts, of one session), with the claim
    message's time."""
    return con.execute(
        """
        SELECT r.session_id, r.msg_idx, m.ts, r.verdict, r.subject, r.claim_text, r.reason,
               CAST(r.evidence_msg_idx AS VARCHAR) AS evidence_msg_idx,
               r.contradicted_by_msg_idx
        FROM readiness_claims r
        LEFT JOIN messages m USING (session_id, msg_idx)
        WHERE (len($verdicts) = 0 OR list_contains($verdicts, r.verdict))
          AND ($sid IS NULL OR r.session_id = $sid)
        ORDER BY r.session_id, r.msg_idx
        """,
        {"verdicts": list(verdicts), "sid": session_id},
    ).df()


def evidence_indices(evidence: object) -> tuple[int, ...]:
    """The evidence message indices of a claim, whatever JSON shape they were stored in."""
    if evidence is None or (isinstance(evidence, float) and pd.isna(evidence)):
        return ()
    value = json.loads(evidence) if isinstance(evidence, str) else evidence
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list):
        return tuple(
            int(v) for v in value if isinstance(v, int) or (isinstance(v, str) and v.isdigit())
        )
    return ()


def verdict_counts(df: pd.DataFrame) -> dict[str, int]:
    """Claims per verdict (every verdict present, zero when absent)."""
    counts = df["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def claim_roles(msg_idx: int, evidence: object, contradicted_by: object) -> dict[int, str]:
    """The messages to show beside a claim, in order, each with its role: "claim",
    "contradicted by" or "evidence" (a message in several roles takes the first)."""
    roles = dict.fromkeys(evidence_indices(evidence), "evidence")
    if contradicted_by is not None and not pd.isna(contradicted_by):
        roles[int(contradicted_by)] = "contradicted by"  # type: ignore[call-overload]
    roles[int(msg_idx)] = "claim"
    return dict(sorted(roles.items()))
