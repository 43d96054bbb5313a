"""The agents' own stores as they lie on users' disks (``ingest --discover``, a folder ingest):
which files are sessions, which are the agents' other files, and nothing counted twice."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest
from _homes import TEXT, claude_home, codex_home, copy, git_dir, opencode_home, put

from analytics.ingest import IngestSummary, ingest
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
    from analytics.sources.homes import installed_stores as discover_paths

    home = tmp_path / "home"
    data = home / ".local" / "share" / "opencode"
    shutil.copytree(STORAGE, data / "storage")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert discover_paths() == [data / "storage"]  # (before opencode 1.2)
    (data / "opencode-beta.db").write_bytes(b"")  # another release channel's database
    assert discover_paths() == [data / "opencode-beta.db"]
    (data / "opencode-beta.db").unlink()

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


# --------------------------------------------------------------------------- agents' home folders


def ingest_quietly(paths: list[Path], db: Path) -> IngestSummary:
    return ingest(paths, db=db, analyse=False, build_index=False, workers=1)


def test_a_claude_code_home_ingests_its_sessions_not_its_own_files(tmp_path: Path) -> None:
    """``transcripts ingest ~/.claude``: the sessions in ``projects/`` and nothing else, no
    error for its settings, history, todos, logs and snapshots, one note of what was not
    read; and no session from ``file-history/``, which backs up files Claude Code edited."""
    home = claude_home(tmp_path / ".claude")
    summary = ingest_quietly([home], tmp_path / "t.duckdb")
    assert not summary.errors, [f.error for f in summary.errors]
    assert {Path(f.path).relative_to(home / "projects").as_posix() for f in summary.files} == (
        PROJECT_SESSIONS
    )
    assert len(sessions(tmp_path / "t.duckdb")) == 3
    [noted] = summary.agent_files
    assert (noted.path, noted.agent) == (str(home), "Claude Code")
    assert sorted(noted.entries) == [
        ".credentials.json", "CLAUDE.md", "debug/", "file-history/", "history.jsonl",
        "projects/-home-u-proj/memory/", "projects/-home-u-proj/sessions-index.json",
        "settings.json", "shell-snapshots/", "statsig/", "todos/",
    ]


def test_what_a_user_put_in_an_agents_home_is_read_and_reported(tmp_path: Path) -> None:
    """Only the agent's own entries are passed over: a transcript the user keeps in the home
    is ingested, and a broken one is reported."""
    home = claude_home(tmp_path / ".claude")
    copy(TEXT, home / "exports" / "run1.txt")
    broken = put(home / "exports" / "broken.jsonl", '{"sessionId": "x", "messa')
    summary = ingest_quietly([home], tmp_path / "t.duckdb")
    assert [f.path for f in summary.errors] == [str(broken)]
    assert str(home / "exports" / "run1.txt") in {f.path for f in summary.files}


def test_a_codex_home_ingests_sessions_and_archived_sessions(tmp_path: Path) -> None:
    home = codex_home(tmp_path / ".codex")
    summary = ingest_quietly([home], tmp_path / "t.duckdb")
    assert not summary.errors, [f.error for f in summary.errors]
    assert set(sessions(tmp_path / "t.duckdb")) == {
        "codex:0199a000-0000-7000-8000-000000000001", "codex:0199a000-0000-7000-8000-000000000002",
    }
    [noted] = summary.agent_files
    assert noted.agent == "Codex" and sorted(noted.entries) == [
        "auth.json", "config.toml", "history.jsonl", "log/", "shell_snapshots/",
        "state_5.sqlite", "version.json",
    ]


def test_an_opencode_data_folder_is_read_from_its_storage_alone(tmp_path: Path) -> None:
    """``~/.local/share/opencode``: its storage (or database), not its auth file, logs,
    binaries, tool outputs, nor the git objects of ``snapshot/`` (one error each before)."""
    data = opencode_home(tmp_path / "opencode")
    assert list(iter_inputs([data])) == [(data / "storage", "opencode")]
    summary = ingest_quietly([data], tmp_path / "t.duckdb")
    assert not summary.errors and len(sessions(tmp_path / "t.duckdb")) == 2
    assert sorted(summary.agent_files[0].entries) == [
        "auth.json", "bin/", "log/", "snapshot/", "tool-output/",
    ]


def test_the_homes_side_by_side_as_under_a_users_home(tmp_path: Path) -> None:
    claude_home(tmp_path / ".claude")
    codex_home(tmp_path / ".codex")
    opencode_home(tmp_path / ".local" / "share" / "opencode")
    summary = ingest_quietly([tmp_path], tmp_path / "t.duckdb")
    assert not summary.errors, [f.error for f in summary.errors]
    assert len(sessions(tmp_path / "t.duckdb")) == 3 + 2 + 2
    assert [h.agent for h in summary.agent_files] == ["Claude Code", "Codex", "opencode"]


def test_a_projects_folder_given_alone_still_skips_claude_codes_own_files(
    tmp_path: Path,
) -> None:
    """``--discover`` gives ``~/.claude/projects``: the home above it says which entries of
    a project folder are Claude Code's own (its auto memory, its sessions index)."""
    home = claude_home(tmp_path / ".claude")
    assert units_under(home / "projects") == PROJECT_SESSIONS
    summary = ingest_quietly([home / "projects"], tmp_path / "t.duckdb")
    assert not summary.errors
    assert sorted(summary.agent_files[0].entries) == [
        "projects/-home-u-proj/memory/", "projects/-home-u-proj/sessions-index.json",
    ]


def test_an_agents_own_file_named_on_the_command_line_is_reported(tmp_path: Path) -> None:
    """Named, an agent's own file is read as asked, and its error says what it is: a prompt
    history is not a session."""
    claude = claude_home(tmp_path / ".claude")
    codex = codex_home(tmp_path / ".codex")
    summary = ingest_quietly([claude / "history.jsonl", codex / "history.jsonl",
                              claude / "todos"], tmp_path / "t.duckdb")
    errors = [f.error or "" for f in summary.errors]
    assert len(errors) == 3
    assert "Claude Code's prompt history" in errors[0] and "projects/" in errors[0]
    assert "Codex's prompt history" in errors[1] and "sessions/" in errors[1]
    assert not summary.agent_files


def test_a_session_named_history_jsonl_is_still_a_session(tmp_path: Path) -> None:
    """Passing over ``history.jsonl`` is for the home's own one: elsewhere the name means
    nothing, and a session so named is ingested."""
    copy(CLAUDE_PROJECT / f"{SESSION}.jsonl", tmp_path / "logs" / "history.jsonl")
    summary = ingest_quietly([tmp_path / "logs"], tmp_path / "t.duckdb")
    assert [f.status for f in summary.files] == ["ingested"]


def test_a_users_folder_with_one_agent_name_is_not_taken_for_its_home(tmp_path: Path) -> None:
    """A ``sessions/`` folder and a ``config.toml`` are common names: it takes two of an
    agent's marks to read a folder as its home, so this folder's ``log/`` is read."""
    work = tmp_path / "work"
    put(work / "sessions" / "s.txt", TEXT.read_text())
    put(work / "config.toml", "[tool]\n")
    copy(TEXT, work / "log" / "run.txt")
    assert units_under(work) == {"config.toml", "log/run.txt", "sessions/s.txt"}


def test_a_git_directory_is_never_walked(tmp_path: Path) -> None:
    """A bare git directory (a backup, a mirror, opencode's snapshot of a project) holds git
    objects, never transcripts: one error per object before. A git worktree's ``.git`` file
    (a pointer to its git directory) is skipped as the ``.git`` folder is."""
    logs = tmp_path / "logs"
    copy(TEXT, logs / "run1.txt")
    git_dir(logs / "mirror.git")
    put(logs / "checkout" / ".git", "gitdir: /home/u/logs/mirror.git/worktrees/checkout\n")
    copy(TEXT, logs / "checkout" / "run2.txt")
    assert units_under(logs) == {"run1.txt", "checkout/run2.txt"}
    assert units_under(logs / "mirror.git") == set()


def test_watch_takes_no_round_for_an_agents_own_files(tmp_path: Path) -> None:
    """``ingest --watch ~/.claude``: Claude Code writes its debug log and shell snapshots all
    the while it runs; only a change to a unit (a session) is a reason for a round."""
    from analytics.ingest import watch

    home = claude_home(tmp_path / ".claude")
    rounds: list[IngestSummary] = []

    def report(summary: IngestSummary) -> None:
        rounds.append(summary)
        if len(rounds) == 1:
            put(home / "debug" / f"{SESSION}.txt", "2025-10-01T10:00:01Z [DEBUG] more\n" * 9)
            git_dir(home / "plugins" / "marketplaces" / "official" / ".git")

    watch([home], 0.01, report, polls=3, db=tmp_path / "t.duckdb", analyse=False,
          build_index=False, workers=1)
    assert len(rounds) == 1


def test_discover_reads_claude_config_dir_and_codex_archived_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's home is ``$CLAUDE_CONFIG_DIR`` when set; Codex moves an archived session
    to ``archived_sessions/`` beside ``sessions/``."""
    from analytics.sources.homes import installed_stores as discover_paths

    claude = claude_home(tmp_path / "cc")
    codex = codex_home(tmp_path / "cx")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    assert discover_paths() == [
        claude / "projects", codex / "sessions", codex / "archived_sessions",
    ]


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
