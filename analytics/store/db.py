"""Opening the DuckDB file: the one place that knows about locks and migrations."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb

from analytics.errors import DatabaseError, DatabaseLockedError
from analytics.formats import SQLITE_MAGIC
from analytics.store.migrations import migrate

DEFAULT_DB = "transcripts.duckdb"
WRITER_MEMORY_LIMIT = "400MB"
"""DuckDB's memory limit on a writing connection; ``$TRANSCRIPTS_MEMORY_LIMIT`` overrides."""
EXCLUSIVE_ROW_GROUP_ROWS = 32_768
"""Rows per row group written by an ``exclusive`` connection (DuckDB's default: 122,880).
DuckDB scans a table one row group per thread, so a table of 125k search documents is read
by two threads instead of one: the BM25 index build, which tokenises every document, takes
3.4 s instead of 5.7 s on two cores (more cores gain more). The file is a plain DuckDB file
either way; sizes stay within a percent."""


READ_WAIT_S = 3.0
"""Seconds a reader (the explorer, the CLI's read commands) waits for a writer to let go:
``ingest --watch`` holds the file only while a round ingests, a second or so."""


def sql_string(value: str | Path) -> str:
    """``value`` as a DuckDB string literal, for the places a parameter cannot go (file
    paths in ``read_parquet``/``COPY``/``ATTACH``), or should not: binding a parameter makes
    duckdb import pandas (~0.2 s), a third of a no-op re-ingest."""
    return "'" + str(value).replace("'", "''") + "'"


def default_db() -> str:
    """``$TRANSCRIPTS_DB``, else ``./transcripts.duckdb``."""
    return os.environ.get("TRANSCRIPTS_DB") or DEFAULT_DB


def _is_lock_error(exc: Exception) -> bool:
    msg = str(exc).lower()
    return "lock" in msg and ("conflicting" in msg or "could not set lock" in msg)


DUCKDB_MAGIC = b"DUCK"
"""Bytes 8-11 of every DuckDB database file (after a checksum)."""


def _refuse_other_files(path: str) -> None:
    """A file that exists and is not a DuckDB database is refused before DuckDB opens it:
    DuckDB opens an SQLite file (an agent's ``opencode.db`` given as ``--db`` by mistake)
    through its sqlite extension, downloading that first, and the schema would then be
    created inside the agent's own database."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return  # (missing, a folder, unreadable: DuckDB's own error says which)
    if len(head) < 12 or head[8:12] == DUCKDB_MAGIC:
        return  # (too short to tell, e.g. being created by another process: DuckDB's call)
    what = "an SQLite database" if head.startswith(SQLITE_MAGIC) else "not a DuckDB file"
    raise DatabaseError(
        f"{path}: {what}, not a transcripts database; point --db at a transcripts database "
        "or at a new file to create one"
    )


def _open(path: str, read_only: bool, exclusive: bool) -> duckdb.DuckDBPyConnection:
    if read_only or not exclusive or path == ":memory:":
        return duckdb.connect(path, read_only=read_only)
    con = duckdb.connect(":memory:")
    try:
        con.execute(
            f"ATTACH {sql_string(path)} AS transcripts (ROW_GROUP_SIZE {EXCLUSIVE_ROW_GROUP_ROWS})"
        )
        con.execute("USE transcripts")
    except BaseException:
        con.close()
        raise
    return con


def connect(
    db: str | Path | None = None,
    read_only: bool = True,
    wait_s: float = 0.0,
    exclusive: bool = False,
) -> duckdb.DuckDBPyConnection:
    """Open the database. Read-only connections never migrate; a writable one
    brings the schema up to date. While another process writes, retry for up
    to ``wait_s`` seconds, then raise :class:`DatabaseLockedError`.

    ``exclusive`` (writable only): the caller holds no other connection to the file in this
    process (the CLI's ingest), so it may be opened as an attached database with smaller row
    groups (``EXCLUSIVE_ROW_GROUP_ROWS``). DuckDB keeps two connections of one process from
    opening a file as two databases only for plain connects, which share one database; an
    attached file has a database of its own, which another connect in the same process
    would not share (and file locks do not keep a process from itself)."""
    path = os.path.expanduser(str(db or default_db()))  # (notebooks write "~/t.duckdb")
    if read_only and path != ":memory:" and not Path(path).exists():
        raise DatabaseError(
            f"{path}: no such database; create it with `transcripts ingest PATH --db {path}`"
        )
    if path != ":memory:":
        _refuse_other_files(path)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            con = _open(path, read_only, exclusive)
            break
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise DatabaseError(
                    f"{path}: cannot open as a DuckDB database ({str(exc).splitlines()[0]}); "
                    "check the path, or create one with `transcripts ingest PATH --db FILE`"
                ) from exc
            if time.monotonic() >= deadline:
                raise DatabaseLockedError(path) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    # DuckDB draws its own progress bar on stdout for queries over 2 s; ours is rich's, and
    # stdout belongs to the command's output (a CSV, JSON) — never DuckDB's bar.
    con.execute("SET enable_progress_bar = false")
    if read_only and path != ":memory:":
        has_schema = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'sessions'"
        ).fetchone()
        if not has_schema or not has_schema[0]:
            con.close()
            raise DatabaseError(
                f"{path}: a DuckDB file without the transcripts schema; ingest into it first "
                f"(`transcripts ingest PATH --db {path}`) or point --db at a transcripts database"
            )
    if not read_only:
        # A bound on DuckDB's buffer pool while writing (it spills to disk beyond it); with
        # large files staged through Parquet (see ingest), it bounds an ingest's memory.
        limit = os.environ.get("TRANSCRIPTS_MEMORY_LIMIT") or WRITER_MEMORY_LIMIT
        if path != ":memory:":
            con.execute(f"SET memory_limit = '{limit.replace(chr(39), '')}'")
        migrate(con)
    return con
