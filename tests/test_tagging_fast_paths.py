"""The fast paths of the tagger and the log scanner give what the plain ones give."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.analysis.literals import literal_trie
from analytics.analysis.tagging.components import _QUOTE_MARKS, _QUOTED_LINE, quoted_regions
from analytics.analysis.tagging.polling import _TIME, _TIMEOUT

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


@given(texts)
@settings(max_examples=300, deadline=None)
def test_timeout_prefilter_never_hides_a_timeout(text: str) -> None:
    if _TIMEOUT.search(text):
        assert _TIME.search(text)
