"""Readiness claims the verdict check (two sessions with 31 claims written before the tool
ran) found untagged: 18 of them. Their families, with other sentences than those sessions':
a server named by its port ("the reranker on 31002 is up"), a job that finished ("the
shard download is complete", "Benchmark finished: …"), a fix stated first ("Fixed the
chat template: …"), a check on a port that passes, a server back somewhere "and serving";
and the sentences around them that claim nothing (plans, conditions, questions, a job
still running)."""

from __future__ import annotations

import pytest

from analytics.analysis.tagging import Tagger
from analytics.models import Message, MessageContext

SID = "test:claims-named"


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


def _claims(tagger: Tagger, text: str) -> bool:
    m = Message(session_id=SID, msg_idx=0, source_id="0", role="assistant", text=text)
    return any(t.tag == "readiness_claim" for t in tagger.tag([MessageContext(message=m)]))


@pytest.mark.parametrize(
    "text",
    [
        "The reranker on 31002 is up: the log shows Uvicorn running.",
        "The embedder on port 9100 is ready too, so the pipeline can start.",
        "Mistral on 8080 now responds with sane completions.",
        "The 8B on 18000 is serving again after the restart.",
        "The shard download is complete: 12 of 12 files, 48G.",
        "The weights download is done as well.",
        "Now the conversion really is complete.",
        "Benchmark finished: 950 tok/s at concurrency 32.",
        "The third sweep finished cleanly.",
        "The wheel build completed and the import works.",
        "Fixed the chat template: turns now end with the right token.",
        "Fixed it by pinning transformers to 4.46.",
        "Health check on 9100 passed after the relaunch.",
        "The reranker is back on GPU 5 and serving.",
    ],
)
def test_a_claim_about_a_named_server_or_a_finished_job(tagger: Tagger, text: str) -> None:
    assert _claims(tagger, text)


@pytest.mark.parametrize(
    "text",
    [
        "Once the shard download is complete I'll launch the server.",
        "If the embedder on port 9100 is ready, start the pipeline.",
        "Let me check whether the reranker on 31002 is up.",
        "I'll wait until Mistral on 8080 responds.",
        "Is the wheel build finished?",
        "The conversion is still running: 3 of 8 layers.",
        "The benchmark on 8000 is running now, about four minutes left.",
        "Nothing on port 9100 is listening yet.",
        "Fixed in 4.47, so an upgrade should help.",
        "Switching back to bf16 and running the sweep again.",
        "Hopefully the health check on 9100 passes this time.",
    ],
)
def test_plans_conditions_questions_and_running_jobs_claim_nothing(
    tagger: Tagger, text: str
) -> None:
    assert not _claims(tagger, text)


@pytest.mark.parametrize(
    ("text", "claims"),
    [
        # (found by a blind check on an opencode session: "Chat completions work, streamed
        # and not: the model answered …" was left untagged)
        ("Embeddings work: 1024-dim vectors for both inputs.", True),
        ("Streaming works, chunks arrive every 30 ms.", True),
        ("Both endpoints work now.", True),
        ("Tool calls work correctly after the parser fix.", True),
        ("Requests work again after the restart.", True),
        ("Do completions work? Let me check.", False),
        ("Once requests work, I'll run the benchmark.", False),
        ("Let me see whether streaming works.", False),
        ("Requests work by being batched into one forward pass.", False),
    ],
)
def test_what_a_server_serves_working_is_a_claim(tagger: Tagger, text: str, claims: bool) -> None:
    """A plural subject of what a server serves (completions, requests, embeddings,
    streaming, tool calls) that works, said as a result; asked, planned or explained it
    claims nothing."""
    assert _claims(tagger, text) is claims
