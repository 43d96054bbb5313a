"""Failure signatures of the serving stack (torch OOM, SGLang/vLLM startup and crash lines,
nvidia-smi NVML errors) found in any text in linear time.

Each signature in ``data/failure_signatures_v1.json`` has a literal ``needle``; the text is
searched for it with ``str.find`` and the signature's regex runs only in a small window there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

MAX_HITS_PER_SIGNATURE = 50
WINDOW = 400


@dataclass(frozen=True)
class FailureSignature:
    engine: str
    event: str
    needle: str
    regex: re.Pattern[str]
    lookback: int = 0


@dataclass(frozen=True)
class FailureHit:
    engine: str
    event: str
    text: str
    detail: str | None
    start: int
    end: int


@cache
def failure_signatures() -> tuple[FailureSignature, ...]:
    path = resources.files(__package__).joinpath("data", "failure_signatures_v1.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return tuple(
        FailureSignature(
            engine=s["engine"],
            event=s["event"],
            needle=s["needle"],
            regex=re.compile(s.get("regex") or re.escape(s["needle"])),
            lookback=int(s.get("lookback", 0)),
        )
        for s in raw["signatures"]
    )


def failure_hits(
    text: str, signatures: tuple[FailureSignature, ...] | None = None
) -> list[FailureHit]:
    """Every failure signature in ``text`` (of ``signatures``, by default all), ordered by
    position."""
    hits: list[FailureHit] = []
    for sig in failure_signatures() if signatures is None else signatures:
        pos = text.find(sig.needle)
        count = 0
        while pos >= 0 and count < MAX_HITS_PER_SIGNATURE:
            lo = max(0, pos - sig.lookback)
            m = sig.regex.search(text, lo, min(len(text), pos + len(sig.needle) + WINDOW))
            if m and m.start() <= pos:
                detail = m.group(1) if m.re.groups and m.group(1) else None
                hits.append(
                    FailureHit(sig.engine, sig.event, m.group(0), detail, m.start(), m.end())
                )
                count += 1
            pos = text.find(sig.needle, pos + len(sig.needle))
    hits.sort(key=lambda h: (h.start, h.event))
    return hits


def find_failures(text: str) -> list[tuple[str, str, int, int]]:
    """(event, matched text, start, end) for each failure signature found in ``text``."""
    return [(h.event, h.text, h.start, h.end) for h in failure_hits(text)]
