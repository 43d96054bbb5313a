"""Schema migrations: ordered, recorded, and an old database is brought up to date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from analytics.errors import DatabaseError, DatabaseLockedError
from analytics.store import db, migrations
from analytics.store.db import connect


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def test_an_old_database_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    migrations.applied(con)
    for m in migrations.MIGRATIONS[:2]:  # a database written before redactions/search existed
        m(con)
        con.execute("INSERT INTO _migrations VALUES (?, now())", [m.__name__])
    con.execute(
        "INSERT INTO sessions (session_id, source_format, native_id, source_path) "
        "VALUES ('codex:x', 'codex', 'x', '/tmp/x.jsonl')"
    )
    con.close()

    con = connect(db, read_only=False)
    names = [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    assert names == sorted(m.__name__ for m in migrations.MIGRATIONS)
    assert {"redactions", "search_docs", "analysis_state"} <= _tables(con)
    assert con.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
    con.close()


def test_migrating_twice_does_nothing(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    assert migrations.migrate(con) == [m.__name__ for m in migrations.MIGRATIONS]
    assert migrations.migrate(con) == []


def test_read_only_connections_never_migrate(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    con = duckdb.connect(str(db))
    migrations.applied(con)
    con.close()
    try:
        connect(db, read_only=True)
    except DatabaseError as exc:
        assert "transcripts ingest" in str(exc)
    else:
        raise AssertionError("a database without the schema must be refused, not migrated")
    con = duckdb.connect(str(db), read_only=True)
    assert "sessions" not in _tables(con)
    con.close()


def _row_groups(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(
        f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{table}')"
    ).fetchone()
    return int(row[0]) if row else 0


def test_an_exclusive_connection_writes_smaller_row_groups(tmp_path: Path) -> None:
    rows = 3 * db.EXCLUSIVE_ROW_GROUP_ROWS
    for exclusive, groups in ((False, 1), (True, 3)):
        path = tmp_path / f"{exclusive}.duckdb"
        con = connect(path, read_only=False, exclusive=exclusive)
        con.execute(f"CREATE TABLE t AS SELECT range AS x FROM range({rows})")
        con.close()
        con = connect(path)  # a plain file, read as any other
        assert _row_groups(con, "t") == groups
        assert con.execute("SELECT count(*) FROM sessions").fetchone() == (0,)  # migrated
        con.close()


def test_an_exclusive_writer_is_locked_out_like_any_other(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    connect(path, read_only=False).close()
    code = (
        "import sys, time; from analytics.store.db import connect; "
        f"c = connect({str(path)!r}, read_only=False); print('open', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(DatabaseLockedError):
            connect(path, read_only=False, wait_s=0.2, exclusive=True)
    finally:
        holder.kill()
        holder.wait()


def _keys(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {
        r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    }


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[object, ...]]:
    return con.execute(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = ? ORDER BY ordinal_position", [table]
    ).fetchall()


def test_per_file_tables_lose_their_keys_and_keep_rows_and_columns(tmp_path: Path) -> None:
    """The tables written once per file or session have no primary key (an index makes
    DuckDB start a new row group after every close, see test_ingest); an old database's
    rows, column types and NOT NULLs are kept."""
    tables = ("sessions", "ingest_files", "analysis_state")
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    migrations.applied(con)
    for m in migrations.MIGRATIONS[:7]:  # as released before the keys were dropped
        m(con)
        con.execute("INSERT INTO _migrations VALUES (?, now())", [m.__name__])
    assert set(tables) <= _keys(con)
    before = {t: _columns(con, t) for t in tables}
    after = before | {"ingest_files": [*before["ingest_files"], ("parser_version", "INTEGER", "YES")]}
    con.execute(
        "INSERT INTO sessions (session_id, source_format, native_id, source_path, n_messages) "
        "VALUES ('codex:x', 'codex', 'x', '/tmp/x.jsonl', 3)"
    )
    con.execute("INSERT INTO ingest_files (path, sha256, bytes) VALUES ('/tmp/x.jsonl', 'ab', 7)")
    con.execute("INSERT INTO analysis_state VALUES ('codex:x', 'tooling', '{\"a\": 1}')")
    con.close()

    con = connect(old, read_only=False)
    try:
        assert not set(tables) & _keys(con)
        assert {t: _columns(con, t) for t in tables} == after  # (m009 adds one column)
        assert con.execute("SELECT session_id, n_messages FROM sessions").fetchall() == [("codex:x", 3)]
        assert con.execute("SELECT path, bytes FROM ingest_files").fetchall() == [("/tmp/x.jsonl", 7)]
        assert con.execute("SELECT state->>'a' FROM analysis_state").fetchall() == [("1",)]
    finally:
        con.close()
    fresh = connect(tmp_path / "new.duckdb", read_only=False)
    try:
        assert not set(tables) & _keys(fresh)
        assert {t: _columns(fresh, t) for t in tables} == after
    finally:
        fresh.close()


def test_creating_a_database_imports_no_pandas(tmp_path: Path) -> None:
    """DuckDB imports pandas (a third of a second) to look at any query parameter: the
    migrations bind none, so a command that never needs pandas does not pay for it."""
    code = (
        "import sys; from analytics.store.db import connect; "
        f"connect({str(tmp_path / 'new.duckdb')!r}, read_only=False).close(); "
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
