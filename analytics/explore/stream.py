"""The Session page: a window of a session's messages with tags and tool calls.

Sessions can hold 100k messages, so every query reads one window, found by
``msg_idx`` (indexed order), never the whole session.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pandas as pd

_BY_TAG = """
    EXISTS (
        SELECT 1 FROM tags t
        WHERE t.session_id = m.session_id AND t.msg_idx = m.msg_idx AND list_contains($tags, t.tag))
"""
_BY_TEXT = """
    (contains(lower(m.text), lower($q)) OR EXISTS (
        SELECT 1 FROM tool_calls c
        WHERE c.session_id = m.session_id AND c.msg_idx = m.msg_idx
          AND (contains(lower(c.command), lower($q)) OR contains(lower(c.output), lower($q)))))
"""


def _filter(session_id: str, tags: tuple[str, ...], contains: str) -> tuple[str, dict[str, object]]:
    """The WHERE clause over ``messages m`` and its parameters, holding only the filters
    that are set: DuckDB plans a clause like ``len($tags) = 0 OR EXISTS (…)`` as a join
    over every tag and tool output even when it is off, which made each page of a
    100k-message session read all of them (0.5 s instead of 0.05 s)."""
    where: list[str] = ["m.session_id = $sid"]
    params: dict[str, object] = {"sid": session_id}
    if tags:
        where.append(_BY_TAG)
        params["tags"] = list(tags)
    if contains.strip():
        where.append(_BY_TEXT)
        params["q"] = contains.strip()
    return " AND ".join(where), params


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object]) -> Any:
    """The first value of a one-row query, its result read to the end (and so closed,
    which ``fetchone`` leaves open)."""
    rows = con.execute(sql, params).fetchall()
    return rows[0][0] if rows else None


def session_info(con: duckdb.DuckDBPyConnection, session_id: str) -> pd.DataFrame:
    """The session's row (empty when unknown)."""
    return con.execute(
        "SELECT session_id, title, source_format, agent, model, started_at, ended_at,"
        " n_messages, source_path, parent_session_id FROM sessions WHERE session_id = ?",
        [session_id],
    ).df()


def session_tag_counts(con: duckdb.DuckDBPyConnection, session_id: str) -> pd.DataFrame:
    """tag, n for the session (options of the tag filter)."""
    return con.execute(
        "SELECT tag, count(*) AS n FROM tags WHERE session_id = ? GROUP BY tag ORDER BY tag",
        [session_id],
    ).df()


def message_window(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    start: int = 0,
    size: int = 50,
    tags: tuple[str, ...] = (),
    contains: str = "",
) -> pd.DataFrame:
    """Up to ``size`` messages with ``msg_idx >= start`` that match the filters,
    with their tags as a list."""
    where, params = _filter(session_id, tags, contains)
    return con.execute(
        f"""
        WITH w AS (
            SELECT m.* FROM messages m
            WHERE {where} AND m.msg_idx >= $start
            ORDER BY m.msg_idx LIMIT $size
        )
        SELECT w.msg_idx, w.source_id, w.role, w.ts, w.text, w.error,
               w.is_sidechain, w.is_compaction_summary,
               coalesce((SELECT list(DISTINCT t.tag ORDER BY t.tag) FROM tags t
                         WHERE t.session_id = w.session_id AND t.msg_idx = w.msg_idx),
                        []::VARCHAR[]) AS tags
        FROM w ORDER BY w.msg_idx
        """,
        params | {"start": start, "size": size},
    ).df()


def count_matching(
    con: duckdb.DuckDBPyConnection, session_id: str, tags: tuple[str, ...] = (), contains: str = ""
) -> int:
    """How many of the session's messages match the filters."""
    where, params = _filter(session_id, tags, contains)
    value = _scalar(con, f"SELECT count(*) FROM messages m WHERE {where}", params)
    return int(value) if value is not None else 0


def previous_start(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    start: int,
    size: int,
    tags: tuple[str, ...] = (),
    contains: str = "",
) -> int:
    """The ``start`` of the window of ``size`` matching messages before ``start``."""
    where, params = _filter(session_id, tags, contains)
    value = _scalar(
        con,
        f"""
        SELECT min(msg_idx) FROM (
            SELECT m.msg_idx FROM messages m
            WHERE {where} AND m.msg_idx < $start
            ORDER BY m.msg_idx DESC LIMIT $size)
        """,
        params | {"start": start, "size": size},
    )
    return int(value) if value is not None else 0


def resolve_message(con: duckdb.DuckDBPyConnection, session_id: str, ref: str) -> int | None:
    """msg_idx of a message given its native id (``12479``, a uuid, ``L12``) or its msg_idx."""
    ref = ref.strip().removeprefix("#")
    if not ref:
        return None
    row = con.execute(
        "SELECT min(msg_idx) FROM messages WHERE session_id = ? AND source_id = ?",
        [session_id, ref],
    ).fetchone()
    if row and row[0] is not None:
        return int(row[0])
    if ref.isdigit():
        row = con.execute(
            "SELECT msg_idx FROM messages WHERE session_id = ? AND msg_idx = ?",
            [session_id, int(ref)],
        ).fetchone()
        if row:
            return int(row[0])
    return None


def tool_calls_between(
    con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int
) -> pd.DataFrame:
    """Tool calls made by messages ``lo..hi`` (inclusive)."""
    return con.execute(
        """
        SELECT msg_idx, call_id, tool, command, input, output, status, exit_code,
               duration_s, result_msg_idx
        FROM tool_calls
        WHERE session_id = ? AND msg_idx BETWEEN ? AND ?
        ORDER BY msg_idx, started_at NULLS LAST, call_id
        """,
        [session_id, lo, hi],
    ).df()


def messages_by_idx(
    con: duckdb.DuckDBPyConnection, session_id: str, idxs: tuple[int, ...]
) -> pd.DataFrame:
    """Specific messages of a session (evidence, contradictions)."""
    return con.execute(
        "SELECT msg_idx, source_id, role, ts, text FROM messages"
        " WHERE session_id = ? AND list_contains(?, msg_idx) ORDER BY msg_idx",
        [session_id, list(idxs)],
    ).df()


def _field_lines(key: str, value: object) -> list[str]:
    """``key: value``, a text of several lines below its key (indented, as written)."""
    if isinstance(value, str) and "\n" in value:
        return [f"{key}:", *(f"  {line}" for line in value.splitlines())]
    if isinstance(value, str):
        return [f"{key}: {value}"]
    if isinstance(value, dict | list) and value:
        nested = json.dumps(value, ensure_ascii=False, indent=2).splitlines()
        return [f"{key}:", *(f"  {line}" for line in nested)]
    return [f"{key}: {json.dumps(value, ensure_ascii=False)}"]


def call_input_text(command: object, tool_input: object) -> tuple[str, str | None]:
    """What a tool call was given, readable, and the language to highlight it as: its shell
    command (bash); else its JSON input one field a line, a text of several lines (an
    Edit's strings, a Write's content) below the field's name as written rather than
    escaped into one line of JSON; else the input as stored."""
    if isinstance(command, str) and command:
        return command, "bash"
    text = tool_input if isinstance(tool_input, str) else ""
    try:
        value = json.loads(text)
    except ValueError:
        return text, None
    if not isinstance(value, dict) or not value:
        return text, None
    return "\n".join(line for k, v in value.items() for line in _field_lines(str(k), v)), None
