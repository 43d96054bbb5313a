"""Message-level analysis: the fast chunk loader and the tagging worker process change
nothing in what is found."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from analytics.analysis import run
from analytics.analysis.run import (
    _CALL_COLS,
    _MSG_COLS,
    contexts_from_rows,
    load_contexts,
    load_rows,
    tail_rows,
)
from analytics.analysis.tagging import Tagger
from analytics.analysis.tagging import worker as tag_worker
from analytics.ingest import ingest
from analytics.models import Message, MessageContext, Tag, ToolCall

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TABLES = ("tags", "polling_loops", "launches", "server_events", "measurements")
needs_worker = pytest.mark.skipif(not tag_worker.available(), reason="no fork or one core")


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


@pytest.fixture(autouse=True)
def _fork_whatever_the_test_process_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process may be larger than the fork limit; these tests want the worker."""
    monkeypatch.setattr(tag_worker, "MAX_PARENT_RSS_MIB", 1 << 20)


def test_columns_are_the_models_fields() -> None:
    """The fast constructor relies on the rows naming every field, in order."""
    assert _MSG_COLS == list(Message.model_fields)
    assert _CALL_COLS == list(ToolCall.model_fields)


def test_fast_loader_builds_what_model_construct_builds(sample_db: Path) -> None:
    con = duckdb.connect(str(sample_db), read_only=True)
    sessions = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
    assert sessions
    for sid in sessions:
        for lo, hi in ((0, 10**6), (3, 40), (41, 41)):
            fast, slow = load_contexts(con, sid, lo, hi), _reference_contexts(con, sid, lo, hi)
            assert fast == slow
            for f, s in zip(fast, slow, strict=True):
                assert f.message.model_fields_set == s.message.model_fields_set
                assert [c.model_fields_set for c in f.results] == [
                    c.model_fields_set for c in s.results
                ]
                assert repr(f) == repr(s)


def test_tail_rows_are_the_last_contexts(sample_db: Path) -> None:
    con = duckdb.connect(str(sample_db), read_only=True)
    for (sid,) in con.execute("SELECT session_id FROM sessions").fetchall():
        rows = load_rows(con, sid, 0, 10**6)
        for n in (0, 1, 5, 50, 10**6):
            expected = contexts_from_rows(*rows)[-n:] if n else []
            assert contexts_from_rows(*tail_rows(rows, n)) == expected


def test_records_share_their_fields_set_safely(sample_db: Path) -> None:
    """The loader hands the records of a chunk one fields-set: changing or copying a record
    leaves it, and the other records, as they were."""
    con = duckdb.connect(str(sample_db), read_only=True)
    sid = con.execute("SELECT session_id FROM sessions ORDER BY n_messages DESC").fetchone()[0]
    first, second = load_contexts(con, sid, 0, 10**6)[:2]
    every = set(Message.model_fields)
    first.message.text = "changed"
    copy = second.message.model_copy(update={"text": "copied"})
    assert second.message.text != "copied" and copy.text == "copied"
    assert first.message.model_fields_set == second.message.model_fields_set == every
    assert copy.model_fields_set == every


@needs_worker
def test_worker_tags_what_the_tagger_tags(sample_db: Path) -> None:
    con = duckdb.connect(str(sample_db), read_only=True)
    tagger = Tagger()
    tagger.warm_up()
    worker = tag_worker.TagWorker(lambda rows: tagger.tag(contexts_from_rows(*rows)))
    try:
        expected = []
        for (sid,) in con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall():
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
    con = duckdb.connect(str(sample_db), read_only=True)
    sid = con.execute("SELECT min(session_id) FROM sessions").fetchone()[0]  # type: ignore[index]
    worker = tag_worker.TagWorker(tag)
    try:
        worker.submit(load_rows(con, sid, 0, 10**6))
        with pytest.raises(tag_worker.WorkerGone):
            worker.take(block=True)
        with pytest.raises(tag_worker.WorkerGone):
            worker.take(block=False)
    finally:
        worker.close()


def _analysis(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


@pytest.mark.parametrize("worker_on", [pytest.param(True, marks=needs_worker), False])
def test_small_chunks_with_and_without_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker_on: bool
) -> None:
    """Many chunks per session, tagged in a worker process or here, store the same; and,
    tags apart (a chunk sees only ``TAG_MARGIN`` messages before it), what one chunk stores."""
    plain = tmp_path / "plain.duckdb"
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "0")
    ingest([SAMPLES], db=plain, build_index=False)
    monkeypatch.setattr(run, "CHUNK", 7)
    chunked = {}
    for name, switch in (("serial", "0"), ("worker", "1" if worker_on else "0")):
        monkeypatch.setenv(tag_worker.ENV_SWITCH, switch)
        db = tmp_path / f"{name}.duckdb"
        ingest([SAMPLES], db=db, build_index=False)
        chunked[name] = _analysis(db)
    assert chunked["worker"] == chunked["serial"]
    whole = _analysis(plain)
    for table in TABLES[1:]:
        assert chunked["serial"][table] == whole[table], table


@needs_worker
def test_worker_failure_falls_back_to_tagging_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "CHUNK", 7)
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "0")
    ingest([SAMPLES], db=tmp_path / "serial.duckdb", build_index=False)
    monkeypatch.setenv(tag_worker.ENV_SWITCH, "1")
    real = tag_worker.TagWorker

    def failing(tag: tag_worker.TagJob) -> tag_worker.TagWorker:
        return real(_die)

    monkeypatch.setattr(tag_worker, "TagWorker", failing)
    ingest([SAMPLES], db=tmp_path / "failing.duckdb", build_index=False)
    assert _analysis(tmp_path / "failing.duckdb") == _analysis(tmp_path / "serial.duckdb")


def test_no_worker_is_forked_from_a_large_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from analytics.analysis.tagging import worker

    monkeypatch.setattr(worker, "MAX_PARENT_RSS_MIB", 1)  # this test process is larger
    assert not worker.available()
