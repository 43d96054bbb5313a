"""Annotate: human labels for messages, and how they agree with tags and each other."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.agreement import annotator_agreement, tag_precision_recall
from analytics.explore.annotate import (
    TAG_VOCABULARY,
    current_labels,
    labels_from_choice,
    message_for_labelling,
)

st.title("Annotate")

labels = ui.session_labels("No sessions to annotate yet.")
ui.follow_param("session", "annotate-session")
if st.session_state.get("annotate-session") not in labels:
    st.session_state["annotate-session"] = next(iter(labels))
if ui.follow_param("msg", "annotate-msg-text"):
    st.session_state["annotate-msg"] = ui.int_param("msg") or 0

c1, c2, c3 = st.columns([2, 4, 1])
annotator = c1.text_input("Annotator", key="annotate-annotator", placeholder="your name")
sid: str = c2.selectbox(
    "Session", list(labels), format_func=lambda s: labels.get(s, s), key="annotate-session"
)
idx = int(c3.number_input("Message #", min_value=0, step=1, key="annotate-msg"))

msg = ui.query(message_for_labelling, sid, idx)
if msg.empty:
    st.warning(f"Message #{idx} does not exist in this session.")
else:
    m = msg.iloc[0]
    with st.container(border=True):
        st.markdown(
            f"**#{idx}** · {ui.md_escape(m['role'])} · automatic tags: "
            f"{ui.badges(m['auto_tags']) or 'none'}"
        )
        ui.show_text(m["text"])
    with st.form("annotate-form", clear_on_submit=True):
        chosen = st.multiselect("Tags that apply", TAG_VOCABULARY, key="annotate-tags")
        negatives = st.checkbox(
            "Record every other tag as not applying", value=True, key="annotate-negatives"
        )
        note = st.text_input("Note (optional)", key="annotate-note")
        if st.form_submit_button("Save labels", type="primary"):
            values = labels_from_choice(chosen, negatives)
            if ui.save_annotation(sid, idx, values, annotator, note):
                st.session_state["annotate-next"] = idx + 1
    if "annotate-next" in st.session_state:
        st.button(
            "Next message ▶",
            key="annotate-go-next",
            on_click=lambda: st.session_state.update(
                {"annotate-msg": st.session_state.pop("annotate-next")}
            ),
        )

st.header("Agreement")
current = ui.query(current_labels)
if current.empty:
    st.info("No human labels yet.")
    st.stop()
st.subheader("Automatic tags vs human labels")
st.dataframe(tag_precision_recall(current), hide_index=True, key="annotate-pr")
st.subheader("Between annotators (Cohen's kappa)")
st.dataframe(annotator_agreement(current), hide_index=True, key="annotate-kappa")
st.subheader("Recent labels")
st.dataframe(current.head(200), hide_index=True, key="annotate-recent")
