from collections.abc import Callable

import duckdb
import pandas as pd
import pytest
from golden.case_studies import BENCH, DSV4, SessionBuilder, build_dsv4

from analytics.analysis.campaigns import (
    classify_delta,
    comparable_label,
    find_campaigns,
    find_goals,
)
from analytics.analysis.session import SessionFrames, analyse_session, load_session_frames
from analytics.store.migrations import migrate


@pytest.fixture(scope="module")
def dsv4() -> tuple[list, list]:
    con = duckdb.connect(":memory:")
    migrate(con)
    build_dsv4(con)
    result = analyse_session(load_session_frames(con, DSV4))
    return result.campaigns, result.levers


def test_levers_in_case_study_order(dsv4: tuple[list, list]) -> None:
    _, levers = dsv4
    assert [(lv.name, lv.outcome) for lv in levers] == [
        ("FP8 block-GEMM autotuning", "improved"),
        ("NCCL tuning", "no_effect"),
        ("CUDA graphs", "not_applicable"),
        ("tilelang fusion", "failed"),
        ("MoE backend", "failed"),
        ("expert parallelism", "worse"),
        ("MTP speculative decoding", "improved"),
    ]
    assert [lv.seq for lv in levers] == list(range(1, 8))


def test_fp8_autotuning_gain_is_about_six_percent(dsv4: tuple[list, list]) -> None:
    fp8 = dsv4[1][0]
    assert fp8.value_before == 25.0 and fp8.value_after == 26.5
    assert fp8.delta_pct == pytest.approx(6.0)
    assert fp8.metric == "output_token_throughput"


def test_mtp_oom_then_relaunch_is_one_lever(dsv4: tuple[list, list]) -> None:
    mtp = dsv4[1][-1]
    assert "OOM" in mtp.description
    assert "--mem-fraction-static 0.7→0.6" in mtp.description
    # compared with the last kept configuration (FP8 autotuned; NCCL had no effect and
    # EP was worse), not with the EP run
    assert mtp.value_before == 26.5 and mtp.value_after == 38.0


def test_campaign_goal_baseline_and_status(dsv4: tuple[list, list]) -> None:
    (campaign,) = dsv4[0]
    assert campaign.target_value == 1000
    assert campaign.unit == "tok/s"
    assert campaign.target_metric == "output_token_throughput"
    assert campaign.baseline_value == 25.0
    assert campaign.best_value == 38.0
    assert campaign.status == "not_met"


def _goals(*texts: str) -> list:
    msgs = pd.DataFrame([{"msg_idx": i, "role": "user", "text": t} for i, t in enumerate(texts)])
    return find_goals(msgs)


def test_goal_phrasings() -> None:
    (g,) = _goals("The target is ~1000 tok/s on this box.")
    assert (g.family, g.value, g.unit) == ("throughput", 1000.0, "tok/s")
    (g,) = _goals("We want 2x throughput over the baseline.")
    assert (g.family, g.factor) == ("throughput", 2.0)
    (g,) = _goals("Keep TTFT under 200 ms please.")
    assert (g.family, g.value, g.unit) == ("ttft", 200.0, "ms")
    (g,) = _goals("It must answer in under 50 ms TTFT.")
    assert (g.family, g.value) == ("ttft", 50.0)
    (g,) = _goals("Goal: 1.5k tok/s.")
    assert g.value == 1500.0
    (g,) = _goals("Serve it with SGLang and get >= 2500 tok/s output throughput.")
    assert (g.family, g.value) == ("throughput", 2500.0)
    (g,) = _goals("Decode throughput ≥ 1800 tok/s is the bar.")
    assert (g.family, g.value) == ("throughput", 1800.0)


def test_measurements_are_not_goals() -> None:
    assert (
        _goals("Throughput is 25 tok/s at concurrency 16.", "We have 8x RTX PRO 6000 GPUs.") == []
    )


def test_classification_thresholds_and_lower_is_better() -> None:
    assert classify_delta(3.0, False) == "improved"
    assert classify_delta(2.9, False) == "no_effect"
    assert classify_delta(-3.0, False) == "worse"
    assert classify_delta(-10.0, True) == "improved"  # latency went down
    assert classify_delta(10.0, True) == "worse"


def _latency_session(con: duckdb.DuckDBPyConnection) -> str:
    b = SessionBuilder(con, "claude_code:ttft", "claude_code")
    b.msg("user", "Get TTFT under 200 ms at concurrency 8.", 0)
    i = b.msg("assistant", "Baseline.", 1)
    c = b.call(i, "bash serve.sh", "ok", 1)
    b.launch(i, c, tp_size=2)
    b.measure(i, "mean_ttft_ms", 420.0, "concurrency=8", "ms")
    i = b.msg("assistant", "Let me try chunked prefill with a smaller chunk.", 2)
    c = b.call(i, "bash serve.sh --chunked-prefill-size 2048", "ok", 2)
    b.launch(i, c, chunked_prefill_size=2048)
    i = b.msg("assistant", "Measured.", 3)
    b.measure(i, "mean_ttft_ms", 180.0, "concurrency=8", "ms")
    b.measure(i, "mean_ttft_ms", 900.0, "concurrency=64", "ms")  # other conditions
    i = b.msg("assistant", "Next: enable torch compile.", 4)
    b.save("ttft", "m")
    return b.sid


def test_lower_is_better_campaign_and_pending_lever() -> None:
    con = duckdb.connect(":memory:")
    migrate(con)
    sid = _latency_session(con)
    result = analyse_session(load_session_frames(con, sid))
    (campaign,) = result.campaigns
    assert campaign.target_metric == "mean_ttft_ms" and campaign.target_value == 200.0
    assert campaign.status == "met"
    chunked, compile_ = result.levers
    # a tuning lever is named by the launch change that put it in force
    assert chunked.name == "--chunked-prefill-size unset→2048"
    assert chunked.outcome == "improved" and chunked.description.startswith("chunked prefill")
    assert chunked.value_before == 420.0 and chunked.value_after == 180.0  # same label only
    assert chunked.delta_pct == pytest.approx(-57.14, abs=0.01)
    assert compile_.name == "torch.compile" and compile_.outcome == "pending"


def test_no_goal_no_campaign() -> None:
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "codex:x", "codex")
    b.msg("user", "Fix the failing unit test in parser.py", 0)
    b.msg("assistant", "Let me try enabling CUDA graphs.", 1)
    b.save("x", "m")
    assert analyse_session(load_session_frames(con, "codex:x")).campaigns == []


# --------------------------------------------------------------------------- synthetic frames
# A parameter sweep told only by structure: launches whose changed_flags differ and
# benchmark rows whose labels name the launch they measured (``launch_msg_idx=K``).

_SWEEP_FLAGS = {"--chunked-prefill-size": 8192, "--max-running-requests": 128, "--tp-size": 2}


class _Sweep:
    """Builds the frames of a tuning session without a database."""

    def __init__(self, goal: str) -> None:
        self.messages: list[dict] = []
        self.launches: list[dict] = []
        self.measurements: list[dict] = []
        self.flags: dict = {}
        self.msg("user", goal)

    def msg(self, role: str, text: str = "") -> int:
        idx = len(self.messages)
        self.messages.append(
            {
                "session_id": "synthetic:sweep",
                "msg_idx": idx,
                "source_id": f"L{idx}",
                "role": role,
                "text": text,
            }
        )
        return idx

    def launch(self, **flags: object) -> int:
        idx = self.msg("assistant")
        given = {
            k if k.startswith("--") or ":" in k else "--" + k.replace("_", "-"): v
            for k, v in flags.items()
        }
        new = {**self.flags, **given}
        changed = {k: [self.flags.get(k), v] for k, v in new.items() if self.flags.get(k) != v}
        self.launches.append(
            {
                "msg_idx": idx,
                "engine": "sglang",
                "flags": new,
                "changed_flags": changed if self.flags else None,
            }
        )
        self.flags = new
        return idx

    def bench(self, launch: int, ttft: float, rate: int = 8) -> int:
        idx = self.msg("tool")
        label = f"concurrency=64,request_rate={rate},launch_msg_idx={launch}"
        for metric, value in (("ttft_mean", ttft), ("ttft_p99", ttft * 2)):
            self.measurements.append(
                {
                    "msg_idx": idx,
                    "metric": metric,
                    "value": value,
                    "unit": "ms",
                    "label": label,
                    "source": "bench_serving",
                }
            )
        return idx

    def frames(self) -> SessionFrames:
        return SessionFrames(
            session=pd.DataFrame([{"session_id": "synthetic:sweep"}]),
            messages=pd.DataFrame(self.messages),
            launches=pd.DataFrame(self.launches),
            measurements=pd.DataFrame(self.measurements),
        )


def _sweep(final: float = 95.0) -> SessionFrames:
    s = _Sweep("Mean TTFT under 100 ms at 8 req/s, please tune the scheduler flags.")
    s.msg("assistant", "Baseline first, then let me sweep chunked prefill down.")
    s.bench(s.launch(**_SWEEP_FLAGS), 200.0)
    s.bench(s.launch(chunked_prefill_size=4096), 150.0)  # improved
    s.bench(s.launch(max_running_requests=64), 148.0, rate=16)  # other load: not comparable
    s.msg("assistant", "Next point: chunked-prefill-size 4096, max-running-requests 64.")
    s.bench(len(s.messages) - 3, 149.0)  # the same launch measured at the campaign's load
    s.bench(s.launch(chunked_prefill_size=2048), 180.0)  # worse: not kept
    s.bench(s.launch(chunked_prefill_size=4096, max_running_requests=48), final)
    return s.frames()


def test_comparable_label_ignores_the_launch_key() -> None:
    assert comparable_label("concurrency=64,request_rate=8,launch_msg_idx=7") == (
        "concurrency=64,request_rate=8"
    )
    assert comparable_label("launch_msg_idx=7") is None
    assert comparable_label(None) is None
    assert comparable_label("concurrency=16") == "concurrency=16"


def test_sweep_levers_are_launch_diffs_against_the_kept_configuration() -> None:
    (campaign,), levers = find_campaigns(_sweep())
    rows = [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers]
    assert rows == [
        ("--chunked-prefill-size 8192→4096", 200.0, 150.0, "improved"),
        ("--max-running-requests 128→64", 150.0, 149.0, "no_effect"),
        ("--chunked-prefill-size 4096→2048", 150.0, 180.0, "worse"),
        ("--chunked-prefill-size 2048→4096, --max-running-requests 64→48", 150.0, 95.0, "improved"),
    ]
    assert [lv.seq for lv in levers] == [1, 2, 3, 4]
    assert levers[0].delta_pct == pytest.approx(-25.0)  # lower is better: a fall improves
    assert levers[0].metric == "ttft_mean"
    assert "reverts --chunked-prefill-size back to 4096" in str(levers[-1].description)


def test_lower_is_better_sweep_campaign_baseline_best_and_status_met() -> None:
    (campaign,), _ = find_campaigns(_sweep())
    assert campaign.target_metric == "ttft_mean" and campaign.target_value == 100.0
    assert campaign.baseline_value == 200.0  # the first launch, before any flag changed
    assert campaign.best_value == 95.0
    assert campaign.status == "met"
    assert campaign.end_msg_idx == int(_sweep().measurements["msg_idx"].max())


def test_lower_is_better_sweep_not_met_above_target() -> None:
    (campaign,), levers = find_campaigns(_sweep(final=120.0))
    assert campaign.best_value == 120.0 and campaign.status == "not_met"
    assert levers[-1].outcome == "improved"


def test_announced_tuning_lever_measures_nothing_before_its_launch() -> None:
    s = _Sweep("Get mean TTFT under 100 ms.")
    s.msg("assistant", "Let me try a smaller chunked prefill size.")
    s.bench(s.launch(**_SWEEP_FLAGS), 200.0)  # the announcement is not in force yet
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert campaign.baseline_value == 200.0
    assert lever.outcome == "pending" and lever.value_after is None


def test_deployment_without_a_target_has_no_campaign() -> None:
    s = _Sweep("Deploy Qwen3-32B with vLLM, tensor parallel 2, then benchmark it.")
    s.bench(s.launch(**_SWEEP_FLAGS), 212.0)
    s.msg("assistant", "TTFT stays under 400 ms up to c32 and jumps to ~900 ms at c64.")
    s.bench(s.launch(max_running_requests=32), 640.0)
    assert find_campaigns(s.frames()) == ([], [])


def test_digit_sql_selects_what_the_python_digit_test_finds() -> None:
    """The DuckDB spelling of the goal prefilter (substring tests, RE2 for non-ASCII
    text) keeps exactly the texts with a decimal digit, in either path of select."""
    from analytics.analysis.campaigns import _DIGIT, DIGIT_SQL

    texts = ["no digits", "8 GPUs", "naïve café", "٣ tokens", "ｇｐｕ３", "x\u0966", ""]
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:digits", "claude_code")
    for n, text in enumerate(texts):
        b.msg("user", text, n)
    b.save("digits", "m")
    want = [n for n, t in enumerate(texts) if _DIGIT.search(t)]
    assert want == [1, 3, 4, 5]
    bound = load_session_frames(con, "claude_code:digits")
    matching = {"text": (DIGIT_SQL, _DIGIT)}
    from_sql = bound.select("messages", ["msg_idx"], matching=matching)
    assert from_sql["msg_idx"].tolist() == want
    assert len(bound.messages) == len(texts)  # read: select now filters the frame in Python
    in_memory = bound.select("messages", ["msg_idx"], matching=matching)
    assert in_memory["msg_idx"].tolist() == want


def test_goals_stated_with_a_factor_word() -> None:
    (g,) = _goals("Can you double the throughput?")
    assert (g.family, g.factor, g.value) == ("throughput", 2.0, None)
    (g,) = _goals("We want to triple our decode throughput.")
    assert g.factor == 3.0
    assert _goals("That was double trouble: two OOMs in a row.") == []


def test_number_filter_sql_keeps_factor_words_like_python() -> None:
    from analytics.analysis.campaigns import number_filter

    texts = ["Double the throughput", "can you double it", "no number here", "8 GPUs", ""]
    sql, pattern = number_filter()
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE t(n INTEGER, text VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(texts)))
    rows = con.execute(f"SELECT n, {sql.format(column='text')} FROM t ORDER BY n").fetchall()
    got = [bool(kept) for _, kept in rows]
    assert got == [bool(pattern.search(t)) for t in texts] == [True, True, False, True, False]


def test_a_doubling_goal_targets_twice_the_baseline() -> None:
    s = _Sweep("Can you double the throughput of this server?")

    def bench(launch: int, value: float) -> None:
        s.measurements.append(
            {"msg_idx": s.msg("tool"), "metric": "output_token_throughput", "value": value,
             "unit": "tok/s", "label": f"concurrency=64,launch_msg_idx={launch}",
             "source": "bench_serving"}
        )

    bench(s.launch(**_SWEEP_FLAGS), 800.0)
    bench(s.launch(tp_size=4), 1700.0)
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert campaign.baseline_value == 800.0 and campaign.target_value == 1600.0
    assert campaign.status == "met" and lever.value_after == 1700.0


def test_a_p99_goal_is_measured_on_the_p99_row() -> None:
    (g,) = _goals("We need p99 TTFT under 800 ms at 8 req/s.")
    assert g.percentile == "p99"
    (g,) = _goals("It needs mean TTFT under 200 ms (p99 under 400) on this server.")
    assert (g.value, g.percentile) == (200.0, None)
    s = _Sweep("We need p99 TTFT under 300 ms at 8 req/s.")
    s.bench(s.launch(**_SWEEP_FLAGS), 200.0)  # p99 = 400
    s.bench(s.launch(chunked_prefill_size=4096), 140.0)  # p99 = 280
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert campaign.target_metric == "ttft_p99"
    assert (campaign.baseline_value, campaign.best_value, campaign.status) == (400.0, 280.0, "met")
    assert (lever.value_before, lever.value_after) == (400.0, 280.0)


def test_a_p50_or_median_goal_is_measured_on_the_median_row() -> None:
    """vLLM's and SGLang's benchmarks print the p50 as "Median TTFT (ms)": a p50 target is
    judged on that row, not on the mean printed beside it."""
    (g,) = _goals("Get p50 TTFT under 200 ms at 12 req/s.")
    assert g.percentile == "p50"
    (g,) = _goals("We need median TTFT under 200 ms.")
    assert g.percentile == "p50"
    s = _Sweep("What matters is latency: get p50 TTFT under 200 ms at 12 req/s.")

    def bench(launch: int, median: float) -> None:
        at = s.bench(launch, median * 1.07)  # the mean, above the target both times
        s.measurements.append(
            {"msg_idx": at, "metric": "ttft_median", "value": median, "unit": "ms",
             "label": f"concurrency=64,request_rate=8,launch_msg_idx={launch}",
             "source": "bench_serving"}
        )

    bench(s.launch(**_SWEEP_FLAGS), 412.0)
    bench(s.launch(chunked_prefill_size=4096), 176.0)
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert campaign.target_metric == "ttft_median"
    assert (campaign.baseline_value, campaign.best_value, campaign.status) == (412.0, 176.0, "met")
    assert (lever.value_before, lever.value_after, lever.outcome) == (412.0, 176.0, "improved")


def test_numbers_in_the_message_that_announces_and_launches_a_lever_are_its_own() -> None:
    """Plain-text transcripts keep a message's tool calls and outputs in it: "Let me
    enable DP attention" + the launch + the Decode batch lines are one message."""
    s = _Sweep("We need decode above 1500 tok/s with 64 requests running.")

    def decode(idx: int, value: float) -> None:
        s.measurements.append(
            {"msg_idx": idx, "metric": "decode_gen_throughput", "value": value,
             "unit": "tok/s", "label": "running_req=64", "source": "decode_log"}
        )

    decode(s.launch(**_SWEEP_FLAGS), 1020.0)
    dp = s.launch(enable_dp_attention=True, dp_size=8)
    s.messages[dp]["text"] = "Let me enable DP attention with --dp 8."
    decode(dp, 1240.0)
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert campaign.baseline_value == 1020.0
    assert (lever.name, lever.value_before, lever.value_after) == ("DP attention", 1020.0, 1240.0)
    assert lever.outcome == "improved" and lever.evidence_msg_idx == dp


def test_a_goal_with_words_between_get_and_above() -> None:
    (g,) = _goals("Please get output throughput above 2000 tok/s at concurrency 64.")
    assert (g.family, g.value) == ("throughput", 2000.0)
    (g,) = _goals("Get the decode throughput to 1.2k tok/s.")
    assert g.value == 1200.0


def test_a_reported_measurement_beside_the_target_is_not_the_target() -> None:
    """A sentence reporting a result against the target holds two numbers: the target is
    the one the cue names, not the first one."""
    (g,) = _goals("Output throughput is 2105.7 tok/s, above the 2000 tok/s target.")
    assert g.value == 2000.0
    (g,) = _goals("We hit 1650 tok/s, short of our goal of 2000 tok/s.")
    assert g.value == 2000.0
    (g,) = _goals("The target is 1500 tok/s; we are at 900 tok/s now.")
    assert g.value == 1500.0


# --------------------------------------------------------------------------- before a baseline


def _deploy_then_tune(con: duckdb.DuckDBPyConnection) -> str:
    """Goal, a first launch that OOMs, the assistant blaming its mem-fraction-static, a
    relaunch with a smaller one, the first benchmark, then one flag change and its
    benchmark: getting the server up is the baseline's configuration, not a lever."""
    b = SessionBuilder(con, "claude_code:deploy-tune", "claude_code")
    b.msg("user", "Deploy it with sglang and get output throughput above 2000 tok/s at c64.", 0)
    i = b.msg("assistant", "", 1)
    c = b.call(i, "python -m sglang.launch_server --mem-fraction-static 0.85", "", 1)
    b.launch(i, c, model_path="Qwen/Qwen3-8B", mem_fraction_static=0.85)
    i = b.msg("tool", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 6)
    b.event(i, "oom", "2.00 GiB")
    b.tag(i, "error", "OutOfMemoryError")
    b.msg(
        "assistant",
        "The server ran out of memory: mem-fraction-static 0.85 leaves too little for "
        "activations. Relaunching with 0.80.",
        7,
    )

    def launch_and_bench(at: int, flag: str, value: float, bench_at: int, **flags: object) -> None:
        launch = b.msg("assistant", "", at)
        b.launch(launch, b.call(launch, f"python -m sglang.launch_server {flag}", "", at), **flags)
        i = b.msg("tool", BENCH.format(value=value), bench_at)
        label = f"concurrency=64,launch_msg_idx={launch}"
        b.measure(i, "output_token_throughput", value, label, "tok/s")

    launch_and_bench(8, "--mem-fraction-static 0.80", 1650.2, 15, mem_fraction_static=0.80)
    b.msg("assistant", "Baseline 1650 tok/s at c64. Trying --cuda-graph-max-bs 64 next.", 16)
    launch_and_bench(17, "--cuda-graph-max-bs 64", 2105.7, 30, cuda_graph_max_bs=64)
    b.save("deploy and tune", "m")
    return b.sid


def test_getting_the_server_up_is_the_baseline_not_a_lever() -> None:
    con = duckdb.connect(":memory:")
    migrate(con)
    result = analyse_session(load_session_frames(con, _deploy_then_tune(con)))
    (campaign,) = result.campaigns
    assert (campaign.target_value, campaign.baseline_value) == (2000.0, 1650.2)
    (lever,) = result.levers
    assert (lever.name, lever.value_before, lever.value_after) == ("CUDA graphs", 1650.2, 2105.7)
    assert lever.delta_pct == pytest.approx(27.6, abs=0.05) and lever.outcome == "improved"


def test_a_tuning_change_before_anything_was_measured_is_not_a_sweep_step() -> None:
    """Flags changed before the first benchmark set up the configuration the baseline
    measures: the first lever is the first change after a measurement."""
    s = _Sweep("Get mean TTFT under 100 ms.")
    s.launch(**_SWEEP_FLAGS)
    s.bench(s.launch(max_running_requests=64), 200.0)  # no number of 128 to compare
    s.bench(s.launch(chunked_prefill_size=4096), 150.0)
    (campaign,), levers = find_campaigns(s.frames())
    assert campaign.baseline_value == 200.0
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--chunked-prefill-size 8192→4096", 200.0, 150.0, "improved"),
    ]


def test_the_lever_after_one_with_nothing_before_compares_with_its_number() -> None:
    """A technique switched on before the first benchmark has nothing to compare with,
    but its number is the configuration the next lever changes."""
    s = _Sweep("Get mean TTFT under 100 ms.")
    s.launch(**_SWEEP_FLAGS)
    s.bench(s.launch(enable_torch_compile=True), 150.0)
    s.bench(s.launch(cuda_graph_max_bs=64), 120.0)
    _, levers = find_campaigns(s.frames())
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("torch.compile", None, 150.0, "pending"),
        ("CUDA graphs", 150.0, 120.0, "improved"),
    ]


def _throughput_sweep(goal: str) -> tuple[_Sweep, Callable[[int, float], int]]:
    """A tuning session on output throughput at concurrency 64, and its bench step."""
    s, bench_at = _concurrency_sweep(goal)

    def bench(launch: int, value: float) -> int:
        return bench_at(launch, 64, value)

    return s, bench


def _with_oom(s: _Sweep, at: int) -> SessionFrames:
    frames = s.frames()
    return SessionFrames(
        session=frames.session, messages=frames.messages, launches=frames.launches,
        measurements=frames.measurements,
        server_events=pd.DataFrame([{"msg_idx": at, "event": "oom"}]),
    )


def test_a_launch_that_only_restores_earlier_settings_is_no_lever() -> None:
    """Expert parallelism made things worse; the next launch sets every flag it changed
    back: that undoes the lever, it is no new one ("parallel layout" 8→2)."""
    s, bench = _throughput_sweep("We need 3000 tok/s output throughput at 64 concurrent requests.")
    bench(s.launch(**_SWEEP_FLAGS), 1850.0)
    bench(s.launch(ep_size=8, tp_size=8), 1200.0)
    bench(s.launch(ep_size=None, tp_size=2), 1849.0)
    bench(s.launch(chunked_prefill_size=4096), 2400.0)
    _, levers = find_campaigns(s.frames())
    assert [(lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        (1850.0, 1200.0, "worse"), (1850.0, 2400.0, "improved"),
    ]
    assert "ep-size" not in levers[1].name and "tp-size" not in levers[1].name


def test_a_launch_without_the_failed_lever_is_the_next_lever() -> None:
    """Speculative decoding crashed the server; the next launch drops it and adds another
    flag: the crash is the technique's, the next number is the new flag's."""
    s, bench = _throughput_sweep("We need 3000 tok/s output throughput at 64 concurrent requests.")
    bench(s.launch(**_SWEEP_FLAGS), 1850.0)
    bench(s.launch(chunked_prefill_size=4096), 2400.0)
    s.launch(speculative_algorithm="EAGLE3")
    oom = s.msg("tool")
    bench(s.launch(speculative_algorithm=None, async_scheduling=True), 2611.0)
    _, levers = find_campaigns(_with_oom(s, oom))
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--chunked-prefill-size 8192→4096", 1850.0, 2400.0, "improved"),
        ("MTP speculative decoding", None, None, "failed"),
        ("--async-scheduling unset→True", 2400.0, 2611.0, "improved"),
    ]


def test_a_swept_setting_set_back_after_its_failure_ends_it() -> None:
    """--mem-fraction-static 0.97 fails to start; the next launch is back at 0.85 and
    changes the layout: not a retry of 0.97."""
    s, bench = _throughput_sweep("We need 3000 tok/s output throughput at 64 concurrent requests.")
    bench(s.launch(**_SWEEP_FLAGS, mem_fraction_static=0.85), 1850.0)
    bench(s.launch(chunked_prefill_size=4096), 2400.0)
    s.launch(mem_fraction_static=0.97)
    oom = s.msg("tool")
    bench(s.launch(mem_fraction_static=0.85, max_running_requests=256), 2650.0)
    _, levers = find_campaigns(_with_oom(s, oom))
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--chunked-prefill-size 8192→4096", 1850.0, 2400.0, "improved"),
        ("--mem-fraction-static 0.85→0.97", None, None, "failed"),
        ("--max-running-requests 128→256", 2400.0, 2650.0, "improved"),
    ]


def test_a_lever_named_while_the_launched_one_awaits_its_number_does_not_take_it() -> None:
    """While the server of a new setting starts, the assistant says what the start-up does
    next ("torch.compile and CUDA graph capture come next"): the number measured then is
    the launched setting's."""
    s, bench = _throughput_sweep("We need 3000 tok/s output throughput at 64 concurrent requests.")
    bench(s.launch(**_SWEEP_FLAGS), 1850.0)
    launch = s.launch(chunked_prefill_size=4096)
    s.msg("assistant", "Still starting: torch.compile and CUDA graph capture come next.")
    bench(launch, 2400.0)
    bench(s.launch(tp_size=4), 2160.0)
    _, levers = find_campaigns(s.frames())
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--chunked-prefill-size 8192→4096", 1850.0, 2400.0, "improved"),
        ("parallel layout (TP/DP/PP)", 2400.0, 2160.0, "worse"),
    ]


def test_vllm_parallel_sizes_are_the_parallel_layout_lever() -> None:
    """vLLM spells the sizes out (--tensor-parallel-size, --data-parallel-size): moving
    from TP8 to DP4 x TP2 is the same technique as SGLang's --tp-size/--dp-size."""
    s = _Sweep("Get p50 TTFT under 200 ms at 8 req/s.")
    s.bench(s.launch(tensor_parallel_size=8, max_num_batched_tokens=8192), 288.0)
    s.bench(s.launch(tensor_parallel_size=2, data_parallel_size=4), 176.0)
    _, (lever,) = find_campaigns(s.frames())
    assert (lever.name, lever.value_before, lever.value_after) == (
        "parallel layout (TP/DP/PP)", 288.0, 176.0,
    )


def test_a_unit_started_with_the_measured_flags_is_no_lever() -> None:
    """After the tuning, the agent installs the best flags as a systemd unit and starts it:
    the launch differs from the last one only in how it was started."""
    s = _Sweep("Get mean TTFT under 100 ms.")
    s.bench(s.launch(**_SWEEP_FLAGS), 200.0)
    s.bench(s.launch(chunked_prefill_size=4096), 90.0)
    s.launch(**{"systemd:unit": "sglang-qwen.service"})
    s.msg("assistant", "Done: the service is installed and enabled.")
    (campaign,), levers = find_campaigns(s.frames())
    assert [(lv.name, lv.outcome) for lv in levers] == [
        ("--chunked-prefill-size 8192→4096", "improved"),
    ]
    assert campaign.status == "met"


def test_a_flag_removed_again_is_noted_as_a_revert() -> None:
    """Prefix caching did nothing; the next launch drops it and sets another flag: the
    lever's description says the removal is a revert, as it does for a value set back."""
    s = _Sweep("Get mean TTFT under 100 ms.")
    s.bench(s.launch(**_SWEEP_FLAGS), 200.0)
    s.bench(s.launch(enable_prefix_caching=True), 198.0)
    s.bench(s.launch(enable_prefix_caching=None, chunked_prefill_size=2048), 150.0)
    _, levers = find_campaigns(s.frames())
    assert [lv.outcome for lv in levers] == ["no_effect", "improved"]
    assert "reverts --enable-prefix-caching back to unset" in str(levers[1].description)


def test_a_plan_naming_vllms_batched_tokens_budget_is_a_list_not_a_start() -> None:
    """A plan naming FP8 KV cache, a larger --max-num-batched-tokens and EAGLE3 before the
    baseline lists what is to come (vLLM's prefill budget is the chunked-prefill lever); it
    does not start the first of them."""
    s, bench = _throughput_sweep("We need 3000 tok/s output throughput at 64 concurrent requests.")
    s.msg("assistant", "Plan: baseline first, then one lever at a time: FP8 KV cache, a larger "
          "--max-num-batched-tokens, EAGLE3 speculative decoding.")
    bench(s.launch(tensor_parallel_size=8), 1850.0)
    kv = s.launch(kv_cache_dtype="fp8")
    bench(kv, 2012.0)
    _, (lever,) = find_campaigns(s.frames())
    assert (lever.name, lever.start_msg_idx, lever.outcome) == ("KV cache dtype", kv, "improved")


def test_retuning_a_measured_technique_is_a_sweep_step_each() -> None:
    """EAGLE3 is switched on and measured; the next launches change only its parameters
    (more steps, a wider draft tree): each is a lever of its own, compared with the kept
    configuration, not swallowed by the technique's lever."""
    s, bench = _throughput_sweep("Target 220 tok/s output throughput at 64 concurrent requests.")
    bench(s.launch(**_SWEEP_FLAGS), 142.0)
    bench(s.launch(speculative_algorithm="EAGLE3", speculative_num_steps=3,
                   speculative_num_draft_tokens=4), 198.0)
    bench(s.launch(speculative_num_steps=5, speculative_num_draft_tokens=6), 215.0)
    bench(s.launch(speculative_eagle_topk=4, speculative_num_draft_tokens=16), 187.0)
    _, levers = find_campaigns(s.frames())
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("MTP speculative decoding", 142.0, 198.0, "improved"),
        ("--speculative-num-draft-tokens 4→6, --speculative-num-steps 3→5", 198.0, 215.0,
         "improved"),
        ("--speculative-eagle-topk unset→4, --speculative-num-draft-tokens 6→16", 215.0, 187.0,
         "worse"),
    ]


def test_an_error_before_an_announced_lever_is_launched_is_not_its_failure() -> None:
    """The user asks for EAGLE3; before the baseline is even launched a package check
    fails. The technique is not in force yet: the error is not its failure, and its
    launch after the baseline is measured against it."""
    s, bench = _throughput_sweep(
        "Target 220 tok/s output throughput at 64 concurrent requests. Try EAGLE3 speculative "
        "decoding."
    )
    error = s.msg("assistant")
    bench(s.launch(**_SWEEP_FLAGS), 142.0)
    bench(s.launch(speculative_algorithm="EAGLE3"), 198.0)
    frames = s.frames()
    frames = SessionFrames(
        session=frames.session, messages=frames.messages, launches=frames.launches,
        measurements=frames.measurements,
        tags=pd.DataFrame([{"msg_idx": error, "tag": "error",
                            "evidence": "ERROR: ResolutionImpossible"}]),
    )
    (campaign,), levers = find_campaigns(frames)
    assert campaign.baseline_value == 142.0
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("MTP speculative decoding", 142.0, 198.0, "improved"),
    ]


def test_a_diagnosis_naming_a_startup_step_is_not_a_lever() -> None:
    """A larger prefill budget runs out of memory; the assistant explains where ("out of
    memory during torch.compile warm-up") and relaunches it with a lower memory share: the
    step it names is where the failure happened, not a lever, and the number is the
    budget's."""
    s, bench = _throughput_sweep("We need 1800 tok/s output throughput at 64 concurrent users.")
    bench(s.launch(tensor_parallel_size=2, max_num_batched_tokens=8192,
                   gpu_memory_utilization=0.9), 1210.0)
    s.launch(max_num_batched_tokens=32768)
    oom = s.msg("tool")
    s.msg("assistant", "It ran out of memory during the torch.compile warm-up at 32768 tokens; "
          "lowering --gpu-memory-utilization to 0.86 for the activations.")
    bench(s.launch(gpu_memory_utilization=0.86), 1395.0)
    _, levers = find_campaigns(_with_oom(s, oom))
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--max-num-batched-tokens 8192→32768", 1210.0, 1395.0, "improved"),
    ]
    assert "torch.compile warm-up" in str(levers[0].description)


def test_a_swept_setting_tried_again_at_another_value_is_a_step_of_its_own() -> None:
    """--max-num-seqs 512 crashes the server; the next launch tries 384: the crash is
    512's, and the number measured is 384's (a new step compared with the kept setting),
    not 512's."""
    s, bench = _throughput_sweep("We need 1800 tok/s output throughput at 64 concurrent users.")
    bench(s.launch(tensor_parallel_size=2, max_num_seqs=128), 1210.0)
    s.launch(max_num_seqs=512)
    oom = s.msg("tool")
    bench(s.launch(max_num_seqs=384), 1302.0)
    _, levers = find_campaigns(_with_oom(s, oom))
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("--max-num-seqs 128→512", None, None, "failed"),
        ("--max-num-seqs 512→384", 1210.0, 1302.0, "improved"),
    ]


def _concurrency_sweep(goal: str) -> tuple[_Sweep, Callable[[int, int, float], int]]:
    """A tuning session on output throughput benchmarked at several concurrencies."""
    s = _Sweep(goal)

    def bench(launch: int, concurrency: int, value: float) -> int:
        idx = s.msg("tool")
        s.measurements.append(
            {"msg_idx": idx, "metric": "output_token_throughput", "value": value,
             "unit": "tok/s", "label": f"concurrency={concurrency},launch_msg_idx={launch}",
             "source": "bench_serving"}
        )
        return idx

    return s, bench


@pytest.mark.parametrize(
    "goal",
    [
        "Get output throughput above 1500 tok/s at concurrency 32.",
        "We need 1500 tok/s output throughput with 32 concurrent requests.",
        "Target: 1500 tok/s at --max-concurrency 32.",
        "Goal: 1500 tok/s output at c32; the c96 numbers are only for capacity planning.",
    ],
)
def test_the_concurrency_a_goal_names_is_the_campaigns_load(goal: str) -> None:
    """The agent benchmarks every configuration at concurrency 96 twice and once at the
    goal's 32: the campaign is judged at 32, however many other runs there are (a run at
    96 passes 1500 tok/s; the goal's load does not)."""
    s, bench = _concurrency_sweep(goal)
    base = s.launch(tensor_parallel_size=4, max_num_seqs=64)
    bench(base, 32, 910.0), bench(base, 96, 1390.0), bench(base, 96, 1402.0)
    step = s.launch(max_num_seqs=256)
    bench(step, 32, 1180.0), bench(step, 96, 1655.0), bench(step, 96, 1671.0)
    (campaign,), (lever,) = find_campaigns(s.frames())
    assert (campaign.baseline_value, campaign.best_value, campaign.status) == (
        910.0, 1180.0, "not_met",
    )
    assert (lever.value_before, lever.value_after) == (910.0, 1180.0)


def test_an_fp8_kv_cache_and_quantized_weights_are_levers_of_their_own() -> None:
    """The KV cache in FP8 changes nothing; quantizing the weights to FP8 then gains 30%:
    the first lever is not "quantization", so the postmortem does not say quantization
    had no effect."""
    s, bench = _throughput_sweep("We need 2600 tok/s output throughput at 64 concurrent users.")
    bench(s.launch(tensor_parallel_size=2, max_num_seqs=256), 1900.0)
    bench(s.launch(kv_cache_dtype="fp8_e5m2"), 1911.0)
    bench(s.launch(quantization="fp8"), 2480.0)
    _, levers = find_campaigns(s.frames())
    assert [(lv.name, lv.value_before, lv.value_after, lv.outcome) for lv in levers] == [
        ("KV cache dtype", 1900.0, 1911.0, "no_effect"),
        ("quantization", 1900.0, 2480.0, "improved"),
    ]
