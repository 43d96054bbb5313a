"""Session look-ups shared by the CLI, the report and the app."""

from __future__ import annotations

import duckdb
import pandas as pd

from analytics.errors import SessionNotFoundError, UsageError


def resolve_session(con: duckdb.DuckDBPyConnection, text: str, db: str = "") -> str:
    """A full session id, a native id, or a unique prefix of either (or a part of its
    source path) -> the session id.

    A subagent's id starts with its parent's, so a prefix of a parent matches its
    subagents too: the match of which every other match is a subagent (at any depth)
    is the one meant. Several sessions otherwise: a :class:`UsageError` listing them."""
    exact = _matches(con, "session_id = $t OR native_id = $t", text)
    if len(exact) == 1:
        return exact[0]
    matches = exact or _matches(
        con, "starts_with(session_id, $t) OR starts_with(native_id, $t) "
        "OR contains(source_path, $t)", text)
    if not matches:
        raise SessionNotFoundError(text, db)
    if len(matches) == 1:
        return matches[0]
    parents = _parents(con)
    tops = [m for m in matches if not _ancestors(m, parents) & set(matches)] or matches
    if len(tops) == 1:
        return tops[0]
    shown = ", ".join(tops[:5]) + (f" and {len(tops) - 5} more" if len(tops) > 5 else "")
    raise UsageError(f"{text!r} matches several sessions ({shown}); give more of the id")


def _matches(con: duckdb.DuckDBPyConnection, where: str, text: str) -> list[str]:
    rows = con.execute(
        f"SELECT session_id FROM sessions WHERE {where} ORDER BY 1", {"t": text}
    ).fetchall()
    return [str(r[0]) for r in rows]


def _parents(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return {str(c): str(p) for c, p in con.execute(
        "SELECT session_id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL"
    ).fetchall()}


def _ancestors(session_id: str, parents: dict[str, str]) -> set[str]:
    """The sessions above ``session_id`` (its parent, theirs …); a loop ends the walk."""
    found: set[str] = set()
    at = parents.get(session_id)
    while at is not None and at not in found:
        found.add(at)
        at = parents.get(at)
    return found


def session_messages(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    only_tagged: bool = False,
    start: int = 0,
    limit: int | None = None,
) -> pd.DataFrame:
    """Messages of a session with a comma-joined ``tags`` column: those from ``msg_idx``
    ``start`` on, at most ``limit`` of them (all when None), so that a page of a
    100k-message session reads that page only."""
    join = "JOIN" if only_tagged else "LEFT JOIN"
    cap = "" if limit is None else "LIMIT $limit"
    params: dict[str, object] = {"s": session_id, "start": start}
    if limit is not None:
        params["limit"] = limit
    return con.execute(
        f"""
        WITH t AS (
            SELECT msg_idx, string_agg(DISTINCT tag, ',' ORDER BY tag) AS tags
            FROM tags WHERE session_id = $s AND msg_idx >= $start GROUP BY msg_idx)
        SELECT m.msg_idx, m.source_id, m.role, m.ts, m.text, t.tags
        FROM messages m {join} t USING (msg_idx)
        WHERE m.session_id = $s AND m.msg_idx >= $start
        ORDER BY m.msg_idx {cap}
        """,
        params,
    ).df()


def count_session_messages(
    con: duckdb.DuckDBPyConnection, session_id: str, only_tagged: bool = False
) -> int:
    """How many messages the session has (with ``only_tagged``: that carry a tag)."""
    sql = (
        "SELECT count(DISTINCT msg_idx) FROM tags WHERE session_id = ?"
        if only_tagged
        else "SELECT count(*) FROM messages WHERE session_id = ?"
    )
    rows = con.execute(sql, [session_id]).fetchall()
    return int(rows[0][0]) if rows else 0


def demo_overview(con: duckdb.DuckDBPyConnection) -> str:
    """A few lines that show what the database now knows."""
    lines = []
    for sid, fmt, n, title in con.execute(
        "SELECT session_id, source_format, n_messages, title FROM sessions "
        "WHERE parent_session_id IS NULL ORDER BY session_id"
    ).fetchall():
        lines.append(f"- {sid} ({fmt}, {n} messages): {title or ''}")
    tag_counts = con.execute(
        "SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY tag"
    ).fetchall()
    if tag_counts:
        lines.append("Tags: " + ", ".join(f"{t}={n}" for t, n in tag_counts))
    for verdict, n in con.execute(
        "SELECT verdict, count(*) FROM readiness_claims GROUP BY 1 ORDER BY 1"
    ).fetchall():
        lines.append(f"Readiness claims {verdict}: {n}")
    n_levers = con.execute("SELECT count(*) FROM levers").fetchone()
    if n_levers and n_levers[0]:
        lines.append(f"Campaign levers: {n_levers[0]}")
    return "\n".join(lines)
