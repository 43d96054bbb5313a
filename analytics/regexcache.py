"""Large regular expressions compiled once per machine, not once per process.

The prose prefilters (``tagging.triggers``) are character tries of a few hundred kilobytes
of pattern text; CPython's ``re`` parses and assembles them in Python, which costs about
half a second in every process that tags (a ``transcripts ingest`` of one small file, and
the tagging worker before its first chunk). What that work produces, the pattern's code (a
list of integers) and its groups, is the same every time for the same pattern, flags and
Python, so it is kept in a file and handed straight to the regex engine the next time.

The cache is a speed-up only: a key names the pattern, the flags, the Python version and
the engine's version, and anything that goes wrong (no cache folder, a file unreadable,
corrupt or of another layout, a Python without the internals read here) compiles the
pattern as ``re.compile`` does. The engine validates the code it is handed. Texts derived
from such a pattern (its RE2 superset, see ``batchgate``) are kept the same way
(``remembered``). The folder is ``$TRANSCRIPTS_CACHE_DIR``, else
``$XDG_CACHE_HOME/transcript-analytics``, else ``~/.cache/transcript-analytics``;
``TRANSCRIPTS_CACHE_DIR=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import importlib
import marshal
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIN_PATTERN_CHARS = 8192
"""Smaller patterns compile in a few milliseconds: ``re.compile`` (and its own cache)."""
CACHE_ENV = "TRANSCRIPTS_CACHE_DIR"

try:  # CPython's regex engine and the parser and assembler ``re.compile`` runs
    _sre: Any = importlib.import_module("_sre")
    _compiler: Any = importlib.import_module("re._compiler")
    _parser: Any = importlib.import_module("re._parser")
except ImportError:  # another Python: no cache
    _sre = _compiler = _parser = None


def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, from the cache when a process compiled it before."""
    folder = cache_dir()
    if len(pattern) < MIN_PATTERN_CHARS or folder is None or _sre is None:
        return re.compile(pattern, flags)
    path = folder / f"{_key(pattern, flags)}.marshal"
    try:
        found: re.Pattern[str] = _sre.compile(pattern, *marshal.loads(path.read_bytes()))
        return found
    except Exception:  # no file yet, or one that does not load: compile it
        pass
    try:
        parts = _assemble(pattern, flags)
        found = _sre.compile(pattern, *parts)
    except Exception:  # internals not as read here
        return re.compile(pattern, flags)
    write_atomically(path, marshal.dumps(parts))
    return found


def remembered(kind: str, pattern: str, flags: int, make: Callable[[], str | None]) -> str | None:
    """``make()``, a text derived from ``pattern`` (with ``flags``) by the procedure named
    ``kind`` (which names its own version too), from the cache when a process derived it
    before. None is remembered as well. Patterns shorter than ``MIN_PATTERN_CHARS`` are
    not cached; a cache that cannot be read or written only means ``make`` runs again."""
    folder = cache_dir()
    if len(pattern) < MIN_PATTERN_CHARS or folder is None or _sre is None:
        return make()
    path = folder / f"{_key(kind + chr(0) + pattern, flags)}.txt"
    try:
        kept = path.read_bytes().decode("utf-8", "surrogatepass")
        if kept[:1] in ("=", "-"):
            return kept[1:] if kept[0] == "=" else None
    except (OSError, ValueError):  # no file yet, or one that does not decode: derive it
        pass
    made = make()
    write_atomically(path, ("-" if made is None else "=" + made).encode("utf-8", "surrogatepass"))
    return made


def cache_dir() -> Path | None:
    """Where compiled patterns are kept; None when switched off."""
    root = cache_root()
    return None if root is None else root / "regex"


def cache_root() -> Path | None:
    """The project's cache folder on this machine (see the module's description), whose
    subfolders hold what is kept between runs (``regex``, and ``parsetables``' ``bashlex``);
    None when switched off or when there is no home folder."""
    own = os.environ.get(CACHE_ENV)
    if own:
        return None if own.lower() in ("off", "0", "none") else Path(own)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home folder to be found
            return None
    return Path(base) / "transcript-analytics"


def _key(pattern: str, flags: int) -> str:
    """The cache file's name: the pattern, the flags and the Python and engine versions."""
    h = hashlib.sha256()
    for part in (sys.version, str(_sre.MAGIC), str(int(flags)), pattern):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def _assemble(pattern: str, flags: int) -> tuple[Any, ...]:
    """What ``re._compiler.compile`` hands the engine for ``pattern``, in the engine's
    order: its flags, code, number of groups, and the group names both ways."""
    parsed = _parser.parse(pattern, flags)
    code = _compiler._code(parsed, flags)
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return (
        int(flags | parsed.state.flags),
        [int(op) for op in code],  # (opcodes are int subclasses, which marshal does not take)
        parsed.state.groups - 1, groupindex, tuple(indexgroup),
    )


def write_atomically(path: Path, data: bytes) -> None:
    """Write the cache file atomically (processes tag side by side); a failure is ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
