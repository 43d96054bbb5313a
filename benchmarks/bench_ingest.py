"""Ingest speed against DuckDB's own read_json of the same file, measured in the same run.

    python benchmarks/bench_ingest.py [--records 100000] [--keep]

Prints wall times, ratios and peak memory of each step (each runs in a fresh subprocess; the
times come from unsampled runs, the memory from separate runs sampled every 20 ms; "peak MiB"
is PSS summed over the step's processes, or the largest one's RSS if higher):
  (a) transcripts ingest (parse + store, no analysis)   goal <= 2x read_json
  (a') full ingest with tagging and analysis            goal <= 4x read_json (issue 3)
       (also shown without the BM25 index build, which is a separate cost)
Each ingest step calls ``ingest(..., exclusive=True)`` in a fresh process and ends it with
``machine.exit_now``, as the ``transcripts ingest`` command does (see ``store.db.connect``).
Set TRANSCRIPTS_TIMING=1 to see where an ingest spends its time.
  (b) duckdb read_json of the file into a table         the reference (best of two runs)
  re-ingest of the unchanged file                       goal <= 2% of (a')
  ingest after appending 1k records                     goal <= 5% of (a')
       cold (a fresh `transcripts ingest` process) and warm (as `ingest --watch` does it:
       spaCy and the compiled patterns already loaded). The warm append is timed around the
       ingest() call only, in a process that ingested before: it is compared with the
       ingest() calls of the full ingest and of the cold append, timed the same way (no
       interpreter start-up, no imports). Beside the cold append, the floor of any cold
       process that appends: a fresh interpreter that only imports the libraries an append
       loads (DuckDB, pyarrow, pandas, spaCy, bashlex), as a fraction of (a').
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _compiled import byte_compile_package  # noqa: E402
from _corpus import write_corpus  # noqa: E402
from _rss import run_measured  # noqa: E402

CHECK = "; from analytics.machine import exit_now; exit_now(1 if s.errors else 0)"


APPEND_LIBRARIES = "import duckdb, pyarrow, pandas, spacy, bashlex"
"""What a process that appends tagged records must import, whatever it then does."""


def run(code: str) -> float:
    """Run python code in a subprocess; return its seconds. Nothing samples it meanwhile:
    reading /proc every few ms would take CPU from the 2 cores the step runs on.
    An ingest step (``s = ingest(...)``) fails the benchmark when any file reports an error."""
    if "s = ingest(" in code:
        code += CHECK
    start = time.perf_counter()
    status = subprocess.run([sys.executable, "-c", code]).returncode
    if status != 0:
        raise SystemExit(f"step failed: {code}")
    return time.perf_counter() - start


def run_ingest(code: str, call_seconds: Path) -> tuple[float, float]:
    """``run`` an ingest step whose code writes the seconds of its ``ingest()`` call to
    ``call_seconds``: (wall seconds of the whole process, seconds of the call)."""
    wall = run(code)
    return wall, float(call_seconds.read_text())


def peak_memory(code: str) -> float:
    """Run python code again, sampled: peak memory MiB (PSS summed over all its processes,
    or the largest process's RSS if higher). Its time is not reported."""
    if "s = ingest(" in code:
        code += CHECK
    _, status, tree, single = run_measured([sys.executable, "-c", code])
    if status != 0:
        raise SystemExit(f"step failed: {code}")
    return max(tree, single)


def warm_append(work: Path, src: Path, db: Path) -> float:
    """Seconds of the ``ingest()`` call that ingests the appended records, in a process that
    already ingested once (start-up, imports and the first ingest are not counted)."""
    warmup = work / "warmup.jsonl"
    write_corpus(warmup, 200, seed=11)
    out = work / "warm_seconds.txt"
    code = (
        "import time; from analytics.ingest import Warm, ingest; w = Warm()\n"
        f"s = ingest([r'{warmup}'], db=r'{work / 'warmup.duckdb'}', warm=w, exclusive=True)\n"
        "if s.errors:\n"
        "    raise SystemExit(f'warm-up ingest failed: {[f.error for f in s.errors]}')\n"
        f"t = time.perf_counter(); s = ingest([r'{src}'], db=r'{db}', warm=w, exclusive=True); "
        f"open(r'{out}', 'w').write(str(time.perf_counter() - t))"
    )
    run(code)  # (``run`` checks the errors of the second ingest)
    return float(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    byte_compile_package()
    work = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    src = work / "session.jsonl"
    write_corpus(src, args.records)
    mb = src.stat().st_size / 2**20
    print(f"corpus: {args.records} records, {mb:.1f} MB at {src}")

    def read_json(db: Path) -> str:
        return (
            f"import duckdb; c = duckdb.connect(r'{db}');"
            f"c.execute(\"CREATE TABLE t AS SELECT * FROM read_json('{src}', "
            "format='newline_delimited', maximum_object_size=104857600)\")"
        )

    call_seconds = work / "call_seconds.txt"

    def ingest(db: Path, options: str = "") -> str:
        """An ingest step; it writes the seconds of its ingest() call to ``call_seconds``."""
        return (
            "import time; from analytics.ingest import ingest; t = time.perf_counter(); "
            f"s = ingest([r'{src}'], db=r'{db}', exclusive=True{options}); "
            f"open(r'{call_seconds}', 'w').write(str(time.perf_counter() - t))"
        )

    lite_options = ", analyse=False, redact=False, build_index=False"
    os.sync()  # the corpus just written is not flushed to disk during the timed steps
    # The reference is the faster of two runs (each into a database of its own): the
    # ratios below are against DuckDB at its best, not against one slow first read.
    ref = min(run(read_json(work / "ref.duckdb")), run(read_json(work / "ref2.duckdb")))
    lite = run(ingest(work / "lite.duckdb", lite_options))
    noidx = run(ingest(work / "noidx.duckdb", ", build_index=False"))
    full_db = work / "full.duckdb"
    full, full_call = run_ingest(ingest(full_db), call_seconds)
    again = run(ingest(full_db))
    warm_db, append_mem_db = work / "warm.duckdb", work / "append_mem.duckdb"
    shutil.copy(full_db, warm_db)
    shutil.copy(full_db, append_mem_db)
    write_corpus(src, 1000, start=args.records)
    append, append_call = run_ingest(ingest(full_db), call_seconds)
    warm = warm_append(work, src, warm_db)
    floor = min(run(APPEND_LIBRARIES) for _ in range(3))
    # Memory, in separate sampled runs of the same steps (the corpus has grown by 1k records).
    ref_rss = peak_memory(read_json(work / "ref_mem.duckdb"))
    lite_rss = peak_memory(ingest(work / "lite_mem.duckdb", lite_options))
    full_rss = peak_memory(ingest(work / "full_mem.duckdb"))
    append_rss = peak_memory(ingest(append_mem_db))

    # (ratio, what it is a ratio of): a time divided by one measured the same way
    rows = [
        ("duckdb read_json (reference)", ref, ref_rss, None),
        ("ingest, parse+store only", lite, lite_rss, (lite / ref, "ref")),
        ("ingest, tags+analysis+redaction, no BM25 index", noidx, None, (noidx / ref, "ref")),
        ("ingest, full (tags, analysis, redaction, index)", full, full_rss, (full / ref, "ref")),
        ("  the same, its ingest() call only", full_call, None, None),
        ("re-ingest unchanged", again, None, (again / full, "full")),
        ("append 1k records (cold process)", append, append_rss, (append / full, "full")),
        ("  the same, its ingest() call only", append_call, None,
         (append_call / full_call, "full's call")),
        ("  a fresh process importing its libraries only", floor, None, (floor / full, "full")),
        ("append 1k records (warm, as ingest --watch; call)", warm, None,
         (warm / full_call, "full's call")),
        ("  warm against cold append", warm, None, (warm / append_call, "cold's call")),
    ]
    print(f"{'step':<50} {'seconds':>8} {'peak MiB':>9} {'ratio':>8}  of")
    for name, secs, rss, ratio in rows:
        r = f"{ratio[0]:>8.3f}  {ratio[1]}" if ratio is not None else f"{'-':>8}"
        m = f"{rss:.0f}" if rss is not None else "-"
        print(f"{name:<50} {secs:>8.2f} {m:>9} {r}")
    print("goals: parse+store <= 2.0x ref; tags+analysis (no index) <= 4.0x ref; re-ingest <= 0.02 of full; "
          "append <= 0.05 of full; peak memory <= 1536 MiB")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
