"""Analysis while parsing (``ingest_load.AnalysisStream``): a long file's session is analysed
chunk by chunk as its rows are stored, and the database ends exactly as with one pass after
the parse, also when a tool result comes back after its message was analysed."""

from __future__ import annotations

import json
import multiprocessing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
from _samples import needs_worker, submitted_jobs, table_rows

from analytics import ingest as ingest_module
from analytics import ingest_load
from analytics.analysis import run
from analytics.analysis.rows import StoredRecords, contexts_from_tables, load_tables, with_calls
from analytics.analysis.tagging import worker as tag_worker
from analytics.ingest import ingest
from analytics.models import Message, MessageContext, ToolCall
from analytics.samples_path import samples_dir
from analytics.store.db import connect
from analytics.store.writer import append_stored

SAMPLES = samples_dir()
TABLES = (
    "tags", "polling_loops", "launches", "server_events", "measurements", "campaigns",
    "levers", "readiness_claims",
)
NEVER = 1 << 30


def _analysis(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, TABLES)


@pytest.fixture
def streams(monkeypatch: pytest.MonkeyPatch, fork_at_any_size: None) -> list[dict[str, Any]]:
    """Small flushes and chunks, so that sample-sized sessions are streamed; records how
    each stream ended."""
    monkeypatch.setattr(ingest_load, "PREFORK_BYTES", 0)  # a worker forked for every file
    monkeypatch.setattr(ingest_load, "FLUSH_EVERY", 60)
    monkeypatch.setattr(run, "CHUNK", 20)
    seen: list[dict[str, Any]] = []
    real = ingest_load.AnalysisStream.finish

    def finish(self: Any, start: int, extra: list[int], meanwhile: Any = None, **kw: Any) -> None:
        seen.append({"session": self.session_id, "late": self.late, "upto": self.run.next_lo})
        real(self, start, extra, meanwhile, **kw)

    monkeypatch.setattr(ingest_load.AnalysisStream, "finish", finish)
    return seen


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Tagging workers started (one item each), the worker switched on."""
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "1")
    started: list[int] = []
    real = tag_worker.TagWorker.__init__

    def init(self: tag_worker.TagWorker, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        started.append(1)

    monkeypatch.setattr(tag_worker.TagWorker, "__init__", init)
    return started


def _reference(tmp_path: Path, paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    with monkeypatch.context() as m:
        m.setattr(ingest_load, "STREAM_LAG", NEVER)  # never streams
        m.setenv(tag_worker.ENV_SWITCH, "0")  # and tags here: one process, one pass
        db = tmp_path / "reference.duckdb"
        assert not ingest(paths, db=db, build_index=False).errors
    return db


def _streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: Path, lag: int
) -> tuple[dict[str, list[tuple[object, ...]]], Path]:
    """The analysis one pass stores of ``session``, and the database of an ingest of it
    streamed with ``STREAM_LAG`` ``lag``."""
    reference = _analysis(_reference(tmp_path, [session], monkeypatch))
    monkeypatch.setattr(ingest_load, "STREAM_LAG", lag)
    db = tmp_path / "streamed.duckdb"
    assert not ingest([session], db=db, build_index=False).errors
    return reference, db


@pytest.mark.parametrize("worker_on", [pytest.param("1", marks=needs_worker), "0"])
@pytest.mark.parametrize("lag", [0, 7, 40])
def test_streamed_analysis_stores_what_one_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    lag: int, worker_on: str,
) -> None:
    reference = _analysis(_reference(tmp_path, [SAMPLES], monkeypatch))
    monkeypatch.setenv(tag_worker.ENV_SWITCH, worker_on)
    monkeypatch.setattr(ingest_load, "STREAM_LAG", lag)
    submitted = submitted_jobs(monkeypatch)
    db = tmp_path / "streamed.duckdb"
    assert not ingest([SAMPLES], db=db, build_index=False).errors
    assert len(streams) >= 3  # most sample sessions were streamed
    assert any(s["upto"] > 0 for s in streams)
    assert bool(submitted) is (worker_on == "1")  # the worker tagged, or none was there
    assert _analysis(db) == reference
    assert not multiprocessing.active_children()  # every worker stopped, used or not


@needs_worker
@pytest.mark.parametrize("facts_backlog", [0, 10**6])
def test_a_chunk_s_facts_are_the_same_whichever_process_finds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    facts_backlog: int,
) -> None:
    """The worker finds a chunk's polling loops and stated numbers and goals with its tags
    unless it is behind, when the ingest process finds them: all in one process or all in
    the other, the analysis is the one pass's."""
    from analytics.analysis.rows import unpack

    reference = _analysis(_reference(tmp_path, [SAMPLES], monkeypatch))
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "1")
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 0)
    monkeypatch.setattr(run.MessageRun, "FACTS_BACKLOG", facts_backlog)
    submitted = submitted_jobs(monkeypatch)
    db = tmp_path / "streamed.duckdb"
    assert not ingest([SAMPLES], db=db, build_index=False).errors
    asked = {unpack(job, 4)[2].schema.metadata[run.FACTS_KEY] for job in submitted}  # type: ignore[arg-type]
    assert len(streams) >= 3 and len(submitted) > 10
    assert asked == ({b"0"} if facts_backlog == 0 else {b"1"})
    assert _analysis(db) == reference


@needs_worker
def test_a_worker_forked_for_a_short_file_is_stopped(
    tmp_path: Path, streams: list[dict[str, Any]], forked: list[int]
) -> None:
    session = tmp_path / "short.jsonl"
    _late_result_session(session, 12)  # far too short to stream
    assert not ingest([session], db=tmp_path / "s.duckdb", build_index=False).errors
    assert streams == []
    assert forked  # (``PREFORK_BYTES`` is 0: forked before the parse)
    assert not multiprocessing.active_children()


def _late_result_session(path: Path, n: int) -> None:
    """A Claude Code session whose first tool call's result comes back after ``n`` messages
    (a long-running job), among plain turns with calls answered at once."""
    def line(i: int, kind: str, content: Any, **extra: Any) -> str:
        rec = {
            "type": kind, "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
            "sessionId": "late-result", "timestamp": f"2026-05-14T12:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "message": {"role": kind, "content": content}, **extra,
        }
        return json.dumps(rec)

    out = [line(0, "assistant", [
        {"type": "text", "text": "Starting the server in the foreground; it takes a while."},
        {"type": "tool_use", "id": "slow", "name": "Bash", "input": {
            "command": "python -m sglang.launch_server --model-path /m --port 30000"}},
    ])]
    i = 1
    while i < n:
        out.append(line(i, "user", "ok?"))
        out.append(line(i + 1, "assistant", [
            {"type": "text", "text": "Checking the log again."},
            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "tail -5 /tmp/s.log"}},
        ]))
        out.append(line(i + 2, "user", [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "Loading weights"}]))
        i += 3
    out.append(line(i, "user", [{"type": "tool_result", "tool_use_id": "slow", "content":
        "The server is fired up and ready to roll!"}]))
    path.write_text("\n".join(out) + "\n")


def test_a_result_that_comes_back_late_is_analysed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]]
) -> None:
    session = tmp_path / "late.jsonl"
    _late_result_session(session, 240)
    reference, db = _streamed(tmp_path, monkeypatch, session, 5)
    assert [s["late"] for s in streams] == [True]
    assert _analysis(db) == reference
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(  # the launch made in message 0 was seen, with its output
            "SELECT count(*) FROM launches WHERE msg_idx = 0").fetchone() == (1,)


CODEX_ROLLOUT = (
    Path(__file__).parent / "fixtures" / "codex"
    / "rollout-2025-10-01T10-00-00-0199a000-0000-7000-8000-000000000001.jsonl"
)


def _completed_after_the_parse(path: Path) -> None:
    """The codex fixture's session (without its malformed lines) with 150 plain turns
    before its calls: long enough to stream. The exit code of its last call comes after
    the call's output: an orphan result completes the call after the parse, in messages
    the stream has not analysed yet."""
    lines = CODEX_ROLLOUT.read_text().splitlines()
    filler = []
    for i in range(150):
        role, kind = ("user", "input_text") if i % 2 else ("assistant", "output_text")
        filler.append(json.dumps({
            "timestamp": f"2025-10-01T09:{i // 60:02d}:{i % 60:02d}.000Z",
            "type": "response_item",
            "payload": {"type": "message", "role": role,
                        "content": [{"type": kind, "text": f"step {i}: 1200 tok/s"}]},
        }))
    path.write_text("\n".join(lines[:8] + filler + lines[8:36]) + "\n")


def test_a_call_completed_after_the_parse_is_read_from_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]]
) -> None:
    """The rest of a streamed session is analysed as the database holds it once orphan
    results are applied, not as the flushes stored it."""
    session = tmp_path / CODEX_ROLLOUT.name
    _completed_after_the_parse(session)
    reference, db = _streamed(tmp_path, monkeypatch, session, 7)
    assert [s["late"] for s in streams] == [False]
    assert _analysis(db) == reference


@needs_worker
def test_a_failing_parse_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    forked: list[int],
) -> None:
    session = tmp_path / "s.jsonl"
    _late_result_session(session, 240)
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 5)
    stopped: list[bool] = []
    real = ingest_load.AnalysisStream.abort

    def abort(self: Any) -> None:
        stopped.append(self.run is not None)
        real(self)

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest_load.AnalysisStream, "abort", abort)
    monkeypatch.setattr(ingest_load.FileLoader, "finish", boom)
    summary = ingest([session], db=tmp_path / "x.duckdb", build_index=False)
    assert summary.errors and stopped and stopped[0]
    assert forked
    assert not multiprocessing.active_children()


@needs_worker
@pytest.mark.parametrize("kind", ["short", "streamed", "late"])
def test_a_new_file_is_hashed_once_its_worker_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    forked: list[int], kind: str,
) -> None:
    """The worker forked before the parse keeps the second core busy until it answers its
    last chunk, or is stopped (unused: a short file; or when a late result makes the
    session be analysed again after the parse), or this process waits for it: only then
    is the file hashed, and its hash is its content's."""
    import hashlib

    events: list[str] = []
    free, hashed = tag_worker.TagWorker._core_free, ingest_module.content_sha

    def spy_free(worker: tag_worker.TagWorker) -> None:
        if worker._when_free is not None:
            events.append("core free")
        free(worker)

    def spy_hashed(*args: Any, **kwargs: Any) -> str:
        events.append("hashed")
        return hashed(*args, **kwargs)

    monkeypatch.setattr(tag_worker.TagWorker, "_core_free", spy_free)
    monkeypatch.setattr(ingest_module, "content_sha", spy_hashed)
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 5)
    session = tmp_path / (CODEX_ROLLOUT.name if kind == "streamed" else "s.jsonl")
    if kind == "streamed":
        _completed_after_the_parse(session)
    else:
        _late_result_session(session, 12 if kind == "short" else 240)
    db = tmp_path / "s.duckdb"
    assert not ingest([session], db=db, build_index=False).errors
    assert [s["late"] for s in streams] == {"short": [], "streamed": [False], "late": [True]}[kind]
    # (a late result: the session is analysed again after the parse, by another worker)
    assert forked and events[:2] == ["core free", "hashed"]
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT sha256 FROM ingest_files").fetchone()
    assert row == (hashlib.sha256(session.read_bytes()).hexdigest(),)


@needs_worker
def test_a_file_whose_hash_fails_stops_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    forked: list[int],
) -> None:
    """An error once the file is parsed (its hash, computed meanwhile, fails): the file's
    error, and no worker left running."""
    session = tmp_path / "s.jsonl"
    _late_result_session(session, 240)

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise OSError("input/output error")

    monkeypatch.setattr(ingest_module, "content_sha", unreadable)
    summary = ingest([session], db=tmp_path / "s.duckdb", build_index=False)
    assert summary.errors and "input/output error" in (summary.errors[0].error or "")
    assert forked
    assert not multiprocessing.active_children()


def _records(order: list[int]) -> tuple[list[Message], list[ToolCall]]:
    """Messages ``order`` of session "s" (and a few of session "other"), with calls made in
    one message and answered a few later, some never; times aware (UTC and not), naive and
    absent; one text None."""
    plus2 = timezone(timedelta(hours=2))
    msgs, calls = [], []
    for i in order:
        ts = [datetime(2025, 3, 1, 12, 0, i % 60, 7, tzinfo=UTC),
              datetime(2025, 3, 1, 14, 0, i % 60, tzinfo=plus2),
              datetime(2025, 3, 1, 12, 0, i % 60), None][i % 4]
        msgs.append(Message(session_id="s", msg_idx=i, source_id=f"u{i}", role="assistant",
                            ts=ts, text=f"text {i}", is_sidechain=i % 5 == 0))
        if i % 3 == 0:
            answered = i + 1 + i % 7 if i % 9 else None
            calls.append(ToolCall(session_id="s", msg_idx=i, call_id=f"c{i}", tool="Bash",
                                  command=f"sleep {i}", output=None if answered is None else "ok",
                                  exit_code=0, started_at=ts, ended_at=ts,
                                  result_msg_idx=answered))
        if i % 10 == 0:
            msgs.append(Message(session_id="other", msg_idx=i, source_id=f"o{i}", role="user"))
            calls.append(ToolCall(session_id="other", msg_idx=i, call_id=f"o{i}"))
    msgs[3].text = None  # type: ignore[assignment]  # (a parser may leave it so)
    return msgs, calls


@pytest.mark.parametrize("kind", ["in order", "shuffled", "flushes out of order"])
def test_stored_records_are_what_the_database_gives_back(kind: str) -> None:
    """Chunks, and the contexts of their messages with calls, read from the records a
    flush stored are those read back from the tables, also after what was fed is let go."""
    order = list(range(120))
    if kind == "shuffled":
        order = order[::-1][:40] + order[40:][::-1]
    elif kind == "flushes out of order":  # each flush in order, the second below the first
        order = order[74:] + order[:74]
    msgs, calls = _records(order)
    con = connect(":memory:", read_only=False)
    records = StoredRecords("s")
    for lo in range(0, len(msgs), 50):  # flushes
        batch_msgs = msgs[lo:lo + 50]
        batch_calls = [c for c in calls if lo <= msgs.index(_maker(msgs, c)) < lo + 50]
        records.add(
            batch_msgs, batch_calls,
            append_stored(con, "messages", batch_msgs),
            append_stored(con, "tool_calls", batch_calls),
        )
    for below in (0, 30, 70):
        records.release(below)
        for lo, hi in ((below, below + 24), (below + 25, 200), (below + 7, below + 7)):
            stored = load_tables(con, "s", lo, hi)
            kept = records.tables(lo, hi)
            assert kept[0].to_pylist() == stored[0].to_pylist()
            assert kept[1].drop_columns("rowid").to_pylist() == (
                stored[1].drop_columns("rowid").to_pylist())
            assert [t.schema for t in kept] == [t.schema for t in stored]
            expected = contexts_from_tables(with_calls(stored))
            got = records.call_contexts(lo, hi)
            assert repr(got) == repr(expected)
            for g, e in zip(got, expected, strict=True):
                assert g.message.model_fields_set == e.message.model_fields_set
                assert _shared(g) == _shared(e)


def _shared(context: MessageContext) -> list[bool]:
    """Which calls of a message are also among the results it carries (the same record)."""
    return [any(c is r for r in context.results) for c in context.calls]


def _maker(msgs: list[Message], call: ToolCall) -> Message:
    return next(m for m in msgs if m.session_id == call.session_id and m.msg_idx == call.msg_idx)


def test_a_process_seen_to_exit_long_after_its_call_redoes_only_that_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]]
) -> None:
    """A Codex command left running, whose exit a poll prints long after the call was
    analysed, settles the call's status and exit code: that message is analysed again
    alone, not the whole session, and the tables are those of one pass."""
    from _codex_rollouts import exec_header, write_rollout

    def item(kind: str, **fields: object) -> dict[str, object]:
        return {"type": kind, **fields}

    launch = "python -m sglang.launch_server --model-path m --port 30000"
    items: list[tuple[int, dict[str, object]]] = [
        (1, item("function_call", name="exec_command", call_id="c_launch",
                 arguments=json.dumps({"cmd": launch, "yield_time_ms": 10000}))),
        (2, item("function_call_output", call_id="c_launch",
                 output=exec_header("10.0", session=77) + "Load weight begin.\n")),
    ]
    for n in range(150):
        items.append((3 + n, item("message", role="assistant",
                                  content=[{"type": "output_text", "text": f"Step {n} done."}])))
    items += [
        (200, item("function_call", name="write_stdin", call_id="c_poll",
                   arguments=json.dumps({"session_id": 77, "chars": ""}))),
        (260, item("function_call_output", call_id="c_poll", output=exec_header("60.0", 1)
                   + "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory\n")),
    ]
    path = write_rollout(tmp_path, "0199a000-0000-7000-8000-0000000000ee", "2026-02-02", items)
    cleared: list[int] = []
    real_clear = run.Analyser.clear_from

    def clear_from(self: Any, con: Any, session_id: str, start: int) -> None:
        cleared.append(start)
        real_clear(self, con, session_id, start)

    reference = _analysis(_reference(tmp_path, [path], monkeypatch))
    monkeypatch.setattr(run.Analyser, "clear_from", clear_from)
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 5)
    db = tmp_path / "streamed.duckdb"
    assert not ingest([path], db=db, build_index=False).errors
    assert streams and not streams[-1]["late"] and streams[-1]["upto"] > 2
    assert cleared == []  # the session was not analysed again from its start
    assert _analysis(db) == reference
    con = duckdb.connect(str(db), read_only=True)
    launched = con.execute(
        "SELECT status, exit_code FROM tool_calls WHERE call_id = 'c_launch'").fetchall()
    con.close()
    assert launched == [("error", 1)]


@pytest.mark.parametrize("worker_on", [pytest.param("1", marks=needs_worker), "0"])
def test_a_streamed_session_s_claim_texts_and_goals_are_kept_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]],
    worker_on: str,
) -> None:
    """The verdicts read the texts of the claims a run tagged from the chunks it held
    (``KnownRows.claim_texts``), each as stored, and query none of them; the goals stated
    in a session analysed from its first message are those found in the chunks
    (``KnownRows.goals``), the same as the database gives, and are not queried. So for the
    sessions streamed and for those analysed after the parse."""
    from analytics.analysis import campaigns
    from analytics.analysis.session import SessionFrames, load_session_frames

    monkeypatch.setenv(tag_worker.ENV_SWITCH, worker_on)
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 7)
    given: dict[str, dict[int, str | None]] = {}
    goals: dict[str, list[Any]] = {}
    real_prepare = run.SessionRun.prepare

    queried_goals: list[str] = []
    queried_in_prepare: list[str] = []
    settles: dict[str, list[Any]] = {}

    def prepare(self: run.SessionRun, settled_below: Any = None, seen: Any = None) -> None:
        if seen is not None:  # (handed over by the session's run: streamed or not)
            given[self.session_id] = seen.claim_texts  # (filled on until the run closes)
            if seen.goals is not None:
                goals[self.session_id] = seen.goals
        if settled_below is not None:
            settles.setdefault(self.session_id, []).append(settled_below)
        before = len(queried_goals)
        real_prepare(self, settled_below, seen)
        if seen is not None and seen.goals is not None:
            queried_in_prepare.extend(queried_goals[before:])

    real_stated = campaigns.stated_goals

    def stated_goals(frames: Any) -> Any:
        queried_goals.append(frames.session_id)
        return real_stated(frames)

    monkeypatch.setattr(campaigns, "stated_goals", stated_goals)

    queried: set[tuple[str, int]] = set()
    real_select = SessionFrames.select_lists

    def select_lists(
        self: SessionFrames, table: str, columns: Any, where: Any = None, **kw: Any
    ) -> Any:
        if table == "messages" and "text" in columns and where and "msg_idx" in where:
            queried.update((self.session_id, int(i)) for i in where["msg_idx"])
        return real_select(self, table, columns, where, **kw)

    monkeypatch.setattr(run.SessionRun, "prepare", prepare)
    monkeypatch.setattr(SessionFrames, "select_lists", select_lists)
    db = tmp_path / "streamed.duckdb"
    assert not ingest([SAMPLES], db=db, build_index=False).errors
    with duckdb.connect(str(db), read_only=True) as con:
        stored = {
            (s, i): t for s, i, t in con.execute(
                "SELECT DISTINCT m.session_id, m.msg_idx, m.text FROM tags t JOIN messages m "
                "USING (session_id, msg_idx) WHERE t.tag = 'readiness_claim'"
            ).fetchall()
        }
    kept = {(s, i): t for s, texts in given.items() for i, t in texts.items()}
    assert len(given) >= 3 and sum(1 for s, _ in stored if s in given) >= 8
    assert kept == {k: t for k, t in stored.items() if k[0] in given}
    assert not {k for k in stored if k[0] in given} & queried
    assert goals and not queried_in_prepare
    assert set(given) - {s["session"] for s in streams}  # (a session not streamed, too)
    # (judged as the worker's chunks come back: prepared again, each time with more settled)
    rounds = [s for sid, s in settles.items() if sid in given]
    assert all(r == sorted(set(r)) for r in rounds)
    assert worker_on == "0" or max(map(len, rounds)) > 1
    with duckdb.connect(str(db), read_only=True) as con:
        from_db = {sid: real_stated(load_session_frames(con, sid)) for sid in goals}
    assert any(from_db.values())  # (some streamed session states a goal)
    assert goals == from_db  # (in message order, as the database gives them)
