"""Codex unified exec processes that keep running: ``exec_command`` returns after its yield time
with ``Process running with session ID N`` in its header, and the agent then polls the process
with ``write_stdin`` (``{"session_id": N, "chars": ""}``) until a header says ``Process exited
with code N``. Each case is a rollout written as Codex writes one and ingested into a database,
so what is checked is what a user of the tables sees."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from _codex_rollouts import event, exec_header, write_rollout
from _samples import of, run, table_rows

from analytics.analysis import run as analysis_run
from analytics.analysis.tagging import background_rechecks, exec_session_loops
from analytics.ingest import ingest
from analytics.models import Message, MessageContext, ToolCall, ToolResult
from analytics.sources import codex

SID = "0199a000-0000-7000-8000-0000000000dd"
LAUNCH = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000 --tp 2"


def header(wall: float, exit_code: int | None = None, session: int | None = None) -> str:
    """A unified exec header: the process exited, or runs on in ``session``."""
    return exec_header(f"{wall:.4f}", exit_code, session, chunk="9a1b2c")


def rollout(tmp_path: Path, items: list[tuple[int, dict[str, object]]]) -> Path:
    return write_rollout(tmp_path, SID, "2026-02-01", items)


def exec_command(call_id: str, cmd: str) -> dict[str, object]:
    args = {"cmd": cmd, "yield_time_ms": 10000, "max_output_tokens": 6000}
    return {"type": "function_call", "name": "exec_command",
            "arguments": json.dumps(args), "call_id": call_id}


def write_stdin(call_id: str, session: int, chars: str = "") -> dict[str, object]:
    args = {"session_id": session, "chars": chars, "yield_time_ms": 30000}
    return {"type": "function_call", "name": "write_stdin",
            "arguments": json.dumps(args), "call_id": call_id}


def output(call_id: str, text: str) -> dict[str, object]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


STARTING = "[2026-02-01 09:00:12] Load weight begin. avail mem=70.12 GB\n"
CRASHED = (
    "Traceback (most recent call last):\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)
READY = "[2026-02-01 09:01:40] The server is fired up and ready to roll!\n"


def launch_then_polls(*polls: tuple[float, int | None, str]) -> list[tuple[int, dict[str, object]]]:
    """``exec_command`` of the launch (left running in session 4242), then a ``write_stdin``
    poll for each (wall time, exit code or None while running, what it printed)."""
    items: list[tuple[int, dict[str, object]]] = [
        (1, exec_command("call_launch", LAUNCH)),
        (11, output("call_launch", header(10.0, session=4242) + STARTING)),
    ]
    at = 12
    for n, (wall, exit_code, printed) in enumerate(polls):
        state = {"exit_code": exit_code} if exit_code is not None else {"session": 4242}
        items.append((at, write_stdin(f"call_poll{n}", 4242)))
        at += int(wall)
        items.append((at, output(f"call_poll{n}", header(wall, **state) + printed)))
        at += 1
    return items


def stored(tmp_path: Path, items: list[tuple[int, dict[str, object]]]) -> duckdb.DuckDBPyConnection:
    db = tmp_path / "t.duckdb"
    summary = ingest([rollout(tmp_path, items)], db=db)
    assert not summary.errors
    return duckdb.connect(str(db), read_only=True)


# --------------------------------------------------------------------------- the parser


def test_a_call_that_returned_while_its_process_runs_on_is_running(tmp_path: Path) -> None:
    path = rollout(tmp_path, launch_then_polls((30.0, None, ""), (12.5, 0, "done\n")))
    items, _ = run(codex, path)
    calls = {c.call_id: c for c in of(items, ToolCall)}
    launch, poll0, poll1 = calls["call_launch"], calls["call_poll0"], calls["call_poll1"]
    assert (launch.status, launch.exit_code) == ("running", None)
    assert launch.result_msg_idx is not None and launch.ended_at is not None  # it returned
    assert (poll0.status, poll0.exit_code) == ("running", None)
    assert (poll1.status, poll1.exit_code) == ("completed", 0)


def test_a_poll_that_sees_a_non_zero_exit_is_an_error(tmp_path: Path) -> None:
    con = stored(tmp_path, launch_then_polls((30.0, None, STARTING), (4.0, 1, CRASHED)))
    rows = con.execute(
        "SELECT call_id, status, exit_code FROM tool_calls ORDER BY msg_idx"
    ).fetchall()
    assert rows == [
        ("call_launch", "error", 1),  # (the exit the poll saw is the launch's: see below)
        ("call_poll0", "completed", None),
        ("call_poll1", "error", 1),
    ]
    poll_msg = con.execute(
        "SELECT result_msg_idx FROM tool_calls WHERE call_id = 'call_poll1'"
    ).fetchone()
    errors = con.execute("SELECT msg_idx FROM tags WHERE tag = 'error'").fetchall()
    assert poll_msg is not None and errors == [(poll_msg[0],)]  # where the failure was seen


# --------------------------------------------------------------------------- the exit, written back


def test_the_exit_a_later_poll_prints_is_the_exit_of_the_command(tmp_path: Path) -> None:
    """The launch is no longer running once a poll saw its process exit: it has the exit
    code, and the status it means; the polls that saw it run are completed. What each call
    returned (its output, its end, its result message) stays."""
    con = stored(tmp_path, launch_then_polls((30.0, None, STARTING), (20.0, 0, "bye\n")))
    rows = con.execute(
        "SELECT call_id, status, exit_code, result_msg_idx, duration_s, output FROM tool_calls "
        "ORDER BY msg_idx"
    ).fetchall()
    assert [r[:3] for r in rows] == [
        ("call_launch", "completed", 0),
        ("call_poll0", "completed", None),
        ("call_poll1", "completed", 0),
    ]
    assert rows[0][3:] == (1, 10.0, header(10.0, session=4242) + STARTING)
    assert con.execute("SELECT count(*) FROM tool_calls WHERE status = 'running'").fetchone() == (0,)


def test_a_process_never_seen_to_exit_stays_running(tmp_path: Path) -> None:
    con = stored(tmp_path, launch_then_polls((30.0, None, STARTING), (20.0, None, READY)))
    rows = con.execute("SELECT call_id, status, exit_code FROM tool_calls ORDER BY msg_idx").fetchall()
    assert rows == [
        ("call_launch", "running", None),
        ("call_poll0", "running", None),
        ("call_poll1", "running", None),
    ]


def test_exec_command_end_of_a_call_left_running_gives_its_exit(tmp_path: Path) -> None:
    """Codex emits ``exec_command_end`` for the ``exec_command`` (its call id, the process
    id of its session) when the process exits, polled or not."""
    items = [
        (1, exec_command("call_build", "make -j8")),
        (11, output("call_build", header(10.0, session=77) + "cc -c a.c\n")),
        (40, event({"type": "exec_command_end", "call_id": "call_build", "process_id": "77",
                    "exit_code": 2, "duration": {"secs": 39, "nanos": 0}})),
    ]
    con = stored(tmp_path, items)
    rows = con.execute("SELECT call_id, status, exit_code, result_msg_idx FROM tool_calls").fetchall()
    assert rows == [("call_build", "error", 2, 1)]
    con.close()

    grown = tmp_path / "grown"  # the event in a later ingest than the call's output
    grown.mkdir()
    path = rollout(grown, items)
    lines = path.read_bytes().splitlines(keepends=True)
    for n in (len(lines) - 1, len(lines)):
        path.write_bytes(b"".join(lines[:n]))
        assert not ingest([path], db=grown / "t.duckdb").errors
    with duckdb.connect(str(grown / "t.duckdb"), read_only=True) as later:
        assert later.execute(
            "SELECT call_id, status, exit_code, result_msg_idx FROM tool_calls"
        ).fetchall() == rows


def test_typing_into_a_process_that_then_exits_ends_it(tmp_path: Path) -> None:
    """Any ``write_stdin`` of the session shows the exit, not only an empty poll."""
    items = [
        (1, exec_command("call_py", "python3 -i")),
        (2, output("call_py", header(1.0, session=9) + ">>> ")),
        (3, write_stdin("call_w", 9, chars="exit()\n")),
        (4, output("call_w", header(0.3, exit_code=0))),
    ]
    parsed, _ = run(codex, rollout(tmp_path, items))
    (result,) = of(parsed, ToolResult)
    assert (result.call_id, result.status, result.exit_code, result.result_msg_idx) == (
        "call_py", "completed", 0, 1
    )


def test_a_session_id_used_again_is_another_process(tmp_path: Path) -> None:
    """A new process in a session id still open: the one before ended unseen (no exit
    code known: it stays running); the exit then seen is the new one's."""
    items = [
        (1, exec_command("call_a", "sleep 600")),
        (11, output("call_a", header(10.0, session=5))),
        (12, exec_command("call_b", "sleep 1; false")),
        (22, output("call_b", header(10.0, session=5))),
        (23, write_stdin("call_w", 5)),
        (25, output("call_w", header(2.0, exit_code=1))),
    ]
    con = stored(tmp_path, items)
    rows = con.execute("SELECT call_id, status, exit_code FROM tool_calls ORDER BY msg_idx").fetchall()
    assert rows == [("call_a", "running", None), ("call_b", "error", 1), ("call_w", "error", 1)]


# --------------------------------------------------------------------------- cut anywhere

_COMPARED = {
    "tool_calls": "*",
    "polling_loops": "*",
    "tags": "*",
    "launches": "*",
    "server_events": "*",
    "measurements": "*",
}


def _tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, _COMPARED)


def _long_wait() -> list[tuple[int, dict[str, object]]]:
    """A launch polled seven times (with a sleep between two of the polls) until it crashed."""
    items = launch_then_polls(
        *[(20.0, None, STARTING)] * 3, (15.0, None, READY), *[(20.0, None, "")] * 2, (4.0, 1, CRASHED)
    )
    items.insert(5, (45, exec_command("call_sleep", "sleep 30")))
    items.insert(6, (46, output("call_sleep", header(30.0, exit_code=0))))
    return items


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_a_run_of_polls_is_one_loop_in_chunks_of_any_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    whole = tmp_path / "whole"
    whole.mkdir()
    expected = _tables(_ingested(whole, _long_wait()))
    assert [r[2:] for r in expected["polling_loops"]] == [
        ("call_poll6", None, None, None, LAUNCH, None, None, "failed", 119.0)
    ]
    monkeypatch.setattr(analysis_run, "CHUNK", chunk)
    cut = tmp_path / "cut"
    cut.mkdir()
    assert _tables(_ingested(cut, _long_wait())) == expected


def test_a_run_of_polls_is_one_loop_however_the_file_grew(tmp_path: Path) -> None:
    """Ingested again after each line the rollout grows by: the polls of the later ingests
    continue the run, and their exits end the launch stored by the first."""
    whole = tmp_path / "whole"
    whole.mkdir()
    expected = _tables(_ingested(whole, _long_wait()))
    grown = tmp_path / "grown"
    grown.mkdir()
    path = rollout(grown, _long_wait())
    lines = path.read_bytes().splitlines(keepends=True)
    db = grown / "t.duckdb"
    for n in range(2, len(lines) + 1):
        path.write_bytes(b"".join(lines[:n]))
        assert not ingest([path], db=db).errors
    assert _tables(db) == expected


def _ingested(folder: Path, items: list[tuple[int, dict[str, object]]]) -> Path:
    db = folder / "t.duckdb"
    assert not ingest([rollout(folder, items)], db=db).errors
    return db


# --------------------------------------------------------------------------- polling loops


def test_polls_of_a_launch_that_crashed_are_a_failed_loop(tmp_path: Path) -> None:
    con = stored(tmp_path, launch_then_polls((30.0, None, STARTING), (4.0, 1, CRASHED)))
    loops = con.execute(
        "SELECT call_id, target, outcome, waited_s FROM polling_loops"
    ).fetchall()
    assert loops == [("call_poll1", LAUNCH, "failed", 34.0)]
    tagged = con.execute(
        "SELECT t.msg_idx FROM tags t JOIN tool_calls c ON c.msg_idx = t.msg_idx "
        "WHERE t.tag = 'polling_loop' AND c.tool = 'write_stdin' ORDER BY 1"
    ).fetchall()
    assert len(tagged) == 2  # each poll is a re-check of the background job


def test_a_launch_left_running_is_a_launch(tmp_path: Path) -> None:
    con = stored(tmp_path, launch_then_polls((30.0, None, READY)))
    launches = con.execute("SELECT call_id, engine, model FROM launches").fetchall()
    assert launches == [("call_launch", "sglang", "Qwen/Qwen3-8B")]


def test_a_server_that_printed_ready_while_running_is_a_ready_loop(tmp_path: Path) -> None:
    con = stored(tmp_path, launch_then_polls((30.0, None, STARTING), (20.0, None, READY)))
    loops = con.execute("SELECT call_id, outcome, waited_s FROM polling_loops").fetchall()
    assert loops == [("call_poll1", "ready", 50.0)]


def test_a_job_whose_last_poll_saw_exit_0_is_ready(tmp_path: Path) -> None:
    items = [
        (1, exec_command("call_build", "cargo build --release")),
        (11, output("call_build", header(10.0, session=17) + "Compiling foo\n")),
        (12, write_stdin("call_w", 17)),
        (40, output("call_w", header(27.5, exit_code=0) + "Finished release\n")),
    ]
    (loop,) = exec_session_loops(_contexts(tmp_path, items))
    assert (loop.call_id, loop.target, loop.outcome, loop.waited_s) == (
        "call_w", "cargo build --release", "ready", 27.5
    )


def test_typing_into_a_process_is_no_poll(tmp_path: Path) -> None:
    items = [
        (1, exec_command("call_py", "python3 -i")),
        (2, output("call_py", header(1.0, session=9) + ">>> ")),
        (3, write_stdin("call_w", 9, chars="print(1)\n")),
        (4, output("call_w", header(0.3, session=9) + "1\n>>> ")),
    ]
    batch = _contexts(tmp_path, items)
    assert exec_session_loops(batch) == []
    assert background_rechecks(batch) == {}


def test_a_poll_without_its_exec_command_names_the_session(tmp_path: Path) -> None:
    items = [
        (1, write_stdin("call_w", 55)),
        (9, output("call_w", header(8.0, session=55) + "still going\n")),
    ]
    (loop,) = exec_session_loops(_contexts(tmp_path, items))
    assert (loop.target, loop.outcome, loop.waited_s) == ("exec session 55", "unknown", 8.0)


def _call_at(t0: datetime, i: int, tool: str, start: float, end: float, **kw: str) -> ToolCall:
    """A completed call of message ``i``, ``start`` to ``end`` seconds after ``t0``."""
    return ToolCall(session_id="s", msg_idx=i, call_id=f"c{i}", tool=tool, status="completed",
                    started_at=t0 + timedelta(seconds=start),
                    ended_at=t0 + timedelta(seconds=end), **kw)


def test_claude_code_rechecks_of_a_background_job_are_one_loop() -> None:
    """A server started in the background, then sleeps and BashOutput re-checks until its
    log says it is up: one loop at the last re-check, on the command started, ready by
    the milestone the re-checks printed, waited from the first sleep to the last re-check.
    A single re-check is no loop."""
    t0 = datetime(2026, 3, 10, 9, 0, 0)

    def call(i: int, tool: str, start: float, end: float, **kw: str) -> ToolCall:
        return _call_at(t0, i, tool, start, end, **kw)

    serve = "vllm serve m --port 8100"
    recheck = '{"bash_id": "7f3a21"}'
    calls = [
        call(0, "Bash", 0, 0.4, command=serve,
             output="Command running in background with ID: 7f3a21"),
        call(1, "Bash", 3, 33, command="sleep 30", output=""),
        call(2, "BashOutput", 35, 35.5, input=recheck,
             output="<status>running</status>\n\n<stdout>\nINFO Starting to load model m...\n</stdout>"),
        call(3, "Bash", 38, 83, command="sleep 45", output=""),
        call(4, "BashOutput", 85, 85.5, input=recheck,
             output="<status>running</status>\n\n<stdout>\n(APIServer pid=1) INFO:     "
                    "Application startup complete.\n</stdout>"),
        call(5, "Bash", 88, 88.2, command="curl -s localhost:8100/health", output="200"),
        call(6, "BashOutput", 90, 90.5, input=recheck, output="<status>running</status>"),
    ]
    batch = [
        MessageContext(message=Message(session_id="s", msg_idx=c.msg_idx, source_id=f"m{c.msg_idx}",
                                       role="assistant", text=""), calls=[c])
        for c in calls
    ]
    (loop,) = exec_session_loops(batch)
    assert (loop.msg_idx, loop.call_id, loop.target, loop.outcome, loop.waited_s) == (
        4, "c4", serve, "ready", 82.5
    )
    assert sorted(background_rechecks(batch)) == [2, 4]


@pytest.mark.parametrize("exit_code,outcome", [(0, "ready"), (2, "failed")])
def test_claude_code_rechecks_of_a_finished_job_end_as_its_exit_code_and_sleep_between(
    exit_code: int, outcome: str
) -> None:
    """A build started in the background, re-checked after each ``sleep 60`` until the
    re-check shows the job over (``<status>completed</status>`` / ``failed`` with its
    ``<exit_code>``): the exit code decides, and the loop polled every 60 s."""
    t0 = datetime(2026, 5, 2, 8, 0, 0)

    def call(i: int, tool: str, start: float, end: float, **kw: str) -> ToolCall:
        return _call_at(t0, i, tool, start, end, **kw)

    build = "cd ~/src/xformers && MAX_JOBS=8 python setup.py develop"
    recheck = '{"bash_id": "a91c0e"}'
    status = "completed" if exit_code == 0 else "failed"
    calls = [
        call(0, "Bash", 0, 0.5, command=build, output="Command running in background with ID: a91c0e"),
        call(1, "Bash", 2, 62, command="sleep 60", output=""),
        call(2, "BashOutput", 63, 63.4, input=recheck,
             output="<status>running</status>\n\n<stdout>\nrunning build_ext\n</stdout>"),
        call(3, "Bash", 65, 125, command="sleep 60", output=""),
        call(4, "BashOutput", 126, 126.3, input=recheck,
             output=f"<status>{status}</status>\n\n<exit_code>{exit_code}</exit_code>\n\n"
                    "<stdout>\nrunning build_ext\n</stdout>"),
    ]
    batch = [
        MessageContext(message=Message(session_id="s", msg_idx=c.msg_idx, source_id=f"m{c.msg_idx}",
                                       role="assistant", text=""), calls=[c])
        for c in calls
    ]
    (loop,) = exec_session_loops(batch)
    assert (loop.target, loop.interval_s, loop.outcome, loop.waited_s) == (build, 60.0, outcome, 124.3)


def _contexts(tmp_path: Path, items: list[tuple[int, dict[str, object]]]) -> list[MessageContext]:
    """The parsed rollout as the analysers see it: each message with the calls it makes."""
    parsed, _ = run(codex, rollout(tmp_path, items))
    calls = of(parsed, ToolCall)
    return [
        MessageContext(message=m, calls=[c for c in calls if c.msg_idx == m.msg_idx])
        for m in of(parsed, Message)
    ]
