"""OpenAI Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Lines are ``{"timestamp", "type", "payload"}``. One ``Message`` (``source_id``
``L<line>``) per line that carries a message, a tool call or a tool result;
everything else is kept as a ``RawRecord``. Choices a reader should know:

- Older rollouts (Rust CLI builds of 2025-05-07 .. 2025-09-09, before openai/codex
  43809a45 introduced the wrapper) have no wrapper: a first line holding the session
  meta itself (``id``, ``timestamp``, ``instructions``, ``git``), then each response
  item bare (``{"type": "message", ...}``) and ``{"record_type": "state"}`` lines. Each
  line is read by its own shape: a bare item as the ``response_item`` payload it would
  be today (same rows, ``native_type``), the meta as ``session_meta``, record_type lines
  kept raw as ``record_type/<value>``. Those lines carry no timestamp (``ts`` is NULL).

- ``response_item`` messages carry the roles: user -> ``user``, assistant ->
  ``assistant``, developer/system -> ``system``. Injected context
  (``<environment_context>``, AGENTS.md instructions) stays a user message.
- ``event_msg`` ``user_message`` / ``agent_message`` repeat the response_item
  messages in newer builds. They are stored (``native_type`` ``event_msg/...``)
  with role ``system`` so that counting or tagging ``role = 'user'`` /
  ``'assistant'`` sees every prompt and reply once.
- ``reasoning`` -> role assistant, text = the summary (``native_type``
  ``response_item/reasoning``; filter on it to drop reasoning).
- ``command`` of a shell call is the script of ``["bash", "-lc", SCRIPT]``
  (what the user would type); other argument lists are ``shlex.join``-ed.
- ``<turn_aborted>`` messages and ``turn_aborted`` events set ``error``.
- a unified exec call (``exec_command``, ``write_stdin``) that returned after its yield time
  while its process runs on (the output header says ``Process running with session ID N``)
  has status ``running`` and no exit code, with its output and end time. When a later
  ``write_stdin`` of that session prints ``Process exited with code N``, or an
  ``exec_command_end`` of the call carries the exit code, the call that started the process
  gets that exit code and the status it means (``completed`` for 0, else ``error``), and the
  polls that returned while it ran are ``completed`` (no exit code: it is the exit code of
  what they printed, as for any call). Their output, end time and result message stay those
  of their own return. A process never seen to exit stays ``running``.
- tools the model runs on its side are tool calls too: ``web_search_call`` (input = its
  ``action``) and ``image_generation_call`` (output ``[image]``) carry call and result in
  one record, with the status they were written with; ``tool_search_call`` is answered by a
  ``tool_search_output`` whose text is the names of the tools found.
- The first ``session_meta`` names the session (its ``parent_thread_id``, for a
  subagent thread, gives ``parent_session_id``); later ones (forks, resumes)
  are kept as raw records only.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from analytics.command_output import command_output, exec_session_of
from analytics.formats import PARSER_VERSIONS
from analytics.models import (
    Ledger,
    Message,
    ParsedItem,
    Quarantined,
    RawRecord,
    Resume,
    Role,
    Session,
    ToolCall,
    ToolResult,
    ToolStatus,
)
from analytics.sources._jsonl import (
    BadRecordError,
    JsonLine,
    decode_raw,
    first_object,
    head_objects,
    one_line,
    opt_str,
    parse_lines,
    parse_ts,
    quarantine,
    resume_position,
)
from analytics.sources.base import session_id as make_session_id
from analytics.sources.encoding import path_text

FORMAT = "codex"
APPENDABLE = True
PARSER_VERSION = PARSER_VERSIONS[FORMAT]
"""Bump it (in ``analytics.formats.PARSER_VERSIONS``) when the rows a file gives change."""

LINE_TYPES = frozenset(
    {
        "session_meta",
        "response_item",
        "compacted",
        "turn_context",
        "event_msg",
        "world_state",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
    }
)
CALL_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
HOSTED_CALLS: dict[str, str] = {
    "web_search_call": "web_search",
    "image_generation_call": "image_generation",
}
"""Items that are a call and its result at once (the tool runs on the model's side), and
the tool name they are stored under."""
CALL_TOOL_NAMES: dict[str, str] = {
    "local_shell_call": "local_shell",
    "tool_search_call": "tool_search",
}
"""Tool names of call items that carry no ``name``."""
HOSTED_STATUS: dict[str, ToolStatus] = {
    "completed": "completed",
    "failed": "error",
    "incomplete": "error",
}
"""A hosted call's ``status`` (any other value: still running)."""
MESSAGE_ITEM_TYPES = (
    frozenset({"message", "reasoning", "agent_message"})
    | CALL_TYPES
    | OUTPUT_TYPES
    | frozenset(HOSTED_CALLS)
)
RAW_ITEM_TYPES = frozenset(
    {
        "ghost_snapshot",
        "compaction",
        "other",
    }
)
MESSAGE_EVENT_TYPES = frozenset({"user_message", "agent_message", "turn_aborted"})
RAW_EVENT_TYPES = frozenset(
    {
        "task_started",
        "task_complete",
        "token_count",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "exec_command_begin",
        "exec_command_end",
        "patch_apply_begin",
        "patch_apply_end",
        "web_search_begin",
        "web_search_end",
        "mcp_tool_call_begin",
        "mcp_tool_call_end",
        "image_generation_end",
        "view_image_tool_call",
        "context_compacted",
        "thread_settings_applied",
        "thread_name_updated",
        "error",
        "stream_error",
        "warning",
        "background_event",
        "item_started",
        "item_completed",
        "turn_diff",
        "plan_update",
        "entered_review_mode",
        "exited_review_mode",
        "undo_started",
        "undo_completed",
        "session_configured",
        "shutdown_complete",
        # 0.146+ (multi-agent, goals, guardian approvals, app-server dynamic tools)
        "collab_agent_spawn_end",
        "collab_agent_interaction_end",
        "collab_waiting_end",
        "collab_close_end",
        "collab_resume_end",
        "sub_agent_activity",
        "dynamic_tool_call_request",
        "dynamic_tool_call_response",
        "guardian_assessment",
        "thread_goal_updated",
        "thread_rolled_back",
    }
)
ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "developer": "system",
    "system": "system",
}
TURN_ABORTED_PREFIXES = ("<turn_aborted>", "The user interrupted the previous turn on purpose")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_UUID_IN_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_SCAN_LINES = 50
_SNIFF_PREFIX = re.compile(
    rb'\s*\{"timestamp"\s*:\s*"[^"]*"\s*,\s*(?:"ordinal"\s*:\s*\d+\s*,\s*)?'
    rb'"type"\s*:\s*"(?:session_meta|response_item|event_msg|turn_context)"\s*,\s*"payload"\s*:\s*\{'
)
KEPT_META = ("agent", "cwd", "title", "model", "first_model", "version", "started", "parent")
LEGACY_META_KEYS = frozenset({"id", "timestamp", "instructions", "git"})
"""Every key of an older rollout's first line (SessionMeta, flattened with GitInfo)."""
LEGACY_RECORD_TYPES = frozenset({"state"})
"""``record_type`` values older builds wrote (SessionStateSnapshot lines)."""
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LEGACY_SNIFF_PREFIX = re.compile(
    rb'\s*\{"id"\s*:\s*"' + _UUID.pattern.encode() + rb'"\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,'
    rb'\s*"instructions"\s*:\s*"'
)
NEITHER_SHAPE = (
    "neither a rollout line {timestamp, type, payload} nor a line of an older rollout "
    "(its session meta, a bare response item or a record_type line)"
)


# ---------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """True when the first complete line is a Codex rollout line, or the session meta
    an older rollout starts with."""
    obj = first_object(head)
    if obj is not None:
        return (
            obj.get("type") in LINE_TYPES
            and isinstance(obj.get("payload"), dict)
            and "timestamp" in obj
        ) or is_legacy_meta(obj)
    # a first line longer than the head (long base instructions in session_meta; long
    # AGENTS.md instructions in an older rollout's meta)
    return _SNIFF_PREFIX.match(head) is not None or _LEGACY_SNIFF_PREFIX.match(head) is not None


def is_legacy_meta(obj: dict[str, object]) -> bool:
    """The first line of an older rollout: ``{"id": <uuid>, "timestamp", "instructions"?,
    "git"?}`` and nothing else (strict, since it is the only line detection sees)."""
    session_id = obj.get("id")
    return (
        isinstance(session_id, str)
        and _UUID.fullmatch(session_id) is not None
        and isinstance(obj.get("timestamp"), str)
        and obj.keys() <= LEGACY_META_KEYS
    )


# ---------------------------------------------------------------------------
# Field helpers (pure)
# ---------------------------------------------------------------------------


def content_text(content: object) -> str:
    """Readable text of a message content / output: a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        if content is None:
            return ""
        raise BadRecordError(f"content is {type(content).__name__}, expected str or list")
    parts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise BadRecordError(f"content part is {type(part).__name__}, expected object")
        if part.get("type") in ("input_image", "image"):
            parts.append("[image]")
        elif isinstance(part.get("text"), str):
            parts.append(str(part["text"]))
    return "\n".join(parts)


def reasoning_text(payload: dict[str, object]) -> str:
    for key in ("summary", "content"):
        text = content_text(payload.get(key))
        if text:
            return text
    return ""


def join_command(argv: list[object]) -> str | None:
    """``["bash", "-lc", SCRIPT]`` -> SCRIPT; other lists -> ``shlex.join``."""
    if not argv or not all(isinstance(a, str) for a in argv):
        return None
    words = [str(a) for a in argv]
    if len(words) == 3 and Path(words[0]).name in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return shlex.join(words)


def command_of(arguments: object) -> str | None:
    """The shell command in a call's arguments (``cmd`` or ``command``), if any."""
    if isinstance(arguments, str):
        if not arguments.lstrip().startswith("{"):
            return None
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    for key in ("cmd", "command"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return join_command(value)
    return None


def read_output(output: object) -> tuple[str, int | None]:
    """(text, exit code) of a tool output: plain text with a header, JSON, or parts."""
    exit_code: int | None = None
    if isinstance(output, str) and output.startswith("{"):
        try:
            decoded = orjson.loads(output)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            metadata = decoded.get("metadata")
            if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
                exit_code = int(metadata["exit_code"])
            return str(decoded["output"]), exit_code
    text = content_text(output)
    return text, command_output(text).exit_code  # (the text keeps its header)


def still_running(text: str) -> bool:
    """Unified exec returned after its yield time while the process runs on: the header says
    ``Process running with session ID N`` and no exit code (``write_stdin`` polls it later)."""
    header = command_output(text)
    return header.session_id is not None and header.exit_code is None


def status_of(text: str, exit_code: int | None, running: bool = False) -> ToolStatus:
    """``running``: the call returned while its process runs on (``still_running``), and no
    exit code came for it since."""
    stripped = text.strip()
    if stripped.startswith("aborted by user") or stripped == "aborted":
        return "aborted"
    if running and exit_code is None:
        return "running"
    return "error" if exit_code not in (None, 0) else "completed"


STDIN_TOOL = "write_stdin"
"""Unified exec's tool that writes to (or, with empty ``chars``, polls) the process of an
exec session: its output header says whether the process still runs or has exited."""


def stdin_session(text_input: str | None) -> str | None:
    """The exec session a ``write_stdin`` call writes to (the ``session_id`` of its JSON
    arguments), or None."""
    try:
        return exec_session_of(orjson.loads(text_input) if text_input else None)
    except orjson.JSONDecodeError:
        return None


class _RanOn(NamedTuple):
    """A call stored as ``running`` because the process of its exec session ran on."""

    call_id: str
    result_msg_idx: int | None
    ended_at: str | None
    starts: bool
    """The call started the process (``exec_command``), not a ``write_stdin`` to it."""


class ExecProcesses:
    """The exec sessions whose process ran on when last seen, with the calls stored as
    ``running`` because of it, until an output or an ``exec_command_end`` shows it exited."""

    KEPT = 1024
    """Calls carried to the next ingest at most (the latest ones)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.open: dict[str, list[_RanOn]] = {}
        carried = state.get("exec_running")
        for session, entries in (carried.items() if isinstance(carried, dict) else ()):
            calls = [_RanOn(*e) for e in entries if _well_formed(e)] if isinstance(entries, list) else []
            if calls:
                self.open[str(session)] = calls
        stdin = state.get("stdin_session")
        self.stdin: dict[str, str] = {
            k: v for k, v in (stdin.items() if isinstance(stdin, dict) else ()) if isinstance(v, str)
        }
        """call id -> the exec session a ``write_stdin`` whose output is still to come writes to."""

    def ran_on(self, session: str, call: _RanOn) -> None:
        """``call`` returned while the process of ``session`` ran on. A call starting a
        process in a session id still open means the process known by it ended unseen:
        its calls are forgotten (still ``running``, no exit code being known)."""
        if call.starts or session not in self.open:
            self.open[session] = []
        self.open[session].append(call)

    def exited(self, session: str) -> list[_RanOn]:
        """The calls that were running in ``session``, whose process has exited."""
        return self.open.pop(session, [])

    def session_of(self, call_id: str) -> str | None:
        """The open exec session ``call_id`` started, or None."""
        for session, calls in self.open.items():
            if calls and calls[0].starts and calls[0].call_id == call_id:
                return session
        return None

    def state(self, pending: set[str]) -> dict[str, object]:
        """What the next ingest needs: the open sessions' calls (the latest ``KEPT``) and the
        sessions of the ``write_stdin`` calls in ``pending`` (their output is still to come)."""
        entries = [(s, c) for s, calls in self.open.items() for c in calls][-self.KEPT :]
        running: dict[str, list[list[object]]] = {}
        for session, call in entries:
            running.setdefault(session, []).append(list(call))
        return {
            "exec_running": running,
            "stdin_session": {k: v for k, v in self.stdin.items() if k in pending},
        }


def _well_formed(entry: object) -> bool:
    return (
        isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)
        and (entry[1] is None or isinstance(entry[1], int))
        and (entry[2] is None or isinstance(entry[2], str)) and isinstance(entry[3], bool)
    )


def tool_names(tools: object) -> list[str]:
    """Names of the tools a ``tool_search_output`` found (groups opened)."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        inner = tool.get("tools")
        if isinstance(inner, list):
            names.extend(tool_names(inner))
        elif isinstance(tool.get("name"), str):
            names.append(str(tool["name"]))
    return names


def hosted_input(payload: dict[str, object]) -> object:
    """What a hosted call was asked: a web search's action, an image's (revised) prompt."""
    if "action" in payload:
        return payload["action"]
    prompt = payload.get("revised_prompt")
    return {"revised_prompt": prompt} if isinstance(prompt, str) else None


def call_input(payload: dict[str, object]) -> object:
    for key in ("arguments", "input", "action"):
        if key in payload:
            return payload[key]
    return None


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def unwrap(obj: dict[str, object]) -> tuple[str, dict[str, object], object]:
    """(line type, payload, timestamp) of a line of either shape, or ``BadRecordError``.

    An older rollout's line is its own payload: a bare response item stands for a
    ``response_item`` line, the meta for ``session_meta``, and a ``record_type`` line is
    line type ``record_type``. Neither carries a timestamp, but the meta has its own.
    A line with a ``payload``, or a ``type`` that only wrapped lines have, or a
    ``timestamp`` and a ``type`` (a bare item has no timestamp) is a wrapped line."""
    kind = obj.get("type")
    wrapped_type = isinstance(kind, str) and kind in LINE_TYPES  # (a mangled type: any JSON)
    if "payload" in obj or wrapped_type or ("timestamp" in obj and "type" in obj):
        payload = obj.get("payload")
        if not isinstance(kind, str):
            raise BadRecordError("record has no string 'type' field")
        if not isinstance(payload, dict):
            raise BadRecordError(f"payload is {type(payload).__name__}, expected object")
        return kind, payload, obj.get("timestamp")
    if isinstance(obj.get("record_type"), str):
        return "record_type", obj, None
    if isinstance(kind, str):
        return "response_item", obj, None
    if isinstance(obj.get("id"), str) and isinstance(obj.get("timestamp"), str):
        return "session_meta", obj, obj["timestamp"]
    raise BadRecordError(NEITHER_SHAPE)


def _scan_meta(path: Path) -> dict[str, object]:
    """The payload of the first session_meta line near the top of the file."""
    for obj in head_objects(path, _SCAN_LINES):
        try:
            ltype, payload, _ = unwrap(obj)
        except BadRecordError:
            continue
        if ltype == "session_meta":
            return payload
    return {}


def _fallback_native_id(path: Path) -> str:
    match = _UUID_IN_NAME.search(path.stem)
    return match.group(0) if match else path_text(path.stem)


class _Parser:
    def __init__(self, path: Path, ledger: Ledger, resume: Resume | None) -> None:
        self.path = path
        self.ledger = ledger
        state = dict(resume.state) if resume else {}
        native = state.get("native_id")
        if not isinstance(native, str):
            meta_id = _scan_meta(path).get("id")
            native = meta_id if isinstance(meta_id, str) and meta_id else None
        self.native_id = native or _fallback_native_id(path)
        self.session_id = make_session_id(FORMAT, self.native_id)
        self.next_idx, self.carried = resume_position(state, resume, self.session_id)
        self.pending: dict[str, ToolCall] = {}
        self.no_exit: dict[str, ToolCall] = {}
        """Completed calls whose exit code may still come from exec_command_end."""
        self.stored_no_exit = _carried_no_exit(state)
        """The same, for calls stored by the ingest this one resumes."""
        early = state.get("early_exit")
        self.early_exit: dict[str, int] = {
            k: v for k, v in (early.items() if isinstance(early, dict) else ()) if isinstance(v, int)
        }
        """Exit codes that came before the output of a call stored by an earlier ingest."""
        self.execs = ExecProcesses(state)
        self.meta: dict[str, str | None] = {
            key: value if isinstance(value, str) else None
            for key in KEPT_META
            for value in [state.get(key)]
        }
        self.seen_meta = bool(state.get("seen_meta"))

    def session(self) -> Session:
        parent = self.meta["parent"]
        return Session(
            session_id=self.session_id,
            source_format=FORMAT,
            native_id=self.native_id,
            source_path=str(self.path),
            title=self.meta["title"],
            agent=self.meta["agent"],
            model=self.meta["first_model"],
            cwd=self.meta["cwd"],
            started_at=parse_ts(self.meta["started"]),
            parent_session_id=make_session_id(FORMAT, parent) if parent else None,
        )

    def feed(self, line: JsonLine) -> Iterator[ParsedItem]:
        obj = line.value
        assert isinstance(obj, dict)
        try:
            ltype, payload, timestamp = unwrap(obj)
        except BadRecordError as exc:
            yield self._quarantine(line, str(exc))
            return
        ptype = payload.get("record_type" if ltype == "record_type" else "type")
        kind = f"{ltype}/{ptype}" if isinstance(ptype, str) else ltype
        try:
            items = list(self._dispatch(line, ltype, kind, payload, parse_ts(timestamp)))
        except (BadRecordError, TypeError, ValueError) as exc:
            yield self._quarantine(line, one_line(exc))
            return
        self.ledger.stored()
        yield from items

    def _quarantine(self, line: JsonLine, reason: str) -> Quarantined:
        return quarantine(self.ledger, line, reason)

    def _dispatch(
        self,
        line: JsonLine,
        ltype: str,
        kind: str,
        payload: dict[str, object],
        ts: datetime | None,
    ) -> Iterator[ParsedItem]:
        ptype = payload.get("type")
        if ltype == "response_item" and ptype in MESSAGE_ITEM_TYPES:
            yield from self._response_item(line, kind, str(ptype), payload, ts)
        elif ltype == "event_msg" and ptype in MESSAGE_EVENT_TYPES:
            yield self._event_message(line, kind, str(ptype), payload, ts)
        elif ltype == "compacted":
            text = opt_str(payload, "message") or ""
            yield self._message(line, "compacted", "system", text, ts, is_compaction_summary=True)
        else:
            yield from self._note(ltype, ptype, payload)
            yield self._raw(line, ltype, kind, ptype, ts)

    def _raw(
        self, line: JsonLine, ltype: str, kind: str, ptype: object, ts: datetime | None
    ) -> RawRecord:
        if ltype == "response_item":
            known = ptype in RAW_ITEM_TYPES
        elif ltype == "event_msg":
            known = ptype in RAW_EVENT_TYPES
        elif ltype == "record_type":
            known = kind.partition("/")[2] in LEGACY_RECORD_TYPES
        else:
            known = ltype in LINE_TYPES
        if not known:
            self.ledger.unknown(kind)
        return RawRecord(
            session_id=self.session_id,
            location=line.location,
            record_type=kind,
            known=known,
            ts=ts,
            raw=decode_raw(line.raw),
        )

    def _note(self, ltype: str, ptype: object, payload: dict[str, object]) -> Iterator[ParsedItem]:
        """Session facts carried by non-message lines; exit codes from exec_command_end."""
        if ltype == "session_meta" and not self.seen_meta:
            originator, version = opt_str(payload, "originator"), opt_str(payload, "cli_version")
            cwd, started = opt_str(payload, "cwd"), opt_str(payload, "timestamp")
            self.seen_meta = True
            self.meta["agent"] = " ".join(p for p in ("codex", originator, version) if p)
            parent = opt_str(payload, "parent_thread_id")
            self.meta.update(version=version, cwd=cwd, started=started, parent=parent)
        elif ltype == "turn_context":
            model = opt_str(payload, "model")
            if model:
                self.meta["model"] = model
                self.meta["first_model"] = self.meta["first_model"] or model
        elif ptype == "thread_name_updated":
            self.meta["title"] = opt_str(payload, "thread_name") or self.meta["title"]
        elif ptype == "exec_command_end":
            yield from self._exit_code(payload)

    def _exit_code(self, payload: dict[str, object]) -> Iterator[ParsedItem]:
        call_id, exit_code = payload.get("call_id"), payload.get("exit_code")
        if not isinstance(call_id, str) or not isinstance(exit_code, int):
            return
        if call_id in self.pending and self.pending[call_id].exit_code is None:
            self.pending[call_id].exit_code = exit_code
        elif call_id in self.no_exit:
            call = self.no_exit.pop(call_id)
            status = call.status if call.status == "aborted" else status_of("", exit_code)
            yield ToolResult(
                session_id=self.session_id,
                call_id=call_id,
                output=call.output,
                status=status,
                exit_code=exit_code,
                ended_at=call.ended_at,
                result_msg_idx=call.result_msg_idx,
            )
        elif (session := self.execs.session_of(call_id)) is not None:
            yield from self._exited(session, exit_code)
        elif call_id in self.carried:
            self.early_exit[call_id] = exit_code
        elif call_id in self.stored_no_exit:
            result_msg_idx, ended_at, aborted = self.stored_no_exit.pop(call_id)
            yield ToolResult(
                session_id=self.session_id,
                call_id=call_id,
                output=None,  # (the stored output stays)
                status="aborted" if aborted else status_of("", exit_code),
                exit_code=exit_code,
                ended_at=datetime.fromisoformat(ended_at) if ended_at else None,
                result_msg_idx=result_msg_idx,
            )

    def _message(
        self,
        line: JsonLine,
        kind: str,
        role: Role,
        text: str,
        ts: datetime | None,
        error: str | None = None,
        is_compaction_summary: bool = False,
    ) -> Message:
        idx = self.next_idx
        self.next_idx += 1
        return Message(
            session_id=self.session_id,
            msg_idx=idx,
            source_id=f"L{line.line_no}",
            role=role,
            ts=ts,
            text=text,
            error=error,
            is_compaction_summary=is_compaction_summary,
            native_type=kind,
            model=self.meta["model"] if role == "assistant" else None,
            location=line.location,
        )

    def _event_message(
        self,
        line: JsonLine,
        kind: str,
        ptype: str,
        payload: dict[str, object],
        ts: datetime | None,
    ) -> Message:
        if ptype == "turn_aborted":
            reason = opt_str(payload, "reason") or "unknown"
            return self._message(line, kind, "system", "", ts, error=f"turn_aborted: {reason}")
        return self._message(line, kind, "system", opt_str(payload, "message") or "", ts)

    def _response_item(
        self,
        line: JsonLine,
        kind: str,
        ptype: str,
        payload: dict[str, object],
        ts: datetime | None,
    ) -> Iterator[ParsedItem]:
        if ptype == "message":
            role = ROLES.get(opt_str(payload, "role") or "", "system")
            text = content_text(payload.get("content"))
            aborted = text.lstrip().startswith(TURN_ABORTED_PREFIXES)
            yield self._message(
                line, kind, role, text, ts, error="turn_aborted" if aborted else None
            )
        elif ptype == "reasoning":
            yield self._message(line, kind, "assistant", reasoning_text(payload), ts)
        elif ptype == "agent_message":
            yield self._message(line, kind, "system", content_text(payload.get("content")), ts)
        elif ptype in CALL_TYPES:
            yield from self._call(line, kind, payload, ts)
        elif ptype in HOSTED_CALLS:
            yield from self._hosted_call(line, kind, ptype, payload, ts)
        else:
            yield from self._output(line, kind, payload, ts)

    def _hosted_call(
        self, line: JsonLine, kind: str, ptype: str, payload: dict[str, object], ts: datetime | None
    ) -> Iterator[ParsedItem]:
        status = payload.get("status")
        state = HOSTED_STATUS.get(status, "running") if isinstance(status, str) else "completed"
        raw_input = hosted_input(payload)
        image = ptype == "image_generation_call" and bool(payload.get("result"))
        done = state != "running"
        message = self._message(line, kind, "assistant", "", ts)
        yield message
        yield ToolCall(
            session_id=self.session_id,
            msg_idx=message.msg_idx,
            call_id=opt_str(payload, "call_id") or opt_str(payload, "id") or f"L{line.line_no}",
            tool=HOSTED_CALLS[ptype],
            input=None if raw_input is None else orjson.dumps(raw_input).decode(),
            output="[image]" if image else None,
            status=state,
            started_at=ts,
            ended_at=ts if done else None,
            result_msg_idx=message.msg_idx if done else None,
        )

    def _call(
        self, line: JsonLine, kind: str, payload: dict[str, object], ts: datetime | None
    ) -> Iterator[ParsedItem]:
        call_id = opt_str(payload, "call_id") or opt_str(payload, "id") or f"L{line.line_no}"
        raw_input = call_input(payload)
        if isinstance(raw_input, dict) and isinstance(raw_input.get("command"), list):
            command = join_command(raw_input["command"])
        else:
            command = command_of(raw_input)
        text_input = raw_input if isinstance(raw_input, str) else None
        if raw_input is not None and text_input is None:
            text_input = orjson.dumps(raw_input).decode()
        tool = opt_str(payload, "name") or CALL_TOOL_NAMES.get(kind.rpartition("/")[2])
        message = self._message(line, kind, "assistant", "", ts)
        yield message
        earlier = self.pending.pop(call_id, None)
        if earlier is not None:  # an id used again before its call got an output: keep both
            yield earlier
        session = stdin_session(text_input) if tool == STDIN_TOOL else None
        if session is not None:
            self.execs.stdin[call_id] = session
        self.pending[call_id] = ToolCall(
            session_id=self.session_id,
            msg_idx=message.msg_idx,
            call_id=call_id,
            tool=tool,
            command=command,
            input=text_input,
            started_at=ts,
        )

    def _output(
        self, line: JsonLine, kind: str, payload: dict[str, object], ts: datetime | None
    ) -> Iterator[ParsedItem]:
        if kind.endswith("/tool_search_output"):
            text, exit_code = "\n".join(tool_names(payload.get("tools"))), None
        else:
            text, exit_code = read_output(payload.get("output"))
        running = still_running(text)
        message = self._message(line, kind, "tool", text, ts)
        yield message
        call_id = opt_str(payload, "call_id")
        if call_id is None:
            return
        call = self.pending.pop(call_id, None)
        writes_to = self.execs.stdin.pop(call_id, None)
        if call is not None:
            exit_code = exit_code if exit_code is not None else call.exit_code
            status = status_of(text, exit_code, running)
            call.output, call.exit_code, call.status = text, exit_code, status
            call.ended_at, call.result_msg_idx = ts, message.msg_idx
            if exit_code is None and status != "running":
                self.no_exit[call_id] = call
            yield call
        elif self.carried.pop(call_id, None) is not None:
            early = self.early_exit.pop(call_id, None)
            exit_code = exit_code if exit_code is not None else early
            status = status_of(text, exit_code, running)
            if exit_code is None and status != "running":
                ended = ts.isoformat() if ts else None
                self.stored_no_exit[call_id] = (message.msg_idx, ended, status == "aborted")
            yield ToolResult(
                session_id=self.session_id,
                call_id=call_id,
                output=text,
                status=status,
                exit_code=exit_code,
                ended_at=ts,
                result_msg_idx=message.msg_idx,
            )
        else:
            return  # (an output of no call known)
        yield from self._exec_state(call_id, message.msg_idx, ts, text, status, exit_code, writes_to)

    def _exec_state(
        self, call_id: str, result_msg_idx: int, ts: datetime | None, text: str,
        status: ToolStatus, exit_code: int | None, writes_to: str | None,
    ) -> Iterator[ToolResult]:
        """What the output of a unified exec call says of its process: it runs on (the call
        is one of those its exit ends), or, output of a ``write_stdin`` to exec session
        ``writes_to``, it exited."""
        if status == "running":
            session = command_output(text).session_id
            assert session is not None  # (``still_running``)
            ended = ts.isoformat() if ts else None
            self.execs.ran_on(session.strip(), _RanOn(call_id, result_msg_idx, ended, writes_to is None))
        elif writes_to is not None and exit_code is not None:
            yield from self._exited(writes_to, exit_code)

    def _exited(self, session: str, exit_code: int) -> Iterator[ToolResult]:
        """The process of exec ``session`` exited with ``exit_code``: the calls stored as
        running because of it are not (see the module's docstring)."""
        for ran in self.execs.exited(session):
            yield ToolResult(
                session_id=self.session_id,
                call_id=ran.call_id,
                output=None,  # (the stored output stays)
                status=status_of("", exit_code) if ran.starts else "completed",
                exit_code=exit_code if ran.starts else None,
                ended_at=datetime.fromisoformat(ran.ended_at) if ran.ended_at else None,
                result_msg_idx=ran.result_msg_idx,
                settles=True,
            )

    def finish(self) -> Iterator[ParsedItem]:
        yield from self.pending.values()
        open_calls = dict(self.carried)
        open_calls.update({cid: call.msg_idx for cid, call in self.pending.items()})
        self.ledger.format_version = self.meta["version"]
        self.ledger.state = {
            "native_id": self.native_id,
            "next_msg_idx": self.next_idx,
            "pending": open_calls,
            "no_exit": self._no_exit_state(),
            "early_exit": self._early_exit_state(),
            **self.execs.state(set(open_calls)),
            "seen_meta": self.seen_meta,
            **self.meta,
        }
        yield self.session()

    def _early_exit_state(self) -> dict[str, int]:
        """Exit codes of calls still open (stored as running), for their output to come."""
        state = {k: v for k, v in self.early_exit.items() if k in self.carried}
        for call_id, call in self.pending.items():
            if call.exit_code is not None:
                state[call_id] = call.exit_code
        return state

    def _no_exit_state(self) -> dict[str, list[object]]:
        """Completed calls still waiting for an exit code, as [result_msg_idx, ended_at,
        aborted] (their output is stored already): the exec_command_end that follows a
        call's output may be appended after this ingest stopped."""
        state: dict[str, list[object]] = {k: list(v) for k, v in self.stored_no_exit.items()}
        for call_id, call in self.no_exit.items():
            ended = call.ended_at.isoformat() if call.ended_at else None
            state[call_id] = [call.result_msg_idx, ended, call.status == "aborted"]
        # Calls that never get one (not shell commands) would pile up: the exit code comes
        # right after its call's output, so the latest few are all that can still get one.
        return dict(list(state.items())[-NO_EXIT_KEPT:])


NO_EXIT_KEPT = 64
"""Completed calls without an exit code carried to the next ingest (the latest ones)."""


def _carried_no_exit(state: dict[str, Any]) -> dict[str, tuple[int | None, str | None, bool]]:
    """``no_exit`` of a resume state (see ``_Parser._no_exit_state``), well-formed entries only."""
    carried = state.get("no_exit")
    out: dict[str, tuple[int | None, str | None, bool]] = {}
    for call_id, entry in (carried.items() if isinstance(carried, dict) else ()):
        if isinstance(entry, list) and len(entry) == 3:
            idx, ended, aborted = entry
            out[call_id] = (
                idx if isinstance(idx, int) else None,
                ended if isinstance(ended, str) else None,
                aborted is True,
            )
    return out


def parse(path: Path, ledger: Ledger, resume: Resume | None = None) -> Iterator[ParsedItem]:
    """Yield the session, its messages, tool calls and raw records of one rollout file."""
    parser = _Parser(path, ledger, resume)
    yield parser.session()
    yield from parse_lines(path, ledger, resume, parser.feed)
    yield from parser.finish()
