"""Benchmarks and nvidia-smi -> measurements; the extractor end to end; robustness."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.analysis.tooling import (
    ToolingExtractor,
    benchmark_numbers,
    find_failures,
    gpu_numbers,
    parse_launches,
    scan_log,
)
from analytics.analysis.tooling.benchmarks import metric_name
from analytics.analysis.tooling.shell import split_commands
from analytics.models import Message, MessageContext, ToolCall

FIXTURES = Path(__file__).parent / "fixtures" / "tooling"
SID = "claude_code:s1"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def ctx(idx: int, command: str, output: str | None = None) -> MessageContext:
    call = ToolCall(
        session_id=SID,
        msg_idx=idx,
        call_id=f"c{idx}",
        tool="Bash",
        command=command,
        output=output,
        status="completed",
    )
    msg = Message(session_id=SID, msg_idx=idx, source_id=str(idx), role="assistant")
    return MessageContext(message=msg, calls=[call], results=[call] if output is not None else [])


def test_metric_names_from_key_text() -> None:
    assert metric_name("Output token throughput (tok/s)") == ("output_token_throughput", "tok/s")
    assert metric_name("Mean TTFT (ms)") == ("ttft_mean", "ms")
    assert metric_name("P99 E2E Latency (ms)") == ("e2e_latency_p99", "ms")
    assert metric_name("Total generated tokens (retokenized)") == (
        "total_generated_tokens_retokenized",
        None,
    )
    assert metric_name("Total input tokens") == ("total_input_tokens", "tokens")


def test_sglang_bench_serving_block_with_trailing_spaces() -> None:
    text = fixture("bench_serving_sglang_0.5.9.txt")
    assert "1618.27   \n" in text  # the real "{:<40} {:<10}" padding
    got = {(b.metric, b.label): (b.value, b.unit) for b in benchmark_numbers(text, None, 7)}
    label = "concurrency=16,launch_msg_idx=7"
    assert got[("output_token_throughput", label)] == (1618.27, "tok/s")
    assert got[("ttft_mean", label)] == (210.44, "ms")
    assert got[("tpot_p99", label)] == (11.9, "ms")
    assert got[("itl_p95", label)] == (15.0, "ms")
    assert got[("benchmark_duration", label)] == (25.31, "s")
    assert got[("accept_length", label)] == (2.41, None)
    assert not any(m == "backend" or m == "traffic_request_rate" for m, _ in got)
    assert len(got) == 28  # 14 summary rows + 14 latency rows; text and inf rows skipped


def test_vllm_bench_serve_block_and_command_concurrency() -> None:
    text = fixture("bench_serving_vllm_0.11.0.txt")
    got = {
        (b.metric, b.label): b.value
        for b in benchmark_numbers(text, "vllm bench serve --max-concurrency 4")
    }
    assert got[("total_token_throughput", "concurrency=8")] == 2871.10
    assert got[("failed_requests", "concurrency=8")] == 0
    assert got[("request_goodput", "concurrency=8")] == 2.40
    assert got[("itl_median", "concurrency=8")] == 23.0
    no_row = text.replace("Maximum request concurrency:", "Something else:")
    labels = {b.label for b in benchmark_numbers(no_row, "vllm bench serve --max-concurrency 4")}
    assert labels == {"concurrency=4"}


def test_bench_one_batch_skips_warmup_and_labels_bs() -> None:
    got = [
        (b.metric, b.value, b.unit, b.label)
        for b in benchmark_numbers(
            fixture("bench_one_batch_sglang_0.5.9.txt"), "python -m sglang.bench_one_batch"
        )
    ]
    assert ("decode_median_throughput", 117.65, "tok/s", "bs=1") in got
    assert ("prefill_latency", 0.3, "s", "bs=8") in got
    assert ("total_throughput", 6144.0, "tok/s", "bs=8") in got
    assert not any(v == 1998.70 for _, v, _, _ in got)  # warmup
    assert {
        s
        for s in (b.source for b in benchmark_numbers(fixture("bench_one_batch_sglang_0.5.9.txt")))
    } == {"bench_one_batch"}


def test_vllm_bench_throughput_and_latency() -> None:
    got = {(b.metric, b.unit): b.value for b in benchmark_numbers(fixture("vllm_bench_0.11.0.txt"))}
    assert got[("throughput_output_tokens", "tok/s")] == 1234.56
    assert got[("throughput_requests", "req/s")] == 12.34
    assert got[("latency_avg", "s")] == 1.2345
    assert got[("latency_p99", "s")] == 1.9


def test_nvidia_smi_table() -> None:
    got = {
        (g.metric, g.label): (g.value, g.unit) for g in gpu_numbers(fixture("nvidia_smi_550.txt"))
    }
    assert got[("gpu_mem_used", "gpu=0")] == (70123, "MiB")
    assert got[("gpu_mem_total", "gpu=1")] == (81559, "MiB")
    assert got[("gpu_util", "gpu=0")] == (87, "%")
    assert got[("gpu_temp", "gpu=1")] == (35, "C")
    assert got[("gpu_power", "gpu=1")] == (120, "W")
    assert len(got) == 10  # the process table adds nothing


def test_nvidia_smi_csv_with_and_without_header() -> None:
    got = {(g.metric, g.label): g.value for g in gpu_numbers(fixture("nvidia_smi_query.csv"))}
    assert got[("gpu_mem_used", "gpu=0")] == 91234 and got[("gpu_util", "gpu=1")] == 3
    cmd = "nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader,nounits"
    got = {(g.metric, g.label): g.value for g in gpu_numbers("0, 1000, 50\n1, 2000, 75\n", cmd)}
    assert got == {
        ("gpu_mem_used", "gpu=0"): 1000,
        ("gpu_util", "gpu=0"): 50,
        ("gpu_mem_used", "gpu=1"): 2000,
        ("gpu_util", "gpu=1"): 75,
    }


def test_a_line_of_another_command_is_no_gpu_row() -> None:
    """``pgrep … && echo alive; nvidia-smi --query-gpu=memory.used --format=csv,noheader``:
    without an index column GPUs are numbered by row, and "alive" is none of them."""
    cmd = "pgrep -f 'vllm serve' && echo alive; nvidia-smi --query-gpu=memory.used --format=csv,noheader"
    got = [(g.label, g.value) for g in gpu_numbers("alive\n71860 MiB\n[N/A]\n1024 MiB\n", cmd)]
    assert got == [("gpu=0", 71860), ("gpu=2", 1024)]  # GPU 1 reports no memory use


def test_extractor_end_to_end() -> None:
    ex = ToolingExtractor()
    launch = ex.extract(
        ctx(
            3,
            "ssh kpro5 'nohup python -m sglang.launch_server --model-path m "
            "--tp 2 > /root/s.log 2>&1 &'",
            "",
        )
    )
    assert [(x.engine, x.host, x.msg_idx) for x in launch.launches] == [("sglang", "kpro5", 3)]
    logs = ex.extract(ctx(4, "ssh kpro5 tail -50 /root/s.log", fixture("sglang_0.5.9_startup.log")))
    assert logs.launches == []
    assert {e.event for e in logs.server_events} >= {"weights_loaded", "server_ready", "health_ok"}
    assert all(
        e.session_id == SID and e.msg_idx == 4 and e.engine == "sglang" for e in logs.server_events
    )
    bench = ex.extract(
        ctx(
            5,
            "python -m sglang.bench_serving --max-concurrency 16",
            fixture("bench_serving_sglang_0.5.9.txt"),
        )
    )
    otp = [m for m in bench.measurements if m.metric == "output_token_throughput"]
    assert [(m.value, m.label, m.source) for m in otp] == [
        (1618.27, "concurrency=16,launch_msg_idx=3", "bench_serving")
    ]
    smi = ex.extract(
        ctx(6, "nvidia-smi", fixture("nvidia_smi_550.txt") + fixture("nvidia_smi_failed.txt"))
    )
    assert {m.source for m in smi.measurements} == {"nvidia_smi"}
    assert [e.event for e in smi.server_events] == ["nvml_failed", "nvml_failed"]


def test_message_prose_is_never_scanned() -> None:
    msg = Message(
        session_id=SID,
        msg_idx=0,
        source_id="0",
        role="user",
        text="[2026-01-10 09:00:35] The server is fired up and ready to roll! CUDA out of memory.",
    )
    facts = ToolingExtractor().extract(MessageContext(message=msg))
    assert facts.server_events == [] and facts.measurements == [] and facts.launches == []


# --------------------------------------------------------------------------- robustness

_ALPHABET = st.characters(blacklist_categories=("Cs",))
_PIECES = st.sampled_from(
    [
        "[2026-01-01 00:00:00 TP0] ",
        "Decode batch, ",
        "#running-req: ",
        "accept len: ",
        ", ",
        ": ",
        "Capture cuda graph ",
        "end. Time elapsed: ",
        "CUDA out of memory. Tried to allocate ",
        "============ Serving Benchmark Result ============\n",
        "Mean TTFT (ms):   ",
        "| NVIDIA-SMI ",
        "MiB / ",
        "%",
        "\n",
        "\r",
        "'",
        '"',
        "\\\n",
        "<<EOF\n",
        "EOF\n",
        "python -m sglang.launch_server ",
        "--tp",
        " 8 ",
        "vllm serve ",
        "ssh h ",
        "$(",
        ")",
        "&",
        ";",
        "|",
        "> f ",
        "index, memory.used [MiB]\n",
        "(APIServer pid=1) ",
        "INFO 01-01 00:00:00 [a.py:1] ",
        "Throughput: ",
        "Prefill. latency: ",
    ]
)
_TEXT = st.lists(st.one_of(_PIECES, st.text(_ALPHABET, max_size=20)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_no_recogniser_crashes_on_arbitrary_text(text: str) -> None:
    scan_log(text)
    scan_log(text, "vllm")
    find_failures(text)
    benchmark_numbers(text, text, 1)
    gpu_numbers(text, text)
    split_commands(text)
    parse_launches(text)
    ToolingExtractor().extract(ctx(0, text, text))


def test_ten_megabyte_single_line_completes() -> None:
    chunk = "Decode batch, #running-req: 1, CUDA out of memory. x" + "a(b)c 'd' \"e\" $(f) | " * 7
    line = (chunk * (10_000_000 // len(chunk) + 1))[:10_000_000]
    facts = ToolingExtractor().extract(ctx(0, "tail -c 10000000 log", line))
    assert [e.event for e in facts.server_events] == ["oom"]
    assert len(split_commands(line.replace("#", ""))) > 1000


def test_a_log_line_read_again_by_a_later_poll_is_one_measurement() -> None:
    line1 = ("[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, #token: 5123, "
             "token usage: 0.04, cuda graph: True, gen throughput (token/s): 25.31, #queue-req: 0, ")
    line2 = line1.replace("19:58:03", "19:58:43").replace("25.31", "26.02")
    ex = ToolingExtractor()
    first = ex.extract(ctx(1, "tail -n 5 /root/server.log", line1))
    again = ex.extract(ctx(2, "tail -n 5 /root/server.log", line1 + "\n" + line2))
    tput = [m.value for f in (first, again) for m in f.measurements
            if m.metric == "decode_gen_throughput"]
    assert tput == [25.31, 26.02]
