"""The fast paths of the tooling extractor give what the slow ones give."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from analytics.analysis.tooling import (
    ScriptMemory,
    benchmark_numbers,
    gpu_numbers,
    logs,
    parse_launches,
    parse_prefix,
    scan_log,
)
from analytics.analysis.tooling.anchors import rare_anchor
from analytics.analysis.tooling.extractor import _server_event, measurement
from analytics.analysis.tooling.failures import failure_hits
from analytics.analysis.tooling.gates import REPORT_LITERALS
from analytics.analysis.tooling.launches import _may_matter
from analytics.analysis.tooling.logs import (
    LogScan,
    _anchors_in,
    _needles,
    _numbers,
    _selection,
    line_numbers,
)
from analytics.models import Measurement, ServerEvent


def test_unvalidated_measurement_equals_validated() -> None:
    fields = dict(session_id="s", msg_idx=3, metric="m", value=1.5, unit=None, label="x=1")
    fast = measurement(**fields, source="decode_log")
    slow = Measurement(**fields, source="decode_log")
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


def test_unvalidated_server_event_equals_validated() -> None:
    fields = dict(session_id="s", msg_idx=3, engine="sglang", event="oom", detail=None, log_ts="t")
    fast = _server_event(**fields)  # type: ignore[arg-type]
    slow = ServerEvent(**fields)  # type: ignore[arg-type]
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


def test_quoting_cannot_hide_a_launch_from_the_prefilter() -> None:
    assert parse_launches("python -m sgl'ang'.launch_server --tp 2")[0].engine == "sglang"
    assert parse_launches('v\\llm "serve" m')[0].model == "m"
    assert parse_launches("A=sgl; B=ang.launch_server; python -m $A$B")[0].engine == "sglang"
    assert not _may_matter("tail -n 50 /root/server.log", ScriptMemory())


def test_remembered_script_is_still_followed() -> None:
    scripts = ScriptMemory()
    scripts.remember("/x/it's.sh", "vllm serve m")
    assert _may_matter("tail log", scripts) is False
    assert [s.engine for s in parse_launches("bash \"/x/it's.sh\"", scripts)] == ["vllm"]


def test_engine_carries_over_skipped_lines_and_carriage_returns() -> None:
    text = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [a.py:1] x\n"
        "plain line\rLoading safetensors checkpoint shards: 100%\n"
        "\x1b[1m\n"
    )
    assert [(e.engine, e.event) for e in scan_log(text, "sglang").events] == [
        ("vllm", "loading_shards")
    ]
    assert [(e.engine, e.event) for e in scan_log(text[:-5], "sglang").events] == [
        ("vllm", "loading_shards")
    ]


# --------------------------------------------------------------------------- whole-output scan

_LOG_LINES = [
    "[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, #token: 5123, token usage: 0.04,"
    " cuda graph: True, gen throughput (token/s): 25.31, #queue-req: 0, ",
    "[2026-05-14 19:58:04 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0,"
    " token usage: 0.01, #running-req: 0, #queue-req: 0, ",
    'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK',
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10,  5.01s/it]",
    "(APIServer pid=12) INFO 05-14 19:58:03 [api_server.py:10] vLLM API server version 0.11.0",
    "(EngineCore_DP0 pid=7) INFO 05-14 19:58:09 [gpu_worker.py:1] Available KV cache memory:"
    " 12.5 GiB",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "Capture cuda graph end. Time elapsed: 3.20 s. mem usage=1.05 GB",
    "Mean TTFT (ms):   12.5 and memory.used [MiB] and Throughput: 3 latency: 4",
    "plain output of some tool, nothing to see",
    "",
    "x" * 17_000 + " CUDA out of memory",
]


def _texts() -> list[str]:
    """Outputs mixing log lines, plain lines, repeats, carriage returns and long lines."""
    rng = random.Random(7)
    texts = []
    for _ in range(300):
        lines = [rng.choice(_LOG_LINES) for _ in range(rng.randint(1, 14))]
        texts.append("".join(line + rng.choice(["\n", "\r", "\r\n"]) for line in lines))
    return texts


def _facts(scan: LogScan) -> tuple[object, ...]:
    return (
        [(e.engine, e.event, e.detail, e.log_ts) for e in scan.events],
        scan.numbers,
        scan.engines_seen,
    )


_APPLY_LINE = logs._apply_line


def _scan_every_line(text: str, engine: str, counted: set[str] | None) -> LogScan:
    """``scan_log`` reading every line: an ANSI code (it strips to an empty line, which
    yields nothing) makes it pass over none, and ``_apply_line`` saying that a line could
    add more makes it skip none as a repeat of a line read before."""

    def apply_line(*args: Any) -> bool:
        _APPLY_LINE(*args)
        return False

    with pytest.MonkeyPatch.context() as m:
        m.setattr(logs, "_apply_line", apply_line)
        return scan_log(text + "\n\x1b[0m", engine, counted)


def test_scan_that_skips_and_caches_equals_one_that_reads_every_line() -> None:
    counted_fast: set[str] = set()
    counted_slow: set[str] = set()
    for text in _texts():
        for engine in ("sglang", "vllm"):
            fast = scan_log(text, engine, counted_fast)
            slow = _scan_every_line(text, engine, counted_slow)
            assert _facts(fast) == _facts(slow) and counted_fast == counted_slow


def test_a_repeated_line_adds_only_what_it_would_add_again() -> None:
    untimed = "Capture cuda graph end. Time elapsed: 3.20 s. mem usage=1.05 GB"
    timed = "[2026-05-14 19:58:05 TP0] " + untimed
    once = len(scan_log(untimed).numbers)
    assert once and len(scan_log(f"{untimed}\n{untimed}\n", "sglang", set()).numbers) == 2 * once
    assert len(scan_log(f"{timed}\n{timed}\n").numbers) == 2 * once  # nothing counted
    assert len(scan_log(f"{timed}\n{timed}\n", "sglang", set()).numbers) == once
    # an event found again under another engine is another event
    shards = "Loading safetensors checkpoint shards: 100%"
    text = f"{shards}\n{_LOG_LINES[4]}\n{shards}\n{shards}\n"
    assert [(e.engine, e.event) for e in scan_log(text, "sglang").events] == [
        ("sglang", "loading_shards"),
        ("vllm", "api_server_version"),
        ("vllm", "loading_shards"),
    ]


_REPORTS = Path(__file__).parent / "fixtures" / "tooling"


def _report_outputs() -> list[str]:
    """Benchmark and nvidia-smi outputs, a log line after each of their lines (so that the
    scan reads them whole and knows their report literals)."""
    names = [
        "bench_one_batch_sglang_0.5.9.txt",
        "bench_serving_sglang_0.5.9.txt",
        "vllm_bench_0.11.0.txt",
        "nvidia_smi_550.txt",
        "nvidia_smi_query.csv",
    ]
    return [
        "".join(f"{line}\n{_LOG_LINES[1]}\n" for line in (_REPORTS / name).read_text().split("\n"))
        for name in names
    ]


def test_scan_reports_the_report_literals_an_output_holds() -> None:
    known = found = 0
    texts = [*_texts(), "plain\n" * 5 + "Throughput: 3\n" + _LOG_LINES[0], *_report_outputs()]
    for text in texts:
        reports = scan_log(text).reports
        assert reports is None or reports == {lit for lit in REPORT_LITERALS if lit in text}
        known += reports is not None
        holds = reports.__contains__ if reports is not None else None
        bench = benchmark_numbers(text, None, 3, holds)
        gpu = gpu_numbers(text, None, holds)
        assert bench == benchmark_numbers(text, None, 3)
        assert gpu == gpu_numbers(text, None)
        found += holds is not None and bool(bench or gpu)
    assert known  # (an output read whole: its report literals are known)
    assert found == len(_report_outputs())  # (the gates let each report's parser run)


def test_context_engine_is_found_only_when_a_line_needs_it() -> None:
    def unexpected() -> str:
        raise AssertionError("context engine asked for")

    assert scan_log(_LOG_LINES[0] + "\n" + _LOG_LINES[3], unexpected).events
    asked = scan_log(_LOG_LINES[3], lambda: "vllm").events
    assert [(e.engine, e.event) for e in asked] == [("vllm", "loading_shards")]


def test_every_needle_is_found_by_its_anchor_even_inside_another() -> None:
    anchors = {rare_anchor(needle) for needle in _needles()}
    for needle in _needles():
        assert rare_anchor(needle) in needle
        assert any(rare_anchor(needle).startswith(text) for text in _anchors_in(needle))
    overlaps = [
        (first, second, cut)
        for first in anchors
        for second in anchors
        for cut in range(1, len(first))
        if second.startswith(first[cut:])
    ]
    assert overlaps  # e.g. "… warmup" and "warmup with status 200"
    for first, second, cut in overlaps:
        found = _anchors_in(first[:cut] + second)
        assert any(first.startswith(text) for text in found)
        assert any(second.startswith(text) for text in found)


def test_selected_signatures_give_what_all_signatures_give() -> None:
    for line in _LOG_LINES:
        msg = parse_prefix(line).message
        selection = _selection(_anchors_in(msg))
        assert failure_hits(msg, selection.failures) == failure_hits(msg)
        assert _numbers(msg, selection.numbers, selection.batch_specs) == line_numbers(
            parse_prefix(line)
        )


def test_lines_split_a_chunk_at_a_time_are_the_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "a\n\nbb\nccc\n" * 5 + "d"
    for chunk in (1, 2, 3, 7, 1000):
        monkeypatch.setattr(logs, "SPLIT_CHUNK", chunk)
        for start in (0, 2, 3):
            assert list(logs._lines(text, start)) == text[start:].split("\n")
        assert _facts(scan_log(text.replace("bb", _LOG_LINES[0]), "sglang", set())) == _facts(
            _scan_every_line(text.replace("bb", _LOG_LINES[0]), "sglang", set())
        )
