"""transcript-analytics: coding-agent session transcripts as data you can question.

Public API (notebooks)::

    import analytics
    analytics.ingest(["~/.claude/projects"], db="t.duckdb")
    con = analytics.connect("t.duckdb")          # read-only
    analytics.sessions_df("t.duckdb")

Imports are lazy: importing the package loads no spaCy, DuckDB or pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "ingest",
    "connect",
    "sessions_df",
    "messages_df",
    "tags_df",
    "levers_df",
    "claims_df",
    "search",
    "AnalyticsError",
]

_LAZY = {
    "ingest": ("analytics.ingest", "ingest"),
    "connect": ("analytics.store.db", "connect"),
    "sessions_df": ("analytics.store.frames", "sessions_df"),
    "messages_df": ("analytics.store.frames", "messages_df"),
    "tags_df": ("analytics.store.frames", "tags_df"),
    "levers_df": ("analytics.store.frames", "levers_df"),
    "claims_df": ("analytics.store.frames", "claims_df"),
    "search": ("analytics.store.search", "search"),
    "AnalyticsError": ("analytics.errors", "AnalyticsError"),
}

if TYPE_CHECKING:
    from analytics.errors import AnalyticsError
    from analytics.ingest import ingest
    from analytics.store.db import connect
    from analytics.store.frames import claims_df, levers_df, messages_df, sessions_df, tags_df
    from analytics.store.search import search


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'analytics' has no attribute {name!r}")
