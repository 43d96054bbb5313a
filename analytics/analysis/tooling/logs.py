"""SGLang and vLLM log-line recognisers: prefixes, startup milestones, periodic metrics.

Signatures live in ``data/log_signatures_v1.json``. Work is linear: one compiled search over the
whole output finds the lines that can matter (those holding a literal needle, and those whose
prefix names an engine); every other line is skipped at C speed. What a line yields depends only
on its prefix-stripped message, so that part is cached: polling loops re-read the same log tail.
Lines longer than ``MAX_LINE`` are not log lines; only failure needles are searched in them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from analytics.analysis.literals import literal_trie

from .failures import failure_hits, failure_signatures

MAX_LINE = 16_000
MAX_RESULTS = 5_000
"""Numbers kept per output; events (deduplicated) are always collected."""
DETAIL_CHARS = 240
LINE_CACHE = 16_384
"""Distinct prefix-stripped messages whose findings are remembered (least recently used go)."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SGLANG_PREFIX = re.compile(
    r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
)
VLLM_PROC = re.compile(r"\((\w+) pid=(\d+)\) ")
VLLM_PREFIX = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?([\w./-]+\.py):(\d+)\] "
)
UVICORN_PREFIX = re.compile(r"(INFO|WARNING|ERROR):\s+")
_RANK = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")
_KEY_LEAD = re.compile(r"^[\s.\[\]\d]*")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass
class LogLine:
    engine: str | None
    """sglang | vllm | None (uvicorn or plain text)"""
    message: str
    log_ts: str | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    process: str | None = None


@dataclass
class EventHit:
    engine: str
    event: str
    detail: str | None
    log_ts: str | None


@dataclass(frozen=True, slots=True)
class NumberHit:
    metric: str
    value: float
    unit: str | None
    label: str | None
    source: str


@dataclass
class LogScan:
    events: list[EventHit] = field(default_factory=list)
    numbers: list[NumberHit] = field(default_factory=list)
    engines_seen: set[str] = field(default_factory=set)
    counted: set[str] | None = None
    """Timestamped log lines whose numbers were already taken (a log re-read by a later poll
    holds the same lines again: they are one measurement, not several)."""


# --------------------------------------------------------------------------- lines


def iter_lines(text: str) -> Iterator[str]:
    """Lines split on ``\\n`` and ``\\r`` (progress bars), lazily and without copying the text."""
    start, n = 0, len(text)
    while start < n:
        nl = text.find("\n", start)
        end = n if nl < 0 else nl
        segment = text[start:end]
        if "\r" in segment:
            yield from (s for s in segment.split("\r") if s)
        else:
            yield segment
        start = end + 1


def parse_prefix(line: str) -> LogLine:
    """Strip ANSI codes and an SGLang / vLLM / uvicorn prefix from one line."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    engine, message, log_ts, ranks, process = _split_prefix(line)
    return LogLine(
        engine, message, log_ts, {k: int(v) for k, v in _RANK.findall(ranks)}, process
    )


def _split_prefix(line: str) -> tuple[str | None, str, str | None, str, str | None]:
    """(engine, message, log_ts, SGLang rank text, vLLM process) of an ANSI-free line."""
    process = None
    if line.startswith("("):
        m = VLLM_PROC.match(line)
        if m:
            process = m.group(1)
            line = line[m.end() :]
    if line.startswith("[") and line[1:5].isdigit():
        m = SGLANG_PREFIX.match(line)
        if m:
            return "sglang", line[m.end() :], m.group(1), m.group(2), process
    if line[:1] in "DIWEC":
        m = VLLM_PREFIX.match(line)
        if m:
            return "vllm", line[m.end() :], m.group(2), "", process
        m = UVICORN_PREFIX.match(line)
        if m:
            return "vllm" if process else None, line[m.end() :], None, "", process
    return "vllm" if process else None, line, None, "", process


# --------------------------------------------------------------------------- signatures


@cache
def _signatures() -> dict[str, Any]:
    path = resources.files(__package__).joinpath("data", "log_signatures_v1.json")
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for group in ("events", "numbers"):
        for sig in raw[group]:
            sig["_rx"] = re.compile(sig["regex"]) if sig.get("regex") else None
    return raw


_CUDA_GRAPH = re.compile(
    r"Capture (?:(target|draft) )?(?:(extend|decode|verify|piecewise) )?(?:cuda|CUDA|cpu|npu) graph (begin|end)\b"
)


@cache
def _any_needle() -> re.Pattern[str]:
    """One alternation of every needle: lines holding none are skipped at C speed."""
    sigs = _signatures()
    needles = {sig["needle"] for group in ("events", "numbers") for sig in sigs[group]}
    needles |= {spec["needle"] for spec in sigs["batch_lines"].values()}
    needles |= {sig.needle for sig in failure_signatures()}
    return re.compile(literal_trie(needles))


@cache
def _line_of_interest() -> re.Pattern[str]:
    """Lines that can matter: a needle anywhere, or (at a line start) a prefix naming an engine.

    The prefix alternatives are a superset of what ``_split_prefix`` accepts; a hit is only a
    candidate and the line is then parsed exactly. Valid for ANSI-free text only.
    """
    engine_start = (
        r"(?<![^\r\n])(?:\(\w+ pid=\d+\) |\[\d{4}-|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d)"
    )
    return re.compile(f"{engine_start}|{_any_needle().pattern}")


def _signature_event(sig: dict[str, Any], msg: str) -> str | None:
    """The event a log signature names for this message, or None when its regex misses."""
    event: str = sig["event"]
    if sig["_rx"] is not None:
        m = sig["_rx"].search(msg)
        if not m:
            return None
        if sig.get("compose") == "cuda_graph":
            event = _compose_cuda_graph(m)
    return event


def _compose_cuda_graph(m: re.Match[str]) -> str:
    role, variant, phase = m.group(1), m.group(2), m.group(3)
    parts = []
    if role == "draft":
        parts.append("draft")
    if variant in ("extend", "verify", "piecewise"):
        parts.append(variant)
    return "_".join([*parts, "cuda_graph", phase])


def line_events(line: LogLine, context_engine: str) -> list[EventHit]:
    """Milestone events in one prefixed-stripped log line."""
    hits: list[EventHit] = []
    msg = line.message
    for sig in _signatures()["events"]:
        if sig["needle"] not in msg:
            continue
        engine = sig["engine"] if sig["engine"] != "any" else (line.engine or context_engine)
        event = _signature_event(sig, msg)
        if event is None:
            continue
        event = sig.get("event_by_engine", {}).get(engine, event)
        hits.append(EventHit(engine, event, msg[:DETAIL_CHARS].strip() or None, line.log_ts))
    return hits


def line_numbers(line: LogLine) -> list[NumberHit]:
    """Startup numbers (KV tokens, capture time …) and periodic batch metrics in one line."""
    msg = line.message
    out: list[NumberHit] = []
    for sig in _signatures()["numbers"]:
        if sig["needle"] not in msg:
            continue
        m = sig["_rx"].search(msg)
        if not m:
            continue
        groups = m.groupdict()
        label = sig.get("label")
        if label:
            label = label.format(**{k: (v or "").replace(",", "") for k, v in groups.items()})
        elif sig.get("label_from") == "cuda_graph":
            graph = _CUDA_GRAPH.search(msg)
            label = f"graph={_compose_cuda_graph(graph).removesuffix('_end')}" if graph else None
        for name, raw in groups.items():
            if raw is None or name.startswith("_"):
                continue
            out.append(
                NumberHit(
                    name, float(raw.replace(",", "")), sig["units"].get(name), label, "server_log"
                )
            )
    for spec in _signatures()["batch_lines"].values():
        if spec["needle"] in msg:
            out.extend(_batch_line(msg, spec))
    return out


def _batch_line(msg: str, spec: dict[str, Any]) -> list[NumberHit]:
    pairs: dict[str, str] = {}
    for part in msg[msg.find(spec["needle"]) :].split(","):
        key, sep, text = part.rpartition(":")
        if sep:
            pairs[_batch_key(key)] = text
    label = None
    if spec["label_key"] and spec["label_key"] in pairs:
        count = _NUMBER.match(pairs[spec["label_key"]].strip())
        if count:
            label = f"{spec['label']}={int(float(count.group()))}"
    out: list[NumberHit] = []
    for name, (metric, unit) in spec["keys"].items():
        raw = pairs.get(name)
        if raw is None:
            continue
        value = _batch_value(raw)
        if value is None:
            continue
        if unit == "fraction_from_%":
            value, unit = value / 100.0, None
        out.append(NumberHit(metric, value, unit, label, spec["source"]))
    return out


@lru_cache(maxsize=4096)
def _batch_key(key: str) -> str:
    """``[… TP0] Decode batch. #token`` -> ``#token`` (keys are a small vocabulary: cached)."""
    key = key.rsplit(": ", 1)[-1].rsplit(". ", 1)[-1]
    return _KEY_LEAD.sub("", key).strip()


@lru_cache(maxsize=4096)
def _batch_value(raw: str) -> float | None:
    raw = raw.strip()
    if raw in ("True", "False"):
        return 1.0 if raw == "True" else 0.0
    m = _NUMBER.match(raw)
    return float(m.group()) if m else None


# --------------------------------------------------------------------------- whole outputs


def scan_log(
    text: str, context_engine: str = "sglang", counted: set[str] | None = None
) -> LogScan:
    """Events (deduplicated per output) and numbers in a tool output holding server logs.
    ``counted`` (kept by the caller across a session) skips numbers of timestamped lines
    already taken from an earlier output."""
    scan = LogScan(counted=counted)
    seen: set[tuple[str, str, str | None]] = set()
    if "\x1b" in text:
        _scan_lines(text, context_engine, scan, seen)
        return scan
    engine = context_engine
    has_cr = "\r" in text
    rx = _line_of_interest()
    pos, n = 0, len(text)
    while pos < n:
        m = rx.search(text, pos)
        if m is None:
            break
        p = m.start()
        if has_cr:
            start = max(text.rfind("\n", pos, p), text.rfind("\r", pos, p), pos - 1) + 1
            eol = _EOL.search(text, p)
            end = n if eol is None else eol.start()
        else:
            start = max(text.rfind("\n", pos, p), pos - 1) + 1
            end = text.find("\n", p)
            end = n if end < 0 else end
        if end - start > MAX_LINE:
            _long_line(text[start:end], engine, scan, seen)
        else:
            engine = _scan_line(text[start:end], engine, scan, seen)
        pos = end + 1
    return scan


_EOL = re.compile(r"[\r\n]")


def _scan_lines(
    text: str, engine: str, scan: LogScan, seen: set[tuple[str, str, str | None]]
) -> None:
    """Every line in turn: the path for text holding ANSI codes, which can hide needles."""
    for raw in iter_lines(text):
        if len(raw) > MAX_LINE:
            _long_line(raw, engine, scan, seen)
        elif raw:
            engine = _scan_line(ANSI.sub("", raw) if "\x1b" in raw else raw, engine, scan, seen)


def _scan_line(
    raw: str, engine: str, scan: LogScan, seen: set[tuple[str, str, str | None]]
) -> str:
    """Add one ANSI-free line's findings to ``scan``; returns the engine in force after it."""
    line_engine, log_ts, facts = _raw_line_facts(raw)
    if line_engine:
        engine = line_engine
        scan.engines_seen.add(line_engine)
    if facts is None:
        return engine
    events, failures, numbers = facts
    for sig_engine, event, by_engine, detail in events:
        ev_engine = sig_engine if sig_engine != "any" else engine
        if by_engine:
            event = by_engine.get(ev_engine, event)
        key: tuple[str, str, str | None] = (ev_engine, event, None)
        if key not in seen:
            seen.add(key)
            scan.events.append(EventHit(ev_engine, event, detail, log_ts))
    for f_engine, event, detail in failures:
        f_engine = f_engine if f_engine != "any" else engine
        key = (f_engine, event, detail)
        if key not in seen:
            seen.add(key)
            scan.events.append(EventHit(f_engine, event, detail, log_ts))
    if numbers and len(scan.numbers) < MAX_RESULTS:
        if scan.counted is not None and log_ts:
            if raw in scan.counted:
                return engine
            scan.counted.add(raw)
        scan.numbers.extend(numbers)
    return engine


_EventTemplate = tuple[str, str, "dict[str, str] | None", "str | None"]
_LineFacts = tuple[
    tuple[_EventTemplate, ...], tuple[tuple[str, str, str], ...], tuple[NumberHit, ...]
]


@lru_cache(maxsize=LINE_CACHE)
def _raw_line_facts(raw: str) -> tuple[str | None, str | None, _LineFacts | None]:
    """(engine, log_ts, facts) of an ANSI-free line: polls re-read the same log lines."""
    line_engine, msg, log_ts, _, _ = _split_prefix(raw)
    return line_engine, log_ts, _line_facts(msg)


@lru_cache(maxsize=LINE_CACHE)
def _line_facts(msg: str) -> _LineFacts | None:
    """What a prefix-stripped message yields before engine context is applied (None: nothing)."""
    if not _any_needle().search(msg):
        return None
    events: list[_EventTemplate] = []
    for sig in _signatures()["events"]:
        if sig["needle"] not in msg:
            continue
        event = _signature_event(sig, msg)
        if event is None:
            continue
        detail = msg[:DETAIL_CHARS].strip() or None
        events.append((sig["engine"], event, sig.get("event_by_engine"), detail))
    failures = tuple((f.engine, f.event, f.detail or f.text) for f in failure_hits(msg))
    numbers = tuple(line_numbers(LogLine(None, msg)))
    return tuple(events), failures, numbers


def _long_line(
    raw: str, engine: str, scan: LogScan, seen: set[tuple[str, str, str | None]]
) -> None:
    for fail in failure_hits(raw):
        f_engine = fail.engine if fail.engine != "any" else engine
        key = (f_engine, fail.event, fail.detail or fail.text)
        if key not in seen:
            seen.add(key)
            scan.events.append(EventHit(f_engine, fail.event, fail.detail or fail.text, None))
