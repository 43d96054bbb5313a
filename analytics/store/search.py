"""Ranked full-text search (BM25) over messages and tool output.

DuckDB's ``fts`` extension cannot be downloaded at run time here; the PyPI package
``duckdb-ext-fts`` ships the signed extension for duckdb 1.4.4, which we LOAD from
its installed path. Without it, search falls back to a plain substring match
(ranked by the number of query terms found).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import duckdb
import pandas as pd

MAX_DOC_CHARS = 20_000
"""Longer documents are indexed by their head and tail (logs are huge; the ends matter)."""


@lru_cache(maxsize=1)
def fts_extension_path() -> Path | None:
    for entry in sys.path:
        root = Path(entry or ".") / "duckdb_ext"
        if root.is_dir():
            found = sorted(root.rglob("fts.duckdb_extension"))
            if found:
                return found[-1]
    return None


def load_fts(con: duckdb.DuckDBPyConnection) -> bool:
    ext = fts_extension_path()
    if ext is None:
        return False
    try:
        con.execute(f"LOAD '{ext}'")
        return True
    except duckdb.Error:
        return False


def build_index(con: duckdb.DuckDBPyConnection) -> int:
    """(Re)build ``search_docs`` and its BM25 index; returns the number of documents."""
    half = MAX_DOC_CHARS // 2
    clip = (
        "CASE WHEN length({c}) > {m} THEN left({c}, {h}) || ' … ' || right({c}, {h}) "
        "ELSE {c} END"
    )
    con.execute("DELETE FROM search_docs")
    con.execute(
        f"""
        INSERT INTO search_docs
        SELECT row_number() OVER () AS doc_id, session_id, msg_idx, kind, body FROM (
            SELECT session_id, msg_idx, 'message' AS kind,
                   {clip.format(c='text', m=MAX_DOC_CHARS, h=half)} AS body
            FROM messages WHERE text IS NOT NULL AND text <> ''
            UNION ALL
            SELECT session_id, msg_idx, 'tool_command', command FROM tool_calls
            WHERE command IS NOT NULL AND command <> ''
            UNION ALL
            SELECT session_id, coalesce(result_msg_idx, msg_idx), 'tool_output',
                   {clip.format(c='output', m=MAX_DOC_CHARS, h=half)}
            FROM tool_calls
            WHERE output IS NOT NULL AND output <> ''
              AND (result_msg_idx IS NULL OR result_msg_idx = msg_idx)
        )
        """
    )
    n = con.execute("SELECT count(*) FROM search_docs").fetchone()
    count = int(n[0]) if n else 0
    if load_fts(con):
        con.execute(
            "PRAGMA create_fts_index('search_docs', 'doc_id', 'body', overwrite=1, "
            "stemmer='english', stopwords='english', strip_accents=1, lower=1)"
        )
        con.execute(
            "INSERT OR REPLACE INTO search_state VALUES ('fts', 'bm25')"
        )
    else:
        con.execute("INSERT OR REPLACE INTO search_state VALUES ('fts', 'none')")
    return count


def _has_fts(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute("SELECT value FROM search_state WHERE key = 'fts'").fetchone()
    return bool(row and row[0] == "bm25") and load_fts(con)


def search(
    con: duckdb.DuckDBPyConnection,
    query: str,
    limit: int = 50,
    session_id: str | None = None,
) -> pd.DataFrame:
    """Ranked matches: session_id, msg_idx, source_id, role, kind, snippet, score."""
    query = query.strip()
    cols = ["session_id", "msg_idx", "source_id", "role", "kind", "snippet", "score"]
    if not query:
        return pd.DataFrame(columns=cols)
    where = "AND d.session_id = $sid" if session_id else ""
    params: dict[str, object] = {"q": query, "limit": limit}
    if session_id:
        params["sid"] = session_id
    if _has_fts(con):
        score = "fts_main_search_docs.match_bm25(d.doc_id, $q)"
    else:
        terms = [t.lower() for t in query.split() if t]
        params.update({f"t{i}": f"%{t}%" for i, t in enumerate(terms)})
        score = " + ".join(f"(lower(d.body) LIKE $t{i})::INT" for i in range(len(terms)))
        score = f"nullif({score}, 0)"
    sql = f"""
        SELECT d.session_id, d.msg_idx, m.source_id, m.role, d.kind,
               d.body AS body, {score} AS score
        FROM search_docs d
        LEFT JOIN messages m ON m.session_id = d.session_id AND m.msg_idx = d.msg_idx
        WHERE score IS NOT NULL {where}
        ORDER BY score DESC, d.session_id, d.msg_idx
        LIMIT $limit
    """
    df = con.execute(sql, params).df()
    df["snippet"] = [snippet(b, query) for b in df.pop("body")]
    return df[cols]


def snippet(body: str | None, query: str, width: int = 160) -> str:
    """The part of ``body`` around the first query term found."""
    if not body:
        return ""
    low = body.lower()
    pos = min((p for t in query.lower().split() if (p := low.find(t)) >= 0), default=0)
    start = max(0, pos - width // 3)
    text = body[start : start + width].replace("\n", " ")
    return ("…" if start else "") + text + ("…" if start + width < len(body) else "")
