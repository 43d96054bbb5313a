"""diagnosis: the numpy scorer gives what the spaCy pipeline gives, from the weights shipped with it."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pytest
import spacy
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from spacy.attrs import ORTH
from spacy.language import Language

from analytics.analysis.tagging.diagnosis_model import (
    LABEL,
    MAX_SENTENCE_CHARS,
    MIN_SENTENCE_CHARS,
    MODEL_DIR,
    WEIGHTS_FILE,
    BowWeights,
    DiagnosisModel,
    sentences,
    token_keys,
)


@pytest.fixture(scope="module")
def model() -> DiagnosisModel:
    return DiagnosisModel()


@pytest.fixture(scope="module")
def pipeline(model: DiagnosisModel) -> Language:
    return model.pipeline()


def _varied_sentences() -> list[str]:
    """The training examples, plus what a tokenizer can trip over: repeats, affixes,
    exceptions, URLs, code, non-ASCII, runs of whitespace, an empty and a long text."""
    rows = (MODEL_DIR.parent / "diagnosis_examples.jsonl").read_text().splitlines()
    texts = [json.loads(line)["text"] for line in rows if line.strip()]
    texts += [
        "", " ", "x", "oom oom oom OOM Oom oom.", "It's the U.S. build, e.g. v2.1 (not 2.0)!",
        "Don't -- can't -- won't: ':)' and (^_^) at 10 a.m.", "See https://example.com/a?b=1#c.",
        "`torch.compile` fails: `KeyError: 'model.layers.0'` in ```python\nx = 1\n```",
        "Die Latenz steigt um 40 % — weil der KV-Cache voll ist… 日本語のテキスト 🚀🚀",
        "tabs\there  and   spaces \n newline", "!!! ??? ... ,,, ;;;", "a" * 1000,
        " ".join(f"tok{i % 37}" for i in range(300)),
    ]
    rnd = random.Random(0)
    words = " ".join(texts).split()
    texts += [" ".join(rnd.choices(words, k=rnd.randint(1, 60))) for _ in range(300)]
    return texts


def test_the_scorer_gives_the_pipelines_probabilities(model: DiagnosisModel, pipeline: Language) -> None:
    texts = _varied_sentences()
    assert len(texts) > 500
    expected = [doc.cats[LABEL] for doc in pipeline.pipe(texts, batch_size=256)]
    # Bit for bit (the same float32 operations in the same order): no rounded score can move.
    assert model.raw_scores(texts) == expected


def test_a_tagger_s_classifier_scores_with_the_tagger_s_tokenizer_as_with_its_own(
    model: DiagnosisModel,
) -> None:
    """The Tagger's tokenizer, set up as the pipeline's, is used instead of loading that
    one again; the scores are the same. A tokenizer set up otherwise is not used."""
    from analytics.analysis.tagging import Tagger

    tagger = Tagger()
    tagger.warm_up()
    assert tagger.diagnosis is not None
    assert tagger.diagnosis.load()[0] is tagger.nlp.tokenizer
    texts = _varied_sentences()
    assert tagger.diagnosis.raw_scores(texts) == model.raw_scores(texts)
    other = spacy.blank("en").tokenizer
    other.add_special_case("oom", [{"ORTH": "o"}, {"ORTH": "om"}])
    alone = DiagnosisModel()
    assert alone.load(other)[0] is not other
    assert alone.raw_scores(texts) == model.raw_scores(texts)


def test_the_exported_weights_are_the_shipped_pipelines(pipeline: Language) -> None:
    """A model retrained or replaced without ``--export-only`` fails here."""
    shipped = BowWeights.load(MODEL_DIR / WEIGHTS_FILE)
    current = BowWeights.from_pipeline(pipeline)
    assert shipped.labels == current.labels
    assert np.array_equal(shipped.b, current.b)
    assert np.array_equal(shipped.W, current.W)


@pytest.mark.parametrize("exclusive, ngrams", [(False, 1), (True, 2)])
def test_only_what_the_scorer_computes_is_exported(exclusive: bool, ngrams: int) -> None:
    nlp = spacy.blank("en")
    bow = {"@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": exclusive,
           "ngram_size": ngrams, "no_output_layer": False}
    nlp.add_pipe("textcat", config={"model": bow})
    with pytest.raises(ValueError, match="cannot export"):
        BowWeights.from_pipeline(nlp)


_LAZY_SENTENCE = re.compile(r"[^\n]+?(?:[.!?](?=\s)|\n|$)")


def _reference_sentences(text: str) -> list[tuple[int, int]]:
    """``sentences`` as first written: the lazy pattern, whitespace stripped char by char."""
    blanked = re.sub(r"```.*?(?:```|$)", lambda m: " " * len(m.group(0)), text, flags=re.S)
    spans = []
    for m in _LAZY_SENTENCE.finditer(blanked):
        a, b = m.span()
        while a < b and blanked[a].isspace():
            a += 1
        while b > a and blanked[b - 1].isspace():
            b -= 1
        if b - a >= MIN_SENTENCE_CHARS:
            spans.append((a, min(b, a + MAX_SENTENCE_CHARS)))
    return spans


def test_sentences_match_the_lazy_pattern() -> None:
    rnd = random.Random(0)
    pieces = ["word", "ab cd", " ", "  ", ".", "!", "?", ". ", "!\n", "\n", "\n\n", "\t", "```",
              "\u00a0", "\u2028", "e.g.", "x" * 50]
    unended = [p for p in pieces if not any(ch in p for ch in "\n.!?")]
    for _ in range(3000):
        for choices in (pieces, unended):  # texts without a sentence end take a short cut
            text = "".join(rnd.choices(choices, k=rnd.randint(0, 40)))
            assert sentences(text) == _reference_sentences(text), repr(text)


# --- sentences too low to score (diagnosis_bound) ------------------------------------

_PIECES = [
    "oom", "OOM", "because", "the", "KV-cache", "e.g.", "U.S.", "a.m.", "don't", "can't", "(^_^)",
    ":)", "':)'", "--", "...", "!!", "v2.1", "(not", "2.0)!", "https://example.com/a?b=1#c.",
    "`torch.compile`", "'model.layers.0'", "40%", "—", "weil", "日本語の", "🚀🚀", "x" * 30, "",
    "tok", "it's", "we're", "\"quoted\"", "[1]", "{a:b}", "C++", "$HOME/x", "#3", "n't", "'s",
]


def _logit(weights: BowWeights, keys: list[np.ndarray]) -> np.ndarray:
    """The classifier's own float32 logit of each sentence (``diagnosis`` minus the other)."""
    scores = weights._scores(keys).astype(np.float64)
    mine = weights.labels.index(LABEL)
    return scores[:, mine] - scores[:, 1 - mine]


_MODEL = DiagnosisModel()
"""(hypothesis calls the test below many times: one model for all of them)"""


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=80))
def test_a_single_spaced_sentence_has_its_pieces_tokens(pieces: list[str]) -> None:
    """What the bound rests on: the tokens of a sentence whose only whitespace is single
    spaces after its first piece are those of its pieces, each tokenised alone (special
    cases, affixes, URLs, emoticons and all), so its logit is the sum of its pieces' sums."""
    tokenizer, weights = _MODEL.load()
    bound = _MODEL.piece_weights()
    assert bound is not None
    sentence = " ".join(pieces)
    if sentence[:1] == " " or "  " in sentence:  # a space is a token there: no estimate
        assert bound.logits([sentence]) == [None]
        return
    whole = sorted(tokenizer(sentence).to_array(ORTH).tolist())
    parts = sorted(k for p in pieces for k in tokenizer(p).to_array(ORTH).tolist())
    assert whole == parts
    (estimate,) = bound.logits([sentence])
    assert estimate is not None
    assume(whole)  # (the classifier scores no empty sentence)
    keys = [tokenizer(sentence).to_array(ORTH)]
    assert abs(estimate - float(_logit(weights, keys)[0])) <= bound.margin


def test_piece_sums_are_within_the_margin_of_the_classifiers_logit(model: DiagnosisModel) -> None:
    tokenizer, weights = model.load()
    bound = model.piece_weights()
    assert bound is not None and 0 < bound.margin < 0.1
    texts = _varied_sentences()
    estimates = bound.logits(texts)
    exact = _logit(weights, token_keys(tokenizer, texts))
    single = [i for i, t in enumerate(texts) if t.isprintable() and "  " not in t and t[:1] != " "]
    assert len(single) > 400
    for i, (text, estimate) in enumerate(zip(texts, estimates, strict=True)):
        if i in single:
            assert estimate is not None and abs(estimate - exact[i]) <= bound.margin, text
        else:  # tabs, newlines, runs of spaces, other spaces: scored as they are
            assert estimate is None, text
    # the margin is what float32 rounding can do, not slack: the sums are far closer
    assert max(abs(e - exact[i]) for i, e in enumerate(estimates) if e is not None) < bound.margin / 100


def test_forgetting_the_pieces_changes_no_logit(
    model: DiagnosisModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analytics.analysis.tagging import diagnosis_bound
    from analytics.analysis.tagging.diagnosis_bound import PieceWeights

    tokenizer, weights = model.load()
    texts = [t for t in _varied_sentences() if t.isprintable() and "  " not in t and t[:1] != " "]
    expected = PieceWeights(tokenizer, weights, LABEL, True).logits(texts)
    monkeypatch.setattr(diagnosis_bound, "PIECES_REMEMBERED", 50)
    small = PieceWeights(tokenizer, weights, LABEL, True)
    assert [small.logits(texts[i : i + 7]) for i in range(0, len(texts), 7)] == [
        expected[i : i + 7] for i in range(0, len(texts), 7)
    ]
    assert len(small._sums) <= 50 + 7 * 60


def test_the_best_sentences_reaching_a_threshold_are_those_of_all_sentences() -> None:
    """``best(at_least=t)`` skips sentences that cannot reach ``t``: every text whose best
    sentence reaches it has the same best sentence and probability as with all scored."""
    texts = _varied_sentences()
    rnd = random.Random(1)
    texts += [". ".join(rnd.sample(texts, 3)) for _ in range(300)]  # several sentences each
    threshold = DiagnosisModel().settings.threshold
    everything = DiagnosisModel().best(texts)
    reaching = DiagnosisModel().best(texts, at_least=threshold)
    skipped = 0
    for text, full, part in zip(texts, everything, reaching, strict=True):
        if full is not None and full.probability >= threshold:
            assert part == full, text
        else:
            assert part is None or part.probability < threshold, text
            skipped += part is None and full is not None
    assert sum(f is not None and f.probability >= threshold for f in everything) > 50
    assert skipped > 100  # (the bound is used: most sentences are no diagnosis)


def test_the_logit_a_threshold_needs() -> None:
    from analytics.analysis.tagging.diagnosis_bound import needed_logit

    model = DiagnosisModel()
    a, b = model.settings.platt
    needed = needed_logit(0.62, (a, b), 1e-6)
    assert needed is not None
    raw = 1 / (1 + math.exp(-needed))
    assert model.calibrate(raw) == pytest.approx(0.62, abs=1e-9)
    assert needed_logit(0.62, (-a, b), 1e-6) is None  # falls as the logit rises
    assert needed_logit(0.62, (1.0, 20.0), 1e-6) is None  # the clipped lowest score reaches it
    assert needed_logit(1.0, (a, b), 1e-6) is None


def test_sentences_scored_from_their_pieces_keys_score_as_tokenised() -> None:
    """The sentences that may reach the threshold are scored from their pieces' keys where
    the pieces are known: bit for bit the scores of their own tokens."""
    texts = _varied_sentences()
    threshold = DiagnosisModel().settings.threshold
    model = DiagnosisModel()
    reaching = model.raw_scores_reaching(texts, threshold)
    exact = DiagnosisModel().raw_scores(texts)
    pieces = model.piece_weights()
    assert pieces is not None
    keyed = [t for t, s in zip(texts, reaching, strict=True) if s is not None and pieces.keys(t) is not None]
    assert len(keyed) > 20
    assert [s for s in reaching if s is not None] == [
        e for e, s in zip(exact, reaching, strict=True) if s is not None
    ]
