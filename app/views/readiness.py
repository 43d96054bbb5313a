"""Readiness: claims that something is up/ready/fixed, with verdicts and evidence."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.links import with_session_links
from analytics.explore.readiness import VERDICTS, claim_roles, claims, verdict_counts
from analytics.explore.stream import messages_by_idx

st.title("Readiness claims")

scope = ui.session_scope("readiness-session")
everything = ui.query(claims, (), scope)
for col, (verdict, n) in zip(
    st.columns(len(VERDICTS)), verdict_counts(everything).items(), strict=True
):
    col.metric(verdict, n)

picked = st.multiselect("Verdict", list(VERDICTS), key="readiness-verdicts")
shown = ui.capped(ui.query(claims, tuple(picked), scope), "claims")
if shown.empty:
    st.info("No readiness claims match.")
    st.stop()

selection = st.dataframe(
    with_session_links(shown),
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    column_order=[
        "open",
        "verdict",
        "claim_text",
        "reason",
        "subject",
        "session_id",
        "msg_idx",
        "ts",
        "evidence_msg_idx",
        "contradicted_by_msg_idx",
    ],
    column_config={"open": ui.link_column()},
    key="readiness-table",
)
rows = selection.selection.rows if selection else []
claim = shown.iloc[rows[0] if rows else 0]

st.subheader("Evidence")
st.caption("Select a claim in the table to see its evidence here.")
ui.session_link(claim["session_id"], claim["msg_idx"], label="Open the claim in its session")
st.text(f"{claim['verdict']}: {claim['reason']}")
roles = claim_roles(claim["msg_idx"], claim["evidence_msg_idx"], claim["contradicted_by_msg_idx"])
for m in ui.query(messages_by_idx, claim["session_id"], tuple(roles)).itertuples():
    with st.container(border=True):
        label = f"{roles[int(m.msg_idx)]}: #{m.msg_idx}"
        ui.session_link(claim["session_id"], m.msg_idx, label=label)
        ui.show_text(m.text)
