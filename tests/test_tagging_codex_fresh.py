"""Families a blind check on a hand-written Codex rollout found missing or over-read.

Every case here is written for the family, not copied from that session: waits on a
process id, a sleep before a command that acts (not looks), a sweep whose ``grep`` only
filters a benchmark's output, OpenAI-style error bodies, check-ins that name what they
ask about, readiness phrasings, and a temporal "since".
"""

from __future__ import annotations

import pytest
from _tagging import bash_call, context, tag_names

from analytics.analysis.tagging import Tagger, loop_shape


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


# --- polling ------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    'while kill -0 "$TRAIN_PID" 2>/dev/null; do sleep 60; done; tail -n 5 train.log',
    "while kill -0 $(cat /run/bench.pid); do sleep 10; done",
    "until ! kill -0 4411; do sleep 5; done && echo finished",
    "while true; do kill -0 $pid || break; sleep 20; done",
])
def test_waiting_on_a_process_id_polls(command: str) -> None:
    shape = loop_shape(command)
    assert shape is not None and shape.kind == "loop"


@pytest.mark.parametrize("command", [
    "sleep 10; systemctl restart nginx",
    "sleep 3 && sudo systemctl enable --now sglang-router.service",
    "pkill -f llama-server; sleep 4; docker start tgi-7b",
    "sleep 2; kubectl apply -f vllm-deploy.yaml",
])
def test_a_sleep_before_a_command_that_acts_is_not_a_check(command: str) -> None:
    assert loop_shape(command) is None


@pytest.mark.parametrize("command", [
    "sleep 15; systemctl is-active tgi",
    "sleep 20 && docker ps --filter name=tgi",
    "sleep 30; kubectl get pods -l app=vllm",
])
def test_a_sleep_before_a_look_still_polls(command: str) -> None:
    shape = loop_shape(command)
    assert shape is not None and shape.kind == "sleep_check"


@pytest.mark.parametrize("command", [
    "for c in 4 16 64; do genai-perf profile -m llama3 --concurrency $c | grep -i throughput; sleep 15; done",
    "for n in 100 500; do ab -n $n -c 10 http://localhost:8080/ | grep 'Requests per second'; sleep 5; done",
    "for bs in 1 8; do trtllm-bench throughput --batch $bs 2>&1 | tail -n 4; sleep 30; done",
])
def test_a_sweep_that_filters_a_benchmark_and_pauses_is_not_polling(command: str) -> None:
    assert loop_shape(command) is None


@pytest.mark.parametrize("command", [
    "for i in 1 2 3 4 5; do sleep 10; curl -sf localhost:9000/health && break; done",
    "for i in 1 2 3; do sleep 30; docker logs tgi 2>&1 | tail -n 1; done",
    "for i in $(seq 1 40); do lmdeploy check | grep -q ok && exit 0; sleep 6; done",
])
def test_loops_that_look_or_leave_on_a_condition_still_poll(command: str) -> None:
    assert loop_shape(command) is not None


# --- error ----------------------------------------------------------------------


@pytest.mark.parametrize("body,expected", [
    ('{"error": {"message": "The model `llama-3-8b` does not exist.", "type": "NotFoundError", "code": 404}}', True),
    ('{"error":{"type":"overloaded_error","message":"Overloaded"}}', True),
    ('{"id": "cmpl-1", "choices": [{"text": "error handling in Go is explicit"}]}', False),
    ('{"errors": 0, "checked": 12}', False),
])
def test_openai_style_error_body(tagger: Tagger, body: str, expected: bool) -> None:
    c = bash_call("curl -s localhost:8000/v1/completions -d @req.json", body, 0, "exec_command")
    assert ("error" in tag_names(tagger, context("assistant", calls=(c,)))) is expected


# --- user check-ins -------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("any news on the download", True),
    ("any update on the 405b run?", True),
    ("where are we with the quantized build", True),
    ("how's it going with the int4 export?", True),
    ("r u done with the merge", True),
    ("r we live", True),
    ("¿sigue corriendo?", True),
    ("any update on the download? also delete the old checkpoints", False),
    ("any luck? if so rerun it with tp 4", False),
    ("where are we with the download and then restart everything from scratch please", False),
    ("what's the p50 latency at batch 8?", False),
    ("go ahead with the int4 export", False),
])
def test_checkin_naming_its_subject(tagger: Tagger, text: str, expected: bool) -> None:
    assert ("user_checkin" in tag_names(tagger, context("user", text))) is expected


# --- readiness claims -------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("TGI is up and working on port 8080.", True),
    ("Healthy after 95 s; the router answers.", True),
    ("Ready after four minutes of compilation.", True),
    ("The segfault is gone now that the driver matches.", True),
    ("The memory leak has been fixed.", True),
    ("The hang is not gone; it still stalls at step 40.", False),
    ("Once the warning is gone I'll re-run the suite.", False),
    ("Is the crash gone?", False),
])
def test_readiness_phrasings(tagger: Tagger, text: str, expected: bool) -> None:
    assert ("readiness_claim" in tag_names(tagger, context("assistant", text))) is expected


# --- diagnosis ----------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("Stable, and no new segfaults in the journal since the reboot.", False),
    ("No OOM errors since the last deploy.", False),
    ("It crashed since the tokenizer path was wrong.", True),
])
def test_temporal_since_is_not_a_cause(tagger: Tagger, text: str, expected: bool) -> None:
    assert ("diagnosis" in tag_names(tagger, context("assistant", text))) is expected
