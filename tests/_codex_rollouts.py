"""Codex rollouts for tests: unified exec headers and rollout files of response items."""

from __future__ import annotations

import json
from pathlib import Path


def exec_header(
    wall: str, exit_code: int | None = 0, session: int | None = None, chunk: str = "5d2003"
) -> str:
    """A unified exec header as Codex writes it: the process exited with ``exit_code``, or
    runs on in ``session``."""
    state = (
        f"Process running with session ID {session}\n"
        if session is not None
        else f"Process exited with code {exit_code}\n"
    )
    return f"Chunk ID: {chunk}\nWall time: {wall} seconds\n{state}Original token count: 12\nOutput:\n"


EVENT = "event_msg"


def event(payload: dict[str, object]) -> dict[str, object]:
    """An item of ``write_rollout`` written as an ``event_msg`` line, not a response item."""
    return {EVENT: payload}


def write_rollout(
    tmp_path: Path, sid: str, day: str, items: list[tuple[int, dict[str, object]]]
) -> Path:
    """A rollout file of session ``sid`` on ``day`` (YYYY-MM-DD), from 10:00: the session
    meta, then each (second, response item payload, or ``event(payload)``)."""

    def stamp(second: int) -> str:
        return f"{day}T10:{second // 60:02d}:{second % 60:02d}.000Z"

    def line(at: int, item: dict[str, object]) -> dict[str, object]:
        if EVENT in item:
            return {"timestamp": stamp(at), "type": EVENT, "payload": item[EVENT]}
        return {"timestamp": stamp(at), "type": "response_item", "payload": item}

    lines = [
        {"timestamp": stamp(0), "type": "session_meta",
         "payload": {"id": sid, "timestamp": stamp(0), "cwd": "/w", "cli_version": "0.150.0"}},
        *(line(at, item) for at, item in items),
    ]
    path = tmp_path / f"rollout-{day}T10-00-00-{sid}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def ingest_rollout(
    tmp_path: Path, day: str, items: list[tuple[int, dict[str, object]]],
    sid: str = "0199a000-0000-7000-8000-0000000000ee",
) -> Path:
    """The database (in ``tmp_path``) of an ingest of ``write_rollout``'s file, which must
    ingest without error."""
    from analytics.ingest import ingest

    db = tmp_path / "t.duckdb"
    summary = ingest([write_rollout(tmp_path, sid, day, items)], db=db)
    assert not summary.errors, summary.errors
    return db
