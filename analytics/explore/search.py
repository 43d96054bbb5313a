"""Ranked search across sessions: the store's full-text index when available,
else a plain case-insensitive substring match ranked by occurrences."""

from __future__ import annotations

import duckdb
import pandas as pd

from analytics.store.search import has_documents
from analytics.store.search import search as store_search

COLUMNS = ["session_id", "msg_idx", "source_id", "role", "kind", "snippet", "score"]

FALLBACK_SQL = """
WITH hits AS (
    SELECT session_id, msg_idx, source_id, role, 'message' AS kind, text AS body
    FROM messages
    WHERE contains(lower(text), lower($q)) AND ($sid IS NULL OR session_id = $sid)
    UNION ALL
    SELECT c.session_id, c.msg_idx, m.source_id, 'tool' AS role, 'tool_output' AS kind,
           coalesce(c.command, '') || chr(10) || coalesce(c.output, '') AS body
    FROM tool_calls c
    LEFT JOIN messages m USING (session_id, msg_idx)
    WHERE (contains(lower(c.output), lower($q)) OR contains(lower(c.command), lower($q)))
      AND ($sid IS NULL OR c.session_id = $sid)
), scored AS (
    SELECT *, strpos(lower(body), lower($q)) AS pos,
           (length(body) - length(replace(lower(body), lower($q), ''))) / length($q) AS n
    FROM hits
)
SELECT session_id, msg_idx, source_id, role, kind,
       CASE WHEN pos > 60 THEN '…' ELSE '' END
           || substr(body, greatest(pos - 60, 1), 200)
           || CASE WHEN length(body) > pos + 140 THEN '…' ELSE '' END AS snippet,
       n / (1 + ln(1 + length(body))) AS score
FROM scored
ORDER BY score DESC, session_id, msg_idx
LIMIT $limit
"""


def _store_search(
    con: duckdb.DuckDBPyConnection, query: str, limit: int, session_id: str | None
) -> pd.DataFrame | None:
    try:
        if not has_documents(con):
            return None  # a database written without search documents: scan instead
        return store_search(con, query, limit=limit, session_id=session_id)
    except duckdb.CatalogException:  # the index may be absent in a read-only copy; fall back
        return None


def fallback_search(
    con: duckdb.DuckDBPyConnection, query: str, limit: int = 50, session_id: str | None = None
) -> pd.DataFrame:
    """Substring search over message text and tool commands/outputs."""
    return con.execute(FALLBACK_SQL, {"q": query, "sid": session_id, "limit": limit}).df()


def search_messages(
    con: duckdb.DuckDBPyConnection, query: str, limit: int = 50, session_id: str | None = None
) -> pd.DataFrame:
    """Ranked hits with columns session_id, msg_idx, source_id, role, kind, snippet,
    score; ``df.attrs["engine"]`` says which engine answered."""
    query = query.strip()
    if not query:
        return pd.DataFrame(columns=COLUMNS)
    df = _store_search(con, query, limit, session_id)
    engine = "full-text index" if df is None else df.attrs.get("engine", "full-text index")
    if df is None:
        df = fallback_search(con, query, limit, session_id)
        engine = "substring match"
    df = df[[c for c in COLUMNS if c in df.columns]].reset_index(drop=True)
    df.attrs["engine"] = engine
    return df
