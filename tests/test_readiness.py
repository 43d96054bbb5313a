import json
from pathlib import Path

import duckdb
import pytest
from _codex_rollouts import exec_header, ingest_rollout
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


def _server_session(
    with_smoke_output: str | None, liveness_only: bool = False, background_bench: bool = False
) -> list:
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
    if background_bench:
        i = b.msg("assistant", "Benchmark in the background.", 3)
        b.call(i, "nohup python3 -m sglang.bench_serving --port 30000 > b.log 2>&1 &", "", 3)
        b.tag(i, "launch", "python3 -m sglang.bench_serving")
        b.tag(i, "benchmark", "sglang.bench_serving")
    i = b.msg("assistant", "The server is ready.", 4)
    b.tag(i, "readiness_claim", "The server is ready.", 0)
    b.save("s", "m")
    return analyse_session(load_session_frames(con, "claude_code:s")).claims


SANE = '{"choices": [{"message": {"content": "2 + 2 = 4."}}]}'


def test_ready_line_and_sane_generation_support_the_claim() -> None:
    (claim,) = _server_session(SANE)
    assert claim.verdict == "supported"
    assert "sane generation" in claim.reason


def test_sane_generation_without_a_ready_line_read_supports_the_claim() -> None:
    """The log was tailed before the ready line (liveness only), then a chat completion
    answered sanely: the server serves."""
    (claim,) = _server_session(SANE, liveness_only=True)
    assert claim.verdict == "supported", claim.reason
    assert "sane generation: '2 + 2 = 4.'" in claim.reason


def test_a_benchmark_started_in_the_background_does_not_restart_the_window() -> None:
    """A benchmark sent to the background is tagged a launch (a job) as well: the server's
    ready line and smoke test before it still count for a claim after it."""
    (claim,) = _server_session(SANE, background_bench=True)
    assert claim.verdict == "supported", claim.reason
    assert "server_ready" in claim.reason and "sane generation" in claim.reason


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


def test_a_smoke_test_without_output_supports_nothing() -> None:
    # A NULL output (a call whose result never came) is no output, not the text "nan"
    # (pandas' null in a column that holds other outputs), which reads as a sane generation.
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:s", "claude_code")
    i = b.msg("assistant", "Tail.", 2)
    b.call(i, "tail log", "Uvicorn running on http://0.0.0.0:30000", 2)
    b.event(i, "server_ready", "The server is fired up and ready to roll!")
    i = b.msg("assistant", "Benchmark.", 3)
    b.call(i, "python -m sglang.bench_serving --num-prompts 8", "Starting...", 3)
    b.tag(i, "benchmark", "bench_serving")
    i = b.msg("assistant", "Smoke test.", 4)
    b.call(i, SMOKE_CMD, None, 4)  # type: ignore[arg-type]
    b.tag(i, "smoke_test", "chat/completions")
    i = b.msg("assistant", "The server is ready.", 5)
    b.tag(i, "readiness_claim", "The server is ready.", 0)
    b.save("s", "m")
    (claim,) = analyse_session(load_session_frames(con, "claude_code:s")).claims
    assert claim.verdict == "unverified", claim.reason
    assert "nan" not in claim.reason


SOURCE_TEXT = """   40→    try:
   41→        return render(msg)
   42→    except KeyError:
   43→        log.warning("Traceback (most recent call last) hidden")
   44→        return {"error": "unknown message type"}"""


def _feature_session(reader: str, then: list[tuple[str, str]]) -> list:
    """A claim with no server in sight, then ``then``'s calls (command, output) by the tool
    ``reader`` (no command for a file tool)."""
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:f", "claude_code")
    i = b.msg("assistant", "The renderer works now.", 1)
    b.tag(i, "readiness_claim", "The renderer works now.", 0)
    for n, (command, output) in enumerate(then):
        i = b.msg("assistant", "Next.", 2 + n)
        b.call(i, command, output, 2 + n, tool=reader if not command else "bash")
    b.save("f", "m")
    return analyse_session(load_session_frames(con, "claude_code:f")).claims


def test_a_file_read_is_no_failure_however_its_text_reads() -> None:
    """A Read of source code that handles errors prints ``"error":`` and ``Traceback``: the
    file's text, not a program failing. The same text printed by a command is a failure."""
    (read,) = _feature_session("Read", [("", SOURCE_TEXT)])
    assert read.verdict == "unverified", read.reason
    (ran,) = _feature_session("Read", [("python render.py", SOURCE_TEXT)])
    assert ran.verdict == "premature", ran.reason


def test_a_test_run_claim_is_contradicted_by_a_test_run_only() -> None:
    """ "All tests pass" stays true when another command fails after it; a failing test run
    after it disproves it."""
    passed = "===== 12 passed in 0.40s ====="
    crash = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'id'"
    for later, verdict in (
        ([("python -c 'import app; app.main()'", crash)], "supported"),
        ([("pytest -q tests/test_render.py", "FAILED tests/test_render.py::test_x\n1 failed")],
         "premature"),
    ):
        con = duckdb.connect(":memory:")
        migrate(con)
        b = SessionBuilder(con, "claude_code:t", "claude_code")
        i = b.msg("assistant", "Running the tests.", 1)
        b.call(i, "pytest -q", passed, 1)
        i = b.msg("assistant", "All tests pass.", 2)
        b.tag(i, "readiness_claim", "All tests pass.", 0)
        for n, (command, output) in enumerate(later):
            i = b.msg("assistant", "Next.", 3 + n)
            b.call(i, command, output, 3 + n, exit_code=1)
        b.save("t", "m")
        (claim,) = analyse_session(load_session_frames(con, "claude_code:t")).claims
        assert claim.subject == "test run"
        assert claim.verdict == verdict, claim.reason


@pytest.mark.parametrize("reboot", ["sudo reboot", "ssh gpu7 'sudo systemctl reboot'"])
def test_a_reboot_starts_a_server_claims_evidence_afresh(reboot: str) -> None:
    """A smoke test before the machine rebooted says nothing of the server after it, as a
    smoke test before a relaunch says nothing of the relaunched server."""
    verdicts = []
    for command in (reboot, "uptime"):
        con = duckdb.connect(":memory:")
        migrate(con)
        b = SessionBuilder(con, "claude_code:r", "claude_code")
        i = b.msg("assistant", "Smoke test.", 1)
        b.call(i, SMOKE_CMD, SANE, 1)
        b.tag(i, "smoke_test", "chat/completions")
        i = b.msg("assistant", "Restarting the box.", 2)
        b.call(i, command, "", 2)
        i = b.msg("assistant", "The server is up again after the reboot.", 8)
        b.tag(i, "readiness_claim", "The server is up again", 0)
        b.save("r", "m")
        (claim,) = analyse_session(load_session_frames(con, "claude_code:r")).claims
        verdicts.append(claim.verdict)
    assert verdicts == ["unverified", "supported"]


def test_judge_check_and_generation_text() -> None:
    assert generation_text(SANE) == "2 + 2 = 4."
    assert judge_check("pytest -q", "12 passed in 0.3s", "tests")[0] is True
    assert judge_check("pytest -q", "1 failed, 11 passed", "tests")[0] is False
    assert (
        judge_check("curl", "torch.OutOfMemoryError: CUDA out of memory", "smoke test")[0] is False
    )
    assert judge_check("curl", "", "smoke test")[0] is None


def test_a_codex_exec_header_is_not_the_answer_of_a_smoke_test() -> None:
    """Codex puts "Chunk ID: … Wall time: … Output:" before a command's output: a curl that
    printed nothing is no sane generation, and the answer after the header is read."""
    header = (
        "Chunk ID: 9f1c2a\nWall time: 0.2100 seconds\nProcess exited with code 0\n"
        "Original token count: 0\nOutput:\n"
    )
    assert judge_check("curl -s localhost:30000/v1/chat/completions", header, "smoke test") == (
        None, "no output"
    )
    passed, why = judge_check("curl …", header + SANE, "smoke test")
    assert passed is True and "2 + 2 = 4." in why


def test_subjects() -> None:
    assert subject_of("All 42 tests pass now.") == "test run"
    assert subject_of("Yes, it's up!") == "server"
    assert subject_of("Deployed to production.") == "deployment"
    assert subject_of("The parser bug is fixed.") == "feature"
    # a served model answering its chat completions is the server's readiness
    assert subject_of('Now it is ready: the chat completion answers correctly ("Jupiter").') == (
        "server"
    )
    # smoke tests are requests to the server, not a test suite
    assert subject_of("Yes, it's up. Both smoke tests passed: the server is ready.") == "server"
    assert subject_of("The smoke test passes on port 8000.") == "server"


def test_subjects_of_many_claims_are_those_of_each() -> None:
    """``subjects_of`` tries a subject's pattern only where its RE2 superset matches; the
    subjects are the ones ``subject_of`` gives, in order, non-ASCII texts and cue words
    that do not make a test run ("ci" inside a word, "smoke tests") included."""
    from analytics.analysis.readiness.config import subjects_of

    claims = [
        "All 42 tests pass now.", "Yes, it's up!", "Deployed to production.",
        "The parser bug is fixed.", "The smoke test passes on port 8000.",
        "The special decimal fix is done.", "CI is green: the test suite passes.",
        "Le serveur est prêt — it's up on :30000.", "Téléchargement terminé: 19/19 shards.",
        "The Mixtral download is done: 19 of 19 shards.", "", "pytest: 12 passed",
        "Tests are passing after the rebuild; the endpoint answers.",
    ]
    assert subjects_of(claims) == [subject_of(c) for c in claims]
    assert len(set(subjects_of(claims))) >= 4


def test_every_event_readiness_reads_is_one_the_tooling_analyser_emits() -> None:
    """A server event named in readiness.json (of any kind) but never emitted would never
    count: ``models_ok`` was one, and a ``/v1/models`` 200 in a server log was read as
    nothing. Emitted: the log signatures' events (as named, per engine, and the CUDA graph
    events they compose from a capture line) and the failure signatures'."""
    from analytics.analysis.readiness import config
    from analytics.analysis.tooling.failures import failure_signatures
    from analytics.analysis.tooling.logs import _signatures, scan_log

    emitted = {s.event for s in failure_signatures()}
    for sig in _signatures()["events"]:
        if not sig.get("compose"):
            emitted.add(sig["event"])
        emitted.update((sig.get("event_by_engine") or {}).values())
    for role in ("", "target ", "draft "):
        for variant in ("", "extend ", "decode ", "verify ", "piecewise "):
            for phase in ("begin", "end"):
                line = f"[2026-05-14 19:58:03 TP0] Capture {role}{variant}cuda graph {phase}."
                emitted.update(e.event for e in scan_log(line).events)
    named = set().union(*config().events.values())
    assert named <= emitted, named - emitted


# --------------------------------------------------------------------------- literal gates


def test_unlowered_folds_are_every_character_a_literal_test_would_miss() -> None:
    """A non-ASCII character that re.IGNORECASE matches to an ASCII letter must either
    lower to that letter or be one ``lowered`` refuses (else a gate could hide a match)."""
    import re

    from analytics.analysis.literals import UNLOWERED_FOLDS

    every = "".join(chr(c) for c in range(128, 0x110000) if not 0xD800 <= c <= 0xDFFF)
    for ch in sorted({m.group() for m in re.finditer(r"[\x00-\x7f]", every, re.I)}):
        ascii_ = {chr(a) for a in range(128) if re.fullmatch(re.escape(chr(a)), ch, re.I)}
        assert ch in UNLOWERED_FOLDS or ch.lower() in {a.lower() for a in ascii_}, hex(ord(ch))


def test_required_literals_read_off_the_parse_tree() -> None:
    import re

    from analytics.analysis.literals import required_literals

    def lits(pattern: str) -> frozenset[str] | None:
        return required_literals(re.compile(pattern, re.I))

    assert lits(r"Uvicorn running on") == {"uvicorn running on"}
    assert lits(r"\bOOM\b|out of memory") == {"oom", "out of memory"}
    assert lits(r"(?:ab|cd)e") == {"ab", "cd"}  # the longer strings rule out more texts
    assert lits(r"x?yz") == {"yz"}  # an optional part is not required
    assert lits(r"(?:ab)+c") == {"ab"}  # a repeat at least once is
    assert lits(r"foo|\d+") is None  # an alternative without a literal: no gate
    assert lits(r"(?-i:\bKilled\b)") == {"killed"}
    assert lits(r"a×bc") == {"bc"}  # a non-ASCII literal ends a run


def _configured_patterns() -> list:
    from analytics.analysis.campaigns import (
        _ASSISTANT_FAILURE,
        _failure_patterns,
        _target_patterns,
        vocabulary,
    )
    from analytics.analysis.readiness import config

    cue, targets = _target_patterns()
    vocab = vocabulary()
    return [
        *config().text.values(),
        *(g for _, g in config().subjects),
        cue,
        *(t.regex for t in targets),
        *(p for spec in vocab.levers for p in spec.patterns),
        vocab.start_cues,
        vocab.na_cues,
        vocab.revert_cues,
        _ASSISTANT_FAILURE,
        *(g for _, g in _failure_patterns()),
    ]


@pytest.mark.parametrize("gated", _configured_patterns(), ids=lambda g: g.regex.pattern[:30])
def test_every_match_of_a_configured_pattern_holds_one_of_its_literals(gated) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from analytics.analysis.literals import lowered

    if gated.literals is None:
        pytest.skip("no literal gate (every text is searched): nothing to check")

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(gated.regex))
    def check(text: str) -> None:
        match = gated.regex.search(text)
        assert match
        low = lowered(match.group(0))
        assert low is None or any(s in low for s in gated.literals), (text, gated.literals)
        assert gated.search(text, lowered(text)).span() == match.span()

    check()


def test_gated_search_finds_what_the_regex_finds() -> None:
    from analytics.analysis.literals import lowered

    failure = config_text("failure")
    for text, found in [
        ("all good", None),
        ("x\nTorch.OutOfMemoryError: CUDA Out Of Memory\n", "Out Of Memory"),
        ("HTTP 503 SERVICE unavailable", "503 SERVICE"),
        ('{"ERROR": "boom"}', 'ERROR":'),
        ("process Killed", "Killed"),
        ("process killed", None),  # (?-i:…) keeps its case
        ("503 \u017fervice", "503 \u017fervice"),  # long s: re.I matches, lower() does not
        ("\u0130nitialization failed", "\u0130nitialization failed"),  # dotted capital I
    ]:
        match = failure.search(text, lowered(text))
        assert (match.group(0) if match else None) == found, text
        plain = failure.regex.search(text)
        assert (plain.group(0) if plain else None) == found, text


def config_text(key: str):
    from analytics.analysis.readiness import config

    return config().text[key]


def test_source_ids_read_in_any_order_match_the_messages(monkeypatch) -> None:
    """Ids are read from a block on when first asked for (an append reads only its end)."""
    from analytics.analysis import session

    monkeypatch.setattr(session, "ID_BLOCK", 4)
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:ids", "claude_code")
    for n in range(20):
        b.msg("assistant", f"step {n}", n, source_id=f"id-{n}")
    b.save("ids", "m")
    frames = load_session_frames(con, "claude_code:ids")
    for i in [17, 18, 9, 2, 19, 0, 13, 25]:
        assert frames.source_id(i) == (f"id-{i}" if i < 20 else str(i))
    assert frames.ref(3) == "msg id-3" and frames.source_id(None) == "?"


def test_a_claim_gets_the_same_verdict_judged_alone_or_with_the_whole_session() -> None:
    """Whether the server signals come from server_events or from the output text is a
    fact of the session: judging only the recent claims (an append) must not change it.
    Here the only event is far before the last claim, whose evidence is liveness text."""
    import pandas as pd

    from analytics.analysis.readiness import judge_claims
    from analytics.analysis.session import SessionFrames

    def frames() -> SessionFrames:
        n = 110
        claim = "The server is up."
        return SessionFrames(
            messages=pd.DataFrame({
                "session_id": "s", "msg_idx": list(range(n)), "role": "assistant",
                "source_id": [f"m{i}" for i in range(n)],
                "text": [claim if i in (5, 102) else "x" for i in range(n)],
            }),
            tags=pd.DataFrame({
                "session_id": "s", "msg_idx": [5, 102], "tag": "readiness_claim",
                "evidence": claim, "start_char": 0,
            }),
            tool_calls=pd.DataFrame({
                "session_id": "s", "msg_idx": [100], "call_id": ["c1"], "result_msg_idx": [101],
                "command": ["tail server.log"], "status": ["completed"], "tool": ["bash"],
                "output": ["INFO: Uvicorn running on http://0.0.0.0:30000"],
            }),
            server_events=pd.DataFrame({
                "session_id": "s", "msg_idx": [0], "engine": ["sglang"],
                "event": ["weights_loaded"], "detail": [None],
            }),
            launches=pd.DataFrame(columns=["session_id", "msg_idx"]),
        )

    whole = {c.msg_idx: (c.verdict, c.reason) for c in judge_claims(frames(), 0)}
    recent = {c.msg_idx: (c.verdict, c.reason) for c in judge_claims(frames(), 90)}
    assert recent[102] == whole[102]


ANALYSIS_TABLES = ("tags", "server_events", "launches", "polling_loops", "measurements")


def _bench_session() -> duckdb.DuckDBPyConnection:
    """Claims among smoke tests, benchmarks (one whose result, tagged, comes back long
    after its call) and server events."""
    con = duckdb.connect(":memory:")
    migrate(con)
    b = SessionBuilder(con, "claude_code:b", "claude_code")
    for k in range(6):
        i = b.msg("assistant", "Launching.", 10 * k)
        b.event(i, "uvicorn_running", "Uvicorn running on http://0.0.0.0:30000")
        i = b.msg("assistant", "Benchmark.", 10 * k + 1)
        b.call(i, "python bench.py", "Output token throughput (tok/s): 12.5", 10 * k + 1)
        if k == 2:  # (the tag on its result only)
            b.calls[-1]["result_msg_idx"] = late = i + 30
        else:
            b.tag(i, "benchmark", "bench")
        i = b.msg("assistant", "Smoke test.", 10 * k + 2)
        b.call(i, SMOKE_CMD, '{"content": "Paris is the capital of France."}', 10 * k + 2)
        b.tag(i, "smoke_test", "chat/completions")
        if k == 3:
            b.event(i, "server_ready", "The server is fired up and ready to roll!")
        i = b.msg("assistant", "The server is ready.", 10 * k + 3)
        b.tag(i, "readiness_claim", "The server is ready.", 0)
        for _ in range(5):
            b.msg("user", "ok", 10 * k + 4)
    b.tag(late, "benchmark", "bench")
    b.save("b", "m")
    return con


def test_claims_judged_while_later_analysis_is_unwritten_get_their_final_verdicts(
    con,
) -> None:
    """An ingest judges the claims whose verdicts read only analysis already written
    (``settled_below``) while its worker tags the last chunks, then the rest: the verdicts
    of one pass, however many of the later rows are missing at first."""
    from analytics.analysis.readiness import judge_claims, judge_settled_claims

    bench = _bench_session()
    sessions = [(con, QWEN), (con, DSV4), (bench, "claude_code:b")]
    early_judged = 0
    for db, sid in sessions:
        whole = judge_claims(load_session_frames(db, sid))
        assert whole
        n = db.execute("SELECT max(msg_idx) FROM messages WHERE session_id = ?", [sid]).fetchone()[0]
        for settled in [*range(0, 80), *range(n - 60, n + 20)]:
            db.execute("BEGIN TRANSACTION")
            for table in ANALYSIS_TABLES:  # not written yet
                db.execute(f"DELETE FROM {table} WHERE session_id = ? AND msg_idx >= ?",
                           [sid, settled])
            early, upto = judge_settled_claims(load_session_frames(db, sid), 0, settled)
            db.execute("ROLLBACK")
            assert all(c.msg_idx < upto for c in early)
            assert early + judge_claims(load_session_frames(db, sid), upto) == whole
            early_judged += len(early)
    assert early_judged


def test_a_claim_about_a_service_started_after_the_checks_is_unverified(tmp_path: Path) -> None:
    """The smoke test answered a server the agent then stopped; ``systemctl enable --now``
    started the service the claim is about, and nothing checked that one."""
    def call(n: int, cmd: str) -> dict[str, object]:
        return {"type": "function_call", "name": "exec_command", "call_id": f"c{n}",
                "arguments": json.dumps({"cmd": cmd})}

    def out(n: int, text: str) -> dict[str, object]:
        return {"type": "function_call_output", "call_id": f"c{n}",
                "output": exec_header("0.5000") + text}

    def say(text: str) -> dict[str, object]:
        return {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}

    smoke = ("curl -s localhost:8000/v1/chat/completions -d "
             "'{\"messages\": [{\"role\": \"user\", \"content\": \"Largest planet?\"}]}'")
    items = [
        (1, call(1, "nohup vllm serve /m --port 8000 --tensor-parallel-size 2 > v.log 2>&1 &")),
        (2, out(1, "4242\n")),
        (90, call(2, smoke)),
        (91, out(2, '{"choices": [{"message": {"content": "Jupiter"}}]}')),
        (92, say("The server is up and answers correctly.")),
        (100, call(3, "pkill -f 'vllm serve'")),
        (101, out(3, "")),
        (110, call(4, "systemctl daemon-reload && systemctl enable --now vllm-m.service")),
        (111, out(4, "Created symlink /etc/systemd/system/multi-user.target.wants/vllm-m.service.\n")),
        (112, say("Done: the vllm-m service is installed and the deployment is up.")),
    ]
    db = ingest_rollout(tmp_path, "2026-02-01", items)
    with duckdb.connect(str(db), read_only=True) as con:
        verdicts = con.execute(
            "SELECT c.verdict FROM readiness_claims c ORDER BY c.msg_idx"
        ).fetchall()
    assert verdicts == [("supported",), ("unverified",)]


def test_a_check_its_cli_refused_says_nothing_about_the_server() -> None:
    """A benchmark or smoke command that argparse refused ("usage: …" then "prog: error:
    ambiguous option …", exit 2) never reached the server: neither passed nor failed, so it
    cannot contradict a readiness claim."""
    refused = (
        "Exit code 2\nusage: vllm bench serve [-h] [--seed SEED] ...\n"
        "vllm bench serve: error: ambiguous option: --dataset could match --dataset-name, "
        "--dataset-path"
    )
    passed, why = judge_check("vllm bench serve --dataset random", refused, "benchmark")
    assert passed is None and "usage error" in why
    sglang = "usage: bench_serving.py [-h] ...\nbench_serving.py: error: unrecognized arguments: --x 1"
    assert judge_check("python -m sglang.bench_serving --x 1", sglang, "benchmark")[0] is None


def test_an_openai_error_object_is_a_failed_smoke_test() -> None:
    """vLLM answers a request it cannot serve with an error object (a 404 for an unknown
    model, a 500 after its engine died): no generation, whatever the status line says."""
    answer = (
        '{"object":"error","message":"The model `mistral` does not exist.",'
        '"type":"NotFoundError","param":null,"code":404}'
    )
    passed, why = judge_check("curl -s localhost:8000/v1/chat/completions", answer, "smoke test")
    assert passed is False and "error" in why
