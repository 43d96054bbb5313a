"""Finding any of many literal strings in a text, fast, with the standard ``re`` engine."""

from __future__ import annotations

import re
from typing import Any


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
