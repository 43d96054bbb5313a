"""Benchmark outputs -> numbers: ``Serving Benchmark Result`` blocks (sglang.bench_serving,
vllm bench serve), ``sglang.bench_one_batch`` lines, ``vllm bench throughput|latency`` summaries.

Metric names come from the key text (``Output token throughput (tok/s)`` ->
``output_token_throughput`` in ``tok/s``; ``Mean TTFT (ms)`` -> ``ttft_mean`` in ``ms``).
Labels are comma-joined ``key=value`` conditions, e.g. ``concurrency=16,launch_msg_idx=12``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from analytics.models import BENCH_ONE_BATCH_SOURCE, BENCH_SERVING_SOURCE, VLLM_BENCH_SOURCE

from .gates import LATENCY, SERVING_BANNER, THROUGHPUT, Holds
from .logs import iter_lines

MAX_BLOCK_LINES = 120
UNITS = frozenset({"s", "ms", "req/s", "tok/s", "RPS", "%"})

_ROW = re.compile(r"\s*([^:]{1,80}):\s+(\S+)\s*$")
_PAREN = re.compile(r"(.*?)\s*\(([^()]*)\)\s*$")
_STAT = re.compile(r"(Mean|Median|Std|Min|Max|P\d+(?:\.\d+)?)\s+(.+)")
_SLUG = re.compile(r"[^a-z0-9]+")
_CONCURRENCY_FLAG = re.compile(r"--max-concurrency[= ]+(\d+)\b")
_BATCH_FLAG = re.compile(r"--batch-size[= ]+(\d+)(?!\s+\d)")

_ONE_BATCH = re.compile(
    r"(Prefill|Total)\. +latency: +([\d.]+) s, throughput: +([\d.]+) token/s"
    r"|Decode\. +median latency: +([\d.]+) s, median throughput: +([\d.]+) token/s"
    r"|Decode +\d+\. Batch size: (\d+), latency"
)
_VLLM_THROUGHPUT = re.compile(
    r"Throughput: ([\d.]+) requests/s, ([\d.]+) total tokens/s, ([\d.]+) output tokens/s"
)
_VLLM_LATENCY = re.compile(r"(Avg|\d+%) (?:percentile )?latency: ([\d.eE+-]+) seconds")


@dataclass
class BenchNumber:
    metric: str
    value: float
    unit: str | None
    label: str | None
    source: str


def slug(text: str) -> str:
    return _SLUG.sub("_", text.lower()).strip("_")


def metric_name(key: str) -> tuple[str, str | None]:
    """``Mean TTFT (ms)`` -> (``ttft_mean``, ``ms``); ``Total input tokens`` -> (…, ``tokens``)."""
    unit = None
    m = _PAREN.fullmatch(key)
    if m and m.group(2) in UNITS:
        key, unit = m.group(1), m.group(2)
    stat = _STAT.fullmatch(key)
    name = f"{slug(stat.group(2))}_{slug(stat.group(1))}" if stat else slug(key)
    if unit is None:
        for noun in ("tokens", "requests"):
            if key.lower().endswith(noun):
                unit = noun
    return name, unit


def join_label(parts: dict[str, object]) -> str | None:
    text = ",".join(f"{k}={v}" for k, v in parts.items() if v is not None)
    return text or None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def serving_blocks(
    text: str, command: str | None = None, launch_msg_idx: int | None = None
) -> list[BenchNumber]:
    """Every row of every ``Serving Benchmark Result`` block in ``text``."""
    out: list[BenchNumber] = []
    if SERVING_BANNER not in text:
        return out
    default_conc = _CONCURRENCY_FLAG.search(command or "")
    lines = iter_lines(text)
    for line in lines:
        if SERVING_BANNER in line and line.lstrip().startswith("="):
            out.extend(
                _block(lines, default_conc.group(1) if default_conc else None, launch_msg_idx)
            )
    return out


def _block(
    lines: Iterator[str], concurrency: str | None, launch_msg_idx: int | None
) -> list[BenchNumber]:
    rows: list[tuple[str, str | None, float]] = []
    rate: float | None = None
    for n, line in enumerate(lines):
        if n > MAX_BLOCK_LINES or line.startswith("=" * 10):
            break
        m = _ROW.match(line)
        if not m:
            continue
        key, raw = m.group(1).strip(), m.group(2)
        lowered = key.lower()
        if lowered in ("max request concurrency", "maximum request concurrency"):
            concurrency = raw if raw.isdigit() else concurrency
            continue
        value = _number(raw)
        if value is None:
            continue
        if lowered.startswith(("traffic request rate", "request rate configured")):
            rate = value
        name, unit = metric_name(key)
        rows.append((name, unit, value))
    label = join_label(
        {"concurrency": concurrency, "request_rate": _fmt(rate), "launch_msg_idx": launch_msg_idx}
    )
    return [BenchNumber(name, value, unit, label, BENCH_SERVING_SOURCE) for name, unit, value in rows]


def _fmt(value: float | None) -> str | None:
    if value is None:
        return None
    return str(int(value)) if value.is_integer() else str(value)


def one_batch_lines(text: str, command: str | None = None) -> list[BenchNumber]:
    """``sglang.bench_one_batch`` results (the warmup run is skipped), labelled ``bs=N``."""
    if LATENCY not in text or "token/s" not in text:
        return []
    flag = _BATCH_FLAG.search(command or "")
    default_bs = flag.group(1) if flag else None
    out: list[BenchNumber] = []
    pending: list[tuple[str, float, str]] = []
    bs: str | None = default_bs
    warmup = False
    for line in iter_lines(text):
        if line.startswith("Warmup"):
            warmup = True
            continue
        if line.startswith("Benchmark"):
            warmup = False
            continue
        m = _ONE_BATCH.search(line) if "latency" in line else None
        if not m:
            continue
        if m.group(6):
            bs = m.group(6)
        elif m.group(1):
            phase = m.group(1).lower()
            pending += [
                (f"{phase}_latency", float(m.group(2)), "s"),
                (f"{phase}_throughput", float(m.group(3)), "tok/s"),
            ]
        else:
            pending += [
                ("decode_median_latency", float(m.group(4)), "s"),
                ("decode_median_throughput", float(m.group(5)), "tok/s"),
            ]
        if m.group(1) == "Total":
            if not warmup:
                label = join_label({"bs": bs})
                out += [BenchNumber(n, v, u, label, BENCH_ONE_BATCH_SOURCE) for n, v, u in pending]
            pending, bs, warmup = [], default_bs, False
    return out


def vllm_bench_lines(
    text: str, command: str | None = None, latency: bool = True
) -> list[BenchNumber]:
    """``vllm bench throughput`` / ``vllm bench latency`` summary lines. ``latency`` False
    says the text holds no ``latency:`` (the caller searched for it already)."""
    throughput = THROUGHPUT in text
    latency = latency and "latency: " in text and " seconds" in text
    if not (throughput or latency):
        return []
    out: list[BenchNumber] = []
    flag = _BATCH_FLAG.search(command or "")
    label = join_label({"bs": flag.group(1) if flag else None})
    if throughput:
        for m in _VLLM_THROUGHPUT.finditer(text):
            out += [
                BenchNumber("throughput_requests", float(m.group(1)), "req/s", label, VLLM_BENCH_SOURCE),
                BenchNumber(
                    "throughput_total_tokens", float(m.group(2)), "tok/s", label, VLLM_BENCH_SOURCE
                ),
                BenchNumber(
                    "throughput_output_tokens", float(m.group(3)), "tok/s", label, VLLM_BENCH_SOURCE
                ),
            ]
    if latency:
        for line in iter_lines(text):
            hit = _VLLM_LATENCY.match(line) if line[:1] in "A0123456789" else None
            if hit:
                which = "avg" if hit.group(1) == "Avg" else "p" + hit.group(1).rstrip("%")
                value = _number(hit.group(2))
                if value is not None:
                    out.append(BenchNumber(f"latency_{which}", value, "s", label, VLLM_BENCH_SOURCE))
    return out


def benchmark_numbers(
    text: str,
    command: str | None = None,
    launch_msg_idx: int | None = None,
    holds: Holds | None = None,
) -> list[BenchNumber]:
    """Every benchmark result in a tool output. A parser runs only when the output holds the
    literal its results cannot be without (``gates``: most outputs hold none); ``holds`` tells
    (by default the output is searched)."""
    holds = holds or text.__contains__
    latency = holds(LATENCY)
    out = serving_blocks(text, command, launch_msg_idx) if holds(SERVING_BANNER) else []
    if latency:
        out += one_batch_lines(text, command)
    if latency or holds(THROUGHPUT):
        out += vllm_bench_lines(text, command, latency)
    return out
