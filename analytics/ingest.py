"""The pipeline: source files -> parsers -> records -> analysers -> DuckDB.

One transaction per file: a reader never sees a half-ingested file, and a
crash mid-file leaves the database as it was before that file. (New files
ingested by a pool of worker processes, ``ingest_pool.py``, come in one
transaction per worker database: whole files still.)
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import duckdb
import orjson

from analytics import machine
from analytics.errors import AnalyticsError, DatabaseLockedError, SourceError, is_interrupt
from analytics.formats import FORMATS, PARSER_VERSIONS, UTF8_BOM
from analytics.gcpause import no_cyclic_gc, thaw
from analytics.ingest_pool import (
    Job,
    merge,
    pool_folder,
    pool_size,
    remove_dead_pool_folders,
    run_pool,
)
from analytics.sources.compressed import compression_of
from analytics.sources.encoding import path_text, transcoded, utf16_codec
from analytics.store.db import connect, default_db, sql_string
from analytics.timing import report as report_timings
from analytics.timing import timed

if TYPE_CHECKING:  # (imported when a file is loaded, not for no-op runs)
    from analytics.ingest_load import FileLoader
    from analytics.models import Ledger, Resume
    from analytics.sources.detect import Passed
    from analytics.store.writer import Staging

STAGE_ABOVE = 192 * 2**20
"""Files with more new bytes than this are staged through Parquet (bounded memory: DuckDB
holds an open transaction's rows in memory). Below it rows go straight in, which lets the
analysis run while the file is parsed; a 190 MB file peaks at about 1 GB that way."""
STAGE_ABOVE_UNANALYSED = 64 * 2**20
"""The same when nothing is analysed: no stream needs the rows before the commit, so files
are staged sooner (less memory, and no slower)."""
RELEASE_LOCK_EVERY_S = 1.0
SESSION_TABLES = (
    "messages", "tool_calls", "tags", "polling_loops", "launches", "server_events",
    "measurements", "campaigns", "levers", "readiness_claims", "redactions", "search_docs",
    "search_pending",
    "analysis_state",
)

Progress = Callable[[str, int], None]
"""Called with (path, bytes just finished)."""


@dataclass
class FileResult:
    path: str
    format: str | None
    status: str
    """ingested | appended | unchanged | skipped | error"""
    sessions: int = 0
    messages: int = 0
    records_read: int = 0
    records_stored: int = 0
    records_quarantined: int = 0
    error: str | None = None
    note: str | None = None
    """Why a file was skipped."""
    reread: bool = False
    """Ingested again though unchanged: it was stored by another version of its format's
    parser (``analytics.formats.PARSER_VERSIONS``)."""


@dataclass
class AgentFiles:
    """An agent's home folder whose own files (settings, history, logs, snapshots…) a walk
    did not read: they are no transcripts (``sources/homes.py``)."""

    path: str
    """The home folder."""
    agent: str
    entries: list[str] = field(default_factory=list)
    """The entries not read, under the home (a folder with a trailing ``/``)."""

    @property
    def note(self) -> str:
        """One line for the user: what was not read and why."""
        shown = ", ".join(sorted(self.entries)[:NOTED_ENTRIES])
        more = len(self.entries) - NOTED_ENTRIES
        return (f"{self.agent}'s own files, not transcripts, were not read: {shown}"
                + (f" and {more} more" if more > 0 else ""))


NOTED_ENTRIES = 6
"""Entries an agent's home note names (the others are counted)."""


@dataclass
class IngestSummary:
    db: str
    files: list[FileResult] = field(default_factory=list)
    agent_files: list[AgentFiles] = field(default_factory=list)
    """The agents' home folders met, with their own files that were not read."""

    @property
    def errors(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "error"]

    @property
    def skipped(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "skipped"]

    def totals(self) -> dict[str, int]:
        ok = [f for f in self.files if f.status != "error"]
        return {
            "files": len(self.files),
            "ingested": sum(f.status in ("ingested", "appended") for f in ok),
            "unchanged": sum(f.status == "unchanged" for f in ok),
            "reread": sum(f.reread for f in ok),
            "skipped": len(self.skipped),
            "errors": len(self.errors),
            "sessions": sum(f.sessions for f in ok),
            "messages": sum(f.messages for f in ok),
            "records_read": sum(f.records_read for f in ok),
            "quarantined": sum(f.records_quarantined for f in ok),
        }


# ---------------------------------------------------------------------------
# File identity
# ---------------------------------------------------------------------------


def _unit_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    extra = [Path(str(path) + "-wal")] if path.suffix == ".db" else []
    return [path] + [p for p in extra if p.exists()]


def load_threads() -> int:
    """DuckDB's threads while a file is parsed: all cores but two, at least one. The parse
    keeps a core busy, and so does the tagging worker; DuckDB threads on those cores only
    take CPU from them. On two cores, one thread instead of two cut the ingest process's CPU
    by a sixth (a second of 6.9 s on the 100k-record benchmark) and its wall time by 0.4–0.8 s,
    with the same rows stored."""
    return max(1, machine.cores() - 2)


@contextmanager
def parse_threads(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB on ``load_threads()`` threads at most meanwhile (an ingest pool's worker gives
    it fewer); its setting is back afterwards. After the parse (the bulk insert of a staged
    file, the session analysis, the commit) the cores are DuckDB's again."""
    row = con.execute("SELECT current_setting('threads')").fetchone()
    threads = int(row[0]) if row is not None else None
    if threads is not None:
        con.execute(f"SET threads = {min(threads, load_threads())}")
    try:
        yield
    finally:
        if threads is not None:
            with contextlib.suppress(duckdb.Error):  # (a failed parse says why, not this)
                con.execute(f"SET threads = {threads}")


def fingerprint(path: Path) -> tuple[int, float]:
    """(bytes, newest mtime) of a file or folder unit."""
    files = _unit_files(path)
    size = sum(p.stat().st_size for p in files)
    mtime = max((p.stat().st_mtime for p in files), default=0.0)
    return size, mtime


_HASHING = ThreadPoolExecutor(1, thread_name_prefix="transcripts-hash")
"""Hashes files beside their load (see ``Ingestor.ingest_unit``, ``_HashOnFreeCore``)."""


class _HashOnFreeCore:
    """The sha256 of a file's first ``size`` bytes, hashed on the hashing thread once
    :meth:`start` is called, i.e. once a core is free, or once asked for (:meth:`result`).

    A large file is parsed with the tagging worker on the second core: both cores are
    busy until the worker answers its last chunk (or this process waits for it), and a
    hash (0.1-0.2 s for 170 MB) taken meanwhile takes its time from one of them; the
    ingest process's work after that (the readiness verdicts, the session analysis) leaves
    the second core idle."""

    def __init__(self, path: Path, size: int) -> None:
        self._go, self._cancel = threading.Event(), threading.Event()
        self._hashed = _HASHING.submit(self._hash, path, size)

    def _hash(self, path: Path, size: int) -> str:
        self._go.wait()
        return content_sha(path, size, self._cancel)

    def start(self) -> None:
        self._go.set()

    def result(self) -> str:
        self._go.set()
        return self._hashed.result()

    def cancel(self) -> None:
        """Not needed (a failed load): stop, or never start."""
        self._cancel.set()
        self._go.set()


def content_sha(
    path: Path, limit: int | None = None, cancel: threading.Event | None = None
) -> str:
    """sha256 of a file (its first ``limit`` bytes if given, reading no further) or of a
    folder's files; stops early, with a meaningless digest, once ``cancel`` is set."""
    if limit is None:
        return content_shas(path)[0]
    if not path.is_file():  # (a folder: its first ``limit`` bytes as content_shas counts them)
        return content_shas(path, [limit])[1][limit]
    h = hashlib.sha256()
    left = limit
    with path.open("rb") as f:
        while left > 0 and not (cancel is not None and cancel.is_set()):
            chunk = f.read(min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def content_shas(path: Path, marks: Iterable[int] = ()) -> tuple[str, dict[int, str]]:
    """sha256 of a file or folder unit and, for a file, of its first ``mark`` bytes for
    each of ``marks`` — all in one read."""
    h = hashlib.sha256()
    at: dict[int, str] = {}
    pending = sorted(set(marks))
    for p in _unit_files(path):
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode() + b"\0")
        pos = 0
        with p.open("rb") as f:
            while True:
                while pending and pending[0] == pos:
                    at[pending.pop(0)] = h.copy().hexdigest()
                size = 1 << 20 if not pending else min(1 << 20, pending[0] - pos)
                chunk = f.read(size)
                if not chunk:
                    break
                h.update(chunk)
                pos += len(chunk)
    digest = h.hexdigest()
    for mark in pending:  # past the end: the whole content
        at[mark] = digest
    return digest, at


# ---------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------


def _delete_path(con: duckdb.DuckDBPyConnection, path: str) -> None:
    sids = [r[0] for r in con.execute(
        "SELECT session_id FROM sessions WHERE source_path = ?", [path]).fetchall()]
    if sids:
        for table in SESSION_TABLES:
            con.execute(f"DELETE FROM {table} WHERE list_contains(?, session_id)", [sids])
        con.execute("DELETE FROM sessions WHERE list_contains(?, session_id)", [sids])
    con.execute("DELETE FROM raw_records WHERE path = ?", [path])
    con.execute("DELETE FROM quarantine WHERE path = ?", [path])
    con.execute("DELETE FROM redactions WHERE path = ?", [path])
    con.execute("DELETE FROM ingest_files WHERE path = ?", [path])


def _previous(con: duckdb.DuckDBPyConnection, path: str) -> dict[str, Any] | None:
    cur = con.execute(f"SELECT * FROM ingest_files WHERE path = {sql_string(path)}")
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))


class _PrefixChanged(Exception):
    """A file's part already stored changed: what was appended cannot be loaded alone."""


@dataclass
class Warm:
    """What an ingest loads on first use (the redactor; the analyser with spaCy and the
    compiled patterns). Given to the next ``ingest`` call, it is not loaded again:
    `transcripts ingest --watch` pays for it once."""

    redactor: Any | None = None
    analyser: Any | None = None


class Ingestor:
    """Ingests units one by one into an open writable connection."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        fmt: str = "auto",
        redact: bool = True,
        rules: Path | None = None,
        analyse: bool = True,
        reanalyse: bool = False,
        staging_dir: Path | None = None,
        loaded: Warm | None = None,
    ) -> None:
        self.con = con
        self.reanalyse = reanalyse
        self.staging_dir = staging_dir
        self.fmt = fmt
        self._redact = redact
        self._analyse = analyse
        self._rules = rules
        self.loaded = loaded or Warm()
        self.outside: dict[str, str] = {}
        """Sessions (id -> source path) held by a database this one will be merged into
        (an ingest worker's, see ``ingest_pool.py``): claimed as if they were here."""
        if self.loaded.analyser is not None:
            # Per-session tooling state is re-read from the database: another process may
            # have ingested the session since the analyser last saw it.
            self.loaded.analyser.forget_sessions()

    # Built on first use: a run where every file is unchanged never loads spaCy.
    @property
    def redactor(self) -> Any | None:
        if self._redact and self.loaded.redactor is None:
            from analytics.redact import Redactor

            self.loaded.redactor = Redactor()
        return self.loaded.redactor if self._redact else None

    @property
    def analyser(self) -> Any | None:
        loaded = self.loaded.analyser
        if self._analyse and (loaded is None or loaded.rules != self._rules):
            from analytics.analysis.run import Analyser  # (other rules: another tagger)

            self.loaded.analyser = Analyser(rules=self._rules)
        return self.loaded.analyser if self._analyse else None

    def ingest_unit(self, path: Path, fmt: str) -> FileResult:
        from analytics.sources.detect import get_module

        key = path_text(path.resolve())
        size, mtime = fingerprint(path)
        prev = _previous(self.con, key)
        # (a file stored by another parser version is read again whole, as a changed one)
        version = PARSER_VERSIONS.get(fmt)
        current = prev is not None and version is not None and prev["parser_version"] == version
        if current and prev and (prev["bytes"], prev["mtime"], prev["format"]) == (
            size, mtime, fmt
        ):
            return self._unchanged(key, fmt, prev)
        module = get_module(fmt)  # (the parser: not imported for an unchanged file)
        # (a compressed file is read through a decompressed copy, whole: see compressed.py)
        kind = compression_of(path) if path.is_file() else None
        if prev is None and path.is_file():
            # Nothing stored to compare with: the file (its first ``size`` bytes) is hashed
            # on a thread as soon as a core is free; hashlib and reads release the GIL.
            hashing = _HashOnFreeCore(path, size)
            try:
                return self._load_in_transaction(
                    path, key, fmt, module, size, mtime, hashing.result, kind=kind,
                    core_free=hashing.start)
            except BaseException:
                hashing.cancel()  # (a failed file: its hash is not needed, and not waited for)
                raise
        appendable = getattr(module, "APPENDABLE", False) and path.is_file() and current
        appendable = appendable and kind is None
        mark = int(prev["end_offset"] or 0) if prev and appendable else 0
        if prev and appendable and prev["format"] == fmt and size > mark > 0 and (
            size != prev["bytes"]  # (so not unchanged: its hash differs from the stored one)
        ):
            return self._append(path, key, fmt, module, size, mtime, prev, mark)
        sha, prefix = content_shas(path, [mark] if mark else [])
        same = prev is not None and prev["sha256"] == sha and prev["format"] == fmt
        if prev is not None and same and current:
            self.con.execute("UPDATE ingest_files SET mtime = ? WHERE path = ?", [mtime, key])
            return self._unchanged(key, fmt, prev)
        resume = None
        if (
            prev
            and appendable
            and prev["format"] == fmt
            and size > mark > 0
            and prev["prefix_sha256"] == prefix.get(mark)
        ):
            resume = self._resume_from(key, prev)
        result = self._load_in_transaction(
            path, key, fmt, module, size, mtime, lambda: sha, prev, resume, kind)
        result.reread = same  # (unchanged, but stored by another parser version)
        return result

    def _append(
        self, path: Path, key: str, fmt: str, module: Any, size: int, mtime: float,
        prev: dict[str, Any], mark: int,
    ) -> FileResult:
        """Load what was appended to a stored file past ``mark`` (the end of what was read
        of it) while the file is hashed on a thread (hashlib and reads release the GIL): the
        hash of its first ``mark`` bytes, checked before the commit, confirms that the
        stored part is unchanged. A file whose first ``mark`` bytes changed is loaded again
        whole, the resumed load rolled back."""
        hashing = _HASHING.submit(content_shas, path, [mark])

        def checked_sha() -> str:
            sha, prefix = hashing.result()
            if prefix[mark] != prev["prefix_sha256"]:
                raise _PrefixChanged(key)
            return sha

        try:
            return self._load_in_transaction(
                path, key, fmt, module, size, mtime, checked_sha, prev,
                self._resume_from(key, prev))
        except Exception:
            sha, prefix = hashing.result()
            if prefix[mark] == prev["prefix_sha256"]:
                raise
        if self.loaded.analyser is not None:
            self.loaded.analyser.forget_sessions()  # (what the rolled-back load kept in memory)
        return self._load_in_transaction(path, key, fmt, module, size, mtime, lambda: sha, prev)

    def _load_in_transaction(
        self, path: Path, key: str, fmt: str, module: Any, size: int, mtime: float,
        sha_of: Callable[[], str], prev: dict[str, Any] | None = None,
        resume: Resume | None = None, kind: str | None = None,
        core_free: Callable[[], object] | None = None,
    ) -> FileResult:
        """``_load`` in a transaction of its own; a file compressed with ``kind`` is read
        through a decompressed copy."""
        with self._readable(path, key, kind) as readable:
            self.con.execute("BEGIN TRANSACTION")
            try:
                result = self._load(
                    readable, key, fmt, module, size, mtime, sha_of, prev, resume,
                    kind is not None, core_free)
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
        return result

    @contextmanager
    def _readable(self, path: Path, key: str, kind: str | None) -> Iterator[Path]:
        """``path`` itself, or (``kind`` set) a decompressed copy made beside the database,
        as staging is (not in the staging folder, which a large file's staging removes when
        it is done), removed on exit."""
        if kind is None:
            yield path
            return
        from analytics.sources.compressed import DECOMPRESS_ERRORS, decompressed, unreadable

        near = self.staging_dir.parent if self.staging_dir is not None else None
        with contextlib.ExitStack() as stack:
            try:
                plain = stack.enter_context(decompressed(path, kind, near))
            except DECOMPRESS_ERRORS as exc:
                raise SourceError(key, unreadable(kind, path.name, exc)) from exc
            yield plain

    def _unchanged(self, key: str, fmt: str, prev: dict[str, Any]) -> FileResult:
        if self._analyse and (self.reanalyse or self._rules is not None):
            self._reanalyse_path(key)
        n_sessions, n_messages = self._stored_counts(key)
        return FileResult(
            key, fmt, "unchanged", n_sessions, n_messages, prev["records_read"],
            prev["records_stored"], prev["records_quarantined"],
        )

    def _stored_counts(self, key: str) -> tuple[int, int]:
        """(sessions, messages) stored from one source path."""
        row = self.con.execute(
            "SELECT count(DISTINCT s.session_id), count(m.msg_idx) FROM sessions s "
            f"LEFT JOIN messages m USING (session_id) WHERE s.source_path = {sql_string(key)}"
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _reanalyse_path(self, key: str) -> None:
        """Re-run every analyser over an unchanged file's sessions when asked to, or when
        they were tagged by another tagger version (e.g. with other ``--rules``)."""
        analyser = self.analyser
        assert analyser is not None
        sids = [r[0] for r in self.con.execute(
            "SELECT session_id FROM sessions WHERE source_path = ? ORDER BY 1", [key]).fetchall()]
        if not self.reanalyse:
            versions = {r[0] for r in self.con.execute(
                "SELECT DISTINCT tagger_version FROM tags WHERE list_contains(?, session_id)",
                [sids]).fetchall()}
            if versions <= {analyser.tagger.version}:
                return
        from analytics.analysis.run import SessionRun

        self.con.execute("BEGIN TRANSACTION")
        try:
            for sid in sids:
                analyser.clear_from(self.con, sid)
                analyser.run_messages(self.con, sid, 0)
                SessionRun(self.con, sid).finish()
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def _resume_from(self, key: str, prev: dict[str, Any]) -> Resume:
        from analytics.models import Resume

        rows = self.con.execute(
            "SELECT m.session_id, max(m.msg_idx) + 1 FROM messages m JOIN sessions s "
            "USING (session_id) WHERE s.source_path = ? GROUP BY 1",
            [key],
        ).fetchall()
        state = orjson.loads(prev["resume_state"]) if prev["resume_state"] else {}
        return Resume(
            offset=prev["end_offset"], line=prev["end_line"] or 0,
            next_msg_idx={r[0]: r[1] for r in rows}, state=state,
        )

    def _analyse_loaded(
        self, loader: FileLoader, touched: list[tuple[str, int]], fresh: bool = False
    ) -> None:
        """Message- and session-level analysis of what a load stored (and of the earlier
        messages whose calls it completed). ``fresh``: a file never stored before (its
        sessions have no analysis rows to replace)."""
        from analytics.analysis.run import SessionRun

        assert self.analyser is not None
        sessions = set(loader.first_idx) | {s for s, _ in touched} | set(loader.sessions)
        stream = loader.stream
        for sid in sorted(sessions):
            start = loader.first_idx.get(sid, 1 << 30)
            extra = [i for s, i in touched if s == sid]
            session = SessionRun(self.con, sid, min([start, *extra]), fresh=fresh)
            if stream is not None and stream.session_id == sid:
                # (what the session analysis reads of the messages and of the analysis
                # written already, read meanwhile)
                settled = {i for s, i in loader.settled_only if s == sid}
                stream.finish(start, extra, meanwhile=session.prepare, settled=settled)
            else:  # (the goals and claim texts the run found, without judging in two steps)
                self.analyser.run_messages(
                    self.con, sid, start, extra,
                    meanwhile=lambda _settled, seen, s=session: s.prepare(seen=seen),
                )
            session.finish()

    @staticmethod
    def _parse(
        module: Any, path: Path, ledger: Ledger, resume: Resume | None, loader: FileLoader,
        staging: Staging | None,
    ) -> list[tuple[str, int]]:
        """Parse ``path`` into ``loader``; returns what ``loader.finish`` returns. The objects
        then alive are frozen (``no_cyclic_gc``): the caller thaws them when it is done."""
        try:
            with no_cyclic_gc(freeze=True), timed("parse + redact + store"):
                with parse_threads(loader.con):
                    for item in module.parse(path, ledger, resume):
                        loader.add(item)
                return loader.finish()
        finally:
            if staging is not None:
                staging.close()

    def _load(
        self,
        path: Path,
        key: str,
        fmt: str,
        module: Any,
        size: int,
        mtime: float,
        sha_of: Callable[[], str],
        prev: dict[str, Any] | None,
        resume: Resume | None,
        whole: bool = False,
        core_free: Callable[[], object] | None = None,
    ) -> FileResult:
        """Parse, store and analyse ``path`` as the file ``key``. ``whole``: ``path`` is a
        copy of ``key`` (decompressed), whose offsets are not the file's: never appended.
        ``core_free``: called when this process leaves a core free (at once, but for a file
        whose tagging worker is forked before the parse: when that worker leaves one)."""
        from analytics.ingest_load import AnalysisStream, FileLoader
        from analytics.models import Ledger

        con = self.con
        base_read = base_stored = base_quarantined = 0
        base_unknown: dict[str, int] = {}
        if resume is None:
            if prev is not None:  # (a file never stored has no rows: its load is atomic)
                _delete_path(con, key)
        else:
            # Records past the resume point that were quarantined (a half-written last line)
            # are read again now.
            stale = con.execute(
                "DELETE FROM quarantine WHERE path = ? AND TRY_CAST(regexp_extract(location, "
                "'line (\\d+)', 1) AS BIGINT) > ? RETURNING 1",
                [key, resume.line],
            ).fetchall()
            assert prev is not None
            base_read = int(prev["records_read"]) - len(stale)
            base_stored = int(prev["records_stored"])
            base_quarantined = int(prev["records_quarantined"]) - len(stale)
            if prev["unknown_types"]:
                base_unknown = dict(orjson.loads(prev["unknown_types"]))
        outside = self.outside

        def owner_of(session_id: str) -> str | None:
            """Another file's path holding ``session_id``: asked per session of the file,
            not read for every stored session (112 ms a file among 100k sessions)."""
            found = outside.get(session_id)
            if found is not None and found != key:
                return found
            # (no parameter: binding one imports pandas, which would delay a large file's
            # tagging worker, forked next, by a quarter of a second)
            row = con.execute(
                f"SELECT source_path FROM sessions WHERE session_id = {sql_string(session_id)} "
                f"AND source_path <> {sql_string(key)} LIMIT 1"
            ).fetchone()
            return str(row[0]) if row else None

        staging = None
        stage_above = STAGE_ABOVE if self.analyser is not None else STAGE_ABOVE_UNANALYSED
        if self.staging_dir is not None and size - (resume.offset if resume else 0) > stage_above:
            from analytics.store.writer import Staging

            staging = Staging(self.staging_dir)
        loader = FileLoader(con, key, self.redactor, owner_of, staging)
        if self.analyser is not None and staging is None and resume is None:
            # Rows are in the database as they are parsed: analyse while parsing.
            loader.stream = AnalysisStream(self.analyser, con, size, core_free)
        elif core_free is not None:
            core_free()
        ledger = Ledger()
        try:
            touched = self._parse(module, path, ledger, resume, loader, staging)
            if loader.stream is not None and loader.stream.run is None:
                loader.stream.abort()  # no session was long enough: free the core now
            from analytics.store.search import add_documents

            with timed("search documents"):
                for sid in sorted(loader.first_idx):
                    add_documents(con, sid, loader.first_idx[sid])
            if self.analyser is not None:
                self._analyse_loaded(loader, touched, fresh=prev is None)
            else:
                from analytics.analysis.run import refresh_session_stats

                for sid in set(loader.first_idx) | set(loader.sessions):
                    refresh_session_stats(con, sid)
        finally:
            thaw()  # (frozen at the end of the parse)
            if loader.stream is not None:
                loader.stream.abort()  # (a no-op once its run finished)
        unknown = dict(base_unknown)
        for k, v in ledger.unknown_types.items():
            unknown[k] = unknown.get(k, 0) + v
        read = base_read + ledger.records_read
        stored = base_stored + ledger.records_stored
        quarantined = base_quarantined + ledger.records_quarantined
        end_offset = ledger.end_offset or (resume.offset if resume else 0)
        prefix_sha = None
        sha = sha_of()
        if getattr(module, "APPENDABLE", False) and (whole or transcoded(path)):
            end_offset = 0  # (offsets into its UTF-8 text, not the file: a change re-reads it)
        elif getattr(module, "APPENDABLE", False):
            prefix_sha = sha if end_offset == size else content_sha(path, end_offset)
            if end_offset > size:  # the file grew while it was parsed (a live session):
                size, sha = end_offset, prefix_sha  # what was read is what is stored
        con.execute("DELETE FROM ingest_files WHERE path = ?", [key])
        con.execute(
            "INSERT INTO ingest_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                key, sha, size, fmt, ledger.format_version or (prev or {}).get("format_version"),
                read, stored, quarantined, orjson.dumps(unknown).decode(),
                datetime.now(UTC).replace(tzinfo=None), end_offset,
                ledger.end_line or (resume.line if resume else 0), prefix_sha, mtime,
                orjson.dumps(ledger.state, default=str).decode(), PARSER_VERSIONS.get(fmt),
            ],
        )
        n_sessions, n_messages = self._stored_counts(key)
        return FileResult(
            key, fmt, "appended" if resume else "ingested", n_sessions, n_messages, read, stored,
            quarantined,
        )


def watch(
    paths: list[Path],
    interval_s: float,
    report: Callable[[IngestSummary], None],
    polls: int | None = None,
    locked: Callable[[DatabaseLockedError], None] | None = None,
    **options: Any,
) -> None:
    """Ingest ``paths`` now and again every ``interval_s`` seconds whenever a file under
    them changed (growing sessions are appended), until interrupted (or ``polls`` rounds).
    The database is open only while something is ingested, so readers get in between.
    With ``locked``, a round that finds another writer is reported to it and tried again
    at the next one (without, the error ends the watch)."""
    warm = Warm()
    seen: dict[Path, tuple[int, float]] | None = None  # the first round always ingests
    n = 0
    while polls is None or n < polls:
        n += 1
        now = _fingerprints(paths)
        if now != seen:
            try:
                report(ingest(paths, warm=warm, **options))
            except DatabaseLockedError as exc:
                if locked is None:
                    raise
                locked(exc)  # another writer: this round is tried again next time
            else:
                seen = now
                options["reanalyse"] = False  # once is enough: later rounds ingest changes
        if polls is None or n < polls:
            time.sleep(interval_s)


def _fingerprints(paths: list[Path]) -> dict[Path, tuple[int, float]]:
    """Each unit under ``paths`` (as an ingest would find them) with its fingerprint. The
    units only: the files a walk does not read (an agent's logs, its git snapshots, a
    ``.git`` folder) change all the time while the agent runs, and are no reason for a round."""
    from analytics.sources.detect import iter_unit_paths

    now = {}
    for unit in iter_unit_paths([path for path in paths if path.exists()]):
        try:
            now[unit] = fingerprint(unit)
        except OSError:
            continue
    return now


def _staging_dir(db_path: str) -> Path:
    """Where large files are staged: beside the database (the same disk; /tmp may be
    memory). Only one writer holds a database, so one fixed folder; a crash's leftovers
    are removed here, at the next ingest."""
    if db_path == ":memory:":
        return Path(tempfile.gettempdir()) / f"transcripts-staging-{os.getpid()}"
    staging = Path(db_path + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def _check_rules(rules: Path) -> None:
    """A bad custom rules file is a usage error before any file is touched."""
    from analytics.analysis.tagging import Tagger
    from analytics.errors import UsageError

    try:
        Tagger(extra_rules=rules).nlp  # noqa: B018 - builds and validates the patterns
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from exc


Stored = dict[str, tuple[int, float, str, int | None]]
"""(bytes, mtime, format, parser version) of every file an ingest stored, by resolved path."""


def _stored_units(con: duckdb.DuckDBPyConnection) -> Stored:
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in con.execute(
        "SELECT path, bytes, mtime, format, parser_version FROM ingest_files").fetchall()}


def _known_format(fmt: str, stored: Stored, unit: Path) -> str | None:
    """The format of ``unit`` without reading it: the one asked for, or the one stored
    for it when it is unchanged since (the same bytes and mtime: what
    ``Ingestor.ingest_unit`` calls unchanged). Detection costs more than the rest of a
    re-ingest of unchanged files: it imports every parser."""
    if fmt != "auto":
        return fmt
    if not stored:
        return None
    try:
        entry = stored.get(path_text(unit.resolve()))
        if entry is None or entry[:2] != fingerprint(unit):
            return None
    except (OSError, RuntimeError):  # (unreadable, a symlink loop: detection says why)
        return None
    return entry[2] if entry[2] in FORMATS else None


_BLANK = b" \t\r\n"


def is_blank(path: Path) -> bool:
    """A file with nothing but whitespace (after a byte order mark), e.g. a session an
    agent created and has not written yet. It holds no record, so it is skipped rather
    than reported: it is ingested once it has content. Reads until the first other byte
    (one small read for a file with content); a folder or an unreadable file is not blank
    (detection or the load says what is wrong with it)."""
    try:
        with path.open("rb") as f:
            chunk = f.read(4096)
            codec = utf16_codec(chunk)
            if codec is not None:
                return _blank_utf16(f, chunk[2:], codec)
            chunk = chunk.removeprefix(UTF8_BOM)
            while chunk:
                if chunk.strip(_BLANK):
                    return False
                chunk = f.read(1 << 20)
    except OSError:
        return False
    return True


def _blank_utf16(f: BinaryIO, chunk: bytes, codec: str) -> bool:
    """``is_blank`` for the rest of a UTF-16 file, ``chunk`` its first bytes after the mark."""
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    while chunk:
        if decoder.decode(chunk).strip(" \t\r\n"):
            return False
        chunk = f.read(1 << 20)
    return not decoder.decode(b"", final=True).strip(" \t\r\n")


def _first_result(
    unit: Path, chosen: str | None, error: str | None, forced: bool
) -> FileResult | None:
    """What a unit comes to before it is loaded: skipped when blank, an error when it
    cannot be ingested; None when it is to be loaded. Only a unit whose detection failed
    can be blank, unless its format was ``forced`` (``--format``: a parser would store
    an empty session for it), so other files are not read for this."""
    if (chosen is None or forced) and unit.is_file() and is_blank(unit):
        return FileResult(str(unit), None, "skipped", note="empty file, nothing to ingest yet")
    if error or chosen is None:
        return FileResult(str(unit), None, "error", error=error)
    return None


def iter_units(
    paths: Iterable[Path], fmt: str = "auto", stored: Stored | None = None,
    passed: Passed | None = None,
) -> Iterator[tuple[Path, str | None, str | None]]:
    """(path, format or None, error) for every unit under ``paths``; the files of
    ``stored`` (see ``_stored_units``) unchanged since are not detected again. ``passed``
    is told of the agents' own files in their home folders, which are not units."""
    from analytics.errors import UnknownFormatError
    from analytics.sources.detect import detect_format, iter_inputs, special_kind

    known = partial(_known_format, fmt, stored or {})
    for path in paths:
        if not path.exists():
            yield path, None, f"{path}: no such file or folder"
            continue
        for unit, detected in iter_inputs([path], known, passed):
            chosen = detected if fmt == "auto" else fmt
            if chosen is not None and fmt != "auto" and special_kind(unit) is not None:
                chosen = None  # (a forced format does not make a named pipe readable)
            if chosen is None:
                try:
                    detect_format(unit)
                    reason = str(UnknownFormatError(str(unit), list(FORMATS)))
                except AnalyticsError as exc:
                    reason = str(exc)
                yield unit, None, reason
            else:
                yield unit, chosen, None


def ingest(
    paths: Iterable[str | Path] | str | Path,
    db: str | Path | None = None,
    fmt: str = "auto",
    redact: bool = True,
    rules: str | Path | None = None,
    analyse: bool = True,
    progress: Progress | None = None,
    build_index: bool = True,
    reanalyse: bool = False,
    warm: Warm | None = None,
    workers: int | None = None,
    exclusive: bool = False,
) -> IngestSummary:
    """Parse, tag, analyse and store every transcript under ``paths``.

    Idempotent (unchanged files are skipped) and incremental (appended JSONL is read from
    where the last ingest stopped); a file stored by another version of its format's parser
    (``formats.PARSER_VERSIONS``) is read again whole. A file that fails is reported and the
    run goes on.
    ``reanalyse`` re-runs the analysers over unchanged files (after an upgrade); giving
    ``rules`` does so for files tagged by another tagger version. ``warm`` keeps the
    redactor and analyser (spaCy, compiled patterns) from one call to the next.
    ``workers``: processes for new files (default: one per core when there are several
    files worth it, see ``ingest_pool.py``; 1: this process only). ``exclusive``: this
    process holds no other connection to ``db`` (as the CLI): see ``store.db.connect``.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    from analytics.errors import UsageError

    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose one of: auto, {', '.join(FORMATS)}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be 1 or more, not {workers}")
    # (no shell expands the README's `ingest(["~/.claude/projects"], db=...)`)
    db_path = os.path.expanduser(str(db or default_db()))
    if rules is not None:
        rules = Path(rules).expanduser()
    if rules is not None and analyse:
        _check_rules(Path(rules))
    wait_s = float(os.environ.get("TRANSCRIPTS_LOCK_WAIT", "30"))
    # (the writing connection, opened again between files and after a pool)
    reopen = partial(connect, db_path, read_only=False, wait_s=wait_s, exclusive=exclusive)
    con = reopen()
    opened = time.monotonic()
    summary = IngestSummary(db=db_path)
    try:
        ingestor = Ingestor(
            con, fmt, redact, Path(rules) if rules else None, analyse, reanalyse,
            staging_dir=_staging_dir(db_path), loaded=warm,
        )
        if db_path != ":memory:":  # (a killed ingest's worker databases, as its staging)
            remove_dead_pool_folders(db_path)
        stored = _stored_units(con)
        homes: dict[Path, AgentFiles] = {}
        units = list(iter_units(
            [Path(p).expanduser() for p in paths], fmt, stored, partial(_not_read, homes)
        ))
        summary.agent_files = list(homes.values())
        _drop_superseded_storage(con, units, stored)
        results = [
            _first_result(unit, chosen, error, fmt != "auto") for unit, chosen, error in units
        ]
        ticked: set[int] = set()
        pool_possible = workers != 1 and db_path != ":memory:"  # (no stat of every unit else)
        jobs = _new_units(stored, units, results) if pool_possible else []
        n_workers = pool_size(jobs, workers)
        if n_workers:
            done, ticked = _ingest_in_pool(ingestor, db_path, reopen, jobs, n_workers, progress)
            con, opened = ingestor.con, time.monotonic()
            for index, result in done.items():
                results[index] = result
        for i, (unit, chosen, _) in enumerate(units):
            if results[i] is not None or chosen is None:
                continue
            if time.monotonic() - opened > RELEASE_LOCK_EVERY_S:
                # Let readers (the app, notebooks) in between files: DuckDB allows one
                # process at a time on a file that a writer holds.
                con.close()
                con = ingestor.con = reopen()
                opened = time.monotonic()
            results[i] = _ingest_one(ingestor, unit, chosen)
            if progress is not None and i not in ticked:
                try:
                    progress(str(unit), fingerprint(unit)[0])
                except OSError:
                    progress(str(unit), 0)
        summary.files = [r for r in results if r is not None]
        if analyse:
            from analytics.analysis.timeaccounting import create_views

            stored_now = [f.path for f in summary.files if f.status in ("ingested", "appended")]
            if stored_now:  # (nothing stored: no analysis imported, see test_ingest)
                from analytics.analysis.run import refresh_callers

                refresh_callers(con, stored_now)
            create_views(con)
        if build_index and any(f.status in ("ingested", "appended") for f in summary.files):
            from analytics.store.search import build_index as _build

            with timed("search index"):
                _build(con)
    finally:
        con.close()
        report_timings()
    return summary


def _not_read(homes: dict[Path, AgentFiles], home: Path, agent: str, entry: str) -> None:
    """Note an agent's own entry of its home that the walk did not read."""
    homes.setdefault(home, AgentFiles(str(home), agent)).entries.append(entry)


def _drop_superseded_storage(
    con: duckdb.DuckDBPyConnection,
    units: list[tuple[Path, str | None, str | None]],
    stored: Stored,
) -> None:
    """Forget a stored opencode ``storage/`` folder whose database (``opencode*.db`` beside
    it) is ingested now without it. opencode 1.2 migrated the folder into the database:
    kept, its sessions would be stored twice (the database's copies apart, as
    ``<id>@<hash>``). The database, if stored, is forgotten with it and so loaded again:
    its sessions were copies while the folder's held their ids. A folder named in the same
    run as its database stays, as asked."""
    # (opencode units only: another unit may not resolve, e.g. a symbolic link loop, which
    # is reported as such)
    keys = {path_text(unit.resolve()) for unit, chosen, _ in units if chosen == "opencode"}
    for unit, chosen, _ in units:
        if chosen != "opencode" or unit.suffix != ".db" or not unit.is_file():
            continue
        storage = path_text((unit.parent / "storage").resolve())
        if storage in stored and storage not in keys:
            forgotten = [storage, path_text(unit.resolve())]
            con.execute("BEGIN TRANSACTION")
            try:
                for path in forgotten:
                    _delete_path(con, path)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            for path in forgotten:
                stored.pop(path, None)


def _ingest_in_pool(
    ingestor: Ingestor,
    db_path: str,
    reopen: Callable[[], duckdb.DuckDBPyConnection],
    jobs: list[Job],
    n_workers: int,
    progress: Progress | None,
) -> tuple[dict[int, FileResult], set[int]]:
    """Ingest ``jobs`` in a pool of ``n_workers`` processes and merge what they stored
    (``ingest_pool.py``); ``ingestor.con`` is closed meanwhile, and ``reopen``-ed after.
    Returns the results that stand (by unit index; the other jobs are left to the caller)
    and the units ``progress`` was told of."""
    import analytics.ingest_load  # noqa: F401 - once here rather than in every worker

    con = ingestor.con
    outside = dict(con.execute("SELECT session_id, source_path FROM sessions").fetchall())
    written = _written(con)
    con.close()  # (no DuckDB threads in the parent when it forks)
    threads = max(1, machine.cores() // n_workers)
    folder = pool_folder(db_path)
    try:
        pool, done = run_pool(
            jobs, n_workers, folder, partial(_pool_worker, ingestor, outside, threads),
            _ingest_one, progress,
        )
    except OSError as exc:  # no fork (out of processes or memory): one process
        warnings.warn(f"no ingest workers ({exc}); ingesting in this process",
                      RuntimeWarning, stacklevel=2)
        pool, done = [], {}
    finally:
        con = ingestor.con = reopen()
    try:
        if pool and _written(con) != written:
            # Another writer got in while the lock was free: what the workers were told
            # the database held is stale. Their files are done here instead.
            warnings.warn("the database changed while the ingest workers ran; their files "
                          "are ingested again in this process", RuntimeWarning, stacklevel=2)
            redo = set(done)
        else:
            redo = merge(con, pool, jobs, _delete_path) if pool else set()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {i: r for i, r in done.items() if i not in redo}, set(done)


def _written(con: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """Changes whenever a file is stored (every load writes its ``ingest_files`` row)."""
    return con.execute("SELECT count(*), max(ingested_at) FROM ingest_files").fetchone()


def _ingest_one(ingestor: Ingestor, unit: Path, chosen: str) -> FileResult:
    """``ingestor.ingest_unit``, its failure a ``FileResult`` (one bad file must not stop
    the run)."""
    try:
        return ingestor.ingest_unit(unit, chosen)
    except AnalyticsError as exc:
        return FileResult(str(unit), chosen, "error", error=str(exc))
    except Exception as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc  # Ctrl-C stops the run, not just this file
        if os.environ.get("TRANSCRIPTS_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        msg = f"{unit}: {type(exc).__name__}: {first}".rstrip(": ")
        if not isinstance(exc, (OSError, duckdb.Error, ValueError)):
            msg += " (internal error; rerun with TRANSCRIPTS_DEBUG=1 for a traceback)"
        return FileResult(str(unit), chosen, "error", error=msg)


def _new_units(
    stored: Stored,
    units: list[tuple[Path, str | None, str | None]],
    results: list[FileResult | None],
) -> list[Job]:
    """The units never ingested (not in ``stored``; the first of each path), as jobs
    an ingest pool may take: those before the first unit that changed since it was stored.
    (A changed file may give up or take session ids, and which file of two keeps an id
    depends on the order: the files after it are ingested after it, in this process.)"""
    seen: set[str] = set()
    jobs: list[Job] = []
    for i, (unit, chosen, _) in enumerate(units):
        if results[i] is not None or chosen is None:
            continue
        try:
            key = path_text(unit.resolve())
            size, mtime = fingerprint(unit)
        except OSError:
            continue  # (the main process reports it)
        if key in seen:
            continue  # (a path given twice: unchanged the second time)
        seen.add(key)
        if key in stored:
            if stored[key] != (size, mtime, chosen, PARSER_VERSIONS.get(chosen)):
                break  # (changed, or stored by another parser version: read again here)
            continue
        jobs.append(Job(i, unit, key, chosen, size))
    return jobs


def _pool_worker(
    ingestor: Ingestor, outside: dict[str, str], threads: int, db: Path
) -> Ingestor:
    """In an ingest pool's worker: an ``Ingestor`` like ``ingestor`` into the database ``db``,
    whose DuckDB runs ``threads`` threads (the workers share the cores)."""
    global _HASHING
    _HASHING = ThreadPoolExecutor(1, thread_name_prefix="transcripts-hash")  # (no thread here)
    con = connect(str(db), read_only=False, exclusive=True)  # (its own file, its own process)
    con.execute(f"SET threads = {int(threads)}")
    worker = Ingestor(
        con, ingestor.fmt, ingestor._redact, ingestor._rules, ingestor._analyse,
        ingestor.reanalyse, staging_dir=_staging_dir(str(db)), loaded=ingestor.loaded,
    )
    worker.outside = outside
    return worker
