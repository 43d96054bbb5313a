"""Which format a file is in, and which units a folder holds.

Detection reads content, never names: the first 64 KB of a file go to each
format module's ``sniff`` in a fixed order (opencode, claude_code, codex,
transcript_text), as UTF-8 without a byte order mark (a UTF-16 head transcoded, see
``encoding.py``). Format modules are imported lazily, on first use.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType

from analytics.errors import SourceError, UnknownFormatError, UsageError
from analytics.formats import FORMATS
from analytics.sources.compressed import (
    DECOMPRESS_ERRORS,
    compression,
    not_read,
    plain_head,
    unreadable,
)
from analytics.sources.encoding import NO_BOM, utf8_head, utf16_without_bom
from analytics.sources.homes import Home, home_above, layout_of

HEAD_BYTES = 64 * 1024
MODULES: dict[str, str] = {
    "opencode": "analytics.sources.opencode",
    "claude_code": "analytics.sources.claude_code",
    "codex": "analytics.sources.codex",
    "transcript_text": "analytics.sources.transcript_text",
}
"""Format name -> module, in detection order (most specific first)."""

SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
SKIP_FILES = (
    ".git", "*.meta.json", "*.duckdb", "*.duckdb.*", "*.wal", "*-wal", "*-shm", "*-journal",
    ".DS_Store", "._*", "Thumbs.db", "desktop.ini",
)
"""Never ingest units: the ``.git`` file of a git worktree or submodule (a pointer to its
git directory), Claude Code subagent sidecars (read by the claude_code parser),
DuckDB files, SQLite/DuckDB side files, and what file managers leave in every folder they
show (macOS Finder's ``.DS_Store`` and AppleDouble ``._*`` files, Windows' ``Thumbs.db``
and ``desktop.ini``)."""
SESSION_SIDE_DIRS = frozenset({"tool-results", "session-memory"})
"""Folders Claude Code keeps beside a session in ``<project>/<session id>/`` (next to
``subagents/``): large tool outputs as ``tool-results/<tool use id>.txt`` (the session's
JSONL holds the output too) and ``session-memory/`` notes. Not sessions; skipped there only."""
_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def get_module(fmt: str) -> ModuleType:
    """The parser module of ``fmt``; :class:`UsageError` listing the formats for a bad name."""
    if fmt not in MODULES:
        raise UsageError(f"unknown format {fmt!r}; choose one of: {', '.join(MODULES)}")
    try:
        return importlib.import_module(MODULES[fmt])
    except ImportError as exc:
        raise UsageError(f"format {fmt!r} is not available in this install: {exc}") from exc


def available_modules() -> Iterator[tuple[str, ModuleType]]:
    """The format modules that import, in detection order, each imported when reached:
    detection stops at the first that claims a file, so the later ones are not imported."""
    for fmt in MODULES:
        try:
            yield fmt, get_module(fmt)
        except UsageError:
            continue


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    with path.open("rb") as fh:
        return fh.read(size)


def detect_format(path: Path) -> str:
    """The format of a file or folder, from its content.

    Raises :class:`UnknownFormatError` (naming the file, listing the formats and saying
    what the content looks like) or :class:`SourceError` when it cannot be read."""
    if not path.exists():
        raise SourceError(str(path), _missing(path))
    special = special_kind(path)
    if special is not None:
        raise SourceError(
            str(path), f"not a regular file but {special}, which is not read (it could block "
            "until something writes to it); save what it carries to a file and ingest that"
        )
    if path.is_dir():
        opencode = get_module("opencode")
        if opencode.sniff(path, b""):
            return "opencode"
        raise UnknownFormatError(
            str(path), list(FORMATS), "a folder that is not an opencode storage folder"
        )
    try:
        head = read_head(path)
    except OSError as exc:
        raise SourceError(str(path), f"cannot read: {exc}") from exc
    kind = compression(head)
    if kind is not None:  # (detected by what it holds: see compressed.py)
        try:
            head = plain_head(path, kind, HEAD_BYTES)
        except DECOMPRESS_ERRORS as exc:
            raise SourceError(str(path), unreadable(kind, path.name, exc)) from exc
    text = utf8_head(head)  # (UTF-16 transcoded, a byte order mark dropped: as the parsers do)
    for fmt, module in available_modules():
        if _sniff(module, path, text):
            return fmt
    if utf16_without_bom(head):
        raise SourceError(str(path), NO_BOM)
    what = describe(path, text)
    raise UnknownFormatError(
        str(path), list(FORMATS), what if kind is None else f"a {kind}-compressed file: {what}"
    )


_SPECIAL = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def special_kind(path: Path) -> str | None:
    """What ``path`` is when it is neither a file nor a folder (a named pipe, a socket, a
    device: opening one to read may wait forever), else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return next((what for test, what in _SPECIAL if test(mode)), None)


def _missing(path: Path) -> str:
    """Why ``path`` cannot be found: a symbolic link listed in a folder exists as a name,
    so "no such file" would be wrong about it."""
    if not path.is_symlink():
        return "no such file or folder"
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that loops back on itself; remove it or point it at a file"
    return f"a symbolic link to {os.readlink(path)}, which does not exist"


def _sniff(module: ModuleType, path: Path, head: bytes) -> bool:
    # A sniff that trips over odd bytes means "not mine", not a failed ingest.
    try:
        return bool(module.sniff(path, head))
    except Exception:  # noqa: BLE001
        return False


Known = Callable[[Path], str | None]
"""A file's format when the caller knows it without reading the file (None: detect it)."""

Passed = Callable[[Path, str, str], None]
"""Told of each entry of an agent's home that is not read: (the home, the agent, the entry
under the home as ``todos/`` or ``history.jsonl``)."""


def iter_inputs(
    paths: list[Path], known: Known | None = None, passed: Passed | None = None
) -> Iterator[tuple[Path, str | None]]:
    """Units to ingest under ``paths`` with their format (None: unknown or unreadable;
    ``detect_format(unit)`` raises the error to report). A file's format that ``known``
    gives stands for its detection (e.g. a file stored before and unchanged since: its
    content is what was detected then). Which units: see :func:`iter_unit_paths`."""
    for unit in iter_unit_paths(paths, passed):
        # (a folder unit is an opencode storage folder, the only folder the walk yields)
        yield unit, "opencode" if unit.is_dir() else _format_of(unit, known)


def iter_unit_paths(paths: list[Path], passed: Passed | None = None) -> Iterator[Path]:
    """The units under ``paths``, without reading them: each path that is not a folder
    (as given), and what a walk of each folder finds.

    A unit is a file, an opencode storage folder (one unit, never entered) or an
    ``opencode.db``. Folders are walked recursively in sorted order; VCS folders (and a
    git worktree's ``.git`` file), git directories without a work tree (opencode's
    snapshots), ``*.meta.json`` sidecars, database side files, file-manager litter and
    Claude Code's side folders of a session (``SKIP_FILES``, ``SESSION_SIDE_DIRS``) are
    skipped. A ``storage/`` folder next to an opencode database is skipped too: opencode
    1.2+ migrated its content into the database, so reading both would count every session
    twice. In an agent's home folder (``~/.claude``, ``~/.codex``, ``~/.local/share/opencode``:
    see ``homes.py``), walked or above the folder given, the agent's own entries (settings,
    history, logs, snapshots…) are not read; ``passed`` is told of each. Named pipes,
    sockets and devices in a folder are not units (reading one may wait forever); given as
    a path, one is reported (``detect_format``)."""
    for path in paths:
        if path.is_dir():
            yield from _walk(path, passed)
        else:
            yield path


def _walk(top: Path, passed: Passed | None) -> Iterator[Path]:
    if _is_storage(top):
        yield top
        return
    homes: dict[Path, Home | None] = {top: home_above(top)}  # folder -> the home it is in
    for folder, dirnames, filenames in os.walk(top):
        here = Path(folder)
        home = homes.pop(here, None)
        if _is_git_dir(dirnames, filenames):
            dirnames[:] = []
            continue
        layout = layout_of({*dirnames, *filenames})
        if layout is not None:
            home = Home(here, layout)
        storage, dirnames[:] = _subfolders(here, dirnames, filenames, home, passed)
        for name in dirnames:
            homes[here / name] = home.below(name) if home is not None else None
        yield from storage
        for name in sorted(filenames):
            if any(fnmatch(name, pattern) for pattern in SKIP_FILES):
                continue
            if special_kind(here / name) is not None:
                continue  # a pipe, a socket or a device in the folder: not a file of records
            if home is None or not _passes(home, name, False, passed):
                yield here / name


def _subfolders(
    here: Path, dirnames: list[str], filenames: list[str], home: Home | None,
    passed: Passed | None,
) -> tuple[list[Path], list[str]]:
    """The opencode storage folders (units) among the folders of ``here``, and the folders
    to walk into."""
    storage: list[Path] = []
    kept: list[str] = []
    for name in sorted(dirnames):
        if name in SKIP_DIRS or _session_side_dir(here, name):
            continue
        if home is not None and _passes(home, name, True, passed):
            continue
        if _is_storage(here / name):
            # opencode >= 1.2 migrated storage/ into opencode.db: read only the db then.
            if not _has_opencode_db(here, filenames):
                storage.append(here / name)
            continue
        kept.append(name)
    return storage, kept


def _passes(home: Home, name: str, folder: bool, passed: Passed | None) -> bool:
    """The entry ``name`` of a folder under ``home`` is the agent's own: not read."""
    if not home.owns(name):
        return False
    if passed is not None:
        passed(home.path, home.layout.agent, home.shown(name, folder))
    return True


def _is_git_dir(dirnames: list[str], filenames: list[str]) -> bool:
    """A folder with git's ``HEAD``, ``objects/`` and ``refs/`` is a git directory (as git
    tells one): a ``.git`` folder, or one without a work tree such as opencode's snapshot
    of each project (``snapshot/<project>/<worktree hash>/``). Its files are git objects,
    never transcripts."""
    return "HEAD" in filenames and "objects" in dirnames and "refs" in dirnames


def _session_side_dir(folder: Path, name: str) -> bool:
    """``folder/name`` is one of Claude Code's side folders of a session (its folder is
    named by the session's id, whether or not the session file is still there)."""
    return name in SESSION_SIDE_DIRS and _SESSION_ID.fullmatch(folder.name) is not None


def _is_storage(path: Path) -> bool:
    """``path`` itself is an opencode storage folder."""
    from analytics.sources.opencode import storage_root

    return storage_root(path) == path


def _has_opencode_db(folder: Path, filenames: list[str]) -> bool:
    from analytics.sources.opencode import is_opencode_db

    return any(
        fnmatch(name, "opencode*.db") and is_opencode_db(folder / name) for name in filenames
    )


def _format_of(path: Path, known: Known | None) -> str | None:
    fmt = known(path) if known is not None else None
    return fmt if fmt is not None else _detect_or_none(path)


def _detect_or_none(path: Path) -> str | None:
    try:
        return detect_format(path)
    except (UnknownFormatError, SourceError):
        return None


def describe(path: Path, head: bytes) -> str:
    """What an unsupported file looks like, for the error message."""
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not stripped:
        return "empty file"
    if head.startswith(b"PK\x03\x04"):
        if path.suffix == ".eval" or b"header.json" in head or b"_journal/" in head:
            return "a ZIP archive like an Inspect AI .eval log, which is not supported"
        return "a ZIP archive"
    if head.startswith(b"SQLite format 3\x00"):
        return "an SQLite database without opencode's session/message/part tables"
    compressed = not_read(head, path.name)
    if compressed is not None:
        return compressed
    if b"\x00" in head:
        return "a binary file"
    if stripped[:1] in (b"{", b"["):
        return _describe_json(stripped)
    return "no message header like '[msg 1] user:' and no known JSON records in the first 64 KB"


def _describe_json(head: bytes) -> str:
    if b'"trajectory"' in head and (b'"history"' in head or b'"action"' in head):
        return "looks like a SWE-agent trajectory (.traj), which is not supported"
    if (
        head.startswith(b"[")
        and b'"source"' in head
        and (b'"action"' in head or b'"observation"' in head)
    ):
        return "looks like an OpenHands event trajectory, which is not supported"
    if b'"eval"' in head and (b'"samples"' in head or b'"plan"' in head or b'"results"' in head):
        return "looks like an Inspect AI log, which is not supported"
    return _describe_history(_first_line(head)) or "JSON of an unknown shape"


def _first_line(head: bytes) -> dict[str, object]:
    """The first line of ``head`` as a JSON object ({} when it is none)."""
    try:
        obj = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _describe_history(line: dict[str, object]) -> str | None:
    """An agent's prompt history (``history.jsonl`` in its home): one line per prompt typed,
    no answers, so no session. Claude Code writes ``{display, pastedContents, timestamp,
    project}``; Codex ``{session_id, ts, text}`` (codex-rs message_history)."""
    if {"display", "timestamp"} <= line.keys() and "type" not in line:
        return ("looks like Claude Code's prompt history (history.jsonl), not a session: "
                "its sessions are in projects/ beside it")
    if {"session_id", "ts", "text"} <= line.keys():
        return ("looks like Codex's prompt history (history.jsonl), not a session: "
                "its sessions are in sessions/ beside it")
    return None
