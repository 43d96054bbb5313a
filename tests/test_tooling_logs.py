"""Log recognisers and failure signatures against real-format fixture lines per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.analysis.tooling import find_failures, parse_prefix, scan_log

FIXTURES = Path(__file__).parent / "fixtures" / "tooling"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def events(text: str, engine: str = "sglang") -> list[str]:
    return [e.event for e in scan_log(text, engine).events]


def numbers(text: str, engine: str = "sglang") -> dict[tuple[str, str | None], float]:
    return {(n.metric, n.label): n.value for n in scan_log(text, engine).numbers}


@pytest.mark.parametrize(
    "line, ts, ranks, message",
    [
        (
            "[2026-01-10 09:00:05 TP0] Load weight begin. avail mem=78.40 GB",
            "2026-01-10 09:00:05",
            {"TP": 0},
            "Load weight begin. avail mem=78.40 GB",
        ),
        (
            "[2026-03-01 12:00:00.123 DP1 PP0 ATTN_CP1 MOE_DP1 TP3 EP7] x",
            "2026-03-01 12:00:00.123",
            {"DP": 1, "PP": 0, "ATTN_CP": 1, "MOE_DP": 1, "TP": 3, "EP": 7},
            "x",
        ),
        (
            "[2026-01-10 09:00:35] The server is fired up and ready to roll!",
            "2026-01-10 09:00:35",
            {},
            "The server is fired up and ready to roll!",
        ),
    ],
)
def test_sglang_prefix(line: str, ts: str, ranks: dict[str, int], message: str) -> None:
    parsed = parse_prefix(line)
    assert (parsed.engine, parsed.log_ts, parsed.ranks, parsed.message) == (
        "sglang",
        ts,
        ranks,
        message,
    )


def test_vllm_prefix_with_process_and_ansi() -> None:
    parsed = parse_prefix(
        "\x1b[1;36m(EngineCore_DP0 pid=3010)\x1b[0;0m INFO 10-05 14:02:36 "
        "[default_loader.py:267] Loading weights took 4.21 seconds"
    )
    assert parsed.engine == "vllm" and parsed.process == "EngineCore_DP0"
    assert parsed.log_ts == "10-05 14:02:36"
    assert parsed.message == "Loading weights took 4.21 seconds"


def test_vllm_nested_worker_prefix_is_stripped() -> None:
    """A tensor-parallel worker's line carries the engine core's tag, then its own."""
    line = (
        "(EngineCore_DP0 pid=250) (Worker_TP1 pid=302) INFO 11-03 09:41:02 "
        "[default_loader.py:267] Loading weights took 40.33 seconds"
    )
    parsed = parse_prefix(line)
    assert (parsed.engine, parsed.process, parsed.log_ts, parsed.message) == (
        "vllm",
        "Worker_TP1",
        "11-03 09:41:02",
        "Loading weights took 40.33 seconds",
    )
    [event] = scan_log(line, "vllm").events
    assert (event.event, event.log_ts, event.detail) == (
        "weights_loaded",
        "11-03 09:41:02",
        "Loading weights took 40.33 seconds",
    )


def test_sglang_059_startup_milestones_in_order() -> None:
    got = events(fixture("sglang_0.5.9_startup.log"))
    expected = [
        "server_args",
        "dist_init_begin",
        "dist_init_end",
        "load_weight_begin",
        "loading_shards",
        "weights_loaded",
        "kv_cache_allocated",
        "memory_pool_end",
        "cuda_graph_begin",
        "cuda_graph_end",
        "piecewise_cuda_graph_begin",
        "piecewise_cuda_graph_end",
        "max_total_num_tokens",
        "uvicorn_running",
        "warmup_begin",
        "warmup_done",
        "server_ready",
        "health_ok",
    ]
    assert got == expected  # once each: TP ranks and the three uvicorn lines deduplicated


def test_a_model_list_answered_is_liveness() -> None:
    """uvicorn's access line for ``GET /v1/models`` answered 200 (what SGLang's own
    ``wait_for_server`` polls; it answers before warm-up ends) is ``models_ok``, which the
    readiness audit counts as liveness: in a session with server events the line was read
    as nothing, while without events the same line in a tool output counted as liveness."""
    from analytics.analysis.readiness import config

    line = 'INFO:     127.0.0.1:51234 - "GET /v1/models HTTP/1.1" 200 OK'
    assert events(line) == events(line, "vllm") == ["models_ok"]
    assert events(line.replace("200 OK", "503 Service Unavailable")) == []
    assert "models_ok" in config().events["liveness"]


def test_sglang_startup_numbers() -> None:
    got = numbers(fixture("sglang_0.5.9_startup.log"))
    assert got[("kv_cache_tokens", None)] == 812345
    assert got[("max_total_num_tokens", None)] == 812345
    assert got[("cuda_graph_capture_s", "graph=cuda_graph")] == 5.61
    assert got[("cuda_graph_capture_s", "graph=piecewise_cuda_graph")] == 11.02
    assert got[("decode_gen_throughput", "running_req=16")] == 1210.44
    assert got[("decode_cuda_graph", "running_req=16")] == 1.0


def test_sglang_052_decode_with_dot_and_spec_metrics() -> None:
    scan = scan_log(fixture("sglang_0.5.2_decode.log"))
    got = {(n.metric, n.label): (n.value, n.unit, n.source) for n in scan.numbers}
    assert got[("decode_gen_throughput", "running_req=1")] == (0.39, "tok/s", "decode_log")
    assert got[("accept_len", "running_req=1")][0] == 2.17
    assert got[("accept_rate", "running_req=4")][0] == 0.76
    assert got[("decode_cuda_graph", "running_req=4")][0] == 0.0
    assert got[("prefill_input_throughput", "running_req=0")][0] == 2048.5
    assert got[("prefill_cache_hit_rate", "running_req=0")][:2] == (20.0, "%")


def test_sglang_0523_capture_variants_and_ambiguous_option() -> None:
    got = events(fixture("sglang_0.5.23_startup.log"))
    assert got[:2] == ["weights_loaded", "kv_cache_allocated"]
    for name in (
        "cuda_graph_begin",
        "cuda_graph_end",
        "draft_cuda_graph_begin",
        "draft_cuda_graph_end",
        "verify_cuda_graph_begin",
        "draft_extend_cuda_graph_end",
    ):
        assert name in got
    assert "launch_arg_error" in got


def test_sglang_crash_chain() -> None:
    scan = scan_log(fixture("sglang_0.5.9_crash.log"))
    got = [(e.event, e.detail) for e in scan.events]
    kinds = [e for e, _ in got]
    for name in (
        "cuda_graph_begin",
        "cuda_graph_failed",
        "oom",
        "crash",
        "engine_start_failed",
        "not_enough_memory",
        "health_check_failed",
        "watchdog_timeout",
        "kv_cache_full",
    ):
        assert name in kinds, name
    assert ("oom", "2.00 GiB") in got and ("oom", "512.00 MiB") in got
    assert ("crash", "Rank 3") in got
    assert ("not_enough_memory", "mem_fraction_static=0.85") in got
    crash_ts = [e.log_ts for e in scan.events if e.event == "crash"]
    assert "2026-01-10 20:01:44" in crash_ts


def test_vllm_0110_startup_ready_and_metrics() -> None:
    text = fixture("vllm_0.11.0_startup.log")
    scan = scan_log(text, "unknown")
    got = [e.event for e in scan.events]
    assert (
        got.index("weights_loaded") < got.index("kv_cache_allocated") < got.index("cuda_graph_end")
    )
    assert "server_ready" in got and got.index("server_ready") > got.index("api_server_starting")
    assert all(e.engine == "vllm" for e in scan.events)
    nums = {(n.metric, n.label): n for n in scan.numbers}
    assert nums[("kv_cache_tokens", None)].value == 846576
    assert nums[("max_concurrency", "max_len=40960")].value == 20.67
    assert nums[("vllm_gen_throughput", "running_req=12")].value == 845.3
    assert nums[("kv_cache_usage", "running_req=12")].unit == "%"
    assert nums[("accept_len", None)].value == 2.61
    assert nums[("accept_rate", None)].value == pytest.approx(0.526)


def test_vllm_063_v0_weights_and_blocks_lines() -> None:
    """vLLM 0.6 (V0) logs ``Loading model weights took %.4f GB`` and ``# GPU blocks: %d, …``."""
    text = (
        "INFO 03-12 10:01:00 model_runner.py:1067] Loading model weights took 14.9888 GB\n"
        "INFO 03-12 10:01:10 gpu_executor.py:122] # GPU blocks: 27913, # CPU blocks: 2048\n"
    )
    scan = scan_log(text, "vllm")
    assert [(e.event, e.log_ts) for e in scan.events] == [
        ("weights_loaded", "03-12 10:01:00"),
        ("kv_cache_allocated", "03-12 10:01:10"),
    ]
    assert numbers(text, "vllm") == {("model_load_mem", None): 14.9888, ("kv_cache_blocks", None): 27913}


def test_vllm_085_v0_metrics_and_failures() -> None:
    scan = scan_log(fixture("vllm_0.8.5_failures.log"), "vllm")
    kinds = [e.event for e in scan.events]
    assert kinds.count("kv_cache_insufficient") == 2
    assert "not_enough_memory" in kinds and "engine_start_failed" in kinds and "crash" in kinds
    nums = {n.metric: n for n in scan.numbers}
    assert (
        nums["vllm_gen_throughput"].value == 37.9
        and nums["vllm_gen_throughput"].label == "running_req=1"
    )


def test_find_failures_offsets_point_at_match() -> None:
    text = "ok\nRuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0\nmore"
    hits = find_failures(text)
    assert hits == [("oom", "CUDA out of memory. Tried to allocate 1.50 GiB", 17, 63)]
    event, matched, start, end = hits[0]
    assert text[start:end] == matched


def test_find_failures_nvml() -> None:
    kinds = [h[0] for h in find_failures(fixture("nvidia_smi_failed.txt"))]
    assert kinds == ["nvml_failed", "nvml_failed"]


def test_prose_lookalikes_are_not_milestones() -> None:
    assert events("We expect to see 'ready to roll' soon; Load weight is next.") == []


def test_the_report_mask_knows_every_report_literal() -> None:
    """``report_mask``'s fast chain of ``in`` tests is written out by hand: a literal added to
    ``REPORT_LITERALS`` but not to the chain would make its parser skip every output."""
    from analytics.analysis.tooling.gates import REPORT_LITERALS, literals_of, report_mask

    for literal in REPORT_LITERALS:
        assert literals_of(report_mask(f"x {literal} y")) == {literal}, literal


def test_numbers_of_other_ranks_carry_the_rank() -> None:
    """Every tensor-parallel rank prints its own start-up figures: the first rank's stand for
    the server (labels as before), another rank's say which rank printed them, so four ranks
    are not four unlabelled copies of one measurement."""
    text = "\n".join(
        [
            "[2026-02-03 08:10:41 TP0] KV Cache is allocated. #tokens: 402112, K size: 6.14 GB, V size: 6.14 GB",
            "[2026-02-03 08:10:41 TP2] KV Cache is allocated. #tokens: 402112, K size: 6.14 GB, V size: 6.14 GB",
            "[2026-02-03 08:10:55 TP0] Capture cuda graph end. Time elapsed: 9.12 s. mem usage=0.41 GB. avail mem=5.02 GB.",
            "[2026-02-03 08:10:56 DP1 TP5] Capture cuda graph end. Time elapsed: 9.47 s. mem usage=0.41 GB. avail mem=5.01 GB.",
        ]
    )
    got = [(n.metric, n.label, n.value) for n in scan_log(text, "sglang").numbers]
    assert ("kv_cache_tokens", None, 402112) in got
    assert ("kv_cache_tokens", "tp=2", 402112) in got
    assert ("cuda_graph_capture_s", "graph=cuda_graph", 9.12) in got
    assert ("cuda_graph_capture_s", "graph=cuda_graph,dp=1,tp=5", 9.47) in got
    vllm = "\n".join(
        [
            "(Worker_TP0 pid=811) INFO 02-03 08:20:11 [gpu_model_runner.py:2653] Model loading took 7.1 GiB and 5.20 seconds",
            "(Worker_TP1 pid=812) INFO 02-03 08:20:11 [gpu_model_runner.py:2653] Model loading took 7.1 GiB and 5.31 seconds",
        ]
    )
    got = [(n.metric, n.label, n.value) for n in scan_log(vllm, "vllm").numbers]
    assert ("model_load_s", None, 5.20) in got and ("model_load_s", "tp=1", 5.31) in got
