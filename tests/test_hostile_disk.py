"""What users really have on disk, end to end through ``ingest``: odd file names, links
that lead nowhere, a database path that is not a DuckDB file. (Parser-level damage is in
test_hostile_inputs.py; crashes and lock contention in test_reliability.py.)"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.errors import DatabaseError
from analytics.ingest import ingest
from analytics.store.db import connect

posix_bytes_names = pytest.mark.skipif(
    sys.platform != "linux", reason="file names of arbitrary bytes are a Linux thing"
)


def _session_text(sid: str, n: int = 3) -> str:
    return "".join(
        json.dumps({
            "type": "user", "uuid": f"{sid}-{i}", "parentUuid": None, "sessionId": sid,
            "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": f"hi {i}"},
        }) + "\n"
        for i in range(n)
    )


def _ledger(db: Path) -> list[tuple[str, int, int, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT path, records_read, records_stored, records_quarantined FROM ingest_files "
            "ORDER BY path"
        ).fetchall()
    finally:
        con.close()


@posix_bytes_names
def test_a_file_name_that_is_not_utf8_is_ingested(tmp_path: Path) -> None:
    """A Latin-1 name (an old archive unpacked on a UTF-8 system) is a file like any other:
    stored under its path with the undecodable bytes written as ``\\xNN``, again
    unchanged at the next run."""
    folder = tmp_path / "src"
    folder.mkdir()
    raw = os.path.join(os.fsencode(folder), b"caf\xe9 session.jsonl")
    with open(raw, "w") as f:
        f.write(_session_text("latin"))
    transcript = os.path.join(os.fsencode(folder), b"caf\xe9 notes.txt")
    with open(transcript, "w") as f:
        f.write("[msg 1] user: is it up?\n[msg 2] assistant: yes\n")
    db = tmp_path / "t.duckdb"
    first = ingest([folder], db=db, workers=1)
    assert not first.errors, [f.error for f in first.errors]
    paths = [row[0] for row in _ledger(db)]
    assert paths == [
        str(folder.resolve()) + "/caf\\xe9 notes.txt",
        str(folder.resolve()) + "/caf\\xe9 session.jsonl",
    ]
    assert [row[1:] for row in _ledger(db)] == [(2, 2, 0), (3, 3, 0)]
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute(
        "SELECT native_id FROM sessions WHERE source_format = 'transcript_text'"
    ).fetchall() == [("caf\\xe9 notes",)]
    con.close()
    again = ingest([folder], db=db, workers=1)
    assert [f.status for f in again.files] == ["unchanged", "unchanged"]


def test_an_sqlite_file_given_as_the_database_is_refused_untouched(tmp_path: Path) -> None:
    """``--db ~/.local/share/opencode/opencode.db`` by mistake: DuckDB would open an SQLite
    file through its sqlite extension (downloading it first) and the schema would be
    created inside the agent's own database. It is one clear error instead, and the file
    is left as it was."""
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE session (id TEXT)")
    con.commit()
    con.close()
    before = db.read_bytes()
    for read_only in (False, True):
        with pytest.raises(DatabaseError) as info:
            connect(db, read_only=read_only)
        assert str(db) in str(info.value) and "SQLite" in str(info.value)
        assert "download" not in str(info.value)
    assert db.read_bytes() == before


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_link_to_nothing_in_a_folder_is_named_as_such(tmp_path: Path, kind: str) -> None:
    """A symbolic link that loops (or points at nothing) is reported as that, not as a file
    that does not exist (it is listed right there), and the folder's other files go in."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(_session_text("ok"))
    link = folder / "link.jsonl"
    if kind == "loop":
        os.symlink("link.jsonl", link)
    else:
        os.symlink("gone.jsonl", link)
    summary = ingest([folder], db=tmp_path / "t.duckdb", workers=1)
    assert [f.status for f in summary.files] == ["error", "ingested"]
    error = summary.errors[0].error or ""
    assert str(link) in error and "symbolic link" in error
    assert ("loop" in error) == (kind == "loop")


def _interrupt_second_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C pressed while the second file's load waits on DuckDB (where an ingest of a
    large database spends most of its time), as DuckDB reports it: ``RuntimeError('Query
    interrupted')`` raised from the ``KeyboardInterrupt``. (Raised here rather than by a timed
    SIGINT: on a loaded machine the signal can land outside the query.)"""
    from analytics.ingest import Ingestor

    real = Ingestor._load
    calls: list[Path] = []

    def load(self: Ingestor, path: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        if len(calls) == 2:
            self.con.execute("SELECT count(*) FROM range(1000)").fetchall()
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as pressed:
                raise RuntimeError("Query interrupted") from pressed
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Ingestor, "_load", load)


def test_ctrl_c_during_a_query_stops_the_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB turns a SIGINT that arrives during a query into ``RuntimeError('Query
    interrupted')``: it must stop the run (not count as one failed file while the run goes
    on), leave the files before it stored whole, and a rerun must equal a clean ingest."""
    from _samples import all_tables

    folder = tmp_path / "src"
    folder.mkdir()
    for k in range(3):
        (folder / f"s{k}.jsonl").write_text(_session_text(f"sess-{k}"))
    db = tmp_path / "t.duckdb"
    with monkeypatch.context() as patch:
        _interrupt_second_load(patch)
        with pytest.raises(KeyboardInterrupt):
            ingest([folder], db=db, workers=1)
    assert [row[0].rsplit("/", 1)[1] for row in _ledger(db)] == ["s0.jsonl"]
    rerun = ingest([folder], db=db, workers=1)
    assert [f.status for f in rerun.files] == ["unchanged", "ingested", "ingested"]
    clean = tmp_path / "clean.duckdb"
    ingest([folder], db=clean, workers=1)
    assert all_tables(db) == all_tables(clean)


def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The command says it was interrupted and what that left (not a silent exit)."""
    from analytics import cli

    folder = tmp_path / "src"
    folder.mkdir()
    for k in range(2):
        (folder / f"s{k}.jsonl").write_text(_session_text(f"sess-{k}"))
    _interrupt_second_load(monkeypatch)
    monkeypatch.setattr(sys, "argv", [
        "transcripts", "ingest", str(folder), "--db", str(tmp_path / "t.duckdb"), "--workers", "1"
    ])
    assert cli._run() == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Interrupted"), lines
    assert "again" in lines[0]
