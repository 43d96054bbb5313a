"""Planted secrets never reach the database, the search index or a report."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from analytics.ingest import ingest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "secrets"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "t.duckdb"
    files = [p for p in FIXTURES.iterdir() if p.suffix in (".jsonl", ".json", ".txt")
             and p.name != "manifest.json"]
    res = ingest(files, db=path)
    assert not res.errors, res.errors
    return path


def _all_text(con: duckdb.DuckDBPyConnection) -> str:
    chunks = []
    tables = con.execute(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_type = 'BASE TABLE'"
    ).fetchall()
    for schema, table in tables:
        cols = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
            "AND table_name = ? AND data_type IN ('VARCHAR', 'JSON')", [schema, table]).fetchall()]
        for col in cols:
            sql = f'SELECT "{col}" FROM "{schema}"."{table}"'
            for (value,) in con.execute(sql).fetchall():
                if value:
                    chunks.append(str(value))
    return "\n".join(chunks)


def test_every_planted_secret_is_redacted_everywhere(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    text = _all_text(con)
    con.close()
    leaked = [s["kind"] for s in MANIFEST if s["probe"] in text]
    assert leaked == []
    assert "[REDACTED:" in text


def test_redactions_table_counts_without_secrets(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT kind, sum(count) FROM redactions GROUP BY 1").fetchall()
    con.close()
    kinds = {k for k, _ in rows}
    assert len(kinds) >= 10
    assert sum(n for _, n in rows) >= len(MANIFEST)


def test_search_and_report_hold_no_secret(db: Path, tmp_path: Path) -> None:
    from analytics.report import write_report
    from analytics.store.search import search

    con = duckdb.connect(str(db), read_only=True)
    hits = search(con, "REDACTED", limit=200)
    assert len(hits) > 0
    blob = "\n".join(hits["snippet"])
    for sid in [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]:
        out = write_report(con, sid, tmp_path / f"{abs(hash(sid))}.md")
        blob += out.read_text()
    con.close()
    assert not [s["kind"] for s in MANIFEST if s["probe"] in blob]
