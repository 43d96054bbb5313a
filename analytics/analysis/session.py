"""Session-level analysis: read one session's rows, derive campaigns, levers and
readiness verdicts. Pure: nothing here writes to the database (the ingest
pipeline writes what :func:`analyse_session` returns)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import duckdb
import pandas as pd

from analytics.analysis.campaigns import find_campaigns
from analytics.analysis.readiness import judge_claims
from analytics.models import Campaign, Lever, ReadinessClaim

_TABLES = (
    "messages",
    "tool_calls",
    "tags",
    "measurements",
    "launches",
    "server_events",
    "polling_loops",
)
_JSON_COLUMNS = {"launches": ("flags", "changed_flags", "env")}


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass
class SessionFrames:
    """Every row of one session, one DataFrame per table, ordered by ``msg_idx``.

    JSON columns of ``launches`` (flags, changed_flags, env) are decoded to dicts
    (or None)."""

    session: pd.DataFrame = field(default_factory=_empty)
    messages: pd.DataFrame = field(default_factory=_empty)
    tool_calls: pd.DataFrame = field(default_factory=_empty)
    tags: pd.DataFrame = field(default_factory=_empty)
    measurements: pd.DataFrame = field(default_factory=_empty)
    launches: pd.DataFrame = field(default_factory=_empty)
    server_events: pd.DataFrame = field(default_factory=_empty)
    polling_loops: pd.DataFrame = field(default_factory=_empty)

    @property
    def session_id(self) -> str:
        if len(self.session):
            return str(self.session["session_id"].iloc[0])
        if len(self.messages):
            return str(self.messages["session_id"].iloc[0])
        return ""

    def message_value(self, msg_idx: int | None, column: str) -> object:
        """One column of one message (None when absent or null)."""
        if msg_idx is None or self.messages.empty:
            return None
        hit = self.messages.loc[self.messages["msg_idx"] == msg_idx, column]
        if not len(hit):
            return None
        value = hit.iloc[0]
        return None if pd.isna(value) else value

    def source_id(self, msg_idx: int | None) -> str:
        """The native id of a message (what a reader of the transcript sees)."""
        if msg_idx is None:
            return "?"
        if len(self.messages):
            hit = self.messages.loc[self.messages["msg_idx"] == msg_idx, "source_id"]
            if len(hit):
                return str(hit.iloc[0])
        return str(msg_idx)

    def ref(self, msg_idx: int | None) -> str:
        """How a reader finds a message: ``msg 6853`` or the native id itself."""
        sid = self.source_id(msg_idx)
        return sid if sid.lower().startswith("msg") else f"msg {sid}"


@dataclass
class SessionAnalysis:
    campaigns: list[Campaign] = field(default_factory=list)
    levers: list[Lever] = field(default_factory=list)
    claims: list[ReadinessClaim] = field(default_factory=list)


def _decode(value: object) -> object:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _table(con: duckdb.DuckDBPyConnection, table: str, session_id: str) -> pd.DataFrame:
    order = "msg_idx, call_id" if table == "tool_calls" else "msg_idx"
    df = con.execute(
        f"SELECT * FROM {table} WHERE session_id = ? ORDER BY {order}", [session_id]
    ).df()
    for column in _JSON_COLUMNS.get(table, ()):
        if column in df.columns:
            df[column] = [_decode(v) for v in df[column]]
    return df.reset_index(drop=True)


def load_session_frames(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionFrames:
    """Read every row of ``session_id`` from the analysis-relevant tables."""
    session = con.execute("SELECT * FROM sessions WHERE session_id = ?", [session_id]).df()
    frames = {t: _table(con, t, session_id) for t in _TABLES}
    return SessionFrames(session=session, **frames)


def analyse_session(frames: SessionFrames) -> SessionAnalysis:
    """Campaigns with their levers, and a verdict for every readiness claim."""
    campaigns, levers = find_campaigns(frames)
    return SessionAnalysis(campaigns=campaigns, levers=levers, claims=judge_claims(frames))
