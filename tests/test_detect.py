"""Format detection by content, walking folders into units, and the module registry."""

from __future__ import annotations

import gzip
import importlib.util
import shutil
import sqlite3
from pathlib import Path

import pytest
from _samples import SHARED_SAMPLES, run

from analytics.errors import SourceError, UnknownFormatError, UsageError
from analytics.models import FORMATS, Ledger
from analytics.sources.detect import detect_format, get_module, iter_inputs

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = SHARED_SAMPLES
OPENCODE_EXPORT = FIXTURES / "opencode" / "export_aborts.json"
DATA_HOME = FIXTURES / "opencode" / "data_home"
TEXT = FIXTURES / "transcript_text" / "bracket_style.txt"


def sample(rel: str) -> Path:
    path = SAMPLES / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def needs(module: str) -> None:
    if importlib.util.find_spec(f"analytics.sources.{module}") is None:
        pytest.skip(f"analytics.sources.{module} not written yet")


# --------------------------------------------------------------------------- detection


def test_own_formats() -> None:
    assert detect_format(OPENCODE_EXPORT) == "opencode"
    assert detect_format(DATA_HOME) == "opencode"
    assert detect_format(DATA_HOME / "storage") == "opencode"
    assert detect_format(TEXT) == "transcript_text"
    assert detect_format(FIXTURES / "transcript_text" / "angle_style.txt") == "transcript_text"


def tiny_db(db: Path) -> Path:
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE session (id TEXT); CREATE TABLE message (id TEXT, session_id TEXT, data TEXT);"
        "CREATE TABLE part (id TEXT, message_id TEXT, session_id TEXT, data TEXT);"
    )
    con.close()
    return db


def test_opencode_db(tmp_path: Path) -> None:
    assert detect_format(tiny_db(tmp_path / "opencode-beta.db")) == "opencode"


@pytest.mark.parametrize(
    ("rel", "fmt"),
    [
        ("claude_code/ccl_37f83ec9_v1.0.51_interrupts.jsonl", "claude_code"),
        ("claude_code/ccl_7acd37a8_v2.0.42_bgbash_bashoutput_killshell.jsonl", "claude_code"),
        ("codex/agent-sessions_codex_small_schema_coverage_SYNTHETIC.jsonl", "codex"),
    ],
)
def test_other_engineers_formats(rel: str, fmt: str) -> None:
    needs(fmt)
    assert detect_format(sample(rel)) == fmt


@pytest.mark.parametrize(
    ("rel", "hint"),
    [
        ("swe_agent/marshmallow-1867_function_calling_replace_from_source.traj", "SWE-agent"),
        ("swe_agent/gpt4_pydicom-1458_legacy_v0.traj", "SWE-agent"),
        ("openhands/basic_gui_mode.json", "OpenHands"),
        ("inspect/log_streaming.eval", "Inspect"),
        ("inspect/log_tool_call_error.json", "Inspect"),
    ],
)
def test_unsupported_samples_rejected(rel: str, hint: str) -> None:
    path = sample(rel)
    with pytest.raises(UnknownFormatError) as info:
        detect_format(path)
    message = str(info.value)
    assert str(path) in message and hint in message
    for fmt in FORMATS:
        assert fmt in message
    assert info.value.formats == list(FORMATS)


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        (b"", "empty file"),
        (b"  \n\n", "empty file"),
        (bytes(range(256)) * 4, "binary"),
        (b'{"hello": "world", "items": [1, 2, 3]}', "JSON of an unknown shape"),
        (b"[1, 2, 3]", "JSON of an unknown shape"),
        (b"# Notes\n\nNothing to see; [msg 3] user: appears mid-line only.\n", "message header"),
        (b"\x28\xb5\x2f\xfd" + bytes(40), "zstd-compressed.*zstd -dc input.json > copy"),
        (gzip.compress(b'{"hello": "world"}'), "a gzip-compressed file: JSON of an unknown shape"),
    ],
)
def test_garbage_rejected(tmp_path: Path, content: bytes, hint: str) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    with pytest.raises(UnknownFormatError, match=hint):
        detect_format(path)


def test_missing_path_and_plain_folder(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        detect_format(tmp_path / "nope.jsonl")
    with pytest.raises(UnknownFormatError, match="not an opencode storage folder"):
        detect_format(tmp_path)


def test_non_opencode_sqlite_rejected(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE users (id INTEGER)")
    con.close()
    with pytest.raises(UnknownFormatError, match="SQLite"):
        detect_format(db)


def test_detected_format_parses_with_balanced_ledger() -> None:
    for path in (OPENCODE_EXPORT, DATA_HOME, TEXT):
        items, _ = run(get_module(detect_format(path)), path)  # run checks the ledger
        assert items


# --------------------------------------------------------------------------- iter_inputs


def test_iter_inputs_units(tmp_path: Path) -> None:
    home = tmp_path / "share" / "opencode"
    shutil.copytree(DATA_HOME, home)
    (home / "opencode.db").write_bytes(b"")  # unreadable db: yielded, format unknown
    (home / "opencode.db-wal").write_bytes(b"x")
    (home / "opencode.db-shm").write_bytes(b"x")
    logs = tmp_path / "logs"
    (logs / ".git" / "objects").mkdir(parents=True)
    (logs / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    shutil.copy(TEXT, logs / "run1.txt")
    shutil.copy(OPENCODE_EXPORT, logs / "export.json")
    (logs / "agent-1.meta.json").write_text('{"agentType": "general"}')
    (logs / "transcripts.duckdb").write_bytes(b"x")
    (logs / "transcripts.duckdb.wal").write_bytes(b"x")
    (logs / "notes.md").write_text("hello\n")

    units = dict(iter_inputs([tmp_path]))
    assert units == {
        logs / "export.json": "opencode",
        logs / "notes.md": None,
        logs / "run1.txt": "transcript_text",
        home / "opencode.db": None,
        home / "storage": "opencode",
    }


def test_iter_inputs_storage_given_directly() -> None:
    storage = DATA_HOME / "storage"
    assert list(iter_inputs([storage])) == [(storage, "opencode")]
    assert list(iter_inputs([DATA_HOME])) == [(storage, "opencode")]


def test_iter_inputs_prefers_db_over_migrated_storage(tmp_path: Path) -> None:
    home = tmp_path / "opencode"
    shutil.copytree(DATA_HOME, home)
    tiny_db(home / "opencode.db")
    assert list(iter_inputs([tmp_path])) == [(home / "opencode.db", "opencode")]
    assert detect_format(home) == "opencode"  # the parent folder, parsed from the db
    ledger = Ledger()
    assert [type(i).__name__ for i in get_module("opencode").parse(home, ledger)] == []


def test_iter_inputs_explicit_files_always_yielded(tmp_path: Path) -> None:
    meta = tmp_path / "agent-1.meta.json"
    meta.write_text("{}")
    missing = tmp_path / "missing.txt"
    assert list(iter_inputs([meta, missing, TEXT])) == [
        (meta, None),
        (missing, None),
        (TEXT, "transcript_text"),
    ]


# --------------------------------------------------------------------------- registry


def test_named_pipes_and_sockets_are_never_opened(tmp_path: Path) -> None:
    """A named pipe (or socket) in a folder is passed over; given as a path it is reported,
    also under a forced format. Opening a pipe to read waits for a writer: before, the
    ingest of such a folder hung."""
    import os
    import signal
    import socket

    from analytics.ingest import ingest

    def waited(*_: object) -> None:
        raise TimeoutError("the ingest opened the named pipe and waited for a writer")

    signal.signal(signal.SIGALRM, waited)
    signal.alarm(60)  # (a regression fails here instead of hanging the suite)
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(TEXT, folder / "t.txt")
    os.mkfifo(folder / "pipe.jsonl")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "agent.sock"))
    try:
        assert [u.name for u, _ in iter_inputs([folder])] == ["t.txt"]
        with pytest.raises(SourceError, match="named pipe"):
            detect_format(folder / "pipe.jsonl")
        whole = ingest([folder], db=tmp_path / "a.duckdb", analyse=False, build_index=False)
        assert not whole.errors and [f.status for f in whole.files] == ["ingested"]
        for fmt in ("auto", "claude_code"):
            given = ingest([folder / "pipe.jsonl"], db=tmp_path / "b.duckdb", fmt=fmt,
                           analyse=False, build_index=False)
            [error] = given.errors
            assert "not a regular file but a named pipe" in (error.error or "")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        sock.close()


def test_get_module() -> None:
    module = get_module("opencode")
    assert module.FORMAT == "opencode" and module.APPENDABLE is False
    assert get_module("transcript_text").FORMAT == "transcript_text"
    with pytest.raises(UsageError) as info:
        get_module("aider")
    for fmt in FORMATS:
        assert fmt in str(info.value)
