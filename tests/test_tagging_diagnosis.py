"""diagnosis: what the rule gate keeps and drops, and what the learned classifier scores."""

from __future__ import annotations

import json

import pytest

from analytics.analysis.tagging import Tagger
from analytics.analysis.tagging.diagnosis_model import (
    MODEL_DIR,
    SETTINGS_FILE,
    candidates,
)
from analytics.models import Message, MessageContext, ToolCall


def _ctx(text: str) -> MessageContext:
    return MessageContext(
        message=Message(session_id="s", msg_idx=0, source_id="0", role="assistant", text=text),
        calls=[], results=[],
    )


def _diagnosis(tagger: Tagger, text: str) -> list[str]:
    return [t.source for t in tagger.tag([_ctx(text)]) if t.tag == "diagnosis"]


@pytest.fixture(scope="module")
def rules() -> Tagger:
    return Tagger(diagnosis_model=None)


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


# --- the rule gate (prose_filter) ---------------------------------------------------

RULE_CAUSES = [
    "The stale process is causing the port conflict.",
    "I found the problem: the pagination loop starts at 1.",
    "The server died because the port was taken, so I'll relaunch on 30001.",
    "The culprit is `fused_moe_kernel`.",
    "So the degeneration comes from the speculative path, not from sampling.",
    "Since we need 20 GB for the graphs, the launch runs out of memory at 0.85.",
    # what the log shows, stated in the author's words
    "The log shows the scheduler OOMs during CUDA graph capture at batch size 256.",
    "Startup failed: the log shows `Capture cuda graph failed`, so the graph batch sizes do not fit in memory.",
    "The tokenizer is not loaded yet, so the first request fails with a 500.",
]
STATUS_REPORTS = [
    "Still loading — the log shows `Capture cuda graph begin`, so it needs another minute.",
    "Still loading — the log shows `Capture cuda graph begin`. Not ready yet; graph capture takes 2-3 minutes.",
    "Not yet — the log is at `Capture draft cuda graph begin`, so it needs another minute or two.",
    "The server is not up yet, so I'll give it another minute.",
]
RULE_NOT_CAUSES = [
    # a reason for the author's next step, not the cause of a failure
    "I'll use setsid because plain nohup dies with the ssh session.",
    "Since the user wants the results in a report, I'll write RESULTS.md with a throughput chart.",
    "I need to install the driver first, since the container can't see the GPU without it.",
    # a consequence of success: the failure word is negated
    "The script completed without errors, which means the fix works.",
    # what it failed with, or that it is back: symptoms
    "The request failed with `503 Service Unavailable`.",
    "The OOM is back.",
    "Unfortunately the build still fails. The error is now in a different file.",
    # "the error is" followed only by a quotation
    "The error is `ModuleNotFoundError: No module named 'flash_attn'`.",
    # a search announced
    "Let me find out what is causing the hang.",
    # where something comes from, with no failure in sight
    "The navigation comes from `session_nav.html`, which both templates include.",
    # status reports: progress, not the cause of a failure
    *STATUS_REPORTS,
    # the log shows only a quoted log line
    "The log shows `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static`.",
]


@pytest.mark.parametrize("text", RULE_CAUSES)
def test_rules_keep_stated_causes(rules: Tagger, text: str) -> None:
    assert _diagnosis(rules, text) == ["rules"]


@pytest.mark.parametrize("text", RULE_NOT_CAUSES)
def test_rules_drop_plans_symptoms_and_quotes(rules: Tagger, text: str) -> None:
    assert _diagnosis(rules, text) == []


@pytest.mark.parametrize("text", STATUS_REPORTS)
def test_status_report_after_a_failed_poll_is_not_a_diagnosis(rules: Tagger, text: str) -> None:
    """Right after an error (the health check refused) weak cues count, but not these."""
    poll = ToolCall(
        session_id="s", msg_idx=0, call_id="c0", tool="Bash", command="curl -sf localhost:30000/health",
        output="curl: (7) Failed to connect to localhost port 30000: Connection refused", exit_code=7,
    )
    before = MessageContext(
        message=Message(session_id="s", msg_idx=0, source_id="0", role="tool", text=poll.output or ""),
        calls=[], results=[poll],
    )
    after = MessageContext(
        message=Message(session_id="s", msg_idx=1, source_id="1", role="assistant", text=text), calls=[], results=[]
    )
    tags = rules.tag([before, after])
    assert any(t.tag == "error" and t.msg_idx == 0 for t in tags)
    assert [t.evidence for t in tags if t.tag == "diagnosis"] == []


# --- the learned classifier ------------------------------------------------------------

@pytest.mark.parametrize(
    "text",
    [
        "Throughput is flat above c32: max-running-requests is 32, and every extra request waits in the queue.",
        "Accept length is 1.2 on code prompts, and with drafts that short each verify pass costs more than it saves.",
    ],
)
def test_model_tags_causes_without_cue_words(tagger: Tagger, text: str) -> None:
    assert _diagnosis(tagger, text) == ["model"]


@pytest.mark.parametrize(
    "text",
    [
        "Since the tests pass, I'll commit the change and update the docs.",
        "Baseline at concurrency 16: 1187 tok/s output, mean TTFT 212 ms.",
        "It might be the chat template, or it could be the sampler; I'll test both.",
        "The script completed without errors, which means the fix works.",
        "> the root cause is unknown",
    ],
)
def test_model_leaves_plans_results_hedges_and_quotes_alone(tagger: Tagger, text: str) -> None:
    assert _diagnosis(tagger, text) == []


def test_quoted_lines_are_not_candidates() -> None:
    text = "> the root cause is unknown\nThe KV pool is full at 0.78 utilization."
    spans = candidates(text)
    assert [text[a:b] for a, b in spans] == ["The KV pool is full at 0.78 utilization."]


def test_every_sentence_is_a_candidate() -> None:
    """No cue-word prefilter: a cause stated without a cue word is scored too."""
    text = "It was the torch-compile flag. Compiling each graph size takes 40 s."
    assert [text[a:b] for a, b in candidates(text)] == [
        "It was the torch-compile flag.", "Compiling each graph size takes 40 s."]


def test_shipped_settings_come_from_repeated_cross_validation() -> None:
    settings = json.loads((MODEL_DIR / SETTINGS_FILE).read_text())
    assert 0.05 <= settings["threshold"] <= 0.95
    assert settings["cv"]["repeats"] >= 2 and settings["cv"]["f1"] >= settings["cv"]["rules_only_f1"]
    assert "heldout" not in settings["trained_on"]
    size = sum(p.stat().st_size for p in MODEL_DIR.rglob("*") if p.is_file())
    assert size < 5_000_000


def test_training_examples_name_their_source() -> None:
    rows = [json.loads(line) for line in (MODEL_DIR.parent / "diagnosis_examples.jsonl").read_text().splitlines()]
    assert all(r["label"] in (0, 1) and r["text"].strip() for r in rows)
    assert all(r["source"].startswith(("synthetic:", "dev gold: ")) for r in rows)
    assert not any("heldout" in r["source"] for r in rows)
