"""Polling loops: recognising them in shell commands and measuring them.

A polling loop waits repeatedly on an external condition: a shell loop with a
``sleep`` and a check, ``watch``, ``timeout N bash -c 'until …'``,
``sleep N && check``, or repeated re-checks of a background job (Claude Code
BashOutput / TaskOutput / Monitor, Codex ``write_stdin`` polls of a process its
``exec_command`` left running).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from analytics.analysis.tagging.codeloop import code_loop
from analytics.analysis.tagging.shell import (
    Loop,
    ShellScript,
    SimpleCommand,
    core_words,
    parse_shell,
    python_programs,
)
from analytics.command_output import command_output, exec_session_of
from analytics.formats import CLAUDE_BACKGROUND_STARTED, FILE_TOOLS
from analytics.models import MessageContext, PollingLoop, ToolCall, trusted

CHECK_PROGRAMS = frozenset(
    "tail grep egrep rg curl wget nvidia-smi ps pgrep ls cat test [ [[ head nc ss netstat lsof "
    "kubectl squeue sacct docker systemctl journalctl stat wc find du free df pidof jq "
    "python python3 http ping".split()
)
"""Programs that look at the state of something (a log, a port, a process, a GPU, a host)."""
PYTHONS = frozenset({"python", "python3"})
SSH_OPTIONS_WITH_ARG = frozenset("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w".split())
NO_OP_COMMANDS = (["true"], [":"], ["exit"], ["exit", "0"], ["echo", "ok"], ["echo", "up"])
"""Remote commands that do nothing: ``ssh host true`` only tests that the host answers."""
ACTING_SUBCOMMANDS = {
    "systemctl": frozenset("start restart stop enable disable reload reload-or-restart try-restart kill "
                           "daemon-reload reset-failed mask unmask isolate".split()),
    "docker": frozenset("run start restart stop rm kill pull build create compose exec".split()),
    "kubectl": frozenset("apply create delete scale rollout run patch replace set".split()),
}
"""Subcommands with which a check program acts instead of looking (``systemctl restart``,
``docker start``, ``kubectl apply``): run after a sleep, they are a paced step, not a check."""
ACTING_SUBCOMMANDS["podman"] = ACTING_SUBCOMMANDS["docker"]
LEAVE_WORDS = frozenset({"break", "exit", "return"})
BACKGROUND_CHECK_TOOLS = frozenset({"BashOutput", "TaskOutput"})
"""Claude Code tools that read a background job's output once."""
STDIN_TOOLS = frozenset({"write_stdin"})
"""Codex unified exec: writes ``chars`` to the process of exec session ``session_id`` and
returns what it printed within ``yield_time_ms``; with no ``chars`` it only polls a process
an ``exec_command`` left running (its output header: ``Process running with session ID N``)."""
RECHECK_TOOLS = BACKGROUND_CHECK_TOOLS | STDIN_TOOLS
JOB_ID_KEYS = ("bash_id", "shell_id", "task_id", "id", "shellId", "taskId")
"""The keys of a ``BACKGROUND_CHECK_TOOLS`` call's input that name the job it reads, in the
order they are tried."""
WAIT_TOOLS = frozenset({"Monitor"})
"""Tools that themselves wait on a condition."""
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run", "execute", "terminal"})

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SEQ = re.compile(r"\bseq\s+(?:(-?\d+)\s+)?(?:(\d+)\s+)?(\d+)\b")
_BRACE = re.compile(r"\{(\d+)\.\.(\d+)(?:\.\.(\d+))?\}")
_COUNTER = re.compile(r"(?:-lt|-le|-ge|-gt|-eq|<=|>=|<|>)\s*(\d+)")
_URL = re.compile(r"https?://[^\s'\"|;)]+|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d+[^\s'\"|;)]*")
_PATHISH = re.compile(r"^[~./\w-]*/[\w./-]+$|^[\w.-]+\.(?:log|txt|out|err|json)$")
_FAIL_WORDS = re.compile(
    r"err|fail|traceback|exception|out of memory|oom|killed|dead|crash|abort|exit\s+[1-9]|fatal|timeout", re.I
)
_ELAPSED = re.compile(r"^\s*\[?(?:t=|elapsed[=: ]\s*)?(\d+(?:\.\d+)?)\s?s\b", re.M | re.I)
"""An elapsed-time stamp a loop prints at the start of a line (``[25s] …``, ``elapsed=40s``),
not a duration a log line reports in passing (``Capture cuda graph end. Time elapsed: 32.11 s``)."""
_BREAK_AFTER = re.compile(
    r"""grep\s+(?P<flags>(?:-[A-Za-z]+\s+)*)(?:-e\s+)?(?P<pat>"[^"]*"|'[^']*'|[^\s|;&]+)[^\n;|]*?"""
    r"""(?:&&\s*(?P<block>\{[^}]*\}|\(?[^;\n]*)|;\s*then\b(?P<then>.*?)\bfi\b)""",
    re.S,
)
_UNTIL_GREP = re.compile(
    r"""\b(?:until|while\s+!)\s+(?:[^;\n]*?\|\s*)?grep\s+(?P<flags>(?:-[A-Za-z]+\s+)*)"""
    r"""(?P<pat>"[^"]*"|'[^']*'|[^\s|;&]+)"""
)
_CHECK_EXIT = re.compile(
    r"""(?:&&\s*(?P<block>\{[^}]*\}|[^;\n]*)|\bthen\b(?P<then>.*?)\bfi\b)""", re.S
)
"""What a check other than ``grep`` runs when it succeeds: ``curl … && echo UP && break``,
``if curl …; then echo UP; break; fi``."""
_EXITS = re.compile(r"\b(?:break|exit|return)\b")
_ECHOED_STATUS = re.compile(r"(?<![\w.])124\s*\Z")
"""Output ending in 124: ``timeout …; echo "exit=$?"`` printing timeout's status."""
_ABORTED = re.compile(r"User aborted the command|aborted by user|Tool execution aborted")
_TIMEOUT = re.compile(r"\btimed? ?out\b|TIMEOUT", re.I)
_TIME = re.compile("tim", re.I)
"""Where every ``_TIMEOUT`` match starts, and much faster to rule out (``_says_timeout``)."""
_ECHO = re.compile(r"""echo\s+(?:-\w+\s+)?["']?([A-Za-z_][\w ]{0,30}?)["']?\s*(?:[;}\n]|&&|$)""")


def shell_tool(call: ToolCall) -> bool:
    return (call.tool or "").lower() in SHELL_TOOLS and bool(call.command)


def file_tool(call: ToolCall) -> bool:
    """A file tool (Read, Edit, Write …, ``formats.FILE_TOOLS``): what its input mentions is
    not run."""
    return (call.tool or "").lower() in FILE_TOOLS


def seconds(word: str) -> float | None:
    m = _DURATION.match(word.strip())
    return float(m.group(1)) * _UNIT[m.group(2)] if m else None


@dataclass(frozen=True)
class LoopShape:
    """What the command text says about a loop, before looking at the output."""

    kind: str
    """``loop`` | ``watch`` | ``sleep_check`` | ``code`` (a loop in Python code the command runs)"""
    interval_s: float | None = None
    max_iterations: int | None = None
    timeout_s: float | None = None
    checks: tuple[str, ...] = ()
    patterns: tuple[str | None, str | None, str | None, str | None] | None = None
    """What ``exit_patterns`` finds in a shell loop, read off the code of a ``code`` loop."""
    target: str | None = None
    """What a ``code`` loop checks (a shell loop's is read off the script: ``_target``)."""
    on_condition: bool = False
    """A shell loop that ends when its condition says so (``until curl …``, ``while !
    nc -z …``, ``while pgrep …``)."""
    exit_0_met: bool = False
    """For a loop on its condition, an exit of 0 says the condition was met
    (``_exit_0_met``)."""


def _sleep_of(cmds: list[SimpleCommand]) -> float | None:
    for c in cmds:
        core = core_words(c.words)
        if core and core[0] == "sleep" and len(core) > 1:
            s = seconds(core[1])
            if s is not None:
                return s
    return None


def is_check(cmd: SimpleCommand) -> bool:
    """``cmd`` looks at the state of something: a check program not run with a subcommand
    that acts (``systemctl is-active`` looks, ``systemctl restart`` acts), or ``kill -0 PID``
    (signal 0 only tests that the process exists)."""
    core = core_words(cmd.words)
    if cmd.name == "kill":
        return core[1:2] == ["-0"]
    if cmd.name == "ssh":
        return _ssh_remote(core) in NO_OP_COMMANDS
    if cmd.name not in CHECK_PROGRAMS:
        return False
    acts = ACTING_SUBCOMMANDS.get(cmd.name)
    if acts is None:
        return True
    sub = next((w for w in core[1:] if not w.startswith("-")), "")
    return sub not in acts


def _ssh_remote(core: list[str]) -> list[str]:
    """The command ``ssh [options] host command…`` runs on the host (its words split again:
    ``ssh h 'exit 0'`` and ``ssh h exit 0`` run the same)."""
    i = 1
    while i < len(core) and core[i].startswith("-"):
        i += 2 if core[i] in SSH_OPTIONS_WITH_ARG else 1
    return " ".join(core[i + 1 :]).split()


def _checks(cmds: list[SimpleCommand]) -> tuple[str, ...]:
    return tuple(c.name for c in cmds if is_check(c))


def _header_checks(header: str) -> tuple[str, ...]:
    """The check a ``while``/``until`` condition runs first (``until curl …``, ``while kill -0 …``)."""
    words = [w for w in header.split() if w != "!"]
    if words[:2] == ["kill", "-0"]:
        return ("kill",)
    return tuple(w for w in words[:1] if w in CHECK_PROGRAMS)


def _sweeps(body: list[SimpleCommand]) -> bool:
    """A loop body that never leaves on what it saw and whose only checks filter the output
    of a command piped into them (``… bench … | grep TTFT; sleep 20``): it runs something for
    each value and pauses, it does not wait on a condition."""
    if any(set(core_words(c.words)[:1]) & LEAVE_WORDS for c in body):
        return False
    looks = [c for k, c in enumerate(body) if is_check(c) and not _filters(body[k - 1] if k else None)]
    return not looks


def _filters(prev: SimpleCommand | None) -> bool:
    """A command after ``prev`` reads what ``prev`` printed, and ``prev`` is no check of its own
    (nor ``echo``/``printf`` of a value a check captured)."""
    return prev is not None and prev.next_op == "|" and not is_check(prev) and prev.name not in ("echo", "printf")


def _outer_timeout(script: ShellScript) -> float | None:
    for c in script.commands:
        w = c.words
        for k, word in enumerate(w[:-1]):
            if word == "timeout":
                j = k + 1
                while j < len(w) and w[j].startswith("-"):
                    j += 1
                if j < len(w) and (s := seconds(w[j])) is not None and len(w) > j + 1:
                    if w[j + 1].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") or c.loops == ():
                        inner = " ".join(w[j + 1 :])
                        if re.search(r"\b(?:until|while|for)\b", inner):
                            return s
    return None


def _iterations(kind: str, header: str, body: str) -> int | None:
    m = _SEQ.search(header)
    if m:
        first = int(m.group(1)) if m.group(2) else 1
        last = int(m.group(3))
        step = int(m.group(2)) if m.group(2) else 1
        if m.group(1) is not None and m.group(2) is None:
            first = int(m.group(1))
        return max(0, (last - first) // max(step, 1) + 1)
    m2 = _BRACE.search(header)
    if m2:
        step = int(m2.group(3)) if m2.group(3) else 1
        return abs(int(m2.group(2)) - int(m2.group(1))) // max(step, 1) + 1
    words = header.split()
    if header.startswith("((") or (words and words[0] in ("i", "n", "k") and "in" not in words):
        m3 = _COUNTER.search(header)
        if m3:
            return int(m3.group(1))
    if kind == "for" and len(words) > 1 and not any(ch in header for ch in "$*{"):
        return len(words) - (2 if words[1:2] == ["in"] else 1)
    m4 = re.search(r"(?:\$\w+|\w+)\s*(?:-ge|-gt|>=|>)\s*(\d+)\s*\]*\s*\)*\s*(?:&&|;\s*then)\s*[^;\n]*\bbreak", body)
    if m4:
        return int(m4.group(1))
    return None


def _waits_on_condition(kind: str, header: str) -> bool:
    """``until X`` or ``while X`` with a test for X (not ``while true`` / ``while :``)."""
    words = header.split()
    return kind == "until" or (kind == "while" and bool(words) and words[0] not in ("true", ":"))


def _exit_0_met(script: ShellScript, loop: Loop, timeout_s: float | None) -> bool:
    """A command holding a loop on its condition that exits 0 saw the condition met: when
    nothing but the condition ends the loop (no outer ``timeout``, no ``break`` or ``exit``
    in it), the command could only run to its end that way; else when it exits 0 only if the
    loop did (``_exits_as_loop``)."""
    if timeout_s is None and not any(
        c.name in _LOOP_LEAVERS for c in script.commands if loop.id in c.loops
    ):
        return True
    return _exits_as_loop(script, loop)


_LOOP_LEAVERS = frozenset({"break", "exit", "return"})


def _exits_as_loop(script: ShellScript, loop: Loop) -> bool:
    """The command exits 0 only if ``loop`` did: nothing runs after the loop, or only what
    ``&&`` chains to it (``timeout 300 bash -c 'until …' && echo up``). After ``; curl -s
    … | jq`` the exit status is ``jq``'s, whether the loop's condition was met or not. A loop
    inside a command (``timeout 300 bash -c 'until …'``) is read at its own level, and that
    command at the top level."""
    level = [c for c in script.commands if loop.id in c.loops]
    if not level:
        return False
    depth = level[0].nested
    if not _nothing_unchained_after(
        [c for c in script.commands if c.nested == depth], lambda c: loop.id in c.loops
    ):
        return False
    if depth == 0:
        return True
    header = loop.header.split()[0] if loop.header.split() else ""
    return _nothing_unchained_after(
        [c for c in script.commands if c.nested == 0],
        lambda c: bool(header) and any(header in w for w in c.words[1:]),
    )


def _nothing_unchained_after(
    commands: list[SimpleCommand], holds: Callable[[SimpleCommand], bool]
) -> bool:
    """After the last of ``commands`` that ``holds`` (the loop, or the command holding it),
    the rest runs only through ``&&`` (then pipes): the whole exits 0 only if it did."""
    last = max((i for i, c in enumerate(commands) if holds(c)), default=None)
    if last is None:
        return False
    rest = commands[last:]
    if len(rest) == 1:
        return True
    return rest[0].next_op == "&&" and all(c.next_op in ("&&", "|") for c in rest[1:-1])


@lru_cache(maxsize=4096)
def loop_shape(command: str) -> LoopShape | None:
    """The polling loop in ``command``, or None when it does not poll."""
    script = parse_shell(command)
    timeout_s = _outer_timeout(script)
    for loop in script.loops:
        body = script.in_loop(loop.id)
        interval = _sleep_of(body)
        checks = _checks(body)
        if loop.kind in ("while", "until") and not checks:
            checks = _header_checks(loop.header)
        if interval is not None and checks and not (loop.kind == "for" and _sweeps(body)):
            return LoopShape(
                "loop", interval, _iterations(loop.kind, loop.header, command), timeout_s, checks,
                on_condition=_waits_on_condition(loop.kind, loop.header),
                exit_0_met=_exit_0_met(script, loop, timeout_s),
            )
    for code in python_programs(script):
        found = code_loop(code, CHECK_PROGRAMS)
        if found is not None:
            pats = (found.success, found.failure, found.success_marker, found.failure_marker)
            return LoopShape("code", found.interval_s, found.max_iterations, timeout_s,
                             found.checks, pats, found.target)
    for c in script.commands:
        core = core_words(c.words)
        if core and core[0] == "watch":
            interval = 2.0
            for k, w in enumerate(core[:-1]):
                if w in ("-n", "--interval"):
                    interval = seconds(core[k + 1]) or interval
                elif w.startswith("-n") and len(w) > 2:
                    interval = seconds(w[2:]) or interval
            return LoopShape("watch", interval, None, timeout_s, _checks(script.commands),
                             target=_watched(core))
    return _sleep_then_look(script, timeout_s)


_WATCH_OPTIONS_WITH_ARG = frozenset({"-n", "--interval", "-q", "--equexit"})


def _watched(core: list[str]) -> str | None:
    """What ``watch [options] COMMAND…`` runs again and again: the target its own words
    name (a URL, a log, ``nvidia-smi``), else the program it runs."""
    i = 1
    while i < len(core) and core[i].startswith("-"):
        i += 1 if "=" in core[i] or core[i] not in _WATCH_OPTIONS_WITH_ARG else 2
    if i >= len(core):
        return None
    watched = parse_shell(" ".join(core[i:]))
    names = [c.name for c in watched.commands if c.name]
    return _target(watched) or (names[0] if names else None)


def _sleep_then_look(script: ShellScript, timeout_s: float | None) -> LoopShape | None:
    """``sleep N; check``: a sleep outside any loop, then a command that looks (``tail``,
    ``ssh host 'curl …'``), or a loop without a sleep of its own that looks (``sleep 60;
    for p in 8001 8002; do curl …; done``): a second look after a wait."""
    cmds = script.commands
    top = [c for c in cmds if not c.loops]
    for k, a in enumerate(cmds[:-1]):
        core = core_words(a.words)
        if a.loops or not core or core[0] != "sleep" or a.next_op not in ("&&", ";", "\n") or len(core) < 2:
            continue
        b = cmds[k + 1]
        if _starts_something(b):
            continue
        wraps = b.name in ("ssh", "docker", "kubectl")
        if _looks([b]) or (wraps and (_checks(top) or _looks(cmds[k + 2 :]))):
            return LoopShape("sleep_check", seconds(core[1]), 1, timeout_s, (b.name,))
    return None


def _looks(cmds: list[SimpleCommand]) -> bool:
    """A check among ``cmds`` that does not just filter another command's output; in a loop,
    not a Python program (``for c in 1 8; do python bench.py -c $c; done`` is a sweep)."""
    def looks(c: SimpleCommand) -> bool:
        return is_check(c) and not (c.loops and c.name in PYTHONS)

    def filters(prev: SimpleCommand) -> bool:
        return prev.next_op == "|" and not looks(prev) and prev.name not in ("echo", "printf")

    return any(looks(c) and not (k and filters(cmds[k - 1])) for k, c in enumerate(cmds))


def _starts_something(cmd: SimpleCommand) -> bool:
    """``cmd`` is sent to the background or starts a server (``nohup python -m
    sglang.launch_server … &``, ``systemctl enable --now unit``): a sleep before it waits for
    the old one to go, and nothing it prints is a check's answer."""
    if cmd.next_op == "&":
        return True
    from analytics.analysis.tooling import parse_launches

    return bool(parse_launches(shlex.join(cmd.words)))


def _unquote(pat: str) -> str:
    return pat[1:-1] if len(pat) >= 2 and pat[0] == pat[-1] and pat[0] in "'\"" else pat


@lru_cache(maxsize=4096)
def exit_patterns(command: str) -> tuple[str | None, str | None, str | None, str | None]:
    """(success_pattern, failure_pattern, success_marker, failure_marker) from ``grep … && break``
    (or ``exit``, or ``if grep …; then … fi``); a check other than grep gives only a marker."""
    success = failure = s_mark = f_mark = None
    grep_spans: list[tuple[int, int]] = []
    for m, block, depth, tells_apart in _grep_exits(command):
        if not depth:  # (a nested one's span is within its block, inside this one's)
            grep_spans.append(m.span())
        if not _EXITS.search(block):
            continue
        pat = _unquote(m.group("pat"))
        marker = _marker(block)
        # (a pattern naming a failure is the failure pattern, unless its block says it is
        # ready, or a grep in its block tells a failure apart: ``"ready|error"``)
        failing = bool(_FAIL_WORDS.search(block)) or (
            bool(_FAIL_WORDS.search(pat)) and not tells_apart
            and not re.search(r"exit\s+0|ready|ok\b|up\b", block, re.I)
        )
        if failing and failure is None:
            failure, f_mark = pat, marker
        elif not failing and success is None:
            success, s_mark = pat, marker
    if success is None:
        m2 = _UNTIL_GREP.search(command)
        if m2:
            success = _unquote(m2.group("pat"))
    for m in _CHECK_EXIT.finditer(command):
        if any(start <= m.start() < end for start, end in grep_spans):
            continue
        block = m.group("block") or m.group("then") or ""
        marker = _marker(block) if _EXITS.search(block) else None
        if marker is None or _TIMEOUT.search(marker):
            continue
        if _FAIL_WORDS.search(block):
            if failure is None and f_mark is None:
                f_mark = marker
        elif success is None and s_mark is None:
            s_mark = marker
    return success, failure, s_mark, f_mark


def _grep_exits(command: str, depth: int = 0) -> Iterator[tuple[re.Match[str], str, int, bool]]:
    """Each ``grep … && {…}`` / ``if grep …; then … fi`` of ``command`` with its own block:
    what the block runs apart from the ``grep``s with blocks of their own nested in it
    (``if grep -qE "ready|error" log; then grep -q Traceback log && { echo FAILED; exit 1; };
    echo READY; break; fi``: the outer grep leaves with READY, the inner one with FAILED),
    outer ones first, with how deep in other ones' blocks each is and whether its block
    holds such a grep of its own."""
    for m in _BREAK_AFTER.finditer(command):
        block = m.group("block") or m.group("then") or ""
        inner = list(_grep_exits(block, depth + 1)) if "grep" in block else []
        own = block
        for n, _, level, _ in inner:
            if level == depth + 1:
                own = own.replace(n.group(0), " ", 1)
        yield m, own, depth, bool(inner)
        yield from inner


_AFTER_LOOP = re.compile(r"\bdone\s*(?:;|&&)\s*(?P<rest>echo\b[^\n]*)")


def _printed_after_loop(command: str | None, out: str) -> bool:
    """Whether ``out`` shows the marker ``command`` echoes right after its loop (``until
    curl …; do sleep 5; done; echo UP``): a loop on its condition gets there only once the
    condition held (no outer ``timeout`` can end it). An echo of a status (``$?``) is no
    marker."""
    m = _AFTER_LOOP.search(command or "")
    if m is None or "$?" in m.group("rest"):
        return False
    marker = _marker(m.group("rest"))
    return bool(marker) and re.search(rf"(?m)^\s*{re.escape(marker or '')}\b", out) is not None


def _marker(block: str) -> str | None:
    """The text a loop's exit block echoes, which then marks in the output which exit ran."""
    echo = _ECHO.search(block)
    return echo.group(1).strip() if echo else None


def _target(script: ShellScript) -> str | None:
    url = _URL.search(script.source)
    if url:
        return url.group(0)
    for c in script.commands:
        if c.name in ("tail", "cat", "grep", "head", "ls", "stat", "wc", "test", "["):
            for w in reversed(core_words(c.words)[1:]):
                if not w.startswith("-") and _PATHISH.match(w):
                    return w
    for c in script.commands:
        core = core_words(c.words)
        if c.name in ("pgrep", "pidof") and len(core) > 1:
            return core[-1]
        if c.name == "nvidia-smi":
            return "nvidia-smi"
        if c.name in ("nc", "ncat"):  # nc -z HOST PORT: the port it knocks on
            args = [w for w in core[1:] if not w.startswith("-")]
            if len(args) >= 2 and args[-1].isdigit() and not args[-2].isdigit():
                return f"{args[-2]}:{args[-1]}"
    for c in script.commands:
        if c.name == "grep" and c.nested == 0:
            prev = script.commands[script.commands.index(c) - 1] if script.commands.index(c) else None
            if prev is not None and prev.name == "ps":
                return core_words(c.words)[-1]
    return None


def _search(pattern: str | None, text: str) -> int:
    """Position of the first match of a grep -E style pattern (case-insensitive), or -1."""
    if not pattern:
        return -1
    try:
        m = re.search(pattern, text, re.I)
    except re.error:
        idx = text.lower().find(pattern.lower())
        return idx
    return m.start() if m else -1


def _first_marker(marker: str | None, text: str) -> int:
    """Where a line of ``text`` that opens with ``marker`` (as a word) first is, or -1: the
    line an exit block printed (``echo READY``; ``print("up after", t, "s")``)."""
    if not marker:
        return -1
    m = re.search(rf"^\s*{re.escape(marker)}(?:[ \t][^\n]*)?$", text, re.M)
    return m.start() if m else -1


def _outcome(
    call: ToolCall, shape: LoopShape, pats: tuple[str | None, ...], out: str, reads_log: bool,
    ran_s: float | None = None,
) -> str:
    """``reads_log``: the loop reads a log (``_reads_log``), whose server milestones tell
    the outcome when the loop names no pattern of its own; ``ran_s``: how long the command
    ran (its output's wall time, else its record's), for ``_ended_by_clock``."""
    success, failure, s_mark, f_mark = pats
    s_pos = _first_marker(s_mark, out)
    f_pos = _first_marker(f_mark, out)
    if s_pos < 0 and s_mark is None:
        s_pos = _search(success, out) if success and shape.kind != "watch" else -1
    if f_pos < 0 and f_mark is None:
        f_pos = _search(failure, out)
    if s_pos >= 0 and (f_pos < 0 or s_pos <= f_pos):
        return "ready"
    if f_pos >= 0:
        return "failed"
    if call.status == "aborted" or ("aborted" in out and _ABORTED.search(out)):
        return "aborted"
    if call.exit_code == 124 or _says_timeout(out) or _echoes_timeout_status(call, shape, out):
        return "timeout"
    if shape.max_iterations and call.status == "completed" and success:
        lines = _iteration_lines(out)
        if lines >= shape.max_iterations:
            return "timeout"
    by_clock = _ended_by_clock(call, shape, pats, ran_s)
    if by_clock is not None:
        return by_clock
    if shape.on_condition and shape.exit_0_met and call.exit_code == 0:
        return "ready"  # (the loop ended, and not by its failure exit: its condition held)
    if shape.on_condition and shape.timeout_s is None and _printed_after_loop(call.command, out):
        return "ready"  # (what it echoes once the loop is over is there: its condition held)
    if reads_log and not (success or s_mark):  # (a failure pattern not seen says nothing)
        return _implied_outcome(out)
    return "unknown"


_LEAVES = re.compile(r"\bbreak\b|\bexit\s+0\b")


def _ended_by_clock(
    call: ToolCall, shape: LoopShape, pats: tuple[str | None, ...], ran: float | None
) -> str | None:
    """How a loop of N rounds that sleeps each round and leaves only when its check passes
    (``for i in $(seq 1 30); do curl -sf … && break; sleep 10; done``) ended, by how long it
    ran, when its output does not say: ``timeout`` once it ran as long as all its sleeps
    (the rounds ran out), ``ready`` when it finished before its sleeps could have run out
    (it left early, and only a passing check leaves); else None."""
    success, failure, s_mark, f_mark = pats
    if (
        ran is None or shape.kind != "loop" or not shape.max_iterations or not shape.interval_s
        or failure or f_mark or call.status not in ("completed", "error")
        or not (success or s_mark or _leaves_on_check(call.command or ""))
    ):
        return None
    if ran >= shape.max_iterations * shape.interval_s:
        return "timeout"
    if ran < (shape.max_iterations - 1) * shape.interval_s and call.status == "completed" and (
        call.exit_code in (0, None)
    ):
        return "ready"
    return None


def _leaves_on_check(command: str) -> bool:
    """A check leaves the loop when it passes (``curl -sf … && break``, ``if nc -z …; then
    break; fi``), by a block that is no failure exit."""
    for m in _CHECK_EXIT.finditer(command):
        block = m.group("block") or m.group("then") or ""
        if _LEAVES.search(block) and not _FAIL_WORDS.search(block):
            return True
    return False


LOG_READERS = frozenset({"tail", "cat", "head", "grep", "egrep", "rg", "journalctl", "less"})
"""Programs that print a log's lines (as ``docker logs`` and ``kubectl logs`` do)."""


def _reads_log(script: ShellScript) -> bool:
    """The command prints a log (``tail -5 server.log``, ``docker logs ctr``), not the answer
    of a check (a health endpoint's body, a process list): only a log's lines are milestones."""
    for c in script.commands:
        core = core_words(c.words)
        if c.name in LOG_READERS or (c.name in ("docker", "podman", "kubectl") and "logs" in core):
            return True
    return False


_STEADY_EVENTS = frozenset({"health_ok", "models_ok", "uvicorn_running"})
"""Server events that do not change what the last milestone said (a health check answered);
any other event that is neither ready nor a failure is a step of a start-up in progress."""


def _implied_outcome(out: str) -> str:
    """The outcome of a poll of a log that names no pattern of its own (``sleep 30; tail -3
    server.log``) from the last milestone its output shows: ``ready`` after a server's ready
    line (SGLang's "fired up" or its warm-up request answered, vLLM's API server up),
    ``failed`` after a crash or an OOM (the events the readiness audit reads as such), else
    ``unknown``: nothing read, or a start-up still in progress (shards loading, a restart).
    A log that holds a benchmark's results and no such milestone (``sleep 60; tail -40
    bench.log``) shows the job waited for done: ``ready`` (a progress bar alone: unknown)."""
    from analytics.analysis.readiness import config
    from analytics.analysis.tooling import scan_log
    from analytics.analysis.tooling.benchmarks import benchmark_numbers

    kinds = config().events
    last, milestones = "unknown", 0
    for hit in scan_log(out).events:
        if hit.event in kinds["ready"]:
            last = "ready"
        elif hit.event in kinds["failure"]:
            last = "failed"
        elif hit.event not in _STEADY_EVENTS:
            last = "unknown"
        else:
            continue
        milestones += 1
    if not milestones and benchmark_numbers(out):
        return "ready"
    return last


def _echoes_timeout_status(call: ToolCall, shape: LoopShape, out: str) -> bool:
    """Whether a loop under ``timeout`` ran with its status echoed (``; echo "rc=$?"``)
    and the output ends in 124, the status ``timeout`` exits with when time ran out."""
    return shape.timeout_s is not None and "$?" in (call.command or "") and bool(
        _ECHOED_STATUS.search(out)
    )


def _says_timeout(out: str) -> bool:
    """Whether ``out`` holds a ``_TIMEOUT`` match. Each starts with ``_TIME``, which most
    outputs lack: in ASCII text (where "i" has no other case than "I") an ``in`` test of
    the text in lower case tells it at a fourth of the cost of the case-insensitive search,
    which other text keeps ("i" then also matches the Turkish dotless and dotted i)."""
    if out.isascii():
        may = "tim" in out.lower()
    else:
        may = _TIME.search(out) is not None
    return may and _TIMEOUT.search(out) is not None


def _iteration_lines(out: str) -> int:
    return sum(1 for line in out.splitlines() if line.strip() and not line.startswith("<"))


def _waited(call: ToolCall, shape: LoopShape, out: str, wall_time_s: float | None) -> float | None:
    """How long the loop waited: the wall time its output's header states (measured around
    the command alone), else the time between its call and its result, else what its output
    shows (elapsed stamps, or one interval per line printed)."""
    if wall_time_s is not None:
        return wall_time_s
    if call.duration_s is not None:
        return call.duration_s
    if shape.interval_s is None:
        return None
    stamps = [float(x) for x in _ELAPSED.findall(out)]
    if stamps and max(stamps) >= shape.interval_s:
        return max(stamps)
    lines = _iteration_lines(out)
    if not lines:
        return None
    if shape.max_iterations:
        lines = min(lines, shape.max_iterations)
    return lines * shape.interval_s


_LOOP_FIELDS = set(PollingLoop.model_fields)
"""The fields-set of the loops ``analyse_call`` builds as ``models.trusted`` builds records:
each value it gives is of its field's type already (the times are floats)."""


def analyse_call(session_id: str, msg_idx: int, call: ToolCall) -> PollingLoop | None:
    """The polling loop of one shell tool call, or None."""
    if not shell_tool(call):
        return None
    command = call.command or ""
    shape = loop_shape(command)
    if shape is None:
        return None
    script = parse_shell(command)
    pats = shape.patterns if shape.patterns is not None else exit_patterns(command)
    printed = command_output(call.output)
    out = printed.text  # (patterns are looked for in what the command printed, not its header)
    max_wait = shape.timeout_s
    if shape.interval_s is not None and shape.max_iterations:
        span = shape.interval_s * shape.max_iterations
        max_wait = min(max_wait, span) if max_wait else span
    ran = printed.wall_time_s if printed.wall_time_s is not None else call.duration_s
    outcome = _outcome(call, shape, pats, out, _reads_log(script), ran)
    waited = _waited(call, shape, out, printed.wall_time_s)
    if outcome == "timeout" and max_wait and (printed.wall_time_s, call.duration_s) == (None, None):
        waited = max_wait  # (no clock: it ran until its limit)
    return trusted(PollingLoop, {
        "session_id": session_id,
        "msg_idx": msg_idx,
        "call_id": call.call_id,
        "interval_s": shape.interval_s,
        "max_iterations": shape.max_iterations,
        "max_wait_s": max_wait,
        "target": shape.target or _target(script),
        "success_pattern": pats[0],
        "failure_pattern": pats[1],
        "outcome": outcome,
        "waited_s": waited,
    }, _LOOP_FIELDS)


def analyse_polling(ctx: MessageContext) -> list[PollingLoop]:
    """Polling loops among the tool calls ``ctx`` makes (shell loops only;
    background re-checks are found by :func:`background_rechecks`)."""
    out: list[PollingLoop] = []
    for call in ctx.calls:
        loop = analyse_call(ctx.message.session_id, ctx.message.msg_idx, call)
        if loop is not None:
            out.append(loop)
    return out


def background_job_id(call: ToolCall) -> str | None:
    """The shell/task id a BashOutput/TaskOutput/Monitor call reads, the exec session a
    ``write_stdin`` poll reads (None when it writes something: input, not a poll), or None."""
    if call.tool in STDIN_TOOLS:
        return polled_session(call)
    if call.tool not in BACKGROUND_CHECK_TOOLS | WAIT_TOOLS:
        return None
    return input_job_id(call.input) or "?"


def input_job_id(input_: str | None) -> str | None:
    """The background job id a re-check's input (a JSON object) names (``bash_id``,
    ``task_id`` …), or None."""
    try:
        data = json.loads(input_ or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in JOB_ID_KEYS:
        if data.get(key):
            return str(data[key])
    return None


def recheck_job_id(tool: str, input_: str | None) -> str | None:
    """The job a re-check's input (a JSON object) names: the exec session a ``write_stdin``
    call writes to or polls (``session_id``; its output is that session's process's header
    and what it printed, whatever ``chars`` it sends), else the background job
    (``input_job_id``)."""
    if tool not in STDIN_TOOLS:
        return input_job_id(input_)
    try:
        return exec_session_of(json.loads(input_ or "{}"))
    except ValueError:
        return None


def _input_object(call: ToolCall) -> dict[str, object] | None:
    """A call's input, when it is a JSON object (no input: an empty one)."""
    try:
        data = json.loads(call.input or "{}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _only_waits(call: ToolCall) -> bool:
    """A shell call that merely sleeps (between two re-checks)."""
    return shell_tool(call) and _waits_only(call.command or "")


@lru_cache(maxsize=4096)
def _waits_only(command: str) -> bool:
    """``command`` only sleeps, echoes or does nothing. Cached, as ``parse_shell`` is: every
    shell call of a batch is asked, and agents repeat their commands."""
    core = [core_words(c.words) for c in parse_shell(command).commands]
    return bool(core) and all(w and w[0] in ("sleep", "echo", "true") for w in core)


def polled_session(call: ToolCall) -> str | None:
    """The exec session a ``write_stdin`` call polls (its ``session_id``, when its ``chars``
    are empty or absent), or None."""
    data = _input_object(call)
    return None if data is None or data.get("chars") else exec_session_of(data)


Run = list[tuple[int, ToolCall]]
"""Re-checks of one background job, as (msg_idx, call), in order."""


def made_calls(batch: list[MessageContext]) -> Iterator[tuple[int, ToolCall]]:
    """(msg_idx, call) of each call the messages of ``batch`` make, in order."""
    for ctx in batch:
        for call in ctx.calls:
            yield ctx.message.msg_idx, call


def recheck_runs(batch: list[MessageContext]) -> Iterator[Run]:
    """Runs of re-checks of the same background job among the calls of ``batch``."""
    return runs_of(made_calls(batch))


def runs_of(calls: Iterable[tuple[int, ToolCall]]) -> Iterator[Run]:
    """Runs of re-checks of the same background job with only sleeps in between (another
    call, or a re-check of another job, ends a run), of (msg_idx, call) in order."""
    run: Run = []
    run_id: str | None = None
    for msg_idx, call in calls:
        job = background_job_id(call)
        if job is not None and call.tool in RECHECK_TOOLS:
            if job != run_id:
                if run:
                    yield run
                run, run_id = [], job
            run.append((msg_idx, call))
        elif job is None and run and not _only_waits(call):  # (no run: nothing to end)
            yield run
            run, run_id = [], None
    if run:
        yield run


def ends_runs(call: ToolCall) -> bool:
    """Whether ``call`` ends any run of re-checks (``runs_of``): it is no re-check and
    does more than wait."""
    return background_job_id(call) is None and not _only_waits(call)


def _is_loop(run: Run) -> bool:
    """2+ re-checks; or 1 ``write_stdin`` poll, the second check of a process its
    ``exec_command`` (the first) found still running."""
    return len(run) >= 2 or run[0][1].tool in STDIN_TOOLS


def background_rechecks(batch: list[MessageContext]) -> dict[int, ToolCall]:
    """:func:`rechecks_of` the calls of ``batch``."""
    return rechecks_of(list(made_calls(batch)))


def rechecks_of(calls: list[tuple[int, ToolCall]]) -> dict[int, ToolCall]:
    """msg_idx -> call for every Monitor call and for runs of re-checks of the same
    background job (``runs_of``) that poll (``_is_loop``), among ``calls`` ((msg_idx, call),
    in order). Those of only part of a session's calls are some of those of all of them
    (a run seen in part is a run, or part of one)."""
    found: dict[int, ToolCall] = {}
    for idx, call in calls:
        if call.tool in WAIT_TOOLS:
            found.setdefault(idx, call)
    for run in runs_of(calls):
        if _is_loop(run):
            for idx, call in run:
                found.setdefault(idx, call)
    return found


def recheck_evidence(call: ToolCall) -> str:
    """The evidence of the ``polling_loop`` tag of a re-check (or a Monitor call)."""
    return f"{call.tool} {call.input or ''}"[:200]


def rechecks(batch: list[MessageContext]) -> bool:
    """Whether a message of ``batch`` re-checks a background job: a run of re-checks may
    reach past ``batch``, so their loops and tags are found again among all of the session's
    calls once the batch is written (``analysis.run.MessageRun.close``)."""
    return any(call.tool in RECHECK_TOOLS for ctx in batch for call in ctx.calls)


def exec_session_loops(batch: list[MessageContext]) -> list[PollingLoop]:
    """:func:`session_loops` of the calls of ``batch``."""
    if not any(call.tool in RECHECK_TOOLS for ctx in batch for call in ctx.calls):
        return []  # (most batches)
    return session_loops(batch[0].message.session_id, list(made_calls(batch)))


def session_loops(
    session_id: str,
    calls: list[tuple[int, ToolCall]],
    started: dict[str, str] | None = None,
) -> list[PollingLoop]:
    """A polling loop for each run of ``write_stdin`` polls of one exec session, and for
    each run of 2+ re-checks of one background job (Claude Code ``BashOutput``/``TaskOutput``
    with only sleeps between), among ``calls`` ((msg_idx, call), in order), stored at its
    last poll (which saw the outcome). Its target is the command the session or job runs
    (from the ``exec_command`` among ``calls`` that left it running; for a background job,
    ``started``: job id -> the command started in the background, else the one among
    ``calls``), else ``exec session N`` / ``background job ID``. A run is one loop only
    when ``calls`` hold all of it: an ingest finds them among all of a session's calls,
    however the session was cut into chunks or appended."""
    commands = _running_commands(calls)
    jobs = started if started is not None else background_commands(calls)
    loops: list[PollingLoop] = []
    for run in runs_of(calls):
        first = run[0][1]
        if first.tool in STDIN_TOOLS:
            session = polled_session(first) or "?"
            target = commands.get(session) or f"exec session {session}"
            loops.append(_session_loop(session_id, run, target))
        elif first.tool in BACKGROUND_CHECK_TOOLS and _is_loop(run):
            job = background_job_id(first) or "?"
            target = jobs.get(job) or f"background job {job}"
            loops.append(_session_loop(
                session_id, run, target, _recheck_wait(run, calls), _recheck_interval(run, calls)
            ))
    return loops


_BACKGROUND_STARTED = re.compile(CLAUDE_BACKGROUND_STARTED)


def background_job_started(output: str | None) -> str | None:
    """The id of the background job a shell call whose result is ``output`` started
    (Claude Code ``run_in_background``), or None."""
    m = _BACKGROUND_STARTED.match(output or "")
    return m.group("job") if m else None


def background_commands(calls: Iterable[tuple[int, ToolCall]]) -> dict[str, str]:
    """Background job id -> the command that started it, among ``calls``."""
    found: dict[str, str] = {}
    for _, call in calls:
        job = background_job_started(call.output) if shell_tool(call) else None
        if job is not None and call.command:
            found[job] = call.command
    return found


def _recheck_wait(run: Run, calls: list[tuple[int, ToolCall]]) -> float | None:
    """How long a run of re-checks waited: from the start of the sleeps before its first
    re-check (or of that re-check) to the end of its last, by the calls' times; None
    without them."""
    ids = [id(call) for _, call in calls]
    first = ids.index(id(run[0][1]))
    while first > 0 and _only_waits(calls[first - 1][1]):
        first -= 1
    start, last = calls[first][1].started_at, run[-1][1]
    end = last.ended_at or last.started_at
    return max(0.0, (end - start).total_seconds()) if start and end else None


def _recheck_interval(run: Run, calls: list[tuple[int, ToolCall]]) -> float | None:
    """How long a run of re-checks slept before each re-check (the ``sleep N`` calls just
    before it), the middle value of those that slept; None when none did."""
    k = [id(call) for _, call in calls].index(id(run[0][1]))
    while k > 0 and _only_waits(calls[k - 1][1]):
        k -= 1
    rechecks = {id(call) for _, call in run}
    slept: list[float] = []
    total, seen = 0.0, 0
    for _, call in calls[k:]:  # (only sleeps between the re-checks of a run)
        if id(call) not in rechecks:
            total += _slept(call.command or "")
            continue
        if total > 0:
            slept.append(total)
        total, seen = 0.0, seen + 1
        if seen == len(run):
            break
    return sorted(slept)[(len(slept) - 1) // 2] if slept else None


def _slept(command: str) -> float:
    """The seconds the ``sleep`` commands of ``command`` sleep, together."""
    words = (core_words(c.words) for c in parse_shell(command).commands)
    return sum(seconds(w[1]) or 0.0 for w in words if len(w) > 1 and w[0] == "sleep")


def exec_session_started(output: str | None) -> str | None:
    """The exec session a shell call whose result is ``output`` left its process running in
    (Codex: ``Process running with session ID N`` in the header), or None."""
    session = command_output(output).session_id
    return session.strip() if session is not None else None


def _running_commands(calls: list[tuple[int, ToolCall]]) -> dict[str, str]:
    """exec session id -> the command of the shell call whose output left it running."""
    found: dict[str, str] = {}
    for _, call in calls:
        if call.command and shell_tool(call):
            session = exec_session_started(call.output)
            if session is not None:
                found[session] = call.command
    return found


def _session_loop(
    session_id: str, run: Run, target: str, waited: float | None = None, interval: float | None = None
) -> PollingLoop:
    """The loop of ``run``: ready or failed by the exit code the last poll prints, else by
    the server milestones the polls printed; waited ``waited`` when given, else as long as
    the polls' headers say (or their records, without headers)."""
    msg_idx, last = run[-1]
    outputs = [command_output(call.output) for _, call in run]
    exits = [code for o in outputs if (code := _exit_code_of(o.exit_code, o.text)) is not None]
    if waited is None:
        waited = _polls_waited(run, [o.wall_time_s for o in outputs])
    return trusted(PollingLoop, {
        "session_id": session_id,
        "msg_idx": msg_idx,
        "call_id": last.call_id,
        "interval_s": interval,
        "max_iterations": None,
        "max_wait_s": None,
        "target": target[:200],
        "success_pattern": None,
        "failure_pattern": None,
        "outcome": _session_outcome(last, exits[-1] if exits else None, [o.text for o in outputs]),
        "waited_s": waited,
    }, _LOOP_FIELDS)


RECHECK_EXIT_CODE = re.compile(r"^<exit_code>(?P<code>-?\d+)</exit_code>", re.M)
"""The exit code a Claude Code re-check of a finished background job shows (after its
``<status>``; FORMATS.md, "Background and polling")."""


def _exit_code_of(header_code: int | None, text: str) -> int | None:
    """The exit code a poll's output shows: its header's (Codex), else a re-check's
    ``<exit_code>``."""
    if header_code is not None:
        return header_code
    m = RECHECK_EXIT_CODE.search(text) if "<exit_code>" in text else None
    return int(m.group("code")) if m else None


def _polls_waited(run: Run, walls: list[float | None]) -> float | None:
    """The wall times the polls' headers give, summed; else their records' durations."""
    if all(w is not None for w in walls):
        return sum(w for w in walls if w is not None)
    durations = [call.duration_s for _, call in run]
    return sum(d for d in durations if d is not None) if None not in durations else None


def _session_outcome(last: ToolCall, exit_code: int | None, printed: list[str]) -> str:
    if exit_code is not None:
        return "ready" if exit_code == 0 else "failed"
    if last.status == "aborted":
        return "aborted"
    return _implied_outcome("\n".join(printed))
