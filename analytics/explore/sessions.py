"""The Sessions page: one row per session with the figures users sort by."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date

import duckdb
import pandas as pd

from analytics.analysis.timeaccounting import ABORT_EVENTS_CTE

SESSIONS_SQL = f"""
WITH {ABORT_EVENTS_CTE.strip()},
msg AS (
    SELECT session_id, count(*) AS messages, min(ts) AS first_ts, max(ts) AS last_ts
    FROM messages GROUP BY session_id
), tg AS (
    SELECT session_id,
           count(*) FILTER (WHERE tag = 'user_checkin') AS checkins,
           count(*) FILTER (WHERE tag = 'error') AS errors
    FROM tags GROUP BY session_id
), cl AS (
    SELECT session_id, count(*) AS claims,
           count(*) FILTER (WHERE verdict = 'premature') AS premature_claims
    FROM readiness_claims GROUP BY session_id
), ab AS (
    SELECT session_id, count(*) AS aborts FROM abort_events GROUP BY session_id
), pl AS (
    SELECT session_id, count(*) AS polling_loops, coalesce(sum(waited_s), 0) AS polling_wait_s
    FROM polling_loops GROUP BY session_id
)
SELECT s.session_id, s.title, s.source_format AS format, s.agent, s.model,
       coalesce(s.started_at, msg.first_ts) AS started_at,
       coalesce(s.ended_at, msg.last_ts) AS ended_at,
       date_diff('second', coalesce(s.started_at, msg.first_ts),
                 coalesce(s.ended_at, msg.last_ts)) / 3600.0 AS hours,
       coalesce(msg.messages, 0) AS messages,
       coalesce(ab.aborts, 0) AS aborts,
       coalesce(tg.checkins, 0) AS checkins,
       coalesce(tg.errors, 0) AS errors,
       coalesce(cl.claims, 0) AS claims,
       coalesce(cl.premature_claims, 0) AS premature_claims,
       coalesce(pl.polling_loops, 0) AS polling_loops,
       coalesce(pl.polling_wait_s, 0) / 60.0 AS polling_wait_min,
       s.parent_session_id
FROM sessions s
LEFT JOIN msg USING (session_id)
LEFT JOIN tg USING (session_id)
LEFT JOIN cl USING (session_id)
LEFT JOIN ab USING (session_id)
LEFT JOIN pl USING (session_id)
ORDER BY started_at DESC NULLS LAST, s.session_id
"""


def sessions_overview(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every session with message, abort, check-in, claim and polling figures
    (aborts are interruptions, however many marker records each wrote)."""
    return con.execute(SESSIONS_SQL).df()


def session_ids(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """session_id and a display label, newest first (for pickers)."""
    return con.execute(
        """
        SELECT session_id,
               session_id || coalesce(' — ' || title, '') AS label
        FROM sessions ORDER BY started_at DESC NULLS LAST, session_id
        """
    ).df()


@dataclass(frozen=True)
class SessionFilter:
    formats: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    start: date | None = None
    end: date | None = None
    text: str = ""


def filter_sessions(df: pd.DataFrame, f: SessionFilter) -> pd.DataFrame:
    """Rows of :func:`sessions_overview` matching every set criterion."""
    keep = pd.Series(True, index=df.index)
    for col, wanted in (("format", f.formats), ("agent", f.agents), ("model", f.models)):
        if wanted:
            keep &= df[col].isin(wanted)
    started = pd.to_datetime(df["started_at"])
    if f.start is not None:
        keep &= started.dt.date >= f.start
    if f.end is not None:
        keep &= started.dt.date <= f.end
    if f.text.strip():
        needle = f.text.strip().lower()
        hay = df["session_id"].fillna("") + " " + df["title"].fillna("")
        keep &= hay.str.lower().str.contains(needle, regex=False)
    return df[keep]


def undated_left_out(df: pd.DataFrame, f: SessionFilter) -> int:
    """How many sessions a set date bound leaves out only for having no start time (no
    timestamps in their transcript), matching every other criterion."""
    if f.start is None and f.end is None:
        return 0
    others = filter_sessions(df, replace(f, start=None, end=None))
    return int(others["started_at"].isna().sum())


def headline(df: pd.DataFrame) -> dict[str, float]:
    """Totals shown above the table, over the filtered rows."""
    return {
        "Sessions": float(len(df)),
        "Messages": float(df["messages"].sum()),
        "Check-ins": float(df["checkins"].sum()),
        "Aborts": float(df["aborts"].sum()),
        "Premature claims": float(df["premature_claims"].sum()),
        "Polling wait (h)": round(float(df["polling_wait_min"].sum()) / 60.0, 1),
    }
