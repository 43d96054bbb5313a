"""bashlex with its parse tables built once per machine, not once per process.

bashlex builds the LALR tables of its shell grammar when it is imported (its bundled yacc
keeps no table file): 0.09 s of the 0.1 s its import costs, in every process that parses
shell commands (every ``transcripts`` command that tags or analyses, and an ingest before
it can fork its tagging worker). The tables (two dicts of ints and names) are the same
every time for the same grammar, so they are kept beside the compiled regexes
(``regexcache``) and handed to bashlex's parser the next time.

A speed-up only: the key names the grammar (every production, the precedence, the start
symbol), the bashlex version and the Python version, and anything that goes wrong (no
cache folder, a file unreadable or of another layout, a bashlex whose yacc is not as read
here) builds the tables as bashlex does. What a cached table leaves out is only read by
yacc's debug output (the grammar's conflicts), which bashlex turns off.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import marshal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from analytics.regexcache import cache_root, write_atomically

YACC_MODULE = "bashlex.yacc"


def import_bashlex() -> ModuleType:
    """``import bashlex``, its parser's tables read from the cache when a process built
    them before (and written there when not)."""
    if "bashlex" in sys.modules:  # imported already: its tables are built
        return sys.modules["bashlex"]
    finder = _YaccFinder()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("bashlex")
    finally:
        sys.meta_path.remove(finder)


class _YaccFinder(importlib.abc.MetaPathFinder):
    """Finds ``bashlex.yacc`` as the import system would, with a loader that swaps in
    ``cached_tables`` right after the module ran (before bashlex's parser builds its
    tables with it)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != YACC_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _YaccLoader(spec.loader)
        return spec


class _YaccLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        table = getattr(module, "LRTable", None)
        if isinstance(table, type):
            module.LRTable = cached_tables(table)  # type: ignore[attr-defined]


def cached_tables(lr_table: type) -> type:
    """A subclass of yacc's ``LRTable`` that reads its action and goto tables from the
    cache for a grammar built before, and builds and keeps them otherwise."""

    class CachedLRTable(lr_table):
        def __init__(self, grammar: Any, log: Any = None) -> None:
            path = _table_path(grammar)
            tables = _read(path) if path is not None else None
            state: dict[str, Any] = self.__dict__
            if tables is None:
                super().__init__(grammar, log)
                if path is not None:
                    write_atomically(path, marshal.dumps((state["lr_action"], state["lr_goto"])))
                return
            # What LRTable.__init__ sets, the tables from the cache: the parser reads the
            # productions and the action and goto tables; the rest is the builder's own.
            state.update(
                grammar=grammar, log=log, lr_action=tables[0], lr_goto=tables[1],
                lr_productions=grammar.Productions, lr_goto_cache={}, lr0_cidhash={},
                _add_count=0, sr_conflict=0, rr_conflict=0, conflicts=[], sr_conflicts=[],
                rr_conflicts=[],
            )

    return CachedLRTable


def _table_path(grammar: Any) -> Path | None:
    """The cache file of ``grammar``'s tables; None without a cache or a grammar as read here."""
    folder = cache_root()
    if folder is None:
        return None
    try:
        version = importlib.metadata.version("bashlex")
        parts = [sys.version, version, repr(grammar.Start)]
        parts += [repr(sorted(grammar.Precedence.items()))]
        parts += [f"{p.name} -> {' '.join(p.prod)} %prec {p.prec!r}" for p in grammar.Productions]
    except Exception:  # (another bashlex: no cache)
        return None
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return folder / "bashlex" / f"{h.hexdigest()[:32]}.marshal"


def _read(path: Path) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]] | None:
    """The (action, goto) tables kept in ``path``; None when there are none of that layout."""
    try:
        action, goto = marshal.loads(path.read_bytes())
    except Exception:  # no file yet, or one that does not load
        return None
    if not (isinstance(action, dict) and isinstance(goto, dict) and action):
        return None
    return action, goto
