"""The Annotate page: human labels written through a short-lived writable connection."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd

from analytics.errors import AnalyticsError
from analytics.models import TAGS
from analytics.store.db import connect

TAG_VOCABULARY = TAGS


def labels_from_choice(chosen: list[str], others_negative: bool) -> dict[str, bool]:
    """Tag -> applies: True for each chosen tag; with ``others_negative``, False for
    every other tag of the vocabulary (so precision can count them)."""
    return {t: (t in chosen) for t in TAG_VOCABULARY if others_negative or t in chosen}


def save_labels(
    db: str | Path,
    session_id: str,
    msg_idx: int,
    labels: dict[str, bool],
    annotator: str,
    note: str = "",
    wait_s: float = 5.0,
) -> int:
    """Append one ``annotations`` row per (tag, value); return how many were written.

    The caller must not hold another connection to ``db`` in this process
    (DuckDB allows one configuration per file per process): the app opens its
    read-only connections per query and closes them, so none is held here.
    """
    annotator = annotator.strip()
    if not annotator:
        raise AnalyticsError("Enter your name as annotator before saving labels")
    unknown = sorted(set(labels) - set(TAG_VOCABULARY))
    if unknown:
        raise AnalyticsError(
            f"unknown tag(s) {', '.join(unknown)}; valid tags: {', '.join(TAG_VOCABULARY)}"
        )
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (session_id, msg_idx, tag, value, annotator, note or None, now)
        for tag, value in sorted(labels.items())
    ]
    con = connect(db, read_only=False, wait_s=wait_s)
    try:
        con.executemany("INSERT INTO annotations VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    finally:
        con.close()
    return len(rows)


def current_labels(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The latest label of each annotator for each (message, tag), with whether an
    automatic (non-human) tag is on that message."""
    return con.execute(
        """
        WITH latest AS (
            SELECT * FROM annotations
            QUALIFY row_number() OVER (PARTITION BY session_id, msg_idx, tag, annotator
                                       ORDER BY created_at DESC) = 1
        )
        SELECT l.session_id, l.msg_idx, l.tag, l.annotator, l.value, l.note, l.created_at,
               EXISTS (SELECT 1 FROM tags t WHERE t.session_id = l.session_id
                       AND t.msg_idx = l.msg_idx AND t.tag = l.tag
                       AND coalesce(t.source, 'rules') <> 'human') AS auto
        FROM latest l
        ORDER BY l.created_at DESC, l.session_id, l.msg_idx, l.tag
        """
    ).df()


def message_for_labelling(
    con: duckdb.DuckDBPyConnection, session_id: str, msg_idx: int
) -> pd.DataFrame:
    """The message text plus its automatic tags."""
    return con.execute(
        """
        SELECT m.msg_idx, m.source_id, m.role, m.ts, m.text,
               coalesce((SELECT list(DISTINCT t.tag ORDER BY t.tag) FROM tags t
                         WHERE t.session_id = m.session_id AND t.msg_idx = m.msg_idx
                           AND coalesce(t.source, 'rules') <> 'human'), []::VARCHAR[]) AS auto_tags
        FROM messages m WHERE m.session_id = ? AND m.msg_idx = ?
        """,
        [session_id, msg_idx],
    ).df()
