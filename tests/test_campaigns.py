import duckdb
import pandas as pd
import pytest
from golden.case_studies import DSV4, SessionBuilder, build_dsv4

from analytics.analysis.campaigns import classify_delta, find_goals
from analytics.analysis.session import analyse_session, load_session_frames
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
    assert chunked.name == "chunked prefill" and chunked.outcome == "improved"
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
