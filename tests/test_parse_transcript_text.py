"""Plain-text transcripts: headers, prose, multi-line shell commands and their output."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from _samples import of
from _samples import run as run_parser
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.models import Ledger, Message, ParsedItem, RawRecord, Session, ToolCall
from analytics.sources import transcript_text as tt

FIXTURES = Path(__file__).parent / "fixtures" / "transcript_text"
BRACKET = FIXTURES / "bracket_style.txt"
ANGLE = FIXTURES / "angle_style.txt"


def run(path: Path) -> tuple[list[ParsedItem], Ledger]:
    return run_parser(tt, path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(text)
    return path


def calls_in(text: str, tmp_path: Path) -> list[ToolCall]:
    items, _ = run(write(tmp_path, text))
    return of(items, ToolCall)


# --------------------------------------------------------------------------- fixtures


def test_bracket_messages() -> None:
    items, ledger = run(BRACKET)
    messages = of(items, Message)
    assert [(m.source_id, m.role) for m in messages] == [
        ("12476", "user"),
        ("12477", "assistant"),
        ("12478", "assistant"),
        ("12479", "user"),
        ("12480", "assistant"),
        ("12481", "tool"),
    ]
    assert [m.msg_idx for m in messages] == list(range(6))
    assert messages[3].text == "ok?"
    assert messages[1].text.splitlines()[-1] == (
        "I will lower --mem-fraction-static to 0.60 and relaunch."
    )
    assert messages[4].ts == datetime(2025, 6, 1, 20, 3, 10)
    assert messages[5].ts == datetime(2025, 6, 1, 20, 5, 0)
    assert messages[4].location == "line 32"
    preamble = of(items, RawRecord)
    assert [r.record_type for r in preamble] == ["preamble"] and preamble[0].known
    assert "GPU box" in preamble[0].raw
    assert ledger.records_read == 7  # 6 messages + preamble
    session = of(items, Session)[-1]
    assert session.session_id == "transcript_text:bracket_style"
    assert session.title.startswith("the MTP server crashed")
    assert session.started_at == datetime(2025, 6, 1, 20, 3, 10)


def test_bracket_heredoc_and_continuation() -> None:
    items, _ = run(BRACKET)
    launch = next(c for c in of(items, ToolCall) if c.call_id == "12477:0")
    assert launch.command.startswith("cat > /root/launch_mtp.sh <<'EOF'")
    assert "# don't forget the draft model" in launch.command  # quote in a heredoc body
    assert launch.command.endswith("> /root/dsv4_mtp.log 2>&1 &")  # continued after EOF
    assert launch.output == "launched\n[notice] A new release of pip is available"
    assert launch.status == "completed"
    assert json.loads(launch.input) == {"command": launch.command}


def test_bracket_polling_loop_aborted() -> None:
    items, _ = run(BRACKET)
    poll = next(c for c in of(items, ToolCall) if c.call_id == "12478:0")
    assert poll.command.startswith("for i in $(seq 1 16); do")
    assert poll.command.endswith("done")
    assert poll.command.count("\n") == 6
    assert poll.output.startswith("[25s] Capturing batches")
    assert poll.status == "aborted"
    assert poll.msg_idx == poll.result_msg_idx == 2


def test_bracket_tools_exit_codes() -> None:
    items, _ = run(BRACKET)
    calls = {c.call_id: c for c in of(items, ToolCall)}
    read = calls["12480:0"]
    assert read.tool == "read" and read.command is None
    assert json.loads(read.input) == {"args": "/root/dsv4_mtp.log"}
    assert read.output == "The server is fired up and ready to roll!"
    curl = calls["12480:1"]  # open single quote spans two lines
    assert curl.command.endswith('"max_new_tokens": 8}}\'')
    assert (curl.status, curl.exit_code) == ("error", 7)
    bench = calls["12480:2"]
    assert (bench.status, bench.exit_code) == ("error", 1)


def test_angle_style() -> None:
    items, ledger = run(ANGLE)
    messages = of(items, Message)
    assert [m.source_id for m in messages] == ["6850", "6851", "6852", "6853", "6854"]
    assert messages[2].text == "ready?" and messages[2].role == "user"
    assert messages[3].ts == datetime(2025, 6, 1, 19, 0)  # +02:00 -> UTC
    calls = {c.call_id: c for c in of(items, ToolCall)}
    assert calls["6850:0"].command.endswith('2>&1 &"')  # backslash inside double quotes
    assert calls["6850:0"].output == "pid 5834"
    watch = calls["6851:0"]
    assert watch.command.startswith("while ! grep") and watch.command.endswith("done")
    assert "  fi" in watch.command.splitlines()
    assert watch.status == "aborted"
    assert calls["6853:0"].tool == "edit" and calls["6853:0"].output == "Edit applied."
    assert calls["6853:1"].output == "The answer is 4.\nOK"
    assert ledger.records_read == 5 and not of(items, RawRecord)


def test_sniff() -> None:
    assert tt.sniff(BRACKET, BRACKET.read_bytes())
    assert tt.sniff(ANGLE, ANGLE.read_bytes())
    assert not tt.sniff(BRACKET, b'{"type": "user"}\n[msg 1] user: hi\n')
    assert not tt.sniff(BRACKET, b"see [msg 12] user: quoted inside prose\n")
    assert not tt.sniff(BRACKET, b"\x00\x01[msg 1] user: x")


# --------------------------------------------------------------------------- edge cases


def test_tool_lines_outside_assistant_messages_are_prose(tmp_path: Path) -> None:
    items, _ = run(write(tmp_path, "[msg 1] user: run this\n[bash] ls\n"))
    assert not of(items, ToolCall)
    assert of(items, Message)[0].text == "run this\n[bash] ls"


def test_tool_on_header_line(tmp_path: Path) -> None:
    calls = calls_in("[msg 3] assistant: [bash] ls -la\ntotal 0\n", tmp_path)
    assert calls[0].command == "ls -la" and calls[0].output == "total 0"


@pytest.mark.parametrize(
    ("command", "n_lines"),
    [
        ("until curl -sf localhost:8000/health; do\n  sleep 5\ndone", 3),
        ("if [ -f x ]; then\n  echo yes\nelse\n  echo no\nfi", 5),
        ("case $x in\n  a) echo a ;;\nesac", 3),
        ("python - <<-PY\n\tprint('hi')\n\tPY", 3),
        ("docker ps |\n  grep sglang", 2),
        ("x=$(\n  date\n)", 3),
        ("echo done  # don't stop here", 1),
        ("watch -n 5 nvidia-smi", 1),
    ],
)
def test_command_extent(tmp_path: Path, command: str, n_lines: int) -> None:
    text = f"[msg 1] assistant: go\n[bash] {command}\nOUTPUT LINE\n"
    calls = calls_in(text, tmp_path)
    assert calls[0].command == command
    assert calls[0].command.count("\n") + 1 == n_lines
    assert calls[0].output == "OUTPUT LINE"


def test_empty_bash_line_takes_next_line(tmp_path: Path) -> None:
    calls = calls_in("[msg 1] assistant:\n[bash]\nls\nfile.txt\n", tmp_path)
    assert (calls[0].command, calls[0].output) == ("ls", "file.txt")


def test_output_lines_like_log_tags_are_not_calls(tmp_path: Path) -> None:
    text = "[msg 1] assistant: x\n[bash] make\n[INFO] building\n[done] ok\n[TP0] up\n"
    calls = calls_in(text, tmp_path)
    assert len(calls) == 1 and calls[0].output == "[INFO] building\n[done] ok\n[TP0] up"


def test_mcp_style_tool_names(tmp_path: Path) -> None:
    calls = calls_in("[msg 1] assistant: x\n[context7_resolve] sglang\nfound\n", tmp_path)
    assert calls[0].tool == "context7_resolve" and calls[0].output == "found"


def test_no_output_and_no_headers(tmp_path: Path) -> None:
    calls = calls_in("[msg 1] assistant: x\n[bash] true\n", tmp_path)
    assert calls[0].output is None and calls[0].status == "completed"
    items, ledger = run(write(tmp_path, "just some notes\n"))
    assert [type(i) for i in items] == [Session, RawRecord]
    assert ledger.records_read == 1


def test_blank_preamble_is_not_a_record(tmp_path: Path) -> None:
    items, ledger = run(write(tmp_path, "\n\n[msg 1] user: hi\n"))
    assert not of(items, RawRecord) and ledger.records_read == 1


def test_invalid_utf8_does_not_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"[msg 1] user: caf\xe9\n")
    items, _ = run(path)
    assert of(items, Message)[0].text.startswith("caf")


# --------------------------------------------------------------------------- robustness

_LINES = [
    "[msg 1] user: ok?",
    "<msg id=2> assistant: checking",
    "[msg 3 2025-06-01T10:00:00Z] assistant:",
    "[bash] for i in 1 2; do",
    "[bash] cat <<EOF",
    "[bash] echo 'open",
    "[read] /etc/hosts",
    "EOF",
    "done",
    "fi",
    "  sleep 5 \\",
    "Exit code: 3",
    "User aborted the command",
    "plain prose line",
    "",
    "'\"`{}()",
]


@given(st.lists(st.sampled_from(_LINES), max_size=40))
@settings(max_examples=150, deadline=None)
def test_any_line_mix_parses(lines: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.txt"
        path.write_text("\n".join(lines) + "\n")
        items, ledger = run(path)
    messages = of(items, Message)
    assert ledger.records_read == len(messages) + len(of(items, RawRecord))
    assert [m.msg_idx for m in messages] == list(range(len(messages)))
    for call in of(items, ToolCall):
        assert call.status in ("completed", "error", "aborted")
