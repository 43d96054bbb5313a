"""Streamlit glue shared by the pages: the cached read-only connection, cached
queries, friendly database errors, and inert rendering of transcript text.

Transcript text is never passed to a Markdown renderer: it goes through
``st.text`` / ``st.code`` / dataframes, and the few labels that must be Markdown
(expander titles, page links, badges) go through :func:`md_escape` first.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import duckdb
import pandas as pd
import streamlit as st

from analytics.errors import AnalyticsError, DatabaseError, DatabaseLockedError
from analytics.explore.links import with_session_links
from analytics.store.db import READ_WAIT_S, connect, default_db

T = TypeVar("T")

CACHE_TTL_S = 300
CACHE_MAX_ENTRIES = 256
TEXT_PREVIEW_CHARS = 4000
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:=\"'&])")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\))")
"""A terminal's control sequences: CSI (colours, ``ESC[1m``) and OSC (titles, links)."""


def md_escape(text: object) -> str:
    """Backslash-escape every Markdown/HTML-significant character (CommonMark
    allows escaping any ASCII punctuation), so links and images never render."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def db_path() -> str:
    return default_db()


def _root_connection(db: str) -> duckdb.DuckDBPyConnection:
    """A short-lived read-only connection. Not cached on purpose: DuckDB lets only one
    process hold a file that a writer wants, so an idle explorer must not block
    `transcripts ingest`. Results are cached instead (``_cached_call``); while an ingest
    holds the lock (it lets go between files) we wait briefly, then show a Retry."""
    return connect(db, read_only=True, wait_s=READ_WAIT_S)


def clear_query_cache() -> None:
    _cached_call.clear()


def _resolve(name: str) -> Callable[..., Any]:
    module_name, _, attr = name.partition(":")
    if not module_name.startswith("analytics.explore."):
        raise ValueError(f"not an explorer query: {name}")
    return getattr(importlib.import_module(module_name), attr)


@st.cache_data(max_entries=CACHE_MAX_ENTRIES, ttl=CACHE_TTL_S, show_spinner=False)
def _cached_call(db: str, name: str, args: tuple[Any, ...], kwargs: tuple[Any, ...]) -> Any:
    con = _root_connection(db)
    try:
        return _resolve(name)(con, *args, **dict(kwargs))
    finally:
        con.close()


def _is_lock(exc: BaseException) -> bool:
    return isinstance(exc, DatabaseLockedError) or (
        isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()
    )


def _stop_with_db_error(exc: BaseException, db: str) -> NoReturn:
    if _is_lock(exc):
        st.error(
            f"The database {md_escape(db)} is locked: another process (probably an "
            "ingest) is writing to it. Wait for it to finish, then retry."
        )
    elif isinstance(exc, DatabaseError):
        st.error(md_escape(str(exc)))
        st.markdown("Create a database from transcripts, then retry:")
        st.code(
            f"transcripts ingest PATH --db {db}\n# or, with the bundled samples:\n"
            "transcripts demo --no-serve",
            language="bash",
        )
    else:
        st.error(f"Could not read {md_escape(db)}: {md_escape(exc)}")
    if st.button("Retry", key="db-retry", type="primary"):
        st.rerun()
    st.stop()


def query(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call an ``analytics.explore`` query function on the cached connection,
    through the bounded data cache; on database trouble show why and stop the page."""
    db = db_path()
    name = f"{fn.__module__}:{fn.__qualname__}"
    try:
        return _cached_call(db, name, args, tuple(sorted(kwargs.items())))
    except (AnalyticsError, duckdb.Error) as exc:
        _stop_with_db_error(exc, db)


def raw_connection() -> duckdb.DuckDBPyConnection:
    """A short-lived read-only connection (caller closes it), or stop the page."""
    db = db_path()
    try:
        return _root_connection(db)
    except (AnalyticsError, duckdb.Error) as exc:
        _stop_with_db_error(exc, db)


def date_bounds(value: object) -> tuple[Any, Any]:
    """(start, end) from an ``st.date_input`` range value (either may be None)."""
    if isinstance(value, tuple | list):
        padded = [*value, None, None]
        return padded[0], padded[1]
    return value, None


def query_param(name: str, default: str = "") -> str:
    value = st.query_params.get(name)
    return str(value) if value is not None else default


def int_param(name: str) -> int | None:
    value = query_param(name)
    return int(value) if value.lstrip("-").isdigit() else None


def follow_param(param: str, key: str) -> bool:
    """Copy query parameter ``param`` into widget state ``key`` when the URL changed
    it since the last run (links to this page); return whether it changed."""
    value = query_param(param)
    seen = f"_qp_{key}"
    if st.session_state.get(seen) == value:
        return False
    st.session_state[seen] = value
    if value:
        st.session_state[key] = value
    return True


def set_param(param: str, key: str, value: str) -> None:
    """Write ``param`` into the URL as the page's own state (a jump), marked as seen by
    :func:`follow_param` for ``key``: else the next run takes it for a new link and
    undoes whatever the user clicked in between (a swallowed Next after a jump)."""
    st.query_params[param] = value
    st.session_state[f"_qp_{key}"] = value


def badges(tags: object) -> str:
    """Markdown chips for a list of tag names (names escaped)."""
    names = list(tags) if tags is not None else []  # type: ignore[call-overload]
    return " ".join(f":{_TAG_COLOUR.get(str(t), 'gray')}-badge[{md_escape(t)}]" for t in names)


_TAG_COLOUR = {
    "user_checkin": "orange",
    "user_abort": "red",
    "polling_loop": "violet",
    "diagnosis": "blue",
    "readiness_claim": "green",
    "smoke_test": "green",
    "benchmark": "blue",
    "error": "red",
    "launch": "violet",
}


def is_missing(value: object) -> bool:
    """None, NaN, NaT or pd.NA."""
    return value is None or bool(pd.isna(value)) if not isinstance(value, list | tuple) else False


def number(value: object, unit: object = None) -> str | None:
    """A figure for ``st.metric``: compact digits and ``unit`` if given, or None (drawn as
    a dash) when unknown, so a campaign without a measured baseline never reads "nan"."""
    if is_missing(value):
        return None
    figure = f"{float(value):g}"  # type: ignore[arg-type]
    return md_escape(f"{figure} {unit}") if isinstance(unit, str) and unit else figure


def _present(value: object) -> bool:
    return not is_missing(value)


def tool_label(tool: object, status: object, exit_code: object, duration_s: object) -> str:
    """Expander title of a tool call (all parts escaped)."""
    parts = [f"🔧 {md_escape(tool)}", md_escape(status)]
    if _present(exit_code):
        parts.append(f"exit {int(exit_code)}")  # type: ignore[call-overload]
    if _present(duration_s):
        parts.append(f"{float(duration_s):,.0f} s")  # type: ignore[arg-type]
    return " · ".join(parts)


def without_ansi(text: str) -> str:
    """``text`` without terminal colour and control sequences, which a browser draws as a
    box and "[1m" (hook messages, test runners' and linters' output)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def show_text(text: object, key: str | None = None) -> None:
    """Transcript text, inert: plain preformatted text without terminal colour codes,
    long bodies folded."""
    body = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text)
    body = without_ansi(body)
    if len(body) <= TEXT_PREVIEW_CHARS:
        st.text(body or "(empty)")
        return
    st.text(body[:TEXT_PREVIEW_CHARS] + " …")
    with st.expander(f"{len(body) - TEXT_PREVIEW_CHARS:,} more characters"):
        st.code(body, language=None, wrap_lines=True)


def session_link(session_id: str, msg_idx: int | None = None, label: str | None = None) -> None:
    """A same-tab link to the Session page at a message."""
    params = {"session": session_id}
    if msg_idx is not None and not pd.isna(msg_idx):
        params["msg"] = str(int(msg_idx))
    text = label or (f"{session_id} #{params['msg']}" if "msg" in params else session_id)
    st.page_link("views/session.py", label=md_escape(text), query_params=params, icon="🔎")


def link_column(label: str = "open") -> Any:
    return st.column_config.LinkColumn(label, display_text="open ↗", width="small")


def run_sql(sql: str, row_limit: int = 10000, timeout_s: float = 10) -> pd.DataFrame | None:
    """Run a console query in the sandbox; show a refusal/failure and return None."""
    from analytics.explore.sandbox import SqlRefusedError, run_readonly_sql

    try:
        return run_readonly_sql(db_path(), sql, row_limit=row_limit, timeout_s=timeout_s)
    except SqlRefusedError as exc:
        st.error(md_escape(exc))
        return None


def save_annotation(
    session_id: str, msg_idx: int, labels: dict[str, bool], annotator: str, note: str
) -> bool:
    """Write labels through a short-lived writable connection (the explorer holds no
    read-only one open); report the outcome."""
    from analytics.explore.annotate import save_labels

    try:
        n = save_labels(db_path(), session_id, msg_idx, labels, annotator, note)
    except AnalyticsError as exc:
        st.error(md_escape(exc))
        return False
    finally:
        clear_query_cache()
    st.success(f"Saved {n} label(s) for message #{msg_idx}.")
    return True


TABLE_ROW_CAP = 1000
"""Rows sent to the browser per table; the rest stay one SQL query away."""


def capped(df: pd.DataFrame, what: str = "rows") -> pd.DataFrame:
    """The first TABLE_ROW_CAP rows, with a caption saying how many were left out."""
    if len(df) <= TABLE_ROW_CAP:
        return df
    st.caption(
        f"Showing the first {TABLE_ROW_CAP:,} of {len(df):,} {what}; "
        "use the SQL page for all of them."
    )
    return df.head(TABLE_ROW_CAP)


def sql_result_note(rows: int, truncated: bool, shown: int) -> str:
    """The caption over a console result: how many rows came back, whether the query
    returns more, and how many of them the table shows (the CSV download has them all)."""
    cut = f"the table shows the first {shown:,}, Download CSV has all {rows:,}"
    if not truncated:
        return f"{rows:,} rows; {cut}." if shown < rows else f"{rows:,} rows"
    note = (
        f"First {rows:,} rows: the query returns more. Narrow it with WHERE, "
        "or page with LIMIT … OFFSET …, or aggregate."
    )
    return f"{note} Here {cut}." if shown < rows else note


def csv_when_clicked(df: pd.DataFrame) -> Callable[[], str]:
    """``df`` as CSV for ``st.download_button``, written when the button is clicked rather
    than at every run of the page (10k rows of tool output: half a second)."""

    def write() -> str:
        return df.to_csv(index=False)

    return write


def linked_table(df: pd.DataFrame, what: str, key: str, columns: list[str]) -> None:
    """A capped table whose first column, "open", links each row to its session message."""
    st.dataframe(
        with_session_links(capped(df, what)),
        hide_index=True,
        key=key,
        column_order=["open", *columns],
        column_config={"open": link_column()},
    )


def session_labels(empty_message: str | None = None) -> dict[str, str]:
    """session_id -> its label for pickers, in the order of ``sessions.session_ids``;
    with ``empty_message``, a database without sessions shows it and stops the page."""
    from analytics.explore.sessions import session_ids

    ids = query(session_ids)
    if ids.empty and empty_message is not None:
        st.info(empty_message)
        st.stop()
    return dict(zip(ids["session_id"], ids["label"], strict=True))


def session_scope(key: str) -> str | None:
    """A "Session" picker over every session, "All sessions" first; the session picked, or
    None for all (a long session's rows fill a capped table: pick another to see its own)."""
    labels: dict[str, str] = {"": "All sessions"} | session_labels()
    picked = st.selectbox("Session", list(labels), format_func=lambda s: labels.get(s, s), key=key)
    return picked or None
