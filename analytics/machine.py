"""What this machine lets the ingest use: cores and memory, within a container's limits;
and how an ingest's processes end.

A container sees the host's cores in ``sched_getaffinity`` and the host's memory in
``/proc/meminfo``; its cgroup says what it may use (v2 files at the cgroup root, v1 in
``cpu/`` and ``memory/``). A worker process per host core could exceed its CPU quota and
its memory limit.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

CGROUP = Path("/sys/fs/cgroup")
"""Where a container's limits are read."""
MEMINFO = Path("/proc/meminfo")


def cores() -> int:
    """The cores this process may use: its CPU affinity, within a cgroup's CPU quota."""
    affinity = getattr(os, "sched_getaffinity", None)  # (Linux only)
    n = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    quota = _read(CGROUP / "cpu.max").split()  # v2: "max 100000" or "200000 100000"
    if len(quota) != 2:
        quota = [_read(CGROUP / "cpu" / "cpu.cfs_quota_us"),  # v1: -1 for none
                 _read(CGROUP / "cpu" / "cpu.cfs_period_us")]
    try:
        limit, period = int(quota[0]), int(quota[1])
    except ValueError:  # "max", or no such files
        return n
    return min(n, -(-limit // period)) if limit > 0 and period > 0 else n


def available_mib() -> int:
    """Memory available to this process: what the kernel says (``MemAvailable``), within a
    cgroup's memory limit; plenty when neither can be read."""
    mib = 1 << 20
    for line in _read(MEMINFO).splitlines():
        if line.startswith("MemAvailable:"):
            mib = int(line.split()[1]) // 1024
    for limit, used in ((CGROUP / "memory.max", CGROUP / "memory.current"),
                        (CGROUP / "memory" / "memory.limit_in_bytes",
                         CGROUP / "memory" / "memory.usage_in_bytes")):
        try:
            mib = min(mib, max(0, int(_read(limit)) - int(_read(used))) // 2**20)
        except ValueError:  # "max" (no limit), or no such files
            continue
    return mib


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def die_with_parent(parent: int) -> None:
    """Be killed when the parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``): a killed ingest
    must not leave its worker processes running on. ``parent`` is the parent's pid as the
    parent read it before the fork: one that died between the fork and this call is noticed
    too (by then the child's ``getppid()`` names the process that adopted it)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call
        os._exit(1)


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` without the interpreter's teardown, which frees every
    module's objects one by one: a third of a second once spaCy, pandas and DuckDB are
    loaded, longer than an unchanged re-ingest takes. The ``atexit`` handlers still run (child
    processes are joined), and stdout and stderr are flushed. Only for a process whose work
    is done: its databases closed, no thread of its own still writing."""
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # (a closed pipe or stream: nothing more to say)
                pass
        os._exit(code)
