"""What a postmortem tells of a deployment: the benchmark numbers of a session without a
campaign, what a relaunch changed and the diagnosis it acted on, and each server log line
once however often the agent read the log again."""

from pathlib import Path

import duckdb
from golden.case_studies import SessionBuilder

from analytics.analysis.timeaccounting import create_views
from analytics.report import write_report
from analytics.store.migrations import migrate

SID = "claude_code:vllm-deploy"


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _vllm_deploy() -> duckdb.DuckDBPyConnection:
    """A vLLM deployment: the first launch dies (KV cache too small for the context), the
    agent explains why, relaunches with a shorter context, greps the old log again, then
    benchmarks at two loads. No performance target: no campaign."""
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, SID, "claude_code")
    b.msg("user", "serve Llama-3.1-70B with vLLM on 8000 and tell me what it does", 0)
    i = b.msg("assistant", "Launching.", 1)
    b.launch(i, b.call(i, "vllm serve meta-llama/Llama-3.1-70B --max-model-len 131072", "", 1),
             max_model_len=131072, tensor_parallel_size=4)
    i = b.msg("assistant", "Watching the log.", 3)
    b.call(i, "tail -n 3 vllm.log", "Capturing CUDA graphs …", 3)
    b.event(i, "cuda_graph_begin", "Capturing CUDA graphs", log_ts="2025-05-01 18:03:10")
    i = b.msg("assistant", "It died.", 5)
    b.call(i, "tail -n 5 vllm.log", "ValueError: … KV cache …", 5)
    b.event(i, "crash", "EngineCore failed to start.", log_ts="2025-05-01 18:04:40")
    b.tag(i, "error", "ValueError")
    d1 = b.msg("assistant", "Maybe the driver is too old for this build.", 6)
    b.tag(d1, "diagnosis", "too old")
    b.msg("assistant", "Checked: the driver is fine.", 6.5)
    said = ("Not the driver. So the cause is the context: 131072 tokens need more KV cache "
            "than the 18 GiB left per GPU. Halving it is not enough; 32768.")
    d2 = b.msg("assistant", said, 7)
    b.tag(d2, "diagnosis", "the cause is", start_char=said.index("the cause is"))
    i = b.msg("assistant", "Re-reading the old log for the graph line.", 7.5)
    b.call(i, "grep -n 'CUDA graph' vllm.log", "Capturing CUDA graphs …", 7.5)
    b.event(i, "cuda_graph_begin", "Capturing CUDA graphs", log_ts="2025-05-01 18:03:10")
    i = b.msg("assistant", "Relaunching with a 32k context.", 8)
    b.launch(i, b.call(i, "vllm serve meta-llama/Llama-3.1-70B --max-model-len 32768", "", 8),
             max_model_len=32768)
    i = b.msg("assistant", "Watching the log.", 10)
    b.call(i, "tail -n 3 vllm.log", "Capturing CUDA graphs …", 10)
    b.event(i, "cuda_graph_begin", "Capturing CUDA graphs", log_ts="2025-05-01 18:10:55")
    b.event(i, "uvicorn_running", "Uvicorn running on http://0.0.0.0:8000")
    for n, (conc, out, ttft) in enumerate([(8, 812.4, 95.1), (64, 2310.7, 388.0)]):
        i = b.msg("assistant", f"Benchmark at {conc}.", 12 + n)
        b.call(i, f"vllm bench serve --max-concurrency {conc}", "…", 12 + n)
        if n == 0:  # (a line without a time: no telling it from a new one)
            b.event(i, "uvicorn_running", "Uvicorn running on http://0.0.0.0:8000")
        label = f"concurrency={conc},launch_msg_idx=8"
        b.measure(i, "successful_requests", 200.0, label, "requests")
        b.measure(i, "output_token_throughput", out, label, "tok/s")
        b.measure(i, "ttft_median", ttft, label, "ms")
    i = b.msg("assistant", "Same launch, one more idea without a failure before it.", 15)
    d3 = b.msg("assistant", "The cause of the slow TTFT is the long prompts.", 15.5)
    b.tag(d3, "diagnosis", "The cause of")
    b.launch(i, b.call(i, "vllm serve meta-llama/Llama-3.1-70B --max-model-len 32768 "
                          "--enable-chunked-prefill", "", 16), enable_chunked_prefill=True)
    b.save("vLLM deploy", "claude-opus-4-5")
    create_views(con)
    return con


def test_a_session_without_a_campaign_tells_its_benchmark_numbers(tmp_path: Path) -> None:
    """A deployment benchmarked "to know what it does" sets no target, so no campaign
    names its numbers: the report lists every run with its load and main numbers, and
    the timeline names each run by its output throughput."""
    text = write_report(_vllm_deploy(), SID, tmp_path / "r.md").read_text()
    bench = _section(text, "Benchmarks")
    assert "2 benchmark runs" in bench
    assert "| load | requests | output tok/s | TTFT median ms |" in bench
    assert "| concurrency=8 | 200 | 812.4 | 95.1 |" in bench
    assert "| concurrency=64 | 200 | 2,310.7 | 388 |" in bench
    assert "launch_msg_idx" not in bench and "TTFT p99" not in bench
    timeline = _section(text, "Timeline")
    assert "benchmark @ concurrency=8: output_token_throughput = 812.4" in timeline
    assert "benchmark @ concurrency=64: output_token_throughput = 2310.7" in timeline


def test_a_relaunch_names_its_changed_values_and_the_diagnosis_it_acted_on(
    tmp_path: Path,
) -> None:
    """The timeline says what a relaunch changed, from what to what, and, after a launch
    that failed, the last diagnosis before the relaunch (the one it acted on, not an
    earlier guess), from the start of its sentence; a relaunch after no failure acts on no
    diagnosis."""
    timeline = _section(write_report(_vllm_deploy(), SID, tmp_path / "r.md").read_text(),
                        "Timeline")
    assert "launch (sglang): --max-model-len 131072→32768" in timeline
    assert "launch (sglang): --enable-chunked-prefill unset→True" in timeline
    # (quoted from the start of the sentence holding the tagged words)
    assert "diagnosis “So the cause is the context: 131072 tokens need more KV cache" in timeline
    assert "driver is too old" not in timeline and "slow TTFT" not in timeline
    assert timeline.count("diagnosis “") == 1


def test_a_log_line_read_again_is_no_new_server_event(tmp_path: Path) -> None:
    """A ``grep`` of the old log after the crash shows the first launch's graph capture
    line again (same time, same words): the timeline keeps it where it was first seen,
    and does not tell of a capture beginning after the crash. The second launch's own
    capture, at another time, is an event; lines without a time of their own are kept."""
    timeline = _section(write_report(_vllm_deploy(), SID, tmp_path / "r.md").read_text(),
                        "Timeline")
    rows = [line for line in timeline.splitlines() if "server: " in line]
    assert [row.split(" | ")[0] + " " + row.split(" | ")[-1] for row in rows] == [
        "| msg_0002 server: cuda_graph_begin |",
        "| msg_0003 server: crash |",
        "| msg_0009 server: cuda_graph_begin |",
        "| msg_0009 server: uvicorn_running |",
        "| msg_0010 server: uvicorn_running |",
    ]
