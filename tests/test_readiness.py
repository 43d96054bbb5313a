import duckdb
import pytest
from golden.case_studies import DSV4, QWEN, SMOKE_CMD, SessionBuilder, case_study_db

from analytics.analysis.readiness import generation_text, judge_check, subject_of
from analytics.analysis.session import analyse_session, load_session_frames
from analytics.store.migrations import migrate


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return case_study_db()


def _claims(con: duckdb.DuckDBPyConnection, sid: str) -> list:
    return analyse_session(load_session_frames(con, sid)).claims


def test_qwen_yes_its_up_is_premature_contradicted_by_degenerate_smoke(con) -> None:
    (claim,) = _claims(con, QWEN)
    frames = load_session_frames(con, QWEN)
    assert frames.source_id(claim.msg_idx) == "6853"
    assert claim.verdict == "premature"
    assert claim.subject == "server"
    assert frames.source_id(claim.contradicted_by_msg_idx) == "6853"
    assert "degenerate" in claim.reason and "fired up" in claim.reason
    assert claim.claim_text.startswith("Yes, it's up!")


def test_dsv4_claim_during_graph_capture_is_premature(con) -> None:
    (claim,) = _claims(con, DSV4)
    assert claim.verdict == "premature"
    assert "CUDA graph capture was still in progress" in claim.reason
    assert "health" in claim.reason
    assert claim.contradicted_by_msg_idx is None
    assert claim.evidence_msg_idx


def _server_session(with_smoke_output: str | None, liveness_only: bool = False) -> list:
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:s", "claude_code")
    i = b.msg("assistant", "Launching.", 0)
    c = b.call(i, "python -m sglang.launch_server --model-path m", "", 0)
    b.launch(i, c, tp_size=1)
    i = b.msg("assistant", "Tail.", 2)
    b.call(i, "tail log", "Uvicorn running on http://0.0.0.0:30000", 2)
    b.event(i, "uvicorn_running", "Uvicorn running on http://0.0.0.0:30000")
    if not liveness_only:
        b.event(i, "server_ready", "The server is fired up and ready to roll!")
    if with_smoke_output is not None:
        i = b.msg("assistant", "Smoke test.", 3)
        b.call(i, SMOKE_CMD, with_smoke_output, 3)
        b.tag(i, "smoke_test", "chat/completions")
    i = b.msg("assistant", "The server is ready.", 4)
    b.tag(i, "readiness_claim", "The server is ready.", 0)
    b.save("s", "m")
    return analyse_session(load_session_frames(con, "claude_code:s")).claims


SANE = '{"choices": [{"message": {"content": "2 + 2 = 4."}}]}'


def test_ready_line_and_sane_generation_support_the_claim() -> None:
    (claim,) = _server_session(SANE)
    assert claim.verdict == "supported"
    assert "sane generation" in claim.reason


def test_uvicorn_only_is_premature() -> None:
    (claim,) = _server_session(None, liveness_only=True)
    assert claim.verdict == "premature"
    assert "Uvicorn running on" in claim.reason


def test_ready_line_without_generation_is_unverified() -> None:
    (claim,) = _server_session(None)
    assert claim.verdict == "unverified"


def test_failing_smoke_before_claim_does_not_support_it() -> None:
    (claim,) = _server_session("curl: (7) Failed to connect to localhost port 30000")
    assert claim.verdict != "supported"


def test_judge_check_and_generation_text() -> None:
    assert generation_text(SANE) == "2 + 2 = 4."
    assert judge_check("pytest -q", "12 passed in 0.3s", "tests")[0] is True
    assert judge_check("pytest -q", "1 failed, 11 passed", "tests")[0] is False
    assert (
        judge_check("curl", "torch.OutOfMemoryError: CUDA out of memory", "smoke test")[0] is False
    )
    assert judge_check("curl", "", "smoke test")[0] is None


def test_subjects() -> None:
    assert subject_of("All 42 tests pass now.") == "test run"
    assert subject_of("Yes, it's up!") == "server"
    assert subject_of("Deployed to production.") == "deployment"
    assert subject_of("The parser bug is fixed.") == "feature"


def test_failure_events_are_ones_the_tooling_analyser_emits() -> None:
    """A server event named in readiness.json but never emitted would never count."""
    from analytics.analysis.readiness import config
    from analytics.analysis.tooling.failures import failure_signatures

    emitted = {s.event for s in failure_signatures()}
    assert config().events["failure"] <= emitted, config().events["failure"] - emitted
