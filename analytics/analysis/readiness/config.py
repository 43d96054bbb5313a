"""What readiness verdicts read from ``data/readiness.json`` (claim subjects, server events,
check strings), the signals they weigh, and how far a claim's windows reach."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, NamedTuple

from analytics.analysis.literals import Gated, lowered
from analytics.batchgate import may_match_each, superset_source

LOOKBACK = 40
"""Messages before a claim whose evidence its verdict reads."""
LOOKAHEAD = 15
"""Messages after a claim (up to the next claim, when that is closer) its verdict reads."""


@dataclass(frozen=True)
class _Config:
    subjects: tuple[tuple[str, Gated], ...]
    events: dict[str, frozenset[str]]
    text: dict[str, Gated]
    default_ports: dict[str, int]
    generation_keys: tuple[str, ...]
    version: int


@lru_cache(maxsize=1)
def config() -> _Config:
    raw = resources.files("analytics.analysis").joinpath("data", "readiness.json")
    data: dict[str, Any] = json.loads(raw.read_text("utf-8"))
    return _Config(
        subjects=tuple(
            (s["subject"], Gated.compile(_subject_regex(s, data), re.I)) for s in data["subjects"]
        ),
        events={k: frozenset(v) for k, v in data["events"].items()},
        text={k: Gated.compile(v, re.I | re.M) for k, v in data["text"].items()},
        default_ports={k: int(v) for k, v in data["default_ports"].items()},
        generation_keys=tuple(data["generation_keys"]),
        version=int(data["version"]),
    )


def _subject_regex(subject: dict[str, str], data: dict[str, Any]) -> str:
    """A subject's regex: its own, or (``regex_of: jobs.kinds.*.claim``) any of the claim
    patterns of the kinds of job."""
    if "regex" in subject:
        return subject["regex"]
    if subject.get("regex_of") != "jobs.kinds.*.claim":
        raise ValueError(f"subject {subject!r}: give a 'regex' or 'regex_of': 'jobs.kinds.*.claim'")
    return "|".join(f"(?:{k['claim']})" for k in data["jobs"]["kinds"].values())


class Signal(NamedTuple):
    """One piece of evidence: where, what, and whether it proves function. (A tuple: a
    session has one per server event, and a tuple is built 3x faster than a frozen
    dataclass.)"""

    msg_idx: int
    kind: str  # liveness | ready | graph_begin | graph_end | failure; a check: tests | benchmark | smoke test
    what: str
    passed: bool | None = None


def subject_of(text: str, may: Sequence[bool] | None = None) -> str:
    """What a claim is about: the first subject whose pattern matches its text, else
    "feature". ``may``: for each subject, whether its pattern may match at all (False: it
    is not tried; ``subjects_of`` finds that for many claims at once)."""
    low = lowered(text)
    for n, (subject, pattern) in enumerate(config().subjects):
        if (may is None or may[n]) and pattern.search(text, low):
            return subject
    return "feature"


def subjects_of(texts: Sequence[str]) -> list[str]:
    """``subject_of`` of each of ``texts``, each subject's pattern tried only on the texts
    its RE2 superset matches (``batchgate``: one pass over all of them). A session's claims
    mostly name a server: the patterns tried before that one (test runs, deployments)
    match few of them, and their cue words ("test", "ci") are common enough that the
    literal gate lets most through."""
    gates = may_match_each(_subject_supersets(), texts)
    return [subject_of(text, [gate[n] for gate in gates]) for n, text in enumerate(texts)]


@lru_cache(maxsize=1)
def _subject_supersets() -> tuple[str | None, ...]:
    return tuple(superset_source(pattern.regex) for _, pattern in config().subjects)


def _signal_at(signal: Signal) -> int:
    return signal.msg_idx


def _check_at(check: tuple[Signal, str]) -> int:
    return check[0].msg_idx
