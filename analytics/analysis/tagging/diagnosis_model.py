"""The learned half of the ``diagnosis`` tag: a small spaCy text classifier over sentences.

The rules (``patterns/prose.jsonl``) catch cue phrases ("the root cause is", "because");
this model catches causes stated without them ("EP8 is slower: every MoE layer does an
all-to-all over PCIe"). It scores the sentences of an assistant message (all of them, unless
the settings name a word prefilter); the message score is the best sentence's calibrated
probability.

Trained by ``scripts/train_diagnosis.py`` (dev gold + ``models/diagnosis_examples.jsonl``);
the pipeline and its calibration live in ``models/diagnosis/``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import spacy
from spacy.language import Language

from analytics.analysis.tagging.components import RuleError, quoted_regions

MODEL_DIR = Path(__file__).parent / "models" / "diagnosis"
SETTINGS_FILE = "tagger.json"
"""Calibration, threshold and prefilter written next to the pipeline by the training script."""
LABEL = "diagnosis"
MIN_SENTENCE_CHARS = 15
MAX_SENTENCE_CHARS = 400
CACHE_SIZE = 50_000
"""Distinct sentences whose score is remembered (per model)."""
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?](?=\s)|\n|$)")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (code fences skipped; long ones cut)."""
    blanked = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    spans: list[tuple[int, int]] = []
    for m in _SENTENCE.finditer(blanked):
        a, b = m.span()
        while a < b and blanked[a].isspace():
            a += 1
        while b > a and blanked[b - 1].isspace():
            b -= 1
        if b - a >= MIN_SENTENCE_CHARS:
            spans.append((a, min(b, a + MAX_SENTENCE_CHARS)))
    return spans


@dataclass(frozen=True)
class Settings:
    """What the training script chose by cross-validation on dev."""

    threshold: float
    """Calibrated probability at or above which a message is tagged."""
    platt: tuple[float, float]
    """``p = sigmoid(a * logit(raw) + b)``: maps the classifier's raw score to a probability."""
    prefilter: tuple[str, ...]
    """Lower-case word starts; only sentences containing one are scored (empty: all are)."""
    version: str

    @classmethod
    def read(cls, path: Path) -> Settings:
        try:
            raw = json.loads(path.read_text())
            a, b = raw["platt"]
            return cls(
                threshold=float(raw["threshold"]), platt=(float(a), float(b)),
                prefilter=tuple(raw["prefilter"]), version=str(raw["version"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RuleError(
                f"{path}: unreadable diagnosis model settings ({exc}); "
                "re-create them with `python scripts/train_diagnosis.py`"
            ) from exc


def prefilter_regex(words: tuple[str, ...]) -> re.Pattern[str] | None:
    """A sentence is scored when it contains one of ``words``; None (no words): every sentence."""
    if not words:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + ")")


def candidates(text: str, prefilter: re.Pattern[str] | None) -> list[tuple[int, int]]:
    """Spans of the sentences of ``text`` that the classifier scores: not those inside a
    quotation (a quoted log line, a ``>`` block quote: quoting is not diagnosing)."""
    quoted = quoted_regions(text)
    spans = [(a, b) for a, b in sentences(text) if not any(x <= a and b <= y for x, y in quoted)]
    if prefilter is None:
        return spans
    lower = text.lower()
    return [(a, b) for a, b in spans if prefilter.search(lower, a, b)]


@dataclass(frozen=True)
class SentenceScore:
    probability: float
    start: int
    end: int


class DiagnosisModel:
    """Loads ``models/diagnosis`` lazily; ``best(text)`` scores a message."""

    def __init__(self, path: Path = MODEL_DIR) -> None:
        self.path = path
        self.settings = Settings.read(path / SETTINGS_FILE)
        self._prefilter = prefilter_regex(self.settings.prefilter)
        self._nlp: Language | None = None
        self._cache: dict[str, float] = {}

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            if not (self.path / "config.cfg").is_file():
                raise RuleError(
                    f"{self.path}: no trained diagnosis pipeline; "
                    "train it with `python scripts/train_diagnosis.py`"
                )
            self._nlp = spacy.load(self.path)
        return self._nlp

    def calibrate(self, raw: float) -> float:
        a, b = self.settings.platt
        raw = min(max(raw, 1e-6), 1 - 1e-6)
        z = a * math.log(raw / (1 - raw)) + b
        return 1 / (1 + math.exp(-z))

    def candidates(self, text: str) -> list[tuple[int, int]]:
        """Sentence spans worth scoring (the prefilter, no tokenising)."""
        return candidates(text, self._prefilter)

    def raw_scores(self, texts: list[str]) -> list[float]:
        """The classifier's uncalibrated ``diagnosis`` score for each sentence text."""
        fresh = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if fresh:
            if len(self._cache) + len(fresh) > CACHE_SIZE:  # empty it but for what we read
                wanted = set(texts)
                self._cache = {t: s for t, s in self._cache.items() if t in wanted}
            for t, doc in zip(fresh, self.nlp.pipe(fresh, batch_size=256), strict=True):
                self._cache[t] = float(doc.cats.get(LABEL, 0.0))
        return [self._cache[t] for t in texts]

    def best(self, texts: list[str]) -> list[SentenceScore | None]:
        """For each message text: its best-scoring candidate sentence (None without one)."""
        spans = [self.candidates(t) for t in texts]
        flat = [t[a:b] for t, ss in zip(texts, spans, strict=True) for a, b in ss]
        scores = iter(self.raw_scores(flat))
        out: list[SentenceScore | None] = []
        for ss in spans:
            best: SentenceScore | None = None
            for a, b in ss:
                p = self.calibrate(next(scores))
                if best is None or p > best.probability:
                    best = SentenceScore(p, a, b)
            out.append(best)
        return out
