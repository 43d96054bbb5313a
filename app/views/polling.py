"""Polling & aborts: waiting loops, user interruptions and check-in latency."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.links import with_session_links
from analytics.explore.polling import aborts, checkin_latency, polling_by_outcome, polling_loops

st.title("Polling & aborts")

loops = ui.query(polling_loops)
stops = ui.query(aborts)
checkins = ui.query(checkin_latency)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Polling loops", len(loops))
m2.metric("Waited (h)", f"{loops['waited_s'].sum() / 3600:,.2f}")
m3.metric("Aborts", len(stops))
m4.metric("Check-ins", len(checkins))

link = {"open": ui.link_column()}
st.subheader("Polling loops")
st.dataframe(polling_by_outcome(loops), hide_index=True, key="polling-outcomes")
st.dataframe(
    with_session_links(ui.capped(loops, "loops")),
    hide_index=True,
    key="polling-loops",
    column_order=[
        "open",
        "outcome",
        "session_id",
        "msg_idx",
        "interval_s",
        "max_iterations",
        "iterations_done",
        "waited_s",
        "max_wait_s",
        "target",
        "command",
    ],
    column_config=link,
)

st.subheader("Aborts")
st.caption("Each user abort and the tool call it interrupted.")
st.dataframe(
    with_session_links(ui.capped(stops, "aborts")),
    hide_index=True,
    key="polling-aborts",
    column_order=[
        "open",
        "session_id",
        "msg_idx",
        "abort_text",
        "interrupted_tool",
        "interrupted_status",
        "was_polling",
        "ran_s",
        "interrupted_command",
    ],
    column_config=link,
)

st.subheader("Check-in latency")
st.caption(
    "silence_before_s: how long since the previous message when the user asked; "
    "reply_after_s: how long until the assistant answered."
)
st.dataframe(
    with_session_links(ui.capped(checkins, "check-ins")),
    hide_index=True,
    key="polling-checkins",
    column_order=[
        "open",
        "session_id",
        "msg_idx",
        "checkin_text",
        "prev_role",
        "silence_before_s",
        "reply_after_s",
    ],
    column_config=link,
)
