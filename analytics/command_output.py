"""What a command printed, apart from the header an agent wrote before it.

Codex stores a shell command's output behind a header (``formats.CODEX_EXEC_HEADER``): a chunk
id, the wall time, the exit code (or the session a still running process is in), a token count,
then ``Output:``. The stored output keeps the header; whoever reads what the command printed —
the Codex parser for the exit code, the tagger, polling loops, the tooling extractor, campaigns,
readiness, the report — reads it through :func:`command_output`, which gives the header's facts
as facts and the rest as the text, with its offset in the stored output (evidence offsets stay
offsets into what is stored). Outputs of other agents have no such header: their text is all
output, and reading it costs a ``startswith``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analytics.formats import CODEX_EXEC_HEADER

_HEADER = re.compile(CODEX_EXEC_HEADER)
_FIRST_LINES = ("Chunk ID: ", "Exit code: ", "Wall time: ")
"""How a header starts: a text starting otherwise has none (the regex is not tried)."""


@dataclass(slots=True)
class CommandOutput:
    """A stored tool output split into the header's facts and what the command printed.
    (Not frozen: one is built for each output read, and a frozen one costs three times as
    much to build.)"""

    text: str
    """What the command printed (the whole output when there is no header)."""
    start: int = 0
    """Where ``text`` starts in the stored output: add it to an offset into ``text``."""
    exit_code: int | None = None
    """The exit code the header states (None: no header, or the process is still running)."""
    wall_time_s: float | None = None
    """How long the command ran until the output was taken, in seconds, as the header says."""
    session_id: str | None = None
    """The exec session a process still running is in (``Process running with session ID``)."""


def command_output(output: str | None) -> CommandOutput:
    """``output`` as what the command printed and the facts of the header before it, if any."""
    if not output:
        return CommandOutput("")
    if not output.startswith(_FIRST_LINES):
        return CommandOutput(output)
    m = _HEADER.match(output)
    if m is None:
        return CommandOutput(output)
    exit_code, wall = m.group("exit_code") or m.group("exited"), m.group("wall_time")
    return CommandOutput(
        text=output[m.end() :],
        start=m.end(),
        exit_code=int(exit_code) if exit_code is not None else None,
        wall_time_s=float(wall) if wall is not None else None,
        session_id=m.group("session_id"),
    )


def exec_session_of(arguments: object) -> str | None:
    """The exec session a Codex ``write_stdin`` call's arguments (a parsed JSON object) name
    in ``session_id`` (a number or text, as written), or None: the session whose process
    the call writes to or, with no ``chars``, polls."""
    session = arguments.get("session_id") if isinstance(arguments, dict) else None
    if isinstance(session, bool) or not isinstance(session, int | str) or session == "":
        return None
    return str(session)
