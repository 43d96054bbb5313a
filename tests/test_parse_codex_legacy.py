"""Codex rollouts written by the Rust CLI before the ``{"timestamp", "type", "payload"}``
wrapper (2025-05-07 to 2025-09-09, openai/codex 42617f87 .. 43809a45^).

The inputs are built here from the writer's code of those builds
(``codex-rs/core/src/rollout.rs`` / ``rollout/recorder.rs``, ``models.rs``): a first line
holding the session meta itself (id, timestamp, instructions, git), then each response
item serialized bare, one per line, and a ``{"record_type":"state"}`` line before every
batch of items. No line but the first carries a timestamp.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from _samples import of, resumed_equals_whole, run

from analytics.errors import UnknownFormatError
from analytics.ingest import ingest
from analytics.models import (
    Ledger,
    Message,
    ParsedItem,
    Quarantined,
    RawRecord,
    Resume,
    Session,
    ToolCall,
)
from analytics.sources import claude_code, codex
from analytics.sources.detect import detect_format

SID = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
NAME = f"rollout-2025-08-12T09-14-03-{SID}.jsonl"
META = {
    "id": SID,
    "timestamp": "2025-08-12T09:14:03.512Z",
    "instructions": "Use uv for Python packages.",
    "git": {
        "commit_hash": "0f3c2a9b7e1d4c5a6b8e9f0a1b2c3d4e5f6a7b8c",
        "branch": "main",
        "repository_url": "git@github.com:lab/serving.git",
    },
}
STATE = {"record_type": "state"}


def _shell(cmd: str) -> str:
    return json.dumps({"command": ["bash", "-lc", cmd], "timeout": 10000})


def _exec_output(text: str, exit_code: int) -> str:
    return json.dumps({"output": text, "metadata": {"exit_code": exit_code, "duration_seconds": 0.1}})


def _message(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "id": None, "role": role, "content": [{"type": part, "text": text}]}


LAUNCH = "nohup python -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000 &"
POLL = "until curl -s localhost:30000/health; do sleep 5; done"
ITEMS: list[dict | None] = [
    # None: a state line in the older shape, an event_msg/token_count in the wrapped one
    None,
    _message("user", "<user_instructions>\n\nUse uv for Python packages.\n\n</user_instructions>"),
    _message("user", "launch the sglang server and tell me when it is ready"),
    None,
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "**Launching the server**"}],
        "encrypted_content": None,
    },
    {"type": "function_call", "id": "fc_1", "name": "shell", "arguments": _shell(LAUNCH),
     "call_id": "call_launch"},
    None,
    {"type": "function_call_output", "call_id": "call_launch",
     "output": _exec_output("[1] 4242\n", 0)},
    {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_health", "status": "completed",
     "action": {"type": "exec", "command": ["curl", "-s", "localhost:30000/health"],
                "timeout_ms": None, "working_directory": None, "env": None, "user": None}},
    {"type": "function_call_output", "call_id": "call_health",
     "output": _exec_output("curl: (7) Failed to connect to localhost port 30000", 7)},
    # interrupted by the user: builds of that time wrote no output and no marker
    {"type": "function_call", "id": "fc_2", "name": "shell", "arguments": _shell(POLL),
     "call_id": "call_poll"},
    None,
    _message("user", "ok?"),
    {"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "call_patch",
     "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_patch", "output": "aborted"},
    _message("assistant", "The server is up on port 30000."),
]


def _compact(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))  # as serde_json writes it


def legacy_lines() -> list[dict]:
    return [META] + [STATE if item is None else item for item in ITEMS]


def wrapped_lines() -> list[dict]:
    """The same conversation in today's shape (what a newer build would write)."""
    ts = "2025-08-12T09:14:03.512Z"
    lines = [{"timestamp": ts, "type": "session_meta", "payload": META}]
    for item in ITEMS:
        if item is None:
            token_count = {"type": "token_count", "info": None}
            lines.append({"timestamp": ts, "type": "event_msg", "payload": token_count})
        else:
            lines.append({"timestamp": ts, "type": "response_item", "payload": item})
    return lines


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(_compact(obj) + "\n" for obj in lines))
    return path


def parse(path: Path, resume: Resume | None = None) -> tuple[list[ParsedItem], Ledger]:
    return run(codex, path, resume)


@pytest.fixture()
def legacy(tmp_path: Path) -> Path:
    return write(tmp_path / NAME, legacy_lines())


def test_older_rollout_is_detected_as_codex(legacy: Path) -> None:
    head = legacy.read_bytes()[:65536]
    assert codex.sniff(legacy, head)
    assert not claude_code.sniff(legacy, head)
    assert detect_format(legacy) == "codex"


def test_first_line_longer_than_the_head_is_sniffed(tmp_path: Path) -> None:
    """Long AGENTS.md instructions in the meta make a first line longer than 64 KB."""
    meta = {**META, "instructions": "x" * 100_000}
    path = write(tmp_path / NAME, [meta, STATE, ITEMS[1]])
    assert codex.sniff(path, path.read_bytes()[:65536])
    assert detect_format(path) == "codex"


def test_first_lines_of_other_shapes_are_not_an_older_rollout(tmp_path: Path) -> None:
    not_uuid = b'{"id":"ses_1","timestamp":"2025-08-12T09:14:03.512Z"}\n'
    extra = b'{"id":"' + SID.encode() + b'","timestamp":"x","level":"info","msg":"hi"}\n'
    for head in (not_uuid, extra, b'{"record_type":"state"}\n'):
        assert not codex.sniff(Path("x.jsonl"), head)


def test_messages_as_the_wrapped_form_gives_them(legacy: Path, tmp_path: Path) -> None:
    (tmp_path / "wrapped").mkdir()
    wrapped = write(tmp_path / "wrapped" / NAME, wrapped_lines())
    old_items, _ = parse(legacy)
    new_items, _ = parse(wrapped)
    old_msgs, new_msgs = of(old_items, Message), of(new_items, Message)
    assert [m.source_id for m in old_msgs] == [
        f"L{n}" for n in (3, 4, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17)
    ]
    assert [m.model_dump(exclude={"ts"}) for m in old_msgs] == [
        m.model_dump(exclude={"ts"}) for m in new_msgs
    ]
    assert all(m.ts is None for m in old_msgs)  # older lines carry no timestamp
    times = {"started_at", "ended_at", "duration_s"}
    assert [c.model_dump(exclude=times) for c in of(old_items, ToolCall)] == [
        c.model_dump(exclude=times) for c in of(new_items, ToolCall)
    ]
    old_session, new_session = of(old_items, Session)[-1], of(new_items, Session)[-1]
    exclude = {"source_path"}
    assert old_session.model_dump(exclude=exclude) == new_session.model_dump(exclude=exclude)


def test_roles_tool_calls_and_session(legacy: Path) -> None:
    items, ledger = parse(legacy)
    by_line = {m.source_id: m for m in of(items, Message)}
    assert [by_line[f"L{n}"].role for n in (3, 4, 6, 7, 9, 10, 11, 14, 17)] == [
        "user", "user", "assistant", "assistant", "tool", "assistant", "tool", "user", "assistant",
    ]
    assert by_line["L6"].native_type == "response_item/reasoning"
    assert by_line["L6"].text == "**Launching the server**"
    calls = {c.call_id: c for c in of(items, ToolCall)}
    launch = calls["call_launch"]
    assert (launch.tool, launch.command, launch.status, launch.exit_code) == (
        "shell", LAUNCH, "completed", 0,
    )
    assert (launch.output, launch.msg_idx, launch.result_msg_idx) == ("[1] 4242\n", 3, 4)
    health = calls["call_health"]
    assert (health.tool, health.command, health.status, health.exit_code) == (
        "local_shell", "curl -s localhost:30000/health", "error", 7,
    )
    assert (calls["call_poll"].status, calls["call_poll"].command) == ("running", POLL)
    assert calls["call_patch"].status == "aborted"
    assert ledger.state["pending"] == {"call_poll": 7}
    session = of(items, Session)[-1]
    assert (session.session_id, session.native_id) == (f"codex:{SID}", SID)
    assert (session.agent, session.model, session.cwd, session.title) == ("codex", None, None, None)
    assert session.started_at is not None
    assert (session.started_at.hour, session.started_at.minute) == (9, 14)
    assert ledger.format_version is None


def test_meta_and_state_lines_are_kept_raw_and_unknown_ones_counted(tmp_path: Path) -> None:
    lines = legacy_lines() + [
        {"type": "mystery_item", "call_id": "m"},
        {"record_type": "checkpoint"},
    ]
    path = write(tmp_path / NAME, lines)
    items, ledger = parse(path)
    raws = of(items, RawRecord)
    assert [(r.location, r.record_type, r.known) for r in raws] == [
        ("line 1", "session_meta", True),
        ("line 2", "record_type/state", True),
        ("line 5", "record_type/state", True),
        ("line 8", "record_type/state", True),
        ("line 13", "record_type/state", True),
        ("line 18", "response_item/mystery_item", False),
        ("line 19", "record_type/checkpoint", False),
    ]
    assert raws[0].ts is not None and raws[1].ts is None
    assert ledger.unknown_types == {"response_item/mystery_item": 1, "record_type/checkpoint": 1}
    assert ledger.records_read == ledger.records_stored == 19
    assert not of(items, Quarantined)


def test_state_line_with_a_previous_response_id(tmp_path: Path) -> None:
    """Builds of 2025-07-18 .. 07-23 (83eefb55 .. 591cb614^) wrote the response id in it."""
    lines = [{"id": SID, "timestamp": META["timestamp"], "instructions": None},
             {"record_type": "state", "previous_response_id": None},
             ITEMS[2],
             {"record_type": "state", "previous_response_id": "resp_68a1"}]
    items, ledger = parse(write(tmp_path / NAME, lines))
    assert [r.record_type for r in of(items, RawRecord)] == [
        "session_meta", "record_type/state", "record_type/state",
    ]
    assert not ledger.unknown_types and len(of(items, Message)) == 1


@pytest.mark.parametrize("cut", [1, 2, 6, 8, 10, 12, 16])
def test_resume_matches_full_parse(legacy: Path, tmp_path: Path, cut: int) -> None:
    (tmp_path / "live").mkdir()
    resumed_equals_whole(codex, legacy, tmp_path / "live" / NAME, cut)


def _rows(db: Path, query: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_ingest_and_append(legacy: Path, tmp_path: Path) -> None:
    src = tmp_path / "sessions" / NAME
    src.parent.mkdir()
    lines = legacy.read_bytes().split(b"\n")
    src.write_bytes(b"\n".join(lines[:9]) + b"\n")
    db = tmp_path / "t.duckdb"
    assert not ingest([src], db=db).errors
    shutil.copy(legacy, src)
    res = ingest([src], db=db)
    assert [f.status for f in res.files] == ["appended"]
    whole = tmp_path / "whole.duckdb"
    ingest([legacy], db=whole)
    query = (
        "SELECT call_id, tool, command, output, status, exit_code, msg_idx, result_msg_idx "
        "FROM tool_calls ORDER BY msg_idx"
    )
    assert _rows(db, query) == _rows(whole, query)
    assert [r[0] for r in _rows(db, query)] == [
        "call_launch", "call_health", "call_poll", "call_patch",
    ]
    messages = "SELECT msg_idx, source_id, role, text FROM messages ORDER BY msg_idx"
    assert _rows(db, messages) == _rows(whole, messages)
    assert _rows(db, "SELECT format, records_read, records_stored FROM ingest_files") == [
        ("codex", 17, 17),
    ]
    assert _rows(db, "SELECT session_id, started_at IS NOT NULL FROM sessions") == [
        (f"codex:{SID}", True),
    ]


def test_lines_of_neither_shape(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event":"start","at":1}\n{"event":"stop","at":2}\n')
    with pytest.raises(UnknownFormatError) as err:
        detect_format(path)
    assert "codex" in str(err.value)
    items, ledger = parse(path)  # as under --format codex
    bad = of(items, Quarantined)
    assert [q.location for q in bad] == ["line 1", "line 2"]
    assert "neither a rollout line" in bad[0].error and "older rollout" in bad[0].error
    assert ledger.records_quarantined == 2 and not of(items, Message)
