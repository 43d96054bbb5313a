"""A session ingested in pieces (a live transcript growing between ingests) ends with
exactly the analysis of a session ingested whole: tags, tooling facts, campaigns,
levers and readiness verdicts, whatever the cut points."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from analytics.analysis import run
from analytics.ingest import ingest
from analytics.samples_path import samples_dir

TABLES = {
    "messages": "msg_idx, source_id, role, text",
    "tags": "msg_idx, tag, source, evidence, start_char",
    "polling_loops": "msg_idx, call_id, interval_s, target, outcome",
    "launches": "msg_idx, call_id, engine, flags, changed_flags",
    "server_events": "msg_idx, engine, event, detail",
    "measurements": "msg_idx, metric, value, label",
    "campaigns": "campaign_id, target_metric, target_value, baseline_value, best_value, status",
    "levers": "campaign_id, seq, name, value_before, value_after, outcome",
    "readiness_claims": "msg_idx, claim_text, subject, verdict, reason, contradicted_by_msg_idx",
}


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT session_id, {cols} FROM {t} ORDER BY ALL").fetchall()
            for t, cols in TABLES.items()
        }
    finally:
        con.close()


def _jsonl_samples() -> list[Path]:
    return sorted(p for p in samples_dir().rglob("*.jsonl") if p.parent.name != "subagents")


@pytest.mark.parametrize("sample", _jsonl_samples(), ids=lambda p: p.parent.name)
def test_growing_session_ends_with_the_analysis_of_a_whole_one(
    tmp_path: Path, sample: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(sample.parent, root)
    live = root / sample.name
    lines = sample.read_bytes().splitlines(keepends=True)
    whole = tmp_path / "whole.duckdb"
    assert not ingest([root], db=whole).errors
    expected = _dump(whole)
    assert expected["readiness_claims"] and expected["tags"]

    db = tmp_path / "pieces.duckdb"
    for cut in (len(lines) // 4, len(lines) // 2, len(lines) * 3 // 4, len(lines)):
        live.write_bytes(b"".join(lines[:cut]))
        assert not ingest([root], db=db).errors
    got = _dump(db)
    for table in TABLES:
        assert got[table] == expected[table], table


@pytest.mark.parametrize("sample", _jsonl_samples(), ids=lambda p: p.parent.name)
def test_chunk_boundaries_do_not_change_the_analysis(
    tmp_path: Path, sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole.duckdb"
    assert not ingest([sample.parent], db=whole).errors
    monkeypatch.setattr(run, "CHUNK", 7)  # every 7 messages a new chunk
    chunked = tmp_path / "chunked.duckdb"
    assert not ingest([sample.parent], db=chunked).errors
    assert _dump(chunked) == _dump(whole)
