"""Secret patterns: loaded from ``data/secret_patterns.json`` and vetted by named checks.

The data file holds the knowledge (regexes, trigger substrings, credential names,
placeholder values, the detect-secrets plugins to run, each with its source); this
module compiles it and implements the post-match ``checks`` the data refers to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

DATA_FILE = "secret_patterns.json"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ESCAPE_LETTERS = frozenset("nrtbf")
_ATTRIBUTE_CHAIN = re.compile(r"[A-Za-z_]\w{0,64}(?:\.[A-Za-z_]\w{0,64}){1,8}")
_PROSE_TAIL = ".:)]}>"


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One compiled entry of the data file."""

    kind: str
    regex: re.Pattern[str]
    triggers: tuple[str, ...]
    requires: tuple[str, ...]
    checks: tuple[str, ...]
    source: str

    def wanted(self, text: str) -> bool:
        """Cheap gate: one trigger and every required substring occur in ``text``."""
        return any(t in text for t in self.triggers) and all(r in text for r in self.requires)


@dataclass(frozen=True, slots=True)
class PatternSet:
    version: str
    patterns: tuple[SecretPattern, ...]
    env_names: dict[str, frozenset[str]]
    placeholder_exact: frozenset[str]
    placeholder_prefixes: tuple[str, ...]
    detect_secrets: dict[str, Any]
    triggers: tuple[str, ...]
    """Every trigger substring: a text holding none of them has nothing to redact."""


@cache
def load_patterns() -> PatternSet:
    """Read and compile the data file (once per process)."""
    raw = json.loads(resources.files(__package__).joinpath("data", DATA_FILE).read_text("utf-8"))
    patterns = tuple(
        SecretPattern(
            kind=p["kind"],
            regex=re.compile(p["regex"]),
            triggers=tuple(p["triggers"]),
            requires=tuple(p.get("requires", ())),
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
    return PatternSet(
        version=raw["version"],
        patterns=patterns,
        env_names=names,
        placeholder_exact=frozenset(v.lower() for v in raw["placeholder_values"]["exact"]),
        placeholder_prefixes=tuple(raw["placeholder_values"]["prefixes"]),
        detect_secrets=ds,
        triggers=tuple(sorted(triggers)),
    )


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


def credential_name(name: str, ps: PatternSet) -> bool:
    """Whether a setting name ending in key/token/secret/password names a credential."""
    low = name.lower()
    names = ps.env_names
    if not low or low in names["never"]:
        return False
    upper = name.isupper()
    if low.endswith("key"):
        return any(low.endswith(s) for s in names["key_suffixes"]) or (
            upper and low.endswith(("_key", "-key"))
        )
    if low.endswith("token"):
        return (
            low in names["bare_names"]
            or any(low.endswith(s) for s in names["token_suffixes"])
            or (upper and low.endswith("_token"))
        )
    if low.endswith(("password", "passwd", "secret")):
        return True
    if low.endswith("pwd"):
        return low.endswith(("_pwd", "-pwd"))
    if low.endswith("pass"):
        return low.endswith(("_pass", "-pass")) or low == "sshpass"
    return False


def _env_name(text: str, m: re.Match[str], secret: str, ps: PatternSet) -> bool:
    name = name_before(text, m.end("kw"))
    if not credential_name(name, ps):
        return False
    if m.group("quote"):
        return True
    # Unquoted: reject code (``api_key=api_key``, ``password=getpass()``, ``token: str``).
    low, kw = secret.lower(), m.group("kw").lower()
    if name.lower() in low or low == kw or low.endswith(("." + kw, "_" + kw)):
        return False
    if "(" in secret or "[" in secret:
        return False
    if _ATTRIBUTE_CHAIN.fullmatch(secret):
        return False
    weak = name.lower() in ps.env_names["bare_names"] and m.group("op") == ":"
    return not weak or (len(secret) >= 6 and classes(secret) >= 2)


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
    quoted = "quote" in m.re.groupindex and m.group("quote")
    if not quoted:
        while end > start + 1 and text[end - 1] in _PROSE_TAIL:
            end -= 1
    return start, end
