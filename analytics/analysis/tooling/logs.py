"""SGLang and vLLM log-line recognisers: prefixes, startup milestones, periodic metrics.

Signatures live in ``data/log_signatures_v1.json``. Work is linear: a compiled search for the
needles' rare-character anchors (``anchors``) and for line starts that may name an engine finds
the lines that can matter; text between runs of such lines is passed over at C speed, lines
within a run are read one after the other. What a line yields (report literals of ``gates``
included) is cached per line and per prefix-stripped message: polling loops re-read the same
log tail. Lines longer than ``MAX_LINE`` are not log lines; only failure needles are searched
in them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from importlib import resources
from itertools import chain, islice
from typing import Any

from .anchors import anchor_trie, rare_anchor
from .failures import FailureSignature, failure_hits, failure_signatures
from .gates import literals_of, report_mask

MAX_LINE = 16_000
MAX_RESULTS = 5_000
"""Numbers kept per output; events (deduplicated) are always collected."""
DETAIL_CHARS = 240
LINE_CACHE = 16_384
"""Distinct lines, and prefix-stripped messages, whose findings are remembered (least recently
used go)."""
SPLIT_CHUNK = 1 << 20
"""Characters of an output split into lines at a time (``_lines``)."""
CACHED_LINE = 2_000
"""Longer lines are not cached: their findings cost little next to their length, and the
caches stay small (at most ``LINE_CACHE`` lines of this length each)."""

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
    reports: frozenset[str] | None = None
    """The ``gates.REPORT_LITERALS`` the output holds, when the scan read all of its lines
    (None: not known, search the output)."""


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
    """(engine, message, log_ts, SGLang rank text, vLLM process) of an ANSI-free line.

    vLLM nests process tags (``(EngineCore_DP0 pid=1) (Worker_TP1 pid=2) INFO …`` from a
    tensor-parallel worker); all are stripped and the innermost, the writing process, is kept."""
    process = None
    while line.startswith("("):
        m = VLLM_PROC.match(line)
        if not m:
            break
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
def _needles() -> frozenset[str]:
    """Every literal a line must hold to yield an event, a number or a failure."""
    sigs = _signatures()
    needles = {sig["needle"] for group in ("events", "numbers") for sig in sigs[group]}
    needles |= {spec["needle"] for spec in sigs["batch_lines"].values()}
    needles |= {sig.needle for sig in failure_signatures()}
    return frozenset(needles)


@cache
def _any_needle() -> re.Pattern[str]:
    """Hits wherever a needle may be (the rare anchor of each): text without a hit holds no
    needle, and is rejected several times faster than by a trie of the whole needles."""
    return re.compile(anchor_trie(_needles()))


ENGINE_LINE_STARTS = ("(", "[", "DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")
"""What a line whose prefix names an engine starts with (a superset of ``_split_prefix``)."""
ENGINE_FIRST_CHARS = frozenset(start[0] for start in ENGINE_LINE_STARTS)


@cache
def _first_candidate() -> re.Pattern[str]:
    """Hits at the first line that can matter, or before it: a needle's anchor anywhere, or a
    line break followed by the start of an engine prefix. Literals only, so ``re`` skips the
    characters none of them starts with at C speed."""
    starts = {brk + start for brk in "\r\n" for start in ENGINE_LINE_STARTS}
    return re.compile(anchor_trie(_needles(), starts))


def _anchors_in(msg: str) -> frozenset[str]:
    """What ``_any_needle`` matches at each place of ``msg`` where it matches (overlapping
    places included: a needle can start inside another's anchor)."""
    search = _any_needle().search
    found = set()
    m = search(msg)
    while m:
        found.add(m.group())
        m = search(msg, m.start() + 1)
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class _Selection:
    """The signatures whose needles a message may hold, each group in data-file order."""

    events: tuple[dict[str, Any], ...]
    numbers: tuple[dict[str, Any], ...]
    batch_specs: tuple[dict[str, Any], ...]
    failures: tuple[FailureSignature, ...]


@lru_cache(maxsize=1024)
def _selection(found: frozenset[str]) -> _Selection:
    """The signatures a message where ``_anchors_in`` found ``found`` may match: those whose
    anchor begins with a found text (where two anchors begin alike, the trie reports the
    shorter). A needle's anchor is in every text that holds the needle, so no signature
    that can match is left out; a message is checked against a few signatures, not all."""

    def may(needle: str) -> bool:
        anchor = rare_anchor(needle)
        return any(anchor.startswith(text) for text in found)

    sigs = _signatures()
    return _Selection(
        events=tuple(sig for sig in sigs["events"] if may(sig["needle"])),
        numbers=tuple(sig for sig in sigs["numbers"] if may(sig["needle"])),
        batch_specs=tuple(spec for spec in sigs["batch_lines"].values() if may(spec["needle"])),
        failures=tuple(sig for sig in failure_signatures() if may(sig.needle)),
    )


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
    sigs = _signatures()
    return _numbers(line.message, sigs["numbers"], sigs["batch_lines"].values())


def _numbers(
    msg: str, signatures: Iterable[dict[str, Any]], batch_specs: Iterable[dict[str, Any]]
) -> list[NumberHit]:
    """``line_numbers`` of a message with these number signatures and batch-line specs."""
    out: list[NumberHit] = []
    for sig in signatures:
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
    for spec in batch_specs:
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


ContextEngine = str | Callable[[], str]
"""The engine of lines without a prefix before any line with one, or a function giving it
(called only when such a line yields something: finding it can cost more than the scan)."""


def scan_log(
    text: str, context_engine: ContextEngine = "sglang", counted: set[str] | None = None
) -> LogScan:
    """Events (deduplicated per output) and numbers in a tool output holding server logs.
    ``counted`` (kept by the caller across a session) skips numbers of timestamped lines
    already taken from an earlier output."""
    scan = LogScan(counted=counted)
    ansi = "\x1b" in text  # ANSI codes can hide needles: every line is read, codes removed
    start = 0 if ansi else _first_line_start(text)
    if start is None:
        return scan
    skipped = report_mask(text[:start]) if start else 0
    if "\r" in text:  # progress bars: a carriage return ends a line too
        text = text.replace("\r", "\n")
    reports = _scan_text(text, start, context_engine, scan, ansi)
    if reports is not None and not ansi:
        scan.reports = literals_of(reports | skipped)
    return scan


def _first_line_start(text: str) -> int | None:
    """Where the first line that can matter starts (or a line before it); None when no line
    can: most tool outputs hold no server log, and are passed over at C speed."""
    if text[:1] in ENGINE_FIRST_CHARS:
        return 0
    m = _first_candidate().search(text)
    if m is None:
        return None
    hit = m.start()
    if text[hit] in "\r\n":  # a line break before an engine prefix
        return hit + 1
    return max(text.rfind("\n", 0, hit), text.rfind("\r", 0, hit)) + 1


def _next_line_start(text: str, end: int) -> int | None:
    """The start of the first line after the one ending at ``end`` that can matter (or of a
    line before it); None when none can. ``text`` has no carriage returns."""
    m = _first_candidate().search(text, end)
    if m is None:
        return None
    hit = m.start()
    return hit + 1 if text[hit] == "\n" else text.rfind("\n", end, hit) + 1


_Seen = set[tuple[str, str, "str | None"]]


def _scan_text(
    text: str, start: int, context_engine: ContextEngine, scan: LogScan, ansi: bool
) -> int | None:
    """Add the findings of the lines of ``text`` (ended by line feeds only) from ``start`` (a
    line start) to ``scan``; ``context_engine`` is in force before the first. Returns the
    ``gates.report_mask`` of those lines, or None when some were passed over unread.

    Logs come in runs of lines that matter (a prefix, a needle or a report literal in each):
    those are read one after the other. After a line that yields nothing, one regex search
    finds the next line that can matter, and the lines between are passed over at C speed
    (not in text with ANSI codes, whose lines are all read). Lines are looked up in a cache;
    a line seen again under the engine it was applied under is skipped when ``_apply_line``
    said that it could add nothing more (events already in, numbers counted once; its own
    prefix names that engine, if any): progress bars and polls repeat lines.
    """
    seen: _Seen = set()
    applied: dict[str, str] = {}
    engines = scan.engines_seen
    engine = context_engine if isinstance(context_engine, str) else None
    reports: int | None = 0
    lines = _lines(text, start)
    end = start - 1  # where the line read last ends in ``text``
    for raw in lines:
        end += len(raw) + 1
        if ansi and "\x1b" in raw and len(raw) <= MAX_LINE:
            raw = ANSI.sub("", raw)
        if applied.get(raw, _UNSEEN) == engine:
            continue
        if len(raw) <= CACHED_LINE:
            line_engine, log_ts, facts, mask = _raw_line_facts(raw)
        elif len(raw) <= MAX_LINE:
            line_engine, log_ts, facts, mask = _uncached_line_facts(raw)
        else:
            engine = engine or _called(context_engine)
            _long_line(raw, engine, scan, seen)
            line_engine, facts, mask = None, None, report_mask(raw)
        if mask and reports is not None:
            reports |= mask
        if line_engine:
            engine = line_engine
            engines.add(line_engine)
        if facts is not None:
            engine = engine or _called(context_engine)
            if _apply_line(raw, log_ts, facts, engine, scan, seen):
                applied[raw] = engine
        elif not (line_engine or mask or ansi) and end < len(text):
            following = _next_line_start(text, end)
            if following != end + 1:
                reports = None
            if following is None:
                break
            _drop(lines, text.count("\n", end + 1, following))
            end = following - 1
    return reports


_UNSEEN = object()


def _lines(text: str, start: int) -> Iterator[str]:
    """The lines of ``text`` from ``start`` (a line start), split at C speed a chunk of about
    ``SPLIT_CHUNK`` characters at a time: all at once, a long output of short lines would be
    held as a million strings."""
    if len(text) - start <= SPLIT_CHUNK:
        return iter((text[start:] if start else text).split("\n"))
    return chain.from_iterable(chunk.split("\n") for chunk in _chunks(text, start))


def _chunks(text: str, start: int) -> Iterator[str]:
    """``text`` from ``start`` cut at line feeds about every ``SPLIT_CHUNK`` characters (the
    line feeds cut at are left out: the chunks' lines are the text's lines)."""
    while True:
        cut = text.find("\n", start + SPLIT_CHUNK)
        if cut < 0:
            yield text[start:]
            return
        yield text[start:cut]
        start = cut + 1


def _drop(lines: Iterator[str], count: int) -> None:
    """Consume ``count`` items of ``lines`` (at C speed)."""
    next(islice(lines, count, count), None)


def _called(context_engine: ContextEngine) -> str:
    """The context engine, found now if it is given as a function."""
    return context_engine if isinstance(context_engine, str) else context_engine()


def _apply_line(
    raw: str, log_ts: str | None, facts: _LineFacts, engine: str, scan: LogScan, seen: _Seen
) -> bool:
    """Add one line's findings to ``scan`` under the engine in force; True when adding the same
    line again under the same engine would change nothing."""
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
    if not numbers or len(scan.numbers) >= MAX_RESULTS:
        return True
    if scan.counted is not None and log_ts:
        if raw not in scan.counted:
            scan.counted.add(raw)
            scan.numbers.extend(numbers)
        return True
    scan.numbers.extend(numbers)
    return False


_EventTemplate = tuple[str, str, "dict[str, str] | None", "str | None"]
_LineFacts = tuple[
    tuple[_EventTemplate, ...], tuple[tuple[str, str, str], ...], tuple[NumberHit, ...]
]
_RawLineFacts = tuple["str | None", "str | None", "_LineFacts | None", int]


@lru_cache(maxsize=LINE_CACHE)
def _raw_line_facts(raw: str) -> _RawLineFacts:
    """(engine, log_ts, facts, report mask) of an ANSI-free line: polls re-read the same log
    lines."""
    line_engine, msg, log_ts, ranks, process = _split_prefix(raw)
    return line_engine, log_ts, _ranked(_line_facts(msg), ranks or process), report_mask(raw)


def _uncached_line_facts(raw: str) -> _RawLineFacts:
    """The same for a line longer than ``CACHED_LINE``, remembered in no cache."""
    line_engine, msg, log_ts, ranks, process = _split_prefix(raw)
    return line_engine, log_ts, _ranked(_message_facts(msg), ranks or process), report_mask(raw)


def _ranked(facts: _LineFacts | None, writer: str | None) -> _LineFacts | None:
    """``facts`` with the writer's rank added to its numbers' labels (``tp=1``, ``dp=1,tp=5``)
    when a rank other than the first wrote the line: an SGLang prefix's ranks (``TP2``), a
    vLLM process (``Worker_TP1``). Every rank prints its own start-up figures; the first
    rank's stand for the server, as SGLang's own summary lines do (printed by TP0 alone)."""
    if facts is None or not facts[2] or not writer:
        return facts
    ranks = _RANK.findall(writer)
    if all(int(index) == 0 for _, index in ranks):
        return facts
    tag = ",".join(f"{kind.lower()}={int(index)}" for kind, index in ranks)
    numbers = tuple(replace(n, label=f"{n.label},{tag}" if n.label else tag) for n in facts[2])
    return facts[0], facts[1], numbers


def _message_facts(msg: str) -> _LineFacts | None:
    """What a prefix-stripped message yields before engine context is applied (None: nothing)."""
    found = _anchors_in(msg)
    if not found:
        return None
    selection = _selection(found)
    events: list[_EventTemplate] = []
    for sig in selection.events:
        if sig["needle"] not in msg:
            continue
        event = _signature_event(sig, msg)
        if event is None:
            continue
        detail = msg[:DETAIL_CHARS].strip() or None
        events.append((sig["engine"], event, sig.get("event_by_engine"), detail))
    failures = tuple(
        (f.engine, f.event, f.detail or f.text) for f in failure_hits(msg, selection.failures)
    )
    numbers = tuple(_numbers(msg, selection.numbers, selection.batch_specs))
    if not (events or failures or numbers):
        return None
    return tuple(events), failures, numbers


_line_facts = lru_cache(maxsize=LINE_CACHE)(_message_facts)
"""The same, cached: a message recurs under new timestamps."""


def _long_line(raw: str, engine: str, scan: LogScan, seen: _Seen) -> None:
    for fail in failure_hits(raw):
        f_engine = fail.engine if fail.engine != "any" else engine
        key = (f_engine, fail.event, fail.detail or fail.text)
        if key not in seen:
            seen.add(key)
            scan.events.append(EventHit(f_engine, fail.event, fail.detail or fail.text, None))
