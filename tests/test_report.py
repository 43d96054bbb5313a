import hashlib
import os
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from golden.case_studies import DSV4, QWEN, T0, SessionBuilder, case_study_db

from analytics.analysis.timeaccounting import create_views
from analytics.report import write_report
from analytics.report.postmortem import GENERATED_PREFIX, one_line

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _body(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith(GENERATED_PREFIX)) + "\n"


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.png"))
    }


@pytest.mark.parametrize("sid,name", [(DSV4, "dsv4_campaign"), (QWEN, "qwen_ready")])
def test_report_matches_golden(tmp_path: Path, sid: str, name: str) -> None:
    out = write_report(case_study_db(), sid, tmp_path / f"{name}.md")
    golden = GOLDEN / f"{name}.md"
    if UPDATE:
        golden.write_text(_body(out), encoding="utf-8")
    assert _body(out) == golden.read_text(encoding="utf-8")


def test_report_is_deterministic_apart_from_generated_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_report(case_study_db(), DSV4, a / "r.md")
    write_report(case_study_db(), DSV4, b / "r.md")
    assert _body(a / "r.md") == _body(b / "r.md")
    assert _digests(a) == _digests(b) and _digests(a)
    text = (a / "r.md").read_text()
    assert sum(line.startswith(GENERATED_PREFIX) for line in text.splitlines()) == 1
    png = (a / "r-campaign1.png").read_bytes()
    assert b"Software" not in png and b"matplotlib" not in png


def test_report_tells_the_case_study_stories(tmp_path: Path) -> None:
    dsv4 = write_report(case_study_db(), DSV4, tmp_path / "d.md").read_text()
    assert "| 1 | FP8 block-GEMM autotuning | **improved** | 25 | 26.5 | +6.0% |" in dsv4
    assert "MTP speculative decoding" in dsv4 and "OOM" in dsv4
    assert "msg 12479" in dsv4 and "“ok?”" in dsv4
    assert "![output_token_throughput over the session](d-campaign1.png)" in dsv4
    qwen = write_report(case_study_db(), QWEN, tmp_path / "q.md").read_text()
    assert "### msg 6853" in qwen and "**premature**" in qwen
    assert "Contradicted by msg 6853" in qwen and "degenerate output" in qwen


def test_report_prefers_stored_analysis(tmp_path: Path) -> None:
    con = case_study_db()
    con.execute(
        "INSERT INTO readiness_claims VALUES (?, 5, 'stored claim', 'server', 'supported', "
        "'stored reason', '[3]', NULL)",
        [QWEN],
    )
    text = write_report(con, QWEN, tmp_path / "q.md").read_text()
    assert "stored reason" in text and "**supported**" in text


def test_time_accounting_excludes_idle_gaps() -> None:
    con = duckdb.connect(":memory:")
    from analytics.store.migrations import migrate

    migrate(con)
    b = SessionBuilder(con, "claude_code:overnight", "claude_code")
    b.msg("user", "start the server", 0)
    i = b.msg("assistant", "Starting.", 2)
    b.call(i, "bash serve.sh", "ok", 2, duration_s=60)
    i = b.msg("assistant", "Waiting.", 10)
    b.tag(i, "user_abort", "User aborted the command")
    b.msg("assistant", "Stopped the wait.", 12)
    c = b.msg("user", "ok?", 20)
    b.tag(c, "user_checkin", "ok?")
    b.msg("assistant", "Up.", 21)
    b.msg("user", "good morning, continue", 20 * 60)  # next day
    b.msg("assistant", "Continuing.", 20 * 60 + 5)
    b.save("overnight", "m")
    create_views(con)
    create_views(con)  # idempotent
    row = (
        con.execute("SELECT * FROM v_time_accounting WHERE session_id = 'claude_code:overnight'")
        .df()
        .iloc[0]
    )
    assert row["idle_gaps"] == 1
    assert row["idle_s"] == pytest.approx((20 * 60 - 21) * 60)
    assert row["agent_working_s"] == pytest.approx((2 + 8 + 2 + 1 + 5) * 60)
    assert row["waiting_for_user_s"] == pytest.approx((8) * 60)
    assert row["tool_s"] == pytest.approx(60)
    assert row["lost_after_aborts_s"] == pytest.approx(2 * 60)
    assert row["checkin_latency_max_s"] == pytest.approx(8 * 60)
    summary = (
        con.execute("SELECT * FROM v_session_summary WHERE session_id = 'claude_code:overnight'")
        .df()
        .iloc[0]
    )
    assert (summary["messages"], summary["aborts"], summary["checkins"]) == (8, 1, 1)
    assert summary["tool_calls"] == 1 and summary["campaigns"] == 0


def test_time_accounting_counts_a_call_kept_in_its_own_message_as_work() -> None:
    """opencode keeps a tool call and its result in one message stamped when the call
    began: the minutes the call ran after it are the agent's, not the user's, and a
    check-in or the time lost after an abort counts from when the call ended."""
    con = duckdb.connect(":memory:")
    from analytics.store.migrations import migrate

    migrate(con)
    b = SessionBuilder(con, "opencode:ses_long", "opencode")
    b.msg("user", "benchmark it", 0)
    i = b.msg("assistant", "", 1)
    b.call(i, "vllm bench serve --model m", "...", 1, duration_s=10 * 60)
    c = b.msg("user", "well?", 15)
    b.tag(c, "user_checkin", "well?")
    i = b.msg("assistant", "", 16)
    b.call(i, "until grep -q ready log; do sleep 20; done", "", 16, 5 * 60, "aborted")
    b.tag(i, "user_abort", "MessageAbortedError")
    b.msg("user", "stop that, it is up", 22)
    b.msg("assistant", "Right.", 22.5)
    b.save("ses_long", "m")
    create_views(con)
    row = con.execute(
        "SELECT * FROM v_time_accounting WHERE session_id = 'opencode:ses_long'"
    ).df().iloc[0]
    assert row["wall_clock_s"] == pytest.approx(22.5 * 60)
    assert row["tool_s"] == pytest.approx(15 * 60)
    assert row["agent_working_s"] == pytest.approx((1 + 10 + 1 + 5 + 0.5) * 60)
    assert row["waiting_for_user_s"] == pytest.approx((4 + 1) * 60)
    assert row["checkin_latency_max_s"] == pytest.approx(4 * 60)
    assert row["lost_after_aborts_s"] == pytest.approx(1.5 * 60)


def test_session_summary_counts_a_call_that_exited_non_zero_as_failed() -> None:
    """opencode keeps a shell call that exited 1 ``completed``; Claude Code and Codex say
    ``error``: a failed call is either, so formats compare."""
    con = duckdb.connect(":memory:")
    from analytics.store.migrations import migrate

    migrate(con)
    b = SessionBuilder(con, "opencode:calls", "opencode")
    i = b.msg("assistant", "Checking.", 0)
    b.call(i, "grep -q ready /tmp/s.log", "", 0, exit_code=1)
    b.call(i, "false", "", 0, status="error", exit_code=None)
    b.call(i, "true", "", 0)
    b.save("calls", "m")
    create_views(con)
    row = con.execute(
        "SELECT tool_calls, failed_tool_calls FROM v_session_summary "
        "WHERE session_id = 'opencode:calls'"
    ).fetchone()
    assert row == (3, 2)


SAMPLES = Path(__file__).parent.parent / "analytics" / "samples"
SAMPLE_FILES = ["opencode_deepseek_v4_campaign.json", "qwen36_kpro5_deploy.txt"]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ingest = pytest.importorskip("analytics.ingest").ingest
    paths = [SAMPLES / name for name in SAMPLE_FILES]
    if not all(p.exists() for p in paths):
        pytest.skip("project samples not present")
    db = tmp_path_factory.mktemp("samples") / "s.duckdb"
    ingest([str(p) for p in paths], db=str(db))
    return db


def _sample_session(con: duckdb.DuckDBPyConnection, fmt: str) -> str:
    (sid,) = con.execute(
        "SELECT session_id FROM sessions WHERE source_format = ? ORDER BY session_id", [fmt]
    ).fetchone()
    return str(sid)


def test_samples_tell_the_case_study_stories(sample_db: Path) -> None:
    from analytics.analysis.session import analyse_session, load_session_frames

    con = duckdb.connect(str(sample_db), read_only=True)
    dsv4 = analyse_session(load_session_frames(con, _sample_session(con, "opencode")))
    assert [(lv.name, lv.outcome) for lv in dsv4.levers] == [
        ("FP8 block-GEMM autotuning", "improved"),
        ("NCCL tuning", "no_effect"),
        ("CUDA graphs", "not_applicable"),
        ("tilelang fusion", "failed"),
        ("MoE backend", "failed"),
        ("expert parallelism", "worse"),
        ("MTP speculative decoding", "improved"),
        # the draft-depth variants after it (the last one sets MTP's depth back: no lever)
        ("--speculative-num-draft-tokens 3→4, --speculative-num-steps 2→3", "no_effect"),
        ("--speculative-num-draft-tokens 4→2, --speculative-num-steps 3→1", "worse"),
    ]
    assert dsv4.levers[0].delta_pct == pytest.approx(6.0, abs=0.5)
    qwen_sid = _sample_session(con, "transcript_text")
    frames = load_session_frames(con, qwen_sid)
    claims = {frames.source_id(c.msg_idx): c for c in analyse_session(frames).claims}
    claim = claims["6853"]
    assert claim.verdict == "premature"
    assert claim.contradicted_by_msg_idx is not None and "degenerate" in claim.reason


@pytest.mark.parametrize(
    "fmt,name", [("opencode", "sample_dsv4"), ("transcript_text", "sample_qwen")]
)
def test_sample_reports_match_golden(sample_db: Path, tmp_path: Path, fmt: str, name: str) -> None:
    con = duckdb.connect(str(sample_db), read_only=True)
    out = write_report(con, _sample_session(con, fmt), tmp_path / f"{name}.md")
    golden = GOLDEN / f"{name}.md"
    if UPDATE:
        golden.write_text(_body(out), encoding="utf-8")
    assert _body(out) == golden.read_text(encoding="utf-8")


def test_report_without_timestamps_claims_no_durations(tmp_path: Path) -> None:
    con = case_study_db()
    con.execute("UPDATE messages SET ts = NULL WHERE session_id = ?", [QWEN])
    text = write_report(con, QWEN, tmp_path / "q.md").read_text()
    accounting = text.split("## Time accounting", 1)[1]
    assert "No timestamps." in accounting and "wall clock" not in accounting


def test_timeline_labels_measurements_by_their_load_conditions(tmp_path: Path) -> None:
    """Which launch a benchmark ran against is in the measurement's label, not a condition
    a reader compares runs by: the timeline leaves it out."""
    db = tmp_path / "codex.duckdb"
    pytest.importorskip("analytics.ingest").ingest([str(SAMPLES / "codex_sglang_tuning")], db=str(db))
    con = duckdb.connect(str(db), read_only=True)
    sid = _sample_session(con, "codex")
    (labelled,) = con.execute(
        "SELECT count(*) FROM measurements m JOIN campaigns c USING (session_id) "
        "WHERE session_id = ? AND m.metric = c.target_metric AND m.label LIKE '%launch_msg_idx=%'",
        [sid],
    ).fetchone()
    assert labelled > 0
    text = write_report(con, sid, tmp_path / "codex.md").read_text(encoding="utf-8")
    measured = [line for line in text.splitlines() if "measured ttft_mean @ " in line]
    assert measured and not any("launch_msg_idx" in line for line in measured)
    assert "launch_msg_idx" not in text


def _interrupted_session() -> duckdb.DuckDBPyConnection:
    """One user interruption that Claude Code writes as two marker records (the rejected
    tool result, then "[Request interrupted by user for tool use]"), a later second one,
    and a last message without a time."""
    con = duckdb.connect(":memory:")
    from analytics.store.migrations import migrate

    migrate(con)
    b = SessionBuilder(con, "claude_code:interrupted", "claude_code")
    b.msg("user", "benchmark it", 0)
    i = b.msg("assistant", "Running the sweep.", 1)
    b.rejected_call(i, "vllm bench serve --max-concurrency 64", 1, at=2.5)
    b.msg("user", "use concurrency 16", 3)
    b.msg("assistant", "Rerunning at 16.", 4)
    b.msg("system", "compacted", 5)
    u = b.msg("user", "[Request interrupted by user]", 6)
    b.tag(u, "user_abort", "[Request interrupted by user]")
    b.msg("assistant", "Stopped.", 7)
    b.save("interrupted", "m")
    con.execute("UPDATE messages SET ts = NULL WHERE msg_idx = 8")
    create_views(con)
    return con


def test_an_interruption_written_as_several_records_counts_once(tmp_path: Path) -> None:
    """Consecutive abort markers are one interruption: two here, not three, in the
    report, in the time lost after them and in v_session_summary."""
    con = _interrupted_session()
    text = write_report(con, "claude_code:interrupted", tmp_path / "r.md").read_text()
    assert "- 2 user aborts, 0 check-ins" in text
    polling = text.split("## Polling and aborts", 1)[1].split("## Time accounting")[0]
    assert "2 user aborts;" in polling
    assert sum(line.startswith("| msg_") for line in polling.splitlines()) == 2
    timeline = text.split("## Timeline", 1)[1].split("## Campaigns")[0]
    assert timeline.count("user abort") == 2
    # from the first marker (2.5 min) to the agent's next message (4 min); the second
    # interruption has no later timed message
    assert "| lost after aborts | 1m 30s |" in text
    (aborts,) = con.execute(
        "SELECT aborts FROM v_session_summary WHERE session_id = 'claude_code:interrupted'"
    ).fetchone()
    assert aborts == 2


def test_report_header_and_summary_read_true(tmp_path: Path) -> None:
    """The period runs to the last message with a time; the roles add up to the
    message count (system messages too); a session without key events says so."""
    con = _interrupted_session()
    text = write_report(con, "claude_code:interrupted", tmp_path / "r.md").read_text()
    start = T0.strftime("%Y-%m-%d %H:%M:%S")
    end = (T0 + timedelta(minutes=6)).strftime("%Y-%m-%d %H:%M:%S")
    assert f"- From {start} to {end}" in text
    assert "- 9 messages (4 user, 3 assistant, 1 tool, 1 system), 1 tool calls." in text
    con.execute("DELETE FROM tags")
    text = write_report(con, "claude_code:interrupted", tmp_path / "q.md").read_text()
    timeline = text.split("## Timeline", 1)[1].split("## Campaigns")[0]
    assert "No key events." in timeline and "| message |" not in timeline


@pytest.mark.parametrize(
    ("command", "line"),
    [
        ("for i in $(seq 1 16); do\n  sleep 25\n  r=$(tail -1 s.log)\n"
         "  echo \"$r\" | grep -q ready && break\ndone",
         "for i in $(seq 1 16); do sleep 25; r=$(tail -1 s.log); "
         "echo \"$r\" | grep -q ready && break; done"),
        ("python -m sglang.launch_server \\\n  --tp 4 \\\n  --port 30000",
         "python -m sglang.launch_server --tp 4 --port 30000"),
        ("if curl -sf localhost:8000/health; then\n  echo up\nelse\n  tail -3 s.log\nfi",
         "if curl -sf localhost:8000/health; then echo up; else tail -3 s.log; fi"),
        ("nvidia-smi |\n  grep MiB", "nvidia-smi | grep MiB"),
        ("ls my\\ dir", "ls my\\ dir"),
    ],
)
def test_a_multi_line_command_is_shown_as_one_line_that_reads_the_same(
    command: str, line: str
) -> None:
    """The abort table names the command it stopped on one line: a line break that ends a
    command reads as ``;`` there (``do sleep 25 r=…`` would read as one command)."""
    assert one_line(command) == line


def test_chart_lines_are_loads_and_the_goals_load_is_named() -> None:
    """The report's chart draws a line per load, not per launch (``launch_msg_idx`` names
    the run), and names the load the goal asks for, so that a run at another load above
    the target line does not read as the target met."""
    import pandas as pd

    from analytics.models import Campaign
    from analytics.report.charts import chart_series

    campaign = Campaign(
        campaign_id="s#c1", session_id="s", goal_text="reach 3000 tok/s at c32",
        target_metric="output_token_throughput", target_value=3000.0, unit="tok/s",
    )
    rows = pd.DataFrame({
        "msg_idx": [4, 9, 12, 15],
        "value": [2100.0, 3300.0, 2500.0, 2900.0],
        "label": ["concurrency=32,launch_msg_idx=2", "concurrency=256,launch_msg_idx=2",
                  "concurrency=32,launch_msg_idx=10", "concurrency=32,launch_msg_idx=14"],
    })
    lines = {load: list(part["msg_idx"]) for load, part in chart_series(campaign, rows)}
    assert lines == {"concurrency=256": [9], "concurrency=32 (the goal's load)": [4, 12, 15]}
