"""Secret patterns: loaded from ``data/secret_patterns.json`` and vetted by named checks.

The data file holds the knowledge (regexes, trigger substrings, credential names,
placeholder values, the detect-secrets plugins to run, each with its source); this
module compiles it and implements the post-match ``checks`` the data refers to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from analytics.batchgate import may_match_column, superset_of_any

DATA_FILE = "secret_patterns.json"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ESCAPE_LETTERS = frozenset("nrtbf")
_ATTRIBUTE_CHAIN = re.compile(r"[A-Za-z_]\w{0,64}(?:\.[A-Za-z_]\w{0,64}){1,8}")
_PROSE_TAIL = ".:)]}>"


def ascii_lower(text: str) -> str:
    """``text`` with only A-Z lowered, so every offset stays valid."""
    if text.isascii():
        return text.lower()
    return text.encode("ascii", "replace").lower().decode("ascii")


class Scan:
    """A text being scanned, with its ASCII-lowercased copy and substring tests cached."""

    def __init__(self, text: str, low: str | None = None) -> None:
        self.text = text
        self._low = low
        self._seen: dict[str, bool] = {}

    @property
    def low(self) -> str:
        """``text`` with A-Z lowered; same length, so offsets carry over."""
        if self._low is None:
            self._low = ascii_lower(self.text)
        return self._low

    def has(self, needle: str) -> bool:
        seen = self._seen.get(needle)
        if seen is None:
            seen = self._seen[needle] = needle in self.text
        return seen

    def has_ci(self, needle: str) -> bool:
        """``needle`` (lowercase) occurs in any ASCII case."""
        key = "\0" + needle
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = needle in self.low
        return seen


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One compiled entry of the data file."""

    kind: str
    regex: re.Pattern[str]
    triggers: tuple[str, ...]
    triggers_ci: tuple[str, ...]
    requires: tuple[str, ...]
    anchors: tuple[str, ...]
    checks: tuple[str, ...]
    source: str

    def wanted(self, scan: Scan) -> bool:
        """Cheap gate: the trigger substrings the data file names occur in the text."""
        if self.triggers and not any(scan.has(t) for t in self.triggers):
            return False
        if self.triggers_ci and not any(scan.has_ci(t) for t in self.triggers_ci):
            return False
        return all(scan.has(r) for r in self.requires)

    def matches(self, scan: Scan) -> Iterator[re.Match[str]]:
        """Non-overlapping matches: a scan, or anchored tries where an anchor occurs."""
        if not self.anchors:
            yield from self.regex.finditer(scan.text)
            return
        positions: set[int] = set()
        for anchor in self.anchors:
            i = scan.low.find(anchor)
            while i >= 0:
                positions.add(i)
                i = scan.low.find(anchor, i + 1)
        done = 0
        for pos in sorted(positions):
            if pos >= done and (m := self.regex.match(scan.text, pos)):
                done = m.end()
                yield m


Pivoted = tuple[str, "re.Pattern[str]"]
"""A gate regex and the literal character it starts with."""


@dataclass(frozen=True, slots=True)
class Gate:
    """Regexes whose hits are the only places a secret can be: no hit, nothing to redact.

    One regex per pivot character (see the data file's description), tried only when
    its pivot occurs (a memchr). A hit whose ``lastgroup`` is set is a credential
    assignment (``NAME_KEY=…``).
    """

    on_low: tuple[Pivoted, ...]
    """Searched in the ASCII-lowercased text."""
    on_text: tuple[Pivoted, ...]
    """Searched in the text as is."""

    def any_hit(self, text: str) -> str | None:
        """The lowercased text when some gate hits (it is needed next), else None."""
        for pivot, rx in self.on_text:
            if pivot in text and rx.search(text):
                return ascii_lower(text)
        low = ascii_lower(text)
        for pivot, rx in self.on_low:
            if pivot in low and rx.search(low):
                return low
        return None

    def may_hit_column(self, column: Any) -> list[bool]:
        """For each text of an Arrow string column, whether some gate may hit it: False
        only where none can (``any_hit`` would say None; a NULL: False), found for the
        whole column by RE2 (``batchgate``)."""
        return may_match_column(_batch_source(self), column)

    def hits(self, text: str, low: str) -> list[re.Match[str]]:
        """Every hit, sorted by position (``low`` shares its offsets with ``text``)."""
        found = [m for _, rx in self.on_text for m in rx.finditer(text)]
        found += [m for _, rx in self.on_low for m in rx.finditer(low)]
        return sorted(found, key=lambda m: m.start())


@cache
def _batch_source(gate: Gate) -> str | None:
    """One RE2 superset of every gate: of those searched in the text as is, and of those
    searched in it lowered, matched ignoring case (``(?i:…)``), one search over a column.
    Ignoring case stands for lowering the text: whatever a pattern matches in an ASCII
    text lowered, it matches in the text ignoring case (each character is in its lowered
    one's case class), which is all a gate needs, without a lowered copy of the column
    (0.2 s for the corpus's 80 MB of messages; RE2 runs no slower ignoring case).
    None: some gate has no superset."""
    on_text, on_low = _batch_sources(gate)
    if on_text is None or on_low is None:
        return None
    return f"(?:{on_text})|(?i:{on_low})"


@cache
def _batch_sources(gate: Gate) -> tuple[str | None, str | None]:
    """RE2 supersets (``batchgate.superset_source``) of the gates searched in the text as
    is and of those searched in it lowered, each as one alternation (None: no superset)."""
    return (
        superset_of_any(rx for _, rx in gate.on_text),
        superset_of_any(rx for _, rx in gate.on_low),
    )


@dataclass(frozen=True, slots=True)
class PatternSet:
    version: str
    patterns: tuple[SecretPattern, ...]
    env_names: dict[str, frozenset[str]]
    placeholder_exact: frozenset[str]
    placeholder_prefixes: tuple[str, ...]
    detect_secrets: dict[str, Any]
    gate: Gate


@cache
def load_patterns() -> PatternSet:
    """Read and compile the data file (once per process)."""
    raw = json.loads(resources.files(__package__).joinpath("data", DATA_FILE).read_text("utf-8"))
    patterns = tuple(
        SecretPattern(
            kind=p["kind"],
            regex=re.compile(p["regex"]),
            triggers=tuple(p.get("triggers", ())),
            triggers_ci=tuple(p.get("triggers_ci", ())),
            requires=tuple(p.get("requires", ())),
            anchors=tuple(p.get("anchors", ())),
            checks=tuple(p.get("checks", ())),
            source=p["source"],
        )
        for p in raw["patterns"]
    )
    unknown = {c for p in patterns for c in p.checks} - set(CHECKS)
    if unknown:
        raise ValueError(f"{DATA_FILE}: unknown checks {sorted(unknown)}; known: {sorted(CHECKS)}")
    names = {
        k: frozenset(v)
        for k, v in raw["env_names"].items()
        if isinstance(v, list) and k != "gate_pivots"
    }
    ds = raw["detect_secrets"]
    low: list[str] = []
    exact: list[str] = []
    for spec in [*raw["patterns"], *ds["plugins"]]:
        low += spec.get("gate", [])
        exact += spec.get("gate_exact", [])
        if spec.get("gate_names"):
            low += _name_gates(names, raw["env_names"]["gate_pivots"])
    return PatternSet(
        version=raw["version"],
        patterns=patterns,
        env_names=names,
        placeholder_exact=frozenset(v.lower() for v in raw["placeholder_values"]["exact"]),
        placeholder_prefixes=tuple(raw["placeholder_values"]["prefixes"]),
        detect_secrets=ds,
        gate=Gate(_by_pivot(low), _by_pivot(exact)),
    )


# ---------------------------------------------------------------------------
# The gate: one regex whose hits are the only places a secret can start
# ---------------------------------------------------------------------------

_CLOSE_OP = r"""\\{0,3}+["'`]?+\]?+\s{0,3}+(?::=|=|:)(?![=/])\s{0,3}+\\{0,3}+["'`]?+"""
"""What may stand between a credential keyword and its value (env_secret's close, op and
quote), possessive: each part stops where the next must start, so nothing to backtrack."""
_OP_NEXT = r"""(?=[\\"'`\]\s]{0,8}[:=])"""
"""What follows a credential keyword when _CLOSE_OP does: each part of _CLOSE_OP before its
``:``/``=`` takes at most 3+1+1+3 characters of this class. Tested first, this rejects
``tokens``, ``keyboard``, ``token usage`` in a few steps instead of after the look-behinds
for every credential name; being implied by _CLOSE_OP, it changes no match."""
_VALUE = r"""[^\s"'`\\,;]"""
_WEAK_MIN = 8
"""A WEAK name's value must be random-looking, so at least this long (see _env_name)."""
STRONG_ENDINGS = ("password", "passwd", "secret", "_pwd", "-pwd", "_pass", "-pass", "sshpass")
"""Name endings that always name a credential (besides the listed key/token suffixes)."""


def _name_gates(names: dict[str, frozenset[str]], pivots: list[list[str]]) -> list[str]:
    """Gates (over lowercased text) for ``NAME<op>value``, NAME ending in a credential word.

    Per keyword: the value follows (lookahead), then either the name ends in a STRONG
    suffix (fixed-width look-behinds) or the value is long enough for a WEAK name.
    """
    strong = {*names["key_suffixes"], *names["token_suffixes"], *STRONG_ENDINGS}
    gates: list[str] = []
    for kw, pivot in pivots:
        i = kw.index(pivot)
        behind = f"(?<={kw})" if i else ""
        ends = sorted(s for s in strong if s.endswith(kw) and not _ends_in_other(s, strong))
        mark = f"(?P<cred{len(gates)}>)"  # sets lastgroup: a credential assignment
        assign = f"(?={mark}{_CLOSE_OP}{_VALUE}"
        if kw in strong:  # every name ending in kw is a credential
            tail = assign + ")"
        else:
            tail = "(?:" + _name_options(kw, ends) + assign + ")"
            if kw in ("key", "token"):  # WEAK names (upper-case *_KEY, bare token)
                tail += f"|{assign.replace(mark, f'(?P<cred{len(gates)}w>)')}{{{_WEAK_MIN}}})"
            tail += ")"
        gates.append(f"{kw[i:]}{_OP_NEXT}{behind}{tail}")
    return gates


def _name_options(kw: str, ends: list[str]) -> str:
    """Look-behinds for the STRONG names ending in ``kw``, grouped by the character
    before ``kw`` so most names fail one cheap test."""
    groups: dict[str, list[str]] = {}
    for e in ends:
        groups.setdefault(e[: -len(kw)][-1:], []).append(e)
    alts = []
    for before, names in groups.items():
        each = "|".join(f"(?<={re.escape(e)})" for e in names)
        alts.append(f"(?<={re.escape(before + kw)})(?:{each})" if len(names) > 1 else each)
    return "(?:" + "|".join(alts) + ")"


def _ends_in_other(name: str, names: set[str]) -> bool:
    return any(o != name and name.endswith(o) for o in names)


def _by_pivot(gates: list[str]) -> tuple[Pivoted, ...]:
    """One regex per pivot character (``re`` finds a leading literal with memchr), its
    gates merged into a trie on their leading literals so each pivot is tried once."""
    by_pivot: dict[str, list[str]] = {}
    for g in dict.fromkeys(gates):
        if not _literal_head(g):
            raise ValueError(f"{DATA_FILE}: a gate must start with a literal character: {g!r}")
        by_pivot.setdefault(g[0], []).append(g)
    return tuple((c, re.compile(_trie(gs))) for c, gs in by_pivot.items())


_SPECIAL = frozenset("\\()[]{}?*+|.^$")


def _literal_head(gate: str) -> int:
    """How many leading characters of ``gate`` match only themselves."""
    n = 0
    while n < len(gate) and gate[n] not in _SPECIAL:
        n += 1
    if n < len(gate) and gate[n] in "?*+{":  # a quantifier binds the last literal
        n -= 1
    return n


def _trie(gates: list[str]) -> str:
    """``ab(?:c|d)`` from ``abc`` and ``abd``: shared leading literals tested once."""
    groups: dict[str, list[str]] = {}
    alts: list[str] = []
    for g in gates:
        if _literal_head(g):
            groups.setdefault(g[0], []).append(g[1:])
        else:
            alts.append(g)
    for first, rests in reversed(groups.items()):
        sub = _trie(rests)
        alts.insert(0, re.escape(first) + (f"(?:{sub})" if len(rests) > 1 else sub))
    return "|".join(alts)


# ---------------------------------------------------------------------------
# Checks: each takes (text, match, secret, pattern set) and says whether to keep it
# ---------------------------------------------------------------------------

Check = Callable[[str, "re.Match[str]", str, PatternSet], bool]


def is_boundary(text: str, pos: int) -> bool:
    """True when a token may start at ``pos``: no letter or digit glued before it.

    A letter right after a backslash is a JSON/C escape (``\\nAKIA…``), so it counts
    as a boundary too.
    """
    if pos == 0 or not text[pos - 1].isalnum():
        return True
    return text[pos - 1] in _ESCAPE_LETTERS and pos >= 2 and text[pos - 2] == "\\"


def classes(value: str) -> int:
    """How many of lowercase, uppercase, digit occur in ``value``."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    )


def _left_boundary(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    return is_boundary(text, m.start())


def _random(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    return classes(m.group(0)) >= 2


def _random_value(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    return classes(secret) >= 2 and any(c.isdigit() for c in secret)


def _not_flag(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    return not secret.startswith("-")


def is_placeholder(value: str, ps: PatternSet) -> bool:
    """Unset, illustrative or templated values: not secrets."""
    low = value.lower()
    if low in ps.placeholder_exact or value.startswith(ps.placeholder_prefixes):
        return True
    if set(low) <= set("*x.-_#"):
        return True
    return value.isdigit() and len(value) < 6


def _value(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    return bool(secret) and not is_placeholder(secret, ps)


def name_before(text: str, end: int, limit: int = 64) -> str:
    """The identifier-like name that ends at ``end`` (stops at JSON escapes like ``\\n``)."""
    start = end
    while start > 0 and end - start < limit and text[start - 1] in _NAME_CHARS:
        if start >= 2 and text[start - 2] == "\\" and text[start - 1] in _ESCAPE_LETTERS:
            break
        start -= 1
    return text[start:end].lstrip("-.")


STRONG, WEAK, NOT_A_CREDENTIAL = 2, 1, 0


def credential_name(name: str, ps: PatternSet) -> int:
    """How surely a setting name ending in key/token/secret/password names a credential.

    STRONG: listed suffixes (``api_key``, ``access_token``) and password/secret names.
    WEAK: other upper-case ``*_KEY``/``*_TOKEN`` constants (``STORAGE_KEY`` is often a
    plain string) and a bare ``token`` (``{"token": "Hello"}`` in logprobs); their values
    must look random.
    """
    low = name.lower()
    names = ps.env_names
    if not low or low in names["never"]:
        return NOT_A_CREDENTIAL
    upper = name.isupper()
    if low.endswith("key"):
        if any(low.endswith(s) for s in names["key_suffixes"]):
            return STRONG
        return WEAK if upper and low.endswith(("_key", "-key")) else NOT_A_CREDENTIAL
    if low.endswith("token"):
        if any(low.endswith(s) for s in names["token_suffixes"]):
            return STRONG
        if low in names["bare_names"] or (upper and low.endswith("_token")):
            return WEAK
        return NOT_A_CREDENTIAL
    if low.endswith(STRONG_ENDINGS[:-1]) or low == "sshpass":
        return STRONG
    return NOT_A_CREDENTIAL


def _env_name(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    name = name_before(text, m.end("kw"))
    strength = credential_name(name, ps)
    if strength == NOT_A_CREDENTIAL:
        return False
    random_looking = len(secret) >= 8 and classes(secret) >= 2
    if _quoted(m):
        return strength == STRONG or random_looking
    # Unquoted: reject code (``api_key=api_key``, ``password=getpass()``, ``token: str``).
    low, kw = secret.lower(), m.group("kw").lower()
    if name.lower() in low or low == kw or low.endswith(("." + kw, "_" + kw)):
        return False
    if "(" in secret or "[" in secret or _ATTRIBUTE_CHAIN.fullmatch(secret):
        return False
    prose = m.group("op") == ":" and name.lower() in ps.env_names["bare_names"]
    return random_looking if strength == WEAK or prose else True


def _quoted(m: re.Match[str]) -> bool:
    """The value was opened by a quote (possibly JSON-escaped: ``\\"``)."""
    return "quote" in m.re.groupindex and any(q in m.group("quote") for q in "\"'`")


CHECKS: dict[str, Check] = {
    "left_boundary": _left_boundary,
    "random": _random,
    "random_value": _random_value,
    "not_flag": _not_flag,
    "value": _value,
    "env_name": _env_name,
}


def secret_span(m: re.Match[str], text: str) -> tuple[int, int]:
    """The part of a match to replace: the ``secret`` group, else the whole match.

    Unquoted values lose trailing prose punctuation (``password=hunter2.``); a
    trailing backslash is left alone so an escape in raw JSON stays whole.
    """
    if "secret" in m.re.groupindex:
        start, end = m.span("secret")
    else:
        start, end = m.span()
    while end > start and text[end - 1] == "\\":  # never split a JSON escape
        end -= 1
    if not _quoted(m):
        while end > start + 1 and text[end - 1] in _PROSE_TAIL:
            end -= 1
    return start, end
