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


@dataclass(frozen=True, slots=True)
class PatternSet:
    version: str
    patterns: tuple[SecretPattern, ...]
    env_names: dict[str, frozenset[str]]
    placeholder_exact: frozenset[str]
    placeholder_prefixes: tuple[str, ...]
    detect_secrets: dict[str, Any]
    triggers: tuple[str, ...]
    """Case-sensitive trigger substrings of every pattern and plugin."""
    triggers_ci: tuple[str, ...]
    """Lowercase triggers matched in any ASCII case (including the high-entropy context words)."""
    gate: tuple[str, ...]
    """Lowercase needles, one of which occurs (in any case) in every text worth scanning."""
    gate_regexes: tuple[re.Pattern[str], ...]
    """Needles sharing a two-letter prefix, merged into one literal-prefixed regex each."""


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
    names = {k: frozenset(v) for k, v in raw["env_names"].items() if isinstance(v, list)}
    ds = raw["detect_secrets"]
    triggers = {t for p in patterns for t in p.triggers}
    triggers.update(t for plugin in ds["plugins"] for t in plugin["triggers"])
    triggers_ci = {t for p in patterns for t in p.triggers_ci}
    triggers_ci.update(ds["high_entropy"]["context_words"])
    # A pattern runs only when one of its triggers_ci (else triggers) occurs; so one of
    # these needles occurs, in some case, in every text that can yield a finding.
    gate = {t.lower() for p in patterns for t in (p.triggers_ci or p.triggers)}
    gate.update(t.lower() for plugin in ds["plugins"] for t in plugin["triggers"])
    gate.update(ds["high_entropy"]["context_words"])
    merged = _merge_by_prefix(_minimal(gate))
    return PatternSet(
        version=raw["version"],
        patterns=patterns,
        env_names=names,
        placeholder_exact=frozenset(v.lower() for v in raw["placeholder_values"]["exact"]),
        placeholder_prefixes=tuple(raw["placeholder_values"]["prefixes"]),
        detect_secrets=ds,
        triggers=_minimal(triggers),
        triggers_ci=_minimal(triggers_ci),
        gate=tuple(n for n in _minimal(gate) if n[:2] not in merged),
        gate_regexes=tuple(merged.values()),
    )


def _merge_by_prefix(needles: tuple[str, ...], least: int = 3) -> dict[str, re.Pattern[str]]:
    """One regex per two-letter prefix shared by ``least`` needles or more.

    ``re`` searches a literal prefix quickly, so one pass replaces several ``in`` tests.
    """
    groups: dict[str, list[str]] = {}
    for n in needles:
        groups.setdefault(n[:2], []).append(n[2:])
    return {
        prefix: re.compile(re.escape(prefix) + "(?:" + "|".join(map(re.escape, rests)) + ")")
        for prefix, rests in groups.items()
        if len(rests) >= least and len(prefix) == 2
    }


def _minimal(needles: set[str]) -> tuple[str, ...]:
    """Drop needles that contain another needle: the shorter one already fires."""
    return tuple(sorted(n for n in needles if not any(o != n and o in n for o in needles)))


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
    if low.endswith(("password", "passwd", "secret")):
        return STRONG
    if low.endswith(("_pwd", "-pwd", "_pass", "-pass")) or low == "sshpass":
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
