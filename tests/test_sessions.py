"""Which session a SESSION argument names (``transcripts show/report SESSION``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from analytics.errors import SessionNotFoundError, UsageError
from analytics.samples_path import sample_inputs
from analytics.store.db import connect
from analytics.store.sessions import resolve_session

PARENT = "claude_code:7c1d2e3f-1111-4222-8333-444455556666"
SESSIONS = [
    # (session_id, native_id, parent_session_id)
    (PARENT, PARENT.split(":", 1)[1], None),
    (PARENT + "/agent-a1", PARENT.split(":", 1)[1] + "/agent-a1", PARENT),
    (PARENT + "/agent-a2", PARENT.split(":", 1)[1] + "/agent-a2", PARENT),
    (PARENT + "/agent-a2/agent-b1", PARENT.split(":", 1)[1] + "/agent-a2/agent-b1",
     PARENT + "/agent-a2"),
    ("codex:7c1d9999-0000", "7c1d9999-0000", None),
    ("codex:abc", "abc", None),
    ("opencode:abc", "abc", None),
]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    db = connect(":memory:", read_only=False)
    for sid, native, parent in SESSIONS:
        db.execute(
            "INSERT INTO sessions (session_id, source_format, native_id, source_path, "
            "parent_session_id) VALUES (?, ?, ?, ?, ?)",
            [sid, sid.split(":")[0], native, f"/data/{sid.replace(':', '_')}.jsonl", parent],
        )
    return db


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7c1d2e3f", PARENT),  # the parent, not one of its subagents
        ("claude_code:7c1d", PARENT),
        (PARENT.split(":", 1)[1], PARENT),  # its native id, exactly
        ("7c1d2e3f-1111-4222-8333-444455556666/agent-a2", PARENT + "/agent-a2"),
        ("7c1d2e3f-1111-4222-8333-444455556666/agent-a1", PARENT + "/agent-a1"),
        ("7c1d2e3f-1111-4222-8333-444455556666/agent-a2/", PARENT + "/agent-a2/agent-b1"),
        ("7c1d9", "codex:7c1d9999-0000"),
        ("codex:abc", "codex:abc"),
    ],
)
def test_a_prefix_names_the_session_above_its_subagents(
    con: duckdb.DuckDBPyConnection, text: str, expected: str
) -> None:
    assert resolve_session(con, text) == expected


@pytest.mark.parametrize(
    ("text", "listed"),
    [
        ("7c1d", [PARENT, "codex:7c1d9999-0000"]),  # two sessions, with or without subagents
        ("abc", ["codex:abc", "opencode:abc"]),  # one native id in two formats
        ("7c1d2e3f-1111-4222-8333-444455556666/agent-a", [PARENT + "/agent-a1",
                                                          PARENT + "/agent-a2"]),
    ],
)
def test_real_ambiguity_lists_the_candidates(
    con: duckdb.DuckDBPyConnection, text: str, listed: list[str]
) -> None:
    with pytest.raises(UsageError, match="matches several sessions") as info:
        resolve_session(con, text)
    named = re.search(r"\((.*)\)", str(info.value))
    assert named is not None and named.group(1).split(", ") == listed


def test_no_match_is_not_found(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(SessionNotFoundError):
        resolve_session(con, "zzz")


def test_show_a_prefix_of_a_session_with_a_subagent(tmp_path: Path) -> None:
    """The bundled Claude Code sample has a subagent: its first eight characters name the
    parent session."""
    sample = next(p for p in sample_inputs() if p.name == "claude_code_vllm_session")
    parent = next(sample.glob("*.jsonl"))
    assert next(sample.glob(f"{parent.stem}/subagents/*.jsonl"))
    db = str(tmp_path / "t.duckdb")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "analytics.cli", *args, "--db", db],
                              cwd=tmp_path, capture_output=True, text=True)

    assert run("ingest", str(sample), "--workers", "1").returncode == 0
    res = run("show", parent.stem[:8])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"claude_code:{parent.stem} — ")
