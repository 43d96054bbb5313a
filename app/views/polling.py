"""Polling & aborts: waiting loops, user interruptions and check-in latency."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.polling import (
    aborts,
    checkin_latency,
    polling_by_outcome,
    polling_loops,
    waits,
)

st.title("Polling & aborts")

scope = ui.session_scope("polling-session")
loops = ui.query(polling_loops, scope)
spans = ui.query(waits, scope)
stops = ui.query(aborts, scope)
checkins = ui.query(checkin_latency, scope)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Polling loops", len(loops))
m2.metric("Waited (h)", f"{loops['waited_s'].sum() / 3600:,.2f}")
m3.metric("Aborts", len(stops))
m4.metric("Check-ins", len(checkins))

st.subheader("Waits")
st.caption(
    "The polls of one target taken together, until one ends the wait (ready, failed, aborted, "
    "timeout) or a server is launched; checkins: the user's check-ins between its first and "
    "last poll."
)
ui.linked_table(
    spans,
    "waits",
    "polling-waits",
    ["outcome", "session_id", "msg_idx", "last_msg_idx", "polls", "waited_s", "checkins",
     "interval_min_s", "interval_max_s", "target"],
)

st.subheader("Polling loops")
st.dataframe(polling_by_outcome(loops), hide_index=True, key="polling-outcomes")
ui.linked_table(
    loops,
    "loops",
    "polling-loops",
    [
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
)

st.subheader("Aborts")
st.caption("Each user abort and the tool call it interrupted.")
ui.linked_table(
    stops,
    "aborts",
    "polling-aborts",
    [
        "session_id",
        "msg_idx",
        "abort_text",
        "interrupted_tool",
        "interrupted_status",
        "was_polling",
        "ran_s",
        "interrupted_command",
    ],
)

st.subheader("Check-in latency")
st.caption(
    "silence_before_s: how long since the previous message when the user asked; "
    "reply_after_s: how long until the assistant answered."
)
ui.linked_table(
    checkins,
    "check-ins",
    "polling-checkins",
    ["session_id", "msg_idx", "checkin_text", "prev_role", "silence_before_s", "reply_after_s"],
)
