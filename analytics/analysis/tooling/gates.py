"""The literals a report parser needs in an output before it reads it line by line.

Benchmark results and nvidia-smi snapshots are rare among tool outputs, so each parser first
asks whether the output holds its literal: one search of the whole output each, six in all for
every output. ``scan_log`` splits log outputs into lines anyway and caches what each distinct
line holds, these literals included; it hands the answer on (``LogScan.reports``) and the
parsers take it instead of searching again. None of these literals holds a line break, so an
output holds one exactly when one of its lines does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

SERVING_BANNER = "Serving Benchmark Result"
LATENCY = "latency:"
THROUGHPUT = "Throughput: "
SMI_TABLE = "NVIDIA-SMI "
CSV_MEMORY = "memory."
CSV_UTILIZATION = "utilization."

REPORT_LITERALS = (SERVING_BANNER, LATENCY, THROUGHPUT, SMI_TABLE, CSV_MEMORY, CSV_UTILIZATION)

Holds = Callable[[str], bool]
"""``holds(literal)``: whether the output holds ``literal`` (one of ``REPORT_LITERALS``)."""


def report_mask(line: str) -> int:
    """Bit ``n`` set when ``line`` holds ``REPORT_LITERALS[n]``. Most lines hold none, which
    one chain of ``in`` tests tells at about the cost of searching the whole output for them
    (the chain lists ``REPORT_LITERALS`` again, by hand: test_tooling_logs checks it does)."""
    if not (
        SERVING_BANNER in line
        or LATENCY in line
        or THROUGHPUT in line
        or SMI_TABLE in line
        or CSV_MEMORY in line
        or CSV_UTILIZATION in line
    ):
        return 0
    return sum(1 << n for n, literal in enumerate(REPORT_LITERALS) if literal in line)


@cache
def literals_of(mask: int) -> frozenset[str]:
    """The report literals whose bits ``mask`` sets."""
    return frozenset(lit for n, lit in enumerate(REPORT_LITERALS) if mask >> n & 1)
