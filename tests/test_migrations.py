"""Schema migrations: ordered, recorded, and an old database is brought up to date."""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.errors import DatabaseError
from analytics.store import migrations
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
