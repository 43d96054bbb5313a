"""A verdict per readiness claim (premature, supported, unverified) from the evidence
around it."""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any

import pandas as pd

from analytics.analysis import jobs
from analytics.analysis.literals import text_of
from analytics.analysis.readiness.checks import _short
from analytics.analysis.readiness.config import (
    LOOKAHEAD,
    LOOKBACK,
    Signal,
    _signal_at,
    subject_of,
    subjects_of,
)
from analytics.analysis.readiness.evidence import _Evidence
from analytics.models import ReadinessClaim

if TYPE_CHECKING:
    from analytics.analysis.session import SessionFrames


def _claim_text(text: str, evidence: str | None) -> str:
    if evidence and evidence in text:
        start = text.rfind("\n", 0, text.index(evidence)) + 1
        end = text.find("\n", text.index(evidence) + len(evidence))
        line = text[start : end if end >= 0 else None].strip()
        return line[:300] or evidence
    if evidence:
        return evidence[:300]
    return _short(text, 300)


def _from_other_server(ev: _Evidence, signal: Signal, port: int | None) -> bool:
    """A server signal read from another server than the one on ``port`` (its log, its
    launch, its address) says nothing of it."""
    if port is None:
        return False
    other = ev.opened_port.get(signal) or ev.signal_port(signal.msg_idx)
    return other is not None and other != port


def _precedes_claim(text: str, claim_pos: int | None, what: str) -> bool:
    """In formats that inline tool calls in the message text (transcript_text), a call
    written before the claim's text was seen by the claim."""
    if claim_pos is None:
        return False
    first = what.strip().splitlines()[0][:60] if what.strip() else ""
    pos = text.find(first) if first else -1
    return 0 <= pos < claim_pos


def judge_claim(
    ev: _Evidence,
    msg_idx: int,
    message_text: str,
    claim_text: str,
    next_claim: int | None,
    claim_pos: int | None = None,
    subject: str | None = None,
) -> ReadinessClaim:
    frames = ev.frames
    ref = frames.ref
    subject = subject or subject_of(claim_text)
    if subject == "job":
        judged = _judge_job(ev, msg_idx, message_text, claim_text, next_claim, claim_pos)
        if judged is not None:
            return judged
    port = ev.claimed_port(msg_idx, claim_text)
    # (a job claim with no look at a job of its kinds is judged as a feature claim)
    lo = ev.window_start(msg_idx, "feature" if subject == "job" else subject, port)
    # Server observations printed in the claim's own message may be what it quotes;
    # its checks count as after the claim unless written before the claim's text.
    server_before = [
        s for s in ev.server_signals(lo, msg_idx + 1)
        if (s.msg_idx < msg_idx or s.kind != "failure") and not _from_other_server(ev, s, port)
    ]
    own = [c for c in ev.checks(msg_idx, msg_idx + 1) if not ev.about_other_server(c[1], port)]
    own_before = [s for s, cmd in own if _precedes_claim(message_text, claim_pos, cmd)]
    checks_before = [
        s for s, cmd in ev.checks(lo, msg_idx) if not ev.about_other_server(cmd, port)
    ] + own_before
    hi = msg_idx + LOOKAHEAD + 1
    if next_claim is not None:
        hi = min(hi, next_claim)
    after = (
        [s for s, _ in own if s not in own_before]
        + [s for s, cmd in ev.checks(msg_idx + 1, hi) if not ev.about_other_server(cmd, port)]
        + [
            s for s in ev.server_signals(msg_idx, hi)
            if s.kind == "failure" and not _from_other_server(ev, s, port)
        ]
    )
    if subject == "test run":  # (what fails after "the tests pass" that is no test run
        after = [s for s in after if s.kind == "tests"]  # leaves them passed)
    ready = [s for s in server_before if s.kind == "ready"]
    passes = [s for s in checks_before if s.passed]
    if subject in ("server", "deployment"):
        passes = [s for s in passes if not ready or s.msg_idx >= ready[0].msg_idx]
    liveness = [s for s in server_before if s.kind in ("liveness", "graph_begin")]
    graph_open = _graph_in_progress(server_before)

    # The earliest verdict after the claim (min keeps the first of equally early ones).
    first_after = min(
        (s for s in after if s.passed is not None or s.kind == "failure"),
        key=_signal_at,
        default=None,
    )
    evidence = sorted({s.msg_idx for s in ready + passes + liveness})
    verdict, contradicted, reason = "unverified", None, ""
    if first_after is not None and (first_after.kind == "failure" or first_after.passed is False):
        verdict, contradicted = "premature", first_after.msg_idx
        basis = ev.describe(ready + passes or liveness) or "no functional check"
        reason = (
            f"claimed on {basis}; the next check after it failed — "
            f"{first_after.what} ({ref(first_after.msg_idx)})"
        )
    elif passes:
        verdict = "supported"
        reason = "a functional check passed before it: " + ev.describe(passes)
        if ready:  # (the ready line is no check of its own: named apart)
            reason += "; before that the server said it was ready: " + ev.describe(ready)
    elif graph_open and not ready:
        verdict = "premature"
        reason = "CUDA graph capture was still in progress: " + ev.describe(graph_open)
        others = [s for s in liveness if s not in graph_open]
        if others:
            reason += "; besides that only liveness: " + ev.describe(others[-3:])
    elif liveness and not ready:
        verdict = "premature"
        reason = (
            "only liveness before it — "
            + ev.describe(liveness[-3:])
            + "; no ready line and no functional check"
        )
    else:
        seen = ev.describe(ready)
        reason = f"only {seen}, no generation checked" if seen else "no evidence either way"
        if first_after is not None and first_after.passed:
            reason += f"; a later check passed: {first_after.what} ({ref(first_after.msg_idx)})"
    return ReadinessClaim(
        session_id=frames.session_id,
        msg_idx=msg_idx,
        claim_text=claim_text,
        subject=subject,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        evidence_msg_idx=evidence,
        contradicted_by_msg_idx=contradicted,
    )


_STATE_WORDS = {"done": "done", "running": "still running", "failed": "failed"}


def _judge_job(
    ev: _Evidence,
    msg_idx: int,
    message_text: str,
    claim_text: str,
    next_claim: int | None,
    claim_pos: int | None,
) -> ReadinessClaim | None:
    """The verdict on a claim about a job, from the looks at the jobs of its kinds (a
    download, a build …) near it; None when there is none. When the claim names the job
    (``jobs.claimed_looks``), only the looks at it count; the first of them after the claim
    (within LOOKAHEAD, past the next claim, which may be about another job) contradicts it
    when it shows the job failed or still running. Else the last look before it decides:
    done supports it, running or failed makes it premature. A look at no named job after
    the claim (before the next one) contradicts it only by a failure."""
    kinds = jobs.claim_kinds(claim_text)
    near = [
        look for look in ev.looks(max(0, msg_idx - LOOKBACK), msg_idx + LOOKAHEAD + 1)
        if look.kinds & kinds
    ]
    looks, named = jobs.claimed_looks(near, claim_text)
    if not looks:
        return None
    before = [
        look for look in looks
        if look.msg < msg_idx
        or (look.msg == msg_idx and _precedes_claim(message_text, claim_pos, look.command))
    ]
    after = [look for look in looks if look not in before]
    if not named and next_claim is not None:
        after = [look for look in after if look.msg < next_claim]
    last = before[-1] if before else None
    first = min(after, key=lambda look: look.at, default=None)
    ref = ev.frames.ref
    job = f"the job (the looks naming {', '.join(named)})" if named else "the job"

    def said(look: jobs.Look) -> str:
        return f"{look.reading.words} ({ref(look.at)})"

    verdict, contradicted = "unverified", None
    if first is not None and (
        first.reading.state == "failed" or (bool(named) and first.reading.state == "running")
    ):
        verdict, contradicted = "premature", first.at
        basis = (
            f"the last look at {job} before it, which showed it "
            f"{_STATE_WORDS[last.reading.state]}: {said(last)}"
            if last else f"no look at {job}"
        )
        reason = (
            f"claimed on {basis}; the next look after it showed it "
            f"{_STATE_WORDS[first.reading.state]} — {said(first)}"
        )
    elif last is not None:
        state = last.reading.state
        verdict = "supported" if state == "done" else "premature"
        reason = f"the last look at {job} before it showed it {_STATE_WORDS[state]}: {said(last)}"
    else:
        reason = f"no look at {job} before it"
        if first is not None and first.reading.state == "done":
            reason += f"; a later look showed it done: {said(first)}"
    return ReadinessClaim(
        session_id=ev.frames.session_id,
        msg_idx=msg_idx,
        claim_text=claim_text,
        subject="job",
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        evidence_msg_idx=[last.at] if last is not None else [],
        contradicted_by_msg_idx=contradicted,
    )


def _graph_in_progress(signals: list[Signal]) -> list[Signal]:
    """The last graph-capture begin not followed by an end (nor by the ready line)."""
    open_: list[Signal] = []
    for s in signals:
        if s.kind == "graph_begin":
            open_ = [s]
        elif s.kind in ("graph_end", "ready"):
            open_ = []
    return open_


def claims_affected_from(first_changed: int) -> int:
    """The first claim whose verdict can change when the analysis of messages from
    ``first_changed`` on changes: a verdict reads LOOKAHEAD messages after its claim
    (and the next claim, which only narrows that window) and LOOKBACK before it."""
    return max(0, first_changed - LOOKAHEAD)


def judge_claims(frames: SessionFrames, from_idx: int = 0) -> list[ReadinessClaim]:
    """A verdict for every ``readiness_claim`` tag of the session at ``msg_idx >=
    from_idx``, in message order (earlier claims are not read)."""
    return _judge(frames, from_idx, None)[0]


def judge_settled_claims(
    frames: SessionFrames, from_idx: int, settled_below: int
) -> tuple[list[ReadinessClaim], int]:
    """The verdicts :func:`judge_claims` gives, of the claims at ``msg_idx >= from_idx``
    that read no analysis row of a message at or after ``settled_below`` (an ingest
    waiting for its tagging worker, whose rows below that are written and final), and the
    ``msg_idx`` from which claims are left to ``judge_claims`` once all rows are written.

    A verdict reads the analysis rows of the messages in its windows (LOOKBACK before
    its claim to LOOKAHEAD after, or to the next claim when that is closer) and the tags
    of the messages holding the results of the calls made there. A claim is judged here
    when those messages are all below ``settled_below``, and so is every claim before it
    (the rest are judged together, as an append judges its recent claims). Whether server
    signals come from server events is a fact of the whole session: judged here only
    when it has events already (rows written are never taken back)."""
    return _judge(frames, from_idx, settled_below)


def _judge(
    frames: SessionFrames, from_idx: int, settled_below: int | None
) -> tuple[list[ReadinessClaim], int]:
    """Verdicts of the claims from ``from_idx`` on (with ``settled_below``: those
    :func:`judge_settled_claims` may give), and the ``msg_idx`` from which claims are
    still to be judged."""
    tags = frames.select_lists(
        "tags", ["msg_idx", "evidence", "start_char"], {"tag": ["readiness_claim"]},
        min_idx=from_idx or None, below_idx=settled_below,
    )
    first_tag: dict[int, tuple[Any, Any]] = {}  # a message's first claim tag speaks
    for i, evidence, start in zip(*tags, strict=True):
        first_tag.setdefault(int(i), (evidence, start))
    idx = sorted(first_tag)
    judged = idx
    if settled_below is not None:
        judged = idx[: bisect_left(idx, settled_below - LOOKAHEAD)]
    if not judged:
        return [], from_idx
    ev = _Evidence(frames, judged)
    upto = None
    if settled_below is not None:
        if not ev.from_events:
            return [], from_idx
        upto = min(settled_below, ev.first_call_resulting_from(settled_below)) - LOOKAHEAD
        judged = judged[: bisect_left(judged, upto)]
    message_texts = {i: text_of(t) for i, t in frames.message_texts(judged).items()}
    claim_texts = {}
    for msg_idx in judged:
        evidence = first_tag[msg_idx][0]
        claim_texts[msg_idx] = _claim_text(
            message_texts.get(msg_idx, ""), evidence if isinstance(evidence, str) else None
        )
    subjects = dict(zip(judged, subjects_of([claim_texts[i] for i in judged]), strict=True))
    # (outputs are read once the claims are known: looks at jobs only near claims about one)
    ev.read_outputs(judged, [i for i in judged if subjects[i] == "job"])
    claims = []
    for n, msg_idx in enumerate(judged):
        start = first_tag[msg_idx][1]
        # (a claim after the last one read is at least LOOKAHEAD messages after it)
        next_claim = idx[n + 1] if n + 1 < len(idx) else None
        pos = int(start) if pd.notna(start) else None
        claims.append(
            judge_claim(
                ev, msg_idx, message_texts.get(msg_idx, ""), claim_texts[msg_idx], next_claim, pos,
                subjects[msg_idx],
            )
        )
    return claims, from_idx if upto is None else max(from_idx, upto)
