"""Cheap regex prefilters derived from the spaCy token patterns.

Tokenising all prose costs more than everything else the Tagger does, and the
Matcher gets slow on long docs. So the token patterns of a role are also
compiled into one regex over the lower-cased raw text that matches *at least*
wherever one of the patterns can start a match (a superset: separators are
``\\s*``, ``IS_SENT_START`` is ignored, a pattern is cut at its first ``*``
token). The regex is a character trie over the first words, so the engine
rejects most positions after one character. Only messages with a hit reach
spaCy, and from long messages only a window around each hit (the sentence,
bounded in length).

A pattern using attributes that cannot be translated (POS, LEMMA, REGEX …)
compiles to ``None``, which means "always a candidate": such rules still work,
they just do not get the speed-up. A custom attribute (``_``) reads as any token; a rule
made of nothing else names its ``anchors`` instead (strings one of which every match holds).

The trie regex ``\\b(?:trie)`` is not run as such: the engine would try it at every
character. ``WordTrigger`` finds the same matches trying it only after a non-word
character (see there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache, cached_property
from typing import Any, Protocol

from spacy.lang.en.lex_attrs import _num_words, _ordinal_words

from analytics.batchgate import text_finder
from analytics.gcpause import no_cyclic_gc
from analytics.regexcache import compiled

WINDOW_CHARS = 120
"""At most this many characters are kept on each side of a trigger hit."""
MAX_VARIANTS = 64
"""Optional tokens are expanded into variants up to this many per pattern, then cut."""
FINDER_AFTER = 2000
"""Texts a ``WordTrigger`` searches before it makes its finder (``batchgate.text_finder``)."""

NUMBER = r"[+\-±~]?[.,]?\d[\d,./]*(?:st|nd|rd|th)?"
"""Where a LIKE_NUM token can start (number words are listed as words)."""
_NUM_WORDS = frozenset({*_num_words, *_ordinal_words})
_TEXT_KEYS = ("LOWER", "ORTH", "TEXT", "NORM")
_IGNORED = ("IS_SENT_START", "OP", "IS_SPACE", "IS_ASCII", "IS_LOWER", "IS_UPPER", "IS_TITLE", "IS_PUNCT", "LENGTH")
"""Attributes that only narrow a token down: any word is a superset."""
_SENT_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)|\n\s*\n")
_LETTER_END = r"(?![^\W\d_])"
_LETTER = re.compile(r"[^\W\d_]")
"""A character ``_LETTER_END`` stops at."""

Token = tuple[str, ...]
"""Alternatives for one token: lower-cased words, or the markers ``\\d`` (a number) / ``*`` (anything)."""
Step = tuple[Token, str]
"""A token and how often it occurs: ``""`` once, ``"*"`` any number of times, ``"+"`` at least
once, ``ANYWHERE`` once, inside a word too (a rule's declared anchor, see ``anchored``)."""
ANYWHERE = "="


def _token(spec: dict[str, Any]) -> Token | None:
    for key, value in spec.items():
        if key == "_":  # a custom attribute (``{"_": {"checkin_typo": true}}``) only narrows
            return ("*",)  # the token down: any word is a superset
        if key in _TEXT_KEYS:
            if isinstance(value, str) and value:
                return (value.lower(),)
            if isinstance(value, dict) and set(value) == {"IN"} and value["IN"]:
                return tuple(sorted({str(w).lower() for w in value["IN"] if str(w)}))
            return None
        if key == "LIKE_NUM" and value is True:
            return ("\\d", *sorted(_NUM_WORDS))
        if key not in _IGNORED:
            return None
    return ("*",)


def _is_word(step: Step) -> bool:
    """A step that always starts with a letter and is not a number: good to anchor on."""
    tok, op = step
    return (
        op not in ("*", ANYWHERE) and "\\d" not in tok and "*" not in tok
        and all(w[:1].isalpha() for w in tok)
    )


def _is_literal(step: Step) -> bool:
    """A single punctuation literal such as ``%`` or ``?``, or a declared anchor: the engine
    finds it fast."""
    tok, op = step
    if op == ANYWHERE:
        return True
    return op != "*" and len(tok) == 1 and tok[0] not in ("*", "\\d") and not tok[0][:1].isalnum()


def anchored(literals: list[str]) -> list[list[Step]]:
    """The sequences of a rule that names its anchors: strings one of which the text of every
    match contains, found anywhere, inside a word too (吗 in 部署好了吗: Chinese is written
    without spaces). For a pattern the prefilter cannot read, such as a custom attribute alone,
    which would otherwise make every text a candidate."""
    return [[((lit.lower(),), ANYWHERE)] for lit in literals if lit]


def variants(pattern: list[dict[str, Any]] | str) -> list[list[Step]] | None:
    """Step sequences whose union matches inside every match of ``pattern``
    (optional tokens expanded, leading optional / punctuation / number steps dropped)."""
    if isinstance(pattern, str):
        words = pattern.lower().split()
        return [[((w,), "") for w in words]] if words else None
    out: list[list[Step]] = [[]]
    for spec in pattern:
        op = spec.get("OP", "")
        tok = ("*",) if op == "!" else _token(spec)
        op = "" if op == "!" else op
        if tok is None or op not in ("", "?", "*", "+"):
            return None
        if op == "?" and len(out) * 2 <= MAX_VARIANTS:
            out = out + [[*v, (tok, "")] for v in out]
        else:
            out = [[*v, (tok, "*" if op == "?" else op)] for v in out]
    trimmed = []
    for v in out:
        first = next((i for i, step in enumerate(v) if _is_word(step) or _is_literal(step)), None)
        if first is not None:
            v = v[first:]
        if v:
            trimmed.append(v)
    return trimmed or None


@cache  # the same word lists recur in many rests (``variants``), and in their guards
def _alt(tok: Token) -> str:
    if tok == ("*",):
        return r"\S+"
    alts = [re.escape(w) + (_LETTER_END if w[-1:].isalpha() else "") for w in tok if w != "\\d"]
    if "\\d" in tok:
        alts.append(NUMBER)
    return "(?:" + "|".join(_share_letter_end(sorted(alts, key=len, reverse=True))) + ")"


def _share_letter_end(alts: list[str]) -> list[str]:
    """``alts`` with each run of alternatives ending in ``_LETTER_END`` written once as
    ``(?:a|b)`` + ``_LETTER_END``: the same matches in the same order (backtracking into the
    group tries ``b`` after ``a``), from half the pattern text, which is what compiling costs."""
    out: list[str] = []
    run: list[str] = []
    for alt in [*alts, ""]:  # "" flushes the last run
        if alt.endswith(_LETTER_END):
            run.append(alt[: -len(_LETTER_END)])
            continue
        if run:
            out.append((run[0] if len(run) == 1 else "(?:" + "|".join(run) + ")") + _LETTER_END)
            run = []
        if alt:
            out.append(alt)
    return out


def _seq(steps: list[Step]) -> str:
    out = []
    for tok, op in steps:
        if op == ANYWHERE:
            out.append("(?:" + "|".join(map(re.escape, tok)) + r")\s*")
            continue
        x = _alt(tok) + r"\s*"
        out.append(f"(?:{x}){op}" if op else x)
    return "".join(out)


def _first_words(steps: list[Step]) -> frozenset[str] | None:
    """The words one of which every match of ``_seq(steps)`` opens with; None when it can
    open otherwise (with a number, any word, or nothing at all)."""
    words: set[str] = set()
    for tok, op in steps:
        if "*" in tok or "\\d" in tok:
            return None
        words.update(tok)
        if op != "*":
            return frozenset(words)
    return None


class _Node:
    __slots__ = ("kids", "rests", "firsts")

    def __init__(self) -> None:
        self.kids: dict[str, _Node] = {}
        self.rests: dict[str, list[Step]] | None = None
        """The sequences after this word: ``_seq`` of each -> its steps."""
        self.firsts: list[frozenset[str] | None] = []
        """``_first_words`` of each rest."""


def _insert(root: _Node, word: str) -> _Node:
    """The node of ``word`` in the trie under ``root``, added with its prefixes if new."""
    node = root
    for ch in word:
        node = node.kids.setdefault(ch, _Node())
    return node


def _emit(node: _Node) -> str:
    alts = [re.escape(ch) + _emit(kid) for ch, kid in sorted(node.kids.items())]
    if node.rests is not None:
        cont = _LETTER_END
        if "" not in node.rests:
            guard = _guard(node.firsts) if len(node.rests) > 1 else ""
            cont += (r"\s*+" if guard and _opens_unspaced(node.firsts) else r"\s*") + guard
            rests = [node.rests[r] for r in sorted(node.rests)]
            cont += "(?:" + (_factored(rests) if guard else _run_guarded(rests)) + ")"
        alts.append(cont)
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _run_guarded(rests: list[list[Step]]) -> str:
    """The alternation of ``rests`` (in this order) where no guard for them all can be
    written (a rest opens with any word: ``\\S+``): each run of neighbours that open with
    known words, or with any-words and then known words, gets a guard of its own,
    ``(?=\\S+\\s*(?:<first words>))(?:A|B)``: one pass over the next characters rejects
    the whole run where each rest would have backtracked through them again (``variants``
    writes a rule's optional any-words as rests with none, one, two … of them). The rests
    keep their order and a lookahead only drops what cannot match: matches are unchanged."""
    out: list[str] = []
    i = 0
    while i < len(rests):
        opening, j = _opening(rests[i]), i + 1
        if opening is not None:
            skips, words = {opening[0]}, set(opening[1])
            while j < len(rests) and (more := _opening(rests[j])) is not None and (
                bool(more[0]) == bool(opening[0])
            ):
                skips.add(more[0])
                words |= more[1]
                j += 1
        if j - i == 1:
            out.append(_factored(rests[i : i + 1]))
        else:
            guard = "(?=" + _any_words(skips) + _word_trie(frozenset(words)) + ")"
            out.append(guard + "(?:" + _factored(rests[i:j]) + ")")
        i = j
    return "|".join(out)


def _any_words(counts: set[int]) -> str:
    """A pattern matching wherever ``(?:\\S+\\s*){k}`` does for a ``k`` in ``counts``
    (a superset, which is all a guard needs): up to ``max(counts)`` runs of non-space
    characters, the last one perhaps cut short. The engine tries each end of it about once,
    where ``\\S+\\s*\\S+\\s*`` tries every split of a word in two."""
    most = max(counts)
    if not most:
        return ""
    more = rf"(?:\s+\S+){{0,{most - 1}}}" if most > 1 else ""
    runs = r"\S+" + more + r"\s*"
    return f"(?:{runs})?" if 0 in counts else runs


def _opening(steps: list[Step]) -> tuple[int, frozenset[str]] | None:
    """How ``_seq(steps)`` opens: with how many any-words (``\\S+``), then with one of which
    words; None when not so (a number, a repeated any-word)."""
    skip = 0
    while skip < len(steps) and steps[skip] == (("*",), ""):
        skip += 1
    first = _first_words(steps[skip:])
    return None if first is None else (skip, first)


def _factored(rests: list[list[Step]]) -> str:
    """The alternation of ``rests`` (in this order, each as ``_seq`` writes it) with the
    leading step of each run of neighbours that open with the same step written once:
    ``S(?:A|B)`` for ``SA|SB``. After a first-word hit the engine tries the rests one after
    the other; ``variants`` makes many of them open alike (a 40-word subject list), and
    these are now read once. Only a step that ``_matches_one_way`` is shared: then ``S`` can
    end in one place only, and both forms try the same ways in the same order (``A`` before
    ``B``), so every match, and where it ends, is unchanged."""
    out: list[str] = []
    i = 0
    while i < len(rests):
        head, j = rests[i][:1], i + 1
        if head and _matches_one_way(head[0]):
            while j < len(rests) and rests[j][:1] == head:
                j += 1
        if j - i == 1 or any(_spaced(step) for r in rests[i:j] for step in r):
            j = i + 1
            out.append(_seq(rests[i]))
        else:
            out.append(_seq(head) + "(?:" + _run_guarded([r[1:] for r in rests[i:j]]) + ")")
        i = j
    return "|".join(out)


@cache
def _matches_one_way(step: Step) -> bool:
    """``_seq([step])`` can match in one way only wherever a rest may go on after it: a
    single word of the token (no word matches a start of another, as ``it`` would in
    ``it's``), then ``\\s*``, whose backing off is of no use (no rest goes on at a space).
    Not so for ``\\S+``, a number, or a repeated step."""
    tok, op = step
    if op or not tok or any(w in ("*", "\\d") for w in tok) or _spaced(step):
        return False
    return not any(
        a != b and b.startswith(a) and not (a[-1].isalpha() and _LETTER.match(b, len(a)))
        for a in tok for b in tok
    )


def _spaced(step: Step) -> bool:
    """A word of ``step`` opens with whitespace (or is empty): a rest could go on at a space."""
    return any(not w or w[0].isspace() for w in step[0])


def _guard(firsts: list[frozenset[str] | None]) -> str:
    """A lookahead that holds wherever one of the rests can match: one of their first words
    is next. The rests are tried one after the other, and after a common word ("the", "it")
    each costs a few steps even when the next word opens none of them; the guard, a character
    trie, rejects that word after a character or two. Matches are unchanged (a lookahead
    neither consumes nor captures); "" when a rest can open otherwise. Only worth its pattern
    text (compile time) where there are several rests: one rest checks its first word as fast."""
    words: set[str] = set()
    for first in firsts:
        if first is None:
            return ""
        words |= first
    return "(?=" + _word_trie(frozenset(words)) + ")"


@cache  # many first words are followed by the same rests: the same guards
def _word_trie(words: frozenset[str]) -> str:
    """A character trie matching where one of ``words`` matches as ``_alt`` matches it."""
    root = _Node()
    for word in words:
        _insert(root, word).rests = {"": []}
    return _emit_words(root)


def _opens_unspaced(firsts: list[frozenset[str] | None]) -> bool:
    """Every word of ``firsts`` opens with a character other than whitespace. Then the
    ``\\s*`` before a guard of these words may be possessive (``\\s*+``, Python >= 3.11): the
    guard fails at every whitespace character, so giving back some of the whitespace, which
    the engine would try after each failure (a second guard per word), never matches."""
    return all(
        first is not None and all(w and not w[0].isspace() for w in first) for first in firsts
    )


def _emit_words(node: _Node, last: str = "") -> str:
    """A trie of words (``rests`` marks a word's end), each matched as ``_alt`` matches it:
    a word ending in a letter not followed by another letter. ``last``: the character into
    ``node``."""
    alts = [re.escape(ch) + _emit_words(kid, ch) for ch, kid in sorted(node.kids.items())]
    if node.rests is not None:
        alts.append(_LETTER_END if last.isalpha() else "")
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


class Trigger(Protocol):
    """A prefilter over lower-cased text."""

    def search(self, lower: str) -> bool:
        """True when it matches somewhere in ``lower``."""

    def spans(self, lower: str) -> list[tuple[int, int]]:
        """Its matches in ``lower``, as ``finditer`` gives them."""


class PatternTrigger:
    """A plain regex (the sequences that open with punctuation: the engine's literal search
    finds their first character fast). ``opens``: strings one of which every match starts
    with, or None. A text holding none of them (most prose holds no ``%``) is not searched:
    substring tests cost a third of a ``finditer`` that finds nothing."""

    def __init__(self, pattern: str, opens: frozenset[str] | None = None) -> None:
        self.regex = compiled(pattern)
        self.opens = opens

    def _may_match(self, lower: str) -> bool:
        return self.opens is None or any(map(lower.__contains__, self.opens))

    def search(self, lower: str) -> bool:
        return self._may_match(lower) and self.regex.search(lower) is not None

    def spans(self, lower: str) -> list[tuple[int, int]]:
        if not self._may_match(lower):
            return []
        return [m.span() for m in self.regex.finditer(lower)]


class WordTrigger:
    """The matches of ``\\b(?:<body>)``, where every match of ``body`` opens with a letter.

    Such a match starts at the text's start or right after a non-word character, so the
    regex is tried only there: ``[^0-9A-Za-z_](?:body)`` runs the engine's fast loop over a
    character class to the next candidate instead of entering the trie at every character
    (a quarter of the time on prose). The text is searched with a space in front, for the
    matches at its start. Outside ASCII the class also takes letters (``é``): there a
    candidate after a word character is dropped, as ``\\b`` would. After a match the search
    goes on from its end, as ``finditer``'s does: the character before the next candidate
    may be the match's last one.

    Most texts hold no match, and finding that out is most of the cost; in a text that holds
    some, walking the characters between them is. In an ASCII text, RE2 run over the text
    (``batchgate.text_finder``) finds where the next match of a superset of the regex
    starts, in a fraction of the time: no match of the regex starts before it, so the regex
    is tried from there (and a text with none is not searched at all). The finder is made
    once ``FINDER_AFTER`` texts were searched: making it costs a second where its RE2 pattern
    is not in ``regexcache``'s folder yet, more than an ingest of a few files would save."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.regex = compiled(r"[^0-9A-Za-z_](?:" + body + ")")
        self._before_finder = FINDER_AFTER
        """Texts still to be searched without the finder."""

    @cached_property
    def finder(self) -> Callable[[bytes, int], int] | None:
        """Where the next match of ``regex`` may start in an ASCII text (with a space in
        front), as bytes (``batchgate.text_finder``); None: no finder, every text is
        searched character by character. Made when first read."""
        return text_finder(self.regex)

    def _matches(self, lower: str) -> Iterator[tuple[int, int]]:
        """The (start, end) of each match in ``lower``, in order."""
        padded, plain = " " + lower, lower.isascii()
        find = None
        if self._before_finder:
            self._before_finder -= 1
        elif plain:
            find = self.finder
        search = self.regex.search
        if find is not None:  # (an ASCII text: every match of the regex is one of ``body``)
            data, pos = padded.encode("ascii"), 0
            while (at := find(data, pos)) >= 0 and (m := search(padded, at)) is not None:
                yield m.start(), m.end() - 1
                pos = m.end() - 1
            return
        pos = 0
        while (m := search(padded, pos)) is not None:
            start = m.start()  # in ``lower``: the body's start in ``padded``, less the space
            if plain or start == 0 or not _is_word_char(lower[start - 1]):
                yield start, m.end() - 1
                pos = m.end() - 1
            else:
                pos = start + 1

    def search(self, lower: str) -> bool:
        return next(self._matches(lower), None) is not None

    def spans(self, lower: str) -> list[tuple[int, int]]:
        return list(self._matches(lower))


def _is_word_char(ch: str) -> bool:
    """``ch`` matches ``\\w`` (what ``\\b`` looks at)."""
    return ch.isalnum() or ch == "_"


def compile_triggers(seqs: list[list[Step]]) -> list[Trigger]:
    """Prefilters for lower-cased text over all ``seqs``: one is a character trie of the
    first words (each position is rejected after a character or two), then the rest;
    sequences that start with punctuation (``%``, ``?``) go into a second one. Compiled with
    the cyclic collector off: parsing a large pattern allocates much and the collector would
    walk the whole heap meanwhile (twice the compile time in a process that loaded spaCy)."""
    letters, others, opens = _Node(), set(), set()
    for seq in seqs:
        (tok, op), rest = seq[0], seq[1:]
        after = ([(tok, "*")] if op == "+" else []) + rest  # what follows the first word
        if not _is_word(seq[0]):
            others.add(_seq(seq))
            opens.add(tok[0] if _is_literal(seq[0]) else "")  # "": opens otherwise
            continue
        tail, first = _seq(after), _first_words(after)
        for word in tok:
            node = _insert(letters, word)
            node.rests = {**(node.rests or {}), tail: after}
            node.firsts.append(first)
    with no_cyclic_gc():
        out: list[Trigger] = [WordTrigger(_emit(letters))] if letters.kids else []
        if others:  # separate, so that the engine's fast literal search finds them
            opened = None if "" in opens else frozenset(opens)
            out.append(PatternTrigger("|".join(sorted(others)), opened))
    return out


def windows(text: str, hits: list[tuple[int, int]], width: int = WINDOW_CHARS) -> list[tuple[int, int]]:
    """Merged character windows around ``hits``: from the sentence start before a hit to
    the sentence end after it, never more than ``width`` characters beyond the hit."""
    out: list[tuple[int, int]] = []
    for start, end in hits:
        lo = max(0, start - width)
        for sent in _SENT_END.finditer(text, lo, start):
            lo = sent.end()
        m = _SENT_END.search(text, end, min(len(text), end + width))
        hi = m.end() if m else min(len(text), end + width)
        if lo > 0 and lo == start - width:  # cut mid-sentence: start at a word
            space = text.find(" ", lo, start)
            lo = space + 1 if space >= 0 else lo
        if hi < len(text) and not m:
            space = text.rfind(" ", end, hi)
            hi = space if space >= 0 else hi
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


