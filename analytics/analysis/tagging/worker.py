"""A second process that tags chunks of messages while the ingest process does the rest.

Tagging is the larger half of message-level analysis and needs nothing from the database, so
on a machine with two or more cores a forked copy of the ingest process (the warmed-up
``Tagger`` and all) tags the chunks it is handed while the parent loads the next one and runs
the polling and tooling analysers. The results are the same as tagging in the parent: the
parent hands over the chunk it loaded (``rows.pack``: Arrow tables in one buffer), the child
builds the same contexts from it and runs the same ``Tagger``; anything that goes wrong in
the child makes the parent tag the chunks itself. Linux only (``fork``);
``TRANSCRIPTS_TAG_WORKER=0`` turns it off.

Protocol: the parent sends jobs (picklable, e.g. a packed chunk), the child answers each, in
order, with ``("ok", tags, seconds, peak RSS MiB)`` or ``("error", message)``. The parent
reads and writes the pipes from two daemon threads, so neither side ever waits on the other's
pipe buffer; the child leaves when its pipe closes (the parent finished or died).

A job that is a buffer (a packed chunk, megabytes) travels through memory the two processes
share (``Ring``): only its place goes through the pipe, so neither side copies it through
the kernel or pickles it.

The last jobs of a file: once the parent has submitted its last one (``last_submitted``) it
only waits, and its core is idle. The child then reads every job still out and hands the
later half to a helper, a fork of itself (warm: nothing to load), that answers them through
the child, which keeps the order; a helper that dies leaves its jobs to the child.
"""

from __future__ import annotations

import gc
import mmap
import multiprocessing
import os
import queue
import resource
import signal
import sys
import threading
import time
import types
import warnings
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple

from analytics import machine

ENV_SWITCH = "TRANSCRIPTS_TAG_WORKER"
"""Set to ``0`` to tag in the ingest process only."""
JOIN_TIMEOUT_S = 5.0

TagJob = Callable[[Any], Any]
"""What the child runs on each job: the tags of the messages the job describes (a list of
``Tag``, or the columns of their table), picklable. A job that travelled through the ring (see
``Ring``) reaches it as a ``memoryview`` of its bytes, valid until it returns."""


class WorkerGone(Exception):
    """The worker died or failed on a chunk: the parent tags the chunks still out itself."""


MAX_PARENT_RSS_MIB = 600
"""No worker is forked from a larger ingest process: the child keeps the old copy of every
inherited page the parent rewrites (DuckDB's buffers turn over all the time), so its
memory can grow to the parent's size at the fork. Huge sessions are tagged in one process
and memory stays bounded."""


def _rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def start(tag: TagJob, prepare: Callable[[], object] | None = None) -> TagWorker | None:
    """A worker, or None when none can help (see :func:`available`) or the fork fails (out
    of memory or processes): the caller then tags in its own process."""
    if not available():
        return None
    try:
        return TagWorker(tag, prepare)
    except OSError as exc:
        warnings.warn(f"no tagging worker ({exc}); tagging in this process", RuntimeWarning,
                      stacklevel=2)
        return None


def available() -> bool:
    """A worker can help: Linux (``fork``), two or more cores to run on (within a container's
    CPU quota), not switched off, and this process small enough to fork (see
    ``MAX_PARENT_RSS_MIB``)."""
    return (
        os.environ.get(ENV_SWITCH, "1") != "0"
        and sys.platform.startswith("linux")
        and machine.cores() >= 2
        and _rss_mib() <= MAX_PARENT_RSS_MIB
    )


class TagWorker:
    """A forked process tagging chunks in the order they are submitted."""

    def __init__(self, tag: TagJob, prepare: Callable[[], object] | None = None) -> None:
        """Fork the worker; it runs ``prepare`` (e.g. loading the tagger) before its first
        job, while the parent goes on."""
        ctx = multiprocessing.get_context("fork")
        jobs_r, self._jobs_w = ctx.Pipe(duplex=False)
        self._results_r, results_w = ctx.Pipe(duplex=False)
        last_r, self._last_w = ctx.Pipe(duplex=False)
        """Says how many jobs the parent submitted in all, once it submitted the last one."""
        for end in (jobs_r, results_w):
            _widen(end)
        self._ring = Ring(RING_BYTES)
        for stream in (sys.stdout, sys.stderr):  # the child must not write out our buffers again
            if stream is not None:
                stream.flush()
        self._process = ctx.Process(
            target=_serve,
            args=(tag, jobs_r, results_w, last_r, (self._jobs_w, self._results_r, self._last_w),
                  self._ring, prepare),
            daemon=True,
            name="transcripts-tagger",
        )
        try:
            with warnings.catch_warnings():
                # Python >= 3.12 warns about fork() in a process with threads (DuckDB's); the
                # child only runs Python and spaCy code, never DuckDB, and leaves with os._exit.
                warnings.filterwarnings(
                    "ignore", message=r".*fork\(\).*", category=DeprecationWarning
                )
                self._process.start()
        except BaseException:
            for end in (jobs_r, self._jobs_w, self._results_r, results_w, last_r, self._last_w):
                end.close()
            raise
        jobs_r.close()
        results_w.close()
        last_r.close()
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.outstanding = 0
        """Chunks submitted whose tags have not been taken yet."""
        self.submitted = 0
        """Jobs submitted in all."""
        self.seconds = 0.0
        """Time the child (and its helper) spent tagging."""
        self.peak_rss_mib = 0.0
        """The child's peak resident memory."""
        self.gone = False
        self._answered = 0
        """Answers received (by the receiving thread)."""
        self._last_said = False
        """``last_submitted`` was called."""
        self._when_free: list[Callable[[], object]] | None = []
        """Called once a core is free (``when_core_free``; None: they were)."""
        self._done_lock = threading.Lock()
        threading.Thread(target=self._send_loop, daemon=True).start()
        threading.Thread(target=self._receive_loop, daemon=True).start()

    # --- parent side ---------------------------------------------------------
    def submit(self, job: Any) -> None:
        """Hand ``job`` (not None) to the child: a buffer through the ring when it fits."""
        placed = self._ring.put(job)
        self._outbox.put(job if placed is None else placed)
        self.outstanding += 1
        self.submitted += 1

    def last_submitted(self) -> None:
        """No more jobs will come: the child may share those still out with a helper (see
        the module's docstring) while this process waits for their tags."""
        self._last_said = True
        self._check_done()
        if self.gone:
            return
        try:
            self._last_w.send(self.submitted)
        except OSError:  # the child is gone: the receiver says so
            pass

    def when_core_free(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (on a thread of this process: keep it short) once the child
        takes no core of this process's two any more (it has answered every job submitted
        after the last was, ``last_submitted``; it is gone or closed), or this process
        first waits for one of its answers: at once if that is so already."""
        with self._done_lock:
            waiting = self._when_free
            if waiting is not None:
                waiting.append(callback)
                return
        callback()

    def _check_done(self) -> None:
        if self._last_said and self._answered >= self.submitted:
            self._core_free()

    def _core_free(self) -> None:
        with self._done_lock:
            callbacks, self._when_free = self._when_free or [], None
        for callback in callbacks:
            callback()

    @property
    def unanswered(self) -> int:
        """Jobs submitted that the child has not answered yet (``outstanding`` counts the
        answers that came in but were not taken too)."""
        return self.outstanding - self._inbox.qsize()

    def take(self, block: bool) -> Any | None:
        """Tags of the oldest chunk still out (None when ``block`` is false and they are not
        there yet); raises ``WorkerGone`` when the worker cannot deliver them."""
        if self.gone:
            raise WorkerGone("the tagging worker is gone")
        if block and self._when_free is not None and self._inbox.empty():
            self._core_free()  # (this process waits: its core is free meanwhile)
        try:
            reply = self._inbox.get(block=block)
        except queue.Empty:
            return None
        if reply[0] != "ok":
            self.gone = True
            raise WorkerGone(str(reply[1]))
        self.outstanding -= 1
        self._ring.release()
        self.seconds += reply[2]
        self.peak_rss_mib = max(self.peak_rss_mib, reply[3])
        return reply[1]

    def close(self) -> None:
        """Stop the child: let it leave once it answered everything, or at once when answers
        are still out (nobody will take them) or it failed (it would go on with the queue)."""
        if self.outstanding or self.gone:
            self._process.terminate()
        else:
            self._outbox.put(None)
            self._process.join(JOIN_TIMEOUT_S)
            if self._process.is_alive():
                self._process.terminate()
        self._process.join(JOIN_TIMEOUT_S)
        self._core_free()

    def _send_loop(self) -> None:
        while True:
            job = self._outbox.get()
            try:
                self._jobs_w.send(job)
            except OSError:  # the child is gone: the receiver says so
                break
            except Exception as exc:  # a job that does not pickle
                self._inbox.put(("gone", f"cannot hand a job to the tagging worker: {exc}"))
                break
            if job is None:
                break
        self._jobs_w.close()

    def _receive_loop(self) -> None:
        while True:
            try:
                reply = self._results_r.recv()
            except (EOFError, OSError):
                reply = ("gone", "the tagging worker stopped")
            except Exception as exc:  # an answer that does not unpickle
                reply = ("gone", f"unreadable answer from the tagging worker: {exc}")
            self._inbox.put(reply)
            if reply[0] == "gone":
                self._results_r.close()
                self._core_free()
                return
            self._answered += 1
            self._check_done()


PIPE_BYTES = 1 << 20
"""Pipe buffer asked for (Linux's default is 64 KiB, its unprivileged maximum 1 MiB): a
chunk's tags (a few hundred KiB pickled) go into the pipe at once, instead of the worker
waiting, piece by piece, for the parent's receiving thread to get the GIL and read."""


def _widen(end: Connection) -> None:
    """Ask for ``PIPE_BYTES`` of buffer on a pipe (best effort: Linux only, maybe capped)."""
    try:
        import fcntl

        fcntl.fcntl(end.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


RING_BYTES = 64 << 20
"""Shared memory for the jobs out at a time (a chunk packs to about 8 MB); a job that does
not fit goes through the pipe. Pages are only used once written to."""


class InRing(NamedTuple):
    """A job's place in the ring: what goes through the pipe instead of the job."""

    start: int
    size: int


class Ring:
    """Shared memory (an anonymous ``MAP_SHARED`` mapping made before the fork) holding the
    buffers of the jobs still out, one after another, wrapping around: they are answered
    in the order they were placed, so the space they take is freed in that order too."""

    def __init__(self, size: int) -> None:
        self.mem = mmap.mmap(-1, size)
        self._placed: deque[InRing | None] = deque()
        """Every job still out, in order: its place, or None (not in the ring)."""
        self._head = 0
        """Where the next buffer goes when the space after the newest one is free."""

    def put(self, job: Any) -> InRing | None:
        """Copy ``job`` into the ring if it is a buffer and fits; its place, or None."""
        try:
            data = memoryview(job).cast("B")
        except TypeError:
            data = None
        at = self._fit(data.nbytes) if data is not None and data.nbytes else None
        if at is None:
            self._placed.append(None)
            return None
        assert data is not None
        self.mem[at : at + data.nbytes] = data
        self._head = at + data.nbytes
        place = InRing(at, data.nbytes)
        self._placed.append(place)
        return place

    def _fit(self, n: int) -> int | None:
        """Where ``n`` bytes go: after the newest buffer, or at the start once the oldest
        buffer there is answered; None when they do not fit now."""
        live = [p for p in self._placed if p is not None]
        if not live:
            return 0 if n <= len(self.mem) else None
        oldest = live[0].start
        if self._head > oldest:  # the free space is after the head, and before the oldest
            if self._head + n <= len(self.mem):
                return self._head
            return 0 if n <= oldest else None
        return self._head if self._head + n <= oldest else None

    def release(self) -> None:
        """The oldest job is answered: its space is free."""
        if self._placed:
            self._placed.popleft()

    def view(self, place: InRing) -> memoryview:
        return memoryview(self.mem)[place.start : place.start + place.size]


# --- child side ----------------------------------------------------------------
def _import_spacy_without_cli() -> None:
    """Import spaCy here without ``spacy.cli`` (its command line: ``requests``, ``typer``
    and more, a third of spaCy's import time, which delays the worker's first chunk). A
    tagging worker never runs spaCy's command line, and ``spacy/__init__`` takes only
    ``spacy.cli.info.info`` from it: stand-ins take the package's place while spaCy is
    imported, and a call of that ``info`` imports the real one. Should this spaCy want
    more of ``spacy.cli`` at import, it is imported again the usual way."""
    if any(name == "spacy" or name.startswith("spacy.") for name in sys.modules):
        return
    stand_ins = {name: types.ModuleType(name) for name in ("spacy.cli", "spacy.cli.info")}
    stand_ins["spacy.cli"].__path__ = []

    def info(*args: Any, **kwargs: Any) -> Any:
        for name in stand_ins:
            if sys.modules.get(name) is stand_ins[name]:
                del sys.modules[name]
        from spacy.cli.info import info as real

        return real(*args, **kwargs)

    stand_ins["spacy.cli.info"].info = info  # type: ignore[attr-defined]
    sys.modules.update(stand_ins)
    try:
        import spacy  # noqa: F401
    except ImportError:
        for name in [n for n in sys.modules if n == "spacy" or n.startswith("spacy.")]:
            del sys.modules[name]
        import spacy  # noqa: F401, F811
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def _serve(
    tag: TagJob,
    jobs: Connection,
    results: Connection,
    last: Connection,
    parent_ends: tuple[Connection, ...],
    ring: Ring,
    prepare: Callable[[], object] | None = None,
) -> None:
    for end in parent_ends:  # so that our reads end when the parent's end closes
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if prepare is not None:
        try:
            _import_spacy_without_cli()
            prepare()
        except Exception:  # noqa: S110 - the first job fails the same way and says why
            pass
    gc.disable()  # short-lived, and Tagger.tag keeps it off anyway
    todo: deque[Any] = deque()
    received = 0
    helper: _Helper | None = None
    try:
        while True:
            if helper is None and last.poll():  # the parent submitted its last job
                total = last.recv()
                while received < total:
                    todo.append(jobs.recv())
                    received += 1
                helper = _Helper.share(tag, ring, todo, (jobs, results, last))
            if todo:
                results.send_bytes(_pickled(_answer(tag, ring, todo.popleft())))
            elif helper is not None and helper.jobs:
                answer = helper.answer()
                if answer is None:  # it died: its jobs are ours
                    todo.extend(helper.jobs)
                    helper.jobs.clear()
                else:
                    results.send_bytes(answer)
            else:
                job = jobs.recv()
                if job is None:
                    break
                todo.append(job)
                received += 1
    except (EOFError, OSError, ValueError):  # the parent is gone
        pass
    finally:
        if helper is not None:
            helper.close()
    os._exit(0)  # no atexit handlers, flushes or finalizers of the parent's objects


def _pickled(answer: tuple[Any, ...]) -> bytes:
    """``answer`` as ``Connection.send`` pickles it; tags that do not pickle are an error."""
    try:
        return bytes(ForkingPickler.dumps(answer))
    except Exception as exc:
        return bytes(ForkingPickler.dumps(("error", f"{type(exc).__name__}: {exc}")))


def _answer(tag: TagJob, ring: Ring, job: Any) -> tuple[Any, ...]:
    start = time.perf_counter()
    try:
        tags = tag(ring.view(job) if isinstance(job, InRing) else job)
    except Exception as exc:
        return ("error", f"{type(exc).__name__}: {exc}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return ("ok", tags, time.perf_counter() - start, rss)


class _Helper:
    """A fork of the worker answering the later jobs of the last ones, in order, through a
    pipe to the worker (which forwards the answers as they are, pickled)."""

    MIN_JOBS = 2
    """Fewer jobs left are tagged by the worker alone."""

    def __init__(
        self, tag: TagJob, ring: Ring, jobs: list[Any], inherited: tuple[Connection, ...]
    ) -> None:
        """Fork the helper; ``inherited``: the worker's ends of the parent's pipes, which the
        helper closes, so that the parent's reads end when the worker dies, helper or not."""
        reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)
        worker = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the helper, which never returns into the worker's code
            try:
                machine.die_with_parent(worker)
                for end in (reader, *inherited):
                    end.close()
                _help(tag, ring, jobs, writer)
            finally:
                os._exit(0)
        writer.close()
        self.conn = reader
        self.jobs: deque[Any] = deque(jobs)
        """Its jobs not answered yet, in order."""

    @classmethod
    def share(
        cls, tag: TagJob, ring: Ring, todo: deque[Any], inherited: tuple[Connection, ...]
    ) -> _Helper | None:
        """A helper for the later half of ``todo`` (taken out of it), or None: too few
        jobs, one core, or no fork."""
        if len(todo) < cls.MIN_JOBS or machine.cores() < 2:
            return None
        keep = (len(todo) + 1) // 2
        theirs = list(todo)[keep:]
        try:
            helper = cls(tag, ring, theirs, inherited)
        except OSError:
            return None
        for _ in theirs:
            todo.pop()
        return helper

    def answer(self) -> bytes | None:
        """The answer to the oldest job still out (pickled), or None when the helper died."""
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            return None
        self.jobs.popleft()
        return data

    def close(self) -> None:
        self.conn.close()
        try:
            os.kill(self.pid, signal.SIGKILL)  # (done already, unless the worker is leaving early)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _help(tag: TagJob, ring: Ring, jobs: list[Any], worker: Connection) -> None:
    """The helper: answer ``jobs`` to the worker, in order. The worker reads the answers only
    once it answered its own jobs, and a chunk's answer is larger than a pipe holds, so a
    thread hands them over while the helper tags the next jobs."""
    answers: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    sender = threading.Thread(target=_send_all, args=(answers, worker), daemon=True)
    sender.start()
    for job in jobs:
        if not sender.is_alive():  # the worker is gone
            break
        answers.put(_pickled(_answer(tag, ring, job)))
    answers.put(None)
    sender.join()


def _send_all(answers: queue.SimpleQueue[bytes | None], worker: Connection) -> None:
    """Send ``answers`` to the worker until None (or the worker is gone)."""
    while (data := answers.get()) is not None:
        try:
            worker.send_bytes(data)
        except OSError:
            return
