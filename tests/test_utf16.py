"""Files saved as UTF-16 with a byte order mark (PowerShell 5's ``>`` redirection and Notepad's
"Unicode" write UTF-16 LE; some tools write BE): every format reads them as it reads UTF-8.

The inputs are the project's samples and the UTF-8 BOM fixtures, encoded here; what a UTF-16
copy must give is what its UTF-8 original gives."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from _samples import of, table_rows
from _samples import run as run_parser

from analytics.errors import SourceError
from analytics.ingest import IngestSummary, ingest, watch
from analytics.models import Message, Quarantined
from analytics.sources import claude_code, codex, opencode, transcript_text
from analytics.sources.detect import detect_format

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
BOM_FIXTURES = Path(__file__).parent / "fixtures" / "bom"

ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "le": lambda text: b"\xff\xfe" + text.encode("utf-16-le"),
    "be": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
}

CASES = [
    ("claude_code.jsonl", "claude_code", claude_code),
    ("claude_code_pretty.json", "claude_code", claude_code),
    ("codex.jsonl", "codex", codex),
    ("opencode_export.json", "opencode", opencode),
    ("transcript.txt", "transcript_text", transcript_text),
]


def _utf16_copy(src: Path, dst: Path, encoding: str = "le") -> Path:
    """``src`` (UTF-8, a leading BOM dropped) written to ``dst`` as UTF-16 with a BOM."""
    text = src.read_bytes().decode("utf-8-sig")
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(ENCODINGS[encoding](text))
    return dst


def _write_lines(path: Path, lines: list[dict], encoding: str = "le") -> None:
    path.write_bytes(ENCODINGS[encoding]("".join(json.dumps(obj) + "\n" for obj in lines)))


def _cc_line(i: int) -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    msg: dict = {"role": role, "content": f"message number {i} — 日本語"}
    if role == "assistant":
        msg = {
            "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": f"reply {i} ✓"}], "stop_reason": "end_turn",
        }
    return {
        "parentUuid": f"u{i - 1}" if i else None, "isSidechain": False, "userType": "external",
        "cwd": "/w", "sessionId": "11111111-2222-3333-4444-555555555555", "version": "2.0.42",
        "type": role, "message": msg, "uuid": f"u{i}",
        "timestamp": f"2026-01-01T00:00:{i:02d}.000Z",
    }


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize(("name", "fmt", "module"), CASES)
def test_a_utf16_copy_parses_as_its_utf8_original(
    tmp_path: Path, name: str, fmt: str, module: object, encoding: str
) -> None:
    original = BOM_FIXTURES / name
    copy = _utf16_copy(original, tmp_path / name, encoding)
    assert detect_format(copy) == fmt
    expected, expected_ledger = run_parser(module, original)  # type: ignore[arg-type]
    items, ledger = run_parser(module, copy)  # type: ignore[arg-type]
    assert [m.model_dump(exclude={"source_path"}) for m in items] == [
        m.model_dump(exclude={"source_path"}) for m in expected
    ]
    assert (ledger.records_read, ledger.records_quarantined) == (
        expected_ledger.records_read, expected_ledger.records_quarantined)


def _sample_tree(dst: Path, encode: bool) -> Path:
    """The bundled samples under ``dst``, every file UTF-16 LE when ``encode``."""
    for src in sorted(SAMPLES.rglob("*")):
        if src.is_file():
            out = dst / src.relative_to(SAMPLES)
            if encode:
                _utf16_copy(src, out)
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out)
    return dst


def _tables(db: Path, root: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table but the times of the ingest and the facts about the file's bytes (its hash,
    size, mtime and resume offset), with ``root`` in paths written as ``<root>``."""
    con = duckdb.connect(str(db), read_only=True)
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "AND table_type = 'BASE TABLE' AND table_catalog = current_database()").fetchall()]
    con.close()
    skip = {
        "ingest_files": "* EXCLUDE (ingested_at, sha256, bytes, mtime, end_offset, prefix_sha256)",
        "_migrations": "name",
    }
    rows = table_rows(db, {t: skip.get(t, "*") for t in names})
    return {
        t: sorted(
            (
                tuple(v.replace(str(root), "<root>") if isinstance(v, str) else v for v in row)
                for row in table
            ),
            key=lambda row: tuple((v is not None, v) for v in row),  # NULL first, as in SQL
        )
        for t, table in rows.items()
    }


def test_utf16_copies_of_the_samples_store_the_same_tables(tmp_path: Path) -> None:
    utf8 = _sample_tree(tmp_path / "utf8", encode=False)
    utf16 = _sample_tree(tmp_path / "utf16", encode=True)
    for root in (utf8, utf16):
        summary = ingest([root], db=tmp_path / f"{root.name}.duckdb", workers=1)
        assert not summary.errors, [f.error for f in summary.errors]
    expected = _tables(tmp_path / "utf8.duckdb", utf8)
    assert expected["messages"] and expected["tags"]
    assert _tables(tmp_path / "utf16.duckdb", utf16) == expected


def test_forced_format_reads_utf16_as_detection_does(tmp_path: Path) -> None:
    src = _utf16_copy(BOM_FIXTURES / "claude_code.jsonl", tmp_path / "s.jsonl")
    summary = ingest([src], db=tmp_path / "t.duckdb", fmt="claude_code", analyse=False)
    results = [(f.status, f.messages, f.records_quarantined) for f in summary.files]
    assert results == [("ingested", 3, 0)]


def test_a_bad_line_is_quarantined_under_its_line_number(tmp_path: Path) -> None:
    lines = [json.dumps(_cc_line(i)) for i in range(4)]
    lines[2] = lines[2][:-5]  # line 3 cut short
    src = tmp_path / "s.jsonl"
    src.write_bytes(ENCODINGS["le"]("\r\n".join(lines) + "\r\n"))  # (Windows line ends)
    items, ledger = run_parser(claude_code, src)
    assert [q.location for q in of(items, Quarantined)] == ["line 3"]
    assert [m.location for m in of(items, Message)] == ["line 1", "line 2", "line 4"]
    assert ledger.end_line == 4


def _ingest_rows(db: Path, query: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


MESSAGES = "SELECT msg_idx, source_id, location, role, text FROM messages ORDER BY msg_idx"


def test_a_growing_utf16_file_ends_as_a_clean_ingest(tmp_path: Path) -> None:
    """Offsets into a transcoded file are not offsets into the file: none is stored, and a
    file that grew is read again whole."""
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(8)]
    db = tmp_path / "t.duckdb"
    _write_lines(src, lines[:5])
    ingest([src], db=db, analyse=False)
    with src.open("ab") as fh:  # appended as the program writing it would: no second BOM
        fh.write("".join(json.dumps(obj) + "\n" for obj in lines[5:]).encode("utf-16-le"))
    assert [f.status for f in ingest([src], db=db, analyse=False).files] == ["ingested"]
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean, analyse=False)
    assert _ingest_rows(db, MESSAGES) == _ingest_rows(clean, MESSAGES)
    assert len(_ingest_rows(db, MESSAGES)) == 8
    offsets = _ingest_rows(db, "SELECT end_offset, prefix_sha256 FROM ingest_files")
    assert offsets == [(0, None)]


def test_watch_follows_a_growing_utf16_file(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(10)]
    _write_lines(src, lines[:4], "be")
    rounds: list[IngestSummary] = []

    def report(summary: IngestSummary) -> None:
        rounds.append(summary)
        if len(rounds) == 1:
            _write_lines(src, lines, "be")  # the live session grows between two polls

    db = tmp_path / "t.duckdb"
    watch([src], 0.01, report, polls=3, db=db, analyse=False)
    assert [[f.status for f in r.files] for r in rounds] == [["ingested"], ["ingested"]]
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean, analyse=False)
    assert _ingest_rows(db, MESSAGES) == _ingest_rows(clean, MESSAGES)
    assert len(_ingest_rows(db, MESSAGES)) == 10


def test_a_utf16_file_of_whitespace_is_skipped_as_empty(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(ENCODINGS["le"]("\r\n"))
    summary = ingest([src], db=tmp_path / "t.duckdb", analyse=False)
    assert [f.status for f in summary.files] == ["skipped"]


@pytest.mark.parametrize(("name", "fmt"), [(n, f) for n, f, _ in CASES])
def test_utf16_without_a_bom_is_one_clear_error(tmp_path: Path, name: str, fmt: str) -> None:
    text = (BOM_FIXTURES / name).read_bytes().decode("utf-8-sig")
    src = tmp_path / name
    src.write_bytes(text.encode("utf-16-le"))
    with pytest.raises(SourceError, match="UTF-16 text without a byte order mark"):
        detect_format(src)
    for forced in ("auto", fmt):
        summary = ingest([src], db=tmp_path / "t.duckdb", fmt=forced, analyse=False)
        [result] = summary.files
        assert result.status == "error", forced
        assert result.error is not None and str(src) in result.error
        assert "byte order mark" in result.error and "\n" not in result.error


def test_a_truncated_utf16_file_loses_only_its_cut_record(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    full = ENCODINGS["le"]("".join(json.dumps(_cc_line(i)) + "\n" for i in range(3)))
    src.write_bytes(full[:-7])  # an odd byte count: cut inside a code unit of the last line
    items, ledger = run_parser(claude_code, src)
    assert [m.source_id for m in of(items, Message)] == ["u0", "u1"]
    assert [q.location for q in of(items, Quarantined)] == ["line 3"]
    summary = ingest([src], db=tmp_path / "t.duckdb", analyse=False)
    results = [(f.status, f.messages, f.records_quarantined) for f in summary.files]
    assert results == [("ingested", 2, 1)]


@pytest.mark.parametrize(("name", "fmt"), [
    ("opencode_export.json", "opencode"), ("transcript.txt", "transcript_text"),
])
def test_a_truncated_whole_file_is_quarantined_or_read_not_a_crash(
    tmp_path: Path, name: str, fmt: str
) -> None:
    src = tmp_path / name
    src.write_bytes(_utf16_copy(BOM_FIXTURES / name, src).read_bytes()[:-3])
    summary = ingest([src], db=tmp_path / "t.duckdb", fmt=fmt, analyse=False)
    [result] = summary.files
    assert result.status == "ingested", result.error
    if fmt == "opencode":  # the JSON document is cut: the file is one quarantined record
        assert (result.records_read, result.records_quarantined) == (1, 1)
    else:  # the text is read up to the cut
        assert result.messages == 2 and result.records_quarantined == 0


def test_a_utf8_file_saved_again_as_utf16_is_read_whole(tmp_path: Path) -> None:
    """The stored offset is into the UTF-8 file: the UTF-16 one is not resumed from it."""
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(6)]
    src.write_text("".join(json.dumps(obj) + "\n" for obj in lines[:3]), encoding="utf-8")
    db = tmp_path / "t.duckdb"
    ingest([src], db=db, analyse=False)
    _write_lines(src, lines)
    assert [f.status for f in ingest([src], db=db, analyse=False).files] == ["ingested"]
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean, analyse=False)
    assert _ingest_rows(db, MESSAGES) == _ingest_rows(clean, MESSAGES)
    assert len(_ingest_rows(db, MESSAGES)) == 6


def test_utf16_files_of_an_opencode_storage_folder_are_read(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    shutil.copytree(Path(__file__).parent / "fixtures" / "opencode" / "data_home" / "storage", root)
    expected_items, expected = run_parser(opencode, root)
    for file in root.rglob("*.json"):
        _utf16_copy(file, file, "be")
    items, ledger = run_parser(opencode, root)
    assert ledger.records_quarantined == expected.records_quarantined
    assert [m.model_dump() for m in of(items, Message)] == [
        m.model_dump() for m in of(expected_items, Message)
    ]
