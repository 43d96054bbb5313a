"""Export every table as Parquet, one folder per table."""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.store.db import sql_string
from analytics.store.writer import TABLE_COLUMNS

TABLES = [
    "sessions", "messages", "tool_calls", "tags", "polling_loops", "launches", "server_events",
    "measurements", "campaigns", "levers", "readiness_claims", "annotations", "ingest_files",
    "quarantine", "raw_records", "redactions",
]
PARTITIONED = {"messages", "tool_calls", "tags", "measurements", "server_events", "raw_records"}


def export_parquet(con: duckdb.DuckDBPyConnection, folder: Path) -> list[Path]:
    """Write ``folder/<table>/…parquet``; session tables are Hive-partitioned by source_format."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for table in TABLES:
        target = folder / table
        target.mkdir(exist_ok=True)
        if table in PARTITIONED:
            cols = ", ".join(f"t.{c}" for c in _columns(con, table))
            con.execute(
                f"COPY (SELECT {cols}, coalesce(s.source_format, 'unknown') AS source_format "
                f"FROM {table} t LEFT JOIN sessions s USING (session_id)) "
                f"TO {sql_string(target)} (FORMAT parquet, PARTITION_BY (source_format), "
                "OVERWRITE_OR_IGNORE true)"
            )
        else:
            con.execute(f"COPY {table} TO {sql_string(target / 'data.parquet')} (FORMAT parquet)")
        written.append(target)
    return written


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [r[0] for r in rows] or TABLE_COLUMNS[table]
