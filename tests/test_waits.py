"""Waits (``v_waits``): the polls of one target taken together until one ends the wait."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from analytics.analysis.timeaccounting import create_views
from analytics.analysis.waits import session_waits
from analytics.store.migrations import migrate

SID = "claude_code:waits"


def _db(
    loops: list[tuple[int, str | None, str, float]],
    launches: tuple[int, ...] = (),
    checkins: tuple[int, ...] = (),
) -> duckdb.DuckDBPyConnection:
    """A session with polling loops (msg_idx, target, outcome, waited_s; a sleep of 30 s
    each), launches and check-ins at the given messages."""
    con = duckdb.connect(":memory:")
    migrate(con)
    for idx, target, outcome, waited in loops:
        con.execute(
            "INSERT INTO polling_loops (session_id, msg_idx, call_id, interval_s, "
            "max_iterations, target, outcome, waited_s) VALUES (?, ?, ?, 30, 1, ?, ?, ?)",
            [SID, idx, f"c{idx}", target, outcome, waited],
        )
    for idx in launches:
        con.execute(
            "INSERT INTO launches (session_id, msg_idx, call_id, engine, flags) "
            "VALUES (?, ?, ?, 'sglang', '{}')",
            [SID, idx, f"l{idx}"],
        )
    for idx in checkins:
        con.execute(
            "INSERT INTO tags (session_id, msg_idx, tag, score, source) "
            "VALUES (?, ?, 'user_checkin', 1.0, 'rules')",
            [SID, idx],
        )
    create_views(con)
    return con


def _waits(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """(first, last, polls, target, waited_s, outcome, checkins) of each wait."""
    return [
        (w.first_msg_idx, w.last_msg_idx, w.polls, w.target, w.waited_s, w.outcome, w.checkins)
        for w in session_waits(con, SID)
    ]


def test_polls_of_one_target_are_one_wait_until_one_ends_it() -> None:
    """Three looks at a log, the last finding it ready, with a check-in between them; a
    look at another target in between does not end the wait; the next look after
    "ready" starts a new one."""
    con = _db(
        [(2, "/root/s.log", "unknown", 31.0), (4, "nvidia-smi", "unknown", 8.0),
         (6, "/root/s.log", "unknown", 31.0), (9, "/root/s.log", "ready", 31.0),
         (14, "/root/s.log", "unknown", 31.0)],
        checkins=(7, 12),
    )
    assert _waits(con) == [
        (2, 9, 3, "/root/s.log", 93.0, "ready", 1),
        (4, 4, 1, "nvidia-smi", 8.0, "unknown", 0),
        (14, 14, 1, "/root/s.log", 31.0, "unknown", 0),
    ]


@pytest.mark.parametrize("ending", ["failed", "aborted", "timeout"])
def test_a_poll_that_ends_otherwise_ends_its_wait(ending: str) -> None:
    con = _db([(2, "/root/s.log", ending, 300.0), (5, "/root/s.log", "ready", 31.0)])
    assert [w[5] for w in _waits(con)] == [ending, "ready"]


def test_a_launch_between_two_polls_starts_a_new_wait() -> None:
    """The server was launched again: the polls after it wait on the new one, though its
    log has the same name (a launch at the poll's own message counts: ``nohup … &;
    sleep 30; tail``)."""
    con = _db(
        [(2, "/root/s.log", "unknown", 31.0), (4, "/root/s.log", "unknown", 31.0),
         (8, "/root/s.log", "unknown", 31.0)],
        launches=(0, 8),
    )
    assert [(w[0], w[2]) for w in _waits(con)] == [(2, 2), (8, 1)]


def test_loops_without_a_target_are_one_target_and_the_view_exists() -> None:
    con = _db([(1, None, "unknown", 10.0), (3, None, "ready", 10.0)])
    assert _waits(con) == [(1, 3, 2, None, 20.0, "ready", 0)]
    (n,) = con.execute("SELECT count(*) FROM v_waits WHERE session_id = ?", [SID]).fetchone()
    assert n == 1


def test_the_session_summary_counts_waits() -> None:
    con = _db([(2, "/root/s.log", "unknown", 31.0), (5, "/root/s.log", "ready", 31.0),
               (8, "/root/s.log", "unknown", 31.0)])
    con.execute(
        "INSERT INTO sessions (session_id, source_format, native_id, source_path) "
        "VALUES (?, 'claude_code', 'waits', '/x.jsonl')",
        [SID],
    )
    (waits,) = con.execute(
        "SELECT waits FROM v_session_summary WHERE session_id = ?", [SID]
    ).fetchone()
    assert waits == 2
