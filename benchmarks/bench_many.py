"""Ingest of many sessions (a folder as ``~/.claude/projects`` holds them) against DuckDB's own
read_json of the same files, measured in the same run; one process against the worker pool.

    python benchmarks/bench_many.py [--sessions 200] [--records 500] [--keep]

Writes ``--sessions`` seeded Claude-Code-shaped sessions of ``--records`` records each into
ten project folders, then times, each in a fresh subprocess:
  (b) duckdb read_json of every file into one table         the reference (best of two runs)
  ingest, one process (``workers=1``)                          tags, analysis, redaction
  ingest, the default (a worker process per core)              the same
both without and with the BM25 index build, which runs once, after the files, in one process.
The pool's tables are compared with the one process's (they must be equal).
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

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import write_corpus  # noqa: E402


def write_sessions(root: Path, sessions: int, per_session: int) -> int:
    """The sessions, one JSONL file each; returns the bytes written."""
    total = 0
    for k in range(sessions):
        sid = f"{k:08x}-0000-4000-8000-{k:012x}"
        folder = root / f"-root-project-{k % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{sid}.jsonl"
        write_corpus(path, per_session, seed=100 + k, session=sid)
        total += path.stat().st_size
    return total


def run(code: str) -> float:
    start = time.perf_counter()
    status = subprocess.run([sys.executable, "-c", code]).returncode
    if status != 0:
        raise SystemExit(f"step failed: {code}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--records", type=int, default=500)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_many_"))
    src = work / "projects"
    size = write_sessions(src, args.sessions, args.records)
    print(f"corpus: {args.sessions} sessions x {args.records} records, "
          f"{size / 2**20:.1f} MB at {src}; {len(os.sched_getaffinity(0))} cores")
    os.sync()

    def read_json(db: Path) -> str:
        return (
            f"import duckdb; c = duckdb.connect(r'{db}');"
            f"c.execute(\"CREATE TABLE t AS SELECT * FROM read_json('{src}/*/*.jsonl', "
            "format='newline_delimited', union_by_name=true, maximum_object_size=104857600)\")"
        )

    def ingest(db: Path, options: str) -> str:
        return (
            "from analytics.ingest import ingest; "
            f"s = ingest([r'{src}'], db=r'{db}', exclusive=True{options}); "
            "from analytics.machine import exit_now; exit_now(1 if s.errors else 0)"
        )

    ref = min(run(read_json(work / "ref.duckdb")), run(read_json(work / "ref2.duckdb")))
    steps = [
        ("ingest, one process, no BM25 index", "one", ", workers=1, build_index=False"),
        ("ingest, worker pool, no BM25 index", "pool", ", build_index=False"),
        ("ingest, one process, with index", "one_idx", ", workers=1"),
        ("ingest, worker pool, with index", "pool_idx", ""),
    ]
    times = {name: run(ingest(work / f"{name}.duckdb", opts)) for _, name, opts in steps}
    print(f"{'step':<40} {'seconds':>8} {'ratio':>8}  of")
    print(f"{'duckdb read_json (reference)':<40} {ref:>8.2f} {'-':>8}")
    for label, name, _ in steps:
        print(f"{label:<40} {times[name]:>8.2f} {times[name] / ref:>8.2f}  ref")
    print(f"{'pool speed-up, no index':<40} {'':>8} {times['one'] / times['pool']:>8.2f}  "
          "one process / pool")
    print(f"{'pool speed-up, with index':<40} {'':>8} "
          f"{times['one_idx'] / times['pool_idx']:>8.2f}  one process / pool")
    con = duckdb.connect()
    con.execute(f"ATTACH '{work / 'one.duckdb'}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{work / 'pool.duckdb'}' AS b (READ_ONLY)")
    for table in ("sessions", "messages", "tool_calls", "tags", "readiness_claims",
                  "polling_loops", "measurements"):
        differ = con.execute(
            f"SELECT (SELECT count(*) FROM (FROM a.{table} EXCEPT ALL FROM b.{table})) + "
            f"(SELECT count(*) FROM (FROM b.{table} EXCEPT ALL FROM a.{table}))"
        ).fetchone()
        if differ and differ[0]:
            raise SystemExit(f"the pool's {table} differ from one process's")
    print("the pool's tables equal one process's")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
