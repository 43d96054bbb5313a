"""Runs the analysers over what the parsers stored.

Message-level analysers (tagging, polling, tooling) see each message once, with
its tool calls and results; session-level analysers (launch diffs, campaigns,
readiness) are recomputed for every session an ingest touched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from analytics.errors import AnalyticsError
from analytics.models import (
    Launch,
    Measurement,
    Message,
    MessageContext,
    PollingLoop,
    ServerEvent,
    Tag,
    ToolCall,
)
from analytics.store.writer import append
from analytics.timing import timed

CHUNK = 5000
TAG_MARGIN = 50
"""Messages before a chunk (or before the first new message of an append) that are
tagged again as the chunk's context."""

_MSG_COLS = [
    "session_id", "msg_idx", "source_id", "parent_source_id", "role", "ts", "text",
    "is_sidechain", "is_compaction_summary", "error", "native_type", "model", "location",
]
_CALL_COLS = [
    "session_id", "msg_idx", "call_id", "tool", "command", "input", "output", "status",
    "exit_code", "started_at", "ended_at", "result_msg_idx",
]
MESSAGE_TABLES = ("tags", "polling_loops", "launches", "server_events", "measurements")


@dataclass
class MessageOutputs:
    tags: list[Tag] = field(default_factory=list)
    polling: list[PollingLoop] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    events: list[ServerEvent] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)


class Analyser:
    """Holds the (lazily built) tagger and per-session tooling state for one ingest run."""

    def __init__(self, rules: Path | None = None) -> None:
        from analytics.analysis.tagging import Tagger

        self.tagger = Tagger(extra_rules=rules)
        self._tooling: dict[str, Any] = {}

    def forget_sessions(self) -> None:
        """Drop the per-session tooling state held in memory (it is re-read from the
        database when a session is analysed next)."""
        self._tooling.clear()

    def _extractor(self, session_id: str) -> Any:
        from analytics.analysis.tooling import ToolingExtractor

        if session_id not in self._tooling:
            self._tooling[session_id] = ToolingExtractor()
        return self._tooling[session_id]

    def analyse(
        self,
        contexts: list[MessageContext],
        before: list[MessageContext] | None = None,
        known: set[tuple[int, str]] | None = None,
    ) -> MessageOutputs:
        """Tags, polling loops and tooling facts of ``contexts``. A message's tags can
        depend on its neighbours (a run of re-checks of one background job, the error
        an explanation follows), so ``before`` — the messages just before ``contexts`` —
        are tagged with them again; of their tags only those not in ``known`` (the ones
        already stored) are returned."""
        from analytics.analysis.tagging import analyse_polling

        out = MessageOutputs()
        if not contexts:
            return out
        with timed("tagging"):
            if before:
                mine = {c.message.msg_idx for c in contexts}
                batch = [c for c in before if c.message.msg_idx not in mine] + contexts
                batch.sort(key=lambda c: c.message.msg_idx)
                seen = known or set()
                out.tags = [
                    t for t in self.tagger.tag(batch)
                    if t.msg_idx in mine or (t.msg_idx, t.tag) not in seen
                ]
            else:
                out.tags = self.tagger.tag(contexts)
        with timed("polling"):
            for ctx in contexts:
                out.polling.extend(analyse_polling(ctx))
        with timed("tooling"):
            for ctx in contexts:
                facts = self._extractor(ctx.message.session_id).extract(ctx)
                out.launches.extend(facts.launches)
                out.events.extend(facts.server_events)
                out.measurements.extend(facts.measurements)
        return out

    # -- message level -------------------------------------------------------

    def run_messages(
        self,
        con: duckdb.DuckDBPyConnection,
        session_id: str,
        start_idx: int,
        extra_idx: Iterable[int] = (),
    ) -> int:
        """Analyse messages ``msg_idx >= start_idx`` plus ``extra_idx`` (older messages whose
        tool calls just completed), replacing any analysis rows they had."""
        self._restore_tooling(con, session_id)
        extra = sorted({i for i in extra_idx if i < start_idx})
        if extra:
            self._delete(con, session_id, extra)
        # The messages just before the first changed one are tagged again as context.
        first = min([start_idx, *extra])
        margin_lo = max(0, first - TAG_MARGIN)
        with timed("load contexts"):
            before = load_contexts(con, session_id, margin_lo, start_idx - 1) if first else []
            known = {
                (int(i), str(t))
                for i, t in con.execute(
                    "SELECT msg_idx, tag FROM tags WHERE session_id = ? AND msg_idx >= ?",
                    [session_id, margin_lo],
                ).fetchall()
            }
        if extra:
            redo = [c for c in before if c.message.msg_idx in set(extra)]
            outputs = self.analyse(redo, before, known)
            self._write(con, outputs)
            known |= {(t.msg_idx, t.tag) for t in outputs.tags}
        n = 0
        hi = con.execute(
            "SELECT max(msg_idx) FROM messages WHERE session_id = ?", [session_id]
        ).fetchone()
        last = hi[0] if hi and hi[0] is not None else -1
        lo = start_idx
        while lo <= last:
            with timed("load contexts"):
                contexts = load_contexts(con, session_id, lo, lo + CHUNK - 1)
            outputs = self.analyse(contexts, before[-TAG_MARGIN:], known)
            with timed("write analysis"):
                self._write(con, outputs)
            before = contexts
            tail = contexts[-TAG_MARGIN].message.msg_idx if len(contexts) >= TAG_MARGIN else lo
            known = {k for k in known if k[0] >= tail} | {
                (t.msg_idx, t.tag) for t in outputs.tags if t.msg_idx >= tail
            }
            n += len(contexts)
            lo += CHUNK
        self._save_tooling(con, session_id)
        return n

    def _restore_tooling(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        from analytics.analysis.tooling import ToolingExtractor

        if session_id in self._tooling:
            return
        row = con.execute(
            "SELECT state FROM analysis_state WHERE session_id = ? AND analyser = 'tooling'",
            [session_id],
        ).fetchone()
        if row and row[0]:
            try:
                self._tooling[session_id] = ToolingExtractor.from_state(orjson.loads(row[0]))
            except (AnalyticsError, ValueError):
                pass  # a state from another version: start afresh

    def _save_tooling(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        extractor = self._tooling.get(session_id)
        if extractor is None:
            return
        con.execute(
            "INSERT OR REPLACE INTO analysis_state VALUES (?, 'tooling', ?)",
            [session_id, orjson.dumps(extractor.state(), default=str).decode()],
        )

    @staticmethod
    def _delete(con: duckdb.DuckDBPyConnection, session_id: str, idx: list[int]) -> None:
        for table in MESSAGE_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE session_id = ? AND list_contains(?, msg_idx)",
                [session_id, idx],
            )

    @staticmethod
    def _write(con: duckdb.DuckDBPyConnection, out: MessageOutputs) -> None:
        append(con, "tags", out.tags)
        append(con, "polling_loops", out.polling)
        append(con, "launches", out.launches)
        append(con, "server_events", out.events)
        append(con, "measurements", out.measurements)

    # -- session level -------------------------------------------------------

    def run_session(
        self, con: duckdb.DuckDBPyConnection, session_id: str, first_changed: int = 0
    ) -> None:
        """Recompute the session-level analysis after the message-level analysis of
        ``msg_idx >= first_changed`` changed: campaigns as a whole, readiness verdicts
        only for the claims whose evidence window reaches the changed messages."""
        refresh_session_stats(con, session_id)
        self._diff_launches(con, session_id)
        from analytics.analysis.readiness import claims_affected_from
        from analytics.analysis.session import analyse_session, load_session_frames

        claims_from = claims_affected_from(first_changed)
        with timed("session analysis"):
            result = analyse_session(load_session_frames(con, session_id), claims_from)
        for table in ("campaigns", "levers"):
            con.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
        con.execute(
            "DELETE FROM readiness_claims WHERE session_id = ? AND msg_idx >= ?",
            [session_id, claims_from],
        )
        append(con, "campaigns", result.campaigns)
        append(con, "levers", result.levers)
        append(con, "readiness_claims", result.claims)

    @staticmethod
    def _diff_launches(con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        from analytics.analysis.tooling import diff_launches

        rows = con.execute(
            "SELECT session_id, msg_idx, call_id, engine, model, host, flags, env, unknown_flags "
            "FROM launches WHERE session_id = ? ORDER BY msg_idx",
            [session_id],
        ).fetchall()
        if not rows:
            return
        launches = [
            Launch(
                session_id=r[0], msg_idx=r[1], call_id=r[2], engine=r[3], model=r[4], host=r[5],
                flags=orjson.loads(r[6]) if r[6] else {},
                env=orjson.loads(r[7]) if r[7] else {},
                unknown_flags=orjson.loads(r[8]) if r[8] else {},
            )
            for r in rows
        ]
        con.execute("DELETE FROM launches WHERE session_id = ?", [session_id])
        append(con, "launches", diff_launches(launches))


def refresh_session_stats(con: duckdb.DuckDBPyConnection, session_id: str) -> None:
    con.execute(
        """
        UPDATE sessions SET
            n_messages = s.n,
            started_at = coalesce(sessions.started_at, s.first_ts),
            ended_at = greatest(coalesce(sessions.ended_at, s.last_ts), s.last_ts)
        FROM (SELECT count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts
              FROM messages WHERE session_id = ?) s
        WHERE sessions.session_id = ?
        """,
        [session_id, session_id],
    )
    # Sessions without a native title are named by their first real user request.
    con.execute(
        """
        UPDATE sessions SET title = (
            SELECT left(trim(split_part(trim(text), chr(10), 1)), 100) FROM messages
            WHERE session_id = $s AND role = 'user' AND NOT is_compaction_summary
              AND length(trim(text)) > 0 AND NOT starts_with(ltrim(text), '<')
              AND NOT starts_with(ltrim(text), '[Request interrupted')
            ORDER BY msg_idx LIMIT 1)
        WHERE session_id = $s AND (title IS NULL OR title = '')
        """,
        {"s": session_id},
    )


def load_contexts(
    con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int
) -> list[MessageContext]:
    """Messages ``lo..hi`` of a session with the calls they make and the results they carry."""
    msgs = con.execute(
        f"SELECT {', '.join(_MSG_COLS)} FROM messages "
        "WHERE session_id = ? AND msg_idx BETWEEN ? AND ? ORDER BY msg_idx",
        [session_id, lo, hi],
    ).fetchall()
    calls = con.execute(
        f"SELECT {', '.join(_CALL_COLS)} FROM tool_calls WHERE session_id = ? "
        "AND (msg_idx BETWEEN ? AND ? OR result_msg_idx BETWEEN ? AND ?)",
        [session_id, lo, hi, lo, hi],
    ).fetchall()
    by_call: dict[int, list[ToolCall]] = defaultdict(list)
    by_result: dict[int, list[ToolCall]] = defaultdict(list)
    for row in calls:
        call = ToolCall.model_construct(**dict(zip(_CALL_COLS, row, strict=True)))
        by_call[call.msg_idx].append(call)
        if call.result_msg_idx is not None:
            by_result[call.result_msg_idx].append(call)
    out = []
    for row in msgs:
        d = dict(zip(_MSG_COLS, row, strict=True))
        d["text"] = d["text"] or ""
        msg = Message.model_construct(**d)
        out.append(
            MessageContext.model_construct(
                message=msg, calls=by_call.get(msg.msg_idx, []), results=by_result.get(msg.msg_idx, [])
            )
        )
    return out
