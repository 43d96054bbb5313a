"""Session-level analysis: read one session's rows, derive campaigns, levers and
readiness verdicts. Pure: nothing here writes to the database (the ingest
pipeline writes what :func:`analyse_session` returns).

A session can hold 100k messages and hundreds of MB of tool output, while the
analysers need a few columns of most tables and the text of a few rows. So
:func:`load_session_frames` reads nothing up front: each table is read in full on
first use (the report wants whole tables), and the analysers read only the
columns and rows they look at through :meth:`SessionFrames.select`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from analytics.analysis.campaigns import Goal, find_campaigns
from analytics.analysis.readiness import judge_claims
from analytics.formats import SUBAGENT_TOOLS
from analytics.gcpause import no_cyclic_gc
from analytics.models import PROSE_SOURCES, Campaign, Lever, ReadinessClaim

TABLES = (
    "session",
    "messages",
    "tool_calls",
    "tags",
    "measurements",
    "launches",
    "server_events",
    "polling_loops",
)
_JSON_COLUMNS = {"launches": ("flags", "changed_flags", "env")}
ID_BLOCK = 4096  # native message ids are read from a multiple of this on (see source_id)


_SUBAGENT_MEASUREMENTS_SQL = """
WITH kids AS (
    SELECT m.*, msg.ts AS measured_at
    FROM measurements m
    JOIN sessions k ON k.session_id = m.session_id AND k.parent_session_id = $sid
    JOIN messages msg ON msg.session_id = m.session_id AND msg.msg_idx = m.msg_idx
    WHERE NOT list_contains($prose, m.source) AND msg.ts IS NOT NULL
), runs AS (
    SELECT coalesce(result_msg_idx, msg_idx) AS at_idx, started_at,
           coalesce(ended_at, started_at) AS ended_at
    FROM tool_calls
    WHERE session_id = $sid AND list_contains($tools, lower(tool)) AND started_at IS NOT NULL
), placed AS (
    SELECT kids.*, (SELECT min(at_idx) FROM runs
                    WHERE kids.measured_at BETWEEN runs.started_at AND runs.ended_at) AS at_idx
    FROM kids
)
SELECT * EXCLUDE (measured_at, at_idx) REPLACE (
    $sid AS session_id,
    at_idx AS msg_idx,
    concat_ws(',', nullif(ltrim(regexp_replace(coalesce(label, ''),
                                               '(^|,)launch_msg_idx=[^,]*', '', 'g'), ','), ''),
              'subagent=' || session_id) AS label)
FROM placed WHERE at_idx IS NOT NULL
ORDER BY at_idx, session_id, msg_idx
"""
"""The measurements of a session's subagents (``SessionFrames._with_subagents``)."""


def _order(table: str) -> str:
    """A total order: rows of one message keep the order they were stored in, so a whole
    read and a narrow ``select`` (and a session ingested whole or in pieces) agree."""
    return "msg_idx, call_id" if table == "tool_calls" else "msg_idx, rowid"


def _decode(value: object) -> object:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class _Table:
    """A table of :class:`SessionFrames`: given, or read in full on first use."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, frames: SessionFrames, owner: type | None = None) -> pd.DataFrame:
        return frames.table(self.name)

    def __set__(self, frames: SessionFrames, value: pd.DataFrame) -> None:
        frames._tables[self.name] = value


class SessionFrames:
    """Every row of one session, one DataFrame per table, ordered by ``msg_idx``.

    Built either from DataFrames (``SessionFrames(messages=df, …)``) or bound to a
    database by :func:`load_session_frames`, in which case each table is read on
    first use. JSON columns of ``launches`` (flags, changed_flags, env) are decoded
    to dicts (or None)."""

    session = _Table()
    messages = _Table()
    tool_calls = _Table()
    tags = _Table()
    measurements = _Table()
    launches = _Table()
    server_events = _Table()
    polling_loops = _Table()

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | None = None,
        bound_session: str | None = None,
        **tables: pd.DataFrame,
    ) -> None:
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise TypeError(f"unknown tables {sorted(unknown)}; valid: {', '.join(TABLES)}")
        self._con = con if bound_session is not None else None
        self._bound = bound_session
        self._tables: dict[str, pd.DataFrame] = dict(tables)
        self._source_ids: dict[int, str] = {}
        self._ids_from: int | None = None  # the ids of messages from here on are read
        self._positions: dict[int, int] | None = None
        self._refs: dict[int, str] = {}
        self.known_texts: dict[int, str | None] = {}
        """Texts of messages of the session the caller holds already (an ingest: those of
        the claims it tagged), as stored: :meth:`message_texts` reads only the others."""

    # -- reading -------------------------------------------------------------

    def table(self, name: str) -> pd.DataFrame:
        """The whole table ``name`` (read from the database on first use)."""
        if name not in self._tables:
            self._tables[name] = self._read(name) if self._con is not None else pd.DataFrame()
        return self._tables[name]

    def _read(self, name: str) -> pd.DataFrame:
        assert self._con is not None
        if name == "session":
            sql = "SELECT * FROM sessions WHERE session_id = ?"
        else:
            sql = f"SELECT * FROM {name} WHERE session_id = ? ORDER BY {_order(name)}"
        df = self._con.execute(sql, [self._bound]).df()
        for column in _JSON_COLUMNS.get(name, ()):
            if column in df.columns:
                df[column] = [_decode(v) for v in df[column]]
        if name == "measurements":
            df = self._with_subagents(df)
        return df.reset_index(drop=True)

    def _with_subagents(self, own: pd.DataFrame) -> pd.DataFrame:
        """``own`` measurements and those a tool printed in this session's subagents (a
        ``Task`` that ran the benchmark), each placed at the message that carries the
        result of the call that ran the subagent while it was measured, in message order:
        the caller's campaign is judged on them as on its own. Their label names the
        subagent (``subagent=…``, not a load condition) instead of a launch of its own."""
        assert self._con is not None
        found = self._con.execute(_SUBAGENT_MEASUREMENTS_SQL, {
            "sid": self._bound, "prose": list(PROSE_SOURCES), "tools": sorted(SUBAGENT_TOOLS),
        }).df()
        if found.empty:
            return own
        found = found[list(own.columns)] if not own.empty else found
        both = pd.concat([own, found], ignore_index=True) if not own.empty else found
        return both.sort_values("msg_idx", kind="stable").reset_index(drop=True)

    def select(
        self,
        table: str,
        columns: Sequence[str],
        where: dict[str, Sequence[Any]] | None = None,
        matching: dict[str, tuple[str, re.Pattern[str]]] | None = None,
        min_idx: int | None = None,
        below_idx: int | None = None,
    ) -> pd.DataFrame:
        """``columns`` of the rows of ``table`` whose column ``c`` is in ``where[c]``
        and, for ``matching[c] = (sql, python)``, whose text in ``c`` contains a
        match of ``python`` (``sql``: a DuckDB condition on ``{column}`` true for
        exactly those texts), and whose ``msg_idx`` is at least ``min_idx`` and
        below ``below_idx`` when given, in table order.
        Reads only those rows from the database when the frames are bound and the
        table was not read yet."""
        where, matching = where or {}, matching or {}
        if self._con is None or table in self._tables:
            df = self.table(table)
            if df.empty:
                return pd.DataFrame(columns=list(columns))
            mask = pd.Series(True, index=df.index)
            for column, values in where.items():
                mask &= df[column].isin(list(values))
            for column, (_, pattern) in matching.items():
                mask &= np.array(
                    [isinstance(v, str) and bool(pattern.search(v)) for v in df[column]]
                )
            if min_idx is not None:
                mask &= df["msg_idx"] >= min_idx
            if below_idx is not None:
                mask &= df["msg_idx"] < below_idx
            return df.loc[mask, list(columns)].reset_index(drop=True)
        sql, params = self._select_sql(table, columns, where, matching, min_idx, below_idx)
        return self._con.execute(sql, params).df()

    def select_lists(
        self,
        table: str,
        columns: Sequence[str],
        where: dict[str, Sequence[Any]] | None = None,
        min_idx: int | None = None,
        below_idx: int | None = None,
    ) -> list[list[Any]]:
        """The rows :meth:`select` finds, as one list per column of ``columns``: what the
        verdicts iterate over. Read from the database, a column goes to a list through
        numpy, up to twice as fast as through a DataFrame; a NULL is None there and whatever
        ``tolist`` gives (None, NaN, NA) in a table already read, so callers test
        values by type, never by truth."""
        if self._con is None or table in self._tables:
            df = self.select(table, columns, where, min_idx=min_idx, below_idx=below_idx)
            return [df[c].tolist() for c in columns]
        sql, params = self._select_sql(table, columns, where or {}, {}, min_idx, below_idx)
        found = self._con.execute(sql, params).fetchnumpy()
        return [found[c].tolist() for c in columns]

    def message_texts(self, idx: Sequence[int]) -> dict[int, str | None]:
        """msg_idx -> text of the messages ``idx`` there are (NULL: None; a table already
        read may give NaN, see :meth:`select_lists`): from ``known_texts``, the rest read."""
        known = self.known_texts
        missing = [i for i in idx if i not in known]
        out = {i: known[i] for i in idx if i in known}
        if missing:
            found = self.select_lists("messages", ["msg_idx", "text"], {"msg_idx": missing})
            out.update((int(i), t) for i, t in zip(*found, strict=True))
        return out

    def _select_sql(
        self,
        table: str,
        columns: Sequence[str],
        where: dict[str, Sequence[Any]],
        matching: dict[str, tuple[str, re.Pattern[str]]],
        min_idx: int | None,
        below_idx: int | None,
    ) -> tuple[str, list[Any]]:
        """The query of :meth:`select` on the database, and its parameters."""
        # ``c IN (SELECT unnest(?))`` is a hash semi-join: with thousands of values it is
        # 10x faster than ``list_contains(?, c)``, which walks the list for every row.
        conds = "".join(f" AND {c} IN (SELECT unnest(?))" for c in where)
        conds += "".join(f" AND {sql.format(column=c)}" for c, (sql, _) in matching.items())
        wanted = [int(i) for i in where.get("msg_idx", ())]
        if wanted:
            # (redundant bounds, which let the scan skip the row groups outside them: a
            # verdict's messages lie near the end of a long session)
            conds += f" AND msg_idx BETWEEN {min(wanted)} AND {max(wanted)}"
        if min_idx is not None:
            conds += f" AND msg_idx >= {int(min_idx)}"
        if below_idx is not None:
            conds += f" AND msg_idx < {int(below_idx)}"
        sql = (
            f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ?{conds} "
            f"ORDER BY {_order(table)}"
        )
        return sql, [self._bound, *[list(v) for v in where.values()]]

    # -- lookups -------------------------------------------------------------

    @property
    def session_id(self) -> str:
        if self._bound is not None:
            return self._bound
        if len(self.session):
            return str(self.session["session_id"].iloc[0])
        if len(self.messages):
            return str(self.messages["session_id"].iloc[0])
        return ""

    def message_value(self, msg_idx: int | None, column: str) -> object:
        """One column of one message (None when absent or null)."""
        if msg_idx is None or self.messages.empty:
            return None
        if self._positions is None:
            self._positions = {int(i): n for n, i in enumerate(self.messages["msg_idx"])}
        pos = self._positions.get(int(msg_idx))
        if pos is None:
            return None
        value = self.messages[column].iat[pos]
        return None if pd.isna(value) else value

    def source_id(self, msg_idx: int | None) -> str:
        """The native id of a message (what a reader of the transcript sees).

        Ids are read when first asked for, from the block of ``ID_BLOCK`` messages that
        holds the message on to the end (or to the ids read before): verdicts name
        messages near their claims, so re-judging the claims of an append reads the ids
        of the last messages of a long session, not all of them."""
        if msg_idx is None:
            return "?"
        msg_idx = int(msg_idx)
        if self._ids_from is None or msg_idx < self._ids_from:
            start = msg_idx - msg_idx % ID_BLOCK
            msgs, ids = self.select_lists(
                "messages", ["msg_idx", "source_id"], min_idx=start, below_idx=self._ids_from
            )
            self._source_ids.update(zip(msgs, map(str, ids), strict=True))
            self._ids_from = start
        return self._source_ids.get(msg_idx, str(msg_idx))

    def ref(self, msg_idx: int | None) -> str:
        """How a reader finds a message: ``msg 6853`` or the native id itself.

        Memoised per message: verdicts name the same few messages thousands of times, and
        a message's id never changes once read (:meth:`source_id` reads each block once)."""
        if msg_idx is None:
            return self._ref(msg_idx)
        key = int(msg_idx)
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = self._ref(key)
        return ref

    def _ref(self, msg_idx: int | None) -> str:
        sid = self.source_id(msg_idx)
        return sid if sid.lower().startswith("msg") else f"msg {sid}"


@dataclass
class SessionAnalysis:
    campaigns: list[Campaign] = field(default_factory=list)
    levers: list[Lever] = field(default_factory=list)
    claims: list[ReadinessClaim] = field(default_factory=list)


def load_session_frames(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionFrames:
    """The frames of ``session_id``, bound to ``con``: tables are read when first used,
    so ``con`` must stay open while the frames are."""
    return SessionFrames(con, session_id)


def analyse_session(
    frames: SessionFrames, claims_from: int = 0, stated: list[Goal] | None = None
) -> SessionAnalysis:
    """Campaigns with their levers, and a verdict for every readiness claim at
    ``msg_idx >= claims_from`` (see :func:`readiness.claims_affected_from`). ``stated``:
    the session's :func:`campaigns.stated_goals`, when they were found already."""
    # Tens of thousands of signals, calls and tuples, none in a cycle: the cyclic
    # collector would only walk them (and the ingest's heap) again and again.
    with no_cyclic_gc():
        campaigns, levers = find_campaigns(frames, stated)
        claims = judge_claims(frames, claims_from)
    return SessionAnalysis(campaigns=campaigns, levers=levers, claims=claims)
