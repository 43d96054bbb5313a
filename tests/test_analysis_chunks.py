"""Message-level analysis: the fast chunk loader and the tagging worker process change
nothing in what is found."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from _samples import needs_worker, submitted_jobs, table_rows

from analytics.analysis import run
from analytics.analysis.rows import (
    _CALL_COLS,
    _MSG_COLS,
    _call_values,
    _message_values,
    _pylist,
    contexts_from_rows,
    contexts_from_tables,
    for_tagging,
    load_contexts,
    load_rows,
    load_tables,
    pack,
    rows_from_tables,
    tail_tables,
    unpack,
    with_calls,
)
from analytics.analysis.tagging import Tagger
from analytics.analysis.tagging import worker as tag_worker
from analytics.ingest import ingest
from analytics.models import Message, MessageContext, Tag, ToolCall
from analytics.samples_path import samples_dir

SAMPLES = samples_dir()
TABLES = ("tags", "polling_loops", "launches", "server_events", "measurements")
pytestmark = pytest.mark.usefixtures("fork_at_any_size")  # these tests want the worker


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("chunks") / "s.duckdb"
    ingest([SAMPLES], db=db, analyse=False, build_index=False)
    return db


def _reference_contexts(
    con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int
) -> list[MessageContext]:
    """The plain loader: pydantic's model_construct, ORDER BY, one OR-ed tool-call query."""
    msgs = con.execute(
        f"SELECT {', '.join(_MSG_COLS)} FROM messages WHERE session_id = ? "
        "AND msg_idx BETWEEN ? AND ? ORDER BY msg_idx", [session_id, lo, hi]
    ).fetchall()
    calls = con.execute(
        f"SELECT {', '.join(_CALL_COLS)} FROM tool_calls WHERE session_id = ? "
        "AND (msg_idx BETWEEN ? AND ? OR result_msg_idx BETWEEN ? AND ?) ORDER BY rowid",
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
        out.append(MessageContext.model_construct(
            message=msg, calls=by_call.get(msg.msg_idx, []), results=by_result.get(msg.msg_idx, [])
        ))
    return out


def test_columns_are_the_models_fields() -> None:
    """The fast constructor relies on the rows naming every field, in order."""
    assert _MSG_COLS == list(Message.model_fields)
    assert _CALL_COLS == list(ToolCall.model_fields)


def test_row_values_name_the_columns_in_order() -> None:
    """The dict displays of the fast constructor read each column of a row into its field."""
    assert _message_values(tuple(_MSG_COLS)) == {c: c for c in _MSG_COLS}
    assert list(_message_values(tuple(_MSG_COLS))) == _MSG_COLS
    assert _call_values(("rowid", *_CALL_COLS)) == {c: c for c in _CALL_COLS}
    assert list(_call_values(("rowid", *_CALL_COLS))) == _CALL_COLS


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_timestamps_read_from_the_buffers_are_arrows(unit: str) -> None:
    """Naive timestamps go through numpy, read from the Arrow buffers: the datetimes
    ``to_pylist`` gives, NULLs included, in chunked and sliced columns."""
    from datetime import datetime, timedelta

    rnd = random.Random(unit)
    start = datetime(2026, 11, 30, 23, 59, 58)
    values = [
        None if rnd.random() < 0.2 else start + timedelta(microseconds=rnd.randint(-10**12, 10**12))
        for _ in range(300)
    ]
    kind = pa.timestamp(unit)
    array = pc.cast(pa.array(values, pa.timestamp("us")), kind, safe=False)
    column = pa.chunked_array([array.slice(3, 100), array.slice(120), array.slice(0, 0)], kind)
    assert _pylist(column) == column.to_pylist()
    assert _pylist(column.slice(7, 150)) == column.slice(7, 150).to_pylist()
    assert _pylist(pa.chunked_array([pa.nulls(4, kind)])) == [None] * 4


_TAG_IN_FRESH_PROCESS = """
import sys
from analytics.analysis.run import Analyser
tag_columns, (polling, stated, goals) = Analyser()._tag_packed(open(sys.argv[1], "rb").read())
print(len(tag_columns[0]), len(polling), "pandas" in sys.modules)
"""


def test_the_worker_never_imports_pandas(sample_db: Path, tmp_path: Path) -> None:
    """A chunk as the worker gets it is tagged, and its polling loops and stated numbers
    found, without importing pandas (a fifth of a second of the worker's: ``pa.array`` and
    numpy's conversions import it)."""
    with duckdb.connect(str(sample_db), read_only=True) as con:
        sid = con.execute("SELECT session_id FROM messages ORDER BY 1 LIMIT 1").fetchone()[0]
        tables = load_tables(con, sid, 0, 10**6)
    job = tmp_path / "job.arrows"
    empty = (tables[0].schema.empty_table(), tables[1].schema.empty_table())
    msgs, calls = for_tagging(tables)
    msgs = msgs.replace_schema_metadata({run.FACTS_KEY: b"1"})  # (its facts are wanted)
    job.write_bytes(pack(*for_tagging(empty), msgs, calls).to_pybytes())
    out = subprocess.run(
        [sys.executable, "-c", _TAG_IN_FRESH_PROCESS, str(job)],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert int(out[0]) > 0 and int(out[1]) > 0 and out[2] == "False"


def test_fast_loader_builds_what_model_construct_builds(sample_db: Path) -> None:
    with duckdb.connect(str(sample_db), read_only=True) as con:
        sessions = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
        assert sessions
        for sid in sessions:
            for lo, hi in ((0, 10**6), (3, 40), (41, 41)):
                fast = load_contexts(con, sid, lo, hi)
                slow = _reference_contexts(con, sid, lo, hi)
                assert fast == slow
                for f, s in zip(fast, slow, strict=True):
                    assert f.message.model_fields_set == s.message.model_fields_set
                    assert [c.model_fields_set for c in f.results] == [
                        c.model_fields_set for c in s.results
                    ]
                    assert repr(f) == repr(s)


def test_tail_tables_are_the_last_contexts(sample_db: Path) -> None:
    with duckdb.connect(str(sample_db), read_only=True) as con:
        for (sid,) in con.execute("SELECT session_id FROM sessions").fetchall():
            tables = load_tables(con, sid, 0, 10**6)
            every = contexts_from_rows(*load_rows(con, sid, 0, 10**6))
            for n in (0, 1, 5, 50, 10**6):
                expected = every[-n:] if n else []
                assert contexts_from_tables(tail_tables(tables, n)) == expected


def _windows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, int]]:
    """Every session whole, and windows of it that cut through calls and their results."""
    out = []
    for sid, n in con.execute("SELECT session_id, count(*) FROM messages GROUP BY 1").fetchall():
        out.append((sid, 0, 10**6))
        out += [(sid, lo, lo + 6) for lo in range(0, n, 5)]
    return out


def test_tables_hold_the_rows(sample_db: Path) -> None:
    """The Arrow shape of a chunk (what the worker gets, packed) gives back exactly the rows
    and records of the tuple loader, NULLs, timestamps and all; so does the packed buffer."""
    exit_code = 1 + _CALL_COLS.index("exit_code")  # (call rows start with the rowid)
    made, answered = 1 + _CALL_COLS.index("msg_idx"), 1 + _CALL_COLS.index("result_msg_idx")
    null_ints = 0
    with duckdb.connect(str(sample_db), read_only=True) as con:
        for sid, lo, hi in _windows(con):
            rows, tables = load_rows(con, sid, lo, hi), load_tables(con, sid, lo, hi)
            assert rows_from_tables(tables) == rows
            msgs, calls = unpack(pack(*tables), 2)
            assert rows_from_tables((msgs, calls)) == rows
            for n in (0, 1, 5, 50):  # the last n messages and the calls they make or answer
                msgs = rows[0][-n:] if n else []
                idx = {r[_MSG_COLS.index("msg_idx")] for r in msgs}
                calls = [r for r in rows[1] if r[made] in idx or r[answered] in idx]
                assert rows_from_tables(tail_tables(tables, n)) == (msgs, calls)
            null_ints += sum(r[exit_code] is None for r in rows[1])
    assert null_ints  # integer columns with NULLs were compared (numpy would make them NaN)


def test_the_call_analysers_need_only_messages_with_calls(sample_db: Path) -> None:
    """Polling and tooling read the messages that make or answer a call: the same outputs
    from those as from every message of the chunk."""
    analyser = run.Analyser()
    left_out = found = 0
    with duckdb.connect(str(sample_db), read_only=True) as con:
        for sid, lo, hi in _windows(con):
            tables = load_tables(con, sid, lo, hi)
            few = contexts_from_tables(with_calls(tables))
            every = contexts_from_tables(tables)
            left_out += len(every) - len(few)
            analyser._tooling.clear()
            a = analyser._analyse_calls(every)
            analyser._tooling.clear()
            b = analyser._analyse_calls(few)
            assert (a.polling, a.launches, a.events, a.measurements) == (
                b.polling, b.launches, b.events, b.measurements)
            found += len(a.polling) + len(a.launches) + len(a.events) + len(a.measurements)
    assert left_out and found  # messages were left out, and what was found did not change


def test_records_share_their_fields_set_safely(sample_db: Path) -> None:
    """The loader hands the records of a chunk one fields-set: changing or copying a record
    leaves it, and the other records, as they were."""
    with duckdb.connect(str(sample_db), read_only=True) as con:
        sid = con.execute(
            "SELECT session_id FROM sessions ORDER BY n_messages DESC"
        ).fetchone()[0]  # type: ignore[index]
        first, second = load_contexts(con, sid, 0, 10**6)[:2]
    every = set(Message.model_fields)
    first.message.text = "changed"
    copy = second.message.model_copy(update={"text": "copied"})
    assert second.message.text != "copied" and copy.text == "copied"
    assert first.message.model_fields_set == second.message.model_fields_set == every
    assert copy.model_fields_set == every


@needs_worker
def test_worker_tags_what_the_tagger_tags(sample_db: Path) -> None:
    tagger = Tagger()
    tagger.warm_up()
    worker = tag_worker.TagWorker(lambda rows: tagger.tag(contexts_from_rows(*rows)))
    try:
        expected = []
        with duckdb.connect(str(sample_db), read_only=True) as con:
            sessions = con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall()
            for (sid,) in sessions:
                rows = load_rows(con, sid, 0, 10**6)
                worker.submit(rows)
                expected.append(tagger.tag(contexts_from_rows(*rows)))
        got = [worker.take(block=True) for _ in expected]
    finally:
        worker.close()
    assert got == expected and any(expected)
    assert worker.outstanding == 0 and worker.seconds > 0


def _boom(job: object) -> list[Tag]:
    raise RuntimeError("boom")


def _die(job: object) -> list[Tag]:
    os._exit(3)


@needs_worker
@pytest.mark.parametrize("tag", [_boom, _die])
def test_a_failing_worker_says_so(sample_db: Path, tag: tag_worker.TagJob) -> None:
    with duckdb.connect(str(sample_db), read_only=True) as con:
        sid = con.execute("SELECT min(session_id) FROM sessions").fetchone()[0]  # type: ignore[index]
        rows = load_rows(con, sid, 0, 10**6)
    worker = tag_worker.TagWorker(tag)
    try:
        worker.submit(rows)
        with pytest.raises(tag_worker.WorkerGone):
            worker.take(block=True)
        with pytest.raises(tag_worker.WorkerGone):
            worker.take(block=False)
    finally:
        worker.close()


def test_the_ring_places_buffers_one_after_another_and_wraps_around() -> None:
    ring = tag_worker.Ring(100)

    def release(n: int) -> None:  # the n oldest jobs answered (in the ring or not)
        for _ in range(n):
            ring.release()

    a = ring.put(b"a" * 40)
    b = ring.put(bytearray(b"b" * 40))
    assert (a, b) == (tag_worker.InRing(0, 40), tag_worker.InRing(40, 40))
    assert ring.put(b"c" * 30) is None  # 20 free at the end, none at the start while a is out
    assert ring.put({"not": "a buffer"}) is None and ring.put(b"") is None
    release(1)  # a
    c = ring.put(memoryview(b"c" * 30))  # wraps around to where a was
    assert c == tag_worker.InRing(0, 30)
    assert ring.put(b"d" * 11) is None  # 10 free between c and b
    d = ring.put(b"d" * 10)
    assert d == tag_worker.InRing(30, 10)
    assert bytes(ring.view(b)) == b"b" * 40 and bytes(ring.view(c)) == b"c" * 30
    release(5)  # b, the three jobs not in the ring, c
    e = ring.put(b"e" * 60)
    assert e == tag_worker.InRing(40, 60)  # after d, which is still out
    release(3)  # the refused d, d, e
    assert ring.put(b"f" * 100) == tag_worker.InRing(0, 100)  # nothing out: all of it
    assert ring.put(b"g" * 101) is None


@needs_worker
def test_buffers_too_large_for_the_ring_go_through_the_pipe(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed chunks in the ring or, too large for it, in the pipe: the same tags."""
    tagger = Tagger()
    tagger.warm_up()
    analyser = run.Analyser()
    analyser._tagger = tagger
    with duckdb.connect(str(sample_db), read_only=True) as con:
        sessions = [r[0] for r in con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall()]
        packed = [pack(*load_tables(con, sid, 0, 0), *load_tables(con, sid, 0, 10**6)) for sid in sessions]
    expected = [analyser._tag_packed(p) for p in packed]
    sizes = sorted(p.size for p in packed)
    monkeypatch.setattr(tag_worker, "RING_BYTES", sizes[len(sizes) // 2])  # some fit, some not
    placed: list[bool] = []
    put = tag_worker.Ring.put

    def spy(ring: tag_worker.Ring, job: object) -> tag_worker.InRing | None:
        place = put(ring, job)
        placed.append(place is not None)
        return place

    monkeypatch.setattr(tag_worker.Ring, "put", spy)
    worker = tag_worker.TagWorker(analyser._tag_packed)
    try:
        for p in packed:
            worker.submit(p)
        deadline = time.monotonic() + 60
        while worker.unanswered and time.monotonic() < deadline:  # answered, not taken
            time.sleep(0.01)
        assert worker.unanswered == 0 and worker.outstanding == len(packed)
        got = [worker.take(block=True) for _ in packed]
    finally:
        worker.close()
    assert got == expected and any(expected)
    assert any(placed) and not all(placed)


_WORKER_PID: list[int] = []


def _remember_worker() -> None:
    _WORKER_PID.append(os.getpid())


def _slow_tag(job: int) -> list[Tag]:
    """A job tagged in 0.2 s, its tag naming the process that tagged it."""
    time.sleep(0.2)
    return [Tag(session_id="s", msg_idx=job, tag="x", evidence=str(os.getpid()))]


def _helper_dies(job: int) -> list[Tag]:
    if os.getpid() != _WORKER_PID[-1]:  # a helper forked by the worker
        os._exit(3)
    return _slow_tag(job)


def _last_jobs(tag: tag_worker.TagJob, n: int) -> list[list[Tag]]:
    worker = tag_worker.TagWorker(tag, prepare=_remember_worker)
    try:
        for job in range(n):
            worker.submit(job)
        worker.last_submitted()
        answers = []
        deadline = time.monotonic() + 60  # (a lost answer fails the test, not hangs it)
        while len(answers) < n and time.monotonic() < deadline:
            answer = worker.take(block=False)
            if answer is None:
                time.sleep(0.01)
            else:
                answers.append(answer)
    finally:
        worker.close()
    assert len(answers) == n, "answers lost"
    return answers


@needs_worker
def test_the_last_jobs_are_shared_with_a_helper_and_answered_in_order() -> None:
    answers = _last_jobs(_slow_tag, 6)
    assert [t.msg_idx for a in answers for t in a] == list(range(6))
    assert len({t.evidence for a in answers for t in a}) == 2  # the worker and its helper


@needs_worker
def test_a_helper_that_dies_leaves_its_jobs_to_the_worker() -> None:
    answers = _last_jobs(_helper_dies, 6)
    assert [t.msg_idx for a in answers for t in a] == list(range(6))
    assert len({t.evidence for a in answers for t in a}) == 1


def _big_slow_tag(job: int) -> list[Tag]:
    """A job tagged in 0.2 s, its tags pickled larger than a pipe holds; the first names the
    process that tagged it and when it started and ended."""
    start = time.monotonic()
    time.sleep(0.2)
    return [
        Tag(session_id="s", msg_idx=job, tag="x",
            evidence=f"{os.getpid()} {start} {time.monotonic()}"),
        Tag(session_id="s", msg_idx=job, tag="pad", evidence="x" * (2 << 20)),
    ]


@needs_worker
def test_a_helper_tags_on_while_its_answers_wait_for_the_worker() -> None:
    """The worker reads its helper's answers only after answering its own jobs: the helper
    must not wait for that to tag its next job."""
    answers = _last_jobs(_big_slow_tag, 6)
    spans = {t.msg_idx: str(t.evidence).split() for a in answers for t in a if t.tag == "x"}
    helper_pid = spans[5][0]  # the last job is always the helper's
    helper_jobs = sorted(i for i, s in spans.items() if s[0] == helper_pid)
    worker_jobs = sorted(i for i, s in spans.items() if s[0] != helper_pid)
    assert len(helper_jobs) >= 2 and worker_jobs
    started, worker_done = float(spans[helper_jobs[1]][1]), float(spans[worker_jobs[-1]][2])
    assert started < worker_done, "the helper waited for the worker to read its answer"


def _helper_dies_on_the_last(job: int) -> list[Tag]:
    """The helper dies on the last job, once the worker has read its answers to the others."""
    if job == 5 and os.getpid() != _WORKER_PID[-1]:
        time.sleep(1.5)
        os._exit(3)
    return _big_slow_tag(job)


@needs_worker
def test_a_helper_that_dies_midway_leaves_the_rest_to_the_worker() -> None:
    answers = _last_jobs(_helper_dies_on_the_last, 6)
    assert [a[0].msg_idx for a in answers] == list(range(6))
    pids = [str(a[0].evidence).split()[0] for a in answers]
    assert pids[5] == pids[0] and len(set(pids)) == 2  # the helper answered its first job


def _called_within(calls: list[int], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(calls)


@needs_worker
def test_a_worker_is_done_once_it_answered_the_jobs_after_the_last() -> None:
    """``when_core_free`` callbacks run once every job submitted is answered and no more
    will come, once each; one given after that runs at once."""
    worker = tag_worker.TagWorker(_slow_tag)
    unanswered: list[int] = []  # (when called)
    try:
        worker.when_core_free(lambda: unanswered.append(worker.unanswered))
        for job in range(2):
            worker.submit(job)
        while worker.unanswered:  # (their answers in: taking them waits for nothing)
            time.sleep(0.01)
        assert all(worker.take(block=True) for _ in range(2))
        assert not unanswered  # all answered, but more may come
        worker.last_submitted()
        assert unanswered == [0]  # (at once: nothing is out)
        later = tag_worker.TagWorker(_slow_tag)
        later_unanswered: list[int] = []
        try:
            later.when_core_free(lambda: later_unanswered.append(later.unanswered))
            for job in range(3):
                later.submit(job)
            later.last_submitted()
            assert _called_within(later_unanswered) and later_unanswered == [0]
            assert all(later.take(block=True) for _ in range(3))
            again: list[int] = []
            later.when_core_free(lambda: again.append(1))
            assert again  # (at once)
        finally:
            later.close()
    finally:
        worker.close()
    assert unanswered == [0] and later_unanswered == [0]  # (once each)


@needs_worker
def test_a_core_is_free_while_this_process_waits_for_an_answer() -> None:
    """A ``take`` that waits frees this process's core: the callbacks run then, before
    the answer is in (one that finds the answer in waits for nothing)."""
    worker = tag_worker.TagWorker(_slow_tag)
    unanswered: list[int] = []
    try:
        worker.submit(0)
        while worker.unanswered:  # (its answer in: taking it waits for nothing)
            time.sleep(0.01)
        worker.when_core_free(lambda: unanswered.append(worker.unanswered))
        assert worker.take(block=True) and not unanswered
        worker.submit(1)
        assert worker.take(block=True)
    finally:
        worker.close()
    assert unanswered == [1]  # (called once, as the take began to wait)


@needs_worker
def test_a_worker_is_done_when_it_is_gone_or_closed() -> None:
    """A worker that died, or one closed with answers still out, takes no core either."""
    gone = tag_worker.TagWorker(_die)
    died: list[int] = []
    try:
        gone.when_core_free(lambda: died.append(1))
        gone.submit(1)
        with pytest.raises(tag_worker.WorkerGone):
            gone.take(block=True)
        assert _called_within(died)
    finally:
        gone.close()
    busy = tag_worker.TagWorker(_slow_tag)
    closed: list[int] = []
    busy.when_core_free(lambda: closed.append(1))
    busy.submit(1)
    busy.submit(2)
    assert not closed
    busy.close()
    assert len(closed) == 1


@needs_worker
@pytest.mark.parametrize("more", [0, 3])
def test_jobs_after_the_last_and_a_second_last_submitted_keep_their_order(more: int) -> None:
    worker = tag_worker.TagWorker(_slow_tag)
    try:
        worker.last_submitted()  # nothing out
        for job in range(5):
            worker.submit(job)
        worker.last_submitted()
        for job in range(5, 5 + more):
            worker.submit(job)
        worker.last_submitted()
        got = [t.msg_idx for _ in range(5 + more) for t in worker.take(block=True) or []]
    finally:
        worker.close()
    assert got == list(range(5 + more))
    assert worker.outstanding == 0 and not worker.gone


def _helper_fails(job: int) -> list[Tag]:
    if os.getpid() != _WORKER_PID[-1]:
        raise ValueError("the helper failed")
    return _slow_tag(job)


@needs_worker
def test_a_helper_that_fails_says_so() -> None:
    worker = tag_worker.TagWorker(_helper_fails, prepare=_remember_worker)
    try:
        for job in range(4):
            worker.submit(job)
        worker.last_submitted()
        with pytest.raises(tag_worker.WorkerGone, match="the helper failed"):
            for _ in range(4):
                worker.take(block=True)
        worker.last_submitted()  # (a worker gone: nothing to say)
    finally:
        worker.close()


_MARK: list[Path] = []


def _no_death_signal() -> None:
    """Run in the worker: its helpers are not killed when it dies (as where prctl is denied)."""
    _remember_worker()
    tag_worker.machine.die_with_parent = lambda parent: None


def _helper_lingers(job: int) -> list[Tag]:
    if os.getpid() != _WORKER_PID[-1]:
        _MARK[-1].write_text(str(os.getpid()))
        time.sleep(20)
    return _slow_tag(job)


def _with_lingering_helper(
    tmp_path: Path, prepare: Callable[[], object]
) -> tuple[tag_worker.TagWorker, int]:
    """A worker handed its last four jobs, and the pid of its helper, which lingers on its
    first job (``_helper_lingers``)."""
    _MARK.append(tmp_path / "helper")
    worker = tag_worker.TagWorker(_helper_lingers, prepare=prepare)
    for job in range(4):
        worker.submit(job)
    worker.last_submitted()
    deadline = time.monotonic() + 30
    while not _MARK[-1].exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    return worker, int(_MARK[-1].read_text())


@needs_worker
def test_a_dead_worker_is_noticed_while_its_helper_lives_on(tmp_path: Path) -> None:
    """The helper holds no end of the parent's pipes: the parent reads the end of its
    answers as soon as the worker dies."""
    worker, helper_pid = _with_lingering_helper(tmp_path, _no_death_signal)
    try:
        assert worker._process.pid is not None
        os.kill(worker._process.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(tag_worker.WorkerGone):
            while time.monotonic() - start < 30:
                if worker.take(block=False) is None:
                    time.sleep(0.01)
        assert time.monotonic() - start < 10
    finally:
        worker.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper_pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_worker
def test_a_worker_closed_with_jobs_out_leaves_no_helper_running(tmp_path: Path) -> None:
    worker, helper_pid = _with_lingering_helper(tmp_path, _remember_worker)
    try:
        assert _running(helper_pid)
    finally:
        worker.close()
    deadline = time.monotonic() + 5
    while _running(helper_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _running(helper_pid)


def _analysis(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, TABLES)


@needs_worker
def test_small_chunks_with_and_without_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many chunks per session, tagged in a worker process or here, store the same, and what
    one chunk stores (each chunk is tagged with the ``TAG_MARGIN`` messages before it)."""
    whole = tmp_path / "whole.duckdb"
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "0")
    assert not ingest([SAMPLES], db=whole, build_index=False).errors
    monkeypatch.setattr(run, "CHUNK", 7)
    submitted = submitted_jobs(monkeypatch)
    told: list[int] = []  # jobs out when a run told its worker no more would come
    last_submitted = tag_worker.TagWorker.last_submitted

    def spy(worker: tag_worker.TagWorker) -> None:
        told.append(worker.outstanding)
        last_submitted(worker)

    monkeypatch.setattr(tag_worker.TagWorker, "last_submitted", spy)
    chunked = {}
    for name, switch in (("serial", "0"), ("worker", "1")):
        monkeypatch.setenv(tag_worker.ENV_SWITCH, switch)
        submitted.clear()
        told.clear()
        db = tmp_path / f"{name}.duckdb"
        assert not ingest([SAMPLES], db=db, build_index=False).errors
        assert bool(submitted) is (switch == "1"), name  # tagged by the worker, or here
        assert bool(told) is (switch == "1"), name
        chunked[name] = _analysis(db)
    expected = _analysis(whole)
    assert expected["tags"] and expected["launches"]
    for table in TABLES:
        assert chunked["worker"][table] == expected[table], table
        assert chunked["serial"][table] == expected[table], table


def test_outputs_written_some_chunks_at_a_time_are_those_of_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks whose outputs are appended together, a few at a time or all at the end,
    store what one pass stores."""
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "0")
    whole = tmp_path / "whole.duckdb"
    assert not ingest([SAMPLES], db=whole, build_index=False).errors
    monkeypatch.setattr(run, "CHUNK", 7)
    for rows in (1, 10, 1 << 30):
        monkeypatch.setattr(run.MessageRun, "WRITE_ROWS", rows)
        db = tmp_path / f"rows{rows}.duckdb"
        assert not ingest([SAMPLES], db=db, build_index=False).errors
        assert _analysis(db) == _analysis(whole), rows


@needs_worker
def test_a_session_without_calls_tagged_in_the_worker_keeps_its_tooling_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every chunk tagged in the worker (the call analysers read only the messages with
    calls, here none): the same ``analysis_state`` as when each chunk is tagged here."""
    session = tmp_path / "chat.jsonl"
    session.write_text("".join(
        json.dumps({
            "type": role, "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
            "sessionId": "chat", "timestamp": f"2026-05-14T12:00:{i:02d}Z",
            "message": {"role": role, "content": "ok?" if role == "user" else [
                {"type": "text", "text": "Still reading the code."}]},
        }) + "\n"
        for i, role in enumerate(["user", "assistant"] * 20)
    ))
    monkeypatch.setattr(run, "CHUNK", 7)
    monkeypatch.setattr(run.MessageRun, "WORKER_BACKLOG", 100)  # the worker gets every chunk
    monkeypatch.setattr(run.MessageRun, "STREAM_BACKLOG", 100)
    submitted = submitted_jobs(monkeypatch)
    states = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(tag_worker.ENV_SWITCH, switch)
        db = tmp_path / f"w{switch}.duckdb"
        assert not ingest([session], db=db, build_index=False).errors
        states[switch] = table_rows(db, ["analysis_state"])
    assert len(submitted) == 6  # (40 messages, 7 a chunk)
    assert states["1"] == states["0"] and states["0"]["analysis_state"]

@needs_worker
def test_worker_failure_falls_back_to_tagging_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "CHUNK", 7)
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "0")
    assert not ingest([SAMPLES], db=tmp_path / "serial.duckdb", build_index=False).errors
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "1")
    real = tag_worker.TagWorker
    started: list[tag_worker.TagWorker] = []

    def failing(tag: tag_worker.TagJob, *args: object, **kwargs: object) -> tag_worker.TagWorker:
        started.append(real(_die))
        return started[-1]

    monkeypatch.setattr(tag_worker, "TagWorker", failing)
    with pytest.warns(RuntimeWarning, match="tagging worker failed"):  # and says so
        assert not ingest([SAMPLES], db=tmp_path / "failing.duckdb", build_index=False).errors
    assert started  # a worker was there, and died
    assert _analysis(tmp_path / "failing.duckdb") == _analysis(tmp_path / "serial.duckdb")


@needs_worker  # (else no worker is forked at any size)
def test_no_worker_is_forked_from_a_large_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "1")
    monkeypatch.setattr(tag_worker, "MAX_PARENT_RSS_MIB", 1 << 20)
    assert tag_worker.available()  # nothing else stands in the way
    monkeypatch.setattr(tag_worker, "MAX_PARENT_RSS_MIB", 1)  # this test process is larger
    assert not tag_worker.available()


def test_tables_are_sorted_only_when_out_of_order() -> None:
    import pyarrow as pa

    from analytics.analysis.rows import _sorted

    ordered = pa.table({"msg_idx": [1, 2, 2, 5], "text": ["a", "b", "c", "d"]})
    assert _sorted(ordered, "msg_idx") is ordered  # (no copy)
    shuffled = pa.table({"msg_idx": [5, 1, 2], "text": ["d", "a", "b"]})
    assert _sorted(shuffled, "msg_idx").to_pylist() == shuffled.sort_by("msg_idx").to_pylist()
    assert _sorted(shuffled.slice(0, 0), "msg_idx").num_rows == 0


def test_new_tag_rows_keeps_the_chunks_tags_and_the_unknown_ones_of_its_context() -> None:
    """The rows, in order, on the chunk's messages (``mine``) or on messages before it whose
    tag is not ``known`` (stored already); ``tag_keys`` names those of the tail."""
    import random

    from analytics.store.writer import to_arrow

    rnd = random.Random(5)
    for _ in range(200):
        lo = rnd.randint(0, 30)
        tags = sorted(
            {(i, rnd.choice("abcd")) for i in range(max(0, lo - 10), lo + 20) if rnd.random() < 0.6}
        )
        records = [Tag(session_id="s", msg_idx=i, tag=t, evidence=f"{i}{t}") for i, t in tags]
        mine = {i for i in range(lo, lo + 20) if rnd.random() < 0.9}
        records = [r for r in records if r.msg_idx in mine or r.msg_idx < lo]
        known = {(i, t) for i, t in tags if rnd.random() < 0.5}
        kept = [t for t in records if t.msg_idx in mine or (t.msg_idx, t.tag) not in known]
        table = run.new_tag_rows(to_arrow("tags", records), mine, known)
        assert table.equals(to_arrow("tags", kept))
        tail = lo + rnd.randint(0, 20)
        assert run.tag_keys(table, tail) == {(t.msg_idx, t.tag) for t in kept if t.msg_idx >= tail}


def test_the_tagger_reads_none_of_the_columns_the_worker_goes_without(
    sample_db: Path, tmp_path: Path
) -> None:
    """The worker gets ``for_tagging`` tables (``UNTAGGED_COLUMNS`` all nulls): its tags and
    ``chunk_facts`` (polling loops, stated numbers and goals) are those of the whole rows,
    on the bundled samples and on every test fixture."""
    from analytics.analysis.rows import UNTAGGED_COLUMNS, for_tagging

    fixtures = tmp_path / "fixtures.duckdb"
    ingest([Path(__file__).parent / "fixtures"], db=fixtures, workers=1, build_index=False)
    tagger = Tagger()
    checked = loops = timed_loops = 0
    for db in (sample_db, fixtures):
        with duckdb.connect(str(db), read_only=True) as con:
            for (sid,) in con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall():
                tables = load_tables(con, sid, 0, 10**6)
                stripped = for_tagging(tables)
                assert UNTAGGED_COLUMNS <= {*tables[0].column_names, *tables[1].column_names}
                for table, full in zip(stripped, tables, strict=True):
                    assert table.column_names == full.column_names
                    for name in table.column_names:
                        nulls = table.column(name).null_count == table.num_rows
                        assert nulls if name in UNTAGGED_COLUMNS else table.column(name).equals(
                            full.column(name)
                        )
                assert tagger.tag(contexts_from_tables(stripped)) == tagger.tag(
                    contexts_from_tables(tables)
                )
                facts = run.chunk_facts(contexts_from_tables(stripped), stripped[0])
                assert facts == run.chunk_facts(contexts_from_tables(tables), tables[0])
                checked += tables[0].num_rows
                loops += len(facts[0])
                timed_loops += sum(loop.waited_s is not None for loop in facts[0])
    assert checked > 1000 and loops > 20 and timed_loops > 10


@needs_worker
def test_a_worker_with_its_backlog_gets_the_chunks_of_a_streamed_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed session whose worker holds its whole backlog: while the file is still
    parsed the worker is waited for, and at its end the last chunks go to it too (it
    shares them with a helper forked from it): this process does not load spaCy to tag a
    chunk itself (it did, mid-file and at the end; the load costs most of a second, and the
    worker, which has the backlog, is the slower side). The stored analysis is the one of
    tagging in one process."""
    import analytics.ingest_load as ingest_load

    session = next(SAMPLES.glob("claude_code_*/*.jsonl"))  # (a file parsed in flushes)
    monkeypatch.setattr(run, "CHUNK", 7)
    monkeypatch.setattr(ingest_load, "FLUSH_EVERY", 40)  # analysed while parsed
    monkeypatch.setattr(ingest_load, "STREAM_LAG", 5)
    monkeypatch.setattr(run.MessageRun, "STREAM_BACKLOG", 1)
    real_tag_here = run._Chunk.tag_here
    tagged_here: list[int] = []

    def tag_here(self: run._Chunk, tagger: Any) -> Any:
        tagged_here.append(len(self.mine))
        return real_tag_here(self, tagger)

    real_tag_packed = run.Analyser._tag_packed

    def slow_tag_packed(self: run.Analyser, packed: Any) -> Any:
        time.sleep(0.2)  # (in the worker, forked with this method: the slower side)
        return real_tag_packed(self, packed)

    monkeypatch.setattr(run._Chunk, "tag_here", tag_here)
    monkeypatch.setattr(run.Analyser, "_tag_packed", slow_tag_packed)
    analyses = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(tag_worker.ENV_SWITCH, switch)
        db = tmp_path / f"w{switch}.duckdb"
        assert not ingest([session], db=db, build_index=False).errors
        analyses[switch] = _analysis(db)
        if switch == "0":
            assert tagged_here  # (no worker: every chunk is tagged here)
            tagged_here.clear()
    assert not tagged_here
    assert analyses["1"] == analyses["0"]


def test_columns_in_one_pass_are_those_read_field_by_field(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer reads the fields stored as they are in one pass over the records
    (``writer._fields``): the tables are those of reading them field by field."""
    from analytics.store import writer
    from analytics.store.writer import to_arrow

    with duckdb.connect(str(sample_db), read_only=True) as con:
        sid = con.execute("SELECT min(session_id) FROM sessions").fetchone()[0]  # type: ignore[index]
        contexts = contexts_from_rows(*load_rows(con, sid, 0, 10**6))
    messages = [c.message for c in contexts]
    calls = [call for c in contexts for call in c.calls]
    assert len(messages) > 20 and calls
    fast = [to_arrow("messages", messages), to_arrow("tool_calls", calls, {"session_id": "x"})]
    with monkeypatch.context() as m:
        m.setattr(writer, "_fields", lambda dicts, names: None)
        slow = [to_arrow("messages", messages), to_arrow("tool_calls", calls, {"session_id": "x"})]
    assert all(f.equals(s) for f, s in zip(fast, slow, strict=True))
    assert fast[1].column("session_id").unique().to_pylist() == ["x"]
    assert fast[0].column("n_chars").to_pylist() == [len(m.text or "") for m in messages]


def test_a_record_without_a_field_stores_none_in_its_column() -> None:
    from types import SimpleNamespace

    from analytics.store.writer import TABLE_COLUMNS, to_arrow, to_columns

    names = TABLE_COLUMNS["quarantine"]
    full = SimpleNamespace(**{c: f"v-{c}" for c in names})
    short = SimpleNamespace(**{c: f"w-{c}" for c in names[:-1]})
    assert [list(c) for c in to_columns("quarantine", [full, short])] == [
        [f"v-{c}", None if c == names[-1] else f"w-{c}"] for c in names
    ]
    assert to_arrow("messages", []).num_rows == 0
