"""The SQL console's sandbox: one read-only statement, no file/network access."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from conftest_app import build_app_db

from analytics.explore.sandbox import (
    SqlRefusedError,
    check_statement,
    run_readonly_sql,
    sandbox_connection,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app_db(tmp_path_factory.mktemp("sandbox") / "fixture.duckdb")


@pytest.fixture
def box(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = sandbox_connection(db)
    yield con
    con.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM messages",
        "WITH s AS (SELECT * FROM sessions) SELECT session_id FROM s",
        "FROM sessions SELECT title",
        "DESCRIBE messages",
        "SHOW TABLES",
        "SUMMARIZE tags",
        "EXPLAIN SELECT * FROM tags",
        "VALUES (1), (2)",
        "  select 1 ;  ",
    ],
)
def test_read_only_statements_run(box: duckdb.DuckDBPyConnection, sql: str) -> None:
    assert not run_readonly_sql(box, sql).empty


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("INSERT INTO sessions (session_id) VALUES ('x')", "INSERT"),
        ("UPDATE messages SET text = ''", "UPDATE"),
        ("DELETE FROM tags", "DELETE"),
        ("DROP TABLE tags", "DROP"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("ATTACH '/tmp/other.duckdb' AS o", "ATTACH"),
        ("COPY sessions TO '/tmp/leak.csv'", "COPY"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
        ("SET enable_external_access = true", "SET"),
        ("CALL pragma_version()", "CALL"),
        ("EXPORT DATABASE '/tmp/dump'", "EXPORT"),
    ],
)
def test_other_statements_are_refused(box: duckdb.DuckDBPyConnection, sql: str, kind: str) -> None:
    with pytest.raises(SqlRefusedError, match=f"Refused a {kind}") as err:
        run_readonly_sql(box, sql)
    assert "read-only" in str(err.value)


def test_several_statements_are_refused(box: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(SqlRefusedError, match="one statement at a time.*got 2"):
        run_readonly_sql(box, "SELECT 1; DROP TABLE tags")
    with pytest.raises(SqlRefusedError, match="one statement"):  # PIVOT expands to CREATE+SELECT
        run_readonly_sql(box, "PIVOT tags ON tag")


def test_empty_and_invalid_sql(box: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(SqlRefusedError, match="Enter a query"):
        check_statement(box, "   ")
    with pytest.raises(SqlRefusedError, match="Syntax error"):
        run_readonly_sql(box, "SELEC 1")
    with pytest.raises(SqlRefusedError, match="Query failed.*no_such_table"):
        run_readonly_sql(box, "SELECT * FROM no_such_table")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_parquet('http://example.com/x.parquet')",
        "SELECT * FROM read_json_auto('/etc/hostname')",
    ],
)
def test_file_and_network_access_fail_with_a_clear_message(
    box: duckdb.DuckDBPyConnection, sql: str
) -> None:
    with pytest.raises(SqlRefusedError, match="cannot read or write files"):
        run_readonly_sql(box, sql)


def test_sandbox_settings_are_locked(box: duckdb.DuckDBPyConnection) -> None:
    row = box.execute("SELECT current_setting('enable_external_access')").fetchone()
    assert row is not None and row[0] is False
    with pytest.raises(duckdb.Error):
        box.execute("SET enable_external_access = true")


def test_row_limit_marks_truncation(box: duckdb.DuckDBPyConnection) -> None:
    df = run_readonly_sql(box, "SELECT * FROM range(50)", row_limit=10)
    assert len(df) == 10 and df.attrs["truncated"] is True
    df = run_readonly_sql(box, "SELECT * FROM range(5)", row_limit=10)
    assert len(df) == 5 and df.attrs["truncated"] is False


def test_long_query_is_interrupted(box: duckdb.DuckDBPyConnection) -> None:
    slow = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000) b"
    with pytest.raises(SqlRefusedError, match="stopped after 0.2 s"):
        run_readonly_sql(box, slow, timeout_s=0.2)


def test_plain_connection_gets_its_own_sandbox(db: Path) -> None:
    """Given the app's ordinary connection, the query still runs fenced, and the
    caller's connection keeps its settings."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        with pytest.raises(SqlRefusedError, match="cannot read or write files"):
            run_readonly_sql(con, "SELECT * FROM read_csv('/etc/passwd')")
        assert run_readonly_sql(con, "SELECT count(*) AS n FROM sessions")["n"].iloc[0] == 3
        row = con.execute("SELECT current_setting('enable_external_access')").fetchone()
        assert row is not None and row[0] is True
    finally:
        con.close()


def test_path_argument_and_database_untouched(db: Path) -> None:
    for sql in ("DELETE FROM messages", "COPY messages TO '/tmp/m.csv'"):
        with pytest.raises(SqlRefusedError):
            run_readonly_sql(str(db), sql)
    assert run_readonly_sql(db, "SELECT count(*) AS n FROM messages")["n"].iloc[0] == 23
    assert not Path("/tmp/m.csv").exists() or Path("/tmp/m.csv").stat().st_size == 0


def test_in_memory_connection_is_refused() -> None:
    con = duckdb.connect()
    try:
        with pytest.raises(SqlRefusedError, match="needs a database file"):
            run_readonly_sql(con, "SELECT 1")
    finally:
        con.close()
