"""Peak memory of ingesting one very large session (streaming, bounded memory).

    python benchmarks/bench_memory.py [--mb 1024] [--keep]

Writes a seeded Claude-Code-shaped JSONL of about --mb megabytes, ingests it in a fresh
subprocess sampled every 20 ms, and prints its peak memory: PSS summed over the ingest's
process tree (a forked tagging worker included), or the largest single process's RSS if
higher; the goal is <= 1.5 GiB for 1 GB. The wall time printed is of that sampled run (reading
/proc takes CPU from the ingest): bench_ingest.py times ingests without sampling.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import write_corpus  # noqa: E402
from _rss import run_measured  # noqa: E402

BYTES_PER_RECORD = 1750  # measured on the seeded corpus


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_memory_"))
    src = work / "big.jsonl"
    n = args.mb * 2**20 // BYTES_PER_RECORD
    write_corpus(src, n)
    size = src.stat().st_size / 2**20
    print(f"corpus: {n} records, {size:.0f} MB")
    code = (
        "from analytics.ingest import ingest; "
        f"s = ingest([r'{src}'], db=r'{work / 'big.duckdb'}', exclusive=True); print(s.totals(), [f.error for f in s.errors]); "
        "raise SystemExit(1 if s.errors else 0)"
    )
    elapsed, status, tree, single = run_measured([sys.executable, "-c", code])
    peak = max(tree, single)
    print(f"ingest: {elapsed:.1f} s (sampled run), exit {status}, peak memory {peak:.0f} MiB "
          f"(PSS summed over the ingest's processes, sampled, or the largest single process's "
          f"RSS, {single:.0f} MiB, if higher; {peak / size:.2f} x file size); "
          "goal: <= 1536 MiB for 1 GB")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
