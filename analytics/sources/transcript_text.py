"""Plain-text transcripts: one message per header line, tool calls as ``[tool] ...`` lines.

Layout (CONTRACT.md "Input formats")::

    [msg 12478] assistant: Waiting for the server.
    [bash] for i in $(seq 1 16); do
      sleep 25
    done
    <output of the command ...>
    [msg 12479] user: ok?
    <msg id=6852> user: ready?

- A header is ``[msg N] role:`` or ``<msg id=N> role:`` at the start of a line, role in
  user|assistant|system|tool. Extension: an optional timestamp after the number,
  ``[msg 12 2025-06-01T10:00:00Z] assistant:`` or ``<msg id=12 ts=2025-06-01T10:00:00Z>``
  (ISO 8601; naive times are taken as UTC).
- Inside an assistant message, a line ``[tool] args`` starts a tool call when ``tool``
  is a known agent tool (:data:`TOOLS`) or an MCP-style name with an underscore, so
  log lines such as ``[notice] ...`` or ``[INFO] ...`` in command output are not calls.
  A shell command (``[bash]``/``[shell]``) continues over following lines while it is
  syntactically open: heredoc bodies, trailing ``\\``/``|``/``&&``/``||``, open quotes,
  open ``do…done``/``if…fi``/``case…esac``/``{…}`` blocks and ``(`` parentheses.
  The lines after the command, up to the next tool line or header, are its output.
- Text before the first header is kept as a known ``RawRecord`` of type ``preamble``.
- Records (ledger) = messages, plus the preamble when it is not blank.
- ``APPENDABLE`` is False: the last message of a growing file may still be incomplete,
  so a changed file is re-read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import orjson

from analytics.formats import PARSER_VERSIONS
from analytics.models import (
    Ledger,
    Message,
    ParsedItem,
    RawRecord,
    Resume,
    Role,
    Session,
    ToolCall,
    ToolStatus,
)
from analytics.sources.base import session_id as make_session_id
from analytics.sources.encoding import open_text, path_text

FORMAT = "transcript_text"
APPENDABLE = False
PARSER_VERSION = PARSER_VERSIONS[FORMAT]
"""Bump it (in ``analytics.formats.PARSER_VERSIONS``) when the rows a file gives change."""

SNIFF_BYTES = 64 * 1024
TOOLS = frozenset(
    {
        "bash", "shell", "read", "write", "edit", "multiedit", "patch", "apply_patch", "glob",
        "grep", "list", "ls", "webfetch", "websearch", "codesearch", "todowrite", "todoread",
        "task", "skill", "lsp", "batch", "question", "invalid",
    }
)  # fmt: skip
SHELL_TOOLS = frozenset({"bash", "shell"})
ABORT_MARKERS = (
    "User aborted the command",
    "Tool execution aborted",
    "[Request interrupted by user",
)
MAX_COMMAND_LINES = 2000

_TS = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
HEADER_RE = re.compile(
    rf"""^(?:
        \[msg\s+(?P<n1>\d+)(?:\s+(?P<ts1>{_TS}))?\]
      | <msg\s+id=["']?(?P<n2>\d+)["']?(?:\s+(?:ts|time)=["']?(?P<ts2>{_TS})["']?)?\s*>
    )[ \t]*(?P<role>user|assistant|system|tool)[ \t]*:[ \t]?(?P<rest>.*)$""",
    re.VERBOSE | re.IGNORECASE,
)
TOOL_RE = re.compile(r"^\[(?P<tool>[a-z][a-z0-9_.-]*)\](?:[ \t]+(?P<arg>.*))?$")
EXIT_RE = re.compile(r"\bexit(?:ed)?(?:\s+with)?\s+(?:code|status)\s*[:=]?\s*(-?\d+)", re.I)
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)([A-Za-z_][\w.-]*)\2")
_TOKEN = re.compile(r";;|&&|\|\||[;|&()]|[^\s;|&()]+")
_OPERATORS = frozenset({";", ";;", "&&", "||", "|", "&", "(", ")"})
_OPENERS = frozenset({"if", "case", "do", "{"})
_CLOSERS = frozenset({"fi", "esac", "done", "}"})
_LEADING_KEYWORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "{", "!"})


# ---------------------------------------------------------------------------
# Protocol
# ---------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """A header line within the first 64 KB, in a text file that is not JSON."""
    head = head[:SNIFF_BYTES]
    if b"\x00" in head or head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return False
    text = head.decode("utf-8", errors="replace")
    return any(HEADER_RE.match(line) for line in text.splitlines())


def parse(path: Path, ledger: Ledger, resume: Resume | None = None) -> Iterator[ParsedItem]:
    """Messages of one transcript, streamed line by line; ``resume`` is ignored."""
    native = path_text(path.stem)
    sid = make_session_id(FORMAT, native)
    session = Session(session_id=sid, source_format=FORMAT, native_id=native, source_path=path_text(path))
    yield session
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    title: str | None = None
    msg_idx = 0
    for block in _blocks(path):
        if block.header is None:
            if "".join(block.lines).strip():
                ledger.stored()
                yield RawRecord(
                    session_id=sid,
                    location=f"line {block.line}",
                    record_type="preamble",
                    raw="\n".join(block.lines),
                )
            continue
        message, calls = _message(sid, msg_idx, block)
        ledger.stored()
        msg_idx += 1
        yield message
        yield from calls
        if message.ts is not None:
            first_ts = first_ts or message.ts
            last_ts = message.ts
        if title is None and message.role == "user" and message.text.strip():
            title = message.text.strip().splitlines()[0][:80]
    update = {"title": title, "started_at": first_ts, "ended_at": last_ts}
    if any(v is not None for v in update.values()):
        yield session.model_copy(update=update)


# ---------------------------------------------------------------------------
# Splitting the file into message blocks
# ---------------------------------------------------------------------------


@dataclass
class _Block:
    line: int
    """1-based line number of the header (or of the preamble's first line)."""
    header: re.Match[str] | None
    lines: list[str] = field(default_factory=list)


def _blocks(path: Path) -> Iterator[_Block]:
    block = _Block(line=1, header=None)
    with open_text(path) as fh:
        for number, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            match = HEADER_RE.match(line)
            if match is None:
                block.lines.append(line)
                continue
            yield block
            block = _Block(line=number, header=match, lines=[match["rest"]])
    yield block


# ---------------------------------------------------------------------------
# One message: prose and tool calls
# ---------------------------------------------------------------------------


@dataclass
class _Call:
    tool: str
    arg: str
    shell: _ShellCommand | None
    output: list[str] = field(default_factory=list)

    def takes(self, line: str) -> bool:
        """Whether ``line`` continues this call's shell command."""
        shell = self.shell
        if shell is None:
            return False
        if shell.in_heredoc:
            return True
        if shell.complete() and not shell.resumes_after_heredoc(line):
            return False
        return _tool_line(line) is None


def _message(sid: str, msg_idx: int, block: _Block) -> tuple[Message, list[ToolCall]]:
    assert block.header is not None
    header = block.header
    source_id = header["n1"] or header["n2"]
    role = cast(Role, header["role"].lower())
    if role == "assistant":
        prose, calls = _split(block.lines)
    else:
        prose, calls = block.lines, []
    message = Message(
        session_id=sid,
        msg_idx=msg_idx,
        source_id=source_id,
        role=role,
        ts=_timestamp(header["ts1"] or header["ts2"]),
        text=_join(prose) or "",
        native_type=role,
        location=f"line {block.line}",
    )
    tool_calls = [
        _tool_call(sid, msg_idx, f"{source_id}:{k}", call) for k, call in enumerate(calls)
    ]
    return message, tool_calls


def _split(lines: list[str]) -> tuple[list[str], list[_Call]]:
    prose: list[str] = []
    calls: list[_Call] = []
    current: _Call | None = None
    for line in lines:
        if current is not None and current.takes(line):
            assert current.shell is not None
            current.shell.feed(line)
            continue
        started = _tool_line(line)
        if started is not None:
            current = started
            calls.append(current)
        elif current is not None:
            current.output.append(line)
        else:
            prose.append(line)
    return prose, calls


def _tool_line(line: str) -> _Call | None:
    match = TOOL_RE.match(line)
    if match is None:
        return None
    tool = match["tool"]
    if tool not in TOOLS and "_" not in tool:
        return None
    arg = match["arg"] or ""
    shell = _ShellCommand(arg) if tool in SHELL_TOOLS else None
    return _Call(tool=tool, arg=arg, shell=shell)


def _tool_call(sid: str, msg_idx: int, call_id: str, call: _Call) -> ToolCall:
    output = _join(call.output)
    command = call.shell.text() if call.shell is not None else None
    exit_code = _exit_code(output)
    status: ToolStatus = "completed"
    if output and any(marker in output for marker in ABORT_MARKERS):
        status = "aborted"
    elif exit_code:
        status = "error"
    args = {"command": command} if command is not None else {"args": call.arg}
    return ToolCall(
        session_id=sid,
        msg_idx=msg_idx,
        call_id=call_id,
        tool=call.tool,
        command=command,
        input=orjson.dumps(args).decode(),
        output=output,
        status=status,
        exit_code=exit_code,
        result_msg_idx=msg_idx,
    )


def _exit_code(output: str | None) -> int | None:
    if not output:
        return None
    matches = EXIT_RE.findall(output)
    return int(matches[-1]) if matches else None


def _join(lines: list[str]) -> str | None:
    """Lines joined, without leading and trailing blank lines; None when nothing is left."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end]) if end > start else None


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


# ---------------------------------------------------------------------------
# Where a multi-line shell command ends
# ---------------------------------------------------------------------------


class _ShellCommand:
    """Accumulates command lines and tells whether the command is still open.

    A light lexer, not a shell parser: it tracks quotes, comments, heredocs,
    compound-command keywords at command position, parentheses and trailing
    continuation operators. Good enough to split a command from its output."""

    def __init__(self, first_line: str) -> None:
        self.lines: list[str] = []
        self.quote: str | None = None
        self.depth = 0
        self.parens = 0
        self.heredocs: list[tuple[str, bool]] = []
        self.continued = False
        self.heredoc_closed = False
        self.has_code = False
        self.feed(first_line)

    @property
    def in_heredoc(self) -> bool:
        return bool(self.heredocs)

    def resumes_after_heredoc(self, line: str) -> bool:
        """Right after a heredoc's terminator, a line ending in ``\\``/``&&``/``||``/``|``
        is more command (``EOF`` then ``chmod +x f && \\``), not output."""
        return self.heredoc_closed and (
            _odd_trailing_backslash(line) or line.rstrip().endswith(("|", "&&", "||"))
        )

    def text(self) -> str:
        return "\n".join(self.lines).strip("\n")

    def complete(self) -> bool:
        if len(self.lines) >= MAX_COMMAND_LINES:
            return True
        if not self.has_code:
            return False
        return not (
            self.heredocs or self.quote or self.continued or self.depth > 0 or self.parens > 0
        )

    def feed(self, line: str) -> None:
        self.lines.append(line)
        self.heredoc_closed = False
        self.has_code = self.has_code or bool(line.strip())
        if self.heredocs:
            terminator, strip_tabs = self.heredocs[0]
            candidate = line.lstrip("\t") if strip_tabs else line
            if candidate.strip() == terminator:
                self.heredocs.pop(0)
                self.heredoc_closed = not self.heredocs
            return
        code = self._scan(line)
        if self.quote is None:
            self.heredocs.extend((name, dash == "-") for dash, _, name in _HEREDOC.findall(line))
        self._count_blocks(code)
        stripped = code.rstrip()
        self.continued = self.quote is None and (
            _odd_trailing_backslash(line) or stripped.endswith(("|", "&&", "||"))
        )

    def _scan(self, line: str) -> str:
        """The line's code outside quotes and comments; updates the open-quote state."""
        out: list[str] = []
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if self.quote == "'":
                if ch == "'":
                    self.quote = None
                i += 1
                continue
            if self.quote == '"':
                if ch == "\\":
                    i += 2
                    continue
                if ch == '"':
                    self.quote = None
                i += 1
                continue
            if ch == "\\":
                out.append(" ")
                i += 2
                continue
            if ch in "'\"":
                self.quote = ch
                out.append(" q ")
            elif ch == "#" and (i == 0 or line[i - 1] in " \t;&|("):
                break
            else:
                out.append(ch)
            i += 1
        return "".join(out)

    def _count_blocks(self, code: str) -> None:
        command_position = True
        for token in _TOKEN.findall(code):
            if token in _OPERATORS:
                if token == "(":
                    self.parens += 1
                elif token == ")":
                    self.parens = max(0, self.parens - 1)
                command_position = True
                continue
            if command_position and token in _OPENERS:
                self.depth += 1
            elif command_position and token in _CLOSERS:
                self.depth = max(0, self.depth - 1)
            command_position = token in _LEADING_KEYWORDS or token in _CLOSERS


def _odd_trailing_backslash(line: str) -> bool:
    stripped = line.rstrip(" \t")
    count = len(stripped) - len(stripped.rstrip("\\"))
    return count % 2 == 1
