"""Waits: the polling loops of one target taken together, as the SQL view ``v_waits``.

An agent seldom waits with one loop. It runs ``sleep 60; tail -5 bench.log`` again and
again until the benchmark is done, or a loop times out and it starts another: what the
user lived through is one wait of several polls. A wait is the run of a session's
polling loops on one target (the log, URL or process a loop checks) until one of them
ends it — ``ready``, ``failed``, ``aborted`` or ``timeout`` — or a server is launched
between two of them (a relaunch starts a new wait on the same log). Polls of other
targets in between do not end it (an agent watching a prefill and a decode log in turn
waits on both). Loops without a target are one target among the others.

One row per wait: its first and last poll, how many polls, their sleep interval range,
the time waited in all of them, how the last one ended, and the user's check-ins between
the first poll and the last (``user_checkin`` tags): the "ok?" typed while the agent
polled.
"""

from __future__ import annotations

from typing import NamedTuple

import duckdb

ENDING_OUTCOMES = ("ready", "failed", "aborted", "timeout")
"""Outcomes of a polling loop after which the next poll of its target is a new wait."""

WAITS_SELECT = f"""
WITH ordered AS (
    SELECT p.*,
           lag(p.msg_idx) OVER w AS prev_idx,
           lag(p.outcome) OVER w AS prev_outcome,
           row_number() OVER w AS n
    FROM polling_loops p
    WINDOW w AS (PARTITION BY p.session_id, p.target ORDER BY p.msg_idx, p.call_id)
), marked AS (
    SELECT o.*,
           CASE WHEN o.prev_idx IS NULL
                  OR list_contains({list(ENDING_OUTCOMES)}, o.prev_outcome)
                  OR EXISTS (SELECT 1 FROM launches la
                             WHERE la.session_id = o.session_id
                               AND la.msg_idx > o.prev_idx AND la.msg_idx <= o.msg_idx)
                THEN 1 ELSE 0 END AS starts
    FROM ordered o
), runs AS (
    SELECT m.*, sum(m.starts) OVER (PARTITION BY m.session_id, m.target ORDER BY m.n
                                    ROWS UNBOUNDED PRECEDING) AS run
    FROM marked m
), grouped AS (
    SELECT session_id, target, run,
           min(msg_idx) AS first_msg_idx, max(msg_idx) AS last_msg_idx,
           count(*) AS polls,
           min(interval_s) AS interval_min_s, max(interval_s) AS interval_max_s,
           sum(waited_s) AS waited_s,
           arg_max(outcome, n) AS outcome
    FROM runs
    GROUP BY session_id, target, run
)
SELECT g.session_id,
       row_number() OVER (PARTITION BY g.session_id
                          ORDER BY g.first_msg_idx, g.target NULLS FIRST) AS wait_no,
       g.first_msg_idx, g.last_msg_idx, g.polls, g.target,
       g.interval_min_s, g.interval_max_s, g.waited_s, g.outcome,
       (SELECT count(DISTINCT t.msg_idx) FROM tags t
        WHERE t.session_id = g.session_id AND t.tag = 'user_checkin'
          AND t.msg_idx BETWEEN g.first_msg_idx AND g.last_msg_idx) AS checkins
FROM grouped g
"""
"""The query of ``v_waits`` (run as it is where the view may be missing: a database read
only, or written by an older version)."""


def create_waits_view(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) ``v_waits``."""
    con.execute(f"CREATE OR REPLACE VIEW v_waits AS {WAITS_SELECT}")


class Wait(NamedTuple):
    """One row of ``v_waits`` (its session left out)."""

    wait_no: int
    first_msg_idx: int
    last_msg_idx: int
    polls: int
    target: str | None
    interval_min_s: float | None
    interval_max_s: float | None
    waited_s: float | None
    outcome: str
    checkins: int


def session_waits(con: duckdb.DuckDBPyConnection, session_id: str) -> list[Wait]:
    """The waits of one session, in order."""
    rows = con.execute(
        f"SELECT {', '.join(Wait._fields)} FROM ({WAITS_SELECT}) "
        "WHERE session_id = ? ORDER BY wait_no",
        [session_id],
    ).fetchall()
    return [Wait(*row) for row in rows]
