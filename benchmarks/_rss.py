"""Peak memory of a process and all its descendants (sampled from /proc).

``ru_maxrss`` of a waited child is the peak of one process only; an ingest that runs a
worker process would hide the worker's memory. This sums the tree every few ms, as PSS
(proportional set size: a page shared by a forked worker and its parent counts half in
each, so the sum is the memory the tree really holds; plain RSS would count it twice).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (none once it is gone). Raises when the kernel does not
    list them (``/proc/<pid>/task/<tid>/children`` needs CONFIG_PROC_CHILDREN): the memory of
    the ingest's workers would silently be left out."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            if task.is_dir():  # the thread is there, its children file is not
                raise RuntimeError(
                    f"{task / 'children'} does not exist (a kernel without "
                    "CONFIG_PROC_CHILDREN?): the memory of child processes cannot be measured"
                ) from None
        except OSError:  # the thread or process ended meanwhile
            continue
    return out


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mib(pid: int) -> float:
    """Current PSS of ``pid`` and its descendants, in MiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _pss_kib(p)
        todo += _children(p)
    return total / 1024


def run_measured(args: list[str], interval_s: float = 0.02) -> tuple[float, int, float, float]:
    """Run ``args``; return (seconds, exit status, peak tree PSS MiB, ru_maxrss MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args)
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, tree_pss_mib(proc.pid))
        time.sleep(interval_s)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, proc.returncode, peak, usage.ru_maxrss / 1024
