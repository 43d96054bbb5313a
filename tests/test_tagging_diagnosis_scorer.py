"""diagnosis: the numpy scorer gives what the spaCy pipeline gives, from the weights shipped with it."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import spacy
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
