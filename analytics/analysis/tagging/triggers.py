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
they just do not get the speed-up.
"""

from __future__ import annotations

import re
from typing import Any

from spacy.lang.en.lex_attrs import _num_words, _ordinal_words

WINDOW_CHARS = 120
"""At most this many characters are kept on each side of a trigger hit."""
MAX_VARIANTS = 64
"""Optional tokens are expanded into variants up to this many per pattern, then cut."""

NUMBER = r"[+\-±~]?[.,]?\d[\d,./]*(?:st|nd|rd|th)?"
"""Where a LIKE_NUM token can start (number words are listed as words)."""
_NUM_WORDS = frozenset({*_num_words, *_ordinal_words})
_TEXT_KEYS = ("LOWER", "ORTH", "TEXT", "NORM")
_IGNORED = ("IS_SENT_START", "OP", "IS_SPACE", "IS_ASCII", "IS_LOWER", "IS_UPPER", "IS_TITLE")
_SENT_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)|\n\s*\n")
_LETTER_END = r"(?![^\W\d_])"

Token = tuple[str, ...]
"""Alternatives for one token: lower-cased words, or the markers ``\\d`` (a number) / ``*`` (anything)."""
Step = tuple[Token, str]
"""A token and how often it occurs: ``""`` once, ``"*"`` any number of times, ``"+"`` at least once."""


def _token(spec: dict[str, Any]) -> Token | None:
    for key, value in spec.items():
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
    return op != "*" and "\\d" not in tok and "*" not in tok and all(w[:1].isalpha() for w in tok)


def _is_literal(step: Step) -> bool:
    """A single punctuation literal such as ``%`` or ``?``: the engine finds it fast."""
    tok, op = step
    return op != "*" and len(tok) == 1 and tok[0] not in ("*", "\\d") and not tok[0][:1].isalnum()


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


def _alt(tok: Token) -> str:
    if tok == ("*",):
        return r"\S+"
    alts = [re.escape(w) + (_LETTER_END if w[-1:].isalpha() else "") for w in tok if w != "\\d"]
    if "\\d" in tok:
        alts.append(NUMBER)
    return "(?:" + "|".join(sorted(alts, key=len, reverse=True)) + ")"


def _seq(steps: list[Step]) -> str:
    out = []
    for tok, op in steps:
        x = _alt(tok) + r"\s*"
        out.append(f"(?:{x}){op}" if op else x)
    return "".join(out)


class _Node:
    __slots__ = ("kids", "rests")

    def __init__(self) -> None:
        self.kids: dict[str, _Node] = {}
        self.rests: set[str] | None = None


def _emit(node: _Node) -> str:
    alts = [re.escape(ch) + _emit(kid) for ch, kid in sorted(node.kids.items())]
    if node.rests is not None:
        cont = _LETTER_END
        if "" not in node.rests:
            cont += r"\s*(?:" + "|".join(sorted(node.rests)) + ")"
        alts.append(cont)
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def trigger_regexes(seqs: list[list[Step]]) -> list[re.Pattern[str]]:
    """Regexes for lower-cased text over all ``seqs``: one is a character trie of the
    first words (each position is rejected after a character or two), then the rest;
    sequences that start with punctuation (``%``, ``?``) go into a second one."""
    letters, others, others_first = _Node(), set(), set()
    for seq in seqs:
        (tok, op), rest = seq[0], seq[1:]
        tail = _seq(([(tok, "*")] if op == "+" else []) + rest)
        if not _is_word(seq[0]):
            others.add(_seq(seq))
            others_first.add(tok[0][:1])
            continue
        for word in tok:
            node = letters
            for ch in word:
                node = node.kids.setdefault(ch, _Node())
            node.rests = (node.rests or set()) | {tail}
    out = [re.compile(r"\b" + _emit(letters))] if letters.kids else []
    if others:  # separate, so that the engine's fast literal search finds them
        out.append(re.compile("|".join(sorted(others))))
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


