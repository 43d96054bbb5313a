"""Which of many texts a Python regex may match, answered for the whole batch at once.

Python's ``re`` walks a text character by character in its own loop; RE2, a DFA, runs
over a whole Arrow column of texts in C++ (here about eight times as fast), compiled once
per process (``_buffer_finder``; Arrow's ``match_substring_regex`` where it cannot). RE2 does not know every construct of ``re`` (lookarounds,
possessive repeats, back references) and reads some classes differently on non-ASCII
text, so a pattern is not handed over as it is: :func:`superset_source` writes a RE2
pattern that matches (somewhere in) every ASCII text the Python pattern matches in, and
maybe a few more. A text it does not match cannot match the Python pattern: the caller
skips it. A text it matches, and every non-ASCII text, is left to the Python pattern, so
what is found does not change; only the texts known to hold no match are skipped.

How a pattern is widened (each step only lets more texts match):
- assertions (``^``, ``$``, ``\\b``, lookahead and lookbehind) are dropped;
- atomic groups and possessive repeats become plain ones, lazy repeats greedy;
- a repeat of more than ``MAX_BOUND`` times becomes open-ended (RE2 caps repeat counts);
- a back reference becomes "anything", a conditional group either branch;
- with ``IGNORECASE`` a non-ASCII character (``ſ`` matches ``s`` in ``re``) becomes "any
  character", and ``\\s`` is written out with every ASCII character ``re`` counts as
  whitespace (``\\x1c``-``\\x1f`` too, which RE2's ``\\s`` leaves out).
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from analytics.regexcache import remembered

MAX_BOUND = 64
"""The largest repeat count written as it is; longer ones become open-ended."""
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f "
"""The ASCII characters ``str.isspace`` (and so ``re``'s ``\\s``) counts as whitespace."""
_NOT_SPACE = r"\x00-\x08\x0e-\x1b\x21-\x{10FFFF}"
_CATEGORIES = {
    "CATEGORY_DIGIT": r"0-9",
    "CATEGORY_NOT_DIGIT": r"\x00-/:-\x{10FFFF}",
    "CATEGORY_SPACE": _SPACE,
    "CATEGORY_NOT_SPACE": _NOT_SPACE,
    "CATEGORY_WORD": r"0-9A-Za-z_",
    "CATEGORY_NOT_WORD": r"\x00-/:-@\[-^`{-\x{10FFFF}",
}
"""``re``'s categories as RE2 class contents, exact on ASCII text."""
_ANY = r"(?s:.)"

try:
    RE_PARSER: Any = importlib.import_module("re._parser")  # CPython's own regex parser
except ImportError:  # another Python: no superset, every text goes to the Python pattern
    RE_PARSER = None


class _Unsupported(Exception):
    """A construct this translation does not know: no superset for the pattern."""


NOWHERE = r"[^\x00-\x{10FFFF}]"
"""A RE2 pattern that matches nowhere (the superset of no pattern at all)."""


def superset_of_any(patterns: Iterable[re.Pattern[str]]) -> str | None:
    """One RE2 pattern matching wherever any of ``patterns`` may (the alternation of their
    :func:`superset_source`); ``NOWHERE`` for none; None when one of them has no superset."""
    sources = [superset_source(p) for p in patterns]
    if any(s is None for s in sources):
        return None
    return "|".join(f"(?:{s})" for s in sources) if sources else NOWHERE


def superset_source(pattern: re.Pattern[str]) -> str | None:
    """A RE2 pattern matching in every ASCII text ``pattern`` matches in (see the module's
    description); None when there is none to give (an unknown construct, ``LOCALE``, a
    bytes pattern, a Python without ``re._parser``). Kept in ``regexcache``'s folder for a
    large pattern (parsing one of a few hundred kilobytes costs about a second)."""
    if RE_PARSER is None or not isinstance(pattern.pattern, str) or pattern.flags & re.LOCALE:
        return None
    return remembered(_kind(), pattern.pattern, pattern.flags, lambda: _superset(pattern))


@cache
def _kind() -> str:
    """The name under which ``regexcache`` keeps supersets: this module's own text, so
    that a changed translation never reads what an older one wrote."""
    try:
        own = Path(__file__).read_bytes()
    except OSError:
        own = b""
    return "superset " + hashlib.sha256(own).hexdigest()[:16]


def _superset(pattern: re.Pattern[str]) -> str | None:
    """:func:`superset_source`, written anew."""
    icase = bool(pattern.flags & re.IGNORECASE)
    try:
        tree = list(RE_PARSER.parse(pattern.pattern, pattern.flags))
        body = _Writer(bool(pattern.flags & re.DOTALL)).sequence(tree, icase, [], True, True)
    except (_Unsupported, AttributeError, IndexError, TypeError, ValueError, RecursionError):
        return None
    return "(?i)" + body if icase else body


class _Writer:
    """Writes the RE2 superset of a parse tree (see :func:`superset_source`).

    Literal characters are held back (``pending``, one RE2 atom each) and written at the
    next construct that is no literal, so that an alternation after them repeats them in
    each alternative: a look-behind of fixed characters there (``key(?:=(?<=accountkey=)…``,
    a trie of words entered at a rare character) then lengthens that alternative's
    literal to the whole word, as long as nothing else was matched before it
    (``at_start``), instead of being dropped. A look-ahead that ends the pattern is
    written as what must follow."""

    def __init__(self, dotall: bool) -> None:
        self.dotall = dotall

    def sequence(
        self, nodes: list[tuple[Any, Any]], icase: bool, pending: list[str], at_start: bool,
        last: bool,
    ) -> str:
        """The nodes after the characters ``pending`` (written here); ``at_start``: nothing
        was matched before ``pending``; ``last``: nothing of the pattern follows."""
        out: list[str] = []
        for k, (op, arg) in enumerate(nodes):
            op = str(op)
            is_last = last and k == len(nodes) - 1
            alone = at_start and not out
            if op == "LITERAL" and not (icase and arg >= 128):
                pending = [*pending, _char(arg)]
                continue
            if op in ("ASSERT", "ASSERT_NOT", "AT"):
                if op == "ASSERT" and arg[0] < 0:  # a look-behind
                    behind = _fixed(list(arg[1]), icase)
                    if behind is None or icase:
                        continue
                    if alone and _ends_with(behind, pending):
                        pending = behind
                    elif not _ends_with(pending, behind) and not _ends_with(behind, pending):
                        if all(len(a) == 1 or a.startswith("\\x") for a in behind + pending):
                            return NOWHERE  # (the literal before it is not what it wants)
                elif op == "ASSERT" and is_last:  # a look-ahead ending the pattern
                    out.append("".join(pending))
                    out.append(self.sequence(list(arg[1]), icase, [], False, True))
                    pending = []
                continue  # (any other assertion only narrows where a match is)
            if op == "BRANCH":
                alts = [self.sequence(list(a), icase, pending, alone, is_last) for a in arg[1]]
                out.append("(?:" + "|".join(alts) + ")")
            elif op == "SUBPATTERN" and not arg[1] and not arg[2]:  # (no flags changed)
                out.append("(?:" + self.sequence(list(arg[3]), icase, pending, alone, is_last) + ")")
            else:
                out.append("".join(pending) + self._node(op, arg, icase))
            pending = []
        out.append("".join(pending))
        return "".join(out)

    def _node(self, op: str, arg: Any, icase: bool) -> str:
        if op == "LITERAL":  # (a non-ASCII one under IGNORECASE: may fold to ASCII)
            return _ANY
        if op == "NOT_LITERAL":
            if arg >= 128:  # (never in an ASCII text: every character but a rare one)
                return _ANY
            return f"[^{_char(arg)}]"
        if op == "ANY":
            return _ANY if self.dotall else r"[^\n]"
        if op == "IN":
            return _class(arg, icase)
        if op == "CATEGORY":
            return f"[{_CATEGORIES[str(arg)]}]"
        if op == "SUBPATTERN":  # (group, add_flags, del_flags, nodes), changing flags
            _, add, drop, nodes = arg
            if (add | drop) & re.LOCALE:
                raise _Unsupported(op)
            inner_icase = (icase or bool(add & re.IGNORECASE)) and not drop & re.IGNORECASE
            saved = self.dotall
            self.dotall = (saved or bool(add & re.DOTALL)) and not drop & re.DOTALL
            flag = "" if inner_icase == icase else "i" if inner_icase else "-i"
            inner = self.sequence(list(nodes), inner_icase, [], False, False)
            self.dotall = saved
            return f"(?{flag}:{inner})"
        if op == "ATOMIC_GROUP":
            return "(?:" + self.sequence(list(arg), icase, [], False, False) + ")"
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, nodes = arg
            inner = "(?:" + self.sequence(list(nodes), icase, [], False, False) + ")"
            low = min(low, MAX_BOUND)
            if high == RE_PARSER.MAXREPEAT or high > MAX_BOUND:
                return inner + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
            return inner + f"{{{low},{high}}}"
        if op == "GROUPREF":
            return _ANY + "*"
        if op == "GROUPREF_EXISTS":  # (group, yes, no)
            _, yes, no = arg
            branches = [self.sequence(list(yes), icase, [], False, False)]
            branches.append(self.sequence(list(no), icase, [], False, False) if no is not None else "")
            return "(?:" + "|".join(branches) + ")"
        raise _Unsupported(op)


def _fixed(nodes: list[tuple[Any, Any]], icase: bool) -> list[str] | None:
    """The RE2 atoms of a sequence of single characters (literals and classes), one per
    character; None for anything else."""
    atoms = []
    for op, arg in nodes:
        if str(op) == "LITERAL":
            atoms.append(_char(arg))
        elif str(op) == "IN":
            atoms.append(_class(arg, icase))
        else:
            return None
    return atoms or None


def _ends_with(atoms: list[str], tail: list[str]) -> bool:
    return len(tail) <= len(atoms) and atoms[len(atoms) - len(tail) :] == tail


def _char(code: int) -> str:
    """A character as RE2 reads it literally (in a class too)."""
    if code < 128 and (chr(code).isalnum() or chr(code) == "_"):
        return chr(code)
    return f"\\x{{{code:X}}}"


def _class(items: list[tuple[Any, Any]], icase: bool) -> str:
    """A character class: exact on ASCII text. Under ``IGNORECASE`` a positive class
    naming a non-ASCII character is "any character" (a fold of it may be ASCII); a
    negated one leaves such characters out (it then excludes fewer: a superset)."""
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    parts: list[str] = []
    for op, arg in items[1:] if negate else items:
        op = str(op)
        if op == "LITERAL":
            if arg >= 128 and icase:
                if negate:
                    continue
                return _ANY
            parts.append(_char(arg))
        elif op == "RANGE":
            lo, hi = arg
            if hi >= 128 and icase:
                if negate:
                    if lo < 128:
                        parts.append(f"{_char(lo)}-{_char(127)}")
                    continue
                return _ANY
            parts.append(f"{_char(lo)}-{_char(hi)}")
        elif op == "CATEGORY":
            parts.append(_CATEGORIES[str(arg)])
        else:
            raise _Unsupported(op)
    if not parts:
        return _ANY if negate else NOWHERE
    return ("[^" if negate else "[") + "".join(parts) + "]"


def may_match_many(source: str | None, texts: Sequence[str]) -> list[bool]:
    """For each of ``texts``: False when it is ASCII and RE2 ``source`` (a
    :func:`superset_source`) finds no match in it, True otherwise (every text when
    ``source`` is None, or when RE2 cannot run it)."""
    return may_match_each([source], texts)[0]


def may_match_each(sources: Sequence[str | None], texts: Sequence[str]) -> list[list[bool]]:
    """:func:`may_match_many` of ``texts`` for each of ``sources`` (the texts are handed
    to Arrow once)."""
    found = [[True] * len(texts) for _ in sources]
    ascii_at = [i for i, t in enumerate(texts) if t.isascii()]
    if not ascii_at or all(source is None for source in sources):
        return found
    column = _ascii_column([texts[i] for i in ascii_at])
    for source, flags in zip(sources, found, strict=True):
        if source is not None:
            for i, maybe in zip(ascii_at, may_match_column(source, column), strict=True):
                flags[i] = maybe
    return found


def _ascii_column(texts: list[str]) -> Any:
    """An Arrow column of ASCII ``texts``, made from their concatenation and its offsets:
    one copy of the characters (``pa.array`` of the list grows its buffers as it goes)."""
    import numpy as np
    import pyarrow as pa

    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    data = "".join(texts).encode("ascii")
    return pa.Array.from_buffers(
        pa.large_string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def may_match_column(source: str | None, column: Any) -> list[bool]:
    """:func:`may_match_many` of the texts of an Arrow string column (a NULL: False).

    The column's characters are searched where Arrow keeps them, by a RE2 compiled once
    for the process (``_buffer_finder``; Arrow's ``match_substring_regex`` compiles the
    pattern at every call, 1-2 ms for a gate of a few kilobytes, and builds its automaton
    afresh: an ingest asks for a few columns at every flush)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if source is None:
        return [True] * len(column)
    found = _buffer_hits(source, column)
    if found is None:
        try:
            found = pc.match_substring_regex(column, pattern=source).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return [True] * len(column)
    plain = pc.string_is_ascii(column).to_pylist()  # (a NULL: None, and no match)
    return [hit is True or ascii is False for hit, ascii in zip(found, plain, strict=True)]


def _buffer_hits(source: str, column: Any) -> list[bool] | None:
    """Whether ``source`` matches in each text of a string column, as Arrow's per-text
    search says (a NULL: False), searched in the characters of all the texts one after
    another: the leftmost match from a text's start on is in the text it starts in or
    later; one that runs on into the next text is looked for again within its own. None
    when there is no ``_buffer_finder`` or the column is not of plain strings."""
    import numpy as np
    import pyarrow as pa

    find = _buffer_finder(source)
    if find is None:
        return None
    if isinstance(column, pa.ChunkedArray):
        found: list[bool] = []
        for chunk in column.chunks:
            hits = _buffer_hits(source, chunk)
            if hits is None:
                return None
            found += hits
        return found
    if not isinstance(column, pa.StringArray | pa.LargeStringArray):
        return None
    n = len(column)
    hits = [False] * n
    _, offsets_buf, data = column.buffers()
    if data is None or not n:
        return hits
    kind = np.int64 if isinstance(column, pa.LargeStringArray) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=kind)[column.offset : column.offset + n + 1]
    pos, end = int(offsets[0]), int(offsets[-1])
    view = memoryview(data)
    while pos < end:
        start, stop = find(view, pos, end)
        if start < 0:
            break
        i = int(np.searchsorted(offsets, start, side="right")) - 1  # (the text it starts in)
        after = int(offsets[i + 1])
        hits[i] = stop <= after or find(view, start, after)[0] >= 0
        pos = after
    return hits


@cache
def _buffer_finder(source: str) -> Callable[[Any, int, int], tuple[int, int]] | None:
    """The span of the leftmost match of RE2 ``source`` in ``data[pos:endpos]`` (a buffer of
    UTF-8 characters; (-1, -1): none), by a regex compiled once for the process, whose
    automaton grows as it searches. None when there is no ``re2`` module, RE2 cannot
    compile ``source``, it matches the empty text (a match of nothing starts in no text),
    or the module's engine call (its internals, as ``_engine_finder`` reads them) answers
    a probe otherwise than its ``search``."""
    compiled = _re2(source)
    if compiled is None:
        return None
    re2, regex = compiled
    try:
        match, unanchored = regex._regexp.Match, re2._Anchor.UNANCHORED

        def find(data: Any, pos: int, endpos: int) -> tuple[int, int]:
            start, stop = match(unanchored, data, pos, endpos)[0]
            return int(start), int(stop)

        if find(b"", 0, 0)[0] == 0:
            return None
        for data, pos, endpos in ((b" ready now", 0, 10), (b"xx ok", 1, 4), (b" " * 64, 3, 60)):
            m = regex.search(data, pos, endpos)
            if find(data, pos, endpos) != ((-1, -1) if m is None else m.span()):
                return None
    except Exception:  # (internals not as read here)
        return None
    return find


TEXT_FINDER_MEMORY = 256 << 20
"""The most memory RE2 may give a ``text_finder``'s automaton (it takes what the texts
need: about 16 MiB for the prose prefilter over the benchmark corpus). Arrow's RE2 has
8 MiB, too little for a pattern of a few hundred kilobytes: RE2 then gives up its DFA
and searches ten times slower."""


def text_finder(pattern: re.Pattern[str]) -> Callable[[bytes, int], int] | None:
    """Where, in the bytes of an ASCII text, the leftmost match of the RE2
    :func:`superset_source` of ``pattern`` at or after a position starts (-1: none), for a
    pattern too large for Arrow's RE2 (see ``TEXT_FINDER_MEMORY``), searched text by text
    where a caller meets them one at a time.

    Each widening step of the superset keeps a match where it starts (it drops zero-width
    assertions, or lets more through at the same place), so every match of ``pattern``
    starts where some match of the superset does, and none starts before the position
    returned: ``pattern.search(text, found)`` finds what ``pattern.search(text, pos)``
    does, without walking the characters in between (RE2's automaton skips them many
    times as fast), and a text where it returns -1 is not searched at all. None when there
    is no superset, no ``re2`` module, or RE2 cannot compile it."""
    source = superset_source(pattern)
    if source is None:
        return None
    compiled = _re2(source)
    if compiled is None:
        return None
    re2, regex = compiled
    return _engine_finder(re2, regex) or _module_finder(regex)


def _re2(source: str) -> tuple[Any, Any] | None:
    """The ``re2`` module and ``source`` compiled by it with ``TEXT_FINDER_MEMORY`` for its
    automaton; None when there is no such module or RE2 refuses the pattern (or finds it
    too large for the budget)."""
    try:
        import re2

        options = re2.Options()
        options.max_mem = TEXT_FINDER_MEMORY
        options.log_errors = False
        return re2, re2.compile(source, options)
    except Exception:  # (no google-re2; a pattern RE2 refuses, too large for the budget)
        return None


def _module_finder(regex: Any) -> Callable[[bytes, int], int]:
    """``text_finder``'s search through the ``re2`` module's ``search``."""
    search = regex.search

    def find(data: bytes, pos: int) -> int:
        # (bytes: for a str, the module maps every match's offsets back to characters)
        m = search(data, pos)
        return -1 if m is None else int(m.start())

    return find


def _engine_finder(re2: Any, regex: Any) -> Callable[[bytes, int], int] | None:
    """``text_finder``'s search as a call of the engine's own ``Match`` (the span of the
    leftmost match, (-1, -1) for none), which the module's ``search`` wraps in a generator
    and a match object: a fifth of the time per text. None when this ``re2`` module is not
    built so (its internals are not its interface), or answers a probe otherwise."""
    try:
        match, unanchored = regex._regexp.Match, re2._Anchor.UNANCHORED

        def find(data: bytes, pos: int) -> int:
            return int(match(unanchored, data, pos, len(data))[0][0])

        module = _module_finder(regex)
        for data, pos in ((b" ready now", 0), (b"xx ok", 1), (b" " * 64, 3), (b"", 0)):
            if find(data, pos) != module(data, pos):
                return None
    except Exception:  # (internals not as read here)
        return None
    return find
