"""Large files are staged through Parquet before one bulk insert per table (bounded
memory); the stored rows are those of a direct ingest, and no staging files remain."""

from __future__ import annotations

from pathlib import Path

import pytest
from _samples import table_rows

import analytics.ingest as ingest_module
import analytics.ingest_load as ingest_load
from analytics.ingest import ingest
from analytics.samples_path import sample_inputs

TABLES = ("sessions", "messages", "tool_calls", "raw_records", "quarantine", "tags",
          "launches", "measurements", "readiness_claims", "campaigns", "levers", "search_docs",
          "ingest_files")
COLUMNS = dict.fromkeys(TABLES, "*") | {"ingest_files": "* EXCLUDE (ingested_at)"}


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, COLUMNS)


def _spy_on_staging(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables rows are staged for (one item per ``Staging.append_table``, which
    ``Staging.append`` calls too) from now on."""
    from analytics.store import writer

    staged: list[str] = []
    real = writer.Staging.append_table

    def spy(self: writer.Staging, table: str, *args: object, **kwargs: object) -> int:
        staged.append(table)
        return real(self, table, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.Staging, "append_table", spy)
    return staged


@pytest.mark.parametrize("flush", [None, 50])
def test_staged_ingest_stores_what_a_direct_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: int | None
) -> None:
    """Also with many small batches, more than the writing thread may hold at once."""
    direct = tmp_path / "direct.duckdb"
    assert not ingest(sample_inputs(), db=direct).errors
    staged_tables = _spy_on_staging(monkeypatch)
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE", 0)  # stage every file
    if flush:
        monkeypatch.setattr(ingest_load, "FLUSH_EVERY", flush)
    staged = tmp_path / "staged.duckdb"
    assert not ingest(sample_inputs(), db=staged).errors
    assert {"messages", "tool_calls", "raw_records"} <= set(staged_tables)
    expected, got = _dump(direct), _dump(staged)
    assert expected["messages"] and expected["tags"]
    for table in expected:
        assert got[table] == expected[table], table
    assert not Path(str(staged) + ".staging").exists()


def test_a_failing_parquet_write_fails_its_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Parquet writes run on a thread: one that fails there is its file's error (raised
    by a later batch or by the load), nothing of that file is stored, the run's other files
    are, and no staging file stays."""
    import pyarrow.parquet as pq

    real = pq.ParquetWriter.write_table
    writes = []

    def failing(self: pq.ParquetWriter, table: object, *args: object, **kwargs: object) -> None:
        writes.append(1)
        if len(writes) == 3:
            raise OSError("no space left on device")
        real(self, table, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing)
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE", 0)
    monkeypatch.setattr(ingest_load, "FLUSH_EVERY", 50)
    db = tmp_path / "t.duckdb"
    first = sample_inputs()[:1]
    res = ingest(first, db=db)
    assert len(res.errors) == 1 and "no space left on device" in (res.errors[0].error or "")
    assert "\n" not in (res.errors[0].error or "")
    failed = res.errors[0].path
    stored = table_rows(db, {"ingest_files": "path", "sessions": "source_path"})
    assert failed not in {p for (p,) in stored["ingest_files"]}
    assert failed not in {p for (p,) in stored["sessions"]}
    assert len(stored["ingest_files"]) == len(res.files) - 1  # the other files are in
    assert not Path(str(db) + ".staging").exists()


def test_a_crashed_runs_staging_files_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.duckdb"
    leftover = Path(str(db) + ".staging")
    leftover.mkdir()
    (leftover / "messages.parquet").write_bytes(b"half written")
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE", 0)
    assert not ingest(sample_inputs()[:1], db=db).errors
    assert not leftover.exists()


@pytest.mark.parametrize("analyse", [True, False])
def test_without_analysis_files_are_staged_sooner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, analyse: bool
) -> None:
    """Rows go straight in only for the analysis that runs while a file is parsed."""
    staged = _spy_on_staging(monkeypatch)
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE", 1 << 40)
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE_UNANALYSED", 0)
    db = tmp_path / "t.duckdb"
    assert not ingest(sample_inputs()[:1], db=db, analyse=analyse, build_index=False).errors
    assert bool(staged) is not analyse
