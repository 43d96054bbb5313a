"""Codex rollout parser: a hand-written fixture (every branch) and the public sample."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from _samples import SHARED_SAMPLES, non_blank_lines, of, resumed_equals_whole, run
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.models import (
    Ledger,
    Message,
    ParsedItem,
    Quarantined,
    RawRecord,
    Resume,
    Session,
    ToolCall,
    ToolResult,
)
from analytics.sources import claude_code, codex

SID = "0199a000-0000-7000-8000-000000000001"
ROLLOUT = Path(__file__).parent / "fixtures" / "codex" / f"rollout-2025-10-01T10-00-00-{SID}.jsonl"
SAMPLE = SHARED_SAMPLES / "codex" / "agent-sessions_codex_small_schema_coverage_SYNTHETIC.jsonl"


def parse(path: Path, resume: Resume | None = None) -> tuple[list[ParsedItem], Ledger]:
    return run(codex, path, resume)


def test_messages_roles_and_source_ids() -> None:
    items, _ = parse(ROLLOUT)
    messages = of(items, Message)
    assert [m.msg_idx for m in messages] == list(range(25))
    assert messages[0].source_id == "L3" and messages[0].location == "line 3"
    by_line = {m.source_id: m for m in messages}
    assert by_line["L3"].role == "system"  # developer
    assert by_line["L4"].role == "user"  # environment_context stays a user message
    assert (by_line["L5"].role, by_line["L5"].native_type) == ("system", "event_msg/user_message")
    assert (by_line["L6"].role, by_line["L6"].text) == (
        "user",
        "launch the sglang server and tell me when it is ready",
    )
    assert by_line["L8"].native_type == "response_item/reasoning"
    assert by_line["L8"].text == "**Launching the server**"
    assert by_line["L8"].model == "gpt-5-codex"
    assert by_line["L43"].model == "gpt-5.1-codex"  # a later turn_context switches the model
    assert by_line["L28"].role == "assistant" and by_line["L29"].role == "system"
    user_texts = [m.text for m in messages if m.role == "user"]
    assert user_texts.count("ok?") == 1  # the event_msg duplicate does not count twice


def test_interrupt_markers() -> None:
    items, _ = parse(ROLLOUT)
    by_line = {m.source_id: m for m in of(items, Message)}
    assert by_line["L16"].error == "turn_aborted"
    assert by_line["L16"].text.startswith("<turn_aborted>")
    assert by_line["L17"].error == "turn_aborted: interrupted"
    assert by_line["L17"].native_type == "event_msg/turn_aborted"
    assert sum(1 for m in by_line.values() if m.error) == 2


def test_compaction() -> None:
    items, _ = parse(ROLLOUT)
    (summary,) = [m for m in of(items, Message) if m.is_compaction_summary]
    assert summary.role == "system" and summary.text.startswith("Summary: server launched")
    assert summary.native_type == "compacted"


def test_tool_calls() -> None:
    items, ledger = parse(ROLLOUT)
    calls = {c.call_id: c for c in of(items, ToolCall)}
    launch = calls["call_launch"]
    assert launch.command is not None and launch.command.startswith(
        "python -m sglang.launch_server"
    )
    assert (launch.status, launch.exit_code, launch.tool) == ("completed", 0, "exec_command")
    assert (launch.msg_idx, launch.result_msg_idx) == (5, 6)
    assert launch.duration_s == 2.0
    poll = calls["call_poll"]
    assert poll.command == "until curl -s localhost:30000/health; do sleep 5; done"
    assert poll.status == "aborted"
    patch = calls["call_patch"]
    assert (patch.status, patch.exit_code, patch.command) == ("completed", 0, None)
    assert patch.output == "Success. Updated the following files:\nA a.txt\n"
    assert patch.input is not None and patch.input.startswith("*** Begin Patch")
    test = calls["call_test"]
    assert (test.status, test.exit_code) == ("error", 1)
    assert test.command == "pytest -q 'tests/test a.py'"
    local = calls["call_local"]
    assert (local.tool, local.command, local.status) == ("local_shell", "ls -la", "aborted")
    assert calls["call_tail"].status == "running" and calls["call_tail"].command == "tail -f log"
    assert ledger.state["pending"] == {"call_tail": 24}
    # exec_command_end after the output fills the exit code through a ToolResult
    (late,) = of(items, ToolResult)
    assert (late.call_id, late.exit_code, late.status, late.result_msg_idx) == (
        "call_read",
        2,
        "error",
        20,
    )


def test_raw_unknown_quarantine_and_accounting() -> None:
    items, ledger = parse(ROLLOUT)
    raws = of(items, RawRecord)
    unknown = sorted(r.record_type for r in raws if not r.known)
    assert unknown == ["event_msg/mystery_event", "mystery_line", "response_item/mystery_item"]
    assert ledger.unknown_types == {
        "mystery_line": 1,
        "event_msg/mystery_event": 1,
        "response_item/mystery_item": 1,
    }
    assert len(raws) == 13
    assert {
        "session_meta",
        "turn_context",
        "event_msg/token_count",
        "response_item/ghost_snapshot",
    } <= {r.record_type for r in raws if r.known}
    bad = of(items, Quarantined)
    assert [q.location for q in bad] == ["line 37", "line 38", "line 39", "line 40"]
    assert "payload is str" in bad[1].error and "content is int" in bad[3].error
    assert ledger.records_read == non_blank_lines(ROLLOUT) == 42
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    assert (ledger.end_offset, ledger.end_line) == (ROLLOUT.stat().st_size, 43)


def test_session() -> None:
    items, ledger = parse(ROLLOUT)
    first, final = of(items, Session)[0], of(items, Session)[-1]
    assert first.session_id == final.session_id == f"codex:{SID}"
    assert final.agent == "codex codex_cli_rs 0.144.1"
    assert ledger.format_version == "0.144.1"
    assert (final.model, final.cwd, final.title) == ("gpt-5-codex", "/home/u/srv", "Launch sglang")
    assert final.started_at is not None and final.started_at.hour == 10


def test_session_id_from_file_name_without_meta(tmp_path: Path) -> None:
    path = tmp_path / f"rollout-2025-10-01T10-00-00-{SID}.jsonl"
    path.write_text("\n".join(ROLLOUT.read_text().splitlines()[5:8]) + "\n")
    items, _ = parse(path)
    assert of(items, Session)[-1].native_id == SID
    assert all(m.session_id == f"codex:{SID}" for m in of(items, Message))


def test_subagent_thread_parent(tmp_path: Path) -> None:
    path = tmp_path / "rollout-sub.jsonl"
    meta = {"id": "child-1", "parent_thread_id": "parent-9", "originator": "codex_cli_rs"}
    path.write_text(
        json.dumps({"timestamp": "2025-10-01T10:00:00Z", "type": "session_meta", "payload": meta})
    )
    session = of(parse(path)[0], Session)[-1]
    assert (session.native_id, session.parent_session_id) == ("child-1", "codex:parent-9")


def test_empty_and_truncated(tmp_path: Path) -> None:
    empty = tmp_path / "rollout-empty.jsonl"
    empty.write_bytes(b"")
    items, ledger = parse(empty)
    assert [type(i) for i in items] == [Session, Session] and ledger.records_read == 0
    lines = ROLLOUT.read_bytes().split(b"\n")
    cut = tmp_path / ROLLOUT.name
    cut.write_bytes(b"\n".join(lines[:9]) + b"\n" + lines[9][:30])
    items, ledger = parse(cut)
    assert [q.location for q in of(items, Quarantined)] == ["line 10"]
    assert ledger.end_line == 9 and ledger.records_read == 10


@pytest.mark.parametrize("cut", [1, 9, 12, 25, 36, 41])
def test_resume_matches_full_parse(tmp_path: Path, cut: int) -> None:
    resumed_equals_whole(codex, ROLLOUT, tmp_path / ROLLOUT.name, cut)


def test_sniff() -> None:
    head = ROLLOUT.read_bytes()[:65536]
    assert codex.sniff(ROLLOUT, head)
    assert not claude_code.sniff(ROLLOUT, head)
    cc_line = b'{"type":"user","uuid":"u","sessionId":"s","message":{"content":"hi"}}\n'
    assert not codex.sniff(Path("x.jsonl"), cc_line)
    assert not codex.sniff(Path("x.txt"), b"<msg id=1> user: hi\n")
    long_meta = head.split(b"\n")[0][:90]  # first line cut by the 64 KB head
    assert codex.sniff(ROLLOUT, long_meta)
    assert not codex.sniff(ROLLOUT, b'{"timestamp": "x", "type": "other", "payload": {')


def test_helpers() -> None:
    assert codex.join_command(["bash", "-lc", "echo hi && sleep 1"]) == "echo hi && sleep 1"
    assert codex.join_command(["/bin/zsh", "-c", "ls"]) == "ls"
    assert codex.join_command(["ls", "a b"]) == "ls 'a b'"
    assert codex.command_of('{"cmd": "nvidia-smi"}') == "nvidia-smi"
    assert codex.command_of("*** Begin Patch") is None
    assert codex.read_output("Exit code: 3\nWall time: 1s\nOutput:\nboom") == (
        "Exit code: 3\nWall time: 1s\nOutput:\nboom",
        3,
    )
    assert codex.read_output('{"output": "x", "metadata": {"exit_code": 137}}') == ("x", 137)
    assert codex.read_output([{"type": "input_text", "text": "a"}, {"type": "input_image"}]) == (
        "a\n[image]",
        None,
    )
    assert codex.status_of("aborted by user after 3.0s", None) == "aborted"
    assert codex.status_of("fine", 0) == "completed"


# --- the public sample --------------------------------------------------------------

MESSAGE_KINDS = {
    "response_item/message",
    "response_item/reasoning",
    "response_item/agent_message",
    "response_item/function_call",
    "response_item/custom_tool_call",
    "response_item/local_shell_call",
    "response_item/function_call_output",
    "response_item/custom_tool_call_output",
    "response_item/web_search_call",
    "response_item/image_generation_call",
    "response_item/tool_search_call",
    "response_item/tool_search_output",
    "event_msg/user_message",
    "event_msg/agent_message",
    "event_msg/turn_aborted",
    "compacted",
}


def _independent_counts(path: Path) -> dict[str, int]:
    """Counts taken straight from the raw JSON, without the parser."""
    rows = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    kinds = Counter(
        f"{r['type']}/{r['payload']['type']}" if "type" in r["payload"] else r["type"] for r in rows
    )
    messages = sum(n for kind, n in kinds.items() if kind in MESSAGE_KINDS)
    call_kinds = ("function_call", "custom_tool_call", "web_search_call", "image_generation_call",
                  "tool_search_call")  # fmt: skip
    calls = sum(kinds[f"response_item/{k}"] for k in call_kinds)
    return {
        "lines": len(rows),
        "messages": messages,
        "raw": len(rows) - messages,
        "tool_calls": calls,
        "turn_aborted": kinds["event_msg/turn_aborted"],
        "compacted": kinds["compacted"],
        "session_meta": kinds["session_meta"],
    }


def test_public_sample() -> None:
    if not SAMPLE.exists():
        pytest.skip("shared samples not available")
    expected = dict(
        lines=118, messages=32, raw=86, tool_calls=8, turn_aborted=1, compacted=6, session_meta=7
    )
    assert _independent_counts(SAMPLE) == expected
    assert codex.sniff(SAMPLE, SAMPLE.read_bytes()[:65536])
    assert not claude_code.sniff(SAMPLE, SAMPLE.read_bytes()[:65536])

    items, ledger = parse(SAMPLE)
    messages = of(items, Message)
    assert len(messages) == expected["messages"]
    assert [m.source_id for m in messages][:3] == ["L4", "L6", "L7"]
    assert len(of(items, ToolCall)) == expected["tool_calls"]
    assert sum(m.is_compaction_summary for m in messages) == expected["compacted"]
    assert [m.error for m in messages if m.error] == ["turn_aborted: interrupted"]
    assert len(of(items, RawRecord)) == expected["raw"]
    assert not of(items, Quarantined)
    assert ledger.records_read == non_blank_lines(SAMPLE) == expected["lines"]
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    assert ledger.unknown_types == {}  # every event type of 0.146.0 is known
    session = of(items, Session)[-1]
    assert session.native_id == "019fc8be-3658-7ca3-9e29-000000000000"
    assert (session.agent, session.model) == ("codex codex_cli_rs 0.146.0", "gpt-5.6-luna")
    calls = {c.call_id: c for c in of(items, ToolCall)}
    assert calls["call-2"].output == "a.txt\n" and calls["call-2"].command == "ls"
    assert calls["call-1"].output == "a.txt\nb.txt\n"


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["type", "text", "role", "call_id", "output", "arguments", "cmd", "command"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    ltype=st.sampled_from(
        ["response_item", "event_msg", "compacted", "session_meta", "turn_context"]
    ),
    ptype=st.sampled_from(sorted(MESSAGE_KINDS | {"exec_command_end", "token_count"})),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "role",
                "content",
                "call_id",
                "output",
                "arguments",
                "input",
                "message",
                "exit_code",
                "model",
                "summary",
            ]
        ),
        _JSONISH,
        max_size=4,
    ),
)
def test_wrong_field_types_never_crash(
    tmp_path_factory: pytest.TempPathFactory, ltype: str, ptype: str, fields: dict
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "rollout.jsonl"
    payload = {"type": ptype.split("/")[-1], **fields}
    lines = [
        {
            "timestamp": "2025-01-01T00:00:00Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "call_id": "c",
                "name": "shell",
                "arguments": "{}",
            },
        },
        {"timestamp": "2025-01-01T00:00:01Z", "type": ltype, "payload": payload},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    items, ledger = parse(path)
    assert ledger.records_read == 2 == ledger.records_stored + ledger.records_quarantined


# --- 0.146+ rollout shapes (QA against the newest releases) ---------------------------
# Sources: codex-rs protocol (EventMsg variants, ResponseItem::WebSearchCall /
# ToolSearchCall / ToolSearchOutput / ImageGenerationCall), the rollout persistence policy
# and the public 0.146.0 schema-coverage sample; the lines below are made here.


def _rollout(tmp_path: Path, *payloads: tuple[str, dict]) -> tuple[list[ParsedItem], Ledger]:
    lines = [{"timestamp": f"2026-08-11T14:00:{n:02d}.000Z", "type": kind, "payload": payload}
             for n, (kind, payload) in enumerate(payloads)]  # fmt: skip
    path = tmp_path / f"rollout-2026-08-11T14-00-00-{SID}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return parse(path)


def test_newer_event_types_are_known(tmp_path: Path) -> None:
    kinds = [
        "collab_agent_spawn_end", "collab_agent_interaction_end", "collab_waiting_end",
        "collab_close_end", "collab_resume_end", "sub_agent_activity", "dynamic_tool_call_request",
        "dynamic_tool_call_response", "guardian_assessment", "thread_goal_updated",
        "thread_rolled_back", "thread_settings_applied",
    ]  # fmt: skip
    items, ledger = _rollout(tmp_path, *[("event_msg", {"type": k}) for k in kinds])
    raw = of(items, RawRecord)
    assert [r.record_type for r in raw] == [f"event_msg/{k}" for k in kinds]
    assert all(r.known for r in raw) and ledger.unknown_types == {}


def test_hosted_tool_calls_are_tool_calls(tmp_path: Path) -> None:
    # web search, tool search and image generation run on the model's side; the rollout
    # records the call (and for tool search its output) as response items
    search = {"type": "search", "query": "vllm max-model-len", "queries": ["vllm max-model-len"]}
    items, ledger = _rollout(
        tmp_path,
        ("response_item", {"type": "web_search_call", "id": "ws_1", "status": "completed",
                           "action": search}),
        ("response_item", {"type": "web_search_call", "status": "failed",
                           "action": {"type": "open_page", "url": "https://docs.vllm.ai"}}),
        ("response_item", {"type": "tool_search_call", "call_id": "ts_1", "status": "completed",
                           "execution": "local", "arguments": {"query": "github issues"}}),
        ("response_item", {"type": "tool_search_output", "call_id": "ts_1", "status": "completed",
                           "execution": "local", "tools": [
                               {"type": "function", "name": "search_issues"},
                               {"type": "function_group", "name": "github",
                                "tools": [{"type": "function", "name": "get_issue"}]}]}),
        ("response_item", {"type": "image_generation_call", "id": "ig_1", "status": "completed",
                           "revised_prompt": "a latency plot", "result": "iVBORw0KGgo="}),
    )  # fmt: skip
    messages = of(items, Message)
    assert [(m.role, m.native_type) for m in messages] == [
        ("assistant", "response_item/web_search_call"),
        ("assistant", "response_item/web_search_call"),
        ("assistant", "response_item/tool_search_call"),
        ("tool", "response_item/tool_search_output"),
        ("assistant", "response_item/image_generation_call"),
    ]
    assert messages[3].text == "search_issues\nget_issue"
    calls = {c.msg_idx: c for c in of(items, ToolCall)}
    assert sorted(calls) == [0, 1, 2, 4]
    web = calls[0]
    assert (web.call_id, web.tool, web.status, web.result_msg_idx) == ("ws_1", "web_search", "completed", 0)
    assert json.loads(web.input or "") == search and web.command is None
    assert (calls[1].status, calls[1].call_id) == ("error", "L2")
    found = calls[2]
    assert (found.tool, found.status, found.output, found.result_msg_idx) == (
        "tool_search", "completed", "search_issues\nget_issue", 3
    )  # fmt: skip
    image = calls[4]
    assert (image.tool, image.status, image.output) == ("image_generation", "completed", "[image]")
    assert json.loads(image.input or "") == {"revised_prompt": "a latency plot"}
    assert not of(items, RawRecord) and ledger.unknown_types == {}


def test_a_reused_call_id_does_not_lose_the_open_call(tmp_path: Path) -> None:
    # providers that number their calls (call_0, call_1 …) can reuse an id while an earlier
    # call with it never got an output (an interrupt): both calls are kept
    call = {"type": "function_call", "name": "exec_command", "call_id": "call_0",
            "arguments": json.dumps({"cmd": "sleep 100"})}  # fmt: skip
    items, _ = _rollout(
        tmp_path,
        ("response_item", call),
        ("response_item", {**call, "arguments": json.dumps({"cmd": "ls"})}),
        ("response_item", {"type": "function_call_output", "call_id": "call_0", "output": "a.txt"}),
    )
    calls = of(items, ToolCall)
    assert [(c.msg_idx, c.command, c.status) for c in calls] == [
        (0, "sleep 100", "running"), (1, "ls", "completed")
    ]  # fmt: skip
