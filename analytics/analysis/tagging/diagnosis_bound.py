"""Sentences the diagnosis classifier cannot score high enough, found without tokenising them.

The classifier (``diagnosis_model.BowWeights``) is linear in its tokens: with two classes, a
sentence's logit ``d = s_diagnosis - s_other`` is the bias difference plus, for every token,
the difference of its two weight rows (``PieceWeights.diff`` at both hashes of its ORTH key).

spaCy's tokenizer cuts a text at whitespace and tokenises each piece between on its own (its
cache is per piece); a single space between two pieces is no token. Special cases are matched
over the Doc afterwards, but replaced only where the matched tokens' text is a rule, and no
rule holds a space but the lone ``" "``. So a sentence whose only whitespace is single ASCII
spaces after its first piece (``str.isprintable`` says the rest: every other whitespace
character is a control or separator character) has the tokens of its pieces ``s.split(" ")``, each tokenised alone, and
``d`` is the bias plus the sum of its pieces' sums. Pieces are words and repeat: each piece's
sum is remembered, and a sentence's ``d`` costs a split and a dictionary lookup per piece, a
third of tokenising it; so are its tokens' keys, which give a sentence that must be scored
its keys without tokenising it either.

That ``d`` is summed in float64 in another order than the classifier's float32 sums, which
differ from the exact sum by at most ``PieceWeights.margin`` (a bound on the rounding of up
to ``MAX_SENTENCE_CHARS`` tokens' terms). A sentence whose ``d`` is below the logit a score
needs by more than the margin cannot reach it: the classifier need not score it.
"""

from __future__ import annotations

import math

import numpy as np
from spacy.tokenizer import Tokenizer

from analytics.analysis.tagging.diagnosis_model import (
    MAX_SENTENCE_CHARS,
    BowWeights,
    Keys,
    murmurhash3_32,
    token_keys,
)

PIECES_REMEMBERED = 100_000
"""Distinct pieces whose sums and keys are remembered (then forgotten all at once): some
30 MB at most in the process that tags."""
_U = 2.0**-24
"""float32's unit roundoff."""


class PieceWeights:
    """The logit of sentences of single-spaced pieces, from the sums of their pieces."""

    def __init__(self, tokenizer: Tokenizer, weights: BowWeights, label: str, joinable: bool) -> None:
        if len(weights.labels) != 2:
            raise ValueError("a logit is the difference of two classes' scores")
        mine = weights.labels.index(label)
        other = 1 - mine
        self.tokenizer, self.joinable = tokenizer, joinable
        self.diff = weights.W[:, mine].astype(np.float64) - weights.W[:, other].astype(np.float64)
        self.bias = float(weights.b[mine]) - float(weights.b[other])
        self._length = np.uint32(len(weights.W))
        self.margin = _rounding_bound(weights)
        self._sums: dict[str, float] = {}
        self._keys: dict[str, bytes] = {}
        """The ORTH keys of each piece's tokens (those of ``_sums``), as the bytes of their
        uint64 array (a fifth of the memory of an array object each)."""

    def logits(self, sentences: list[str]) -> list[float | None]:
        """For each sentence, its logit as the sum of its pieces' (within ``margin`` of the
        classifier's); None for one holding other whitespace than single spaces between
        pieces (a leading space is a token of its own, a trailing one is none)."""
        sums = self._sums
        get = sums.__getitem__
        bias = self.bias
        out: list[float | None] = []
        unknown: dict[str, None] = {}
        later: list[tuple[int, list[str]]] = []
        for i, sentence in enumerate(sentences):
            if not sentence.isprintable() or "  " in sentence or sentence[:1] == " ":
                out.append(None)
                continue
            pieces = sentence.split(" ")
            try:
                out.append(bias + sum(map(get, pieces)))
            except KeyError:  # a piece not seen yet: summed once all of them are learnt
                out.append(None)
                later.append((i, pieces))
                unknown.update(dict.fromkeys(p for p in pieces if p not in sums))
        if later:
            if len(sums) + len(unknown) > PIECES_REMEMBERED:
                sums.clear()
                self._keys.clear()
                unknown = {p: None for _, pieces in later for p in pieces}
            self._learn(list(unknown))
            for i, pieces in later:
                out[i] = bias + sum(map(get, pieces))
        return out

    def _learn(self, pieces: list[str]) -> None:
        """Remember the sum of each piece's tokens' terms (the pieces tokenised together)."""
        keys = token_keys(self.tokenizer, pieces, self.joinable)
        flat = np.concatenate(keys) if keys else np.empty(0, dtype=np.uint64)
        terms = self.diff[murmurhash3_32(flat, 0) % self._length]
        terms += self.diff[murmurhash3_32(flat, 1) % self._length]
        lengths = np.fromiter(map(len, keys), dtype=np.intp, count=len(keys))
        ends = np.cumsum(lengths)
        running = np.concatenate(([0.0], np.cumsum(terms)))
        totals = running[ends] - running[ends - lengths]
        self._sums.update(zip(pieces, totals.tolist(), strict=True))
        self._keys.update(zip(pieces, (k.tobytes() for k in keys), strict=True))

    def keys(self, sentence: str) -> Keys | None:
        """The ORTH keys of the tokens of a sentence ``logits`` gave a logit, from its
        pieces' (in another order than its Doc's: the classifier sorts them), or None when
        some piece is forgotten since."""
        try:
            joined = b"".join(map(self._keys.__getitem__, sentence.split(" ")))
        except KeyError:
            return None
        return np.frombuffer(joined, dtype=np.uint64)


def _rounding_bound(weights: BowWeights) -> float:
    """How far the classifier's logit can be from the exact sum of its terms, for a sentence
    of at most ``MAX_SENTENCE_CHARS`` characters, so at most as many tokens (a token is one
    character or more, and tokens do not overlap). Each class's score adds the bias and two
    terms per distinct token (count times a weight, each product rounded once) in float32:
    at most ``m = 2n + 1`` roundings, each off by at most ``u`` times the partial sum, so the
    sum is within ``m u / (1 - m u)`` of the sum of the terms' magnitudes (``|b| + 2n max|W|``)
    of the exact one; the logit is the difference of two such sums. The softmax and the
    logarithm of its float32 result add well under a thousandth, added as such."""
    n = MAX_SENTENCE_CHARS
    m = 2 * n + 1
    gamma = m * _U / (1 - m * _U)
    magnitude = float(np.abs(weights.b).max()) + 2 * n * float(np.abs(weights.W).max())
    return 2 * gamma * magnitude + 1e-3


def needed_logit(threshold: float, platt: tuple[float, float], clip: float) -> float | None:
    """The classifier's logit a sentence needs for its calibrated probability
    (``sigmoid(a * logit(raw) + b)``, ``raw`` clipped to ``[clip, 1 - clip]``) to reach
    ``threshold``; None when no logit is too low (the clipped raw score reaches it) or the
    calibration does not rise with the logit."""
    a, b = platt
    if a <= 0 or not 0 < threshold < 1:
        return None
    needed = (math.log(threshold / (1 - threshold)) - b) / a
    if needed <= math.log(clip / (1 - clip)):
        return None
    return needed
