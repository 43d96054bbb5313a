"""Campaign: the target metric over the session, lever markers by outcome, target line."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.campaigns import (
    campaign_chart,
    campaign_levers,
    campaign_series,
    campaigns,
)
from analytics.explore.links import with_session_links

st.title("Campaign")

all_campaigns = ui.query(campaigns)
if all_campaigns.empty:
    st.info("No optimisation campaigns were detected in this database.")
    st.stop()

ids = all_campaigns["campaign_id"].tolist()
ui.follow_param("campaign", "campaign-pick")
if st.session_state.get("campaign-pick") not in ids:
    st.session_state["campaign-pick"] = ids[0]
cid = st.selectbox(
    "Campaign",
    ids,
    key="campaign-pick",
    format_func=lambda c: f"{c} ({all_campaigns.set_index('campaign_id').loc[c, 'session_id']})",
)
st.query_params["campaign"] = cid
row = all_campaigns.set_index("campaign_id").loc[cid]

st.subheader("Goal")
ui.show_text(row["goal_text"])
m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("Target", ui.md_escape(f"{row['target_value']:g} {row['unit'] or ''}"))
m2.metric("Baseline", ui.number(row["baseline_value"], row["unit"]))
m3.metric("Best", ui.number(row["best_value"], row["unit"]))
m4.metric("Levers", int(row["levers"]))
m5.metric("Status", ui.md_escape(row["status"]))
ui.session_link(row["session_id"], row["start_msg_idx"], label="Open the session at the goal")

series = ui.query(campaign_series, cid)
levers = ui.query(campaign_levers, cid)
if series.empty:
    st.warning("No measurements of the target metric inside this campaign.")
else:
    st.altair_chart(
        campaign_chart(
            series, levers, row["target_value"], str(row["target_metric"]), row["goal_text"]
        ),
        key="campaign-chart",
    )

st.subheader("Levers")
st.dataframe(
    with_session_links(levers),
    hide_index=True,
    column_order=[
        "open",
        "seq",
        "name",
        "outcome",
        "value_before",
        "value_after",
        "delta_pct",
        "start_msg_idx",
        "end_msg_idx",
        "description",
    ],
    column_config={
        "open": ui.link_column(),
        "delta_pct": st.column_config.NumberColumn("Δ %", format="%+.1f"),
    },
    key="campaign-levers",
)
