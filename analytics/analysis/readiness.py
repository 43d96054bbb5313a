"""Verdicts on readiness claims ("it's up", "tests pass", "fixed").

For each ``readiness_claim`` tag the evidence in the session is weighed:

- *premature*: before the claim there was only liveness (process alive,
  ``Uvicorn running on``, a /health or /v1/models 200, CUDA graph capture still
  running, a log tail stopping before the ready line) — or the next functional
  check after it failed (error, OOM, crash, degenerate output);
- *supported*: a functional check before it passed (ready line and a sane
  generation, tests passing, a benchmark completing);
- *unverified*: neither.

Liveness vs. function follows shared/reference/TOOLING.md §1 (endpoint table)
and §4; the strings live in ``data/readiness.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import pandas as pd

from analytics.analysis.degenerate import is_degenerate
from analytics.models import ReadinessClaim

if TYPE_CHECKING:
    from analytics.analysis.session import SessionFrames

LOOKBACK = 40
LOOKAHEAD = 15
_SMOKE_COMMAND = re.compile(r"chat/completions|/v1/completions|/generate\b|/v1/responses")


@dataclass(frozen=True)
class _Config:
    subjects: tuple[tuple[str, re.Pattern[str]], ...]
    events: dict[str, frozenset[str]]
    text: dict[str, re.Pattern[str]]
    generation_keys: tuple[str, ...]
    version: int


@lru_cache(maxsize=1)
def config() -> _Config:
    raw = resources.files("analytics.analysis").joinpath("data", "readiness.json")
    data: dict[str, Any] = json.loads(raw.read_text("utf-8"))
    return _Config(
        subjects=tuple((s["subject"], re.compile(s["regex"], re.I)) for s in data["subjects"]),
        events={k: frozenset(v) for k, v in data["events"].items()},
        text={k: re.compile(v, re.I | re.M) for k, v in data["text"].items()},
        generation_keys=tuple(data["generation_keys"]),
        version=int(data["version"]),
    )


@dataclass(frozen=True)
class Signal:
    """One piece of evidence: where, what, and whether it proves function."""

    msg_idx: int
    kind: str  # liveness | ready | graph_begin | graph_end | check | failure
    what: str
    passed: bool | None = None


def subject_of(text: str) -> str:
    for subject, pattern in config().subjects:
        if pattern.search(text):
            return subject
    return "feature"


# --------------------------------------------------------------------------- generations


def _strings(node: Any, keys: tuple[str, ...], out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                out.append(value)
            else:
                _strings(value, keys, out)
    elif isinstance(node, list):
        for item in node:
            _strings(item, keys, out)


def generation_text(output: str) -> str:
    """The generated text inside a smoke test's output (JSON fields such as
    ``content``/``reasoning_content``), else the output itself."""
    keys = config().generation_keys
    found: list[str] = []
    candidates = [output] + [line for line in output.splitlines() if line.strip()[:1] in "{["]
    for chunk in candidates:
        try:
            _strings(json.loads(chunk), keys, found)
        except ValueError:
            continue
        if found:
            break
    return "\n".join(found) if found else output


# --------------------------------------------------------------------------- checks


def _outputs(frames: SessionFrames, msg_idx: int) -> list[tuple[int, str, str]]:
    """(result msg, command, output) of the calls made or answered at ``msg_idx``."""
    tc = frames.tool_calls
    if tc.empty:
        return []
    rows = tc[(tc["msg_idx"] == msg_idx) | (tc["result_msg_idx"] == msg_idx)]
    out = []
    for r in rows.itertuples(index=False):
        at = int(r.result_msg_idx) if pd.notna(r.result_msg_idx) else int(r.msg_idx)
        out.append((at, str(r.command or r.input or ""), str(r.output or "")))
    return out


def _tagged(frames: SessionFrames, tag: str) -> set[int]:
    tags = frames.tags
    if tags.empty:
        return set()
    return {int(i) for i in tags.loc[tags["tag"] == tag, "msg_idx"]}


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def judge_check(command: str, output: str, kind: str) -> tuple[bool | None, str]:
    """Did a functional check pass? (None: cannot tell) and why, in words."""
    cfg = config().text
    if kind == "tests":
        if cfg["tests_failed"].search(output):
            return False, f"tests failed ({_short(cfg['tests_failed'].search(output).group(0))})"  # type: ignore[union-attr]
        if cfg["tests_passed"].search(output):
            return True, f"tests passed ({_short(cfg['tests_passed'].search(output).group(0))})"  # type: ignore[union-attr]
        return None, "test run without a verdict"
    failure = cfg["failure"].search(output)
    if failure:
        return (
            False,
            f"error in its output: {_short(output[failure.start() : failure.start() + 80])!r}",
        )
    if kind == "benchmark":
        if cfg["benchmark_done"].search(output):
            return True, "benchmark completed"
        return None, "benchmark without results"
    text = generation_text(output)
    if not text.strip():
        return None, "no output"
    verdict = is_degenerate(text)
    if verdict.flag:
        return False, f"degenerate output: {verdict.reason}"
    return True, f"sane generation: {_short(text, 60)!r}"


def _checks(frames: SessionFrames, lo: int, hi: int) -> list[tuple[Signal, str]]:
    """Functional checks (smoke tests, benchmarks, test runs) made in [lo, hi), with
    the command that made them."""
    cfg = config().text
    smoke, bench = _tagged(frames, "smoke_test"), _tagged(frames, "benchmark")
    tc = frames.tool_calls
    signals: list[tuple[Signal, str]] = []
    if tc.empty:
        return signals
    calls = tc[(tc["msg_idx"] >= lo) & (tc["msg_idx"] < hi)]
    for r in calls.itertuples(index=False):
        msg, command, output = int(r.msg_idx), str(r.command or ""), str(r.output or "")
        at = int(r.result_msg_idx) if pd.notna(r.result_msg_idx) else msg
        only = int((tc["msg_idx"] == msg).sum()) == 1
        if cfg["test_command"].search(command):
            kind = "tests"
        elif (msg in bench or at in bench) and (only or cfg["benchmark_done"].search(output)):
            kind = "benchmark"
        elif _SMOKE_COMMAND.search(command) or ((msg in smoke or at in smoke) and only):
            kind = "smoke test"
        else:
            continue
        if r.status == "aborted":
            continue
        passed, why = judge_check(command, output, kind)
        signals.append((Signal(at, "check", f"{kind}: {why}", passed), command))
    return sorted(signals, key=lambda s: s[0].msg_idx)


def _server_signals(frames: SessionFrames, lo: int, hi: int) -> list[Signal]:
    """Liveness, ready and failure signals from server_events (or tool output text)."""
    cfg = config()
    signals: list[Signal] = []
    se = frames.server_events
    if not se.empty:
        rows = se[(se["msg_idx"] >= lo) & (se["msg_idx"] < hi)]
        for r in rows.itertuples(index=False):
            kind = next(
                (
                    k
                    for k in ("ready", "graph_end", "graph_begin", "failure", "liveness")
                    if r.event in cfg.events[k]
                ),
                None,
            )
            if kind:
                detail = (
                    f": {_short(str(r.detail))}" if isinstance(r.detail, str) and r.detail else ""
                )
                signals.append(Signal(int(r.msg_idx), kind, f"{r.event}{detail}"))
        return signals
    for at, _command, output in _call_outputs(frames, lo, hi):
        for key, kind in (
            ("ready", "ready"),
            ("cuda_graph_end", "graph_end"),
            ("cuda_graph_begin", "graph_begin"),
            ("uvicorn_running", "liveness"),
            ("health_ok", "liveness"),
            ("process_alive", "liveness"),
            ("failure", "failure"),
        ):
            m = cfg.text[key].search(output)
            if m:
                signals.append(Signal(at, kind, _short(m.group(0))))
    return signals


def _call_outputs(frames: SessionFrames, lo: int, hi: int) -> list[tuple[int, str, str]]:
    tc = frames.tool_calls
    if tc.empty:
        return []
    rows = tc[(tc["msg_idx"] >= lo) & (tc["msg_idx"] < hi)]
    return [
        (
            int(r.result_msg_idx) if pd.notna(r.result_msg_idx) else int(r.msg_idx),
            str(r.command or ""),
            str(r.output or ""),
        )
        for r in rows.itertuples(index=False)
    ]


# --------------------------------------------------------------------------- verdicts


def _claim_text(frames: SessionFrames, msg_idx: int, evidence: str | None) -> str:
    msgs = frames.messages
    text = ""
    if not msgs.empty:
        hit = msgs.loc[msgs["msg_idx"] == msg_idx, "text"]
        text = str(hit.iloc[0] or "") if len(hit) else ""
    if evidence and evidence in text:
        start = text.rfind("\n", 0, text.index(evidence)) + 1
        end = text.find("\n", text.index(evidence) + len(evidence))
        line = text[start : end if end >= 0 else None].strip()
        return line[:300] or evidence
    if evidence:
        return evidence[:300]
    return _short(text, 300)


def _window_start(frames: SessionFrames, msg_idx: int, subject: str) -> int:
    start = max(0, msg_idx - LOOKBACK)
    if subject in ("server", "deployment"):
        launches = frames.launches
        idx = set() if launches.empty else {int(i) for i in launches["msg_idx"]}
        idx |= _tagged(frames, "launch")
        earlier = [i for i in idx if start <= i < msg_idx]
        if earlier:
            return max(earlier)
    return start


def _describe(signals: list[Signal], ref: Any) -> str:
    return ", ".join(f"{s.what} ({ref(s.msg_idx)})" for s in signals)


def _precedes_claim(frames: SessionFrames, msg_idx: int, claim_pos: int | None, what: str) -> bool:
    """In formats that inline tool calls in the message text (transcript_text), a call
    written before the claim's text was seen by the claim."""
    if claim_pos is None:
        return False
    text = str(frames.message_value(msg_idx, "text") or "")
    first = what.strip().splitlines()[0][:60] if what.strip() else ""
    pos = text.find(first) if first else -1
    return 0 <= pos < claim_pos


def judge_claim(
    frames: SessionFrames,
    msg_idx: int,
    claim_text: str,
    next_claim: int | None,
    claim_pos: int | None = None,
) -> ReadinessClaim:
    ref = frames.ref
    subject = subject_of(claim_text)
    lo = _window_start(frames, msg_idx, subject)
    # Server observations printed in the claim's own message may be what it quotes;
    # its checks count as after the claim unless written before the claim's text.
    server_before = [
        s
        for s in _server_signals(frames, lo, msg_idx + 1)
        if s.msg_idx < msg_idx or s.kind != "failure"
    ]
    own = _checks(frames, msg_idx, msg_idx + 1)
    own_before = [s for s, cmd in own if _precedes_claim(frames, msg_idx, claim_pos, cmd)]
    checks_before = [s for s, _ in _checks(frames, lo, msg_idx)] + own_before
    hi = msg_idx + LOOKAHEAD + 1
    if next_claim is not None:
        hi = min(hi, next_claim)
    after = sorted(
        [s for s, _ in own if s not in own_before]
        + [s for s, _ in _checks(frames, msg_idx + 1, hi)]
        + [s for s in _server_signals(frames, msg_idx, hi) if s.kind == "failure"],
        key=lambda s: s.msg_idx,
    )
    ready = [s for s in server_before if s.kind == "ready"]
    passes = [s for s in checks_before if s.passed]
    if subject in ("server", "deployment"):
        passes = [s for s in passes if not ready or s.msg_idx >= ready[0].msg_idx]
    liveness = [s for s in server_before if s.kind in ("liveness", "graph_begin")]
    graph_open = _graph_in_progress(server_before)

    first_after = next((s for s in after if s.passed is not None or s.kind == "failure"), None)
    evidence = sorted({s.msg_idx for s in ready + passes + liveness})
    verdict, contradicted, reason = "unverified", None, ""
    if first_after is not None and (first_after.kind == "failure" or first_after.passed is False):
        verdict, contradicted = "premature", first_after.msg_idx
        basis = _describe(ready + passes or liveness, ref) or "no functional check"
        reason = (
            f"claimed on {basis}; the next check after it failed — "
            f"{first_after.what} ({ref(first_after.msg_idx)})"
        )
    elif passes and (ready or subject not in ("server", "deployment")):
        verdict = "supported"
        reason = "a functional check passed before it: " + _describe(ready + passes, ref)
    elif graph_open and not ready:
        verdict = "premature"
        reason = "CUDA graph capture was still in progress: " + _describe(graph_open, ref)
        others = [s for s in liveness if s not in graph_open]
        if others:
            reason += "; besides that only liveness: " + _describe(others[-3:], ref)
    elif liveness and not ready and not passes:
        verdict = "premature"
        reason = (
            "only liveness before it — "
            + _describe(liveness[-3:], ref)
            + "; no ready line and no functional check"
        )
    else:
        seen = _describe(ready + passes, ref)
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


def _graph_in_progress(signals: list[Signal]) -> list[Signal]:
    """The last graph-capture begin not followed by an end (nor by the ready line)."""
    open_: list[Signal] = []
    for s in signals:
        if s.kind == "graph_begin":
            open_ = [s]
        elif s.kind in ("graph_end", "ready"):
            open_ = []
    return open_


def judge_claims(frames: SessionFrames) -> list[ReadinessClaim]:
    """A verdict for every ``readiness_claim`` tag of the session, in message order."""
    tags = frames.tags
    if tags.empty:
        return []
    rows = tags[tags["tag"] == "readiness_claim"].drop_duplicates("msg_idx").sort_values("msg_idx")
    idx = [int(i) for i in rows["msg_idx"]]
    claims = []
    for n, row in enumerate(rows.itertuples(index=False)):
        evidence = row.evidence if isinstance(row.evidence, str) else None
        text = _claim_text(frames, int(row.msg_idx), evidence)
        next_claim = idx[n + 1] if n + 1 < len(idx) else None
        pos = int(row.start_char) if pd.notna(row.start_char) else None
        claims.append(judge_claim(frames, int(row.msg_idx), text, next_claim, pos))
    return claims
