"""The agents' own stores as they lie on users' disks (``ingest --discover``, a folder ingest):
which files are sessions, which are the agents' other files, and nothing counted twice."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest

from analytics.ingest import ingest
from analytics.sources.detect import iter_inputs

FIXTURES = Path(__file__).parent / "fixtures"
STORAGE = FIXTURES / "opencode" / "data_home" / "storage"
CLAUDE_PROJECT = FIXTURES / "claude_code" / "proj"
SESSION = "5e55a000-0000-4000-8000-00000000aaaa"

_SCHEMA = """
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
    slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
    share_url TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
    time_compacting INTEGER, time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
    time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
    time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
"""


def migrate(storage: Path, db: Path) -> sqlite3.Connection:
    """What opencode 1.2's JSON migration does: the storage tree's sessions, messages and
    parts as rows of an ``opencode.db`` (WAL) beside it. Returned open: its writes stay in
    the ``-wal`` file, as while opencode runs."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(_SCHEMA)
    for file in sorted(storage.glob("session/*/*.json")):
        s = _read(file)
        if s is None:
            continue
        con.execute(
            "INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, NULL, NULL)",
            (s["id"], s["projectID"], s.get("parentID"), s["slug"], s["directory"], s["title"],
             s["version"], s["time"]["created"], s["time"]["updated"]),
        )
    for file in sorted(storage.glob("message/*/*.json")):
        m = _read(file)
        if m is None:
            continue
        mid, sid, created = m.pop("id"), m.pop("sessionID"), m["time"]["created"]
        con.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                    (mid, sid, created, created, json.dumps(m)))
        for pfile in sorted(storage.glob(f"part/{mid}/*.json")):
            p = _read(pfile)
            if p is None:
                continue
            pid = p.pop("id")
            p.pop("sessionID", None)
            p.pop("messageID", None)
            con.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                        (pid, mid, sid, created, created, json.dumps(p)))
    con.commit()
    return con


def _read(file: Path) -> dict | None:
    """A storage file's object; None for one that is not (the fixture has broken ones)."""
    try:
        value = json.loads(file.read_text())
    except ValueError:
        return None
    return value if isinstance(value, dict) and "id" in value else None


def sessions(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return dict(con.execute("SELECT session_id, n_messages FROM sessions").fetchall())


def stored_paths(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {r[0] for r in con.execute("SELECT path FROM ingest_files").fetchall()}


PROJECT_SESSIONS = {
    f"-home-u-proj/{SESSION}.jsonl",
    "-home-u-proj/agent-a1b2c3d4.jsonl",
    f"-home-u-proj/{SESSION}/subagents/agent-e5f6.jsonl",
}


def units_under(top: Path) -> set[str]:
    return {p.relative_to(top).as_posix() for p, _ in iter_inputs([top])}


def quick_ingest(paths: list[Path], db: Path) -> None:
    summary = ingest(paths, db=db, analyse=False, build_index=False, workers=1)
    assert not summary.errors, [f.error for f in summary.errors]


# --------------------------------------------------------------------------- opencode


def test_discover_reads_the_opencode_db_not_also_its_migrated_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analytics.cli import discover_paths

    home = tmp_path / "home"
    data = home / ".local" / "share" / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    assert discover_paths() == [data / "storage"]  # (before opencode 1.2)

    writer = migrate(data / "storage", data / "opencode.db")
    try:
        assert discover_paths() == [data / "opencode.db"]
        db = tmp_path / "t.duckdb"
        quick_ingest(discover_paths(), db)
        got = sessions(db)
    finally:
        writer.close()
    assert not [sid for sid in got if "@" in sid]  # (a session stored twice gets an @suffix)
    assert got == {
        "opencode:ses_7f3b00000001ParentSession": 2,
        "opencode:ses_7f3b00000002ChildSession0": 2,
    }


def test_an_opencode_db_supersedes_the_storage_folder_stored_before_it(tmp_path: Path) -> None:
    """Ingested before the upgrade to opencode 1.2, the storage folder's sessions are in the
    database; after it, ``--discover`` (or the data folder) gives opencode.db, which holds the
    same sessions: they must replace the storage's, not be stored again beside them."""
    data = tmp_path / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    db = tmp_path / "t.duckdb"
    quick_ingest([data / "storage"], db)
    before = sessions(db)

    migrate(data / "storage", data / "opencode.db").close()
    quick_ingest([data / "opencode.db"], db)
    assert sessions(db) == before
    assert stored_paths(db) == {str((data / "opencode.db").resolve())}
    with duckdb.connect(str(db), read_only=True) as con:
        paths = {r[0] for r in con.execute("SELECT DISTINCT source_path FROM sessions").fetchall()}
    assert paths == {str((data / "opencode.db").resolve())}


def test_superseding_heals_the_copies_an_earlier_discover_stored(tmp_path: Path) -> None:
    """``--discover`` used to give both the storage folder and opencode.db: the database's
    sessions were stored as copies (``<id>@<hash>``). The next ingest of the database alone
    (an unchanged file) must leave each session once, under its own id."""
    data = tmp_path / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    migrate(data / "storage", data / "opencode.db").close()
    db = tmp_path / "t.duckdb"
    quick_ingest([data / "storage", data / "opencode.db"], db)
    assert any("@" in sid for sid in sessions(db))  # (the state such a run left)

    quick_ingest([data / "opencode.db"], db)
    assert sessions(db) == {
        "opencode:ses_7f3b00000001ParentSession": 2,
        "opencode:ses_7f3b00000002ChildSession0": 2,
    }
    quick_ingest([data / "opencode.db"], db)  # (and then it is unchanged)
    assert stored_paths(db) == {str((data / "opencode.db").resolve())}


def test_a_storage_folder_given_with_its_db_is_still_read(tmp_path: Path) -> None:
    """Only a storage folder stored by an earlier ingest is superseded: one named in the same
    run as its database is what the user asked for."""
    data = tmp_path / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    migrate(data / "storage", data / "opencode.db").close()
    db = tmp_path / "t.duckdb"
    quick_ingest([data / "storage", data / "opencode.db"], db)
    assert len(stored_paths(db)) == 2


# --------------------------------------------------------------------------- files that are no sessions


def test_operating_system_litter_is_skipped_quietly(tmp_path: Path) -> None:
    """Finder's ``.DS_Store`` (in every folder a Mac user opened), AppleDouble ``._*`` files
    (copies to non-Mac volumes), Windows' ``Thumbs.db`` and ``desktop.ini``: never
    transcripts, and reporting them made every ``ingest --discover`` on a Mac exit 1."""
    project = tmp_path / "projects" / "-home-u-proj"
    shutil.copytree(CLAUDE_PROJECT, project)
    for folder in (tmp_path / "projects", project):
        (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\x00\x00\x10\x00" + bytes(32))
        (folder / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(32))
        (folder / "desktop.ini").write_text("[.ShellClassInfo]\r\n")
    (project / f"._{SESSION}.jsonl").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")

    assert units_under(tmp_path / "projects") == PROJECT_SESSIONS
    db = tmp_path / "t.duckdb"
    summary = ingest([tmp_path / "projects"], db=db, analyse=False, build_index=False, workers=1)
    assert not summary.errors and len(sessions(db)) == 3


def test_a_litter_file_named_on_the_command_line_is_still_reported(tmp_path: Path) -> None:
    ds = tmp_path / ".DS_Store"
    ds.write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(32))
    assert list(iter_inputs([ds])) == [(ds, None)]


def test_claude_code_session_side_folders_are_not_sessions(tmp_path: Path) -> None:
    """Claude Code keeps a session's large tool outputs in ``<session>/tool-results/<id>.txt``
    and its notes in ``<session>/session-memory/`` (also after the session file itself is
    cleaned up): the output is in the session's JSONL already, and a tool output that happens
    to look like a transcript must not become a session of its own."""
    project = tmp_path / "projects" / "-home-u-proj"
    shutil.copytree(CLAUDE_PROJECT, project)
    side = project / SESSION
    (side / "tool-results").mkdir()
    (side / "tool-results" / "toolu_01AbCdEf.txt").write_text(
        "[msg 1] user: is it up?\n[msg 2] assistant: yes\n"  # (a transcript cat'ed in a session)
    )
    (side / "tool-results" / "toolu_01GhIjKl.txt").write_text("INFO: Started server process\n")
    (side / "session-memory").mkdir()
    (side / "session-memory" / "summary.md").write_text("# Session notes\n")
    gone = project / "0f0f0f0f-1111-4222-8333-444444444444"  # (its .jsonl cleaned up)
    (gone / "tool-results").mkdir(parents=True)
    (gone / "tool-results" / "toolu_01MnOp.txt").write_text("total 0\n")

    assert units_under(tmp_path / "projects") == PROJECT_SESSIONS


def test_a_tool_results_folder_of_ones_own_is_walked(tmp_path: Path) -> None:
    """Only a session's side folder (under a folder named by a session id) is skipped."""
    mine = tmp_path / "tool-results"
    mine.mkdir()
    (mine / "run.txt").write_text("[msg 1] user: hi\n")
    assert [p for p, _ in iter_inputs([tmp_path])] == [mine / "run.txt"]


# --------------------------------------------------------------------------- re-runs


def test_a_rerun_changes_nothing_and_a_deleted_session_keeps_its_rows(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    shutil.copytree(CLAUDE_PROJECT, projects / "-home-u-proj")
    db = tmp_path / "t.duckdb"
    quick_ingest([projects], db)
    first = sessions(db)
    again = ingest([projects], db=db, analyse=False, build_index=False, workers=1)
    assert {f.status for f in again.files} == {"unchanged"} and sessions(db) == first

    (projects / "-home-u-proj" / "agent-a1b2c3d4.jsonl").unlink()  # (cleaned up by the agent)
    quick_ingest([projects], db)
    assert sessions(db) == first


def test_a_folder_read_as_opencode_prefers_opencode_db_to_another_channels(tmp_path: Path) -> None:
    """Reading opencode's data folder takes ``opencode.db`` as ``--discover`` does, not the
    first database by name (``opencode-beta.db`` sorts before it)."""
    from analytics.models import Ledger, Session
    from analytics.sources import opencode

    data = tmp_path / "opencode"
    data.mkdir()
    migrate(STORAGE, data / "opencode.db").close()
    beta = sqlite3.connect(data / "opencode-beta.db")
    beta.executescript(_SCHEMA)
    beta.close()
    found = [i for i in opencode.parse(data, Ledger()) if isinstance(i, Session)]
    assert {s.session_id for s in found} == {
        "opencode:ses_7f3b00000001ParentSession", "opencode:ses_7f3b00000002ChildSession0",
    }
