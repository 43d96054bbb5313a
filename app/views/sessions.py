"""Sessions: every session with the figures users sort by."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.links import with_session_links
from analytics.explore.sessions import (
    SessionFilter,
    filter_sessions,
    headline,
    sessions_overview,
    undated_left_out,
)

st.title("Sessions")

df = ui.query(sessions_overview)
if df.empty:
    st.info("No sessions yet. Ingest transcripts with `transcripts ingest PATH`.")
    st.stop()

with st.sidebar:
    st.subheader("Filter")
    text = st.text_input("Title or id contains", key="sessions-text")
    formats = st.multiselect(
        "Format", sorted(df["format"].dropna().unique()), key="sessions-format"
    )
    agents = st.multiselect("Agent", sorted(df["agent"].dropna().unique()), key="sessions-agent")
    models = st.multiselect("Model", sorted(df["model"].dropna().unique()), key="sessions-model")
    dates = st.date_input("Started between", value=[], key="sessions-dates")

start, end = ui.date_bounds(dates)
wanted = SessionFilter(tuple(formats), tuple(agents), tuple(models), start, end, text)
shown = filter_sessions(df, wanted)
undated = undated_left_out(df, wanted)

for col, (label, value) in zip(st.columns(6), headline(shown).items(), strict=True):
    col.metric(label, f"{value:,.1f}" if label.endswith("(h)") else f"{int(value):,}")

st.dataframe(
    with_session_links(shown, msg_col=None),
    hide_index=True,
    column_order=[
        "open",
        "session_id",
        "title",
        "format",
        "agent",
        "model",
        "started_at",
        "hours",
        "messages",
        "aborts",
        "checkins",
        "errors",
        "claims",
        "premature_claims",
        "polling_loops",
        "polling_wait_min",
    ],
    column_config={
        "open": ui.link_column(),
        "hours": st.column_config.NumberColumn("hours", format="%.1f"),
        "polling_wait_min": st.column_config.NumberColumn("polling wait (min)", format="%.1f"),
        "started_at": st.column_config.DatetimeColumn("started", format="YYYY-MM-DD HH:mm"),
    },
    key="sessions-table",
)
left_out = (
    f" {undated:,} session{' has' if undated == 1 else 's have'} no start time (no timestamps "
    "in the transcript) and the date filter leaves them out."
    if undated
    else ""
)
st.caption(
    f"{len(shown):,} of {len(df):,} sessions.{left_out} Click a column header to sort; "
    "“open ↗” shows the session's messages."
)
