"""Where an ingest spends its time: ``TRANSCRIPTS_TIMING=1 transcripts ingest …`` prints it."""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

TIMINGS: dict[str, float] = defaultdict(float)
PEAK_RSS_MIB: dict[str, float] = {}


def _rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def timed(stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMINGS[stage] += time.perf_counter() - start
        PEAK_RSS_MIB[stage] = max(PEAK_RSS_MIB.get(stage, 0.0), _rss_mib())


def report() -> None:
    """Print the stage totals to stderr when ``TRANSCRIPTS_TIMING`` is set, then reset."""
    if os.environ.get("TRANSCRIPTS_TIMING") and TIMINGS:
        width = max(len(k) for k in TIMINGS)
        for stage, secs in sorted(TIMINGS.items(), key=lambda kv: -kv[1]):
            peak = PEAK_RSS_MIB.get(stage, 0.0)
            print(f"timing {stage:<{width}} {secs:8.2f} s   peak RSS so far {peak:6.0f} MiB",
                  file=sys.stderr)
    TIMINGS.clear()
    PEAK_RSS_MIB.clear()
