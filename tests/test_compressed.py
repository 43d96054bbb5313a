"""Transcripts kept compressed (gzip, bzip2, xz) are detected by content and ingested through
a decompressed copy, stored under their own path, and never appended to."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import duckdb
import pytest

from analytics.errors import UnknownFormatError
from analytics.ingest import ingest
from analytics.samples_path import samples_dir
from analytics.sources.compressed import compression, plain_name
from analytics.sources.detect import detect_format

SAMPLES = samples_dir()
CODEX = next((SAMPLES / "codex_sglang_tuning").glob("*.jsonl"))
TEXT = SAMPLES / "qwen36_kpro5_deploy.txt"
CLAUDE = next((SAMPLES / "claude_code_vllm_session").glob("*.jsonl"))

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
PATHLESS = {  # table -> the columns that name the file (they differ by design)
    "sessions": "source_path", "raw_records": "path", "quarantine": "path",
}


def _rows(db: Path, table: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall()
            if c not in (PATHLESS.get(table), "ingested_at")]
        return sorted(con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)
    finally:
        con.close()


def _compressed_copies(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    out = {}
    for source, suffix in ((CODEX, "gz"), (TEXT, "bz2"), (CLAUDE, "xz")):
        target = folder / f"{source.name}.{suffix}"
        target.write_bytes(COMPRESS[suffix](source.read_bytes()))
        out[suffix] = target
    return out


def test_detected_by_content_and_named_plainly(tmp_path: Path) -> None:
    files = _compressed_copies(tmp_path / "c")
    assert [detect_format(files[s]) for s in ("gz", "bz2", "xz")] == [
        "codex", "transcript_text", "claude_code"]
    assert compression(files["gz"].read_bytes()[:8]) == "gzip"
    assert plain_name(files["bz2"], "bzip2") == TEXT.name
    odd = tmp_path / "notes.gz"
    odd.write_bytes(gzip.compress(b'{"hello": 1}\n'))
    with pytest.raises(UnknownFormatError, match="a gzip-compressed file: JSON of an unknown shape"):
        detect_format(odd)


def test_ingested_as_the_plain_files_are(tmp_path: Path) -> None:
    files = _compressed_copies(tmp_path / "c")
    plain = tmp_path / "p"
    plain.mkdir()
    for source in (CODEX, TEXT, CLAUDE):
        (plain / source.name).write_bytes(source.read_bytes())
    a = ingest([plain], db=tmp_path / "a.duckdb", build_index=False)
    b = ingest([tmp_path / "c"], db=tmp_path / "b.duckdb", build_index=False)
    assert not a.errors and not b.errors
    assert a.totals()["messages"] == b.totals()["messages"] > 0
    for table in ("messages", "tool_calls", "tags", "polling_loops", "readiness_claims",
                  "sessions", "raw_records", "quarantine"):
        assert _rows(tmp_path / "a.duckdb", table) == _rows(tmp_path / "b.duckdb", table), table
    con = duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True)
    stored = dict(con.execute("SELECT path, bytes FROM ingest_files").fetchall())
    paths = {r[0] for r in con.execute("SELECT source_path FROM sessions").fetchall()}
    con.close()
    assert stored == {str(p.resolve()): p.stat().st_size for p in files.values()}
    assert paths <= set(stored)
    assert not list(tmp_path.glob(".transcripts-plain-*"))  # the copies are gone


def test_unchanged_then_changed_is_read_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "t.txt.gz"
    path.write_bytes(gzip.compress(b"[msg 1] user: ok?\n[msg 2] assistant: It's up!\n"))
    db = tmp_path / "t.duckdb"
    first = ingest([path], db=db, build_index=False)
    assert [f.status for f in first.files] == ["ingested"]
    assert [f.status for f in ingest([path], db=db, build_index=False).files] == ["unchanged"]
    path.write_bytes(gzip.compress(
        b"[msg 1] user: ok?\n[msg 2] assistant: It's up!\n[msg 3] user: ready?\n"))
    again = ingest([path], db=db, build_index=False)
    assert [(f.status, f.messages) for f in again.files] == [("ingested", 3)]
    con = duckdb.connect(str(db), read_only=True)
    tags = con.execute("SELECT msg_idx, tag FROM tags ORDER BY 1").fetchall()
    con.close()
    assert tags == [(0, "user_checkin"), (1, "readiness_claim"), (2, "user_checkin")]


def test_truncated_archive_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(CODEX.read_bytes())[:2000])
    summary = ingest([path], db=tmp_path / "x.duckdb", build_index=False)
    [error] = summary.errors
    assert error.error is not None and "\n" not in error.error
    assert str(path) in error.error and "cannot be decompressed" in error.error
    assert "`gzip -dc cut.jsonl.gz > copy` writes out what is readable" in error.error
