"""Session: one session's messages with tag chips, tool calls, jump, search and tag filter."""

import streamlit as st

from analytics.analysis.literals import text_of
from analytics.explore import ui
from analytics.explore.stream import (
    call_input_text,
    count_matching,
    message_window,
    previous_start,
    resolve_message,
    session_info,
    session_tag_counts,
    tool_calls_between,
)

OUTPUT_CHARS = 20000

st.title("Session")

labels = ui.session_labels("No sessions yet. Ingest transcripts with `transcripts ingest PATH`.")
asked = ui.query_param("session")
if ui.follow_param("session", "session-pick") and asked and asked not in labels:
    st.warning(f"No session {ui.md_escape(asked)}; pick one below.")
    st.session_state.pop("session-pick", None)
sid: str = st.selectbox(
    "Session", list(labels), format_func=lambda s: labels.get(s, s), key="session-pick"
)
if asked and sid != asked:  # picked here: the link's ?msg= was the other session's
    st.query_params.pop("msg", None)
st.query_params["session"] = sid

info = ui.query(session_info, sid).iloc[0]
st.caption(
    " · ".join(
        ui.md_escape(v)
        for v in (info["source_format"], info["agent"], info["model"], info["started_at"])
        if v is not None and str(v) != "NaT"
    )
)

tag_counts = ui.query(session_tag_counts, sid)
c1, c2, c3, c4 = st.columns([2, 3, 3, 1])
jump = c1.text_input("Jump to message", placeholder="native id or msg index", key="session-jump")
contains = c2.text_input("Search in this session", key="session-search")
tags = c3.multiselect(
    "Only messages tagged",
    tag_counts["tag"].tolist(),
    key="session-tags",
    format_func=lambda t: f"{t} ({int(tag_counts.set_index('tag').loc[t, 'n'])})",
)
size = c4.selectbox("Per page", [25, 50, 100, 200], index=1, key="session-size")

state = st.session_state
if ui.follow_param("msg", "session-target-param") or state.get("session-for") != sid:
    target = ui.int_param("msg")
    state["session-for"] = sid
    state["session-target"] = target
    state["session-start"] = max((target or 0) - 2, 0)
if jump and state.get("session-jumped") != (sid, jump):
    state["session-jumped"] = (sid, jump)
    found = ui.query(resolve_message, sid, jump)
    if found is None:
        st.warning(f"No message {ui.md_escape(jump)} in this session.")
    else:
        state["session-target"] = found
        state["session-start"] = max(found - 2, 0)
        ui.set_param("msg", "session-target-param", str(found))
filters = (tuple(tags), contains)
if state.get("session-filters") != filters:
    if state.get("session-filters") is not None:
        state["session-start"] = 0
    state["session-filters"] = filters

start = int(state["session-start"])
window = ui.query(message_window, sid, start, size, tuple(tags), contains)
total = ui.query(count_matching, sid, tuple(tags), contains)


def go(to: int) -> None:
    st.session_state["session-start"] = to


prev_start = ui.query(previous_start, sid, start, size, tuple(tags), contains)
n1, n2, n3, n4 = st.columns([1, 1, 1, 5])
n1.button("⏮ First", on_click=go, args=(0,), disabled=start == 0, key="session-first")
n2.button("◀ Previous", on_click=go, args=(prev_start,), disabled=start == 0, key="session-prev")
last = int(window["msg_idx"].max()) if not window.empty else start
n3.button(
    "Next ▶", on_click=go, args=(last + 1,), disabled=len(window) < size, key="session-next"
)
n4.caption(f"{total:,} matching messages; showing {len(window)} from #{start}")

calls = ui.query(tool_calls_between, sid, start, last)
target = state.get("session-target")
for m in window.itertuples():
    with st.container(border=True):
        mark = "▶ " if m.msg_idx == target else ""
        st.markdown(
            f"{mark}**#{m.msg_idx}** · {ui.md_escape(m.role)} · id {ui.md_escape(m.source_id)}"
            f"{'' if ui.is_missing(m.ts) else ' · ' + ui.md_escape(m.ts)}  {ui.badges(m.tags)}"
        )
        if m.error is not None and isinstance(m.error, str):
            st.text(f"error: {m.error}")
        ui.show_text(m.text)
        for c in calls[calls["msg_idx"] == m.msg_idx].itertuples():
            with st.expander(ui.tool_label(c.tool, c.status, c.exit_code, c.duration_s)):
                given, language = call_input_text(c.command, c.input)
                st.code(given, language=language, wrap_lines=True)
                out = ui.without_ansi(text_of(c.output))
                whole = len(out) > OUTPUT_CHARS and st.toggle(
                    f"Show all {len(out):,} characters ({len(out) - OUTPUT_CHARS:,} more)",
                    key=f"session-full-{sid}-{c.msg_idx}-{c.call_id}",
                )
                cut = len(out) > OUTPUT_CHARS and not whole
                st.code(
                    out[:OUTPUT_CHARS] + " …" if cut else out, language=None, wrap_lines=True
                )
