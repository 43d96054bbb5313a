"""Verdicts on readiness claims ("it's up", "tests pass", "fixed").

For each ``readiness_claim`` tag the evidence in the session is weighed:

- *premature*: before the claim there was only liveness (process alive,
  ``Uvicorn running on``, a /health or /v1/models 200, CUDA graph capture still
  running, a log tail stopping before the ready line) — or the next functional
  check after it failed (error, OOM, crash, degenerate output);
- *supported*: a functional check before it passed (a sane generation, tests
  passing, a benchmark completing): a server that answered with a sane generation
  is serving, whether or not its ready line was read (for a server, a check before
  its ready line counts only when no ready line was seen);
- *unverified*: neither.

A server or deployment claim is judged from its server's last (re)start; a claim naming one
launched server (its port, a word of its model or served name) only on the checks addressed
to it, so a second server on the host neither supports nor contradicts it. A feature or fix
claim is judged from the last file change before it. A claim about a job (a download, a
build or install, a conversion, an upload) is judged on the looks at that job (``jobs``):
the last one before it, and the first after it.

Liveness vs. function follows shared/reference/TOOLING.md §1 (endpoint table)
and §4; the strings live in ``data/readiness.json``.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from analytics.analysis import jobs
from analytics.analysis.degenerate import is_degenerate
from analytics.analysis.literals import Gated, lowered, text_of
from analytics.analysis.tagging.polling import (
    RECHECK_TOOLS,
    SHELL_TOOLS,
    background_job_started,
    exec_session_started,
    recheck_job_id,
)
from analytics.command_output import CommandOutput, command_output
from analytics.formats import (
    CLAUDE_BACKGROUND_PREFIX,
    CLAUDE_BACKGROUND_STARTED,
    CODEX_SESSION_RUNNING,
    FILE_TOOLS,
    FILE_WRITING_TOOLS,
)
from analytics.models import ReadinessClaim

if TYPE_CHECKING:
    from analytics.analysis.session import SessionFrames

LOOKBACK = 40
LOOKAHEAD = 15


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class _Config:
    subjects: tuple[tuple[str, Gated], ...]
    events: dict[str, frozenset[str]]
    text: dict[str, Gated]
    default_ports: dict[str, int]
    generation_keys: tuple[str, ...]
    version: int


@lru_cache(maxsize=1)
def config() -> _Config:
    raw = resources.files("analytics.analysis").joinpath("data", "readiness.json")
    data: dict[str, Any] = json.loads(raw.read_text("utf-8"))
    return _Config(
        subjects=tuple(
            (s["subject"], Gated.compile(_subject_regex(s, data), re.I)) for s in data["subjects"]
        ),
        events={k: frozenset(v) for k, v in data["events"].items()},
        text={k: Gated.compile(v, re.I | re.M) for k, v in data["text"].items()},
        default_ports={k: int(v) for k, v in data["default_ports"].items()},
        generation_keys=tuple(data["generation_keys"]),
        version=int(data["version"]),
    )


def _subject_regex(subject: dict[str, str], data: dict[str, Any]) -> str:
    """A subject's regex: its own, or (``regex_of: jobs.kinds.*.claim``) any of the claim
    patterns of the kinds of job."""
    if "regex" in subject:
        return subject["regex"]
    if subject.get("regex_of") != "jobs.kinds.*.claim":
        raise ValueError(f"subject {subject!r}: give a 'regex' or 'regex_of': 'jobs.kinds.*.claim'")
    return "|".join(f"(?:{k['claim']})" for k in data["jobs"]["kinds"].values())


class Signal(NamedTuple):
    """One piece of evidence: where, what, and whether it proves function. (A tuple: a
    session has one per server event, and a tuple is built 3x faster than a frozen
    dataclass.)"""

    msg_idx: int
    kind: str  # liveness | ready | graph_begin | graph_end | failure; a check: tests | benchmark | smoke test
    what: str
    passed: bool | None = None


def subject_of(text: str) -> str:
    low = lowered(text)
    for subject, pattern in config().subjects:
        if pattern.search(text, low):
            return subject
    return "feature"


# --------------------------------------------------------------------------- generations


def _strings(node: Any, keys: tuple[str, ...], out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                out.append(value)
            else:
                _strings(value, keys, out)
    elif isinstance(node, list):
        for item in node:
            _strings(item, keys, out)


def generation_text(output: str) -> str:
    """The generated text inside a smoke test's output (JSON fields such as
    ``content``/``reasoning_content``), else the output itself."""
    keys = config().generation_keys
    found: list[str] = []
    candidates = [output] + [line for line in output.splitlines() if line.strip()[:1] in "{["]
    for chunk in candidates:
        try:
            _strings(json.loads(chunk), keys, found)
        except ValueError:
            continue
        if found:
            break
    return "\n".join(found) if found else output


# --------------------------------------------------------------------------- checks


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def judge_check(command: str, output: str, kind: str) -> tuple[bool | None, str]:
    """Did a functional check pass? (None: cannot tell) and why, in words."""
    cfg = config().text
    output = command_output(output).text  # (a header is no answer: "Chunk ID: … Output:" alone)
    low = lowered(output)
    if kind == "tests":
        if failed := cfg["tests_failed"].search(output, low):
            return False, f"tests failed ({_short(failed.group(0))})"
        if passed := cfg["tests_passed"].search(output, low):
            return True, f"tests passed ({_short(passed.group(0))})"
        return None, "test run without a verdict"
    if cfg["usage_error"].search(output, low):
        return None, "its command line was refused (usage error): it never ran"
    failure = cfg["failure"].search(output, low)
    if failure:
        return (
            False,
            f"error in its output: {_short(output[failure.start() : failure.start() + 80])!r}",
        )
    if kind == "benchmark":
        if cfg["benchmark_done"].search(output, low):
            return True, "benchmark completed"
        return None, "benchmark without results"
    text = generation_text(output)
    if not text.strip():
        return None, "no output"
    verdict = is_degenerate(text)
    if verdict.flag:
        return False, f"degenerate output: {verdict.reason}"
    return True, f"sane generation: {_short(text, 60)!r}"


# Text signals looked for in tool output when the tooling analyser left no server_events.
_TEXT_SIGNALS = (
    ("ready", "ready"),
    ("cuda_graph_end", "graph_end"),
    ("cuda_graph_begin", "graph_begin"),
    ("uvicorn_running", "liveness"),
    ("health_ok", "liveness"),
    ("process_alive", "liveness"),
    ("failure", "failure"),
)
_SERVER_KINDS = ("ready", "graph_end", "graph_begin", "failure", "liveness")
_PORT_TARGET = re.compile(r"[^\s/]+:\d{2,5}")
"""A polling loop's target that is an address and nothing more (``nc -z HOST PORT``): a
wait on it that ended ``ready`` saw the port accept a connection, liveness only."""


_JOB_STARTED = (
    f"(starts_with({{column}}, '{CLAUDE_BACKGROUND_PREFIX}') "
    f"OR contains({{column}}, '{CODEX_SESSION_RUNNING}'))",
    re.compile(f"{CLAUDE_BACKGROUND_STARTED}|{re.escape(CODEX_SESSION_RUNNING)}"),
)
"""The outputs of calls that may have started a job a re-check reads: Claude Code's "sent to
the background" line, or a Codex header's "process runs on" line (a superset: which job, if
any, ``background_job_started`` and ``exec_session_started`` read exactly)."""


class _Call(NamedTuple):  # a tuple: built for every call of the session, 3x cheaper
    msg: int  # the message that made the call
    at: int  # the message that carries its result
    call_id: str
    command: str
    status: object
    only: bool  # the only call its message makes
    runs_tests: bool  # its command runs a test suite
    calls_model: bool  # its command calls a generation endpoint
    file_tool: bool  # a file tool (Read, Edit …): its output is a file's text
    changes: bool  # it writes a file (Edit, Write …, ``sed -i``, ``cat > FILE``)
    recheck: bool  # it reads a background job (``BashOutput``, ``TaskOutput``, ``write_stdin``)


def _command_traits(command: str) -> tuple[bool, bool, bool]:
    """Does ``command`` run a test suite, does it call a generation endpoint, and does it
    change a file (``sed -i``, ``cat > FILE <<EOF`` …)?"""
    low = lowered(command)
    text = config().text
    runs_tests = text["test_command"].search(command, low)
    calls_model = text["smoke_endpoint"].search(command, low)
    changes = text["file_change"].search(command, low)
    return runs_tests is not None, calls_model is not None, changes is not None


@lru_cache(maxsize=4096)
def _script_run(command: str) -> str | None:
    """The name of the script file ``command`` runs (``python3 /root/smoke.py``, ``bash
    check.sh``, ``./check.sh``), or None."""
    m = config().text["script_run"].search(command, lowered(command))
    return m.group("path").rsplit("/", 1)[-1] if m else None


# --------------------------------------------------------------------------- which server

# An address's port (``localhost:8001``, ``http://gpu7:30000/…``, ``[::1]:8000``) or a
# ``--port`` flag, in a check's command.
_ADDRESS_PORT = re.compile(r"(?:[\w\]-]:|--port[= ]\s*)(\d{2,5})\b")
# A port named in a claim: a 2-5 digit number that is not part of a larger figure.
_NUMBER = re.compile(r"(?<![\d.,])(\d{2,5})(?![\d,]|\.\d)")
# Words of a model name or alias: letters, or digits with a unit ("70b", "12b").
_NAME_WORD = re.compile(r"[a-z]+|\d+[a-z]+")
# Words of model names that say nothing of which server a claim is about.
_GENERIC_NAME_WORDS = frozenset({"instruct", "chat", "model", "models", "base", "hf", "it"})


# Where a command sends its output: a file after ``>``/``>>``/``&>`` or ``tee`` (quotes of
# ``ssh host '… > /root/x.log 2>&1 &'`` end a target; ``&1`` and ``/dev/null`` are left out
# by the caller).
_LOG_TARGET = re.compile(r"(?:&?>>?|\btee\s+(?:-a\s+)?)\s*['\"]?([^\s'\";|&<>()]+|&\d)")
# The words of a command that may name a file.
_PATH_WORD = re.compile(r"[^\s'\";|&<>()=]+")


def _path_names(command: str) -> set[str]:
    """The file names (last path parts) a command names."""
    return {w.rsplit("/", 1)[-1] for w in _PATH_WORD.findall(command)}


def command_ports(command: str) -> frozenset[int]:
    """The ports of the servers a command addresses (none when it names no address)."""
    return frozenset(int(p) for p in _ADDRESS_PORT.findall(command))


def _name_words(name: str) -> set[str]:
    words = set(_NAME_WORD.findall(name.rsplit("/", 1)[-1].lower()))
    return {w for w in words if len(w) > 2 and w not in _GENERIC_NAME_WORDS}


class _Server(NamedTuple):
    port: int
    names: frozenset[str]  # words of its model path and served names


def _launched_server(engine: object, model: object, flags: object) -> _Server | None:
    """The server a ``launches`` row starts: its ``--port`` (else its engine's default)
    and the words of its model and served names. None when neither is known."""
    try:  # (JSON text as stored, or already read into a dict by SessionFrames)
        parsed = json.loads(flags) if isinstance(flags, str) else flags
    except ValueError:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    port = parsed.get("--port")
    if port is None and isinstance(engine, str):
        port = config().default_ports.get(engine)
    try:
        port = int(port)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    names: set[str] = set(_name_words(model)) if isinstance(model, str) else set()
    for flag in ("--served-model-name", "--model-path", "--model"):
        value = parsed.get(flag)
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, str):
                names |= _name_words(name)
    return _Server(port, frozenset(names))


def claimed_port(claim_text: str, servers: list[_Server]) -> int | None:
    """The port of the one server a claim is about: the launched port it names, else the
    one server whose model or served name it names; None when it names none or several
    (``both servers``, two ports)."""
    if not servers:
        return None
    ports = {s.port for s in servers}
    named = {int(n) for n in _NUMBER.findall(claim_text)} & ports
    if not named:
        words = set(_NAME_WORD.findall(claim_text.lower()))
        named = {s.port for s in servers if s.names & words}
    return next(iter(named)) if len(named) == 1 else None


def _about_other_server(ports: frozenset[int], port: int | None) -> bool:
    """A check addressed to other ports (``ports``) only says nothing of the server on
    ``port``."""
    return port is not None and bool(ports) and port not in ports


@lru_cache(maxsize=1)
def _event_kinds() -> dict[str, str]:
    """Server event -> signal kind: the first of ``_SERVER_KINDS`` whose list names it."""
    events = config().events
    return {event: kind for kind in reversed(_SERVER_KINDS) for event in events[kind]}


def _signal_at(signal: Signal) -> int:
    return signal.msg_idx


def _check_at(check: tuple[Signal, str]) -> int:
    return check[0].msg_idx


def _near(claims: np.ndarray, call_msg: np.ndarray) -> np.ndarray:
    """Which of the calls made at ``call_msg`` lie in the windows of some of ``claims``
    (sorted): from LOOKBACK messages before a claim to LOOKAHEAD after it."""
    if not len(claims):
        return np.zeros(len(call_msg), dtype=bool)
    nearest = np.searchsorted(claims, call_msg - LOOKAHEAD, side="left")
    return (nearest < len(claims)) & (
        claims[np.minimum(nearest, len(claims) - 1)] <= call_msg + LOOKBACK
    )


class _Evidence:
    """What the verdicts weigh, read once per session: tool calls (with their output
    only where a verdict reads it), server signals, and the tags that classify calls.
    Windows of messages are slices of lists sorted by ``msg_idx``, found by bisection
    (a verdict looks up six windows; numpy's searchsorted costs more per call)."""

    def __init__(self, frames: SessionFrames, claims: list[int]) -> None:
        self.frames = frames
        self._words: dict[Signal, str] = {}
        # A verdict reads at most LOOKBACK messages before its claim (see window_start).
        self.lo = max(0, min(claims, default=0) - LOOKBACK)
        tags = frames.select_lists(
            "tags", ["msg_idx", "tag"], {"tag": ["smoke_test", "benchmark", "launch"]},
            min_idx=self.lo,
        )
        by_tag: dict[str, set[int]] = {t: set() for t in ("smoke_test", "benchmark", "launch")}
        for i, t in zip(*tags, strict=True):
            by_tag[str(t)].add(int(i))
        self.smoke, self.bench = by_tag["smoke_test"], by_tag["benchmark"]
        # Every launch of the session names a server a claim may be about; those in the
        # windows (from ``lo``) are where one was (re)started.
        launched, call_ids, engines, models, flags = frames.select_lists(
            "launches", ["msg_idx", "call_id", "engine", "model", "flags"]
        )
        port_at: dict[int, int | None] = {}
        self.servers: list[tuple[int, _Server]] = []
        """The servers launched, each with the message launching it."""
        self._launch_ports: dict[str, int] = {}
        """call_id of a launch -> the port of the server it starts."""
        self._launch_msg_ports: dict[int, set[int]] = {}
        """A message launching servers -> their ports."""
        for i, cid, engine, model, flag in zip(
            launched, call_ids, engines, models, flags, strict=True
        ):
            server = _launched_server(engine, model, flag)
            if server is not None:
                self.servers.append((int(i), server))
                self._launch_ports[str(cid)] = server.port
                self._launch_msg_ports.setdefault(int(i), set()).add(server.port)
            if int(i) >= self.lo:
                port_at[int(i)] = server.port if server is not None else None
        # A benchmark started in the background is a job, not a (re)start of the server
        # that claims are about (an engine's launch is in ``launches`` either way).
        started = by_tag["launch"] - by_tag["benchmark"]
        for i in started:
            port_at.setdefault(int(i), None)
        self._server(frames)
        self._calls(frames)
        reboots = config().text["reboot"]
        for c in self.calls:
            if c.command and reboots.search(c.command, lowered(c.command)):
                port_at[c.msg] = None  # (a reboot restarts every server)
        self.launch_idx = sorted(port_at)
        """Where a server was (re)started: launches and reboots."""
        self.launch_port = [port_at[i] for i in self.launch_idx]
        """The port of the server each of ``launch_idx`` (re)started; None: any (a reboot,
        a launch whose port is unknown)."""

    # -- loading -------------------------------------------------------------

    def _server(self, frames: SessionFrames) -> None:
        kind_of = _event_kinds()
        wanted = ["msg_idx", "event", "detail"]
        se = frames.select_lists(
            "server_events", wanted, {"event": list(kind_of)}, min_idx=self.lo
        )
        # Any event at all in the session (a signal or not, before the window or in it)
        # means the tooling analyser read the outputs: a fact of the session, so that an
        # append, which judges only its recent claims, reaches the verdicts of a whole run.
        self.from_events = bool(se[0]) or not frames.select("server_events", ["msg_idx"]).empty
        self.server: list[Signal] = []
        # A server repeats its few lines (a warmup, a ready line): each is worded once.
        worded: dict[tuple[str, object], tuple[str, str]] = {}
        for msg, event, detail in zip(*se, strict=True):
            kind_what = worded.get((event, detail))
            if kind_what is None:
                text = f": {_short(detail)}" if isinstance(detail, str) and detail else ""
                kind_what = worded[event, detail] = (kind_of[event], f"{event}{text}")
            self.server.append(Signal(int(msg), *kind_what))
        self.server_msg = [s.msg_idx for s in self.server]
        self._open_ports(frames)

    def _open_ports(self, frames: SessionFrames) -> None:
        """The waits on a port that ended with it open: a server accepting connections,
        which uvicorn does before the warmup request that may still kill the server."""
        msgs, targets = frames.select_lists(
            "polling_loops", ["msg_idx", "target"], {"outcome": ["ready"]}, min_idx=self.lo
        )
        opened = sorted(
            (int(i), str(t)) for i, t in zip(msgs, targets, strict=True)
            if isinstance(t, str) and _PORT_TARGET.fullmatch(t)
        )
        self.opened = [Signal(i, "liveness", f"port open: {t}") for i, t in opened]
        self.opened_msg = [i for i, _ in opened]
        self.opened_port = {
            signal: int(t.rsplit(":", 1)[1])
            for signal, (_, t) in zip(self.opened, opened, strict=True)
        }
        """The port each of ``opened`` was seen open on: the server it speaks of."""

    def _calls(self, frames: SessionFrames) -> None:
        idx, results, *columns, tools = frames.select_lists(
            "tool_calls", ["msg_idx", "result_msg_idx", "call_id", "command", "status", "tool"],
            min_idx=self.lo,
        )
        msgs = [int(m) for m in idx]
        # A call still running at the end of the session has no result yet (None, or NaN
        # or NA in a table already read: see select_lists).
        ats = [
            int(a) if isinstance(a, int | float) and a == a else m
            for m, a in zip(msgs, results, strict=True)
        ]
        counts = Counter(msgs)
        traits: dict[str, tuple[bool, bool, bool]] = {}  # agents repeat their commands
        self.calls: list[_Call] = []
        scripted: list[tuple[int, str]] = []  # calls running a script file, with its name
        self._script_ports: dict[str, frozenset[int]] = {}
        """A check script's command -> the ports of the addresses in the script."""
        for m, at, cid, cmd, status, tool in zip(msgs, ats, *columns, tools, strict=True):
            command = text_of(cmd)
            if command not in traits:
                traits[command] = _command_traits(command)
            runs_tests, calls_model, edits = traits[command]
            if not (calls_model or runs_tests) and (script := _script_run(command)):
                scripted.append((len(self.calls), script))
            only = counts[m] == 1
            name = tool.lower() if isinstance(tool, str) else ""
            file_tool = name in FILE_TOOLS
            changes = name in FILE_WRITING_TOOLS or edits
            recheck = tool in RECHECK_TOOLS
            self.calls.append(
                _Call(
                    m, at, str(cid), command, status, only, runs_tests, calls_model, file_tool,
                    changes, recheck,
                )
            )
        if scripted:
            self._smoke_scripts(scripted)
        self.call_msg = msgs
        self.change_msg = sorted({c.msg for c in self.calls if c.changes})
        """Where a file was written: a feature claim's evidence starts at the last one."""
        # The calls that may be a check (their output only narrows what they are).
        may_check = [self._kind(c, None) is not None for c in self.calls]
        self.check_calls = [
            n for n, c in enumerate(self.calls) if may_check[n] and c.status != "aborted"
        ]
        self.check_msg = [self.calls[n].msg for n in self.check_calls]
        self._may_check = may_check
        # The check of each of ``check_calls`` (None: none), judged when first in a window.
        self._checks: list[tuple[Signal, str] | None] = [None] * len(self.check_calls)
        self._judged = [False] * len(self.check_calls)
        self._text: dict[int, list[Signal]] = {}
        self._looks: dict[int, jobs.Look | None] = {}
        self._msg_port: dict[int, int | None] = {}
        self._calls_at: dict[int, list[int]] | None = None
        self._logs: dict[str, int] | None = None
        self._started: dict[str, list[tuple[int, str]]] | None = None
        self._job_ids: dict[tuple[int, str], str | None] | None = None
        self.outputs: dict[tuple[int, str], CommandOutput] = {}
        self._unmarked: set[tuple[int, str]] = set()
        """Of ``outputs``, those in which no job marker can match (``jobs.unmarked``)."""

    def about_other_server(self, command: str, port: int | None) -> bool:
        """A check made by ``command`` is addressed to other ports than ``port`` only: the
        addresses in the command, or, for a check script the session wrote, in the script."""
        if port is None:
            return False
        ports = self._script_ports.get(command) or command_ports(command)
        return _about_other_server(ports, port)

    def _smoke_scripts(self, scripted: list[tuple[int, str]]) -> None:
        """The calls of ``scripted`` (index, script name) that run a script the session
        wrote (its last version before the call) calling a generation endpoint are smoke
        tests: ``python3 /root/smoke.py`` after ``cat > /root/smoke.py <<EOF … EOF``."""
        bodies = self._script_bodies({name for _, name in scripted})
        smoke = config().text["script_smoke"]
        for n, name in scripted:
            call = self.calls[n]
            versions = bodies.get(name, [])
            j = bisect_left(versions, (call.msg, "")) - 1
            if j >= 0 and smoke.search(versions[j][1], lowered(versions[j][1])):
                self.calls[n] = call._replace(calls_model=True)
                self._script_ports[call.command] = command_ports(versions[j][1])

    def _script_bodies(self, names: set[str]) -> dict[str, list[tuple[int, str]]]:
        """Each version of the files named ``names`` that the session wrote, with the
        message writing it, in order: here-documents in shell commands (also over ssh) and
        file tools' inputs, read over the whole session (a script is run long after it
        was written)."""
        from analytics.analysis.tooling.launches import (
            WHOLE_FILE_TOOLS,
            ScriptMemory,
            parse_launches,
            remember_written_file,
        )

        writers = self.frames.select(
            "tool_calls", ["msg_idx", "tool", "command", "input"],
            matching={"tool": (
                f"lower({{column}}) IN ({', '.join(repr(t) for t in sorted(WHOLE_FILE_TOOLS))})",
                re.compile(f"^(?:{'|'.join(map(re.escape, WHOLE_FILE_TOOLS))})$", re.I),
            )},
        )
        heredocs = self.frames.select(
            "tool_calls", ["msg_idx", "tool", "command", "input"],
            matching={"command": ("contains({column}, '<<')", re.compile("<<"))},
        )
        rows = sorted(
            [*writers.itertuples(index=False), *heredocs.itertuples(index=False)],
            key=lambda r: int(r[0]),
        )
        memory = ScriptMemory()
        found: dict[str, list[tuple[int, str]]] = {}
        for msg, tool, command, input_ in rows:
            if text_of(tool).lower() in WHOLE_FILE_TOOLS:
                remember_written_file(memory, text_of(tool), text_of(input_))
            else:
                parse_launches(text_of(command), memory)
            for name in names:
                body = memory.lookup(name)
                versions = found.setdefault(name, [])
                if body is not None and (not versions or versions[-1][1] != body):
                    versions.append((int(msg), body))
        return found

    def read_outputs(self, claims: list[int], job_claims: list[int]) -> None:
        """Read the output of the calls the verdicts of ``claims`` can read: those near a
        claim that may be a check (or all near ones when server signals come from the
        output text), and those near one of ``job_claims`` (claims about a job) that may be
        a look at a job (any but a file tool's)."""
        self.outputs = self._read_outputs(
            self.frames, np.array(claims, dtype=np.int64), np.array(job_claims, dtype=np.int64)
        )
        if job_claims:  # (most outputs show no job's state: found for all at once)
            keys = list(self.outputs)
            texts = [self.outputs[k].text for k in keys]
            self._unmarked = {k for k, u in zip(keys, jobs.unmarked(texts), strict=True) if u}

    def _read_outputs(
        self, frames: SessionFrames, claims: np.ndarray, job_claims: np.ndarray
    ) -> dict[tuple[int, str], CommandOutput]:
        if not len(self.calls) or not len(claims):
            return {}
        call_msg = np.array(self.call_msg, dtype=np.int64)
        near = _near(claims, call_msg).tolist()
        near_job = _near(job_claims, call_msg).tolist()
        wanted = {
            (c.msg, c.call_id)
            for c, n, j, may in zip(self.calls, near, near_job, self._may_check, strict=True)
            if (n and (may or not (self.from_events or c.file_tool))) or (j and not c.file_tool)
        }
        if not wanted:
            return {}
        msgs = sorted({m for m, _ in wanted})
        columns = frames.select_lists(
            "tool_calls", ["msg_idx", "call_id", "output"], {"msg_idx": msgs}, min_idx=msgs[0]
        )
        return {
            key: command_output(text_of(o))
            for m, c, o in zip(*columns, strict=True)
            if (key := (int(m), str(c))) in wanted
        }

    def first_call_resulting_from(self, msg_idx: int) -> int:
        """The first message (from ``lo`` on) making a call whose result is at or after
        ``msg_idx``: a verdict whose windows end before it reads no tag of a result
        message from ``msg_idx`` on. ``msg_idx`` itself when there is none before it."""
        return min((c.msg for c in self.calls if c.at >= msg_idx), default=msg_idx)

    # -- signals -------------------------------------------------------------

    def _kind(self, call: _Call, output: str | None) -> str | None:
        """What check a call is; with ``output`` None, whether it may be one at all."""
        if call.runs_tests:
            return "tests"
        if (call.msg in self.bench or call.at in self.bench) and (
            call.only
            or output is None
            or config().text["benchmark_done"].search(output, lowered(output))
        ):
            return "benchmark"
        if call.calls_model or ((call.msg in self.smoke or call.at in self.smoke) and call.only):
            return "smoke test"
        return None

    def output(self, call: _Call) -> str:
        """What a call's command printed (its stored output without a Codex header)."""
        read = self.outputs.get((call.msg, call.call_id))
        return read.text if read is not None else ""

    def check(self, n: int) -> tuple[Signal, str] | None:
        """The check made by call ``n`` with its command, or None when it is none."""
        call = self.calls[n]
        output = self.output(call)
        kind = self._kind(call, output)
        if kind is None or call.status == "aborted":
            return None
        passed, why = judge_check(call.command, output, kind)
        return Signal(call.at, kind, f"{kind}: {why}", passed), call.command

    def checks(self, lo: int, hi: int) -> list[tuple[Signal, str]]:
        """Functional checks (smoke tests, benchmarks, test runs) made in [lo, hi), with
        the command that made them, in the order of the messages holding their results.
        Each call is judged once, the first time a window holds it: windows of nearby
        claims overlap."""
        first, last = bisect_left(self.check_msg, lo), bisect_left(self.check_msg, hi)
        found = []
        for k in range(first, last):
            if not self._judged[k]:
                self._checks[k] = self.check(self.check_calls[k])
                self._judged[k] = True
            if (c := self._checks[k]) is not None:
                found.append(c)
        if len(found) > 1:
            found.sort(key=_check_at)
        return found

    def _text_signals(self, n: int) -> list[Signal]:
        """Signals in call ``n``'s output text; none in a file tool's (a source file's
        ``"error":`` or ``Traceback`` is code, not what a program printed)."""
        found = self._text.get(n)
        if found is None:
            call = self.calls[n]
            output = "" if call.file_tool else self.output(call)
            low = lowered(output)
            text = config().text
            found = self._text[n] = [
                Signal(call.at, kind, _short(m.group(0)))
                for key, kind in _TEXT_SIGNALS
                if (m := text[key].search(output, low))
            ]
        return found

    def server_signals(self, lo: int, hi: int) -> list[Signal]:
        """Liveness, ready and failure signals from server_events (or tool output text),
        and the ports seen open (``_open_ports``)."""
        if self.from_events:
            first, last = bisect_left(self.server_msg, lo), bisect_left(self.server_msg, hi)
            found = self.server[first:last]
        else:
            first, last = bisect_left(self.call_msg, lo), bisect_left(self.call_msg, hi)
            found = [s for n in range(first, last) for s in self._text_signals(n)]
        first, last = bisect_left(self.opened_msg, lo), bisect_left(self.opened_msg, hi)
        if first < last:  # (a port seen open, between the lines its server printed)
            found = sorted([*found, *self.opened[first:last]], key=_signal_at)
        return found

    # -- jobs ----------------------------------------------------------------

    def looks(self, lo: int, hi: int) -> list[jobs.Look]:
        """Looks at jobs (calls whose output shows a job's state) made in [lo, hi), in
        order. Each call is read once: windows of nearby claims overlap."""
        first, last = bisect_left(self.call_msg, lo), bisect_left(self.call_msg, hi)
        found = []
        for n in range(first, last):
            if n not in self._looks:
                self._looks[n] = self._look(self.calls[n])
            if (look := self._looks[n]) is not None:
                found.append(look)
        return found

    def _look(self, call: _Call) -> jobs.Look | None:
        """The look call ``call`` is, or None: a re-check (Codex: any ``write_stdin`` to
        an exec session, input typed into its process too) reads like, and names what, the
        command that started its job; its process's state (a Codex header, a ``<status>``)
        decides."""
        if call.file_tool or call.status == "aborted":
            return None
        key = (call.msg, call.call_id)
        if not call.recheck and key in self._unmarked:
            return None  # (no marker: only a re-check's header could tell a state)
        read = self.outputs.get(key)
        reading = jobs.job_state(read if read is not None else "", call.recheck)
        if reading is None:
            return None
        command = self._started_command(call) if call.recheck else call.command
        return jobs.Look(
            call.msg, call.at, "" if call.recheck else call.command, reading,
            jobs.look_kinds(command, reading.words), jobs.command_words(command),
        )

    # -- which server an output speaks of -------------------------------------

    def signal_port(self, msg_idx: int) -> int | None:
        """The port of the one server the tool outputs of message ``msg_idx`` speak of:
        read from its launch (a foreground start, or a re-check of the background job that
        started it), from its log (a file a launch wrote its output to: ``tail -f
        judge.log``) or from its address (``curl localhost:30001/health``); None when that
        cannot be told, when they speak of several, and in a session of one server."""
        if msg_idx not in self._msg_port:
            port = None
            if len({s.port for _, s in self.servers}) > 1:
                if self._calls_at is None:
                    self._calls_at = {}
                    for n, c in enumerate(self.calls):
                        self._calls_at.setdefault(c.at, []).append(n)
                ports = {self._call_port(self.calls[n]) for n in self._calls_at.get(msg_idx, [])}
                port = ports.pop() if len(ports) == 1 else None
            self._msg_port[msg_idx] = port
        return self._msg_port[msg_idx]

    def _call_port(self, call: _Call) -> int | None:
        """The port of the server a call's output speaks of (see ``signal_port``)."""
        port = self._launch_ports.get(call.call_id)
        if port is not None:
            return port
        command = call.command
        if call.recheck:
            start = self._start_of(call)
            if start is None:
                return None
            ports = self._launch_msg_ports.get(start[0], set())
            if len(ports) == 1:
                return next(iter(ports))
            command = start[1]
        logs = self._log_ports()
        named = {logs[n] for n in _path_names(command) if n in logs}
        if named:
            return named.pop() if len(named) == 1 else None
        addressed = command_ports(command)
        return next(iter(addressed)) if len(addressed) == 1 else None

    def _log_ports(self) -> dict[str, int]:
        """File name -> the port of the one server whose launch writes its output there
        (``> /root/judge.log 2>&1``, ``| tee judge.log``); names several launches of
        different servers write to are left out."""
        if self._logs is None:
            ids = sorted(self._launch_ports)
            cids, commands = self.frames.select_lists(
                "tool_calls", ["call_id", "command"], {"call_id": ids}
            ) if ids else ([], [])
            ports: dict[str, set[int]] = {}
            for cid, command in zip(cids, commands, strict=True):
                for target in _LOG_TARGET.findall(text_of(command)):
                    name = target.rsplit("/", 1)[-1]
                    if name and not target.startswith("&") and target != "/dev/null":
                        ports.setdefault(name, set()).add(self._launch_ports[str(cid)])
            self._logs = {name: p.pop() for name, p in ports.items() if len(p) == 1}
        return self._logs

    def _start_of(self, call: _Call) -> tuple[int, str] | None:
        """(message, command) of the call that started the background job a re-check
        reads (its last start before the re-check: an exec session's id is used again by
        a later process), None when unknown."""
        if self._job_ids is None:
            msgs, ids, tools, inputs = self.frames.select_lists(
                "tool_calls", ["msg_idx", "call_id", "tool", "input"],
                {"tool": sorted(RECHECK_TOOLS)}, min_idx=self.lo,
            )
            self._job_ids = {
                (int(m), str(c)): recheck_job_id(str(t), text_of(i))
                for m, c, t, i in zip(msgs, ids, tools, inputs, strict=True)
            }
        job = self._job_ids.get((call.msg, call.call_id))
        if job is None:
            return None
        starts = self._job_starts().get(job, [])
        j = bisect_left(starts, (call.msg + 1, "")) - 1
        return starts[j] if j >= 0 else None

    def _started_command(self, call: _Call) -> str:
        """The command that started the background job a re-check reads (its last start
        before the re-check), "" when unknown. What started jobs is read on first need,
        over the whole session: a job is re-checked long after its start."""
        start = self._start_of(call)
        return start[1] if start is not None else ""

    def _job_starts(self) -> dict[str, list[tuple[int, str]]]:
        """Background job id (Claude Code) or exec session id (Codex) -> (message, command)
        of each shell call that started it: sent to the background, or returned while its
        process runs on."""
        if self._started is None:
            rows = self.frames.select(
                "tool_calls", ["msg_idx", "tool", "command", "output"],
                matching={"output": _JOB_STARTED},
            )
            self._started = {}
            for m, tool, command, output in rows.itertuples(index=False):
                if text_of(tool).lower() not in SHELL_TOOLS or not text_of(command):
                    continue
                text = text_of(output)
                job = background_job_started(text) or exec_session_started(text)
                if job is not None:
                    self._started.setdefault(job, []).append((int(m), text_of(command)))
        return self._started

    def describe(self, signals: list[Signal]) -> str:
        """``what (message)`` of each signal. Each signal is worded once: the windows of
        nearby claims overlap, so verdicts name the same signals again and again."""
        words = []
        for s in signals:
            word = self._words.get(s)
            if word is None:
                word = self._words[s] = f"{s.what} ({self.frames.ref(s.msg_idx)})"
            words.append(word)
        return ", ".join(words)

    def window_start(self, msg_idx: int, subject: str, port: int | None = None) -> int:
        """Where a claim's evidence starts: LOOKBACK messages before it, or for a server or
        deployment the last (re)start before it of its server (any server's when the
        claim names none; a reboot or a launch of unknown port restarts every one), for a
        feature or fix the last change to a file before it."""
        start = max(0, msg_idx - LOOKBACK)
        if subject in ("server", "deployment"):
            for j in range(bisect_left(self.launch_idx, msg_idx) - 1, -1, -1):
                if self.launch_idx[j] < start:
                    break
                if port is None or self.launch_port[j] in (None, port):
                    return self.launch_idx[j]
        elif subject == "feature":  # (a check before the last change did not see it)
            j = bisect_left(self.change_msg, msg_idx) - 1
            if j >= 0 and self.change_msg[j] >= start:
                return self.change_msg[j]
        return start

    def claimed_port(self, msg_idx: int, claim_text: str) -> int | None:
        """The port of the server a claim is about, of those launched before it."""
        return claimed_port(claim_text, [s for at, s in self.servers if at < msg_idx])


# --------------------------------------------------------------------------- verdicts


def _claim_text(text: str, evidence: str | None) -> str:
    if evidence and evidence in text:
        start = text.rfind("\n", 0, text.index(evidence)) + 1
        end = text.find("\n", text.index(evidence) + len(evidence))
        line = text[start : end if end >= 0 else None].strip()
        return line[:300] or evidence
    if evidence:
        return evidence[:300]
    return _short(text, 300)


def _from_other_server(ev: _Evidence, signal: Signal, port: int | None) -> bool:
    """A server signal read from another server than the one on ``port`` (its log, its
    launch, its address) says nothing of it."""
    if port is None:
        return False
    other = ev.opened_port.get(signal) or ev.signal_port(signal.msg_idx)
    return other is not None and other != port


def _precedes_claim(text: str, claim_pos: int | None, what: str) -> bool:
    """In formats that inline tool calls in the message text (transcript_text), a call
    written before the claim's text was seen by the claim."""
    if claim_pos is None:
        return False
    first = what.strip().splitlines()[0][:60] if what.strip() else ""
    pos = text.find(first) if first else -1
    return 0 <= pos < claim_pos


def judge_claim(
    ev: _Evidence,
    msg_idx: int,
    message_text: str,
    claim_text: str,
    next_claim: int | None,
    claim_pos: int | None = None,
    subject: str | None = None,
) -> ReadinessClaim:
    frames = ev.frames
    ref = frames.ref
    subject = subject or subject_of(claim_text)
    if subject == "job":
        judged = _judge_job(ev, msg_idx, message_text, claim_text, next_claim, claim_pos)
        if judged is not None:
            return judged
    port = ev.claimed_port(msg_idx, claim_text)
    # (a job claim with no look at a job of its kinds is judged as a feature claim)
    lo = ev.window_start(msg_idx, "feature" if subject == "job" else subject, port)
    # Server observations printed in the claim's own message may be what it quotes;
    # its checks count as after the claim unless written before the claim's text.
    server_before = [
        s for s in ev.server_signals(lo, msg_idx + 1)
        if (s.msg_idx < msg_idx or s.kind != "failure") and not _from_other_server(ev, s, port)
    ]
    own = [c for c in ev.checks(msg_idx, msg_idx + 1) if not ev.about_other_server(c[1], port)]
    own_before = [s for s, cmd in own if _precedes_claim(message_text, claim_pos, cmd)]
    checks_before = [
        s for s, cmd in ev.checks(lo, msg_idx) if not ev.about_other_server(cmd, port)
    ] + own_before
    hi = msg_idx + LOOKAHEAD + 1
    if next_claim is not None:
        hi = min(hi, next_claim)
    after = (
        [s for s, _ in own if s not in own_before]
        + [s for s, cmd in ev.checks(msg_idx + 1, hi) if not ev.about_other_server(cmd, port)]
        + [
            s for s in ev.server_signals(msg_idx, hi)
            if s.kind == "failure" and not _from_other_server(ev, s, port)
        ]
    )
    if subject == "test run":  # (what fails after "the tests pass" that is no test run
        after = [s for s in after if s.kind == "tests"]  # leaves them passed)
    ready = [s for s in server_before if s.kind == "ready"]
    passes = [s for s in checks_before if s.passed]
    if subject in ("server", "deployment"):
        passes = [s for s in passes if not ready or s.msg_idx >= ready[0].msg_idx]
    liveness = [s for s in server_before if s.kind in ("liveness", "graph_begin")]
    graph_open = _graph_in_progress(server_before)

    # The earliest verdict after the claim (min keeps the first of equally early ones).
    first_after = min(
        (s for s in after if s.passed is not None or s.kind == "failure"),
        key=_signal_at,
        default=None,
    )
    evidence = sorted({s.msg_idx for s in ready + passes + liveness})
    verdict, contradicted, reason = "unverified", None, ""
    if first_after is not None and (first_after.kind == "failure" or first_after.passed is False):
        verdict, contradicted = "premature", first_after.msg_idx
        basis = ev.describe(ready + passes or liveness) or "no functional check"
        reason = (
            f"claimed on {basis}; the next check after it failed — "
            f"{first_after.what} ({ref(first_after.msg_idx)})"
        )
    elif passes:
        verdict = "supported"
        reason = "a functional check passed before it: " + ev.describe(passes)
        if ready:  # (the ready line is no check of its own: named apart)
            reason += "; before that the server said it was ready: " + ev.describe(ready)
    elif graph_open and not ready:
        verdict = "premature"
        reason = "CUDA graph capture was still in progress: " + ev.describe(graph_open)
        others = [s for s in liveness if s not in graph_open]
        if others:
            reason += "; besides that only liveness: " + ev.describe(others[-3:])
    elif liveness and not ready:
        verdict = "premature"
        reason = (
            "only liveness before it — "
            + ev.describe(liveness[-3:])
            + "; no ready line and no functional check"
        )
    else:
        seen = ev.describe(ready)
        reason = f"only {seen}, no generation checked" if seen else "no evidence either way"
        if first_after is not None and first_after.passed:
            reason += f"; a later check passed: {first_after.what} ({ref(first_after.msg_idx)})"
    return ReadinessClaim(
        session_id=frames.session_id,
        msg_idx=msg_idx,
        claim_text=claim_text,
        subject=subject,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        evidence_msg_idx=evidence,
        contradicted_by_msg_idx=contradicted,
    )


_STATE_WORDS = {"done": "done", "running": "still running", "failed": "failed"}


def _judge_job(
    ev: _Evidence,
    msg_idx: int,
    message_text: str,
    claim_text: str,
    next_claim: int | None,
    claim_pos: int | None,
) -> ReadinessClaim | None:
    """The verdict on a claim about a job, from the looks at the jobs of its kinds (a
    download, a build …) near it; None when there is none. When the claim names the job
    (``jobs.claimed_looks``), only the looks at it count; the first of them after the claim
    (within LOOKAHEAD, past the next claim, which may be about another job) contradicts it
    when it shows the job failed or still running. Else the last look before it decides:
    done supports it, running or failed makes it premature. A look at no named job after
    the claim (before the next one) contradicts it only by a failure."""
    kinds = jobs.claim_kinds(claim_text)
    near = [
        look for look in ev.looks(max(0, msg_idx - LOOKBACK), msg_idx + LOOKAHEAD + 1)
        if look.kinds & kinds
    ]
    looks, named = jobs.claimed_looks(near, claim_text)
    if not looks:
        return None
    before = [
        look for look in looks
        if look.msg < msg_idx
        or (look.msg == msg_idx and _precedes_claim(message_text, claim_pos, look.command))
    ]
    after = [look for look in looks if look not in before]
    if not named and next_claim is not None:
        after = [look for look in after if look.msg < next_claim]
    last = before[-1] if before else None
    first = min(after, key=lambda look: look.at, default=None)
    ref = ev.frames.ref
    job = f"the job (the looks naming {', '.join(named)})" if named else "the job"

    def said(look: jobs.Look) -> str:
        return f"{look.reading.words} ({ref(look.at)})"

    verdict, contradicted = "unverified", None
    if first is not None and (
        first.reading.state == "failed" or (bool(named) and first.reading.state == "running")
    ):
        verdict, contradicted = "premature", first.at
        basis = (
            f"the last look at {job} before it, which showed it "
            f"{_STATE_WORDS[last.reading.state]}: {said(last)}"
            if last else f"no look at {job}"
        )
        reason = (
            f"claimed on {basis}; the next look after it showed it "
            f"{_STATE_WORDS[first.reading.state]} — {said(first)}"
        )
    elif last is not None:
        state = last.reading.state
        verdict = "supported" if state == "done" else "premature"
        reason = f"the last look at {job} before it showed it {_STATE_WORDS[state]}: {said(last)}"
    else:
        reason = f"no look at {job} before it"
        if first is not None and first.reading.state == "done":
            reason += f"; a later look showed it done: {said(first)}"
    return ReadinessClaim(
        session_id=ev.frames.session_id,
        msg_idx=msg_idx,
        claim_text=claim_text,
        subject="job",
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        evidence_msg_idx=[last.at] if last is not None else [],
        contradicted_by_msg_idx=contradicted,
    )


def _graph_in_progress(signals: list[Signal]) -> list[Signal]:
    """The last graph-capture begin not followed by an end (nor by the ready line)."""
    open_: list[Signal] = []
    for s in signals:
        if s.kind == "graph_begin":
            open_ = [s]
        elif s.kind in ("graph_end", "ready"):
            open_ = []
    return open_


def claims_affected_from(first_changed: int) -> int:
    """The first claim whose verdict can change when the analysis of messages from
    ``first_changed`` on changes: a verdict reads LOOKAHEAD messages after its claim
    (and the next claim, which only narrows that window) and LOOKBACK before it."""
    return max(0, first_changed - LOOKAHEAD)


def judge_claims(frames: SessionFrames, from_idx: int = 0) -> list[ReadinessClaim]:
    """A verdict for every ``readiness_claim`` tag of the session at ``msg_idx >=
    from_idx``, in message order (earlier claims are not read)."""
    return _judge(frames, from_idx, None)[0]


def judge_settled_claims(
    frames: SessionFrames, from_idx: int, settled_below: int
) -> tuple[list[ReadinessClaim], int]:
    """The verdicts :func:`judge_claims` gives, of the claims at ``msg_idx >= from_idx``
    that read no analysis row of a message at or after ``settled_below`` (an ingest
    waiting for its tagging worker, whose rows below that are written and final), and the
    ``msg_idx`` from which claims are left to ``judge_claims`` once all rows are written.

    A verdict reads the analysis rows of the messages in its windows (LOOKBACK before
    its claim to LOOKAHEAD after, or to the next claim when that is closer) and the tags
    of the messages holding the results of the calls made there. A claim is judged here
    when those messages are all below ``settled_below``, and so is every claim before it
    (the rest are judged together, as an append judges its recent claims). Whether server
    signals come from server events is a fact of the whole session: judged here only
    when it has events already (rows written are never taken back)."""
    return _judge(frames, from_idx, settled_below)


def _judge(
    frames: SessionFrames, from_idx: int, settled_below: int | None
) -> tuple[list[ReadinessClaim], int]:
    """Verdicts of the claims from ``from_idx`` on (with ``settled_below``: those
    :func:`judge_settled_claims` may give), and the ``msg_idx`` from which claims are
    still to be judged."""
    tags = frames.select_lists(
        "tags", ["msg_idx", "evidence", "start_char"], {"tag": ["readiness_claim"]},
        min_idx=from_idx or None, below_idx=settled_below,
    )
    first_tag: dict[int, tuple[Any, Any]] = {}  # a message's first claim tag speaks
    for i, evidence, start in zip(*tags, strict=True):
        first_tag.setdefault(int(i), (evidence, start))
    idx = sorted(first_tag)
    judged = idx
    if settled_below is not None:
        judged = idx[: bisect_left(idx, settled_below - LOOKAHEAD)]
    if not judged:
        return [], from_idx
    ev = _Evidence(frames, judged)
    upto = None
    if settled_below is not None:
        if not ev.from_events:
            return [], from_idx
        upto = min(settled_below, ev.first_call_resulting_from(settled_below)) - LOOKAHEAD
        judged = judged[: bisect_left(judged, upto)]
    texts = frames.select_lists("messages", ["msg_idx", "text"], {"msg_idx": judged})
    message_texts = {int(i): text_of(t) for i, t in zip(*texts, strict=True)}
    claim_texts, subjects = {}, {}
    for msg_idx in judged:
        evidence = first_tag[msg_idx][0]
        text = _claim_text(
            message_texts.get(msg_idx, ""), evidence if isinstance(evidence, str) else None
        )
        claim_texts[msg_idx], subjects[msg_idx] = text, subject_of(text)
    # (outputs are read once the claims are known: looks at jobs only near claims about one)
    ev.read_outputs(judged, [i for i in judged if subjects[i] == "job"])
    claims = []
    for n, msg_idx in enumerate(judged):
        start = first_tag[msg_idx][1]
        # (a claim after the last one read is at least LOOKAHEAD messages after it)
        next_claim = idx[n + 1] if n + 1 < len(idx) else None
        pos = int(start) if pd.notna(start) else None
        claims.append(
            judge_claim(
                ev, msg_idx, message_texts.get(msg_idx, ""), claim_texts[msg_idx], next_claim, pos,
                subjects[msg_idx],
            )
        )
    return claims, from_idx if upto is None else max(from_idx, upto)
