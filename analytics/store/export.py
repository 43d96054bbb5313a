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
PARTITION_PREFIX = "source_format="


def export_parquet(con: duckdb.DuckDBPyConnection, folder: Path) -> list[Path]:
    """Write ``folder/<table>/…parquet``; session tables are Hive-partitioned by source_format.

    Each table's folder holds this export only: the Parquet files an earlier export wrote
    there are removed first (a partition of a format the database no longer holds would
    otherwise be read back with the new one); other files are left alone. A partitioned
    table without rows is written as one empty ``data.parquet`` with its columns, so that
    ``read_parquet('<table>/**/*.parquet')`` finds a file and the schema."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for table in TABLES:
        target = folder / table
        target.mkdir(exist_ok=True)
        _remove_earlier_export(target)
        if table in PARTITIONED:
            _copy_partitioned(con, table, target)
        else:
            con.execute(f"COPY {table} TO {sql_string(target / 'data.parquet')} (FORMAT parquet)")
        written.append(target)
    return written


def _copy_partitioned(con: duckdb.DuckDBPyConnection, table: str, target: Path) -> None:
    cols = ", ".join(f"t.{c}" for c in _columns(con, table))
    select = (
        f"SELECT {cols}, coalesce(s.source_format, 'unknown') AS source_format "
        f"FROM {table} t LEFT JOIN sessions s USING (session_id)"
    )
    if con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT 1)").fetchone() == (0,):
        con.execute(f"COPY ({select}) TO {sql_string(target / 'data.parquet')} (FORMAT parquet)")
        return
    con.execute(
        f"COPY ({select}) TO {sql_string(target)} "
        "(FORMAT parquet, PARTITION_BY (source_format), OVERWRITE_OR_IGNORE true)"
    )


def _remove_earlier_export(target: Path) -> None:
    """Remove the Parquet files of an earlier export (``data.parquet`` and the
    ``source_format=…/`` partitions), keeping anything else in the folder."""
    (target / "data.parquet").unlink(missing_ok=True)
    for part in target.glob(f"{PARTITION_PREFIX}*"):
        if not part.is_dir():
            continue
        for file in part.glob("*.parquet"):
            file.unlink()
        if not any(part.iterdir()):
            part.rmdir()


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [r[0] for r in rows] or TABLE_COLUMNS[table]
