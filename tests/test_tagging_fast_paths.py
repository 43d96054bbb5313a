"""The fast paths of the tagger and the log scanner give what the plain ones give."""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analytics.analysis.literals import AnyLiteral, literal_trie
from analytics.analysis.tagging import triggers
from analytics.analysis.tagging.components import (
    _QUOTE_MARKS,
    _QUOTED_LINE,
    PATTERNS_DIR,
    _quoted_line,
    prefilter_steps,
    quoted_regions,
    read_jsonl,
)
from analytics.analysis.tagging.polling import _TIME, _TIMEOUT
from analytics.analysis.tagging.tools import ToolRules
from analytics.analysis.tagging.triggers import Step

if TYPE_CHECKING:
    from analytics.analysis.tagging import Tagger

PIECES = [
    "`", "```", '"', "“", "”", "'", "\n", "\n\n", " ", "\t", ">", "[2024-01-01", "INFO",
    "WARNING", "ERROR", "DEBUG", "2024-01-01 12:", "2024-01-01T12:", "a", "x", "it's", "1", "é",
    "timed out", "TIME", "tıme", "İ",
]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join) | st.text(max_size=60)


@given(texts)
@settings(max_examples=400, deadline=None)
def test_quoted_regions_are_the_joined_patterns_matches(text: str) -> None:
    joined = re.compile(
        _QUOTE_MARKS.pattern.replace("'(?<![A-Za-z]')", "(?<![A-Za-z])'")
        + "|" + _QUOTED_LINE.pattern,
        re.S | re.M,
    )
    assert quoted_regions(text) == [m.span() for m in joined.finditer(text)]


@given(st.sets(st.sampled_from(["ab", "abc", "b", "x.y", "[a", "Fatal", "fatal", ""]), max_size=5),
       texts)
@settings(max_examples=300, deadline=None)
def test_literal_trie_finds_any_word(words: set[str], text: str) -> None:
    found = re.compile(literal_trie(words)).search(text)
    assert (found is not None) == any(w in text for w in words)
    if found is not None:
        assert found.start() == min(text.find(w) for w in words if w in text)


LITERALS = ["rror", "error", "exit", "ex", "x", "dead", "Fatal", "fatal", "[a", "a b", "é", "ab", "b", ""]


@given(st.sets(st.sampled_from(LITERALS), max_size=6),
       st.lists(st.sampled_from(LITERALS + PIECES), max_size=30).map("".join) | st.text(max_size=60))
@settings(max_examples=400, deadline=None)
def test_any_literal_finds_whether_any_word_occurs(words: set[str], text: str) -> None:
    assert AnyLiteral(words).found_in(text) == any(w in text for w in words)


@given(texts)
@settings(max_examples=300, deadline=None)
def test_timeout_prefilter_never_hides_a_timeout(text: str) -> None:
    if _TIMEOUT.search(text):
        assert _TIME.search(text)


# --- prose triggers: WordTrigger, the guards and the shared letter-end -------------------


@cache
def _prose_seqs(role: str) -> list[list[Step]]:
    seqs: list[list[Step]] = []
    for row in read_jsonl(PATTERNS_DIR / "prose.jsonl"):
        if role in row.get("roles", ["user", "assistant"]):
            seqs += prefilter_steps(row) or []
    return seqs


def _plain_body(seqs: list[list[Step]], *, letter_ends: bool = False) -> str:
    """The trie of ``seqs`` as it was written before the fast paths: no guards, the rests
    after a first word one after the other in full, and (unless ``letter_ends``) every word
    with its own letter-end."""
    def one_after_the_other(rests: list[list[Step]]) -> str:
        return "|".join(map(triggers._seq, rests))

    triggers._alt.cache_clear()  # written with the letter-ends shared, or not
    with pytest.MonkeyPatch.context() as m:
        m.setattr(triggers, "_guard", lambda firsts: "")
        if not letter_ends:  # (this orders the rests otherwise: their text changes)
            m.setattr(triggers, "_share_letter_end", lambda alts: alts)
        m.setattr(triggers, "_run_guarded", one_after_the_other)
        m.setattr(triggers, "_factored", one_after_the_other)
        plain = triggers.compile_triggers(seqs)[0]
    triggers._alt.cache_clear()
    assert isinstance(plain, triggers.WordTrigger)
    return plain.body


@cache
def _word_triggers(role: str) -> tuple[triggers.WordTrigger, re.Pattern[str]]:
    """The role's ``WordTrigger`` and ``\\b(?:trie)`` as ``_plain_body`` writes it."""
    word = triggers.compile_triggers(_prose_seqs(role))[0]
    assert isinstance(word, triggers.WordTrigger)
    return word, re.compile(r"\b(?:" + _plain_body(_prose_seqs(role)) + ")")


SEPARATORS = [" ", " ", "  ", "\n", ",", ".", ":", "?", "%", "-", "é", "_", "2", "x", "İ", "'s", "“"]


@st.composite
def _phrases(draw: st.DrawFn) -> str:
    """A realisation of one prose trigger sequence (a word of each token), so that texts hold
    whole matches, not just their first words."""
    seqs = _prose_seqs(draw(st.sampled_from(["user", "assistant"])))
    words = [draw(st.sampled_from(tok)) for tok, _ in draw(st.sampled_from(seqs))]
    words = [w for w in words if w not in ("*", "\\d")] or ["x"]
    return " ".join(words)


trigger_texts = st.lists(_phrases() | st.sampled_from(SEPARATORS), max_size=12).map("".join)


@pytest.mark.parametrize("role", ["user", "assistant"])
@given(text=trigger_texts)
@settings(max_examples=300, deadline=None)
def test_word_trigger_finds_what_the_plain_trie_finds(role: str, text: str) -> None:
    word, plain = _word_triggers(role)
    lower = text.lower()
    assert word.spans(lower) == [m.span() for m in plain.finditer(lower)]
    assert word.search(lower) == (plain.search(lower) is not None)


@pytest.mark.parametrize("role", ["user", "assistant"])
@given(text=trigger_texts)
@settings(max_examples=300, deadline=None)
def test_pattern_trigger_finds_what_its_regex_finds(role: str, text: str) -> None:
    lower = text.lower()
    for trigger in triggers.compile_triggers(_prose_seqs(role)):
        if isinstance(trigger, triggers.PatternTrigger):
            assert trigger.opens is not None  # the shipped ones open with punctuation
            assert trigger.spans(lower) == [m.span() for m in trigger.regex.finditer(lower)]
            assert trigger.search(lower) == (trigger.regex.search(lower) is not None)


# Small rule sets that make the rests after a first word open alike (a shared word list,
# any-words ``*``), with words that match at the start of others (``it`` in ``it's``) and
# numbers: where writing a step once, or a guard, could change where a match ends.
STEP_WORDS = [("it",), ("it", "it's"), ("'s", "is"), ("up", "back"), ("!", "."), ("*",), ("\\d", "one")]
_steps = st.tuples(st.sampled_from(STEP_WORDS), st.sampled_from(["", "", "", "*", "+"]))


@st.composite
def _seqs(draw: st.DrawFn) -> list[list[Step]]:
    """Sequences after ``ok`` or ``it`` whose steps open alike: each takes the first steps
    of one drawn opening, then steps of its own."""
    opening = draw(st.lists(_steps, max_size=3))
    return [
        [((draw(st.sampled_from(["ok", "it"])),), ""), *opening[: draw(st.integers(0, 3))],
         *draw(st.lists(_steps, max_size=2))]
        for _ in range(draw(st.integers(1, 6)))
    ]


_step_texts = st.lists(
    st.sampled_from(["ok ", "it ", "it's", "'s", "is ", "up", "back", "! ", ".", "one", "12",
                     "x", " ", "  ", "\n"]), max_size=14).map("".join)


@given(_seqs(), st.lists(_step_texts, min_size=1, max_size=8))
@example(  # ``\\S+`` ends in several places: its rests are not written with it once
    [[(("ok",), ""), (("*",), ""), (("up",), "")], [(("ok",), ""), (("*",), ""), (("back",), "")]],
    ["ok xback up"],
)
@example(  # ``it`` matches at the start of ``it's``: neither is this word list
    [[(("ok",), ""), (("it", "it's"), ""), (("'s", "is"), ""), (("up",), ""), (("!",), "")],
     [(("ok",), ""), (("it", "it's"), ""), (("up",), "")]],
    ["ok it's up!"],
)
@settings(max_examples=500, deadline=None)
def test_rests_written_once_match_as_written_in_full(seqs: list[list[Step]], texts_: list[str]) -> None:
    (word,) = [t for t in triggers.compile_triggers(seqs) if isinstance(t, triggers.WordTrigger)]
    plain = re.compile(r"\b(?:" + _plain_body(seqs, letter_ends=True) + ")")
    for text in texts_:
        assert word.spans(text) == [m.span() for m in plain.finditer(text)], (word.body, text)


def test_rests_that_open_alike_share_their_first_step() -> None:
    """After ``server`` two rests open with the same word list: it is written once. Two rests
    opening with any word (``*``) get one guard of their next words."""
    subjects = ("api", "app", "backend", "build")
    shared = [[(("server",), ""), (subjects, ""), (("up",), "")],
              [(("server",), ""), (subjects, ""), (("back",), "")]]
    anywords = [[(("it",), ""), (("*",), ""), (("works",), "")],
                [(("it",), ""), (("*",), ""), (("passes",), "")]]
    (word,) = triggers.compile_triggers(shared + anywords)
    assert isinstance(word, triggers.WordTrigger)
    assert word.body.count("backend") == 1
    assert r"(?=\S+\s*" in word.body
    assert word.spans("server app  up, it builds passes") == [(0, 14), (16, 32)]


def test_a_pattern_trigger_opening_otherwise_searches_every_text() -> None:
    percent: list[Step] = [(("%",), "+"), (("of",), "")]
    number: list[Step] = [(("\\d",), ""), (("gb",), "")]
    (only,) = triggers.compile_triggers([percent])
    (mixed,) = triggers.compile_triggers([percent, number])
    assert isinstance(only, triggers.PatternTrigger) and only.opens == {"%"}
    assert isinstance(mixed, triggers.PatternTrigger) and mixed.opens is None
    assert not only.search("80 gb") and mixed.spans("80 gb") == [(0, 5)]


# --- tool outputs: one literal scan shared by the markers and the rules --------------------

_RULES = ToolRules()
_LITERALS = sorted(
    {n for _, _, needs in _RULES.markers for n in needs} | {n for r in _RULES.rules for n in r.needs}
)
output_texts = st.lists(
    st.sampled_from(_LITERALS)
    | st.sampled_from(["\n", " ", "Traceback (most recent call last):", "x" * 30, "Error: ", ": 1"])
    | st.sampled_from(["exit code 3", "Killed\n", "aborted", "ERROR: boom", "bash: foo: command not found"]),
    max_size=12,
).map("".join)


@given(output_texts, st.integers(0, 3))
@settings(max_examples=400, deadline=None)
def test_shared_scan_changes_no_hit(text: str, pad: int) -> None:
    """Markers and rule hits with the shared literal scan are those without it; long texts
    (read at head and tail only) included."""
    text = text + "." * (pad * 15_000) + text
    plain = ToolRules()
    plain._quiet = lambda text: False  # type: ignore[method-assign]
    for where in ("text", "output", "error"):
        assert _RULES.abort(where, text) == plain.abort(where, text)
    for on in ("output", "text"):
        assert _RULES.text_hits(on, text) == plain.text_hits(on, text)


@given(texts)
@settings(max_examples=300, deadline=None)
def test_quoted_line_is_the_multiline_search_from_every_position(text: str) -> None:
    for pos in range(len(text) + 1):
        m = _QUOTED_LINE.search(text, pos)
        assert _quoted_line(text, pos) == (m.span() if m else None)


# --- the classifier's tokens: many sentences tokenised as one text -------------------------

TOKEN_PIECES = [
    " ", "  ", "\n", "\n\n", "\t", "\xa0", "\u3000", "word", "x", "e.g.", "a.m.", "U.S.", "Mr.",
    "N.Y.", "i.e", "don't", "can't", "'s", "'", '"', ":)", "(^_^)", "(", ")", "-", "--", "—", ".",
    "..", "...", "!", "?", "12.5%", "$3", "10km", "é", "日本語", "🚀", "https://example.com/a.b?c=1",
    "a@b.io", "`x`", "```", "C++", "\\n",
]
token_texts = st.lists(st.sampled_from(TOKEN_PIECES), max_size=12).map("".join) | st.text(max_size=40)


@cache
def _tokenizers() -> list[Any]:
    import spacy

    from analytics.analysis.tagging.diagnosis_model import DiagnosisModel

    return [DiagnosisModel().load()[0], spacy.blank("en").tokenizer]


def test_the_shipped_tokenizer_is_tokenised_joined() -> None:
    from analytics.analysis.tagging.diagnosis_model import joinable

    assert all(joinable(t) for t in _tokenizers())


@given(st.lists(token_texts, max_size=40))
@settings(max_examples=300, deadline=None)
def test_joined_tokens_are_each_texts_own(texts_: list[str]) -> None:
    """``token_keys`` (texts tokenised together) gives each text's ``to_array(ORTH)``."""
    from spacy.attrs import ORTH

    from analytics.analysis.tagging.diagnosis_model import token_keys

    for tokenizer in _tokenizers():
        got = token_keys(tokenizer, texts_)
        want = [tokenizer(t).to_array(ORTH) for t in texts_]
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.tolist() == w.tolist()


def test_joined_tokens_of_the_real_sentences() -> None:
    """The same on the sentences of the shipped examples and samples, in groups large enough
    to be cut into several joined texts."""
    import json

    from spacy.attrs import ORTH

    from analytics.analysis.tagging.diagnosis_model import MODEL_DIR, sentences, token_keys

    rows = (MODEL_DIR.parent / "diagnosis_examples.jsonl").read_text().splitlines()
    docs = [json.loads(line)["text"] for line in rows if line.strip()]
    pieces = [d[a:b] for d in docs for a, b in sentences(d)] + docs
    pieces += [p[: n] for p in pieces[:200] for n in (1, 7, 40)]  # cut mid-word, or at a space
    tokenizer = _tokenizers()[0]
    got = token_keys(tokenizer, pieces)
    assert [g.tolist() for g in got] == [tokenizer(p).to_array(ORTH).tolist() for p in pieces]


# --- context wrappers: the regexes run only on texts holding their literals ---------------

CONTEXT_PIECES = [
    "<system-reminder>", "</system-reminder>", "<ide_selection>", "</ide_selection>",
    "<command-name>", "</command-name>", "<bash-stdout>", "</bash-stdout>", "<turn_aborted>",
    "[Request interrupted by user]", "[Request interrupted by user for tool use]",
    "Caveat: The messages below were generated by the user while running local commands.",
    "# AGENTS.md instructions for /repo", "This session is being continued from a previous conversation",
    "\n", " ", "ok?", "status", "İ", "ı", "<", ">", "SYSTEM-REMINDER",
]


@given(st.lists(st.sampled_from(CONTEXT_PIECES), max_size=10).map("".join) | st.text(max_size=40))
@settings(max_examples=400, deadline=None)
def test_prose_blanks_what_every_context_regex_blanks(text: str) -> None:
    from analytics.analysis.tagging import MAX_PROSE_CHARS
    from analytics.models import Message, MessageContext

    tagger = _tagger()
    msg = Message(session_id="s", msg_idx=0, source_id="m0", role="user", text=text)
    plain: str | None = text[:MAX_PROSE_CHARS]
    if not text.strip():
        plain = None
    else:
        assert plain is not None
        for rx in tagger._context:
            plain = rx.regex.sub(lambda m: " " * len(m.group(0)), plain)
        if not plain.strip():
            plain = None
    assert tagger.prose(MessageContext(message=msg)) == plain


@cache
def _tagger() -> Tagger:
    from analytics.analysis.tagging import Tagger

    return Tagger()
