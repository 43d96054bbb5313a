"""Ordered, recorded schema migrations.

Each migration is a function ``mNNN_name(con)``; applied ones are recorded in
``_migrations`` so opening an old database brings it up to date and opening a
current one does nothing. Never edit a released migration: add a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import duckdb

Migration = Callable[[duckdb.DuckDBPyConnection], None]


def m001_core(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE sessions (
            session_id VARCHAR PRIMARY KEY,
            source_format VARCHAR NOT NULL,
            native_id VARCHAR NOT NULL,
            source_path VARCHAR NOT NULL,
            title VARCHAR,
            agent VARCHAR,
            model VARCHAR,
            cwd VARCHAR,
            started_at TIMESTAMP,
            ended_at TIMESTAMP,
            n_messages INTEGER,
            parent_session_id VARCHAR
        );
        CREATE TABLE messages (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            parent_source_id VARCHAR,
            role VARCHAR NOT NULL,
            ts TIMESTAMP,
            text VARCHAR,
            n_chars INTEGER,
            is_sidechain BOOLEAN,
            is_compaction_summary BOOLEAN,
            error VARCHAR,
            native_type VARCHAR,
            model VARCHAR,
            location VARCHAR
        );
        CREATE TABLE tool_calls (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            call_id VARCHAR NOT NULL,
            tool VARCHAR,
            command VARCHAR,
            input VARCHAR,
            output VARCHAR,
            status VARCHAR,
            exit_code INTEGER,
            started_at TIMESTAMP,
            ended_at TIMESTAMP,
            duration_s DOUBLE,
            result_msg_idx INTEGER
        );
        CREATE TABLE raw_records (
            path VARCHAR NOT NULL,
            session_id VARCHAR,
            location VARCHAR,
            record_type VARCHAR,
            known BOOLEAN,
            ts TIMESTAMP,
            raw VARCHAR
        );
        CREATE TABLE ingest_files (
            path VARCHAR PRIMARY KEY,
            sha256 VARCHAR,
            bytes BIGINT,
            format VARCHAR,
            format_version VARCHAR,
            records_read BIGINT,
            records_stored BIGINT,
            records_quarantined BIGINT,
            unknown_types JSON,
            ingested_at TIMESTAMP,
            end_offset BIGINT,
            end_line BIGINT,
            prefix_sha256 VARCHAR,
            mtime DOUBLE,
            resume_state JSON
        );
        CREATE TABLE quarantine (
            path VARCHAR NOT NULL,
            location VARCHAR,
            error VARCHAR,
            raw VARCHAR
        );
        """
    )


def m002_analysis(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE tags (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            tag VARCHAR NOT NULL,
            score DOUBLE,
            source VARCHAR,
            evidence VARCHAR,
            start_char INTEGER,
            end_char INTEGER,
            tagger_version VARCHAR
        );
        CREATE TABLE polling_loops (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            call_id VARCHAR,
            interval_s DOUBLE,
            max_iterations INTEGER,
            max_wait_s DOUBLE,
            target VARCHAR,
            success_pattern VARCHAR,
            failure_pattern VARCHAR,
            outcome VARCHAR,
            waited_s DOUBLE
        );
        CREATE TABLE launches (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            call_id VARCHAR,
            engine VARCHAR,
            model VARCHAR,
            host VARCHAR,
            flags JSON,
            changed_flags JSON,
            env JSON,
            unknown_flags JSON
        );
        CREATE TABLE server_events (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            engine VARCHAR,
            event VARCHAR,
            detail VARCHAR,
            log_ts VARCHAR
        );
        CREATE TABLE measurements (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            metric VARCHAR,
            value DOUBLE,
            unit VARCHAR,
            label VARCHAR,
            source VARCHAR
        );
        CREATE TABLE campaigns (
            campaign_id VARCHAR,
            session_id VARCHAR NOT NULL,
            goal_text VARCHAR,
            target_metric VARCHAR,
            target_value DOUBLE,
            unit VARCHAR,
            baseline_value DOUBLE,
            best_value DOUBLE,
            start_msg_idx INTEGER,
            end_msg_idx INTEGER,
            status VARCHAR
        );
        CREATE TABLE levers (
            campaign_id VARCHAR,
            session_id VARCHAR NOT NULL,
            seq INTEGER,
            name VARCHAR,
            description VARCHAR,
            start_msg_idx INTEGER,
            end_msg_idx INTEGER,
            metric VARCHAR,
            value_before DOUBLE,
            value_after DOUBLE,
            delta_pct DOUBLE,
            outcome VARCHAR,
            evidence_msg_idx INTEGER
        );
        CREATE TABLE readiness_claims (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            claim_text VARCHAR,
            subject VARCHAR,
            verdict VARCHAR,
            reason VARCHAR,
            evidence_msg_idx JSON,
            contradicted_by_msg_idx INTEGER
        );
        CREATE TABLE annotations (
            session_id VARCHAR NOT NULL,
            msg_idx INTEGER NOT NULL,
            tag VARCHAR,
            value BOOLEAN,
            annotator VARCHAR,
            note VARCHAR,
            created_at TIMESTAMP
        );
        """
    )


def m003_redactions(con: duckdb.DuckDBPyConnection) -> None:
    """Where secrets were replaced at ingest (never the secrets themselves)."""
    con.execute(
        """
        CREATE TABLE redactions (
            session_id VARCHAR,
            msg_idx INTEGER,
            field VARCHAR,
            kind VARCHAR,
            count INTEGER
        );
        """
    )


def m004_search(con: duckdb.DuckDBPyConnection) -> None:
    """Documents for full-text search: message text and tool commands/outputs."""
    con.execute(
        """
        CREATE TABLE search_docs (
            doc_id BIGINT,
            session_id VARCHAR,
            msg_idx INTEGER,
            kind VARCHAR,
            body VARCHAR
        );
        CREATE TABLE search_state (
            key VARCHAR PRIMARY KEY,
            value VARCHAR
        );
        """
    )


def m005_analysis_state(con: duckdb.DuckDBPyConnection) -> None:
    """What stateful analysers remember about a session, so an appended file continues."""
    con.execute(
        """
        CREATE TABLE analysis_state (
            session_id VARCHAR,
            analyser VARCHAR,
            state JSON,
            PRIMARY KEY (session_id, analyser)
        );
        """
    )


def m006_search_pending(con: duckdb.DuckDBPyConnection) -> None:
    """Messages stored but not yet copied into ``search_docs``: (session, first msg_idx).
    Documents are copied when the index is (re)built; until then they are searched by
    substring where they are."""
    con.execute("CREATE TABLE search_pending (session_id VARCHAR, from_idx INTEGER)")
    # Documents of a database written before this migration stay in search_docs.


def m007_redactions_path(con: duckdb.DuckDBPyConnection) -> None:
    """The file each redaction was made in: rows without a session (quarantined lines, raw
    records of no session) are deleted with their file, as the rest are with its sessions."""
    con.execute("ALTER TABLE redactions ADD COLUMN path VARCHAR")


UNKEYED = ("sessions", "ingest_files", "analysis_state")
"""Tables written a row per file or session, without a primary key (``m008``)."""


def m008_unkeyed_per_file_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The tables written a row per file or session lose their primary keys: DuckDB starts
    a new row group in a table with an index after every close of the database, which an
    ingest does between files to let readers in; a folder of small sessions left these
    tables in one row group per second of ingest (a database six times its size, and each
    file's lookups slower than the last one's). The ingest keeps them unique itself (a
    file's rows are deleted before they are written again). Rows, column types and NOT
    NULLs stay; the tables are rebuilt, which also joins an old database's row groups."""
    from analytics.store.db import sql_string  # (db imports this module)

    for table in UNKEYED:
        # (a literal, not a parameter: DuckDB imports pandas to look at any parameter)
        columns = con.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
            f"WHERE table_name = {sql_string(table)} AND schema_name = 'main' "
            "ORDER BY column_index"
        ).fetchall()
        ddl = ", ".join(
            f'"{name}" {kind}{"" if nullable else " NOT NULL"}' for name, kind, nullable in columns
        )
        con.execute(f"CREATE TABLE {table}__unkeyed ({ddl})")
        con.execute(f"INSERT INTO {table}__unkeyed SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {table}__unkeyed RENAME TO {table}")


def m009_parser_version(con: duckdb.DuckDBPyConnection) -> None:
    """The version of its format's parser each file was read with
    (``analytics.formats.PARSER_VERSIONS``): a file stored by another version is read again,
    changed or not. Files stored before keep NULL (unknown: an older parser)."""
    con.execute("ALTER TABLE ingest_files ADD COLUMN parser_version INTEGER")


MIGRATIONS: list[Migration] = [
    m001_core, m002_analysis, m003_redactions, m004_search, m005_analysis_state,
    m006_search_pending, m007_redactions_path, m008_unkeyed_per_file_tables,
    m009_parser_version,
]


def applied(con: duckdb.DuckDBPyConnection) -> set[str]:
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)"
    )
    return {r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()}


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied."""
    from analytics.store.db import sql_string  # (db imports this module)

    done = applied(con)
    ran: list[str] = []
    for m in MIGRATIONS:
        if m.__name__ in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            m(con)
            # (literals, not parameters: DuckDB imports pandas to look at any parameter)
            applied_at = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
            con.execute(
                f"INSERT INTO _migrations VALUES ({sql_string(m.__name__)}, "
                f"TIMESTAMP {sql_string(applied_at)})"
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        ran.append(m.__name__)
    return ran
