"""New files ingested by a pool of worker processes: the tables one process makes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _samples import SHARED_SAMPLES, all_tables, table_rows

import analytics.ingest as ingest_module
from analytics import ingest_pool, machine
from analytics.ingest import _delete_path, ingest
from analytics.ingest_pool import MERGED_TABLES, NOT_MERGED, Job, _Worker, merge, pool_size
from analytics.samples_path import sample_inputs
from analytics.store.db import connect

needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")
CLAUDE_SAMPLE = "claude_code_vllm_session"


def _inputs(tmp_path: Path) -> list[Path]:
    """The bundled samples, the test fixtures of every format (an opencode storage folder,
    subagent files in both layouts, secrets), the shared samples when present, a copy of a
    Claude Code session in another folder (the same session ids: the later copy's get a
    suffix), a bad file and an empty one."""
    fixtures = Path(__file__).parent / "fixtures"
    inputs = list(sample_inputs()) + [
        fixtures / name for name in ("claude_code", "codex", "opencode", "secrets",
                                     "transcript_text")
    ]
    if SHARED_SAMPLES.is_dir():
        inputs += sorted(p for p in SHARED_SAMPLES.rglob("*") if p.is_file()
                         and p.suffix in (".jsonl", ".json") and p.parent.name in
                         ("claude_code", "codex"))
    original = next(p for p in inputs if p.name == CLAUDE_SAMPLE)
    copy = tmp_path / "copy" / CLAUDE_SAMPLE
    shutil.copytree(original, copy)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a transcript\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    return [*inputs, copy, bad, empty]


def _outcome(summary: ingest_module.IngestSummary) -> list[tuple[object, ...]]:
    return [(f.path, f.status, f.sessions, f.messages, f.records_read, f.records_stored,
             f.records_quarantined, f.error) for f in summary.files]


@needs_fork
@pytest.mark.parametrize(("workers", "generation"), [(2, None), (3, None), (2, 1)])
def test_a_pool_stores_what_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, generation: int | None
) -> None:
    """``generation``: a worker starts a new database after this many messages (1: after
    every file, so that copies of a session meet in two databases of one worker too)."""
    if generation is not None:
        monkeypatch.setattr(ingest_pool, "GENERATION_MESSAGES", generation)
    inputs = _inputs(tmp_path)
    ticks_one: list[str] = []
    one = ingest(inputs, db=tmp_path / "one.duckdb", workers=1,
                 progress=lambda path, n: ticks_one.append(path))
    used: list[int] = []
    real = ingest_pool.run_pool

    def spy(jobs: list[Job], n: int, *args: object, **kw: object) -> object:
        used.append(n)
        return real(jobs, n, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "run_pool", spy)
    ticks: list[str] = []
    pooled = ingest(inputs, db=tmp_path / "pool.duckdb", workers=workers,
                    progress=lambda path, n: ticks.append(path))
    assert used == [workers]
    assert _outcome(pooled) == _outcome(one)
    assert sorted(ticks) == sorted(ticks_one)  # once per file, as in one process
    assert any(f.status == "error" and "bad.jsonl" in f.path for f in pooled.files)
    assert [Path(f.path).name for f in pooled.skipped] == ["empty.jsonl"]
    expected, got = all_tables(tmp_path / "one.duckdb"), all_tables(tmp_path / "pool.duckdb")
    assert expected["messages"] and expected["tags"] and expected["search_docs"]
    suffixed = [s for s in expected["sessions"] if "@" in str(s[0])]
    assert suffixed  # the copy's sessions
    for table in expected:
        assert got[table] == expected[table], table
    assert not list(tmp_path.glob("pool.duckdb.pool*"))


def test_the_later_of_two_workers_files_with_one_session_is_ingested_again(
    tmp_path: Path,
) -> None:
    """Two copies of one session, each ingested by its own worker: the merge keeps the
    first, and the second, ingested again afterwards, gets the suffix one process gives it."""
    original = next(p for p in sample_inputs() if p.name == CLAUDE_SAMPLE)
    first, second = tmp_path / "a" / CLAUDE_SAMPLE, tmp_path / "b" / CLAUDE_SAMPLE
    shutil.copytree(original, first)
    shutil.copytree(original, second)
    units = list(ingest_module.iter_units([first, second]))
    assert len(units) == 4  # each copy: the session and its subagent's
    jobs = [Job(i, p, str(p.resolve()), str(fmt), 1) for i, (p, fmt, _) in enumerate(units)]
    workers = []
    for number, mine in enumerate([jobs[2:], jobs[:2]]):  # the later copy in the first worker
        worker = _Worker(number, None, None, tmp_path, [j.index for j in mine], True, 1)  # type: ignore[arg-type]
        paths = [j.path for j in mine]
        assert not ingest(paths, db=worker.dbs[0], build_index=False, workers=1).errors
        workers.append(worker)
    main = tmp_path / "main.duckdb"
    con = connect(main, read_only=False)
    try:
        assert merge(con, workers, jobs, _delete_path) == {2, 3}
    finally:
        con.close()
    paths = {r[0] for r in table_rows(main, {"sessions": "source_path"})["sessions"]}
    assert paths == {jobs[0].key, jobs[1].key}
    ingest([second], db=main, workers=1)
    one = tmp_path / "one.duckdb"
    ingest([first, second], db=one, workers=1)
    for table, rows in all_tables(one).items():
        if table not in ("search_docs", "search_state"):  # (main's index: built once)
            assert all_tables(main)[table] == rows, table


@needs_fork
def test_a_failed_worker_leaves_its_files_to_the_main_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = list(sample_inputs())
    one = ingest(inputs, db=tmp_path / "one.duckdb", workers=1)
    real = ingest_module._pool_worker

    def failing(ingestor: object, outside: object, threads: int, db: Path) -> object:
        if db.name.startswith("worker-1-"):
            raise RuntimeError("no room")
        if db.name == "worker-0-0.duckdb":
            time.sleep(1.0)  # (so that worker 1 surely takes a file, and fails)
        return real(ingestor, outside, threads, db)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_pool, "GENERATION_MESSAGES", 1)  # a database per file
    monkeypatch.setattr(ingest_module, "_pool_worker", failing)
    with pytest.warns(RuntimeWarning, match="ingest worker 1 failed .*no room"):
        pooled = ingest(inputs, db=tmp_path / "pool.duckdb", workers=2)
    assert _outcome(pooled) == _outcome(one)
    assert all_tables(tmp_path / "pool.duckdb") == all_tables(tmp_path / "one.duckdb")


def test_every_table_is_merged_or_said_not_to_be(tmp_path: Path) -> None:
    con = connect(tmp_path / "fresh.duckdb", read_only=False)
    try:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE'").fetchall()}
    finally:
        con.close()
    assert set(MERGED_TABLES) | set(NOT_MERGED) == tables
    assert not set(MERGED_TABLES) & set(NOT_MERGED)


def _jobs(*sizes: int) -> list[Job]:
    return [Job(i, Path(f"f{i}"), f"/f{i}", "claude_code", s) for i, s in enumerate(sizes)]


@needs_fork
def test_pool_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_pool.os, "sched_getaffinity", lambda _: {0, 1, 2, 3})
    mb = 2**20
    assert pool_size(_jobs(5 * mb, 5 * mb, 5 * mb), None) == 3
    assert pool_size(_jobs(*[mb] * 10), None) == 4
    assert pool_size(_jobs(mb, mb), None) == 0  # too little to be worth a fork
    assert pool_size(_jobs(100 * mb, mb, mb), None) == 0  # one file is most of the work
    assert pool_size(_jobs(10 * mb), None) == 0
    assert pool_size(_jobs(1, 1), 2) == 2  # asked for
    assert pool_size(_jobs(1, 1), 8) == 2
    assert pool_size(_jobs(*[mb] * 10), 1) == 0
    monkeypatch.setattr(machine, "available_mib", lambda: 3 * ingest_pool.WORKER_MIB)
    assert pool_size(_jobs(*[mb] * 10), None) == 3  # as many as the memory holds
    monkeypatch.setattr(machine, "available_mib", lambda: ingest_pool.WORKER_MIB)
    assert pool_size(_jobs(*[mb] * 10), None) == 0
    assert pool_size(_jobs(*[mb] * 10), 2) == 2  # asked for
    monkeypatch.setattr(ingest_pool.os, "sched_getaffinity", lambda _: {0})
    assert pool_size(_jobs(*[mb] * 10), None) == 0


@pytest.mark.parametrize("version", [1, 2])
def test_a_containers_cpu_quota_and_memory_limit_bound_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """A container sees the host's cores and memory; its cgroup says what it may use."""
    monkeypatch.setattr(machine, "CGROUP", tmp_path)
    monkeypatch.setattr(ingest_pool.os, "sched_getaffinity", lambda _: set(range(8)))
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n")  # 8 GiB
    monkeypatch.setattr(machine, "MEMINFO", meminfo)
    assert machine.cores() == 8  # no cgroup files: the host's
    assert machine.available_mib() == 8 * 1024
    gib = 2**30
    files = {  # a quota of 2.5 cores; 5 GiB of which 1 GiB used
        2: {"cpu.max": "250000 100000", "memory.max": str(5 * gib),
            "memory.current": str(gib)},
        1: {"cpu/cpu.cfs_quota_us": "250000", "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": str(5 * gib),
            "memory/memory.usage_in_bytes": str(gib)},
    }[version]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    assert machine.cores() == 3
    assert machine.available_mib() == 4 * 1024
    mb = 2**20
    assert pool_size(_jobs(*[mb] * 10), None) == 3
    if version == 2:  # no limits written as such
        (tmp_path / "cpu.max").write_text("max 100000\n")
        (tmp_path / "memory.max").write_text("max\n")
        assert machine.cores() == 8
        assert machine.available_mib() == 8 * 1024


def test_a_pool_folder_is_the_ingests_own_and_a_dead_ones_goes(tmp_path: Path) -> None:
    db = str(tmp_path / "t.duckdb")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = [Path(f"{db}.pool-{dead.pid}"), Path(f"{db}.pool-1")]  # (pid 1 lives)
    for folder in left:
        folder.mkdir()
    assert ingest_pool.pool_folder(db) == Path(f"{db}.pool-{os.getpid()}")
    ingest([], db=db, workers=1)  # any ingest, pool or not, removes a dead one's
    assert not left[0].exists() and left[1].exists()


@needs_fork
def test_another_writer_during_the_pool_has_its_files_ingested_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database is free while the workers run: when another ingest wrote meanwhile,
    what the workers were told it held is stale, and their files are done again here."""
    inputs = list(sample_inputs())
    other = _session_file(tmp_path, "other/s.jsonl", "0" * 8)
    db = tmp_path / "pool.duckdb"
    real = ingest_pool.run_pool

    def with_a_writer(*args: object, **kw: object) -> object:
        out = real(*args, **kw)  # type: ignore[arg-type]
        assert not ingest([other], db=db, workers=1, build_index=False).errors
        return out

    monkeypatch.setattr(ingest_module, "run_pool", with_a_writer)
    with pytest.warns(RuntimeWarning, match="database changed while the ingest workers ran"):
        pooled = ingest(inputs, db=db, workers=2)
    one = ingest(inputs, db=tmp_path / "one.duckdb", workers=1)
    assert _outcome(pooled) == _outcome(one)
    paths = {r[0] for r in table_rows(db, {"ingest_files": "path"})["ingest_files"]}
    assert str(other.resolve()) in paths and len(paths) == len(pooled.files) + 1
    assert not list(tmp_path.glob("pool.duckdb.pool*"))


def test_an_in_memory_database_is_ingested_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ingest_module, "run_pool", None)  # (would fail if called)
    summary = ingest(sample_inputs(), db=":memory:", workers=2)
    assert not summary.errors and summary.totals()["messages"] > 300


SID = "15533a99-4ff1-4d4f-a079-e640a38d686d"
"""The session id of the bundled Claude Code session."""


def _session_file(tmp_path: Path, name: str, sid: str = SID) -> Path:
    """The bundled Claude Code session file (no subagents) at ``tmp_path/name``, its
    session id ``sid``."""
    original = next(p for p in sample_inputs() if p.name == CLAUDE_SAMPLE)
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((original / f"{SID}.jsonl").read_text().replace(SID, sid))
    return path


def _same_tables(tmp_path: Path) -> None:
    one, pool = all_tables(tmp_path / "one.duckdb"), all_tables(tmp_path / "pool.duckdb")
    for table in one:
        assert pool[table] == one[table], table


@needs_fork
@pytest.mark.parametrize("change", ["gives up", "takes"])
def test_a_changed_file_before_new_ones_is_ingested_before_them(
    tmp_path: Path, change: str
) -> None:
    """A stored file that changed gives up a session id, or takes one, that a new file after
    it holds: the new file must see that, as in one process."""
    other = "00000000-0000-4000-8000-000000000000"
    changed = _session_file(tmp_path, "c.jsonl", SID if change == "gives up" else other)
    new = [_session_file(tmp_path, "n/a.jsonl"), _session_file(tmp_path, "n/b.jsonl", "b" * 8)]
    for db in ("one", "pool"):
        ingest([changed], db=tmp_path / f"{db}.duckdb", workers=1, build_index=False)
    _session_file(tmp_path, "c.jsonl", other if change == "gives up" else SID)
    for db, workers in (("one", 1), ("pool", 2)):
        ingest([changed, *new], db=tmp_path / f"{db}.duckdb", workers=workers)
    _same_tables(tmp_path)


@needs_fork
def test_a_file_stored_by_an_older_parser_before_new_ones_is_read_again_before_them(
    tmp_path: Path,
) -> None:
    """A stored file whose parser version is not the current one is read again as a
    changed file is: in the main process, in order (it may give up or take a session id
    that a new file after it holds); the pool stores what one process does."""
    from test_ingest import as_if_an_older_parser_stored_it

    stale = _session_file(tmp_path, "c.jsonl")
    new = [_session_file(tmp_path, "n/a.jsonl", "a" * 8), _session_file(tmp_path, "n/b.jsonl", "b" * 8)]
    for db in ("one", "pool", "fresh"):
        ingest([stale], db=tmp_path / f"{db}.duckdb", workers=1, build_index=False)
    for db in ("one", "pool"):
        as_if_an_older_parser_stored_it(tmp_path / f"{db}.duckdb", None)
    for db, workers in (("one", 1), ("pool", 2), ("fresh", 1)):
        summary = ingest([stale, *new], db=tmp_path / f"{db}.duckdb", workers=workers)
        assert summary.totals()["reread"] == (db != "fresh"), db
    _same_tables(tmp_path)
    fresh = all_tables(tmp_path / "fresh.duckdb")
    assert all_tables(tmp_path / "pool.duckdb")["messages"] == fresh["messages"]


@needs_fork
def test_a_worker_that_dies_mid_file_leaves_the_order_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first worker dies on the first of two copies of a session; the second worker's
    copy must not keep the id the first copy, redone afterwards, has in one process."""
    import multiprocessing
    import os

    copies = [_session_file(tmp_path, "a/s.jsonl"), _session_file(tmp_path, "b/s.jsonl")]
    ingest(copies, db=tmp_path / "one.duckdb", workers=1)
    real = ingest_module._ingest_one

    def dying(ingestor: object, unit: Path, chosen: str) -> object:
        if multiprocessing.current_process().name == "transcripts-ingest-0":
            os._exit(9)  # (killed: out of memory, say)
        return real(ingestor, unit, chosen)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "_ingest_one", dying)
    ingest(copies, db=tmp_path / "pool.duckdb", workers=2)
    _same_tables(tmp_path)


@needs_fork
def test_a_left_out_file_leaves_no_redactions_behind(tmp_path: Path) -> None:
    """The later of two copies, left out at the merge, has a secret on a quarantined line:
    its redaction (of no session) is not copied as well as made again."""
    copies = [_session_file(tmp_path, "a/s.jsonl"), _session_file(tmp_path, "b/s.jsonl")]
    with copies[1].open("a") as f:
        f.write("not json sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2\n")
    for db, workers in (("one", 1), ("pool", 2)):
        ingest(copies, db=tmp_path / f"{db}.duckdb", workers=workers)
    assert len(all_tables(tmp_path / "one.duckdb")["redactions"]) == 1
    _same_tables(tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_a_process_whose_parent_died_before_it_asked_to_die_with_it_dies() -> None:
    """``die_with_parent`` in a process whose parent is gone already (it died between the
    fork and the call): the process leaves rather than run on as an orphan."""
    from analytics import machine

    read, write = os.pipe()
    parent = os.fork()
    if parent == 0:  # the parent to be, which dies at once
        try:
            born = os.getpid()
            if os.fork() == 0:
                try:
                    deadline = time.monotonic() + 10
                    while os.getppid() == born and time.monotonic() < deadline:
                        time.sleep(0.001)
                    machine.die_with_parent(born)
                    os.write(write, b"ran on")
                except BaseException as exc:
                    os.write(write, repr(exc).encode())
                finally:
                    os._exit(0)
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(parent, 0)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read()  # until the grandchild's end closes: it left
    assert said == b""
