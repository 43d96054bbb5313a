"""Tool-call tags from commands and outputs: cheap regex and shell parsing, no tokenizer.

launch, smoke_test and benchmark go on the message carrying the call; error and
a benchmark result block on the message carrying the result; user_abort on the
record carrying the marker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from analytics.analysis.literals import AnyLiteral
from analytics.analysis.tagging.components import PATTERNS_DIR, RuleError, read_jsonl
from analytics.analysis.tagging.polling import shell_tool
from analytics.analysis.tagging.shell import (
    core_words,
    inner_command,
    parse_shell,
    program_words,
    stdin_program,
)
from analytics.batchgate import may_match_each, superset_of_any
from analytics.command_output import CommandOutput, command_output
from analytics.models import Message, ToolCall

MAX_OUTPUT_SCAN = 40_000
"""Only the head and tail of long outputs are scanned (errors and result blocks sit at the end)."""
MARKER_SCAN = 2_000
"""Abort markers sit at the start or the end of an output."""
COMMAND_CACHE_SIZE = 20_000
"""Distinct (command, backgrounded) pairs whose hits are remembered (agents repeat commands)."""
RECENT_TEXTS = 4
"""Texts whose literal scan is remembered: a tool record's text is its call's output, read
as a marker text, a marker output and a rules output."""
SHARED_GATE_MARKERS = ("text", "output")
"""Marker places (``where``) whose texts the rules of ``SHARED_GATE_RULES`` read too."""
SHARED_GATE_RULES = ("output", "text")
"""Rule targets (``on``) read by ``text_hits``, on the same texts as those markers."""


@dataclass(frozen=True)
class Hit:
    label: str
    rule: str
    evidence: str
    start: int | None
    end: int | None
    """Offsets of ``evidence`` in the text it quotes; None when it quotes none (a call's
    status or exit code, a tool and its input): no offsets that would point at other text."""


@dataclass(frozen=True)
class RegexRule:
    label: str
    id: str
    on: str
    regex: re.Pattern[str]
    requires: str | None = None
    program: str | None = None
    roles: frozenset[str] = frozenset()
    needs: tuple[str, ...] = ()
    """Literal substrings, one of which must be present for the regex to be tried."""


def _compile(row: dict[str, Any]) -> RegexRule:
    where = row.get("_where", "?")
    for key in ("label", "regex"):
        if not isinstance(row.get(key), str):
            raise RuleError(
                f"{where}: missing '{key}'; a regex rule needs 'label' (the tag name) and "
                "'regex' (a Python regular expression) as strings"
            )
    on = row.get("on", "command")
    if on not in ("command", "output", "input", "text"):
        raise RuleError(f"{where}: 'on' is {on!r}; valid: command, output, input, text")
    try:
        rx = re.compile(row["regex"], re.M | (re.I if row.get("ignore_case") else 0))
    except re.error as exc:
        raise RuleError(f"{where}: 'regex' does not compile ({exc}); fix it or escape literal characters") from exc
    return RegexRule(
        label=row["label"],
        id=str(row.get("id") or row["label"]),
        on=on,
        regex=rx,
        requires=row.get("requires"),
        program=row.get("program"),
        roles=frozenset(row.get("roles", [])),
        needs=tuple(row.get("needs", [])),
    )


class ToolRules:
    """Regex rules for commands, outputs and markers, loaded from JSONL."""

    def __init__(self, extra: list[dict[str, Any]] | None = None) -> None:
        rows = read_jsonl(PATTERNS_DIR / "commands.jsonl")
        self.skip: frozenset[str] = frozenset()
        self.rules: list[RegexRule] = []
        for row in rows + list(extra or []):
            if "skip_programs" in row:
                self.skip = self.skip | frozenset(row["skip_programs"])
            elif "regex" in row:
                self.rules.append(_compile(row))
        self.markers = [
            (r["where"], re.compile(r["regex"], re.M), tuple(r.get("needs", [])))
            for r in read_jsonl(PATTERNS_DIR / "markers.jsonl")
        ]
        self._by_on: dict[str, list[RegexRule]] = {}
        for rule in self.rules:
            self._by_on.setdefault(rule.on, []).append(rule)
        self._needless = {on: [r for r in rules if not r.needs] for on, rules in self._by_on.items()}
        """on -> its rules without ``needs``: those that can match a ``_quiet`` text."""
        self._markers_at: dict[str, list[tuple[re.Pattern[str], tuple[str, ...]]]] = {}
        for where, rx, needs in self.markers:
            self._markers_at.setdefault(where, []).append((rx, needs))
        self._marker_gate = {w: _any_of(ms) for w, ms in self._markers_at.items()}
        """where -> every marker's ``needs`` (None: a marker has none): none found, no marker."""
        self._needs_gate = {
            on: AnyLiteral(n for r in rules for n in r.needs) for on, rules in self._by_on.items()
        }
        """on -> the ``needs`` of its rules: none found, none of those rules can match."""
        shared = {n for w in SHARED_GATE_MARKERS for _, needs in self._markers_at.get(w, []) for n in needs}
        shared |= {n for on in SHARED_GATE_RULES for r in self._by_on.get(on, []) for n in r.needs}
        self._shared_gate = AnyLiteral(shared)
        """Every ``needs`` of the markers and rules that read the same texts:
        a text without a hit is read once instead of once per place (``_quiet``)."""
        self._recent: list[tuple[str, bool]] = []
        self._command_cache: dict[tuple[str, bool], list[Hit]] = {}
        self._silent: dict[str, set[str]] = {"output": set(), "text": set()}
        """Per place (``output``, ``text``): the texts of the batch being tagged in which no
        rule or marker of that place can match (``note_silent``); for outputs, what their
        commands printed too."""
        self._sources = {place: self._place_source(place) for place in self._silent}
        """Per place: a RE2 superset of every rule and marker of that place (``batchgate``)."""

    def _place_source(self, place: str) -> str | None:
        return superset_of_any([
            *(r.regex for r in self._by_on.get(place, [])),
            *(rx for rx, _ in self._markers_at.get(place, [])),
        ])

    def _quiet(self, text: str) -> bool:
        """No marker or rule need (``_shared_gate``) occurs in the parts of ``text`` that
        ``text_hits`` reads (they hold the parts ``abort`` reads). Remembered for the last
        ``RECENT_TEXTS`` texts: equal texts compare at memory speed, scanning is ten times slower."""
        for seen, quiet in self._recent:
            if seen is text or seen == text:
                return quiet
        if len(text) <= MAX_OUTPUT_SCAN:  # the one segment is the text itself
            quiet = not self._shared_gate.found_in(text)
        else:
            quiet = not any(self._shared_gate.found_in(seg) for _, seg in _output_segments(text))
        self._recent = [(text, quiet), *self._recent[: RECENT_TEXTS - 1]]
        return quiet

    def note_silent(self, outputs: list[str], texts: list[str]) -> None:
        """Find, for a batch's tool ``outputs`` and message ``texts`` all at once, those in
        which no rule or marker of their place can match (most of them: logs, listings,
        short asks): ``abort`` and ``text_hits`` then answer at once for them (for an
        output, for what its command printed too: ``command_output``) until the next
        call. Found by RE2 over the batch (``batchgate``): the hits stay the same."""
        unique = list(dict.fromkeys([*outputs, *texts]))
        maybe = may_match_each([self._sources["output"], self._sources["text"]], unique)
        quiet_outputs = {t for t, m in zip(unique, maybe[0], strict=True) if not m}
        self._silent = {
            "output": quiet_outputs | {command_output(t).text for t in quiet_outputs},
            "text": {t for t, m in zip(unique, maybe[1], strict=True) if not m},
        }

    # --- abort markers ---------------------------------------------------
    def abort(self, where: str, text: str | None) -> Hit | None:
        """The first abort marker for ``where`` (error | text | output) in ``text``."""
        if not text or text in self._silent.get(where, ()):
            return None
        gate = self._marker_gate.get(where)
        if gate is not None and where in SHARED_GATE_MARKERS and self._quiet(text):
            return None
        if len(text) > 2 * MARKER_SCAN:
            segments = [(0, text[:MARKER_SCAN]), (len(text) - MARKER_SCAN, text[-MARKER_SCAN:])]
        else:
            segments = [(0, text)]
        markers = self._markers_at.get(where, [])
        if gate is not None and not any(gate.found_in(seg) for _, seg in segments):
            return None
        for rx, needs in markers:
            for offset, segment in segments:
                if needs and not any(n in segment for n in needs):
                    continue
                m = rx.search(segment)
                if m:
                    return Hit("user_abort", f"abort:{where}", m.group(0), offset + m.start(), offset + m.end())
        return None

    # --- commands --------------------------------------------------------
    def command_hits(self, call: ToolCall) -> list[Hit]:
        command = call.command or ""
        if not command:
            return []
        key = (command, _run_in_background(call))
        hits = self._command_cache.get(key)
        if hits is None:
            if len(self._command_cache) >= COMMAND_CACHE_SIZE:
                self._command_cache.clear()
            hits = self._command_cache[key] = self._command_hits(*key)
        return list(hits)

    def _command_hits(self, command: str, background_tool: bool) -> list[Hit]:
        hits: list[Hit] = []
        script = parse_shell(command)
        for cmd in script.commands:
            core = core_words(cmd.words)
            run = program_words(cmd.words)  # ``uv run python``: python runs, not uv
            if not run or run[0].rsplit("/", 1)[-1] in self.skip:
                continue
            if inner_command(cmd.words) is not None:
                continue  # ssh / bash -c / docker exec: their inner commands are matched instead
            if "--help" in run:
                continue  # ``vllm bench serve --help`` prints usage: it runs nothing
            fed = stdin_program(cmd)
            if fed is not None and fed[0] == "shell":
                continue  # bash <<EOF: the commands of the here-document are matched instead
            joined = " ".join(core)
            if fed is not None:  # python - <<EOF: its code is read as a ``-c`` string is
                joined = f"{joined}\n{fed[1]}"
            bg = (
                background_tool
                or cmd.background
                or any(w in ("nohup", "setsid") for w in cmd.words[: len(cmd.words) - len(core)])
            )
            for rule in self.rules:
                if rule.on != "command" or any(h.label == rule.label for h in hits):
                    continue
                if rule.requires == "background" and not bg:
                    continue
                if rule.program and cmd.name != rule.program:
                    continue
                m = rule.regex.search(joined)
                if m:
                    hits.append(_locate(rule, m.group(0), command))
        return hits

    def text_hits(self, on: str, text: str, role: str | None = None) -> list[Hit]:
        """First hit per label of the ``on`` rules; long texts are scanned at head and tail only."""
        rules = self._by_on.get(on)
        if not text or not rules or text in self._silent.get(on, ()):
            return []
        if on in SHARED_GATE_RULES and self._quiet(text):
            rules = self._needless[on]  # no rule's needs occur: only these can match
        segments = _output_segments(text)
        hits: list[Hit] = []
        done: set[str] = set()
        gate = self._needs_gate.get(on)
        # holds some rule's needs? (found once per segment, when the rule first asks)
        needy: list[bool | None] = [None] * len(segments)
        for rule in rules:
            if rule.label in done or (role and rule.roles and role not in rule.roles):
                continue
            for k, (offset, segment) in enumerate(segments):
                if rule.needs:
                    if needy[k] is None:
                        needy[k] = gate is None or gate.found_in(segment)
                    if not needy[k] or not any(n in segment for n in rule.needs):
                        continue
                m = rule.regex.search(segment)
                if m:
                    start = offset + m.start()
                    hits.append(Hit(rule.label, rule.id, m.group(0)[:200], start, offset + m.end()))
                    done.add(rule.label)
                    break
        return hits


def _output_segments(text: str) -> list[tuple[int, str]]:
    """(offset, part) of ``text`` that the rules read: all of it, or of a long text its
    head and tail (errors and result blocks sit at the end)."""
    if len(text) > MAX_OUTPUT_SCAN:
        half = MAX_OUTPUT_SCAN // 2
        return [(0, text[:half]), (len(text) - half, text[-half:])]
    return [(0, text)]


def _any_of(markers: list[tuple[re.Pattern[str], tuple[str, ...]]]) -> AnyLiteral | None:
    if not all(needs for _, needs in markers):
        return None
    return AnyLiteral(n for _, needs in markers for n in needs)


def _locate(rule: RegexRule, matched: str, command: str) -> Hit:
    """Evidence offsets inside the original command (words were unquoted)."""
    idx = command.find(matched)
    if idx < 0:
        first = matched.split()[0] if matched.split() else matched
        idx = command.find(first)
        matched = first if idx >= 0 else matched
    if idx < 0:
        return Hit(rule.label, rule.id, matched[:200], None, None)
    return Hit(rule.label, rule.id, matched[:200], idx, idx + len(matched))


def _run_in_background(call: ToolCall) -> bool:
    if not call.input or "background" not in call.input:
        return False
    try:
        data = json.loads(call.input)
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("run_in_background"))


def printed_hits(rules: ToolRules, printed: CommandOutput) -> list[Hit]:
    """The output rules' hits in what a command printed (``printed.text``), with offsets into
    the stored output: a header before the output (``command_output``) is no text to match."""
    hits = rules.text_hits("output", printed.text)
    if not printed.start:
        return hits
    return [replace(h, start=_moved(h.start, printed.start), end=_moved(h.end, printed.start)) for h in hits]


def _moved(offset: int | None, by: int) -> int | None:
    return None if offset is None else offset + by


def exit_code_hit(exit_code: int | None) -> Hit | None:
    """The failure a non-zero exit code is (a fact: its evidence quotes no text)."""
    if exit_code in (None, 0):
        return None
    return Hit("error", "error:exit-code", f"exit code {exit_code}", None, None)


def error_hits(rules: ToolRules, call: ToolCall, aborted: bool, output_hits: list[Hit] | None = None) -> list[Hit]:
    """Failure evidence of a finished call: status error, non-zero exit, signatures in what it
    printed (``output_hits``: ``printed_hits`` of its output, when the caller has them). A
    call that returned while its process ran on (its output's header names the exec session)
    has its exit code from a later poll, which shows the failure: not this result."""
    if shell_tool(call) or (call.tool or "").lower() in ("bashoutput", "taskoutput"):
        hits = output_hits if output_hits is not None else printed_hits(rules, command_output(call.output))
        for h in hits:
            if h.label == "error":
                return [h]
    if aborted:
        return []
    by_exit = exit_code_hit(call.exit_code)
    if (by_exit is not None or call.status == "error") and _ran_on(call):
        return []
    if by_exit is not None and _expected_exit(call):
        return []
    if by_exit is not None:
        return [by_exit]
    if call.status == "error":
        printed = command_output(call.output)
        out = printed.text
        first = out.strip().splitlines()[0][:200] if out.strip() else "status error"
        start = printed.start + max(out.find(first), 0) if out.strip() else 0
        return [Hit("error", "error:status", first, start, start + len(first))]
    return []


GREP_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg"})
NO_MATCH_OUTPUTS = frozenset({"", "0"})
"""What a last ``grep`` that found nothing prints: nothing, or ``0`` with ``-c``."""
DISCONNECTING = re.compile(r"\b(?:reboot|shutdown|poweroff|halt)\b|\binit\s+[06]\b")
SSH_DROPPED = "closed by remote host"


def _expected_exit(call: ToolCall) -> bool:
    """A non-zero exit that reports no failure: the last command is a ``grep`` that found no
    line (exit 1, nothing printed or a count of 0), or a reboot ended the ssh session that
    ran it (exit 255, "Connection … closed by remote host")."""
    command = call.command or ""
    if not command:
        return False
    out = command_output(call.output).text.strip()
    if call.exit_code == 1 and out in NO_MATCH_OUTPUTS:
        cmds = parse_shell(command).commands
        return bool(cmds) and cmds[-1].name in GREP_PROGRAMS
    return call.exit_code == 255 and SSH_DROPPED in out and bool(DISCONNECTING.search(command))


def _ran_on(call: ToolCall) -> bool:
    """``call`` returned while its process ran on (``Process running with session ID N``)."""
    printed = command_output(call.output)
    return printed.session_id is not None and printed.exit_code is None


def message_error(rules: ToolRules, msg: Message) -> Hit | None:
    """An error attached to the record that is not an abort (APIError, ContextOverflowError …)."""
    if not msg.error or rules.abort("error", msg.error):
        return None
    evidence = msg.error[:200]
    return Hit("error", "error:message", evidence, 0, len(evidence))


def load_extra_regex_rules(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(path) if "regex" in r]
