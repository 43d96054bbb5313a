"""The CLI: documented, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _homes import codex_home, opencode_home
from _samples import all_tables
from typer.testing import CliRunner

from analytics.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _commands() -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]



def _one_line_session(tmp_path: Path, text: str) -> Path:
    """``s.jsonl``: a Claude Code session of one user line saying ``text``."""
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({
        "type": "user", "uuid": "u1", "sessionId": "abc", "parentUuid": None,
        "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": text},
    }) + "\n")
    return path

def test_every_command_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in _commands():
        assert f"`transcripts {name}" in readme, f"command {name} missing from README"


@pytest.mark.parametrize("name", _commands())
def test_every_command_has_help(name: str) -> None:
    res = runner.invoke(app, [name, "--help"])
    assert res.exit_code == 0
    assert "Usage" in res.output


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analytics.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def test_missing_database_is_one_clear_line(tmp_path: Path) -> None:
    res = _run("sessions", "--db", str(tmp_path / "nope.duckdb"), cwd=tmp_path)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and "nope.duckdb" in lines[0]
    assert "Traceback" not in res.stderr


def test_unknown_format_names_file_and_formats_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "notes.md"
    bad.write_text("# not a transcript\n")
    _one_line_session(tmp_path, "ok?")
    res = _run("ingest", str(tmp_path), "--db", str(tmp_path / "t.duckdb"), cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert "notes.md" in res.stderr and "claude_code" in res.stderr and "codex" in res.stderr
    assert "Traceback" not in res.stderr
    assert "Ingest summary" in res.stdout


def test_the_summary_counts_the_files_read_again_after_a_parser_update(tmp_path: Path) -> None:
    import duckdb

    good = _one_line_session(tmp_path, "ok?")
    db = tmp_path / "t.duckdb"
    res = runner.invoke(app, ["ingest", str(good), "--db", str(db)])  # (this checkout's code)
    assert res.exit_code == 0, res.output
    assert "re-read" not in res.stdout  # (shown when there are any)
    con = duckdb.connect(str(db))
    con.execute("UPDATE ingest_files SET parser_version = NULL")  # (stored by an older release)
    con.close()
    res = runner.invoke(app, ["ingest", str(good), "--db", str(db)])
    assert res.exit_code == 0, res.output
    cells = [line.split("│")[1:3] for line in res.stdout.splitlines() if line.count("│") == 3]
    rows = {what.strip(): count.strip() for what, count in cells}
    assert (rows["ingested or appended"], rows["re-read (parser updated)"], rows["unchanged"]) == (
        "1", "1", "0")


def test_bad_format_option_is_a_usage_error(tmp_path: Path) -> None:
    res = _run("ingest", str(tmp_path), "--format", "aider", "--db", str(tmp_path / "t.duckdb"),
               cwd=tmp_path)
    assert res.returncode == 2
    assert "aider" in res.stderr and "transcript_text" in res.stderr


def test_workers_option(tmp_path: Path) -> None:
    """``--workers 0`` is a usage error; ``--workers 2`` ingests the samples through a pool
    and stores what one process does."""
    from analytics.samples_path import samples_dir

    res = _run("ingest", str(tmp_path), "--workers", "0", "--db", str(tmp_path / "t.duckdb"),
               cwd=tmp_path)
    assert res.returncode == 2 and "--workers" in res.stderr
    tables = []
    for workers in ("1", "2"):
        db = tmp_path / f"w{workers}.duckdb"
        res = _run("ingest", str(samples_dir()), "--workers", workers, "--db", str(db),
                   cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        tables.append(all_tables(db))
    assert tables[0] == tables[1] and len(tables[0]["messages"]) > 300


def test_unknown_session_is_one_line(tmp_path: Path) -> None:
    good = _one_line_session(tmp_path, "hello")
    db = str(tmp_path / "t.duckdb")
    assert _run("ingest", str(good), "--db", db, cwd=tmp_path).returncode == 0
    res = _run("show", "zzz-none", "--db", db, cwd=tmp_path)
    assert res.returncode == 1 and "zzz-none" in res.stderr and "Traceback" not in res.stderr
    ok = _run("show", "abc", "--db", db, cwd=tmp_path)
    assert ok.returncode == 0 and "hello" in ok.stdout


def test_show_piped_keeps_each_message_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``show … | grep`` or ``> file``: no terminal width, so a message (or the note on the
    next page) must not be folded at 80 columns (a grep would find half of it)."""
    monkeypatch.setenv("COLUMNS", "40")
    words = " ".join(f"word{i}" for i in range(25))  # (about 170 characters)
    good = _one_line_session(tmp_path, words)
    db = str(tmp_path / "t.duckdb")
    assert _run("ingest", str(good), "--db", db, cwd=tmp_path).returncode == 0
    res = _run("show", "abc", "--db", db, cwd=tmp_path)
    assert res.returncode == 0
    assert any(line.endswith(words) and "user" in line for line in res.stdout.splitlines())
    second = tmp_path / "t.jsonl"
    second.write_text(good.read_text() + json.dumps({
        "type": "user", "uuid": "u2", "sessionId": "abc", "parentUuid": "u1",
        "timestamp": "2026-01-01T00:01:00Z", "message": {"role": "user", "content": "ok?"},
    }) + "\n")
    db2 = str(tmp_path / "t2.duckdb")
    assert _run("ingest", str(second), "--db", db2, cwd=tmp_path).returncode == 0
    paged = _run("show", "abc", "--db", db2, "--limit", "1", cwd=tmp_path)
    assert "--from 1 for the next ones, --limit 0 for all." in paged.stdout.splitlines()[-1]



def test_show_prints_no_tag_chip_for_an_untagged_message(tmp_path: Path) -> None:
    """A message without tags has a NULL ``tags``; pandas 3 reads it as NaN, which is truthy
    and printed as a ``nan`` tag."""
    good = tmp_path / "s.jsonl"
    good.write_text("".join(json.dumps({
        "type": "user", "uuid": f"u{i}", "sessionId": "abc", "parentUuid": None,
        "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": text},
    }) + "\n" for i, text in enumerate(["hello", "ok?"])))
    db = str(tmp_path / "t.duckdb")
    assert _run("ingest", str(good), "--db", db, cwd=tmp_path).returncode == 0
    res = _run("show", "abc", "--db", db, cwd=tmp_path)
    assert res.returncode == 0
    assert [line.split()[2:] for line in res.stdout.splitlines()[1:]] == [
        ["user:", "hello"], ["user", "user_checkin:", "ok?"]]

def test_discover_finds_the_agents_local_stores(tmp_path: Path) -> None:
    import os
    import shutil

    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-work-demo"
    project.mkdir(parents=True)
    sample = ROOT / "data" / "samples" / "claude_code_vllm_session"
    shutil.copy(next(sample.glob("*.jsonl")), project)
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
               CODEX_HOME=str(home / ".codex"))
    env.pop("CLAUDE_CONFIG_DIR", None)
    db = str(tmp_path / "t.duckdb")
    res = subprocess.run([sys.executable, "-m", "analytics.cli", "ingest", "--discover", "--db", db],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert ".claude/projects" in res.stdout
    empty = dict(env, HOME=str(tmp_path / "nobody"), XDG_DATA_HOME=str(tmp_path / "nobody"),
                 CODEX_HOME=str(tmp_path / "nobody"))
    res = subprocess.run([sys.executable, "-m", "analytics.cli", "ingest", "--discover", "--db", db],
                         cwd=tmp_path, capture_output=True, text=True, env=empty)
    assert res.returncode == 1 and "found no local agent stores" in res.stderr


def test_a_duckdb_file_without_our_schema_is_one_clear_line(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "other.duckdb"
    duckdb.connect(str(db)).close()
    res = _run("sessions", "--db", str(db), cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "transcripts ingest" in res.stderr


def test_exit_now_runs_atexit_flushes_and_keeps_the_code(tmp_path: Path) -> None:
    code = (
        "import atexit; atexit.register(lambda: print('handler ran'));"
        "from analytics.machine import exit_now; print('work done', end=' '); exit_now(3)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 3
    assert res.stdout == "work done handler ran\n"


def test_ingest_command_ends_fast_with_its_database_closed(tmp_path: Path) -> None:
    """Ending without the interpreter's teardown loses nothing: the summary is printed, the
    exit code kept (0, then 1 for a bad file), and the database left checkpointed (no
    write-ahead log)."""
    from analytics.samples_path import samples_dir

    db = tmp_path / "t.duckdb"
    res = _run("ingest", str(samples_dir()), "--db", str(db), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Ingest summary" in res.stdout
    assert db.exists() and not Path(str(db) + ".wal").exists()
    bad = tmp_path / "notes.md"
    bad.write_text("# not a transcript\n")
    res = _run("ingest", str(bad), "--db", str(db), cwd=tmp_path)
    assert res.returncode == 1 and "notes.md" in res.stderr
    assert not Path(str(db) + ".wal").exists()


def test_transcript_text_in_brackets_is_shown_not_read_as_markup(tmp_path: Path) -> None:
    """Titles, snippets and ids come from transcripts: ``[/INST]`` is text, not Rich markup."""
    title = "ends with [/INST]; log [/tmp/s.log] [bold]"
    src = tmp_path / "run[2].txt"
    src.write_text(f"[msg 1] user: {title}\n[msg 2] assistant: ok\n")
    db = str(tmp_path / "t.duckdb")
    env = {**os.environ, "COLUMNS": "400"}
    assert _run("ingest", str(src), "--db", db, cwd=tmp_path).returncode == 0
    for args, expected in [
        (("sessions",), [title, "transcript_text:run[2]"]),
        (("search", "INST"), [title]),
        (("show", "run[2]"), [title, "transcript_text:run[2]"]),
    ]:
        res = subprocess.run(
            [sys.executable, "-m", "analytics.cli", *args, "--db", db],
            cwd=tmp_path, capture_output=True, text=True, env=env,
        )
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
        for text in expected:
            assert text in res.stdout, (args, res.stdout)


def test_an_error_naming_brackets_keeps_them(tmp_path: Path) -> None:
    bad = tmp_path / "notes[old].txt"
    bad.write_text("no headers here\n")
    res = _run("ingest", str(bad), "--db", str(tmp_path / "t.duckdb"), cwd=tmp_path)
    assert res.returncode == 1
    error = " ".join(res.stderr.split())
    assert "notes[old].txt" in error and "[msg 1] user:" in error


def test_an_empty_file_is_a_notice_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    _one_line_session(tmp_path, "ok?")
    for args in ([str(tmp_path)], [str(tmp_path / "empty.jsonl"), "--format", "codex"]):
        res = _run("ingest", *args, "--db", str(tmp_path / "t.duckdb"), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Skipped: ") and "empty.jsonl" in lines[0]
        assert "Error" not in res.stderr
        assert "skipped (empty)" in res.stdout


def test_an_agents_home_is_one_line_saying_what_was_not_read(tmp_path: Path) -> None:
    """``transcripts ingest ~/.codex``: its sessions, no error for its own files, and one
    line naming them, on stderr where the skipped files are named."""
    home = codex_home(tmp_path / ".codex")
    res = _run("ingest", str(home), "--db", str(tmp_path / "t.duckdb"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"Skipped: {home}: Codex's own files, not transcripts, were not read: auth.json, "
        "config.toml, history.jsonl, log/, shell_snapshots/, state_5.sqlite and 1 more"
    ]


def test_the_progress_total_is_the_bytes_an_ingest_reads(tmp_path: Path) -> None:
    """The progress bar's total counts the units, not an agent's snapshots and logs beside
    them (the bar would stop far short of it)."""
    from analytics.cli import _total_bytes

    data = opencode_home(tmp_path / "opencode")
    storage = sum(f.stat().st_size for f in (data / "storage").rglob("*") if f.is_file())
    assert _total_bytes([data]) == storage


def test_watch_notes_an_agents_home_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each round of ``--watch ~/.claude`` walks the home again: its note is printed at the
    first round, and again only when it changes."""
    import analytics.ingest
    from analytics import cli
    from analytics.ingest import AgentFiles, IngestSummary

    home = str(tmp_path / ".claude")
    notes = [["todos/"], ["todos/"], ["todos/", "debug/"], ["todos/", "debug/"]]

    def fake_watch(paths: object, interval_s: float, report: Any, **_: object) -> None:
        for entries in notes:
            report(IngestSummary(str(tmp_path / "t.duckdb"), [],
                                 [AgentFiles(home, "Claude Code", entries)]))

    monkeypatch.setattr(analytics.ingest, "watch", fake_watch)
    monkeypatch.setattr(cli, "err", cli.Console(stderr=True, width=400))
    cli._watch([tmp_path], str(tmp_path / "t.duckdb"), "auto", True, None, False, 1.0)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Skipped:")]
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["todos/", "debug/, todos/"]


def test_watch_prints_an_error_once_while_it_stays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every round of ``--watch`` ingests again while a live session grows: a file beside it
    that cannot be ingested is named when its error appears or changes, not at every round
    (the round's line still counts it)."""
    import analytics.ingest
    from analytics import cli
    from analytics.ingest import FileResult, IngestSummary

    def bad(error: str) -> FileResult:
        return FileResult("/s/notes.json", None, "error", error=error)

    live = FileResult("/s/live.jsonl", "claude_code", "appended", 1, 10)
    rounds = [[live, bad("JSON of an unknown shape")], [live, bad("JSON of an unknown shape")],
              [live], [live, bad("JSON of an unknown shape")], [live, bad("not UTF-8")]]

    def fake_watch(paths: object, interval_s: float, report: Any, **_: object) -> None:
        for files in rounds:
            report(IngestSummary(str(tmp_path / "t.duckdb"), files))

    monkeypatch.setattr(analytics.ingest, "watch", fake_watch)
    monkeypatch.setattr(cli, "err", cli.Console(stderr=True, width=200))
    cli._watch([tmp_path], str(tmp_path / "t.duckdb"), "auto", True, None, False, 1.0)
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: JSON of an unknown shape", "Error: JSON of an unknown shape",
                      "Error: not UTF-8"]
