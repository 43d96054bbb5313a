"""What the fresh-session tagging tests build: one message in its context, and its tags."""

from __future__ import annotations

from analytics.analysis.tagging import Tagger
from analytics.models import Message, MessageContext, ToolCall

SID = "test:fresh"


def context(role: str, text: str = "", calls: tuple[ToolCall, ...] = ()) -> MessageContext:
    """Message 0 of a session, written by ``role``, with ``calls`` made and answered in it."""
    m = Message(session_id=SID, msg_idx=0, source_id="0", role=role, text=text)  # type: ignore[arg-type]
    return MessageContext(message=m, calls=list(calls), results=list(calls))


def tag_names(tagger: Tagger, c: MessageContext) -> set[str]:
    """The tags ``tagger`` gives the message of ``c``."""
    return {t.tag for t in tagger.tag([c])}


def bash_call(command: str, output: str, exit_code: int | None, tool: str = "bash") -> ToolCall:
    """A completed shell call of message 0 with its output and exit code."""
    return ToolCall(session_id=SID, msg_idx=0, call_id="c0", tool=tool, command=command,
                    output=output, status="completed", exit_code=exit_code, result_msg_idx=0)
