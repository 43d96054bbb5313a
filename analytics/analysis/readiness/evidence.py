"""The evidence around a session's readiness claims, read once per session: the calls near
the claims, the server's signals (its events, or text), restarts, file changes, and the jobs
looked at."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from analytics.analysis import jobs
from analytics.analysis.literals import lowered, text_of
from analytics.analysis.readiness.checks import _short, judge_check
from analytics.analysis.readiness.config import (
    LOOKAHEAD,
    LOOKBACK,
    Signal,
    _check_at,
    _signal_at,
    config,
)
from analytics.analysis.readiness.servers import (
    _LOG_TARGET,
    _about_other_server,
    _launched_server,
    _path_names,
    _Server,
    claimed_port,
    command_ports,
)
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

if TYPE_CHECKING:
    from analytics.analysis.session import SessionFrames

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



@lru_cache(maxsize=1)
def _event_kinds() -> dict[str, str]:
    """Server event -> signal kind: the first of ``_SERVER_KINDS`` whose list names it."""
    events = config().events
    return {event: kind for kind in reversed(_SERVER_KINDS) for event in events[kind]}


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
