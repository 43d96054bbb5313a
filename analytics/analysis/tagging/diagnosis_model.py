"""The learned half of the ``diagnosis`` tag: a small spaCy text classifier over sentences.

The rules (``patterns/prose.jsonl``) catch cue phrases ("the root cause is", "because");
this model catches causes stated without them ("EP8 is slower: every MoE layer does an
all-to-all over PCIe"). It scores every sentence of an assistant message that is not quoted
(a cue-word prefilter would hide exactly the causes stated without cue words); the message
score is the best sentence's calibrated probability.

Trained by ``scripts/train_diagnosis.py`` (dev gold + ``models/diagnosis_examples.jsonl``);
the pipeline and its calibration live in ``models/diagnosis/``.

Scoring does not run the spaCy pipeline: its classifier (``spacy.TextCatBOW.v3``, unigrams) is
linear, so the pipeline's tokenizer plus the exported weights (``weights.npz``, written with the
pipeline) give the same probabilities with a few numpy operations per batch instead of thinc's
per-document work, and without loading the pipeline in every process.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import spacy
from spacy.attrs import IDX, ORTH
from spacy.language import Language
from spacy.tokenizer import Tokenizer
from spacy.vocab import Vocab

from analytics.analysis.tagging.components import RuleError, quoted_regions

if TYPE_CHECKING:
    from analytics.analysis.tagging.diagnosis_bound import PieceWeights

MODEL_DIR = Path(__file__).parent / "models" / "diagnosis"
SETTINGS_FILE = "tagger.json"
"""Calibration and threshold written next to the pipeline by the training script."""
WEIGHTS_FILE = "weights.npz"
"""The pipeline's classifier weights, exported next to it (``BowWeights.save``)."""
LABEL = "diagnosis"
MIN_SENTENCE_CHARS = 15
MAX_SENTENCE_CHARS = 400
CACHE_SIZE = 50_000
"""Distinct sentences whose score is remembered (per model)."""
RAW_CLIP = 1e-6
"""Raw scores are clipped to ``[RAW_CLIP, 1 - RAW_CLIP]`` before calibration."""
_SENTENCE = re.compile(r"[^\n](?:[^\n.!?]+|[.!?](?!\s))*(?:[.!?](?=\s)|\n|$)")
"""A sentence: one character, then everything up to and including the first newline or
``.!?`` before whitespace (or up to the end). The matches of the lazy ``[^\\n]+?`` followed
by those three endings, without trying the endings after every character (three times as fast)."""
_WHOLE = re.compile(r".+", re.S)
"""The one match of ``_SENTENCE`` in a text without ``\\n``, ``.``, ``!`` and ``?``: all of it
(``$`` ends it), found without the engine's walk over every character."""
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (code fences skipped; long ones cut)."""
    blanked = _FENCE.sub(lambda m: " " * len(m.group(0)), text) if "```" in text else text
    spans: list[tuple[int, int]] = []
    for m in (_SENTENCE if _may_end_a_sentence(blanked) else _WHOLE).finditer(blanked):
        sentence = m.group()
        stripped = sentence.strip()  # str.strip and str.isspace agree on what whitespace is
        if len(stripped) >= MIN_SENTENCE_CHARS:
            a = m.start() + len(sentence) - len(sentence.lstrip())
            spans.append((a, a + min(len(stripped), MAX_SENTENCE_CHARS)))
    return spans


def _may_end_a_sentence(text: str) -> bool:
    """``text`` holds a character that can end a match of ``_SENTENCE`` before the text's end.
    Four substring tests (``memchr``) cost a twentieth of the regex's walk over the text."""
    return "." in text or "\n" in text or "!" in text or "?" in text


@dataclass(frozen=True)
class Settings:
    """What the training script chose by cross-validation on dev."""

    threshold: float
    """Calibrated probability at or above which a message is tagged."""
    platt: tuple[float, float]
    """``p = sigmoid(a * logit(raw) + b)``: maps the classifier's raw score to a probability."""
    version: str

    @classmethod
    def read(cls, path: Path) -> Settings:
        try:
            raw = json.loads(path.read_text())
            a, b = raw["platt"]
            return cls(
                threshold=float(raw["threshold"]), platt=(float(a), float(b)),
                version=str(raw["version"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RuleError(
                f"{path}: unreadable diagnosis model settings ({exc}); "
                "re-create them with `python scripts/train_diagnosis.py`"
            ) from exc


def candidates(text: str, quoted: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """Spans of the sentences of ``text`` that the classifier scores: not those inside a
    quotation (a quoted log line, a ``>`` block quote: quoting is not diagnosing).
    ``quoted``: ``quoted_regions(text)``, when the caller has it already."""
    spans = sentences(text)
    if not spans:
        return spans
    if quoted is None:
        quoted = quoted_regions(text)
    if quoted:
        spans = [(a, b) for a, b in spans if not any(x <= a and b <= y for x, y in quoted)]
    return spans


# --- tokens ------------------------------------------------------------------------

JOIN = "\n\n"
"""What ``token_keys`` puts between the texts it tokenises together."""
JOIN_CHARS = 8_000
"""Texts are tokenised together up to about this many characters (a Doc grows by copying)."""


def joinable(tokenizer: Tokenizer) -> bool:
    """``tokenizer`` tokenises texts joined with ``JOIN`` as it tokenises each alone (given
    that they neither start nor end with whitespace; see ``token_keys``): no special case but
    a lone ``"\n"`` holds a newline, so none can match across the tokens of a ``JOIN``."""
    return not any("\n" in rule for rule in tokenizer.rules if rule != "\n")


def token_keys(tokenizer: Tokenizer, texts: list[str], join: bool = True) -> list[Keys]:
    """``tokenizer(t).to_array(ORTH)`` for each of ``texts``, most of them tokenised
    together: one Doc (and one ``to_array``) for many short texts costs a third less.

    Exact: the tokenizer cuts a text at whitespace and tokenises each piece alone (its
    cache is per piece); a text that neither starts nor ends with whitespace is a run of
    whole pieces of the joined text, all of whose tokens start inside the text's own
    characters (``IDX``), and ``JOIN`` is whitespace, so no piece spans two texts. Special
    cases are then matched over the whole Doc, but none can match across a ``JOIN``
    (``joinable``); those inside a text are found there as in the text alone. Texts
    starting or ending with whitespace (a cut sentence may), and all texts when ``join``
    is false, are tokenised alone."""
    out: list[Keys | None] = [None] * len(texts)
    group: list[int] = []
    size = 0

    def flush() -> None:
        bounds: list[int] = []  # start and end of each text in the joined one
        offset = 0
        for i in group:
            bounds += (offset, offset + len(texts[i]))
            offset += len(texts[i]) + len(JOIN)
        table = tokenizer(JOIN.join(texts[i] for i in group)).to_array([ORTH, IDX])
        cut = np.searchsorted(table[:, 1], bounds).tolist()
        keys = np.ascontiguousarray(table[:, 0])
        for k, i in enumerate(group):
            out[i] = keys[cut[2 * k] : cut[2 * k + 1]]
        group.clear()

    for i, text in enumerate(texts):
        if not join or not text or text[0].isspace() or text[-1].isspace():
            out[i] = tokenizer(text).to_array(ORTH)
            continue
        group.append(i)
        size += len(text)
        if size >= JOIN_CHARS:
            flush()
            size = 0
    if group:
        flush()
    return [k for k in out if k is not None]


# --- the classifier without thinc ---------------------------------------------------

Keys = npt.NDArray[np.uint64]
Floats = npt.NDArray[np.float32]
_BOW_SOFTMAX = "with_cpu(extract_ngrams>>resizable(sparse_linear))>>with_cpu(softmax_activation)"
"""The thinc model of ``spacy.TextCatBOW.v3`` with exclusive classes and an output layer."""
DOCS_PER_STEP = 1024
"""Documents scored together (bounds the padded arrays of ``BowWeights.probabilities``)."""


def murmurhash3_32(keys: Keys, seed: int) -> npt.NDArray[np.uint32]:
    """MurmurHash3_x86_32 of each uint64 key (its two 32-bit halves, low first), as thinc's
    ``SparseLinear`` hashes a feature key into its weight table."""
    h = np.full(keys.shape, seed, dtype=np.uint32)
    for half in (keys & np.uint64(0xFFFFFFFF), keys >> np.uint64(32)):
        k = half.astype(np.uint32) * np.uint32(0xCC9E2D51)
        k = (k << np.uint32(15)) | (k >> np.uint32(17))
        h ^= k * np.uint32(0x1B873593)
        h = (h << np.uint32(13)) | (h >> np.uint32(19))
        h = h * np.uint32(5) + np.uint32(0xE6546B64)
    h ^= np.uint32(8)  # the key's length in bytes
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


@dataclass(frozen=True)
class BowWeights:
    """The linear layer of a ``spacy.TextCatBOW.v3`` classifier with exclusive classes and
    unigrams: a document's class scores are ``b`` plus, for each distinct token ORTH key (in
    ascending order), its count times ``W[murmur(key, 0) % length]`` and then times
    ``W[murmur(key, 1) % length]``, all in float32; the probabilities are their softmax.

    ``probabilities`` adds in exactly that order, so its results are bit for bit those of
    thinc's ``SparseLinear`` (v2 indexing) and ``softmax_activation``: a tag's rounded score
    cannot move."""

    W: Floats
    """(length, classes) float32: row ``i`` holds hash index ``i``'s weight for each class
    (thinc keeps class after class; a row per index gathers both classes at once)."""
    b: Floats
    """(classes,) float32"""
    labels: tuple[str, ...]

    @classmethod
    def from_pipeline(cls, nlp: Language) -> BowWeights:
        """The weights of ``nlp``'s ``textcat``; refuses a model this scorer would get wrong."""
        textcat = nlp.get_pipe("textcat")
        model = textcat.model  # type: ignore[attr-defined]
        if model.name != _BOW_SOFTMAX:
            raise ValueError(f"cannot export a {model.name} classifier, only {_BOW_SOFTMAX}")
        linear = model.get_ref("output_layer")
        ngrams = next(layer for layer in model.walk() if layer.name == "extract_ngrams")
        if linear.attrs["v1_indexing"] or ngrams.attrs["ngram_size"] != 1 or ngrams.attrs["attr"] != ORTH:
            raise ValueError("cannot export a classifier of n-grams, other attributes or v1 indexing")
        n_classes, length = linear.get_dim("nO"), linear.get_dim("length")
        return cls(
            W=np.ascontiguousarray(linear.get_param("W").reshape(n_classes, length).T, dtype=np.float32),
            b=np.asarray(linear.get_param("b"), dtype=np.float32),
            labels=tuple(textcat.labels),  # type: ignore[attr-defined]
        )

    def save(self, path: Path) -> None:
        # Compressed: only the rows of the training tokens are non-zero.
        with path.open("wb") as fh:
            np.savez_compressed(fh, W=self.W, b=self.b, labels=np.array(self.labels))

    @classmethod
    def load(cls, path: Path) -> BowWeights:
        with np.load(path) as data:
            return cls(
                W=np.ascontiguousarray(data["W"], dtype=np.float32), b=data["b"].astype(np.float32),
                labels=tuple(str(x) for x in data["labels"]),
            )

    def probabilities(self, docs: list[Keys]) -> Floats:
        """(docs, classes) class probabilities of documents given as arrays of token keys.
        A document without tokens gets the softmax of the bias, as in a spaCy batch with
        other documents (a batch of only empty ones gets zeros there; sentences are never
        empty)."""
        out = np.empty((len(docs), len(self.labels)), dtype=np.float32)
        for lo in range(0, len(docs), DOCS_PER_STEP):
            step = docs[lo : lo + DOCS_PER_STEP]
            out[lo : lo + len(step)] = self._softmax(self._scores(step))
        return out

    def _scores(self, docs: list[Keys]) -> Floats:
        """Class scores (docs, classes), summed in thinc's order. Each document's keys are
        sorted in a padded row; the two terms of each distinct key go to ``terms`` at its
        position in the row (zeros elsewhere: adding 0 changes no float), and the bias plus
        one slice of ``terms`` after another gives every document's sum in that order."""
        lengths = np.fromiter(map(len, docs), dtype=np.intp, count=len(docs))
        n, width, n_classes = len(docs), int(lengths.max()), len(self.labels)
        real = np.arange(width) < lengths[:, None]
        keys = np.full((n, width), np.iinfo(np.uint64).max, dtype=np.uint64)
        keys[real] = np.concatenate(docs)
        keys.sort(axis=1)  # the padding sorts last
        first = real  # the first of each run of equal keys
        first[:, 1:] &= keys[:, 1:] != keys[:, :-1]
        at = np.flatnonzero(first)
        row, col = np.divmod(at, width)
        run_end = np.append(col[1:], 0)
        last_in_row = np.append(row[1:] != row[:-1], True)
        run_end[last_in_row] = lengths[row[last_in_row]]
        counts = (run_end - col).astype(np.float32)[:, None]
        distinct = keys.ravel()[at]
        terms = np.zeros((2 * width, n, n_classes), dtype=np.float32)  # [2 * col + seed, row]
        for seed in (0, 1):
            idx = murmurhash3_32(distinct, seed) % np.uint32(len(self.W))
            terms.reshape(-1, n_classes)[(2 * col + seed) * n + row] = self.W[idx] * counts
        scores = np.repeat(self.b[None, :], n, axis=0)
        for term in terms:  # a plain loop: np.add.reduce may add pairwise, accumulate is slow here
            scores += term
        return scores

    @staticmethod
    def _softmax(x: Floats) -> Floats:
        """thinc's ``Ops.softmax``, operation for operation."""
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        e /= e.sum(axis=-1, keepdims=True)
        return e


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
        self._loaded: tuple[Tokenizer, BowWeights] | None = None
        self._joinable = False
        """The tokenizer allows ``token_keys`` to tokenise texts together (set on loading)."""
        self._cache: dict[str, float] = {}
        self._pieces: PieceWeights | None = None
        """Logits of sentences from their pieces' (``diagnosis_bound``), once loaded."""

    def load(self, like: Tokenizer | None = None) -> tuple[Tokenizer, BowWeights]:
        """The pipeline's own tokenizer (not the whole pipeline: a third of the load time)
        and its exported classifier weights: all that scoring needs. Loaded on first use
        (``Tagger.warm_up`` calls it to load them before forking). ``like``: a tokenizer
        loaded already (the Tagger's), used instead when it is set up as the pipeline's
        is (the same serialised settings: a blank English pipeline's, as a rule), which
        saves loading its 2,700 special cases again (a tenth of a second)."""
        if self._loaded is None:
            weights = self.path / WEIGHTS_FILE
            if not (self.path / "tokenizer").is_file() or not weights.is_file():
                raise RuleError(
                    f"{self.path}: no trained diagnosis pipeline with exported weights; "
                    "train it with `python scripts/train_diagnosis.py` "
                    "(or export the weights of the one there with `--export-only`)"
                )
            saved = (self.path / "tokenizer").read_bytes()
            if like is not None and like.to_bytes(exclude=["vocab"]) == saved:
                tokenizer = like
            else:
                tokenizer = Tokenizer(Vocab()).from_bytes(saved)
            self._joinable = joinable(tokenizer)
            self._loaded = (tokenizer, BowWeights.load(weights))
        return self._loaded

    def piece_weights(self) -> PieceWeights | None:
        """The logits of sentences from their pieces' (None for a classifier of other than
        two classes)."""
        from analytics.analysis.tagging.diagnosis_bound import PieceWeights

        tokenizer, weights = self.load()
        if self._pieces is None and len(weights.labels) == 2:
            self._pieces = PieceWeights(tokenizer, weights, LABEL, self._joinable)
        return self._pieces

    def pipeline(self) -> Language:
        """The trained spaCy pipeline itself: scoring does not use it, the tests that the
        exported weights and ``raw_scores`` agree with it do."""
        return spacy.load(self.path)

    def calibrate(self, raw: float) -> float:
        a, b = self.settings.platt
        raw = min(max(raw, RAW_CLIP), 1 - RAW_CLIP)
        z = a * math.log(raw / (1 - raw)) + b
        return 1 / (1 + math.exp(-z))

    def raw_scores(self, texts: list[str], keyed: dict[str, Keys] | None = None) -> list[float]:
        """The classifier's uncalibrated ``diagnosis`` score for each sentence text: the
        pipeline's ``doc.cats[LABEL]``. ``keyed``: the token keys of some of them, known
        already (in any order), which are then not tokenised."""
        fresh = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if fresh:
            if len(self._cache) + len(fresh) > CACHE_SIZE:  # empty it but for what we read
                wanted = set(texts)
                self._cache = {t: s for t, s in self._cache.items() if t in wanted}
            tokenizer, weights = self.load()
            keyed = keyed or {}
            unkeyed = [t for t in fresh if t not in keyed]
            tokenised = iter(token_keys(tokenizer, unkeyed, self._joinable))
            keys = [keyed[t] if t in keyed else next(tokenised) for t in fresh]
            probs = weights.probabilities(keys)[:, weights.labels.index(LABEL)].tolist()
            self._cache.update(zip(fresh, probs, strict=True))
        return [self._cache[t] for t in texts]

    def raw_scores_reaching(self, texts: list[str], at_least: float) -> list[float | None]:
        """``raw_scores``, but None for the sentences whose calibrated probability cannot
        reach ``at_least``: those the sums of their pieces show to be too low
        (``diagnosis_bound``), which are not tokenised and scored. The others are scored
        from their pieces' keys where they have them."""
        from analytics.analysis.tagging.diagnosis_bound import needed_logit

        needed = needed_logit(at_least, self.settings.platt, RAW_CLIP)
        pieces = self.piece_weights() if needed is not None else None
        if needed is None or pieces is None:
            return list(self.raw_scores(texts))
        cache = self._cache
        fresh = list(dict.fromkeys(t for t in texts if t not in cache))
        floor = needed - pieces.margin
        hopeless: set[str] = set()
        keyed: dict[str, Keys] = {}
        for t, d in zip(fresh, pieces.logits(fresh), strict=True):
            if d is None:
                continue
            if d < floor:
                hopeless.add(t)
            elif (keys := pieces.keys(t)) is not None:
                keyed[t] = keys
        scores = iter(self.raw_scores([t for t in texts if t not in hopeless], keyed))
        return [None if t in hopeless else next(scores) for t in texts]

    def best(
        self,
        texts: list[str],
        quoted: Sequence[list[tuple[int, int]] | None] | None = None,
        at_least: float | None = None,
    ) -> list[SentenceScore | None]:
        """For each message text: its best-scoring candidate sentence (None without one).
        ``quoted``: for each text its ``quoted_regions``, or None where not known (the
        Tagger found them for the prose rules already). ``at_least``: only a probability
        this high matters to the caller; sentences that cannot reach it are not scored
        (``raw_scores_reaching``), and a text none of whose sentences can has None."""
        if quoted is None:
            quoted = [None] * len(texts)
        spans = [candidates(t, q) for t, q in zip(texts, quoted, strict=True)]
        flat = [t[a:b] for t, ss in zip(texts, spans, strict=True) for a, b in ss]
        raw = self.raw_scores(flat) if at_least is None else self.raw_scores_reaching(flat, at_least)
        scores = iter(raw)
        out: list[SentenceScore | None] = []
        for ss in spans:
            best: SentenceScore | None = None
            for a, b in ss:
                score = next(scores)
                if score is None:
                    continue
                p = self.calibrate(score)
                if best is None or p > best.probability:
                    best = SentenceScore(p, a, b)
            out.append(best)
        return out
