"""The header Codex writes before a command's output ("Chunk ID: … Wall time: … Process exited
with code N … Output:"; FORMATS.md) is read as facts, never as what the command printed: by
the parser (the exit code), the tagger, polling loops, the tooling extractor and the report. Each case is a rollout written as Codex writes one and parsed by the
Codex parser, so the analysers see what an ingest gives them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _codex_rollouts import exec_header, write_rollout
from _samples import of, run

from analytics.analysis.tagging import Tagger, analyse_polling
from analytics.analysis.tooling import ToolingExtractor
from analytics.models import Message, MessageContext, Tag, ToolCall
from analytics.sources import codex

SID = "0199a000-0000-7000-8000-0000000000cc"


def header(exit_code: int | None = 0, wall: str = "2.3000", running: int | None = None) -> str:
    """A unified exec header (chunk ids are hex: "5d2003" holds "200")."""
    return exec_header(wall, exit_code, running)


def rollout(tmp_path: Path, items: list[tuple[int, dict[str, object]]]) -> Path:
    return write_rollout(tmp_path, SID, "2026-01-01", items)


def exec_call(call_id: str, command: str) -> dict[str, object]:
    return {"type": "function_call", "name": "exec_command",
            "arguments": json.dumps({"cmd": command}), "call_id": call_id}


def exec_output(call_id: str, output: str) -> dict[str, object]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def parsed(
    tmp_path: Path, command: str, output: str, took_s: int = 120
) -> tuple[ToolCall, dict[int, Message]]:
    """The call and the messages of a rollout holding one exec_command call and its output,
    ``took_s`` seconds apart."""
    path = rollout(
        tmp_path, [(1, exec_call("call_1", command)), (1 + took_s, exec_output("call_1", output))]
    )
    items, _ = run(codex, path)
    (call,) = of(items, ToolCall)
    return call, {m.msg_idx: m for m in of(items, Message)}


def contexts(call: ToolCall, messages: dict[int, Message]) -> tuple[MessageContext, MessageContext]:
    """(the message making the call, the message carrying its result)."""
    assert call.result_msg_idx is not None
    return (
        MessageContext(message=messages[call.msg_idx], calls=[call]),
        MessageContext(message=messages[call.result_msg_idx], results=[call]),
    )


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


def tags(tagger: Tagger, call: ToolCall, messages: dict[int, Message], tag: str) -> list[Tag]:
    return [t for t in tagger.tag(list(contexts(call, messages))) if t.tag == tag]


# --------------------------------------------------------------------------- the reader


def test_the_reader_splits_both_header_shapes_into_facts_and_output() -> None:
    from analytics.command_output import command_output

    stored = header(3, wall="86.5718") + "boom\n"
    out = command_output(stored)
    assert (out.text, out.exit_code, out.wall_time_s, out.session_id) == ("boom\n", 3, 86.5718, None)
    assert stored[out.start :] == out.text
    # the freeform shell tool's header: exit code first, no chunk id, a line count
    out = command_output("Exit code: 1\nWall time: 0.2 seconds\nTotal output lines: 900\nOutput:\nx")
    assert (out.text, out.exit_code, out.wall_time_s) == ("x", 1, 0.2)
    # a process left running in a unified exec session has no exit code yet
    out = command_output(header(running=4242) + "Building...")
    assert (out.text, out.exit_code, out.session_id) == ("Building...", None, "4242")
    # a header alone: the command printed nothing
    assert command_output(header(0)).text == ""


@pytest.mark.parametrize(
    "text",
    [
        "hi",
        "",
        "Wall time is what we measure\nOutput:\nx",  # not a header line
        "Exit code: 1\nOutput:\nx",  # no wall time: a program printing two such lines
        "Chunk ID: 1\nWall time: 1 seconds\na\nb\nc\nd\ne\nf\nOutput:\nx",  # too many lines
    ],
)
def test_text_without_a_header_is_all_output(text: str) -> None:
    from analytics.command_output import command_output

    out = command_output(text)
    assert (out.text, out.start, out.exit_code, out.wall_time_s) == (text, 0, None, None)


def test_the_parser_takes_the_exit_code_from_the_header_only(tmp_path: Path) -> None:
    """A line a program prints is no exit code: only the header's is."""
    call, _ = parsed(tmp_path, "make check", "ran 12 jobs\nExit code: 1\n")
    assert (call.exit_code, call.status) == (None, "completed")
    call, _ = parsed(tmp_path, "make check", header(2) + "ran 12 jobs\n")
    assert (call.exit_code, call.status) == (2, "error")
    assert call.output == header(2) + "ran 12 jobs\n"  # the stored output keeps its header


# --------------------------------------------------------------------------- tooling


def test_nvidia_smi_csv_rows_are_counted_after_the_header(tmp_path: Path) -> None:
    """Without a header row (``noheader``) GPUs are numbered by row: the five header lines are
    no rows (they made the GPUs 5 and 6)."""
    command = "nvidia-smi --query-gpu=memory.used --format=csv,noheader"
    call, messages = parsed(tmp_path, command, header(0) + "3 MiB\n5 MiB")
    extractor = ToolingExtractor()
    for ctx in contexts(call, messages):
        facts = extractor.extract(ctx)
    assert [(m.metric, m.value, m.label) for m in facts.measurements] == [
        ("gpu_mem_used", 3.0, "gpu=0"),
        ("gpu_mem_used", 5.0, "gpu=1"),
    ]


def test_a_log_and_a_benchmark_block_after_the_header_are_read(tmp_path: Path) -> None:
    block = (
        "\n============ Serving Benchmark Result ============\n"
        "Max request concurrency:                 16\n"
        "Output token throughput (tok/s):         1510.00\n"
        "Mean TTFT (ms):                          47.1\n"
        "==================================================\n"
        "[2026-01-01 10:01:30] The server is fired up and ready to roll!\n"
    )
    command = "python -m sglang.bench_serving --backend sglang"
    call, messages = parsed(tmp_path, command, header(0) + block)
    extractor = ToolingExtractor()
    facts = [extractor.extract(ctx) for ctx in contexts(call, messages)][-1]
    assert [(m.metric, m.value, m.label) for m in facts.measurements] == [
        ("output_token_throughput", 1510.0, "concurrency=16"),
        ("ttft_mean", 47.1, "concurrency=16"),
    ]
    assert [e.event for e in facts.server_events] == ["server_ready"]


# --------------------------------------------------------------------------- tags


def test_an_error_tag_quotes_the_output_not_the_header(tmp_path: Path, tagger: Tagger) -> None:
    """The program's own error line is the evidence (the header's "Process exited with code 1"
    came first and hid it), with offsets into the stored output."""
    call, messages = parsed(tmp_path, "python serve.py", header(1) + "Error: model not found\n")
    (tag,) = tags(tagger, call, messages, "error")
    assert call.output is not None and call.output[tag.start_char : tag.end_char] == tag.evidence
    assert call.output[tag.start_char :].startswith("Error: model not found")


def test_a_failed_command_that_printed_nothing_is_an_error_by_its_exit_code(
    tmp_path: Path, tagger: Tagger
) -> None:
    call, messages = parsed(tmp_path, "false", header(2))
    (tag,) = tags(tagger, call, messages, "error")
    assert (tag.evidence, tag.start_char, tag.end_char) == ("exit code 2", None, None)


def test_a_succeeding_command_is_no_error_and_its_offsets_index_the_stored_output(
    tmp_path: Path, tagger: Tagger
) -> None:
    block = "\n============ Serving Benchmark Result ============\nMean TTFT (ms):  47.1\n"
    call, messages = parsed(tmp_path, "python bench.py", header(0) + block)
    assert tags(tagger, call, messages, "error") == []
    result = [t for t in tags(tagger, call, messages, "benchmark") if t.msg_idx == call.result_msg_idx]
    (tag,) = result
    assert call.output is not None and call.output[tag.start_char : tag.end_char] == tag.evidence
    assert tag.evidence.startswith("=====")


def test_an_output_without_its_call_is_read_after_its_header(tmp_path: Path, tagger: Tagger) -> None:
    """A tool record whose call is not in the batch: its text is the output, header and all."""
    call, messages = parsed(tmp_path, "python serve.py", header(1) + "Error: model not found\n")
    assert call.result_msg_idx is not None
    record = messages[call.result_msg_idx]
    found = [t for t in tagger.tag([MessageContext(message=record)]) if t.tag == "error"]
    (tag,) = found
    assert record.text[tag.start_char : tag.end_char] == tag.evidence
    assert record.text[tag.start_char :].startswith("Error: model not found")
    call, messages = parsed(tmp_path, "false", header(1))
    assert call.result_msg_idx is not None
    found = [
        t for t in tagger.tag([MessageContext(message=messages[call.result_msg_idx])])
        if t.tag == "error"
    ]
    assert [(t.evidence, t.start_char) for t in found] == [("exit code 1", None)]


# --------------------------------------------------------------------------- polling loops


def _loop(tmp_path: Path, command: str, output: str) -> tuple[str, float | None]:
    call, messages = parsed(tmp_path, command, output)
    (loop,) = analyse_polling(contexts(call, messages)[0])
    return loop.outcome, loop.waited_s


def test_a_timed_out_loop_is_not_ready_because_its_header_holds_the_pattern(tmp_path: Path) -> None:
    """``grep -q 200`` matched the chunk id "5d2003": the loop timed out (exit code 124)."""
    command = (
        "timeout 120 bash -c 'until curl -s -o /dev/null -w \"%{http_code}\" "
        "localhost:30000/health | grep -q 200; do sleep 5; done'"
    )
    assert _loop(tmp_path, command, header(124, wall="120.0031")) == ("timeout", 120.0031)


def test_a_quiet_loop_is_not_ready_because_of_the_headers_words(tmp_path: Path) -> None:
    """``grep -q ok`` matched "token" in "Original token count": the output holds nothing.
    (9 s: within its last round, where the clock cannot tell either whether it left on its
    check or ran out; after 4.1 s it had left early, on its check: ready.)"""
    command = (
        "for i in $(seq 1 5); do curl -sf localhost:30000/health | grep -q ok && break; "
        "sleep 2; done"
    )
    assert _loop(tmp_path, command, header(0, wall="9.0000")) == ("unknown", 9.0)
    assert _loop(tmp_path, command, header(0, wall="4.1000")) == ("ready", 4.1)


def test_a_loop_is_not_failed_because_its_header_says_exited(tmp_path: Path) -> None:
    command = (
        "for i in $(seq 1 30); do tail -2 server.log; "
        "grep -qiE 'Traceback|exited' server.log && break; "
        "grep -q 'fired up' server.log && break; sleep 10; done"
    )
    log = (
        "[2026-01-01 10:01:00] Load weight end.\n"
        "[2026-01-01 10:01:30] The server is fired up and ready to roll!"
    )
    assert _loop(tmp_path, command, header(0, wall="30.5000") + log) == ("ready", 30.5)


def test_without_a_header_a_loop_waited_as_long_as_its_records_say(tmp_path: Path) -> None:
    command = "until curl -sf localhost:30000/health; do sleep 5; done"
    assert _loop(tmp_path, command, "ok") == ("unknown", 120.0)


# --------------------------------------------------------------------------- the rest


def test_the_report_quotes_what_the_command_printed(tmp_path: Path) -> None:
    """A claim contradicted by a failed smoke test quotes the test's output, not its header."""
    import duckdb

    from analytics.ingest import ingest
    from analytics.report import write_report

    def said(text: str) -> dict[str, object]:
        return {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}

    path = rollout(tmp_path, [
        (1, exec_call("call_1", "python -m sglang.launch_server --model-path m --port 30000")),
        (11, exec_output("call_1", header(running=4242, wall="10.0000") + "loading\n")),
        (12, said("The server is up and ready.")),
        (13, exec_call("call_2", "curl -s localhost:30000/v1/chat/completions -d '{}'")),
        (14, exec_output("call_2", header(0, wall="0.2000") + "Internal Server Error\n")),
    ])
    db = tmp_path / "t.duckdb"
    ingest([path], db=db)
    with duckdb.connect(str(db), read_only=True) as con:
        report = write_report(con, f"codex:{SID}", tmp_path / "r.md").read_text()
    (line,) = [x for x in report.splitlines() if x.startswith("Contradicted by")]
    assert line.endswith(": `Internal Server Error`"), line
