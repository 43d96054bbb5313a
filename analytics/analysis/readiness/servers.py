"""Which server a claim or a check is about: the ports commands and claims name, and the
words of a launched server's model."""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from analytics.analysis.readiness.config import config

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
