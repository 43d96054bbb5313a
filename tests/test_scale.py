"""The read commands and the report at the scale the tool is for: thousands of sessions,
sessions of tens of thousands of messages. Output is bounded, and says so ("first N of M")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from analytics.cli import app
from analytics.report import write_report
from analytics.store.migrations import migrate

runner = CliRunner()
BIG = "claude_code:big"
N_MESSAGES = 3000
N_SESSIONS = 120


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """N_SESSIONS small sessions and one of N_MESSAGES messages, every third message a
    check-in, every tenth assistant message a readiness claim, every other tool call a poll."""
    db = tmp_path_factory.mktemp("scale") / "big.duckdb"
    con = duckdb.connect(str(db))
    migrate(con)
    con.execute(
        """
        INSERT INTO sessions (session_id, source_format, native_id, source_path, title, started_at,
                              n_messages)
        SELECT 'codex:s' || i, 'codex', 's' || i, 's' || i || '.jsonl', 'small ' || i,
               TIMESTAMP '2026-01-01' + to_hours(i), 2
        FROM range($n) t(i)
        """,
        {"n": N_SESSIONS},
    )
    con.execute(
        "INSERT INTO sessions (session_id, source_format, native_id, source_path, title,"
        " started_at, n_messages) VALUES ($s, 'claude_code', 'big', 'big.jsonl', 'the long one',"
        " TIMESTAMP '2025-06-01', $n)",
        {"s": BIG, "n": N_MESSAGES},
    )
    con.execute(
        """
        INSERT INTO messages (session_id, msg_idx, source_id, role, ts, text, n_chars)
        SELECT $s, i, 'u' || i, CASE i % 3 WHEN 0 THEN 'user' WHEN 1 THEN 'assistant'
                                 ELSE 'tool' END,
               TIMESTAMP '2025-06-01' + to_seconds(i * 10),
               CASE i % 3 WHEN 0 THEN 'ok?' ELSE 'The server is up and ready. ' || i END, 10
        FROM range($n) t(i)
        """,
        {"s": BIG, "n": N_MESSAGES},
    )
    con.execute(
        """
        INSERT INTO tags (session_id, msg_idx, tag, score, source, evidence)
        SELECT $s, msg_idx, 'user_checkin', 1.0, 'rules', 'ok?' FROM messages
        WHERE session_id = $s AND role = 'user'
        """,
        {"s": BIG},
    )
    con.execute(
        """
        INSERT INTO readiness_claims (session_id, msg_idx, claim_text, subject, verdict, reason,
                                      evidence_msg_idx)
        SELECT $s, msg_idx, 'The server is up and ready.', 'server',
               CASE WHEN msg_idx = 2011 THEN 'premature' ELSE 'unverified' END,
               'no check', '[]'
        FROM messages WHERE session_id = $s AND role = 'assistant' AND msg_idx % 10 = 1
        """,
        {"s": BIG},
    )
    con.execute(
        """
        INSERT INTO tool_calls (session_id, msg_idx, call_id, tool, command, status)
        SELECT $s, msg_idx, 'c' || msg_idx, 'Bash', 'sleep 10; curl -s localhost:30000/health',
               'completed'
        FROM messages WHERE session_id = $s AND role = 'assistant'
        """,
        {"s": BIG},
    )
    con.execute(
        """
        INSERT INTO polling_loops (session_id, msg_idx, call_id, interval_s, outcome, waited_s)
        SELECT $s, msg_idx, call_id, 10, 'ready', msg_idx FROM tool_calls
        WHERE session_id = $s AND msg_idx % 6 = 1
        """,
        {"s": BIG},
    )
    con.close()
    return db


def _invoke(*args: str) -> str:
    res = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.output


# --- transcripts sessions ---------------------------------------------------------


def test_sessions_says_how_many_it_left_out(big_db: Path) -> None:
    out = _invoke("sessions", "--db", str(big_db), "--limit", "5")
    assert f"5 of {N_SESSIONS + 1} sessions" in out
    assert "--limit" in out
    every = _invoke("sessions", "--db", str(big_db), "--limit", "500")
    assert f"{N_SESSIONS + 1} sessions" in every and " of " not in every.splitlines()[0]


# --- transcripts show -------------------------------------------------------------


def _message_lines(out: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) u\d+ ", out, re.M)]


def test_show_prints_a_page_and_says_where_the_next_one_starts(big_db: Path) -> None:
    out = _invoke("show", "big", "--db", str(big_db))
    shown = _message_lines(out)
    assert 0 < len(shown) <= 200 and shown[0] == 0
    assert f"of {N_MESSAGES:,} messages" in out
    assert f"--from {shown[-1] + 1}" in out
    page = _invoke("show", "big", "--db", str(big_db), "--from", "2990", "--limit", "50")
    assert _message_lines(page) == list(range(2990, 3000))
    assert "--from" not in page  # the last page: nothing left to point to


def test_show_tags_pages_over_the_tagged_messages(big_db: Path) -> None:
    out = _invoke("show", "big", "--tags", "--db", str(big_db), "--limit", "10")
    shown = _message_lines(out)
    assert shown == list(range(0, 30, 3))
    assert f"10 of {N_MESSAGES // 3:,} tagged messages" in out
    assert "--from 28" in out


def test_show_limit_0_prints_everything(big_db: Path) -> None:
    out = _invoke("show", "big", "--tags", "--db", str(big_db), "--limit", "0")
    assert len(_message_lines(out)) == N_MESSAGES // 3
    assert "--from" not in out


# --- transcripts report -----------------------------------------------------------


def _seconds(duration: str) -> int:
    """Seconds of a report's duration ("1h 02m 03s", "50m 00s")."""
    parts = dict((unit, int(n)) for n, unit in re.findall(r"(\d+)([hms])", duration))
    return parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)


def test_report_of_a_long_session_lists_a_bounded_number_of_claims_and_loops(
    big_db: Path, tmp_path: Path
) -> None:
    con = duckdb.connect(str(big_db), read_only=True)
    md = write_report(con, BIG, tmp_path / "r.md").read_text()
    claims = md.split("## Readiness claims")[1].split("\n## ")[0]
    polls = md.split("## Polling and aborts")[1].split("\n## ")[0]
    assert "100 readiness claims: 1 premature, 0 supported, 99 unverified" in md
    shown = claims.count("\n### ")
    assert 0 < shown <= 50
    assert f"_{shown} of 100 claims" in claims
    assert "2011" in claims  # the premature claim is always shown
    assert "500 polling loops in 500 waits" in polls  # each poll found the server ready
    rows = [line for line in polls.splitlines() if re.match(r"\| \d+ \| msg ", line)]
    assert 0 < len(rows) <= 250
    assert f"_{len(rows)} of 500 waits" in polls
    waits = [_seconds(r.split("|")[7]) for r in rows]
    assert min(waits) >= 3000 - 6 * len(rows)  # the longest waits are the ones listed
    assert len(md) < 60_000, len(md)


# --- the Session page's queries ---------------------------------------------------


def _profiled(db: Path, profile: Path, fn: Any, *args: Any) -> tuple[Any, set[str]]:
    """``fn(con, *args)`` and the tables its query scanned, from DuckDB's JSON profile
    (written when the query's result is closed: here, with the connection)."""
    con = duckdb.connect(str(db), read_only=True)
    con.execute(f"SET enable_profiling = 'json'; SET profiling_output = '{profile}'")
    result = fn(con, *args)
    con.close()
    found: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        info = node.get("extra_info")
        if isinstance(info, dict) and isinstance(info.get("Table"), str):
            found.add(info["Table"])
        for child in node.get("children", []):
            walk(child)

    walk(json.loads(profile.read_text()))
    return result, found


def test_an_unfiltered_session_page_reads_no_tool_output(big_db: Path, tmp_path: Path) -> None:
    """Paging through a session without a search reads messages (and their tags), never
    every tool call's output: the filters that are off are not in the query at all."""
    from analytics.explore.stream import count_matching, message_window, previous_start

    p = tmp_path / "profile.json"
    window, read = _profiled(big_db, p, message_window, BIG, 100, 50)
    assert len(window) == 50 and read == {"messages", "tags"}
    assert _profiled(big_db, p, count_matching, BIG) == (N_MESSAGES, {"messages"})
    assert _profiled(big_db, p, previous_start, BIG, 100, 50) == (50, {"messages"})
    assert _profiled(big_db, p, count_matching, BIG, ("user_checkin",)) == (
        N_MESSAGES // 3,
        {"messages", "tags"},
    )
    assert _profiled(big_db, p, count_matching, BIG, (), "OK?") == (
        N_MESSAGES // 3,
        {"messages", "tool_calls"},
    )


# --- time accounting (v_time_accounting, the report) ------------------------------


def test_time_accounting_plans_no_per_row_look_back(big_db: Path) -> None:
    """Check-in latency and time lost after an abort look back (forward) to the agent's
    activity with window functions: as correlated subqueries, one per check-in over the
    whole session, they took 17 s on a 100k-message session (the report, every query of
    v_session_summary, and more than the SQL console's 10 s)."""
    from analytics.analysis.timeaccounting import time_accounting_select

    con = duckdb.connect(str(big_db), read_only=True)
    explained = con.execute("EXPLAIN " + time_accounting_select()).fetchall()
    plan = "\n".join(str(r[1]) for r in explained)
    assert "DELIM" not in plan  # DuckDB's decorrelated subquery: DELIM_JOIN / DELIM_SCAN
    row = (
        con.execute(f"SELECT * FROM ({time_accounting_select()}) WHERE session_id = ?", [BIG])
        .df()
        .iloc[0]
    )
    assert row["checkins"] == N_MESSAGES // 3
    assert row["checkin_latency_avg_s"] == pytest.approx(10)
    assert row["checkin_latency_max_s"] == pytest.approx(10)
