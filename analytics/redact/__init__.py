"""Secret redaction for transcript text and raw records.

``Redactor().redact(text)`` replaces every secret it finds with
``[REDACTED:<kind>:<hash4>]`` (hash4 = first 4 hex digits of sha256 of the secret, so
equal secrets get equal placeholders and nothing can be recovered) and returns the
counts per kind. Patterns live in ``data/secret_patterns.json``; a few
detect-secrets plugins (used as a library) add vendor formats and high-entropy
strings named next to a credential word.

Fast path: a few ``gate`` regexes (one per rare "pivot" character, see the data
file) find every place a secret can be; a text without a gate hit (nearly all of
them) is returned untouched after one lowercasing and a handful of memchr-led
searches. Around each hit the precise patterns, checks and detect-secrets plugins
run on a window of the text; the high-entropy plugin only on lines the gate flagged
as credential assignments. All regexes have bounded quantifiers, so the cost stays
linear in the text length.
"""

from __future__ import annotations

import hashlib
import re
import string
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from analytics.redact.patterns import (
    CHECKS,
    PatternSet,
    Scan,
    classes,
    is_boundary,
    load_patterns,
    secret_span,
)

__all__ = [
    "KINDS",
    "Finding",
    "Redactor",
    "placeholder",
    "redact_json_text",
    "redact_text",
]

KINDS: tuple[str, ...] = (
    "openai_key",
    "anthropic_key",
    "hf_token",
    "github_token",
    "aws_access_key",
    "aws_secret_key",
    "slack_token",
    "google_api_key",
    "bearer_token",
    "api_key_flag",
    "url_password",
    "private_key",
    "env_secret",
    "sshpass",
    "jwt",
    "stripe_key",
    "sendgrid_key",
    "gitlab_token",
    "pypi_token",
    "npm_token",
    "azure_storage_key",
    "high_entropy",
)
"""Every kind a placeholder can carry (the ``redactions.kind`` column)."""

PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{4}\]")
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "-_.+/=")
_HEX = frozenset(string.hexdigits + "-")
_TYPED_ID = re.compile(r"[a-z]{2,10}[-_][A-Za-z0-9_-]+")
_REACH = 33 * 1024
"""How far past a gate hit its window runs (a private key block may span 32 KiB)."""
_BACK = 4096
"""How far before a gate hit its window starts (then back to a space or newline)."""
_RECENT = 8
"""How many recent secret-free texts ``Redactor.redact`` remembers (see there)."""
_RECENT_MIN = 128
"""Shorter texts are remembered in a set instead (see ``Redactor.redact``)."""
_SHORT_CLEAN_MAX = 4096
"""How many short secret-free texts ``Redactor.redact`` remembers before starting afresh."""


def placeholder(kind: str, secret: str) -> str:
    """``[REDACTED:<kind>:<hash4>]`` for ``secret``."""
    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:4]
    return f"[REDACTED:{kind}:{digest}]"


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret located in a text."""

    kind: str
    start: int
    end: int
    priority: int
    """Lower wins when two findings overlap (data-file order; detect-secrets last)."""


class _Spans:
    """Non-overlapping accepted intervals, kept sorted by start."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.items: list[Finding] = []

    def add(self, f: Finding) -> bool:
        i = bisect_left(self.starts, f.start)
        if i > 0 and self.items[i - 1].end > f.start:
            return False
        if i < len(self.items) and self.items[i].start < f.end:
            return False
        self.starts.insert(i, f.start)
        self.items.insert(i, f)
        return True


class Redactor:
    """Finds and replaces secrets. Build one and reuse it (construction loads plugins)."""

    def __init__(self) -> None:
        self._ps: PatternSet = load_patterns()
        ds = self._ps.detect_secrets
        self._max_line = int(ds["max_line_chars"])
        he = ds["high_entropy"]
        self._he_kind: str = he["kind"]
        self._he_len = (int(he["min_len"]), int(he["max_len"]))
        self._recent_clean: deque[str] = deque(maxlen=_RECENT)
        self._short_clean: set[str] = set()

    # detect-secrets takes a quarter of a second to import and most texts never reach its
    # plugins (no gate hits, or none of their trigger words): loaded on first use.
    @cached_property
    def _plugins(self) -> list[tuple[str, tuple[str, ...], Any]]:
        return _load_plugins(self._ps.detect_secrets["plugins"])

    @cached_property
    def _entropy(self) -> Any:
        return _load_entropy_plugin(float(self._ps.detect_secrets["high_entropy"]["base64_limit"]))

    @property
    def version(self) -> str:
        """Version of the pattern data file."""
        return self._ps.version

    def may_hold_secret(self, text: str) -> bool:
        """Fast path: False when no gate hits (then nothing is redacted)."""
        return self._ps.gate.any_hit(text) is not None

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """Return ``text`` with secrets replaced, and the number replaced per kind.

        A transcript stores a tool's output twice (on the call and on its result
        message), often as one string: a long text found free of secrets is remembered
        for a few calls, and found so again by a comparison instead of a scan. Short
        texts (prompts like "ok?", commands an agent reruns while polling) recur over a
        whole session, and a set lookup costs a fraction of their scan's fixed cost
        (a dozen gate searches): the clean ones are remembered in a bounded set.
        """
        long = len(text) >= _RECENT_MIN
        if text in (self._recent_clean if long else self._short_clean):
            return text, {}
        findings = self.find(text) if text else []
        if not findings:
            if long:
                self._recent_clean.append(text)
            else:
                self._remember_short(text)
            return text, {}
        out: list[str] = []
        counts: dict[str, int] = {}
        pos = 0
        for f in findings:
            out.append(text[pos : f.start])
            out.append(placeholder(f.kind, text[f.start : f.end]))
            counts[f.kind] = counts.get(f.kind, 0) + 1
            pos = f.end
        out.append(text[pos:])
        return "".join(out), counts

    def may_hold_secrets(self, column: Any) -> list[bool]:
        """For each text of an Arrow string column, whether it may hold a secret: False
        only where :meth:`redact` would find none (``Gate.may_hit_column``)."""
        return self._ps.gate.may_hit_column(column)

    def _remember_short(self, text: str) -> None:
        if len(self._short_clean) >= _SHORT_CLEAN_MAX:
            self._short_clean.clear()
        self._short_clean.add(text)

    def find(self, text: str) -> list[Finding]:
        """Every secret in ``text``, sorted by position, without overlaps."""
        low = self._ps.gate.any_hit(text)
        return [] if low is None else self._find_gated(text, low)

    def _find_gated(self, text: str, low: str) -> list[Finding]:
        """Run the precise patterns on the windows around the gate hits."""
        windows: list[list[int]] = []  # [start, end, credential-assignment offsets...]
        for m in self._ps.gate.hits(text, low):
            start, end = _window(text, m.start(), m.end())
            if windows and start <= windows[-1][1]:
                windows[-1][0] = min(windows[-1][0], start)
                windows[-1][1] = max(windows[-1][1], end)
            else:
                windows.append([start, end])
            if m.lastgroup:
                windows[-1].append(m.start())
        found: list[Finding] = []
        for start, end, *cred in windows:
            scan = Scan(text[start:end], low[start:end])
            for f in self._find(scan, [c - start for c in cred]):
                found.append(Finding(f.kind, f.start + start, f.end + start, f.priority))
        return found

    def _find(self, scan: Scan, cred: list[int]) -> list[Finding]:
        text = scan.text
        spans = _Spans()
        if "[REDACTED:" in text:  # never redact inside an existing placeholder
            for m in PLACEHOLDER.finditer(text):
                spans.add(Finding("", m.start(), m.end(), -1))
        for prio, pat in enumerate(self._ps.patterns):
            if not pat.wanted(scan):
                continue
            for m in pat.matches(scan):
                start, end = secret_span(m, text)
                secret = text[start:end]
                if all(CHECKS[c](text, m, secret, self._ps) for c in pat.checks):
                    spans.add(Finding(pat.kind, start, end, prio))
        base = len(self._ps.patterns)
        for f in self._detect_secrets(scan, base, cred):
            spans.add(f)
        return [f for f in spans.items if f.kind]

    # -- detect-secrets ---------------------------------------------------------

    def _detect_secrets(self, scan: Scan, base: int, cred: list[int]) -> list[Finding]:
        text = scan.text
        found: list[Finding] = []
        for i, (kind, triggers, plugin) in enumerate(self._plugins):
            if any(scan.has(t) for t in triggers):
                for offset, line in self._lines(text, [_positions(text, t) for t in triggers]):
                    for secret in plugin.analyze_string(line):
                        found.extend(_occurrences(kind, text, line, offset, secret, base + i))
        if cred:
            found.extend(self._high_entropy(text, cred, base + len(self._plugins)))
        return found

    def _lines(self, text: str, groups: list[list[int]]) -> list[tuple[int, str]]:
        """(offset, line) for each line holding a position; a long line gives a window
        around the first position of each group in it."""
        half = self._max_line // 2
        seen: set[int] = set()
        result: list[tuple[int, str]] = []
        for positions in groups:
            done = -1
            for i in positions:
                if i < done:
                    continue
                start = text.rfind("\n", 0, i) + 1
                end = text.find("\n", i)
                end = len(text) if end < 0 else end
                if end - start > self._max_line:
                    start, end = max(start, i - half), min(end, i + half)
                done = max(end, i + 1)
                if start not in seen:
                    seen.add(start)
                    result.append((start, text[start:end]))
        return result

    def _high_entropy(self, text: str, cred: list[int], prio: int) -> list[Finding]:
        """Quoted random-looking strings on the lines that assign a credential."""
        found: list[Finding] = []
        lo, hi = self._he_len
        for offset, line in self._lines(text, [cred]):
            if '"' not in line and "'" not in line:
                continue
            for cand in self._entropy.analyze_string(line):
                if lo <= len(cand) <= hi and self._looks_secret(cand):
                    found.extend(_occurrences(self._he_kind, text, line, offset, cand, prio))
        return found

    def _looks_secret(self, cand: str) -> bool:
        if set(cand) <= _HEX or classes(cand) < 3 or _TYPED_ID.fullmatch(cand):
            return False
        if cand.count("/") > 1 or cand.startswith(("[REDACTED", "data:")):
            return False
        entropy: float = self._entropy.calculate_shannon_entropy(cand)
        return entropy > self._entropy.entropy_limit


def _positions(text: str, needle: str) -> list[int]:
    found: list[int] = []
    i = text.find(needle)
    while i >= 0:
        found.append(i)
        i = text.find(needle, i + 1)
    return found


def _window(text: str, start: int, end: int) -> tuple[int, int]:
    """The part of ``text`` to scan around a gate hit: from a space or newline at least
    ``_BACK`` before it (names and tokens stay whole) to ``_REACH`` after it."""
    if start <= _BACK:
        lo = 0
    else:
        cut = start - _BACK
        back = max(0, cut - _BACK)
        lo = max(text.rfind(" ", back, cut), text.rfind("\n", back, cut)) + 1
        lo = lo or cut
    return lo, min(len(text), end + _REACH)


def _occurrences(
    kind: str, text: str, line: str, offset: int, secret: str, prio: int
) -> list[Finding]:
    """Findings for each place ``secret`` occurs in ``line``, grown to the whole token."""
    found: list[Finding] = []
    if not secret:
        return found
    i = line.find(secret)
    while i >= 0:
        start = offset + i
        end = start + len(secret)
        while end < len(text) and text[end] in _TOKEN_CHARS:
            end += 1
        # Some plugins report only a prefix group (GitLab's ``glpat``): grown above.
        if end - start >= 8 and (is_boundary(text, start) or not text[start].isalnum()):
            found.append(Finding(kind, start, end, prio))
        i = line.find(secret, i + len(secret))
    return found


def _load_plugins(specs: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...], Any]]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes_: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    by_name: dict[str, Any] = {cls.__name__: cls for cls in classes_}
    plugins = []
    for spec in specs:
        if spec["plugin"] not in by_name:
            raise ValueError(
                f"secret_patterns.json: detect-secrets has no plugin {spec['plugin']!r}; "
                f"available: {', '.join(sorted(by_name))}"
            )
        plugins.append((spec["kind"], tuple(spec["triggers"]), by_name[spec["plugin"]]()))
    return plugins


def _load_entropy_plugin(limit: float) -> Any:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString(limit=limit)


@cache
def _default() -> Redactor:
    return Redactor()


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """``Redactor().redact`` with a shared, lazily built redactor."""
    return _default().redact(text)


def redact_json_text(raw: str) -> tuple[str, dict[str, int]]:
    """Redact the text of a raw JSON record (a JSONL line, a quarantined record).

    Secret values never include quotes or backslashes and placeholders hold neither,
    so a valid JSON document stays valid JSON after redaction.
    """
    return _default().redact(raw)
