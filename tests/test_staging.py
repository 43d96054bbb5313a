"""Large files are staged through Parquet before one bulk insert per table (bounded
memory); the stored rows are those of a direct ingest, and no staging files remain."""

from __future__ import annotations

from pathlib import Path

import pytest
from _samples import table_rows

import analytics.ingest as ingest_module
from analytics.ingest import ingest
from analytics.samples_path import sample_inputs

TABLES = ("sessions", "messages", "tool_calls", "raw_records", "quarantine", "tags",
          "launches", "measurements", "readiness_claims", "campaigns", "levers", "search_docs",
          "ingest_files")
COLUMNS = dict.fromkeys(TABLES, "*") | {"ingest_files": "* EXCLUDE (ingested_at)"}


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, COLUMNS)


def _spy_on_staging(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables rows are staged for (one item per ``Staging.append``) from now on."""
    from analytics.store import writer

    staged: list[str] = []
    real = writer.Staging.append

    def spy(self: writer.Staging, table: str, *args: object, **kwargs: object) -> int:
        staged.append(table)
        return real(self, table, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.Staging, "append", spy)
    return staged


def test_staged_ingest_stores_what_a_direct_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = tmp_path / "direct.duckdb"
    assert not ingest(sample_inputs(), db=direct).errors
    staged_tables = _spy_on_staging(monkeypatch)
    monkeypatch.setattr(ingest_module, "STAGE_ABOVE", 0)  # stage every file
    staged = tmp_path / "staged.duckdb"
    assert not ingest(sample_inputs(), db=staged).errors
    assert {"messages", "tool_calls", "raw_records"} <= set(staged_tables)
    expected, got = _dump(direct), _dump(staged)
    assert expected["messages"] and expected["tags"]
    for table in expected:
        assert got[table] == expected[table], table
    assert not Path(str(staged) + ".staging").exists()


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
