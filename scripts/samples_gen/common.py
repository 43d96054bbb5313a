"""Shared building blocks for the sample generators: a deterministic clock, id makers, writers.

Everything here is pure and seeded: the same seed and base time always give the same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def utc(y: int, mo: int, d: int, h: int, mi: int, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


class Clock:
    """A session's wall clock. Generators only move it forward."""

    def __init__(self, start: datetime) -> None:
        self.t = start

    def advance(self, seconds: float) -> datetime:
        self.t = self.t + timedelta(seconds=seconds)
        return self.t

    def ms(self) -> int:
        return epoch_ms(self.t)

    def iso(self) -> str:
        return iso_z(self.t)


def epoch_ms(t: datetime) -> int:
    return int(round(t.timestamp() * 1000))


def iso_z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Ids:
    """Seeded id factory for every format's native ids."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._counter = 0

    def b62(self, n: int) -> str:
        return "".join(self.rng.choice(BASE62) for _ in range(n))

    def hexs(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def uuid4(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def uuid7(self, t: datetime) -> str:
        """A v7-style uuid whose first 48 bits are the epoch ms (Codex rollout ids)."""
        rand = self.rng.getrandbits(80)
        value = (epoch_ms(t) << 80) | rand
        value &= ~(0xF << 76)
        value |= 0x7 << 76
        value &= ~(0x3 << 62)
        value |= 0x2 << 62
        return str(uuid.UUID(int=value))

    def opencode(self, prefix: str, t: datetime, descending: bool = False) -> str:
        """ses_/msg_/prt_ ids: 12 hex digits of (ms * 0x1000 + counter), then 14 base62 chars."""
        self._counter = (self._counter + 1) % 0x1000
        value = epoch_ms(t) * 0x1000 + self._counter
        if descending:
            value = (1 << 48) - 1 - value
        return f"{prefix}_{value & ((1 << 48) - 1):012x}{self.b62(14)}"

    def anthropic(self, prefix: str) -> str:
        return f"{prefix}_01{self.b62(22)}"


@dataclass
class Hint:
    """One deliberately placed tagged moment, written to data/gold/sample_hints.tsv."""

    file: str
    source_id: str
    tag: str
    note: str = ""


@dataclass
class Result:
    """What one sample generator produced."""

    files: dict[str, str] = field(default_factory=dict)  # relative path -> content
    hints: list[Hint] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def dumps_line(obj: object) -> str:
    """Compact JSON, as JSON.stringify / serde_json write one JSONL line."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def dumps_pretty(obj: object) -> str:
    """JSON.stringify(obj, null, 2)."""
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8", newline="\n")
