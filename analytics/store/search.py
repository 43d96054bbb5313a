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

from analytics.formats import CODEX_MESSAGE_COPIES
from analytics.store.db import sql_string

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


def _clip(col: str) -> str:
    half = MAX_DOC_CHARS // 2
    return (
        f"CASE WHEN length({col}) > {MAX_DOC_CHARS} THEN left({col}, {half}) || ' … ' || "
        f"right({col}, {half}) ELSE {col} END"
    )


COPY_REACH = 4
"""How many messages apart an event and the message it repeats may be stored."""
_EVENT_COPY = f"""(
    m.role = 'system' AND m.native_type IN ({", ".join(f"'{t}'" for t in CODEX_MESSAGE_COPIES)})
    AND EXISTS (
        SELECT 1 FROM messages d
        WHERE d.session_id = m.session_id AND d.msg_idx <> m.msg_idx
          AND d.msg_idx BETWEEN m.msg_idx - {COPY_REACH} AND m.msg_idx + {COPY_REACH}
          AND d.native_type = 'response_item/message' AND d.text = m.text))"""
"""A message that repeats a neighbour word for word as an event (Codex writes each prompt
and reply twice: a ``response_item`` and an ``event_msg``): not a document of its own, so a
search finds each message once. An event with no such twin stays searchable."""


def _documents_sql(ranges: str, below: str = "") -> str:
    """The search documents of the messages in ``ranges`` (a relation of session_id,
    from_idx), and below ``below`` (a SQL integer) if given: message text, tool commands,
    and tool outputs that are not already a message of their own. Columns: session_id,
    msg_idx, kind, body; each document's msg_idx is that of the row it comes from."""
    m_below = f" AND m.msg_idx < {below}" if below else ""
    c_below = f" AND c.msg_idx < {below}" if below else ""
    return f"""
        SELECT m.session_id, m.msg_idx, 'message' AS kind, {_clip('m.text')} AS body
        FROM messages m JOIN {ranges} r
          ON m.session_id = r.session_id AND m.msg_idx >= r.from_idx{m_below}
        WHERE m.text <> '' AND NOT {_EVENT_COPY}
        UNION ALL
        SELECT c.session_id, c.msg_idx, 'tool_command', c.command FROM tool_calls c
        JOIN {ranges} r ON c.session_id = r.session_id AND c.msg_idx >= r.from_idx{c_below}
        WHERE c.command <> ''
        UNION ALL
        SELECT c.session_id, coalesce(c.result_msg_idx, c.msg_idx), 'tool_output',
               {_clip('c.output')}
        FROM tool_calls c
        JOIN {ranges} r ON c.session_id = r.session_id AND c.msg_idx >= r.from_idx{c_below}
        WHERE c.output <> '' AND (c.result_msg_idx IS NULL OR c.result_msg_idx = c.msg_idx)
    """


_PENDING = "(SELECT session_id, min(from_idx) AS from_idx FROM search_pending GROUP BY 1)"
_NONE_PENDING = "(SELECT NULL::VARCHAR AS session_id, NULL::INTEGER AS from_idx WHERE false)"


def _pending(con: duckdb.DuckDBPyConnection) -> str:
    """The pending ranges, as a relation. A database last written by a version without
    ``search_pending`` (migration m006) has none: read-only readers do not migrate it."""
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'search_pending'"
    ).fetchone()
    return _PENDING if found and found[0] else _NONE_PENDING


def has_documents(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether anything is searchable: copied documents or pending ranges."""
    row = con.execute(
        f"SELECT EXISTS (SELECT 1 FROM search_docs) OR EXISTS (SELECT 1 FROM {_pending(con)})"
    ).fetchone()
    return bool(row and row[0])


def add_documents(con: duckdb.DuckDBPyConnection, session_id: str, from_idx: int = 0) -> None:
    """Make a session's messages ``msg_idx >= from_idx`` searchable. Cheap: they are
    searched by substring where they are stored, and copied into ``search_docs`` when
    the index is next rebuilt (:func:`build_index`)."""
    con.execute("INSERT INTO search_pending VALUES (?, ?)", [session_id, from_idx])


COPY_BATCH = 50_000
"""Messages whose documents are copied by one statement (see ``_materialise``)."""
BATCH_SESSIONS = 1000
"""Sessions (or pieces of one) whose documents are copied by one statement at the most."""


def _materialise(con: duckdb.DuckDBPyConnection) -> None:
    """Copy the pending documents into ``search_docs``, in one transaction: interrupted,
    they stay pending (copied and still pending, they would be found twice).

    doc_id follows (session_id, msg_idx, kind, body): a total order (a message's commands
    share the first three), so a database numbers its documents as any other with the same
    rows does, whatever order they were stored in. The copy goes ``COPY_BATCH`` messages at a
    time, in that order, each batch numbered on from the last: the same numbering as one
    statement, whose sort of every document's text could exceed the writer's memory limit
    on a session of a gigabyte. Small sessions share a batch (a first ingest of a folder
    leaves thousands pending: a statement each would scan the tables thousands of times)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for batch in _batches(con):
            values = ", ".join(f"({sql_string(s)}, {lo}, {hi})" for s, lo, hi in batch)
            ranges = f"(SELECT * FROM (VALUES {values}) AS v(session_id, from_idx, below))"
            con.execute(
                f"""
                INSERT INTO search_docs
                SELECT (SELECT coalesce(max(doc_id), 0) FROM search_docs)
                           + row_number() OVER (ORDER BY session_id, msg_idx, kind, body),
                       session_id, msg_idx, kind, body
                FROM ({_documents_sql(ranges, "r.below")})
                """
            )
        con.execute("DELETE FROM search_pending")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _batches(con: duckdb.DuckDBPyConnection) -> list[list[tuple[str, int, int]]]:
    """The pending messages as (session_id, from msg_idx, below msg_idx) pieces, in order,
    grouped into batches of at most ``COPY_BATCH`` messages and ``BATCH_SESSIONS`` pieces."""
    pending = con.execute(
        f"""
        WITH p AS {_PENDING},
        tops AS (
            SELECT session_id, max(msg_idx) AS top FROM messages
            WHERE session_id IN (SELECT session_id FROM p) GROUP BY ALL
            UNION ALL
            SELECT session_id, max(msg_idx) FROM tool_calls
            WHERE session_id IN (SELECT session_id FROM p) GROUP BY ALL
        )
        SELECT p.session_id, p.from_idx, max(t.top) FROM p LEFT JOIN tops t USING (session_id)
        GROUP BY ALL ORDER BY 1
        """
    ).fetchall()
    batches: list[list[tuple[str, int, int]]] = [[]]
    size = 0
    for session_id, from_idx, top in pending:
        last = top if top is not None else from_idx
        for lo in range(from_idx, last + 1, COPY_BATCH):
            n = min(COPY_BATCH, last + 1 - lo)
            if batches[-1] and (size + n > COPY_BATCH or len(batches[-1]) >= BATCH_SESSIONS):
                batches.append([])
                size = 0
            batches[-1].append((session_id, lo, lo + COPY_BATCH))
            size += n
    return [b for b in batches if b]


def _state(con: duckdb.DuckDBPyConnection, key: str, default: str = "") -> str:
    row = con.execute("SELECT value FROM search_state WHERE key = ?", [key]).fetchone()
    return str(row[0]) if row else default


def _set_state(con: duckdb.DuckDBPyConnection, key: str, value: object) -> None:
    con.execute("INSERT OR REPLACE INTO search_state VALUES (?, ?)", [key, str(value)])


def build_index(con: duckdb.DuckDBPyConnection, force: bool = False) -> bool:
    """Bring the BM25 index up to date when it is worth it; return True if rebuilt.

    Documents added since the last build (the "tail": pending ones, and copied ones past
    the index) are searched by substring until the tail grows past a quarter of the
    indexed documents, so appending a few messages to a huge session neither copies nor
    re-indexes anything.
    """
    indexed_max = int(_state(con, "indexed_max", "0"))
    indexed_n = int(_state(con, "indexed_n", "0"))
    row = con.execute(
        "SELECT count(*) FILTER (WHERE doc_id <= $m), count(*) FILTER (WHERE doc_id > $m) "
        "FROM search_docs",
        {"m": indexed_max},
    ).fetchone()
    still, tail = row or (0, 0)
    pending = con.execute(f"SELECT count(*) FROM ({_documents_sql(_PENDING)})").fetchone()
    tail += pending[0] if pending else 0
    stale = tail > max(2000, indexed_n // 4) or still < indexed_n * 3 // 4
    if not (force or stale or (indexed_n == 0 and tail > 0)):
        return False
    if not load_fts(con):
        _set_state(con, "fts", "none")
        return False
    _materialise(con)
    top = con.execute("SELECT max(doc_id), count(*) FROM search_docs").fetchone()
    con.execute(
        "PRAGMA create_fts_index('search_docs', 'doc_id', 'body', overwrite=1, "
        "stemmer='english', stopwords='english', strip_accents=1, lower=1)"
    )
    _set_state(con, "fts", "bm25")
    _set_state(con, "indexed_max", (top[0] if top else 0) or 0)
    _set_state(con, "indexed_n", top[1] if top else 0)
    return True


def _has_fts(con: duckdb.DuckDBPyConnection) -> bool:
    return _state(con, "fts") == "bm25" and load_fts(con)


def search(
    con: duckdb.DuckDBPyConnection,
    query: str,
    limit: int = 50,
    session_id: str | None = None,
) -> pd.DataFrame:
    """Ranked matches: session_id, msg_idx, source_id, role, kind, snippet, score.

    Indexed documents are ranked by BM25; documents added since the last index build are
    matched by substring and scored by the share of query terms they contain, scaled to
    the best BM25 score so fresh exact hits rank among the indexed ones. The index keeps
    letter tokens only, so a query it cannot answer ("30000", "H200", "100%") is matched
    by substring over every document; ``df.attrs["engine"]`` then says "substring match"
    (else "full-text index"). A document holding the query's words as one phrase (case and
    spacing aside) ranks above those holding them apart.
    """
    indexed = _has_fts(con)
    df = _search(con, query, limit, session_id, indexed)
    if df.empty and indexed:
        df = _search(con, query, limit, session_id, False)
        df.attrs["engine"] = "substring match"
    else:
        df.attrs["engine"] = "full-text index"
    return df


def _search(
    con: duckdb.DuckDBPyConnection,
    query: str,
    limit: int,
    session_id: str | None,
    indexed: bool,
) -> pd.DataFrame:
    query = query.strip()
    cols = ["session_id", "msg_idx", "source_id", "role", "kind", "snippet", "score"]
    terms = [t.lower() for t in query.split() if t]
    if not terms:
        return pd.DataFrame(columns=cols)
    params: dict[str, object] = {"limit": limit}
    sess = ""
    if session_id:
        params["sid"] = session_id
        sess = "AND d.session_id = $sid"
    params.update({f"t{i}": t for i, t in enumerate(terms)})
    like = " + ".join(f"contains(lower(d.body), $t{i})::INT" for i in range(len(terms)))
    indexed_max = int(_state(con, "indexed_max", "0")) if indexed else -1
    params["m"] = indexed_max
    # Documents not in the index: copied past it, or still pending (read where stored).
    fresh_docs = f"""
        SELECT session_id, msg_idx, kind, body FROM search_docs WHERE doc_id > $m
        UNION ALL
        SELECT * FROM ({_documents_sql(_pending(con))})
    """
    if indexed_max >= 0:
        params["q"] = query
        scored = f"""
            WITH bm AS (
                SELECT d.session_id, d.msg_idx, d.kind, d.body,
                       fts_main_search_docs.match_bm25(d.doc_id, $q) AS score
                FROM search_docs d WHERE d.doc_id <= $m {sess}
            ), fresh AS (
                SELECT d.*, ({like}) / {len(terms)}.0 AS share
                FROM ({fresh_docs}) d WHERE true {sess}
            )
            SELECT session_id, msg_idx, kind, body, score FROM bm WHERE score IS NOT NULL
            UNION ALL
            SELECT session_id, msg_idx, kind, body,
                   share * coalesce((SELECT max(score) FROM bm), 1.0) FROM fresh
            WHERE share > 0
        """
    else:
        scored = f"""
            SELECT d.session_id, d.msg_idx, d.kind, d.body, ({like})::DOUBLE AS score
            FROM ({fresh_docs}) d WHERE ({like}) > 0 {sess}
        """
    # Documents holding the whole query as a phrase rank first ("out of memory": BM25 drops
    # the stop words, and "memory" alone is everywhere): the best score is added to theirs.
    phrase = "false"
    if len(terms) > 1:
        params["phrase"] = " ".join(terms)
        phrase = "contains(lower(s.body), $phrase)"
    sql = f"""
        SELECT s.session_id, s.msg_idx, m.source_id, m.role, s.kind, s.body,
               s.score + CASE WHEN {phrase} THEN max(s.score) OVER () ELSE 0 END AS score
        FROM ({scored}) s
        LEFT JOIN messages m ON m.session_id = s.session_id AND m.msg_idx = s.msg_idx
        ORDER BY score DESC, s.session_id, s.msg_idx, s.kind
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
