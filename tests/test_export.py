"""`transcripts export --parquet DIR`: every table as Parquet that reads back as stored."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.ingest import ingest
from analytics.store.db import connect
from analytics.store.export import TABLES, export_parquet

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _db(tmp_path: Path, name: str, inputs: list[Path]) -> Path:
    db = tmp_path / name
    res = ingest(inputs, db=db, workers=1)
    assert not res.errors, res.errors
    return db


def _export(db: Path, folder: Path) -> None:
    con = connect(db, read_only=True)
    try:
        export_parquet(con, folder)
    finally:
        con.close()


def _counts(db: Path) -> dict[str, int]:
    con = connect(db, read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def _parquet_counts(folder: Path) -> dict[str, int]:
    con = duckdb.connect()
    return {
        t: con.execute(
            f"SELECT count(*) FROM read_parquet('{folder / t}/**/*.parquet', "
            "hive_partitioning = true)"
        ).fetchone()[0]
        for t in TABLES
    }


@pytest.fixture(scope="module")
def two_formats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("export")
    return _db(tmp, "both.duckdb", [FIXTURES / "transcript_text", FIXTURES / "codex"])


def test_export_reads_back_with_the_stored_rows(two_formats: Path, tmp_path: Path) -> None:
    _export(two_formats, tmp_path / "pq")
    assert _parquet_counts(tmp_path / "pq") == _counts(two_formats)


def test_export_into_a_used_folder_holds_only_the_new_export(
    two_formats: Path, tmp_path: Path
) -> None:
    # A second export into the same DIR (a database that lost a format since) must not
    # leave the first export's partitions behind: read back, they would add rows of
    # sessions the database no longer holds.
    folder = tmp_path / "pq"
    _export(two_formats, folder)
    text_only = _db(tmp_path, "text.duckdb", [FIXTURES / "transcript_text"])
    _export(text_only, folder)
    assert _parquet_counts(folder) == _counts(text_only)
    assert not list(folder.glob("*/source_format=codex"))


def test_export_keeps_files_it_did_not_write(two_formats: Path, tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    (folder / "messages").mkdir(parents=True)
    notes = folder / "messages" / "README.txt"
    notes.write_text("my notes")
    _export(two_formats, folder)
    _export(two_formats, folder)
    assert notes.read_text() == "my notes"
