"""Agents' home folders (``~/.claude``, ``~/.codex``, ``~/.local/share/opencode``).

A user's first ingest is often an agent's whole home rather than its sessions folder. Beside
the sessions, a home holds the agent's own files: settings, credentials, prompt history,
logs, caches, shell snapshots, copies of the files it edited, opencode's git snapshots. None
is a transcript, and some hold copies of what the agent worked on (which may read as one).
``data/agent_homes_v1.json`` says, per agent, where the sessions are, which names mark its
home and which of its entries are its own (with the sources); :mod:`.detect` walks a home
without reading those.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import filter as filter_names
from fnmatch import fnmatch
from functools import cache
from importlib import resources
from pathlib import Path

MARKS_NEEDED = 2
"""Marks a home holds beside its sessions. A real home has several (Claude Code's
``history.jsonl``, ``statsig/``, ``todos/``…; Codex's ``auth.json``, ``history.jsonl``,
``version.json``…); one name such as ``config.toml`` beside a ``sessions/`` folder is not
enough to take a user's own folder for Codex's home."""


@dataclass(frozen=True)
class Layout:
    """One agent's home folder, from ``data/agent_homes_v1.json``."""

    agent: str
    """The agent's name, as the user knows it ("Claude Code")."""
    sessions: tuple[str, ...]
    """Name patterns of the entries that hold its sessions (walked as any folder)."""
    marks: tuple[str, ...]
    """Name patterns of entries this agent keeps in its home (``MARKS_NEEDED`` of them
    beside a sessions entry make a folder its home)."""
    own: tuple[tuple[str, ...], ...]
    """Its other entries, as patterns of their path parts under the home (never read)."""
    home: tuple[str, str, str]
    """Where the agent keeps its home: (environment variable, the folder below it or "",
    the default when the variable is not set)."""
    one_store: bool = False
    """Only the first ``sessions`` entry present holds sessions (see ``installed_stores``)."""

    def home_dir(self) -> Path:
        """The agent's home on this machine (it may not exist)."""
        env, below, default = self.home
        base = os.environ.get(env)
        if not base:
            return Path(default).expanduser()
        return Path(base) / below if below else Path(base)

    def stores(self) -> list[Path]:
        """Its sessions entries present in its home, in the data file's order (the first
        one found only, for ``one_store``)."""
        home, found = self.home_dir(), []
        for pattern in self.sessions:
            matches = sorted(home.glob(pattern))
            if matches and self.one_store:
                return matches
            found += matches
        return found

    def holds(self, names: Collection[str]) -> bool:
        """A folder whose entries are ``names`` is this agent's home."""
        if not any(_present(names, pattern) for pattern in self.sessions):
            return False
        return sum(_present(names, pattern) for pattern in self.marks) >= MARKS_NEEDED

    def owns(self, parts: tuple[str, ...]) -> bool:
        """The entry at ``parts`` under the home is one of the agent's own."""
        return any(
            len(pattern) == len(parts) and all(map(fnmatch, parts, pattern))
            for pattern in self.own
        )


@dataclass(frozen=True)
class Home:
    """A recognised home and where a folder under it lies."""

    path: Path
    layout: Layout
    parts: tuple[str, ...] = ()
    """The folder's path parts under the home (empty: the home itself)."""

    def below(self, name: str) -> Home:
        return Home(self.path, self.layout, (*self.parts, name))

    def owns(self, name: str) -> bool:
        """The entry ``name`` of the folder is one of the agent's own."""
        return self.layout.owns((*self.parts, name))

    def shown(self, name: str, folder: bool) -> str:
        """The entry ``name`` of the folder as the user would write it under the home."""
        return "/".join((*self.parts, name)) + ("/" if folder else "")


def _present(names: Collection[str], pattern: str) -> bool:
    """A name of ``names`` (a set, for a folder of many sessions) matches ``pattern``."""
    if not any(char in pattern for char in "*?["):
        return pattern in names
    return bool(filter_names(names, pattern))


@cache
def layouts() -> tuple[Layout, ...]:
    """The agents' home layouts, in the data file's order."""
    path = resources.files(__package__).joinpath("data", "agent_homes_v1.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return tuple(
        Layout(
            agent=entry["agent"],
            sessions=tuple(entry["sessions"]),
            marks=tuple(entry["marks"]),
            own=tuple(tuple(pattern.split("/")) for pattern in entry["own"]),
            home=(entry["home"]["env"], entry["home"].get("below", ""), entry["home"]["default"]),
            one_store=bool(entry.get("one_store", False)),
        )
        for entry in raw["agents"]
    )


def installed_stores() -> list[Path]:
    """The session stores of the agents installed on this machine (``ingest --discover``):
    Claude Code's ``projects/`` (in ``$CLAUDE_CONFIG_DIR``, default ``~/.claude``), Codex's
    ``sessions/`` and ``archived_sessions/`` (in ``$CODEX_HOME``, default ``~/.codex``;
    ``/archive`` moves a session there), opencode's ``opencode.db`` (1.2+), else the databases
    of another release channel (``opencode-<channel>.db``), else its ``storage/`` folder, never
    a database and the storage beside it (1.2 migrated the tree into the database and left it
    in place, so reading both would store every older session twice)."""
    return [store for layout in layouts() for store in layout.stores()]


def where_stores_are() -> str:
    """Where ``installed_stores`` looks, for a message."""
    return "; ".join(
        f"{layout.agent}: {', '.join(layout.sessions)} in {layout.home_dir()}" for layout in layouts()
    )


def layout_of(names: Collection[str]) -> Layout | None:
    """The agent whose home holds the entries ``names``, if any."""
    return next((layout for layout in layouts() if layout.holds(names)), None)


def home_above(folder: Path) -> Home | None:
    """The nearest home above ``folder`` (e.g. ``~/.claude`` for ``~/.claude/projects``),
    with where ``folder`` lies under it; None when no folder above it is a home."""
    absolute = Path(os.path.abspath(folder))
    for depth, above in enumerate(absolute.parents, start=1):
        try:
            names = set(os.listdir(above))
        except OSError:
            continue
        layout = layout_of(names)
        if layout is not None:
            return Home(above, layout, absolute.parts[-depth:])
    return None
