"""The Polling & aborts page: waiting loops, user interruptions, check-in latency."""

from __future__ import annotations

import duckdb
import pandas as pd

from analytics.analysis.timeaccounting import ABORT_EVENTS_CTE
from analytics.analysis.waits import WAITS_SELECT


def polling_loops(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> pd.DataFrame:
    """Every polling loop (of one session if given) with its command, interval,
    iterations and waited time."""
    return con.execute(
        """
        SELECT p.session_id, p.msg_idx, p.outcome, p.interval_s, p.max_iterations,
               CASE WHEN p.interval_s > 0 THEN round(p.waited_s / p.interval_s) END
                   AS iterations_done,
               p.max_wait_s, p.waited_s, p.target, c.command
        FROM polling_loops p
        LEFT JOIN tool_calls c ON c.session_id = p.session_id AND c.call_id = p.call_id
        WHERE $sid IS NULL OR p.session_id = $sid
        ORDER BY p.waited_s DESC NULLS LAST, p.session_id, p.msg_idx
        """,
        {"sid": session_id},
    ).df()


def waits(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> pd.DataFrame:
    """Every wait (``v_waits``: the polls of one target until one ends it; of one session
    if given), the longest first; ``msg_idx`` is its first poll."""
    return con.execute(
        f"""
        SELECT session_id, wait_no, first_msg_idx AS msg_idx, last_msg_idx, polls, outcome,
               waited_s, checkins, interval_min_s, interval_max_s, target
        FROM ({WAITS_SELECT})
        WHERE $sid IS NULL OR session_id = $sid
        ORDER BY waited_s DESC NULLS LAST, session_id, wait_no
        """,
        {"sid": session_id},
    ).df()


def polling_by_outcome(loops: pd.DataFrame) -> pd.DataFrame:
    """Loops and waited minutes per outcome."""
    if loops.empty:
        return pd.DataFrame({"outcome": [], "loops": [], "waited_min": []})
    g = loops.groupby(loops["outcome"].fillna("unknown"))
    return pd.DataFrame(
        {"loops": g.size(), "waited_min": (g["waited_s"].sum() / 60.0).round(1)}
    ).reset_index()


def aborts(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> pd.DataFrame:
    """Each user interruption (of one session if given; one row however many marker records it wrote; ``records``
    says how many, ``abort_text`` joins their texts) with the tool call it interrupted:
    the latest call at or before its last record (an aborted one preferred), and whether
    that was a polling loop."""
    return con.execute(
        f"""
        WITH {ABORT_EVENTS_CTE.strip()},
        cand AS (
            SELECT a.session_id, a.msg_idx AS abort_msg_idx, c.msg_idx AS call_msg_idx,
                   c.tool, c.command, c.status, c.duration_s, c.call_id,
                   row_number() OVER (PARTITION BY a.session_id, a.msg_idx
                       ORDER BY (c.status = 'aborted') DESC, c.msg_idx DESC) AS rn
            FROM abort_events a JOIN tool_calls c
              ON c.session_id = a.session_id AND c.msg_idx <= a.last_msg_idx
             AND c.msg_idx >= a.msg_idx - 20
        ), texts AS (
            SELECT session_id, msg_idx, string_agg(body, ' | ' ORDER BY first_at) AS abort_text
            FROM (
                SELECT a.session_id, a.msg_idx, trim(m.text) AS body, min(m.msg_idx) AS first_at
                FROM abort_events a
                JOIN messages m ON m.session_id = a.session_id
                     AND m.msg_idx BETWEEN a.msg_idx AND a.last_msg_idx
                WHERE trim(m.text) <> ''
                GROUP BY ALL
            )
            GROUP BY session_id, msg_idx
        )
        SELECT a.session_id, a.msg_idx, m.ts, t.abort_text, a.records,
               cand.call_msg_idx AS interrupted_msg_idx, cand.tool AS interrupted_tool,
               cand.command AS interrupted_command, cand.status AS interrupted_status,
               cand.duration_s AS ran_s,
               EXISTS (SELECT 1 FROM polling_loops p WHERE p.session_id = a.session_id
                       AND p.msg_idx = cand.call_msg_idx) AS was_polling
        FROM abort_events a
        LEFT JOIN cand ON cand.session_id = a.session_id AND cand.abort_msg_idx = a.msg_idx
             AND cand.rn = 1
        LEFT JOIN texts t ON t.session_id = a.session_id AND t.msg_idx = a.msg_idx
        LEFT JOIN messages m ON m.session_id = a.session_id AND m.msg_idx = a.msg_idx
        WHERE $sid IS NULL OR a.session_id = $sid
        ORDER BY a.session_id, a.msg_idx
        """,
        {"sid": session_id},
    ).df()


def checkin_latency(con: duckdb.DuckDBPyConnection, session_id: str | None = None) -> pd.DataFrame:
    """Each user check-in (of one session if given) with how long the user had waited
    since the previous message and how long the assistant took to answer it."""
    return con.execute(
        """
        WITH seq AS (
            SELECT session_id, msg_idx, role, ts,
                   lag(ts) OVER w AS prev_ts,
                   lag(role) OVER w AS prev_role,
                   min(ts) FILTER (WHERE role = 'assistant') OVER (w ROWS BETWEEN 1 FOLLOWING
                       AND UNBOUNDED FOLLOWING) AS reply_ts
            FROM messages WHERE $sid IS NULL OR session_id = $sid
            WINDOW w AS (PARTITION BY session_id ORDER BY msg_idx)
        ), c AS (
            SELECT DISTINCT session_id, msg_idx FROM tags
            WHERE tag = 'user_checkin' AND ($sid IS NULL OR session_id = $sid)
        )
        SELECT s.session_id, s.msg_idx, s.ts, m.text AS checkin_text, s.prev_role,
               date_diff('millisecond', s.prev_ts, s.ts) / 1000.0 AS silence_before_s,
               date_diff('millisecond', s.ts, s.reply_ts) / 1000.0 AS reply_after_s
        FROM c JOIN seq s USING (session_id, msg_idx)
        JOIN messages m USING (session_id, msg_idx)
        ORDER BY s.session_id, s.msg_idx
        """,
        {"sid": session_id},
    ).df()
