"""Dataframe helpers for notebooks: each takes a database path or an open connection."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd

from analytics.store.db import connect

DbLike = str | Path | duckdb.DuckDBPyConnection | None


@contextmanager
def _open(db: DbLike) -> Iterator[duckdb.DuckDBPyConnection]:
    if isinstance(db, duckdb.DuckDBPyConnection):
        yield db
        return
    con = connect(db, read_only=True)
    try:
        yield con
    finally:
        con.close()


def _query(db: DbLike, sql: str, params: list[object] | None = None) -> pd.DataFrame:
    with _open(db) as con:
        return con.execute(sql, params or []).df()


def sessions_df(db: DbLike = None) -> pd.DataFrame:
    """One row per session, newest first."""
    return _query(db, "SELECT * FROM sessions ORDER BY started_at DESC NULLS LAST, session_id")


def messages_df(
    db: DbLike = None,
    session_id: str | None = None,
    columns: Sequence[str] | None = None,
    msg_range: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """Messages in order (of one session when ``session_id`` is given): only ``columns``
    when given (a 100k-message session's texts are a hundred megabytes in pandas), only
    ``msg_range`` = (first, last) ``msg_idx`` when given, both ends included."""
    chosen = [_identifier(c) for c in columns] if columns else ["*"]
    where: list[str] = []
    params: list[object] = []
    if session_id:
        where.append("session_id = ?")
        params.append(session_id)
    if msg_range is not None:
        where.append("msg_idx BETWEEN ? AND ?")
        params.extend(msg_range)
    sql = f"SELECT {', '.join(chosen)} FROM messages"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return _query(db, sql + " ORDER BY session_id, msg_idx", params)


def _identifier(name: str) -> str:
    """``name`` quoted as a column name (DuckDB names an unknown one in its error)."""
    return '"' + name.replace('"', '""') + '"'


def tags_df(db: DbLike = None, tag: str | None = None) -> pd.DataFrame:
    """Tags joined with their message's role, source id and text."""
    sql = (
        "SELECT t.*, m.source_id, m.role, m.text FROM tags t JOIN messages m "
        "USING (session_id, msg_idx)"
    )
    if tag:
        return _query(db, sql + " WHERE t.tag = ? ORDER BY session_id, msg_idx", [tag])
    return _query(db, sql + " ORDER BY session_id, msg_idx, tag")


def levers_df(db: DbLike = None, session_id: str | None = None) -> pd.DataFrame:
    """Campaign levers in order, with the campaign's goal."""
    sql = (
        "SELECT l.*, c.goal_text, c.target_metric, c.target_value FROM levers l "
        "LEFT JOIN campaigns c USING (campaign_id, session_id)"
    )
    if session_id:
        return _query(db, sql + " WHERE l.session_id = ? ORDER BY seq", [session_id])
    return _query(db, sql + " ORDER BY session_id, campaign_id, seq")


def claims_df(db: DbLike = None, verdict: str | None = None) -> pd.DataFrame:
    """Readiness claims with verdicts and the claim message's source id."""
    sql = (
        "SELECT c.*, m.source_id, m.ts FROM readiness_claims c JOIN messages m "
        "USING (session_id, msg_idx)"
    )
    if verdict:
        return _query(db, sql + " WHERE c.verdict = ? ORDER BY session_id, msg_idx", [verdict])
    return _query(db, sql + " ORDER BY session_id, msg_idx")
