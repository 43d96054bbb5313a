"""Literal strings and regexes, fast, with the standard ``re`` engine: a trie regex that
finds any of many literal strings, and gates that skip a regex on texts lacking the literals
every one of its matches contains."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from analytics.batchgate import RE_PARSER

COMMON_CHARS = (
    " etaoinsrhldcum0123456789.:,/-_=pfgwybv()[]'\"kxjqz"
    "ETAOINSRHLDCUMPFGWYBVKXJQZ"
)
"""Characters from most to least common in logs and prose (English letter frequencies, digits
and separators among the common ones); any character not listed counts as rarer than all.
Only speed depends on this order, never what is found."""
PLAIN_CHARS = frozenset(COMMON_CHARS[:10])
"""The characters so common (a tenth of a log or more) that a regex stopping at them is
slower than a substring test; see :class:`AnyLiteral`."""
_RANK = {ch: n for n, ch in enumerate(COMMON_CHARS)}


def literal_trie(words: set[str] | frozenset[str]) -> str:
    """A regex (source) that matches where any of ``words`` starts, shaped as a character trie:
    the engine rejects most positions after one character, about twice as fast as an
    alternation of the words or a substring test per word. A word that another word starts
    with ends the branch: a match says *that* (and where) one of the words occurs, not which.
    """
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}  # a word ends here

    def emit(node: dict[str, Any]) -> str:
        if "" in node:
            return ""
        alts = [re.escape(ch) + emit(kid) for ch, kid in sorted(node.items())]
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return emit(root) if root else "(?!)"


def rarity(ch: str) -> int:
    """How rare ``ch`` is by ``COMMON_CHARS``: higher is rarer."""
    return _RANK.get(ch, len(_RANK))


class AnyLiteral:
    """Whether any of some literal strings occurs in a text: yes or no, not where.

    ``re`` searches a pattern whose alternatives each open with a literal by skipping, in a
    C loop, the characters that open none, and calling its matcher at each other one, which
    costs as much as skipping dozens of characters. A trie of the words as they are opens
    with common letters (``dead``, ``failed``, ``memory``) and stops at about every third
    character of a log. Here each word is entered at its rarest character (``rarity``) and
    checks the characters before it with a lookbehind (``x(?<=ex)it`` for ``exit``): the
    same texts match, and the engine stops at rare characters only: three fifths of the time
    on tool outputs. A word made of ``PLAIN_CHARS`` only (``rror``) would still stop it at a tenth of
    the text: a substring test finds it faster."""

    def __init__(self, words: Iterable[str]) -> None:
        words = set(words)
        # Where "Health check failed" occurs, "failed" does: the words that contain no other.
        kept = {w for w in words if not any(o != w and o in w for o in words)}
        self.plain = tuple(sorted(w for w in kept if PLAIN_CHARS.issuperset(w)))
        self.regex = re.compile(_rare_first(kept.difference(self.plain)))

    def found_in(self, text: str) -> bool:
        # A plain loop, not any(<genexpr>): no generator per call (many texts are short).
        for word in self.plain:
            if word in text:
                return True
        return self.regex.search(text) is not None


def _rare_first(words: set[str]) -> str:
    """A regex (source) that matches in a text where any of ``words`` (none empty) occurs,
    every alternative opening with the word's rarest character (the earliest one on ties)."""
    rests: dict[str, list[str]] = {}
    for word in words:
        k = max(range(len(word)), key=lambda i: (rarity(word[i]), -i))
        behind = f"(?<={re.escape(word[: k + 1])})" if k else ""
        rests.setdefault(word[k], []).append(behind + re.escape(word[k + 1 :]))
    alts = [re.escape(ch) + "(?:" + "|".join(sorted(r)) + ")" for ch, r in sorted(rests.items())]
    return "|".join(alts) if alts else "(?!)"


# --------------------------------------------------------------------------- literal gates
#
# Python's ``re`` tries a case-insensitive alternation at every position of a text (about
# 0.2 µs a character: 0.4 ms for a 2 kB tool output), while a substring test runs at memory
# speed. Every match of most patterns contains one of a few literal strings, read off the
# pattern's parse tree; a text holding none of them cannot match, so the regex only runs on
# texts that hold one. What a pattern matches does not change.

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
# Non-ASCII characters that re.IGNORECASE equates with an ASCII letter which str.lower()
# does not turn them into (dotted and dotless i, long s); see test_readiness.
UNLOWERED_FOLDS = ("\u0130", "\u0131", "\u017f")


def text_of(value: object) -> str:
    """A text column's value as read through a DataFrame: a NULL (None, or NaN in a column
    that holds other texts) is no text, not the string "nan"."""
    return value if isinstance(value, str) else ""


def lowered(text: str) -> str | None:
    """``text`` lowered for the literal tests of :class:`Gated`; None when such a test
    could miss a case-insensitive match (the text holds one of ``UNLOWERED_FOLDS``)."""
    if not text.isascii() and any(c in text for c in UNLOWERED_FOLDS):
        return None
    return text.lower()


def required_literals(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Lower-case strings one of which every match of ``pattern`` contains (compared
    lowered, so case flags do not matter); None when some alternative has none, or when
    this Python's parser is not the one read here (a private module: no gate then)."""
    if RE_PARSER is None:  # (another Python: no gates, every pattern runs as it is)
        return None
    try:
        return _sequence_literals(list(RE_PARSER.parse(pattern.pattern, pattern.flags)))
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def _sequence_literals(nodes: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """The most selective literal set a sequence of parse nodes offers: one run of ASCII
    literals in it, or the set of a group, alternation or repeat it cannot skip."""
    options: list[frozenset[str]] = []
    run: list[str] = []
    for op, arg in [*nodes, (None, None)]:
        if str(op) == "LITERAL" and arg < 128:
            run.append(chr(arg).lower())
            continue
        if run:
            options.append(frozenset(["".join(run)]))
            run = []
        inner = _node_literals(str(op), arg)
        if inner is not None:
            options.append(inner)
    # Selective: the shortest string of the set as long as possible, then few strings.
    return max(options, key=lambda o: (min(map(len, o)), -len(o)), default=None)


def _node_literals(op: str, arg: Any) -> frozenset[str] | None:
    if op == "SUBPATTERN":  # (group, add_flags, del_flags, nodes)
        return _sequence_literals(list(arg[3]))
    if op == "ATOMIC_GROUP":
        return _sequence_literals(list(arg))
    if op in _REPEATS and arg[0] >= 1:  # (min, max, nodes)
        return _sequence_literals(list(arg[2]))
    if op == "BRANCH":  # (None, [nodes, …])
        found: set[str] = set()
        for alternative in arg[1]:
            literals = _sequence_literals(list(alternative))
            if literals is None:
                return None
            found |= literals
        return frozenset(found)
    return None


@dataclass(frozen=True)
class Gated:
    """A regex and the literals one of which each of its matches contains (None: no gate)."""

    regex: re.Pattern[str]
    literals: frozenset[str] | None

    @classmethod
    def compile(cls, source: str, flags: int = 0) -> Gated:
        regex = re.compile(source, flags)
        return cls(regex, required_literals(regex))

    def may_match(self, low: str | None) -> bool:
        """Whether the regex can match a text whose :func:`lowered` form is ``low`` (always,
        without a gate or without ``low``)."""
        if low is None or self.literals is None:
            return True
        # A plain loop, not any(<genexpr>): no generator per call (most calls are on short
        # texts, where it is the cost).
        for literal in self.literals:
            if literal in low:
                return True
        return False

    def search(self, text: str, low: str | None) -> re.Match[str] | None:
        """``regex.search(text)``; not run when ``low`` (:func:`lowered` of ``text``)
        holds none of the literals."""
        return self.regex.search(text) if self.may_match(low) else None
