"""Claude Code session files (``~/.claude/projects/<proj>/<session>.jsonl``).

One ``Message`` per line of type user / assistant / system; every other line is
kept as a ``RawRecord``. Choices a reader of the tables should know:

- role: assistant lines -> ``assistant``; system lines -> ``system``; user lines
  carrying ``tool_result`` blocks -> ``tool`` (text = the result text); user lines
  flagged ``isMeta`` (injected caveats, skill bodies) -> ``system``; other user
  lines -> ``user`` (text blocks joined with newlines, images as ``[image]``). A user
  line holding nothing but the output of a local command (``<local-command-stdout>``,
  ``<bash-stdout>`` … wrappers: what 2.1 writes as a ``system``/``local_command`` line)
  is ``system`` too: Claude Code wrote it, the user did not. So is a user line whose
  ``origin.kind`` names another sender (a background task's ``<task-notification>``, a peer
  session) or that holds nothing but a ``<task-notification>`` (builds without ``origin``).
- a prompt the user typed while the agent was working reaches the running turn as an
  ``attachment`` line of type ``queued_command`` (2.1.x; no user line follows): it is a
  ``Message`` too (``native_type = "attachment/queued_command"``, role ``user``, or
  ``system`` for a queued task notification). Other attachment lines stay raw records.
- blocks without prose leave a placeholder: ``[image]``, ``[document]`` (a PDF or text
  file attached to a prompt), ``[tool_reference: <tool>]`` (ToolSearch results).
- assistant text is the joined text blocks. Claude Code writes one content block
  per line, so a line with only ``thinking`` blocks gets the thinking as its text
  and ``native_type = "assistant/thinking"`` (filter on it to drop reasoning); an
  encrypted ``redacted_thinking`` block reads ``[redacted thinking]``.
  A tool_use-only line has text ``""``.
- ``error`` is set on an ``isApiErrorMessage`` assistant line (the request failed for
  good) and on a ``system``/``api_error`` line (one failed attempt Claude Code retries:
  ``API error 529: Overloaded (retry 1/10)``).
- a ``ToolCall`` is yielded when its ``tool_result`` arrives; calls still open at
  the end of the file are yielded with status ``running`` and remembered in
  ``ledger.state`` so a resumed parse yields a ``ToolResult`` for them.
- subagent files (``agent-<id>.jsonl`` beside the session, or under
  ``<sessionId>/subagents/``) become their own session ``<sessionId>/agent-<id>``
  whose ``parent_session_id`` is the parent session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import Any

import orjson

from analytics.errors import SourceError
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
    trusted,
)
from analytics.sources._jsonl import (
    BadRecordError,
    JsonLine,
    decode_raw,
    head_objects,
    objects_in_head,
    one_line,
    parse_lines,
    parse_ts,
    quarantine,
    resume_position,
)
from analytics.sources._jsonl import opt as _opt
from analytics.sources._jsonl import opt_dict as _opt_dict
from analytics.sources._jsonl import opt_str as _opt_str
from analytics.sources.base import session_id as make_session_id
from analytics.sources.encoding import path_text, utf8_bytes

FORMAT = "claude_code"
APPENDABLE = True
PARSER_VERSION = PARSER_VERSIONS[FORMAT]
"""Bump it (in ``analytics.formats.PARSER_VERSIONS``) when the rows a file gives change."""

MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
KNOWN_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "attachment",
        "permission-mode",
        "last-prompt",
        "ai-title",
        "progress",
        "agent-setting",
        "pr-link",
        # 2.1.x session-state and history lines (no uuid)
        "mode",
        "custom-title",
        "agent-name",
        "bridge-session",
        "file-history-delta",
    }
)
NOT_FROM_USER_ORIGINS = frozenset({"task-notification", "peer"})
"""``origin.kind`` of user lines Claude Code wrote for another sender than the user (2.1.x;
"human" is the user typing)."""
QUEUED_PROMPT = "queued_command"
"""The attachment type that delivers a prompt queued while the agent was working."""
SHELL_TOOLS = frozenset({"Bash", "bash"})
REJECTION_PREFIXES = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action right now",
)
INTERRUPTED_FOR_TOOL = "[Request interrupted by user for tool use]"
_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")
REDACTED_THINKING = "[redacted thinking]"
_COMMAND_OUTPUT = re.compile(
    r"\s*(?:<(local-command-stdout|local-command-stderr|local-command-caveat|bash-stdout"
    r"|bash-stderr|task-notification)>.*?</\1>\s*)+",
    re.DOTALL,
)
"""A user line made only of these wrappers is output Claude Code wrote for a local command
(slash command, ``!`` shell command) or a background task's notification, not words of the
user."""
_SNIFF_TYPE = re.compile(
    rb'"type"\s*:\s*"(user|assistant|system|summary|file-history-snapshot|queue-operation)"'
)
_SCAN_LINES = 200


# ---------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """True when the first bytes look like Claude Code lines (or pretty-printed objects)."""
    objects = objects_in_head(head)
    first = next(objects, None)
    if first is not None:
        return _claims(chain((first,), objects))
    stripped = head.lstrip()
    return (
        stripped.startswith(b"{")
        and b'"payload"' not in head
        and _SNIFF_TYPE.search(head) is not None
        and (b'"sessionId"' in head or b'"uuid"' in head or b'"leafUuid"' in head)
    )


def _claims(objects: Iterable[dict[str, object]]) -> bool:
    """The first line that is a known Claude Code line, or plainly not one, decides. A
    session-state line of a type not known here (a string ``type`` and a ``sessionId``, no
    ``payload``: newer builds add such types and write them at the top of a file) defers
    to the lines after it."""
    for obj in objects:
        if _looks_like_line(obj):
            return True
        rtype, session = obj.get("type"), obj.get("sessionId")
        if not isinstance(rtype, str) or not isinstance(session, str) or "payload" in obj:
            return False
    return False


def _looks_like_line(obj: dict[str, object]) -> bool:
    rtype = obj.get("type")
    if not isinstance(rtype, str) or "payload" in obj:
        return False
    if rtype not in MESSAGE_TYPES and rtype not in KNOWN_TYPES:
        return False
    return any(key in obj for key in ("sessionId", "uuid", "leafUuid", "messageId"))


# ---------------------------------------------------------------------------
# Field extraction (pure; raises BadRecordError on wrong shapes)
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Use:
    call_id: str
    tool: str | None
    input: str
    command: str | None


@dataclass(slots=True)
class _Result:
    call_id: str
    text: str
    is_error: bool


@dataclass(slots=True)
class _Line:
    """What one user/assistant/system line says, validated."""

    rtype: str
    role: Role
    text: str = ""
    native_type: str = ""
    uuid: str | None = None
    parent: str | None = None
    is_sidechain: bool = False
    is_compaction_summary: bool = False
    model: str | None = None
    error: str | None = None
    uses: list[_Use] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    tool_use_result: object = None


@dataclass(slots=True)
class _OpenCall:
    """A tool_use waiting for its result. The ToolCall is built once the result is
    known (or at the end of the file, as ``running``) instead of built early and
    mutated: pydantic attribute assignment is slow."""

    use: _Use
    msg_idx: int
    started_at: datetime | None

    def fields(self, session_id: str) -> dict[str, Any]:
        """The ToolCall fields known when the call was made."""
        return {
            "session_id": session_id,
            "msg_idx": self.msg_idx,
            "call_id": self.use.call_id,
            "tool": self.use.tool,
            "command": self.use.command,
            "input": self.use.input,
            "started_at": self.started_at,
        }


_FIELDS = {cls: set(cls.model_fields) for cls in (Message, ToolCall, RawRecord)}
"""The fields-sets of the records built without validation (``models.trusted``): the
values of a line were checked by ``_extract``, the rest the parser makes itself."""


def _blocks(content: object) -> list[dict[str, object]]:
    if content is None or isinstance(content, str):
        return []
    if not isinstance(content, list):
        raise BadRecordError(f"message content is {type(content).__name__}, expected str or list")
    for block in content:
        if not isinstance(block, dict):
            raise BadRecordError(f"content block is {type(block).__name__}, expected object")
    return content


def _block_text(block: dict[str, object]) -> str | None:
    """Readable text of a text/image block; None for other block types."""
    btype = block.get("type")
    if btype == "text":
        return _opt_str(block, "text") or ""
    if btype == "image":
        return "[image]"
    if btype == "document":
        return "[document]"
    if btype == "tool_reference":
        name = _opt_str(block, "tool_name")
        return f"[tool_reference: {name}]" if name else "[tool_reference]"
    return None


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = [_block_text(b) for b in _blocks(content)]
    return "\n".join(p for p in parts if p is not None)


def _extract(obj: dict[str, object]) -> _Line:
    rtype = str(obj["type"])
    for key in ("timestamp", "sessionId", "version", "cwd"):
        _opt(obj, key, str)
    line = _Line(rtype=rtype, role="system", native_type=rtype)
    line.uuid = _opt_str(obj, "uuid")
    line.parent = _opt_str(obj, "parentUuid") or _opt_str(obj, "logicalParentUuid")
    line.is_sidechain = bool(_opt(obj, "isSidechain", bool))
    line.is_compaction_summary = bool(_opt(obj, "isCompactSummary", bool))
    message = _opt_dict(obj, "message")
    if rtype == "system":
        content = obj.get("content", message.get("content"))
        line.text = content if isinstance(content, str) else _result_text(content)
        if obj.get("subtype") == "api_error":
            line.error = _api_error(obj)
    elif rtype == "assistant":
        _fill_assistant(line, message)
        if obj.get("isApiErrorMessage") is True:
            line.error = line.text or "API error"
    else:
        from_user = _origin_kind(obj) not in NOT_FROM_USER_ORIGINS
        _fill_user(line, message, bool(_opt(obj, "isMeta", bool)) or not from_user)
        line.tool_use_result = obj.get("toolUseResult")
    return line


def _origin_kind(obj: dict[str, object]) -> str | None:
    """``origin.kind`` of a user line or a queued prompt: who it came from."""
    origin = obj.get("origin")
    kind = origin.get("kind") if isinstance(origin, dict) else None
    return kind if isinstance(kind, str) else None


def _queued_prompt(obj: dict[str, object]) -> _Line | None:
    """The message of a ``queued_command`` attachment line; None for other attachments."""
    attachment = obj.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != QUEUED_PROMPT:
        return None
    mode = attachment.get("commandMode")
    from_user = mode in (None, "prompt") and _origin_kind(attachment) not in NOT_FROM_USER_ORIGINS
    line = _Line(
        rtype="attachment",
        role="user" if from_user else "system",
        native_type=f"attachment/{QUEUED_PROMPT}",
        text=_prompt_text(attachment.get("prompt")),
    )
    line.uuid = _opt_str(obj, "uuid")
    line.parent = _opt_str(obj, "parentUuid")
    line.is_sidechain = bool(_opt(obj, "isSidechain", bool))
    return line


def _prompt_text(prompt: object) -> str:
    """A queued prompt: a string, or a list of strings and text/image blocks."""
    if prompt is None or isinstance(prompt, str):
        return prompt or ""
    if not isinstance(prompt, list):
        raise BadRecordError(f"queued prompt is {type(prompt).__name__}, expected str or list")
    parts = [
        p if isinstance(p, str) else _block_text(p) if isinstance(p, dict) else None for p in prompt
    ]
    return "\n".join(p for p in parts if p is not None)


def _fill_assistant(line: _Line, message: dict[str, object]) -> None:
    line.role = "assistant"
    line.model = _opt_str(message, "model")
    content = message.get("content")
    texts: list[str] = [content] if isinstance(content, str) else []
    thinking: list[str] = []
    for block in _blocks(content):
        btype = block.get("type")
        if btype == "text":
            texts.append(_opt_str(block, "text") or "")
        elif btype == "thinking":
            thinking.append(_opt_str(block, "thinking") or "")
        elif btype == "redacted_thinking":
            thinking.append(REDACTED_THINKING)
        elif btype == "tool_use":
            line.uses.append(_tool_use(block))
    if texts:
        line.text = "\n".join(texts)
    elif thinking:
        line.text = "\n".join(thinking)
        line.native_type = "assistant/thinking"


def _tool_use(block: dict[str, object]) -> _Use:
    call_id = _opt_str(block, "id")
    if not call_id:
        raise BadRecordError("tool_use block has no 'id'")
    name = _opt_str(block, "name")
    tool_input = block.get("input")
    command = None
    if name in SHELL_TOOLS and isinstance(tool_input, dict):
        cmd = tool_input.get("command")
        command = cmd if isinstance(cmd, str) else None
    return _Use(call_id, name, orjson.dumps(tool_input).decode(), command)


def _fill_user(line: _Line, message: dict[str, object], is_meta: bool) -> None:
    content = message.get("content")
    texts: list[str] = [content] if isinstance(content, str) else []
    for block in _blocks(content):
        if block.get("type") == "tool_result":
            call_id = _opt_str(block, "tool_use_id")
            if not call_id:
                raise BadRecordError("tool_result block has no 'tool_use_id'")
            text = _result_text(block.get("content"))
            line.results.append(_Result(call_id, text, bool(_opt(block, "is_error", bool))))
        else:
            text_or_none = _block_text(block)
            if text_or_none is not None:
                texts.append(text_or_none)
    line.text = "\n".join([r.text for r in line.results] + texts)
    if line.results:
        line.role = "tool"
    elif is_meta or _COMMAND_OUTPUT.fullmatch(line.text):
        line.role = "system"
    else:
        line.role = "user"


def _api_error(obj: dict[str, object]) -> str:
    """``API error <status>: <message> (retry n/max)`` of a system api_error line, from
    what it has: the error object comes in several shapes (an HTTP error with a nested
    body, a network ``cause`` with a ``code``) or not at all."""
    err = obj.get("error")
    status = err.get("status") if isinstance(err, dict) else None
    head = f"API error {status}" if isinstance(status, int) else "API error"
    detail = _first_str(err, "message") or _first_str(err, "code")
    text = f"{head}: {detail}" if detail else head
    attempt, most = obj.get("retryAttempt"), obj.get("maxRetries")
    if isinstance(attempt, int):
        text += f" (retry {attempt}/{most})" if isinstance(most, int) else f" (retry {attempt})"
    return text


def _first_str(value: object, key: str, depth: int = 4) -> str | None:
    """The first non-empty string under ``key`` in nested objects (depth first)."""
    if not isinstance(value, dict) or depth == 0:
        return None
    found = value.get(key)
    if isinstance(found, str) and found:
        return found
    for child in value.values():
        inner = _first_str(child, key, depth - 1)
        if inner:
            return inner
    return None


def outcome(text: str, is_error: bool, tool_use_result: object) -> tuple[ToolStatus, int | None]:
    """Status and exit code of a tool result."""
    extra = tool_use_result if isinstance(tool_use_result, dict) else {}
    exit_code = extra.get("exitCode")
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        exit_code = None
    if exit_code is None and is_error:
        match = _EXIT_CODE.match(text)
        exit_code = int(match.group(1)) if match else None
    stripped = text.strip()
    if (
        stripped.startswith(REJECTION_PREFIXES)
        or stripped.startswith(INTERRUPTED_FOR_TOOL)
        or extra.get("interrupted") is True
    ):
        return "aborted", exit_code
    if exit_code is None and not is_error and _exited_cleanly(extra):
        exit_code = 0
    return ("error" if is_error else "completed"), exit_code


_NOT_A_PLAIN_EXIT = ("backgroundTaskId", "returnCodeInterpretation", "exitCode", "shellId")
"""Keys of a result that tell a shell command's exit apart from "it exited 0": sent to the
background (still running), an exit code the tool read as no error (``grep`` finding nothing
exits 1: "No matches found"), or a re-check of a background shell (its own ``exitCode``)."""


def _exited_cleanly(extra: dict[str, Any]) -> bool:
    """A Bash result (``stdout``, ``interrupted``) that is no error: the command exited 0.
    Claude Code makes a command's non-zero exit an error result (``Error: …``), except where
    it names the code's meaning (``returnCodeInterpretation``)."""
    return (
        "stdout" in extra
        and extra.get("interrupted") is False
        and not any(key in extra for key in _NOT_A_PLAIN_EXIT)
    )


# ---------------------------------------------------------------------------
# Session identity
# ---------------------------------------------------------------------------


def _scan_session_native_id(path: Path) -> str | None:
    """The sessionId of the first line that has one (a cheap look at the file's head)."""
    for obj in head_objects(path, _SCAN_LINES):
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid:
            return sid
    return None


def _identity(path: Path, line_session: str | None) -> tuple[str, str | None]:
    """(native_id, parent_session_id) for a session or subagent file."""
    stem = path_text(path.stem)
    if not stem.startswith("agent-"):
        return line_session or stem, None
    parent = line_session
    if parent is None and path.parent.name == "subagents":
        parent = path_text(path.parent.parent.name)
    if not parent:
        return stem, None
    return f"{parent}/{stem}", make_session_id(FORMAT, parent)


def _subagent_title(path: Path) -> str | None:
    """Title from ``agent-<id>.meta.json`` beside a 2.1.x subagent file, if any."""
    meta_path = path.with_name(path.stem + ".meta.json")
    try:
        meta = json.loads(utf8_bytes(meta_path, meta_path.read_bytes()))
    except (OSError, ValueError, SourceError):
        return None
    if not isinstance(meta, dict):
        return None
    parts = [meta.get("agentType"), meta.get("description")]
    title = ": ".join(p for p in parts if isinstance(p, str) and p)
    return title or None


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def _carried_summaries(state: dict[str, Any]) -> dict[str, str]:
    """Summaries still waiting for their leaf line when the stored part of the file ended:
    Claude Code writes them at the top of a file, so a live session's leaf often comes in
    a later append, and the title must not depend on where an ingest happened to stop."""
    carried = state.get("summaries")
    if not isinstance(carried, dict):
        return {}
    return {k: v for k, v in carried.items() if isinstance(k, str) and isinstance(v, str)}


class _Parser:
    def __init__(self, path: Path, ledger: Ledger, resume: Resume | None) -> None:
        self.path = path
        self.ledger = ledger
        state = dict(resume.state) if resume else {}
        native = state.get("native_id")
        if isinstance(native, str):
            parent = state.get("parent_session_id")
            self.native_id, self.parent = native, parent if isinstance(parent, str) else None
        else:
            self.native_id, self.parent = _identity(path, _scan_session_native_id(path))
        self.session_id = make_session_id(FORMAT, self.native_id)
        self.next_idx, self.carried = resume_position(state, resume, self.session_id)
        self.pending: dict[str, _OpenCall] = {}
        self.uuids: set[str] = set()
        self.summaries = _carried_summaries(state)
        self.meta: dict[str, str | None] = {
            key: value if isinstance(value, str) else None
            for key in ("version", "first_version", "cwd", "title", "custom_title", "model")
            for value in [state.get(key)]
        }
        if self.parent and not self.meta["title"]:
            self.meta["title"] = _subagent_title(path)

    def session(self) -> Session:
        first_version = self.meta["first_version"]
        return Session(
            session_id=self.session_id,
            source_format=FORMAT,
            native_id=self.native_id,
            source_path=str(self.path),
            title=self.meta["custom_title"] or self.meta["title"],
            agent=f"claude-code {first_version}" if first_version else None,
            model=self.meta["model"],
            cwd=self.meta["cwd"],
            parent_session_id=self.parent,
        )

    def feed(self, line: JsonLine) -> list[ParsedItem]:
        """The records of one line (a list: cheaper than a generator per line)."""
        obj = line.value
        assert isinstance(obj, dict)
        rtype = obj.get("type")
        if not isinstance(rtype, str):
            return [self._quarantine(line, "record has no string 'type' field")]
        try:
            if rtype in MESSAGE_TYPES:
                extracted = _extract(obj)
            elif rtype != "attachment" or (queued := _queued_prompt(obj)) is None:
                return [self._raw(line, obj, rtype)]
            else:
                extracted = queued
        except (BadRecordError, TypeError, ValueError) as exc:
            return [self._quarantine(line, one_line(exc))]
        self.ledger.stored()
        self._note_envelope(obj, extracted)
        return self._emit(extracted, obj, line)

    def _quarantine(self, line: JsonLine, reason: str) -> Quarantined:
        return quarantine(self.ledger, line, reason)

    def _raw(self, line: JsonLine, obj: dict[str, object], rtype: str) -> RawRecord:
        if rtype == "summary":
            self._note_summary(obj)
        elif rtype == "ai-title" and isinstance(obj.get("aiTitle"), str):
            self.meta["title"] = str(obj["aiTitle"]) or self.meta["title"]
        elif rtype == "custom-title" and isinstance(obj.get("customTitle"), str):
            # the user's /rename: generated titles (ai-title, summary) do not replace it
            self.meta["custom_title"] = str(obj["customTitle"]) or self.meta["custom_title"]
        known = rtype in KNOWN_TYPES
        if not known:
            self.ledger.unknown(rtype)
        self.ledger.stored()
        return trusted(
            RawRecord,
            {
                "session_id": self.session_id,
                "location": line.location,
                "record_type": rtype,
                "known": known,
                "ts": parse_ts(obj.get("timestamp")),
                "raw": decode_raw(line.raw),
            },
            _FIELDS[RawRecord],
        )

    def _note_summary(self, obj: dict[str, object]) -> None:
        """A summary titles this session only when its leaf is one of this file's lines
        (resumed sessions start with summaries of the sessions they came from)."""
        summary, leaf = obj.get("summary"), obj.get("leafUuid")
        if not isinstance(summary, str) or not summary or not isinstance(leaf, str):
            return
        if leaf in self.uuids:
            self.meta["title"] = summary
        else:
            self.summaries[leaf] = summary

    def _note_envelope(self, obj: dict[str, object], line: _Line) -> None:
        meta = self.meta
        if line.uuid:
            self.uuids.add(line.uuid)
            if self.summaries and line.uuid in self.summaries:
                meta["title"] = self.summaries.pop(line.uuid)
        version = obj.get("version")
        if isinstance(version, str) and version:
            meta["version"] = version
            if not meta["first_version"]:
                meta["first_version"] = version
        if not meta["cwd"]:
            cwd = obj.get("cwd")
            if isinstance(cwd, str) and cwd:
                meta["cwd"] = cwd
        if line.model and not meta["model"] and line.model != "<synthetic>":
            meta["model"] = line.model

    def _emit(self, line: _Line, obj: dict[str, object], where: JsonLine) -> list[ParsedItem]:
        idx = self.next_idx
        self.next_idx += 1
        ts = parse_ts(obj.get("timestamp"))
        items: list[ParsedItem] = [
            trusted(
                Message,
                {
                    "session_id": self.session_id,
                    "msg_idx": idx,
                    "source_id": line.uuid or f"L{where.line_no}",
                    "parent_source_id": line.parent,
                    "role": line.role,
                    "ts": ts,
                    "text": line.text,
                    "is_sidechain": line.is_sidechain,
                    "is_compaction_summary": line.is_compaction_summary,
                    "error": line.error,
                    "native_type": line.native_type,
                    "model": line.model,
                    "location": where.location,
                },
                _FIELDS[Message],
            )
        ]
        for use in line.uses:
            earlier = self.pending.get(use.call_id)
            if earlier is not None:  # an id used again before its result came: keep both
                items.append(ToolCall(**earlier.fields(self.session_id)))
            self.pending[use.call_id] = _OpenCall(use, idx, ts)
        for result in line.results:
            status, exit_code = outcome(result.text, result.is_error, line.tool_use_result)
            call = self.pending.pop(result.call_id, None)
            if call is not None:
                items.append(
                    trusted(
                        ToolCall,
                        {
                            "session_id": self.session_id,
                            "msg_idx": call.msg_idx,
                            "call_id": call.use.call_id,
                            "tool": call.use.tool,
                            "command": call.use.command,
                            "input": call.use.input,
                            "output": result.text,
                            "status": status,
                            "exit_code": exit_code,
                            "started_at": call.started_at,
                            "ended_at": ts,
                            "result_msg_idx": idx,
                        },
                        _FIELDS[ToolCall],
                    )
                )
            elif self.carried.pop(result.call_id, None) is not None:
                items.append(
                    ToolResult(
                        session_id=self.session_id,
                        call_id=result.call_id,
                        output=result.text,
                        status=status,
                        exit_code=exit_code,
                        ended_at=ts,
                        result_msg_idx=idx,
                    )
                )
        return items

    def finish(self) -> Iterator[ParsedItem]:
        for call in self.pending.values():
            yield ToolCall(**call.fields(self.session_id))
        open_calls = dict(self.carried)
        open_calls.update({cid: call.msg_idx for cid, call in self.pending.items()})
        self.ledger.format_version = self.meta["version"]
        self.ledger.state = {
            "native_id": self.native_id,
            "parent_session_id": self.parent,
            "next_msg_idx": self.next_idx,
            "pending": open_calls,
            "summaries": self.summaries,
            **self.meta,
        }
        yield self.session()


def parse(path: Path, ledger: Ledger, resume: Resume | None = None) -> Iterator[ParsedItem]:
    """Yield the session, its messages, tool calls and raw records of one file."""
    parser = _Parser(path, ledger, resume)
    yield parser.session()
    yield from parse_lines(path, ledger, resume, parser.feed)
    yield from parser.finish()
