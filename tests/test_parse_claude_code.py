"""Claude Code parser: hand-written fixtures (every branch) and the real public samples."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from _samples import SHARED_SAMPLES, non_blank_lines, of, run
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
from analytics.sources import _jsonl, claude_code

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
PROJ = FIXTURES / "proj"
SID = "5e55a000-0000-4000-8000-00000000aaaa"
MAIN = PROJ / f"{SID}.jsonl"
SAMPLES = SHARED_SAMPLES / "claude_code"


def parse(path: Path, resume: Resume | None = None) -> tuple[list[ParsedItem], Ledger]:
    return run(claude_code, path, resume)


# --- fixtures -----------------------------------------------------------------------


def test_main_fixture_messages_and_roles() -> None:
    items, ledger = parse(MAIN)
    messages = of(items, Message)
    assert [m.msg_idx for m in messages] == list(range(21))
    assert all(m.session_id == f"claude_code:{SID}" for m in messages)
    roles = Counter(m.role for m in messages)
    assert roles == {"assistant": 9, "tool": 5, "user": 5, "system": 2}
    by_uuid = {m.source_id: m for m in messages}
    assert by_uuid["u-02"].native_type == "assistant/thinking"
    assert by_uuid["u-02"].text == "The user wants the server up."
    assert by_uuid["u-02"].model == "claude-sonnet-4-5"
    assert by_uuid["u-04"].text == ""
    assert by_uuid["u-11"].text == "ok?\n[image]"
    assert by_uuid["u-10"].text == "[Request interrupted by user for tool use]"
    assert by_uuid["u-10"].role == "user"
    assert by_uuid["u-18"].role == "system"  # isMeta
    assert by_uuid["u-03"].parent_source_id == "u-02"
    assert by_uuid["u-01"].ts is not None and by_uuid["u-01"].ts.year == 2025


def test_compaction_records() -> None:
    items, _ = parse(MAIN)
    by_uuid = {m.source_id: m for m in of(items, Message)}
    boundary = by_uuid["u-16"]
    assert boundary.role == "system" and boundary.text == "Conversation compacted"
    assert boundary.parent_source_id == "u-15"  # logicalParentUuid
    summary = by_uuid["u-17"]
    assert summary.is_compaction_summary and summary.role == "user"
    assert sum(m.is_compaction_summary for m in by_uuid.values()) == 1


def test_tool_calls_statuses_and_exit_codes() -> None:
    items, ledger = parse(MAIN)
    calls = {c.call_id: c for c in of(items, ToolCall)}
    assert set(calls) == {f"toolu_0{i}" for i in range(1, 7)}
    assert calls["toolu_01"].status == "completed"
    assert calls["toolu_01"].command == "npm run dev"
    assert calls["toolu_01"].duration_s == 1.5
    assert json.loads(calls["toolu_01"].input or "")["run_in_background"] is True
    assert (calls["toolu_02"].status, calls["toolu_02"].exit_code) == ("completed", 0)
    assert calls["toolu_02"].command is None  # BashOutput is not a shell command
    assert calls["toolu_03"].status == "aborted"  # rejection
    assert calls["toolu_04"].status == "aborted"  # interrupted Bash
    assert (calls["toolu_05"].status, calls["toolu_05"].exit_code) == ("error", 1)
    assert calls["toolu_06"].status == "running" and calls["toolu_06"].output is None
    assert calls["toolu_05"].msg_idx == 13 and calls["toolu_05"].result_msg_idx == 14
    assert ledger.state["pending"] == {"toolu_06": 20}


def test_raw_unknown_and_quarantine_accounting() -> None:
    items, ledger = parse(MAIN)
    raws = of(items, RawRecord)
    assert Counter((r.record_type, r.known) for r in raws) == {
        ("summary", True): 2,
        ("file-history-snapshot", True): 1,
        ("queue-operation", True): 1,
        ("mystery-type", False): 1,
    }
    assert ledger.unknown_types == {"mystery-type": 1}
    bad = of(items, Quarantined)
    assert [q.location for q in bad] == ["line 25", "line 26", "line 27", "line 28"]
    assert "not a JSON object" in bad[1].error
    assert "type" in bad[2].error
    assert "content is int" in bad[3].error
    assert all("\n" not in q.error for q in bad)
    assert ledger.records_read == non_blank_lines(MAIN) == 30
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    assert ledger.records_quarantined == 4
    assert (ledger.end_offset, ledger.end_line) == (MAIN.stat().st_size, 31)


def test_session_metadata() -> None:
    items, ledger = parse(MAIN)
    final = of(items, Session)[-1]
    assert final.native_id == SID
    assert final.agent == "claude-code 2.0.42" and ledger.format_version == "2.0.42"
    assert final.cwd == "/home/u/proj"
    assert final.model == "claude-sonnet-4-5"
    # only the summary whose leafUuid is a line of this file titles it
    assert final.title == "Start the dev server"
    assert final.parent_session_id is None


def test_subagent_old_layout() -> None:
    items, _ = parse(PROJ / "agent-a1b2c3d4.jsonl")
    session = of(items, Session)[-1]
    assert session.native_id == f"{SID}/agent-a1b2c3d4"
    assert session.parent_session_id == f"claude_code:{SID}"
    messages = of(items, Message)
    assert len(messages) == 4 and all(m.is_sidechain for m in messages)
    assert all(m.session_id == session.session_id for m in messages)
    assert [c.status for c in of(items, ToolCall)] == ["completed"]


def test_subagent_new_layout_with_meta() -> None:
    path = PROJ / SID / "subagents" / "agent-e5f6.jsonl"
    items, ledger = parse(path)
    session = of(items, Session)[-1]
    assert session.native_id == f"{SID}/agent-e5f6"
    assert session.parent_session_id == f"claude_code:{SID}"
    assert session.title == "code-reviewer: Review the diff"
    assert ledger.format_version == "2.1.112"
    assert len(of(items, Message)) == 2


def test_subagent_new_layout_without_session_id(tmp_path: Path) -> None:
    folder = tmp_path / "abc-session" / "subagents"
    folder.mkdir(parents=True)
    path = folder / "agent-77.jsonl"
    path.write_text(json.dumps({"type": "user", "uuid": "x", "message": {"content": "hi"}}) + "\n")
    session = of(parse(path)[0], Session)[-1]
    assert session.native_id == "abc-session/agent-77"
    assert session.parent_session_id == "claude_code:abc-session"


def test_pretty_printed_objects() -> None:
    path = FIXTURES / "claude-session.jsonl"
    assert claude_code.sniff(path, path.read_bytes()[:65536])
    items, ledger = parse(path)
    messages = of(items, Message)
    assert [(m.role, m.text) for m in messages] == [("user", "hello"), ("assistant", "hi")]
    assert messages[0].location == "object 1"
    assert [q.location for q in of(items, Quarantined)] == ["object 3"]
    assert of(items, Session)[-1].title == "Greeting"
    assert (ledger.records_read, ledger.records_quarantined) == (4, 1)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    items, ledger = parse(path)
    assert [type(i) for i in items] == [Session, Session]
    assert of(items, Session)[0].native_id == "empty"
    assert (ledger.records_read, ledger.end_offset) == (0, 0)


def test_truncated_last_line_is_quarantined_but_not_consumed(tmp_path: Path) -> None:
    data = (PROJ / "agent-a1b2c3d4.jsonl").read_bytes()
    lines = data.split(b"\n")[:4]
    path = tmp_path / "agent-a1b2c3d4.jsonl"
    path.write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:40])
    items, ledger = parse(path)
    assert len(of(items, Message)) == 3
    assert [q.location for q in of(items, Quarantined)] == ["line 4"]
    assert ledger.end_line == 3
    assert ledger.end_offset == len(b"\n".join(lines[:3])) + 1
    # the writer finishes the line: a resumed parse reads it again
    path.write_bytes(b"\n".join(lines) + b"\n")
    resume = Resume(offset=ledger.end_offset, line=ledger.end_line, state=ledger.state)
    more, ledger2 = parse(path, resume)
    assert [m.msg_idx for m in of(more, Message)] == [3]
    assert not of(more, Quarantined)


def test_complete_unterminated_last_line_is_consumed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(MAIN.read_bytes().split(b"\n")[2])
    items, ledger = parse(path)
    assert len(of(items, Message)) == 1
    assert ledger.end_offset == path.stat().st_size


def _split_at(src: Path, dest: Path, n_lines: int) -> None:
    lines = src.read_bytes().split(b"\n")
    dest.write_bytes(b"\n".join(lines[:n_lines]) + b"\n")


@pytest.mark.parametrize("cut", [5, 12, 20, 29])
def test_resume_matches_full_parse(tmp_path: Path, cut: int) -> None:
    path = tmp_path / MAIN.name
    _split_at(MAIN, path, cut)
    first, ledger1 = parse(path)
    shutil.copy(MAIN, path)
    sid = f"claude_code:{SID}"
    resume = Resume(
        offset=ledger1.end_offset,
        line=ledger1.end_line,
        next_msg_idx={sid: ledger1.state["next_msg_idx"]},  # type: ignore[dict-item]
        state=ledger1.state,
    )
    second, ledger2 = parse(path, resume)
    full, ledger_full = parse(MAIN)

    assert of(first, Message) + of(second, Message) == of(full, Message)
    calls = {c.call_id: c for c in of(first, ToolCall) + of(second, ToolCall)}
    for result in of(second, ToolResult):
        call = calls[result.call_id]
        assert call.status == "running"
        update = result.model_dump(exclude={"session_id", "call_id"})
        calls[result.call_id] = call.model_copy(update=update)
    assert calls == {c.call_id: c for c in of(full, ToolCall)}
    assert ledger1.records_read + ledger2.records_read == ledger_full.records_read
    assert ledger2.end_offset == ledger_full.end_offset
    ignore = {"source_path"}
    assert of(second, Session)[-1].model_dump(exclude=ignore) == of(full, Session)[-1].model_dump(
        exclude=ignore
    )


def test_sniff() -> None:
    head = MAIN.read_bytes()[:65536]
    assert claude_code.sniff(MAIN, head)
    codex_line = (
        b'{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}\n'
    )
    assert not claude_code.sniff(Path("x.jsonl"), codex_line)
    assert not claude_code.sniff(Path("x.jsonl"), b"[msg 1] user: hi\n")
    assert not claude_code.sniff(Path("x.json"), b'{"info": {"id": "ses_1"}, "messages": []}')


@settings(max_examples=150, deadline=None)
@given(
    rtype=st.sampled_from(["user", "assistant", "system"]),
    content=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["type", "text", "id", "tool_use_id", "content", "is_error", "input"]
                ),
                inner | st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking"]),
                max_size=4,
            )
        ),
        max_leaves=10,
    ),
    extra=st.dictionaries(
        st.sampled_from(
            ["uuid", "parentUuid", "timestamp", "isSidechain", "version", "toolUseResult"]
        ),
        st.none() | st.integers() | st.text(max_size=5) | st.booleans(),
        max_size=3,
    ),
)
def test_wrong_field_types_never_crash(
    tmp_path_factory: pytest.TempPathFactory, rtype: str, content: object, extra: dict
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    line = {"type": rtype, "message": {"content": content}, **extra}
    path.write_text(json.dumps(line) + "\n")
    items, ledger = parse(path)
    assert ledger.records_read == 1 == ledger.records_stored + ledger.records_quarantined
    assert len(of(items, Message)) + len(of(items, Quarantined)) == 1


# --- real public samples ------------------------------------------------------------


def _independent_counts(path: Path) -> dict[str, int]:
    """Counts taken straight from the raw JSON, without the parser."""
    rows = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    counts: Counter[str] = Counter(lines=len(rows))
    for row in rows:
        if row["type"] not in ("user", "assistant", "system"):
            counts["raw"] += 1
            continue
        counts["messages"] += 1
        content = (row.get("message") or {}).get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if block["type"] == "tool_use":
                counts["tool_calls"] += 1
            elif block["type"] == "tool_result":
                text = str(block.get("content"))
                aborted = text.startswith(
                    ("The user doesn't want to", "[Request interrupted by user for tool use]")
                ) or (
                    isinstance(row.get("toolUseResult"), dict)
                    and row["toolUseResult"].get("interrupted")
                )
                counts["aborted"] += bool(aborted)
                counts["errors"] += bool(block.get("is_error")) and not aborted
            elif block["type"] == "text" and str(block["text"]).startswith(
                "[Request interrupted by user"
            ):
                counts["markers"] += 1
    return dict(counts)


SAMPLE_COUNTS = {
    "ccl_37f83ec9_v1.0.51_interrupts.jsonl": dict(
        lines=346, messages=340, raw=6, tool_calls=101, aborted=2, errors=19, markers=2
    ),
    "ccl_7acd37a8_v2.0.42_bgbash_bashoutput_killshell.jsonl": dict(
        lines=211, messages=199, raw=12, tool_calls=71, aborted=4, errors=2, markers=1
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLE_COUNTS))
def test_real_samples(name: str) -> None:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip("shared samples not available")
    expected = SAMPLE_COUNTS[name]
    assert _independent_counts(path) == expected
    assert claude_code.sniff(path, path.read_bytes()[:65536])

    items, ledger = parse(path)
    messages = of(items, Message)
    calls = of(items, ToolCall)
    statuses = Counter(c.status for c in calls)
    markers = [
        m for m in messages if m.role == "user" and m.text.startswith("[Request interrupted")
    ]
    assert len(messages) == expected["messages"]
    assert [m.msg_idx for m in messages] == list(range(expected["messages"]))
    assert len(calls) == len({c.call_id for c in calls}) == expected["tool_calls"]
    assert statuses["aborted"] == expected["aborted"]
    assert statuses["error"] == expected["errors"]
    assert statuses["running"] == 0
    assert len(markers) == expected["markers"]
    assert len(of(items, RawRecord)) == expected["raw"]
    assert not of(items, Quarantined)
    assert ledger.records_read == non_blank_lines(path) == expected["lines"]
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    assert ledger.unknown_types == {}
    assert ledger.end_offset == path.stat().st_size


def test_real_sample_shell_commands_and_ids() -> None:
    path = SAMPLES / "ccl_7acd37a8_v2.0.42_bgbash_bashoutput_killshell.jsonl"
    if not path.exists():
        pytest.skip("shared samples not available")
    items, _ = parse(path)
    session = of(items, Session)[-1]
    assert session.native_id == "7acd37a8-2745-4b58-a8a9-46164b22ad9e"
    assert session.agent == "claude-code 2.0.42"
    bash = [c for c in of(items, ToolCall) if c.tool == "Bash"]
    assert bash and all(c.command for c in bash)
    assert any(c.output and "running in background with ID: dce0af" in c.output for c in bash)
    rows = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    uuids = [r["uuid"] for r in rows if r["type"] in ("user", "assistant", "system")]
    assert [m.source_id for m in of(items, Message)] == uuids


def test_jsonl_reader_offsets(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n\n  \n{"b":2}\r\n[3]\n{"c":')
    got = list(_jsonl.iter_lines(path))
    assert [(j.line_no, j.offset) for j in got] == [(1, 0), (4, 12), (5, 21), (6, 25)]
    assert got[0].value == {"a": 1} and got[1].value == {"b": 2}
    assert isinstance(got[2].value, _jsonl.NotAnObjectError)
    assert not got[3].terminated and isinstance(got[3].value, Exception)
    resumed = list(_jsonl.iter_lines(path, offset=12, line_no=3))
    assert [(j.line_no, j.offset) for j in resumed] == [(4, 12), (5, 21), (6, 25)]
    ledger = Ledger()
    records = list(_jsonl.read_records(path, ledger))
    assert [type(r).__name__ for r in records] == [
        "JsonLine",
        "JsonLine",
        "Quarantined",
        "Quarantined",
    ]
    assert (ledger.end_offset, ledger.end_line) == (25, 5)


@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 64])
def test_jsonl_reader_chunking_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Lines longer than a read (a base64 image in one record), lines ending exactly at a
    read's end, blank lines and an unterminated last line read the same at any read size
    as in one read."""
    path = tmp_path / "x.jsonl"
    long = json.dumps({"data": "A" * 200})
    path.write_bytes(f'{{"a":1}}\n{long}\n\n  \n{long}\n{{"b":2}}\n{long}'.encode())

    def read(offset: int = 0, line_no: int = 0) -> list[tuple[int, int, bytes, bool]]:
        return [(j.line_no, j.offset, j.raw, j.terminated)
                for j in _jsonl.iter_lines(path, offset, line_no)]

    whole, from_second = read(), read(8, 1)
    monkeypatch.setattr(_jsonl, "CHUNK_SIZE", chunk)
    assert read() == whole and len(whole) == 5 and not whole[-1][3]
    assert read(8, 1) == from_second == whole[1:]


def test_jsonl_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":"\xff\xfe"}\n')
    ledger = Ledger()
    (record,) = list(_jsonl.read_records(path, ledger))
    assert isinstance(record, Quarantined)
    assert record.location == "line 1" and "\ufffd" in record.raw
    assert ledger.records_quarantined == 1 and ledger.end_offset == path.stat().st_size


def test_records_built_without_validation_are_those_pydantic_builds() -> None:
    """The parser builds its records without pydantic's validation (``models.trusted``): each must
    equal the record validation makes of the same fields, field for field and in order, over
    every Claude Code fixture and the bundled sample."""
    from analytics.samples_path import sample_inputs

    paths = sorted(FIXTURES.rglob("*.jsonl"))
    for sample in sample_inputs():
        if "claude" in Path(sample).name:
            paths += sorted(Path(sample).rglob("*.jsonl"))
    checked = 0
    for path in paths:
        if not path.is_file():
            continue
        for item in parse(path)[0]:
            if isinstance(item, Message | ToolCall | RawRecord):
                again = type(item)(**vars(item))
                assert list(vars(item)) == list(vars(again)), path
                assert vars(item) == vars(again), path
                assert item.model_fields_set <= again.model_fields_set, path
                checked += 1
    assert checked > 100


# --- recent Claude Code line shapes (2.x): built in tmp_path -------------------------

_ENV = {"sessionId": "recent-1", "version": "2.1.112", "cwd": "/srv", "isSidechain": False}


def _recent(tmp_path: Path, *lines: dict[str, object]) -> dict[str, Message]:
    """Messages (by uuid) of a session file holding ``lines`` (each given the envelope)."""
    path = tmp_path / "recent-1.jsonl"
    path.write_text("".join(json.dumps({**_ENV, **line}) + "\n" for line in lines))
    items, _ = parse(path)
    return {m.source_id: m for m in of(items, Message)}


def test_redacted_thinking_line_is_reasoning_not_an_empty_reply(tmp_path: Path) -> None:
    # Claude Code writes one content block per line; an encrypted thinking block
    # ({"type": "redacted_thinking", "data": ...}, Anthropic Messages API) is reasoning too
    msgs = _recent(
        tmp_path,
        {
            "type": "assistant",
            "uuid": "r1",
            "message": {
                "role": "assistant",
                "content": [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}],
            },
        },
        {
            "type": "assistant",
            "uuid": "r2",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "x"},
                    {"type": "text", "text": "Done."},
                ],
            },
        },
    )
    assert (msgs["r1"].native_type, msgs["r1"].text) == (
        "assistant/thinking",
        "[redacted thinking]",
    )
    assert (msgs["r2"].native_type, msgs["r2"].text) == ("assistant", "Done.")


def test_api_error_retry_line_carries_the_error(tmp_path: Path) -> None:
    # {"type":"system","subtype":"api_error","level":"error","error":{...},"retryAttempt":1,...}:
    # each failed API request Claude Code retries; the line has no content
    msgs = _recent(
        tmp_path,
        {
            "type": "system",
            "uuid": "e1",
            "subtype": "api_error",
            "level": "error",
            "error": {
                "status": 529,
                "headers": {},
                "requestID": None,
                "error": {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            },
            "retryInMs": 558.9,
            "retryAttempt": 1,
            "maxRetries": 10,
        },
        {
            "type": "system",
            "uuid": "e2",
            "subtype": "api_error",
            "level": "error",
            "error": {"cause": {"code": "FailedToOpenSocket", "path": "https://api.anthropic.com"}},
            "retryAttempt": 3,
            "maxRetries": 10,
        },
        {
            "type": "system",
            "uuid": "e3",
            "subtype": "api_error",
            "level": "error",
            "retryAttempt": 2,
            "maxRetries": 10,
        },
        {
            "type": "system",
            "uuid": "i1",
            "subtype": "informational",
            "level": "warning",
            "content": "Remote Control disconnected",
        },
    )
    assert msgs["e1"].role == "system"
    assert msgs["e1"].error == "API error 529: Overloaded (retry 1/10)"
    assert msgs["e2"].error == "API error: FailedToOpenSocket (retry 3/10)"
    assert msgs["e3"].error == "API error (retry 2/10)"
    assert msgs["i1"].error is None and msgs["i1"].text == "Remote Control disconnected"


def test_command_output_in_a_user_line_is_not_the_users(tmp_path: Path) -> None:
    # before 2.1 Claude Code wrote a slash command's output (and a `!` command's) as a user
    # line, later as a system/local_command line: either way nobody typed it
    msgs = _recent(
        tmp_path,
        {
            "type": "user",
            "uuid": "c1",
            "message": {
                "role": "user",
                "content": "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n"
                "<command-args></command-args>",
            },
        },
        {
            "type": "user",
            "uuid": "c2",
            "message": {
                "role": "user",
                "content": "<local-command-stdout>Total cost: $0.42</local-command-stdout>",
            },
        },
        {
            "type": "user",
            "uuid": "c3",
            "message": {
                "role": "user",
                "content": "<bash-stdout>hello</bash-stdout><bash-stderr></bash-stderr>",
            },
        },
        {
            "type": "user",
            "uuid": "c4",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<local-command-stderr>Error: no MCP server</local-command-stderr>",
                    }
                ],
            },
        },
        {
            "type": "user",
            "uuid": "c5",
            "message": {
                "role": "user",
                "content": "<local-command-caveat>Caveat: generated locally.</local-command-caveat>",
            },
        },
        {
            "type": "system",
            "uuid": "c6",
            "subtype": "local_command",
            "content": "<local-command-stdout>Set model to opus</local-command-stdout>",
        },
        {
            "type": "user",
            "uuid": "u1",
            "message": {
                "role": "user",
                "content": "<bash-stdout>1 error</bash-stdout>\nwhy does it fail?",
            },
        },
    )
    assert msgs["c1"].role == "user"  # the user typed /cost
    assert [msgs[k].role for k in ("c2", "c3", "c4", "c5", "c6")] == ["system"] * 5
    assert msgs["c2"].native_type == "user"
    assert msgs["u1"].role == "user"  # the user wrote something of their own


def test_recent_lines_tagged_end_to_end(tmp_path: Path) -> None:
    """An API failure is an ``error`` (each retried attempt and the final one); a
    check-in stays one when a local command's output follows it; Claude Code's own lines
    (meta, command output, compaction summary) are no check-ins."""
    import duckdb

    from analytics.ingest import ingest

    folder = tmp_path / "proj"
    folder.mkdir()
    lines = [
        {"type": "user", "uuid": "m1", "isMeta": True, "message": {"content": "Is it ready? Done?"}},
        {"type": "system", "uuid": "e1", "subtype": "api_error", "level": "error",
         "error": {"status": 529, "message": "overloaded"}, "retryAttempt": 1, "maxRetries": 10},
        {"type": "assistant", "uuid": "e2", "isApiErrorMessage": True,
         "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "API Error: 529 Overloaded"}]}},
        {"type": "user", "uuid": "k1", "message": {"content": "is it up?"}},
        {"type": "user", "uuid": "c1", "message": {"content": "<command-name>/cost</command-name>"}},
        {"type": "user", "uuid": "c2", "message": {"content": "<local-command-stdout>ok? done?</local-command-stdout>"}},
        {"type": "user", "uuid": "s1", "isCompactSummary": True, "message": {"content": "User asked: ready?"}},
    ]  # fmt: skip
    path = folder / "recent-1.jsonl"
    path.write_text("".join(json.dumps({**_ENV, **line}) + "\n" for line in lines))
    db = tmp_path / "t.duckdb"
    assert not ingest([folder], db=db, workers=1).errors
    con = duckdb.connect(str(db), read_only=True)
    tagged = con.execute(
        "SELECT m.source_id, t.tag FROM tags t JOIN messages m USING (session_id, msg_idx)"
        " ORDER BY m.msg_idx, t.tag"
    ).fetchall()
    roles = dict(con.execute("SELECT source_id, role FROM messages").fetchall())
    con.close()
    assert tagged == [("e1", "error"), ("e2", "error"), ("k1", "user_checkin")]
    assert (roles["m1"], roles["c1"], roles["c2"]) == ("system", "user", "system")


# --- 2.1.1xx-2.1.2xx line shapes (QA against the newest releases) ----------------------
# Sources: session files of 2.1.198-2.1.258 as described by third-party parsers
# (claude-code-viewer's schemas, amux's transcript spec); the records below are made here.

_STATE = {"sessionId": "recent-1"}


def _recent_items(tmp_path: Path, *lines: dict[str, object]) -> tuple[list[ParsedItem], Ledger]:
    """Items of a session file holding ``lines`` as they are (no envelope added)."""
    path = tmp_path / "recent-1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return parse(path)


def test_a_session_starting_with_a_state_line_is_claude_code(tmp_path: Path) -> None:
    # 2.1.x writes session-state lines (no uuid) at the top of a file: mode, permission-mode
    prompt = {**_ENV, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}
    for first in ({"type": "mode", "mode": "normal"}, {"type": "agent-name", "agentName": "x"},
                  {"type": "some-future-state", "value": 1}):  # fmt: skip
        path = tmp_path / "recent-1.jsonl"
        path.write_text(json.dumps({**first, **_STATE}) + "\n" + json.dumps(prompt) + "\n")
        assert claude_code.sniff(path, path.read_bytes()), first
        from analytics.sources.detect import detect_format

        assert detect_format(path) == "claude_code"
    # a line of another format that happens to have a type and a sessionId is not enough
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"type": "some-future-state", "sessionId": "s"}) + "\n")
    assert not claude_code.sniff(other, other.read_bytes())


def test_newer_state_and_history_lines_are_known(tmp_path: Path) -> None:
    items, ledger = _recent_items(
        tmp_path,
        {"type": "mode", "mode": "normal", **_STATE},
        {"type": "custom-title", "customTitle": "my title", **_STATE},
        {"type": "agent-name", "agentName": "deployer", **_STATE},
        {"type": "bridge-session", "bridgeSessionId": "cse_011C", "lastSequenceNum": 0, **_STATE},
        {"type": "file-history-delta", "messageId": "u1", "snapshotMessageId": "u0",
         "trackingPath": "/srv/a.py", "backup": {}, "timestamp": "2026-08-01T00:00:00Z", **_STATE},
    )  # fmt: skip
    raw = of(items, RawRecord)
    assert [r.record_type for r in raw] == [
        "mode", "custom-title", "agent-name", "bridge-session", "file-history-delta"
    ]  # fmt: skip
    assert all(r.known for r in raw) and ledger.unknown_types == {}


def test_a_custom_title_names_the_session(tmp_path: Path) -> None:
    # /rename writes custom-title; ai-title lines keep coming and must not replace it
    items, _ = _recent_items(
        tmp_path,
        {"type": "ai-title", "aiTitle": "Generated title", **_STATE},
        {"type": "custom-title", "customTitle": "qwen rollout", **_STATE},
        {"type": "ai-title", "aiTitle": "A later generated title", **_STATE},
    )
    assert of(items, Session)[-1].title == "qwen rollout"


def test_a_task_notification_is_not_the_users(tmp_path: Path) -> None:
    # a background task's completion reaches the model as a user line whose origin is not
    # the user (2.1.2xx: origin.kind "task-notification"; older builds: the bare wrapper)
    note = "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>"
    msgs = _recent(
        tmp_path,
        {"type": "user", "uuid": "n1", "origin": {"kind": "task-notification"},
         "promptSource": "system", "message": {"role": "user", "content": note}},
        {"type": "user", "uuid": "n2", "message": {"role": "user", "content": note}},
        {"type": "user", "uuid": "p1", "origin": {"kind": "peer", "name": "coordinator"},
         "message": {"role": "user", "content": "re-run pass 2"}},
        {"type": "user", "uuid": "h1", "origin": {"kind": "human"}, "promptSource": "typed",
         "message": {"role": "user", "content": "status?"}},
    )  # fmt: skip
    assert [msgs[k].role for k in ("n1", "n2", "p1", "h1")] == ["system", "system", "system", "user"]


def test_a_prompt_queued_mid_turn_is_a_user_message(tmp_path: Path) -> None:
    # typed while the agent works: queue-operation enqueue/remove, then an attachment line
    # queued_command that delivers the prompt into the running turn (no user line follows)
    items, ledger = _recent_items(
        tmp_path,
        {"type": "queue-operation", "operation": "enqueue", "content": "status?",
         "timestamp": "2026-08-01T00:00:01Z", **_STATE},
        {**_ENV, "type": "attachment", "uuid": "q1", "parentUuid": "a0",
         "timestamp": "2026-08-01T00:00:02Z",
         "attachment": {"type": "queued_command", "prompt": "status?", "commandMode": "prompt",
                        "origin": {"kind": "human"}}},
        {**_ENV, "type": "attachment", "uuid": "q2",
         "attachment": {"type": "queued_command", "prompt": [{"type": "text", "text": "match this"},
                                                              {"type": "image"}],
                        "commandMode": "prompt"}},
        {**_ENV, "type": "attachment", "uuid": "q3",
         "attachment": {"type": "queued_command", "commandMode": "task-notification",
                        "prompt": "<task-notification>\n<task-id>b1</task-id>\n</task-notification>"}},
        {**_ENV, "type": "attachment", "uuid": "s1",
         "attachment": {"type": "skill_listing", "content": "- pdf", "names": ["pdf"]}},
    )  # fmt: skip
    msgs = {m.source_id: m for m in of(items, Message)}
    assert (msgs["q1"].role, msgs["q1"].text, msgs["q1"].native_type) == (
        "user", "status?", "attachment/queued_command"
    )  # fmt: skip
    assert msgs["q1"].parent_source_id == "a0" and msgs["q1"].ts is not None
    assert (msgs["q2"].role, msgs["q2"].text) == ("user", "match this\n[image]")
    assert msgs["q3"].role == "system"
    assert [r.record_type for r in of(items, RawRecord)] == ["queue-operation", "attachment"]
    assert ledger.records_read == ledger.records_stored == 5 and ledger.unknown_types == {}


def test_tool_reference_and_document_blocks_leave_a_trace(tmp_path: Path) -> None:
    # ToolSearch answers with tool_reference blocks only; a PDF the user attaches is a
    # document block: neither may leave an empty text behind
    msgs = _recent(
        tmp_path,
        {"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "select:WebFetch"}}]}},
        {"type": "user", "uuid": "r1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "tool_reference", "tool_name": "WebFetch"},
                {"type": "tool_reference", "tool_name": "TaskCreate"}]}]},
         "toolUseResult": {"matches": ["WebFetch", "TaskCreate"], "query": "select:WebFetch"}},
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                            "data": "JVBERi0xLjQK"}},
            {"type": "text", "text": "summarise the paper"}]}},
    )  # fmt: skip
    assert msgs["r1"].text == "[tool_reference: WebFetch]\n[tool_reference: TaskCreate]"
    assert msgs["u1"].text == "[document]\nsummarise the paper"


def test_queued_check_in_and_task_notification_tagged_end_to_end(tmp_path: Path) -> None:
    import duckdb

    from analytics.ingest import ingest

    folder = tmp_path / "proj"
    folder.mkdir()
    lines = [
        {"type": "mode", "mode": "normal", **_STATE},
        {**_ENV, "type": "user", "uuid": "u1", "message": {"content": "deploy it"}},
        {**_ENV, "type": "attachment", "uuid": "q1",
         "attachment": {"type": "queued_command", "prompt": "any luck?", "commandMode": "prompt"}},
        {**_ENV, "type": "user", "uuid": "n1", "origin": {"kind": "task-notification"},
         "message": {"content": "<task-notification>\n<status>failed</status>\n</task-notification>"}},
    ]  # fmt: skip
    (folder / "recent-1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    db = tmp_path / "t.duckdb"
    assert not ingest([folder], db=db, workers=1).errors
    con = duckdb.connect(str(db), read_only=True)
    tagged = con.execute(
        "SELECT m.source_id, t.tag FROM tags t JOIN messages m USING (session_id, msg_idx)"
    ).fetchall()
    roles = dict(con.execute("SELECT source_id, role FROM messages").fetchall())
    con.close()
    assert tagged == [("q1", "user_checkin")]
    assert roles == {"u1": "user", "q1": "user", "n1": "system"}


def test_a_reused_tool_use_id_does_not_lose_the_open_call(tmp_path: Path) -> None:
    # some providers behind Claude Code number their tool calls ("functions.Bash:0"), so an
    # id can come back while an earlier call with it never got a result
    def use(uuid: str, command: str) -> dict[str, object]:
        block = {"type": "tool_use", "id": "functions.Bash:0", "name": "Bash", "input": {"command": command}}
        return {**_ENV, "type": "assistant", "uuid": uuid, "message": {"role": "assistant", "content": [block]}}

    result = {**_ENV, "type": "user", "uuid": "r1", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "functions.Bash:0", "content": "a.txt"}]}}  # fmt: skip
    items, _ = _recent_items(tmp_path, use("a1", "sleep 100"), use("a2", "ls"), result)
    calls = of(items, ToolCall)
    assert sorted((c.msg_idx, c.command, c.status) for c in calls) == [
        (0, "sleep 100", "running"), (1, "ls", "completed")
    ]  # fmt: skip


def _bash_result(tmp_path: Path, command: str, result: dict[str, object], is_error: bool = False,
                 text: str = "") -> ToolCall:
    """The call of a Claude Code Bash ``command`` whose result line carries ``result``
    (``toolUseResult``)."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command}}
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": text, "is_error": is_error}
    path = tmp_path / "recent-1.jsonl"
    path.write_text("".join(json.dumps({**_ENV, **line}) + "\n" for line in [
        {"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "content": [use]}},
        {"type": "user", "uuid": "u1", "parentUuid": "a1", "toolUseResult": result,
         "message": {"role": "user", "content": [block]}},
    ]))
    items, _ = parse(path)
    (call,) = of(items, ToolCall)
    return call


_PLAIN = {"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False}


@pytest.mark.parametrize(
    ("result", "is_error", "text", "expected"),
    [
        # Claude Code makes a non-zero exit an error result: a plain one exited 0
        (_PLAIN, False, "ok", ("completed", 0)),
        ({k: v for k, v in _PLAIN.items() if k != "isImage"}, False, "ok", ("completed", 0)),
        # grep finding nothing exits 1, which Claude Code does not call an error
        ({**_PLAIN, "returnCodeInterpretation": "No matches found"}, False, "", ("completed", None)),
        # sent to the background: still running
        ({**_PLAIN, "backgroundTaskId": "dce0af"}, False,
         "Command running in background with ID: dce0af", ("completed", None)),
        ({**_PLAIN, "interrupted": True}, False, "", ("aborted", None)),
        ("Error: Exit code 2\nls: cannot access", True, "Exit code 2\nls: cannot access",
         ("error", 2)),
        ("Error: Traceback (most recent call last):", True, "Traceback (most recent call last):",
         ("error", None)),
    ],
)
def test_a_bash_result_without_error_exited_0(
    tmp_path: Path, result: object, is_error: bool, text: str, expected: tuple[str, int | None]
) -> None:
    call = _bash_result(tmp_path, "ls /srv", result, is_error, text)  # type: ignore[arg-type]
    assert (call.status, call.exit_code) == expected
