"""Session look-ups shared by the CLI, the report and the app."""

from __future__ import annotations

import duckdb
import pandas as pd

from analytics.errors import SessionNotFoundError, UsageError


def resolve_session(con: duckdb.DuckDBPyConnection, text: str, db: str = "") -> str:
    """A full session id, a native id, or a unique prefix of either -> the session id."""
    rows = con.execute(
        "SELECT session_id FROM sessions WHERE session_id = $t OR native_id = $t", {"t": text}
    ).fetchall()
    if len(rows) == 1:
        return str(rows[0][0])
    rows = con.execute(
        "SELECT session_id FROM sessions WHERE starts_with(session_id, $t) "
        "OR starts_with(native_id, $t) OR contains(source_path, $t) ORDER BY 1 LIMIT 6",
        {"t": text},
    ).fetchall()
    if len(rows) == 1:
        return str(rows[0][0])
    if not rows:
        raise SessionNotFoundError(text, db)
    options = ", ".join(r[0] for r in rows[:5])
    raise UsageError(f"{text!r} matches several sessions ({options} …); give more of the id")


def session_messages(
    con: duckdb.DuckDBPyConnection, session_id: str, only_tagged: bool = False
) -> pd.DataFrame:
    """Messages of a session with a comma-joined ``tags`` column."""
    only = "AND t.tags IS NOT NULL" if only_tagged else ""
    return con.execute(
        f"""
        SELECT m.msg_idx, m.source_id, m.role, m.ts, m.text, t.tags
        FROM messages m
        LEFT JOIN (SELECT msg_idx, string_agg(DISTINCT tag, ',' ORDER BY tag) AS tags
                   FROM tags WHERE session_id = $s GROUP BY msg_idx) t USING (msg_idx)
        WHERE m.session_id = $s {only}
        ORDER BY m.msg_idx
        """,
        {"s": session_id},
    ).df()


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
