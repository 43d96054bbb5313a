"""Is a model's output degenerate (a repetition loop) rather than a sane answer?

Three independent signals, each scored 0..1; the result takes the strongest:

- a periodic run: the same short token sequence repeated back to back
  ("2 + 2 = 2.2 + 2 = 2.2 + 2 = 2 …");
- a repeated sentence/line that fills most of the text
  ("The user's question is 2+2." over and over);
- a low distinct-trigram ratio over a long text (loops with small variations).

Thresholds are tuned so that code, JSON, Markdown tables, numbered lists and
ordinary long answers stay below the flag line (see tests/test_degenerate.py).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+|[^\w\s]+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")

MIN_TOKENS = 12
MAX_TOKENS = 20_000
MAX_PERIOD = 40
FLAG_AT = 0.5


@dataclass(frozen=True)
class DegenerateResult:
    """flag: degenerate or not; score: 0..1 strength of the strongest signal;
    reason: that signal in words (empty when the text is sane)."""

    flag: bool
    score: float
    reason: str

    def __bool__(self) -> bool:
        return self.flag


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)][-MAX_TOKENS:]


def _periodic_run(toks: list[str]) -> tuple[float, int, int, int]:
    """Best back-to-back repetition: (coverage of the text, period, repeats, start)."""
    n = len(toks)
    best = (0.0, 0, 0, 0)
    for period in range(1, min(MAX_PERIOD, n // 3) + 1):
        run = 0
        for i in range(n - period):
            if toks[i] == toks[i + period]:
                run += 1
                continue
            best = _better(best, run, period, i - run, n)
            run = 0
        best = _better(best, run, period, n - period - run, n)
    return best


def _better(
    best: tuple[float, int, int, int], run: int, period: int, start: int, n: int
) -> tuple[float, int, int, int]:
    length = run + period
    repeats = length // period
    # A single repeated token ("ha ha ha") needs many repeats; a phrase needs three.
    needed = 8 if period <= 2 else 3
    if repeats < needed or length < 12:
        return best
    coverage = length / n
    return (coverage, period, repeats, start) if coverage > best[0] else best


def _repeated_sentence(text: str) -> tuple[float, str, int]:
    """The most repeated sentence: (share of the text's characters, sentence, count)."""
    parts = [p.strip().lower() for p in _SENTENCE.findall(text)]
    parts = [p for p in parts if len(p) >= 8]
    if not parts:
        return 0.0, "", 0
    sentence, count = Counter(parts).most_common(1)[0]
    if count < 3:
        return 0.0, sentence, count
    total = sum(len(p) for p in parts)
    return count * len(sentence) / total, sentence, count


def _trigram_ratio(toks: list[str]) -> float:
    grams = list(zip(toks, toks[1:], toks[2:], strict=False))
    return len(set(grams)) / len(grams) if grams else 1.0


def is_degenerate(text: str) -> DegenerateResult:
    """Score ``text`` for repetition loops; ``flag`` is True when it is degenerate."""
    toks = tokens(text or "")
    if len(toks) < MIN_TOKENS:
        return DegenerateResult(False, 0.0, "")
    candidates: list[tuple[float, str]] = []

    coverage, period, repeats, start = _periodic_run(toks)
    if repeats:
        phrase = " ".join(toks[start : start + period])
        candidates.append(
            (
                min(1.0, coverage * 1.25),
                f"the {period}-token sequence {phrase!r} repeats {repeats} times back to back "
                f"({coverage:.0%} of the output)",
            )
        )

    share, sentence, count = _repeated_sentence(text)
    if count >= 3:
        candidates.append(
            (
                min(1.0, share * 1.1),
                f"the sentence {sentence[:60]!r} occurs {count} times ({share:.0%} of the output)",
            )
        )

    if len(toks) >= 60:
        ratio = _trigram_ratio(toks)
        # ratio 0.35 -> 0, ratio 0.10 -> 1
        strength = max(0.0, min(1.0, (0.35 - ratio) / 0.25))
        candidates.append((strength, f"only {ratio:.0%} of its word trigrams are distinct"))

    if not candidates:
        return DegenerateResult(False, 0.0, "")
    score, reason = max(candidates, key=lambda c: c[0])
    score = round(score, 3)
    flag = score >= FLAG_AT
    return DegenerateResult(flag, score, reason if flag else "")
