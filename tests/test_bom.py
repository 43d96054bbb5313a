"""Files that start with a UTF-8 byte order mark (Windows editors and tools write one).

Each fixture in ``fixtures/bom`` is a small transcript written with a BOM; the facts
asserted (ids, texts, counts) are read off the fixture by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _samples import of
from _samples import run as run_parser

from analytics.models import Message, Resume, Session
from analytics.sources import claude_code, codex, opencode, transcript_text
from analytics.sources.detect import detect_format

FIXTURES = Path(__file__).parent / "fixtures" / "bom"
BOM = b"\xef\xbb\xbf"

CASES = [
    ("claude_code.jsonl", "claude_code", claude_code, ["u1", "u2", "u3"]),
    ("claude_code_pretty.json", "claude_code", claude_code, ["u1", "u2"]),
    ("codex.jsonl", "codex", codex, ["L2"]),
    ("opencode_export.json", "opencode", opencode, ["msg_b01", "msg_b02"]),
    ("transcript.txt", "transcript_text", transcript_text, ["1", "2"]),
]


@pytest.mark.parametrize(("name", "fmt", "module", "source_ids"), CASES)
def test_a_leading_bom_loses_no_record(
    name: str, fmt: str, module: object, source_ids: list[str]
) -> None:
    path = FIXTURES / name
    assert path.read_bytes().startswith(BOM)
    assert detect_format(path) == fmt
    items, ledger = run_parser(module, path)  # type: ignore[arg-type]
    assert [m.source_id for m in of(items, Message)] == source_ids
    assert ledger.records_quarantined == 0


def test_the_first_message_keeps_its_text() -> None:
    items, _ = run_parser(transcript_text, FIXTURES / "transcript.txt")
    first = of(items, Message)[0]
    assert (first.role, first.text) == ("user", "is it up?")
    items, _ = run_parser(claude_code, FIXTURES / "claude_code.jsonl")
    first = of(items, Message)[0]
    assert (first.role, first.text) == ("user", "Launch sglang on port 30000")


def test_a_file_with_a_bom_resumes_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = (FIXTURES / "claude_code.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))
    _, first = run_parser(claude_code, path)
    assert first.end_offset == len(lines[0]) + len(lines[1])
    with path.open("ab") as fh:
        fh.write(lines[2])
    resume = Resume(offset=first.end_offset, line=first.end_line, state=first.state)
    items, ledger = run_parser(claude_code, path, resume)
    assert [m.source_id for m in of(items, Message)] == ["u3"]
    assert [m.msg_idx for m in of(items, Message)] == [2]
    assert ledger.records_quarantined == 0


def test_storage_files_with_a_bom_are_read(tmp_path: Path) -> None:
    src = Path(__file__).parent / "fixtures" / "opencode" / "data_home" / "storage"
    root = tmp_path / "storage"
    shutil.copytree(src, root)
    expected_items, expected = run_parser(opencode, root)
    for file in root.rglob("*.json"):
        file.write_bytes(BOM + file.read_bytes())
    items, ledger = run_parser(opencode, root)
    assert ledger.records_quarantined == expected.records_quarantined
    assert [m.source_id for m in of(items, Message)] == [
        m.source_id for m in of(expected_items, Message)
    ]
    assert {s.session_id for s in of(items, Session)} == {
        s.session_id for s in of(expected_items, Session)
    }
