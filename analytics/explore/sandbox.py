"""The SQL console's sandbox: one read-only statement, no file or network access.

Three independent fences, so that one mistake does not open the others:
1. DuckDB's own parser must see exactly one SELECT or EXPLAIN statement
   (DESCRIBE, SHOW, SUMMARIZE, VALUES and FROM-first queries parse as SELECT);
2. the statement runs on a separate in-memory DuckDB instance that attaches the
   database READ_ONLY and then sets ``enable_external_access=false`` and
   ``lock_configuration=true`` (so ``read_csv('/etc/passwd')``, ATTACH, COPY,
   INSTALL and LOAD fail inside DuckDB even if the parser check were bypassed);
3. a timer interrupts the query after ``timeout_s`` and at most ``row_limit``
   rows are fetched.
"""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pandas as pd

from analytics.errors import AnalyticsError
from analytics.store.db import sql_string

ALLOWED = {"SELECT", "EXPLAIN"}
ALLOWED_WORDS = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN"


class SqlRefusedError(AnalyticsError):
    """The console refused or aborted a statement; the message says why."""


def sandbox_connection(db: str | Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory instance with ``db`` attached read-only and external access off."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"ATTACH {sql_string(db)} AS transcripts (READ_ONLY)")
        con.execute("USE transcripts")
        con.execute("SET enable_external_access = false")
        con.execute("SET enable_progress_bar = false")  # it would draw on the server's stdout
        con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:
        con.close()
        raise SqlRefusedError(f"{db}: cannot open the database for the SQL console: {exc}") from exc
    return con


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`SqlRefusedError` unless ``sql`` is one read-only statement."""
    if not sql.strip():
        raise SqlRefusedError("Enter a query, e.g. SELECT * FROM sessions LIMIT 10")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlRefusedError(f"Syntax error: {exc}") from exc
    if len(statements) != 1:
        raise SqlRefusedError(
            f"Only one statement at a time is allowed (got {len(statements)}); "
            f"remove the extra ';'-separated statements"
        )
    kind = statements[0].type.name
    if kind not in ALLOWED:
        raise SqlRefusedError(
            f"Refused a {kind} statement: the console is read-only and accepts only "
            f"{ALLOWED_WORDS} queries"
        )


def _database_path(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    if row is None or not row[0]:
        raise SqlRefusedError("The SQL console needs a database file, not an in-memory database")
    return str(row[0])


def _external_access_disabled(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute("SELECT current_setting('enable_external_access')").fetchone()
    return row is not None and str(row[0]).lower() in ("false", "0")


def run_readonly_sql(
    con: duckdb.DuckDBPyConnection | str | Path,
    sql: str,
    row_limit: int = 10000,
    timeout_s: float = 10,
) -> pd.DataFrame:
    """Run one read-only query and return at most ``row_limit`` rows.

    ``con`` may be a database path, a connection from :func:`sandbox_connection`,
    or any connection to a database file (then a sandbox on the same file is
    opened for this query, so the caller's connection keeps its own settings).
    ``df.attrs["truncated"]`` says whether rows were cut off.
    Raises :class:`SqlRefusedError` with a readable reason on any refusal or failure.
    """
    if not isinstance(con, duckdb.DuckDBPyConnection):
        box, own = sandbox_connection(con), True
    elif _external_access_disabled(con):
        box, own = con, False
    else:
        box, own = sandbox_connection(_database_path(con)), True
    try:
        check_statement(box, sql)
        return _execute_limited(box, sql, row_limit, timeout_s)
    finally:
        if own:
            box.close()


def _execute_limited(
    con: duckdb.DuckDBPyConnection, sql: str, row_limit: int, timeout_s: float
) -> pd.DataFrame:
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, stop)
    timer.start()
    try:
        rel = con.sql(sql)
        if rel is None:
            raise SqlRefusedError("The statement returned no result set")
        df = rel.limit(row_limit + 1).df()
    except duckdb.PermissionException as exc:
        raise SqlRefusedError(
            f"Refused: the console cannot read or write files, attach databases or load "
            f"extensions ({exc})"
        ) from exc
    except duckdb.Error as exc:
        if timed_out.is_set():
            raise SqlRefusedError(
                f"Query stopped after {timeout_s:g} s; add filters or a LIMIT"
            ) from exc
        raise SqlRefusedError(f"Query failed: {exc}") from exc
    finally:
        timer.cancel()
    truncated = len(df) > row_limit
    df = df.head(row_limit)
    df.attrs["truncated"] = truncated
    return df


EXAMPLE_QUERIES: dict[str, str] = {
    "Sessions by size": (
        "SELECT session_id, source_format, agent, model, n_messages, started_at\n"
        "FROM sessions\nORDER BY n_messages DESC\nLIMIT 50"
    ),
    "Tag counts": "SELECT tag, count(*) AS n\nFROM tags\nGROUP BY tag\nORDER BY n DESC",
    "Check-ins and what preceded them": (
        "SELECT t.session_id, t.msg_idx, m.text,\n"
        "       lag(m.text) OVER (PARTITION BY m.session_id ORDER BY m.msg_idx) AS previous\n"
        "FROM messages m JOIN tags t USING (session_id, msg_idx)\n"
        "WHERE t.tag = 'user_checkin'\nLIMIT 100"
    ),
    "Time spent polling": (
        "SELECT session_id, count(*) AS loops, sum(waited_s) / 60 AS waited_min,\n"
        "       count(*) FILTER (WHERE outcome = 'aborted') AS aborted\n"
        "FROM polling_loops\nGROUP BY session_id\nORDER BY waited_min DESC"
    ),
    "Levers by outcome": (
        "SELECT outcome, count(*) AS n, avg(delta_pct) AS mean_delta_pct\n"
        "FROM levers\nGROUP BY outcome\nORDER BY n DESC"
    ),
    "Premature readiness claims": (
        "SELECT session_id, msg_idx, claim_text, reason, contradicted_by_msg_idx\n"
        "FROM readiness_claims\nWHERE verdict = 'premature'"
    ),
    "Slowest tool calls": (
        "SELECT session_id, msg_idx, tool, left(command, 120) AS command, status, duration_s\n"
        "FROM tool_calls\nORDER BY duration_s DESC NULLS LAST\nLIMIT 50"
    ),
}


def schema_df(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every user table and view with its columns, for the console's side panel."""
    return con.execute(
        """
        SELECT c.table_name, c.column_name, c.data_type
        FROM information_schema.columns c
        WHERE c.table_schema = 'main' AND c.table_catalog = current_database()
          AND NOT starts_with(c.table_name, '_')
        ORDER BY c.table_name, c.ordinal_position
        """
    ).df()
