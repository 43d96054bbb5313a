"""Where a session's time went, as SQL views over the stored tables.

``v_time_accounting`` splits wall-clock time between consecutive messages. A
message's activity lasts until the last tool call it made ended (opencode keeps a
call and its result in one message, stamped when the call began): that part of the
gap after it is *agent working time* whatever follows. Of the rest of the gap:

- more than the idle threshold (default 30 min) is *idle*, not work —
  a session resumed the next day is not 20 hours of work;
- before a user message it is *waiting for the user*;
- otherwise *agent working time* (thinking, tools running).

Alongside: tool time (sum of tool-call durations, each capped at the
threshold), polling wait (time spent inside polling loops), time lost after
aborts (from the end of the interrupted activity to the agent's next message) and
check-in latency (from the end of the agent's last activity to a user's check-in;
0 when a tool of the agent was still running).

``v_session_summary`` gives one row per session with counts of messages, tool
calls, aborts, check-ins, readiness claims by verdict, polling wait and
campaigns. Both views are created with CREATE OR REPLACE (idempotent).
"""

from __future__ import annotations

import duckdb

IDLE_THRESHOLD_S = 1800.0

ABORT_EVENTS_CTE = """
abort_records AS (
    SELECT DISTINCT session_id, msg_idx FROM tags WHERE tag = 'user_abort'
),
abort_events AS (
    SELECT session_id, min(msg_idx) AS msg_idx, max(msg_idx) AS last_msg_idx,
           count(*) AS records
    FROM (
        SELECT session_id, msg_idx,
               msg_idx - row_number() OVER (PARTITION BY session_id ORDER BY msg_idx) AS run
        FROM abort_records
    )
    GROUP BY session_id, run
)
"""
"""CTEs ``abort_records`` and ``abort_events``: one user interruption, one event. The
agents write one interruption as several marker records in a row (Claude Code: each
rejected tool result, then "[Request interrupted by user for tool use]"; Codex: the
aborted call's output, then ``turn_aborted``), and each carries the ``user_abort`` tag;
a run of consecutive tagged messages is one event (``msg_idx`` its first record,
``last_msg_idx`` its last, ``records`` how many). Counting records would count one
interruption two to four times."""

_GAPS = """
WITH calls_end AS (
    SELECT session_id, msg_idx, max(ended_at) AS calls_end_ts
    FROM tool_calls WHERE ended_at IS NOT NULL GROUP BY session_id, msg_idx
),
activity_end AS (
    -- a message's activity ends when the last tool call it made did (never before it)
    SELECT m.session_id, m.msg_idx, m.role, m.ts,
           greatest(m.ts, coalesce(c.calls_end_ts, m.ts)) AS end_ts
    FROM messages m LEFT JOIN calls_end c USING (session_id, msg_idx)
),
ordered AS (
    SELECT session_id, msg_idx, role, ts,
           lag(ts) OVER w AS prev_ts,
           lag(end_ts) OVER w AS prev_end_ts,
           lag(role) OVER w AS prev_role
    FROM activity_end
    WHERE ts IS NOT NULL
    WINDOW w AS (PARTITION BY session_id ORDER BY msg_idx)
),
spans AS (
    SELECT *, greatest(date_diff('millisecond', prev_ts, ts) / 1000.0, 0) AS gap_s,
           greatest(date_diff('millisecond', prev_ts, prev_end_ts) / 1000.0, 0) AS ran_s
    FROM ordered
    WHERE prev_ts IS NOT NULL
),
gaps AS (
    -- busy_s: the part of the gap the previous message's tool calls still ran
    SELECT *, least(ran_s, gap_s) AS busy_s, gap_s - least(ran_s, gap_s) AS free_s
    FROM spans
)
"""


def time_accounting_select(idle_s: float = IDLE_THRESHOLD_S) -> str:
    """The SELECT behind ``v_time_accounting`` (usable on a read-only connection)."""
    return f"""
{_GAPS},
per_gap AS (
    SELECT session_id,
        sum(CASE WHEN free_s <= {idle_s} AND role <> 'user' THEN gap_s ELSE busy_s END)
            AS agent_working_s,
        sum(CASE WHEN free_s <= {idle_s} AND role = 'user' THEN free_s ELSE 0 END)
            AS waiting_for_user_s,
        sum(CASE WHEN free_s > {idle_s} THEN free_s ELSE 0 END) AS idle_s,
        count(*) FILTER (WHERE free_s > {idle_s}) AS idle_gaps,
        sum(gap_s) AS wall_clock_s
    FROM gaps GROUP BY session_id
),
tools AS (
    SELECT session_id,
        sum(least(coalesce(duration_s, 0), {idle_s})) AS tool_s,
        sum(CASE WHEN status = 'aborted' THEN least(coalesce(duration_s, 0), {idle_s}) ELSE 0 END)
            AS aborted_tool_s
    FROM tool_calls GROUP BY session_id
),
polling AS (
    SELECT p.session_id,
        sum(least(coalesce(p.waited_s, t.duration_s, 0), {idle_s})) AS polling_wait_s,
        count(*) AS polling_loops
    FROM polling_loops p
    LEFT JOIN tool_calls t
      ON t.session_id = p.session_id AND t.msg_idx = p.msg_idx AND t.call_id = p.call_id
    GROUP BY p.session_id
),
{ABORT_EVENTS_CTE},
activity AS (
    -- the agent's last activity before each message and the first assistant reply after
    -- it, as window functions: one pass per session (a correlated subquery per check-in or
    -- abort re-read the session each time: 17 s on a session of 100k messages)
    SELECT session_id, msg_idx,
        max(end_ts) FILTER (WHERE role IN ('assistant', 'tool')) OVER (
            PARTITION BY session_id ORDER BY msg_idx
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS agent_before_ts,
        min(ts) FILTER (WHERE role = 'assistant') OVER (
            PARTITION BY session_id ORDER BY msg_idx
            ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS assistant_after_ts
    FROM activity_end
),
abort_msgs AS (
    -- from the end of the interrupted record (its aborted call, where it holds one)
    SELECT e.session_id, e.msg_idx, e.last_msg_idx, m.end_ts AS ts
    FROM abort_events e JOIN activity_end m USING (session_id, msg_idx)
    WHERE m.ts IS NOT NULL
),
aborts AS (
    SELECT a.session_id, count(*) AS aborts,
        sum(least(greatest(coalesce(
            date_diff('millisecond', a.ts, x.assistant_after_ts) / 1000.0, 0), 0), {idle_s}))
            AS lost_after_aborts_s
    FROM abort_msgs a
    LEFT JOIN activity x ON x.session_id = a.session_id AND x.msg_idx = a.last_msg_idx
    GROUP BY a.session_id
),
checkin_msgs AS (
    SELECT DISTINCT t.session_id, t.msg_idx, m.ts
    FROM tags t JOIN messages m USING (session_id, msg_idx)
    WHERE t.tag = 'user_checkin' AND m.ts IS NOT NULL
),
checkin_waits AS (
    -- NULL before any agent activity; 0 while a tool of the agent still ran
    SELECT c.session_id,
        CASE WHEN x.agent_before_ts < c.ts
             THEN date_diff('millisecond', x.agent_before_ts, c.ts) / 1000.0
             WHEN x.agent_before_ts IS NOT NULL THEN 0.0 END AS wait_s
    FROM checkin_msgs c LEFT JOIN activity x USING (session_id, msg_idx)
),
checkins AS (
    SELECT session_id, count(*) AS checkins,
        avg(wait_s) AS checkin_latency_avg_s, max(wait_s) AS checkin_latency_max_s
    FROM checkin_waits GROUP BY session_id
)
SELECT s.session_id,
    coalesce(g.wall_clock_s, 0) AS wall_clock_s,
    coalesce(g.agent_working_s, 0) AS agent_working_s,
    coalesce(t.tool_s, 0) AS tool_s,
    coalesce(p.polling_wait_s, 0) AS polling_wait_s,
    coalesce(p.polling_loops, 0) AS polling_loops,
    coalesce(g.waiting_for_user_s, 0) AS waiting_for_user_s,
    coalesce(g.idle_s, 0) AS idle_s,
    coalesce(g.idle_gaps, 0) AS idle_gaps,
    coalesce(a.aborts, 0) AS aborts,
    coalesce(a.lost_after_aborts_s, 0) AS lost_after_aborts_s,
    coalesce(t.aborted_tool_s, 0) AS aborted_tool_s,
    coalesce(c.checkins, 0) AS checkins,
    c.checkin_latency_avg_s,
    c.checkin_latency_max_s,
    {idle_s} AS idle_threshold_s
FROM sessions s
LEFT JOIN per_gap g USING (session_id)
LEFT JOIN tools t USING (session_id)
LEFT JOIN polling p USING (session_id)
LEFT JOIN aborts a USING (session_id)
LEFT JOIN checkins c USING (session_id)
"""


_SESSION_SUMMARY_SQL = f"""
CREATE OR REPLACE VIEW v_session_summary AS
WITH {ABORT_EVENTS_CTE.strip()},
msg AS (
    SELECT session_id, count(*) AS messages,
        count(*) FILTER (WHERE role = 'user') AS user_messages,
        count(*) FILTER (WHERE role = 'assistant') AS assistant_messages,
        min(ts) AS first_ts, max(ts) AS last_ts
    FROM messages GROUP BY session_id
),
calls AS (
    SELECT session_id, count(*) AS tool_calls,
        count(*) FILTER (WHERE status = 'error' OR coalesce(exit_code, 0) <> 0)
            AS failed_tool_calls
    FROM tool_calls GROUP BY session_id
),
tagc AS (
    SELECT session_id,
        count(DISTINCT msg_idx) FILTER (WHERE tag = 'user_checkin') AS checkins,
        count(DISTINCT msg_idx) FILTER (WHERE tag = 'readiness_claim') AS readiness_claims_tagged,
        count(DISTINCT msg_idx) FILTER (WHERE tag = 'error') AS errors
    FROM tags GROUP BY session_id
),
claims AS (
    SELECT session_id,
        count(*) FILTER (WHERE verdict = 'premature') AS claims_premature,
        count(*) FILTER (WHERE verdict = 'supported') AS claims_supported,
        count(*) FILTER (WHERE verdict = 'unverified') AS claims_unverified
    FROM readiness_claims GROUP BY session_id
),
camp AS (
    SELECT session_id, count(*) AS campaigns,
        count(*) FILTER (WHERE status = 'met') AS campaigns_met
    FROM campaigns GROUP BY session_id
),
lev AS (
    SELECT session_id, count(*) AS levers FROM levers GROUP BY session_id
),
ab AS (
    SELECT session_id, count(*) AS aborts FROM abort_events GROUP BY session_id
),
wt AS (
    SELECT session_id, count(*) AS waits FROM v_waits GROUP BY session_id
)
SELECT s.session_id, s.source_format, s.title, s.model,
    coalesce(m.messages, 0) AS messages,
    coalesce(m.user_messages, 0) AS user_messages,
    coalesce(m.assistant_messages, 0) AS assistant_messages,
    coalesce(c.tool_calls, 0) AS tool_calls,
    coalesce(c.failed_tool_calls, 0) AS failed_tool_calls,
    coalesce(ab.aborts, 0) AS aborts,
    coalesce(t.checkins, 0) AS checkins,
    coalesce(t.errors, 0) AS errors,
    coalesce(cl.claims_premature, 0) AS claims_premature,
    coalesce(cl.claims_supported, 0) AS claims_supported,
    coalesce(cl.claims_unverified, 0) AS claims_unverified,
    coalesce(ta.polling_loops, 0) AS polling_loops,
    coalesce(wt.waits, 0) AS waits,
    coalesce(ta.polling_wait_s, 0) AS polling_wait_s,
    coalesce(ta.agent_working_s, 0) AS agent_working_s,
    coalesce(ca.campaigns, 0) AS campaigns,
    coalesce(ca.campaigns_met, 0) AS campaigns_met,
    coalesce(l.levers, 0) AS levers,
    m.first_ts, m.last_ts
FROM sessions s
LEFT JOIN msg m USING (session_id)
LEFT JOIN calls c USING (session_id)
LEFT JOIN tagc t USING (session_id)
LEFT JOIN claims cl USING (session_id)
LEFT JOIN v_time_accounting ta USING (session_id)
LEFT JOIN camp ca USING (session_id)
LEFT JOIN lev l USING (session_id)
LEFT JOIN ab USING (session_id)
LEFT JOIN wt USING (session_id)
"""


def create_views(
    con: duckdb.DuckDBPyConnection, idle_threshold_s: float = IDLE_THRESHOLD_S
) -> None:
    """Create (or replace) ``v_time_accounting``, ``v_session_summary`` and ``v_waits``."""
    from analytics.analysis.waits import create_waits_view

    select = time_accounting_select(float(idle_threshold_s))
    con.execute(f"CREATE OR REPLACE VIEW v_time_accounting AS {select}")
    create_waits_view(con)  # (the session summary counts them)
    con.execute(_SESSION_SUMMARY_SQL)
