"""The state of a job (a download, a build or install, a conversion, an upload) as one tool
output shows it, and which looks at jobs a claim about one is about.

A *look* is a tool call whose output shows a job's state: ``failed``, ``done`` or
``running``. A Claude Code ``BashOutput``/``TaskOutput`` result opens with the background
job's ``<status>`` (and ``<exit_code>``), which decides, as the header of a Codex
``write_stdin`` to a job's exec session does (``Process exited with code C``, ``Process
running with session ID N``); otherwise the last marker in the output wins (a tqdm bar at
``100%|…| 42/42`` is done, ``[312/412]`` still running, pip's resolver ``ERROR: …``
followed by ``Successfully installed`` done). A look reads like a kind of job by its
command (for a re-check, the command that started the job: sent it to the background, or
left its exec session running), else (a ``tail`` of a log) by its marker's line. A claim
is about the looks of its kinds; when it shares a distinctive word (``7b``, ``qwen``,
``vllm``) with some of them, only the ones sharing the most.

The markers and kinds live in ``data/readiness.json`` (``jobs``), with their sources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, NamedTuple

from analytics.analysis.literals import AnyLiteral, Gated, lowered
from analytics.analysis.tagging.polling import RECHECK_EXIT_CODE
from analytics.batchgate import may_match_many, superset_of_any
from analytics.command_output import CommandOutput

STATES = ("failed", "done", "running")

# The header of a Claude Code background job's re-check (FORMATS.md, "Background and
# polling"): ``<status>running</status>`` then ``<stdout>…``; a finished job's also holds
# ``<exit_code>N</exit_code>``.
_STATUS = re.compile(r"^<status>(?P<status>[a-z_]+)</status>", re.M)

# Words that name a job: runs of 3+ letters (``qwen``, ``vllm``) and sizes (``7b``, ``1.5b``,
# ``8x7b``).
_WORD = re.compile(r"[a-z]{3,}|(?<![\w.])\d+(?:x\d+)?(?:\.\d+)?[bkm](?![a-z])")
# The arguments of a command that may name what it works on (split at quotes, separators
# and ``=``, so that ``--local-dir=/models/x`` and ``ssh host 'tail x.log'`` give theirs).
_TOKEN = re.compile(r"[^\s'\"`;&|<>()=]+")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # (``MAX_JOBS``, ``TORCH_CUDA_ARCH_LIST``)


@dataclass(frozen=True)
class _Config:
    status: dict[str, str]
    markers: tuple[tuple[str, Gated], ...]  # (state, pattern) gated on a common literal
    rare_markers: tuple[tuple[str, Gated], ...]  # the rest: not looked for without one of
    rare: AnyLiteral  # their literals (one pass over an output instead of one per pattern)
    kinds: tuple[tuple[str, Gated, Gated], ...]  # (kind, claim pattern, look pattern)
    generic_words: frozenset[str]


@lru_cache(maxsize=1)
def config() -> _Config:
    raw = resources.files("analytics.analysis").joinpath("data", "readiness.json")
    data: dict[str, Any] = json.loads(raw.read_text("utf-8"))["jobs"]
    # (each pattern apart: most open with a literal, which the engine skips to)
    markers = [
        (state, Gated.compile(pattern, re.I | re.M))
        for state in STATES
        for pattern in data["markers"][state]
    ]
    rare = [m for m in markers if m[1].literals and min(map(len, m[1].literals)) > 2]
    return _Config(
        status=dict(data["status"]),
        markers=tuple(m for m in markers if m not in rare),
        rare_markers=tuple(rare),
        rare=AnyLiteral(set().union(*(g.literals or () for _, g in rare))),
        kinds=tuple(
            (kind, Gated.compile(k["claim"], re.I), Gated.compile(k["look"], re.I))
            for kind, k in data["kinds"].items()
        ),
        generic_words=frozenset(data["generic_words"]),
    )


@lru_cache(maxsize=1)
def _markers_source() -> str | None:
    """A RE2 superset of every marker (``batchgate``); None when one has none."""
    cfg = config()
    return superset_of_any(g.regex for _, g in (*cfg.markers, *cfg.rare_markers))


def unmarked(texts: list[str]) -> list[bool]:
    """For each of ``texts``: True when no marker can match in it (``job_state`` of it is
    None but for a re-check's header), found for all of them at once (``batchgate``)."""
    return [not m for m in may_match_many(_markers_source(), texts)]


# --------------------------------------------------------------------------- state


class Reading(NamedTuple):
    """What one output says of its job: its state and the words that say so."""

    state: str  # failed | done | running
    words: str


class _Marker(NamedTuple):
    start: int
    end: int
    state: str


def _markers(text: str) -> list[_Marker]:
    """Every marker in ``text``, in order."""
    low = lowered(text)
    cfg = config()
    markers = cfg.markers
    if low is None or cfg.rare.found_in(low):
        markers += cfg.rare_markers
    found = [
        _Marker(m.start(), m.end(), state)
        for state, pattern in markers
        if pattern.may_match(low)
        for m in pattern.regex.finditer(text)
    ]
    found.sort()
    return found


def _line(text: str, marker: _Marker, n: int = 80) -> str:
    """The line (of a progress bar redrawn with ``\\r``, the segment) holding ``marker``."""
    start = max(text.rfind("\n", 0, marker.start), text.rfind("\r", 0, marker.start)) + 1
    ends = [i for i in (text.find("\n", marker.end), text.find("\r", marker.end)) if i >= 0]
    line = " ".join(text[start : min(ends, default=len(text))].split())
    return line if len(line) <= n else line[: n - 1] + "…"


def _words(text: str, markers: list[_Marker], state: str) -> str | None:
    """The line of the marker that says ``state``: of the last run of such markers, the
    first when it failed (``c++: fatal error: Killed …`` before ``ninja: build stopped``),
    else the last (``[312/412] …`` after ``[88/412] …``)."""
    run = []
    for marker in reversed(markers):
        if marker.state == state:
            run.append(marker)
        elif run:
            break
    if not run:
        return None
    return _line(text, run[-1] if state == "failed" else run[0])


def job_state(output: str | CommandOutput, recheck: bool = False) -> Reading | None:
    """The state of a job ``output`` shows (what a command printed, or a stored output read
    by ``command_output``), or None when it shows none. For a ``recheck`` (a re-check of a
    background job: ``BashOutput``, ``TaskOutput``, a Codex ``write_stdin``) the state of
    its process decides: a Codex header's (``_exec_state``), else the ``<status>`` (with its
    ``<exit_code>``); otherwise, and for any other call (whose exit says how a command that
    may only look at a job ended: ``grep -c safetensors dl.log``), the last marker by
    position."""
    printed = output.text if isinstance(output, CommandOutput) else output
    markers = _markers(printed)
    if recheck:
        header = output if isinstance(output, CommandOutput) else None
        decided = _exec_state(header, markers) if header is not None else None
        if decided is None:
            decided = _status_state(printed)
        if decided is not None:
            state, said = decided
            return Reading(state, _words(printed, markers, state) or said)
    if not markers:
        return None
    state = markers[-1].state
    return Reading(state, _words(printed, markers, state) or "")


def _status_state(printed: str) -> tuple[str, str] | None:
    """(state, words) of a Claude Code re-check's ``<status>`` and ``<exit_code>``: a
    completed job that exited non-zero failed."""
    status = _STATUS.search(printed)
    state = config().status.get(status.group("status")) if status is not None else None
    if status is None or state is None:
        return None
    code = RECHECK_EXIT_CODE.search(printed)
    if state == "done" and code is not None and int(code.group("code")) != 0:
        state = "failed"
    said = f"<status>{status.group('status')}</status>"
    if code is not None:
        said += f" <exit_code>{code.group('code')}</exit_code>"
    return state, said


def _exec_state(output: CommandOutput, markers: list[_Marker]) -> tuple[str, str] | None:
    """(state, words) of a Codex poll's header: the process exited 0 (done) or otherwise
    (failed), or runs on in its exec session (running; failed when the last marker printed
    says so: ``c++: fatal error: Killed …`` before ``ninja`` exits). Done waits for the
    exit: the process running on may be the job itself printing one finished file's bar
    (``model-00014-of-00037.safetensors: 100%|…|``) while others are still to come. None
    without a header."""
    if output.exit_code is not None:
        code = output.exit_code
        return ("done" if code == 0 else "failed"), f"Process exited with code {code}"
    if output.session_id is None:
        return None
    state = "failed" if markers and markers[-1].state == "failed" else "running"
    return state, f"Process running with session ID {output.session_id.strip()}"


# --------------------------------------------------------------------------- kinds and words


def claim_kinds(claim_text: str) -> frozenset[str]:
    """The kinds of job a claim names (download, build, convert, upload)."""
    low = lowered(claim_text)
    return frozenset(kind for kind, claim, _ in config().kinds if claim.search(claim_text, low))


def look_kinds(command: str, words: str) -> frozenset[str]:
    """The kinds of job a look reads like: its command's (or that of the command that
    started its background job), else, for a command that names none (``tail`` of a log),
    those of the line that showed its state."""
    return _kinds(command) or _kinds(words)


@lru_cache(maxsize=4096)
def _kinds(text: str) -> frozenset[str]:
    """The kinds of job whose look pattern ``text`` matches. Cached: agents repeat their
    commands, and a log repeats its lines."""
    low = lowered(text)
    return frozenset(kind for kind, _, look in config().kinds if look.search(text, low))


def _name_words(text: str) -> frozenset[str]:
    generic = config().generic_words
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in generic)


@lru_cache(maxsize=4096)
def command_words(command: str) -> frozenset[str]:
    """The words of what a command works on: of its path-like or model-id arguments
    (``/models/qwen2.5-7b-instruct``, ``Qwen/Qwen2.5-7B-Instruct``, ``flash-attn``), not of
    flags, environment names or the program and its subcommands (``tail``, ``install``)."""
    named = [
        t for t in _TOKEN.findall(command)
        if not t.startswith("-")
        and not _ENV_NAME.fullmatch(t)
        and any(c in "/.-_0123456789" for c in t)
    ]
    return _name_words(" ".join(named))


def claim_words(claim_text: str) -> frozenset[str]:
    """The words of a claim that may name a job (``qwen``, ``7b``), generic ones left out."""
    return _name_words(claim_text)


# --------------------------------------------------------------------------- looks


class Look(NamedTuple):
    """A call that showed a job's state."""

    msg: int  # the message that made the call
    at: int  # the message holding its result
    command: str  # its own command ("" for a re-check)
    reading: Reading
    kinds: frozenset[str]
    words: frozenset[str]  # what it names (for a re-check, what its job's command names)


def claimed_looks(looks: list[Look], claim_text: str) -> tuple[list[Look], list[str]]:
    """Of ``looks`` (those of the claim's kinds), the ones about the claimed job: those
    sharing the most distinctive words with the claim, with those words; all of them, and
    no words, when the claim shares none with any."""
    said = claim_words(claim_text)
    shared = [look.words & said for look in looks]
    most = max(map(len, shared), default=0)
    if not most:
        return looks, []
    named = sorted(set().union(*(s for s in shared if len(s) == most)))
    return [look for look, s in zip(looks, shared, strict=True) if len(s) == most], named
