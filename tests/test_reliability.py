"""Crash safety and concurrent writers: the store must never lie."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from analytics.errors import DatabaseLockedError
from analytics.store.db import connect


def _session(path: Path, sid: str, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            content = f"line {i} of {sid}" if role == "user" else [{"type": "text", "text": f"reply {i}"}]
            f.write(json.dumps({
                "type": role, "uuid": f"{sid}-{i}", "parentUuid": None, "sessionId": sid,
                "timestamp": "2026-01-01T00:00:00Z", "version": "2.0.42",
                "message": {"role": role, "content": content},
            }) + "\n")


def _snapshot(db: Path) -> dict[str, object]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        per_file = con.execute(
            "SELECT f.path, f.records_read, f.records_stored, count(m.msg_idx) FROM ingest_files f "
            "LEFT JOIN sessions s ON s.source_path = f.path LEFT JOIN messages m USING (session_id) "
            "GROUP BY ALL ORDER BY 1"
        ).fetchall()
        orphans = con.execute(
            "SELECT count(*) FROM sessions s WHERE NOT EXISTS "
            "(SELECT 1 FROM ingest_files f WHERE f.path = s.source_path)"
        ).fetchone()
        return {"files": per_file, "orphan_sessions": orphans[0] if orphans else None}
    finally:
        con.close()


INGEST = (
    "import sys; from analytics.ingest import ingest; "
    "ingest([sys.argv[1]], db=sys.argv[2], workers=int(sys.argv[3]) if sys.argv[3:] else None)"
)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigkill_mid_ingest_leaves_no_partial_file(tmp_path: Path, workers: str) -> None:
    """Also with a worker pool: its workers die with the ingest, and each one's files are
    copied in one transaction."""
    src = tmp_path / "src"
    src.mkdir()
    for k in range(6):
        _session(src / f"s{k}.jsonl", f"sess-{k}", 400)
    clean_db = tmp_path / "clean.duckdb"
    subprocess.run([sys.executable, "-c", INGEST, str(src), str(clean_db)], check=True)
    clean = _snapshot(clean_db)
    rng = random.Random(3)
    for attempt in range(3):
        db = tmp_path / f"killed{attempt}.duckdb"
        proc = subprocess.Popen([sys.executable, "-c", INGEST, str(src), str(db), workers])
        time.sleep(rng.uniform(1.0, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _no_workers_left(db)
        if db.exists():
            snap = _snapshot(db)  # opens: the database is not corrupt
            assert snap["orphan_sessions"] == 0
            for _path, read, stored, n_messages in snap["files"]:  # type: ignore[union-attr]
                assert read == stored == n_messages == 400  # whole files only
        subprocess.run([sys.executable, "-c", INGEST, str(src), str(db)], check=True)
        assert _snapshot(db)["files"] == clean["files"]
        assert not list(tmp_path.glob(f"{db.name}.pool-*"))  # (the rerun removed them)


def _no_workers_left(db: Path) -> None:
    """No process the killed ingest of ``db`` forked lives on (its forks share its command
    line; they die with it, within a moment)."""
    deadline = time.monotonic() + 10
    while True:
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs(p, str(db))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"processes of the killed ingest still run: {left}"


def _runs(proc: Path, arg: str) -> bool:
    try:
        return arg.encode() in (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def _hold(db: Path, then: str = "time.sleep(30)") -> subprocess.Popen[str]:
    """A process holding ``db`` open for writing (``then``: what it does after saying so),
    once it has printed ``ready``."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
         + then, str(db)],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


def test_second_writer_waits_then_gives_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    connect(db, read_only=False).close()
    holder = _hold(db)
    try:
        start = time.monotonic()
        try:
            connect(db, read_only=False, wait_s=0.5)
        except DatabaseLockedError as exc:
            assert str(db) in str(exc) and "retry" in str(exc)
        else:
            raise AssertionError("expected DatabaseLockedError")
        assert time.monotonic() - start >= 0.5  # it did wait (a bound, not a timing claim)
    finally:
        holder.kill()
        holder.wait()
    # Once the writer is gone, the same call succeeds.
    connect(db, read_only=False, wait_s=5).close()


def test_reader_waits_for_writer_between_files(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    connect(db, read_only=False).close()
    env = dict(os.environ)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
         "time.sleep(1.5); c.close(); time.sleep(5)", str(db)],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        con = connect(db, read_only=True, wait_s=20)  # waits until the writer lets go
        assert con.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        con.close()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("command", [["sessions"], ["search", "anything"]])
def test_read_commands_wait_for_a_round_of_ingest_watch(tmp_path: Path, command: list[str]) -> None:
    """`ingest --watch` holds the file for a moment each round; a read command started
    then waits for it instead of failing."""
    db = tmp_path / "t.duckdb"
    connect(db, read_only=False).close()
    holder = _hold(db, "time.sleep(2.0); c.close(); time.sleep(30)")
    try:
        res = subprocess.run(
            [sys.executable, "-m", "analytics.cli", *command, "--db", str(db)],
            capture_output=True, text=True, timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 0, res.stderr
    assert "0 sessions" in res.stdout or "0 matches" in res.stdout
