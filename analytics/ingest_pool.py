"""New files ingested side by side: forked worker processes, databases of their own, merged.

One process ingests one file at a time, so a first ingest of a folder of sessions runs on
one core, however many the machine has. With several new files and two or more cores,
:func:`analytics.ingest.ingest` hands the new ones to a pool instead. Each worker is a fork
of the ingest, with its options and the sessions the database holds already; it takes the
next file in order and parses, tags and analyses it as the main process would, into a
database of its own beside the main one (a new one every ``GENERATION_MESSAGES``). The main
process then copies every worker database's rows into the main database, one transaction
each, and builds the search index once.

The tables come out as one process makes them (``tests/test_ingest_pool.py`` compares every
table):
- Every session is analysed on its own: where it was analysed does not matter.
- Two files holding the same session id: the first keeps it and the later one's sessions get
  a suffix (``ingest_load.FileLoader._claim_session``). A worker takes its files in order,
  so within a worker this happens as it does in one process. Between workers it is found at
  the merge: the later file is left out and ingested again afterwards by the main process,
  which then sees the first file's session.
- A stored file that changed may give up or take a session id: only the new files before the
  first such file go to the pool (``analytics.ingest._new_units``); it and every file after
  it are ingested after the merge, in order.
- A worker that fails is left out as a whole; its files, and every file after the first of
  them (which of two copies keeps an id depends on the order), are ingested in the main
  process, in order.
- The database's lock is free while the workers run (readers get in). Should another
  writer get in too, what the workers were told the database held is stale: nothing of
  theirs is merged, and their files are ingested in the main process.

Linux only (``fork``); ``ingest(…, workers=1)`` (``transcripts ingest --workers 1``)
ingests in one process.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

import duckdb

from analytics import machine
from analytics.store.db import sql_string
from analytics.timing import PEAK_RSS_MIB, TIMINGS, timed

MIN_BYTES = 4 * 2**20
"""Fewer new bytes than this are ingested in one process (a worker costs a fork, a database
and loading spaCy; the merge copies every row once more)."""
MAX_SHARE = 0.6
"""Nor when one file is more than this share of the new bytes: it would keep one worker
busy to the end while the rest wait, and in one process it gets a tagging worker of its own
(``analysis/tagging/worker.py``) on the second core anyway."""
GENERATION_MESSAGES = 100_000
"""A worker starts a new database once its current one holds this many messages: the
queries an ingest runs per file scan their table, so in one database growing to millions of
messages each new file would cost more than the last."""
WORKER_MIB = 1024
"""Memory a worker may take (spaCy, its DuckDB capped at 400 MB, a file's rows): no more
workers than the available memory holds."""
MERGED_TABLES = (
    "sessions", "messages", "tool_calls", "raw_records", "quarantine", "redactions", "tags",
    "polling_loops", "launches", "server_events", "measurements", "campaigns", "levers",
    "readiness_claims", "analysis_state", "search_pending", "ingest_files",
)
"""The tables an ingest writes, copied from each worker's database."""
NOT_MERGED = ("_migrations", "annotations", "search_docs", "search_state")
"""Tables no worker writes: the schema's history, people's annotations, and the search
index, which the main process builds after the merge from ``search_pending``."""


@dataclass(frozen=True)
class Job:
    index: int
    """Position of the unit among those the ingest was given."""
    path: Path
    key: str
    """The unit's resolved path, as ``ingest_files`` and ``sessions.source_path`` hold it."""
    fmt: str
    size: int


@dataclass
class _Worker:
    number: int
    process: Any
    results: Connection
    folder: Path
    done: list[int] = field(default_factory=list)
    """Indices of the jobs it reported."""
    ok: bool = False
    """It finished and closed its databases."""
    generations: int = 0
    """How many databases it filled (one after the other, see ``GENERATION_MESSAGES``)."""

    @property
    def dbs(self) -> list[Path]:
        return [_db(self.folder, self.number, g) for g in range(self.generations)]


def _db(folder: Path, worker: int, generation: int) -> Path:
    return folder / f"worker-{worker}-{generation}.duckdb"


def pool_size(jobs: list[Job], requested: int | None) -> int:
    """How many worker processes to use for ``jobs`` (0: ingest them in this process).
    ``requested``: the caller's number (None: one per core and ``WORKER_MIB`` of available
    memory, when it is worth it)."""
    if requested is not None and requested <= 1:
        return 0
    if len(jobs) < 2 or not sys.platform.startswith("linux"):
        return 0
    if requested is not None:
        return min(requested, len(jobs))
    total = sum(j.size for j in jobs)
    if total < MIN_BYTES or max(j.size for j in jobs) > MAX_SHARE * total:
        return 0
    n = min(machine.cores(), len(jobs), machine.available_mib() // WORKER_MIB)
    return n if n >= 2 else 0


def pool_folder(db_path: str) -> Path:
    """Where this process's workers keep their databases: beside the database, one folder
    per ingest process (another ingest must not remove it while it is used)."""
    return Path(f"{db_path}.pool-{os.getpid()}")


def remove_dead_pool_folders(db_path: str) -> None:
    """Remove the pool folders of ingests that are gone (killed): every ingest of the
    database does, whether it uses a pool or not."""
    for old in Path(db_path).parent.glob(Path(db_path).name + ".pool-*"):
        pid = old.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


IngestOne = Callable[[Any, Path, str], Any]
"""``ingest_one(ingestor, path, fmt) -> FileResult``: one unit, its errors caught."""


def run_pool(
    jobs: list[Job],
    n_workers: int,
    folder: Path,
    start_worker: Callable[[Path], Any],
    ingest_one: IngestOne,
    progress: Callable[[str, int], None] | None = None,
) -> tuple[list[_Worker], dict[int, Any]]:
    """Ingest ``jobs`` in ``n_workers`` forked processes, each into databases in ``folder``
    that ``start_worker(db_path)`` opens and returns an ``Ingestor`` for. Returns the workers
    and the ``FileResult`` of each job they reported (by job index). The caller must hold no
    DuckDB connection: a fork copies a database's threads' locks, not its threads."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("i", 0)
    for stream in (sys.stdout, sys.stderr):  # the children must not write out our buffers again
        if stream is not None:
            stream.flush()
    workers: list[_Worker] = []
    results: dict[int, Any] = {}
    by_index = {j.index: j for j in jobs}
    try:
        for k in range(n_workers):
            receive, send = ctx.Pipe(duplex=False)
            process = ctx.Process(
                target=_serve,
                args=(jobs, counter, folder, k, start_worker, ingest_one, send, os.getpid()),
                name=f"transcripts-ingest-{k}",
            )
            with warnings.catch_warnings():
                # Python >= 3.12 warns about fork() in a process with threads (a progress bar,
                # a notebook's); the child runs only this package's code and leaves with
                # os._exit, and no DuckDB connection is open here (see above).
                warnings.filterwarnings(
                    "ignore", message=r".*fork\(\).*", category=DeprecationWarning
                )
                process.start()
            send.close()
            workers.append(_Worker(k, process, receive, folder))
        open_ends = {w.results: w for w in workers}
        while open_ends:
            for ready in wait(list(open_ends)):
                end = cast(Connection, ready)
                worker = open_ends[end]
                try:
                    message: Any = end.recv()
                except (EOFError, OSError):
                    del open_ends[end]
                    continue
                if message[0] == "file":
                    _, index, result = message
                    worker.done.append(index)
                    results[index] = result
                    if progress is not None:
                        progress(str(by_index[index].path), by_index[index].size)
                elif message[0] == "done":
                    worker.ok, worker.generations = True, message[1]
                    for stage, seconds in message[2].items():  # (summed over workers)
                        TIMINGS[f"{stage} (ingest workers)"] += seconds
                    for stage, mib in message[3].items():
                        key = f"{stage} (ingest workers)"
                        PEAK_RSS_MIB[key] = max(PEAK_RSS_MIB.get(key, 0.0), mib)
                elif message[0] == "failed":
                    warnings.warn(
                        f"ingest worker {worker.number} failed ({message[1]}); its files are "
                        "ingested in the main process", RuntimeWarning, stacklevel=2,
                    )
        for worker in workers:
            worker.process.join()
            if worker.process.exitcode != 0:
                worker.ok = False
    except BaseException:
        for worker in workers:
            worker.process.terminate()
        for worker in workers:
            worker.process.join()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        for worker in workers:
            worker.results.close()
    return workers, results


def _serve(
    jobs: list[Job],
    counter: Any,
    folder: Path,
    number: int,
    start_worker: Callable[[Path], Any],
    ingest_one: IngestOne,
    results: Connection,
    parent: int,
) -> None:
    """A worker: take the next job until none is left; report each file, then its timings.
    Fills one database after the other (``GENERATION_MESSAGES``); the sessions of the full
    ones are claimed in the next as if they were there (``Ingestor.outside``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    machine.die_with_parent(parent)
    # (the parent's progress bar may have replaced them, and its thread is not here)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    TIMINGS.clear()
    PEAK_RSS_MIB.clear()
    ingestor: Any = None
    generations = held = 0
    try:
        while True:
            with counter.get_lock():
                taken = counter.value
                counter.value = taken + 1
            if taken >= len(jobs):
                break
            if ingestor is None:
                ingestor = start_worker(_db(folder, number, generations))
                generations += 1
            job = jobs[taken]
            result = ingest_one(ingestor, job.path, job.fmt)
            results.send(("file", job.index, result))
            held += result.messages
            if held >= GENERATION_MESSAGES:
                full = ingestor.con.execute("SELECT session_id, source_path FROM sessions")
                ingestor.outside.update(full.fetchall())
                ingestor.con.close()
                ingestor, held = None, 0
        if ingestor is not None:
            ingestor.con.close()
        results.send(("done", generations, dict(TIMINGS), dict(PEAK_RSS_MIB)))
    except BaseException as exc:  # noqa: BLE001 - reported; the parent ingests its files
        try:
            results.send(("failed", f"{type(exc).__name__}: {exc}"))
        except Exception:  # noqa: S110 - the parent is gone
            pass
    finally:
        results.close()
        os._exit(0)  # no atexit handlers, flushes or finalizers of the parent's objects


def left_out(workers: list[_Worker], jobs: list[Job]) -> dict[Path, set[int]]:
    """Per database of the workers that finished, the jobs whose files must not be merged:
    each holds a session id that a file earlier in order, in another database, holds too."""
    by_key = {j.key: j.index for j in jobs}
    holders: dict[str, list[tuple[int, Path]]] = {}  # session_id -> [(job index, database)]
    for db in [db for w in workers if w.ok for db in w.dbs]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            rows = con.execute("SELECT session_id, source_path FROM sessions").fetchall()
        finally:
            con.close()
        for session_id, source_path in rows:
            if source_path in by_key:
                holders.setdefault(session_id, []).append((by_key[source_path], db))
    out: dict[Path, set[int]] = {}
    for found in holders.values():
        for index, db in sorted(found)[1:]:
            out.setdefault(db, set()).add(index)
    return out


def merge(
    con: duckdb.DuckDBPyConnection,
    workers: list[_Worker],
    jobs: list[Job],
    delete_path: Callable[[duckdb.DuckDBPyConnection, str], None],
) -> set[int]:
    """Copy the rows of every finished worker's databases into ``con``'s database, one
    transaction each; returns the job indices left for the main process (files of failed
    workers and every file after the first of them, and the later of two files sharing a
    session id)."""
    by_index = {j.index: j for j in jobs}
    redo = {i for w in workers if not w.ok for i in w.done}
    redo |= {j.index for j in jobs} - {i for w in workers for i in w.done}  # never reported
    excluded = left_out(workers, jobs)
    # A redone file may hold a session id that a later file, merged, would keep instead of
    # it: every file after the first redone one is redone too, in order.
    first = min(redo) if redo else None
    with timed("merge worker databases"):
        for worker in workers:
            if not worker.ok:
                continue
            later = {i for i in worker.done if first is not None and i > first}
            for db in worker.dbs:
                drop = excluded.get(db, set()) | later  # (a path not in ``db``: a no-op)
                if drop:
                    wcon = duckdb.connect(str(db))
                    try:
                        for index in sorted(drop):
                            delete_path(wcon, by_index[index].key)
                    finally:
                        wcon.close()
                    redo |= drop
                _copy(con, db)
    return redo


def _copy(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    alias = "ingest_worker"
    con.execute(f"ATTACH {sql_string(db)} AS {alias} (READ_ONLY)")
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            for table in MERGED_TABLES:  # (the same migrations made both: same columns)
                con.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM {alias}.main.{table}")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        con.execute(f"DETACH {alias}")
