"""Search: ranked full-text search across all sessions."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.links import with_session_links
from analytics.explore.search import search_messages

st.title("Search")

labels: dict[str, str] = {"": "All sessions"} | ui.session_labels()
ui.follow_param("q", "search-q")
c1, c2, c3 = st.columns([4, 2, 1])
q = c1.text_input(
    "Search messages and tool output",
    key="search-q",
    placeholder="e.g. out of memory, ready?, cuda graph",
)
scope = c2.selectbox("In", list(labels), format_func=lambda s: labels.get(s, s), key="search-scope")
limit = c3.number_input("Max hits", 10, 1000, 50, step=10, key="search-limit")
if not q.strip():
    st.info("Type words to search for; results are ranked, best first.")
    st.stop()
st.query_params["q"] = q

hits = ui.query(search_messages, q, int(limit), scope or None)
st.caption(f"{len(hits):,} hits ({hits.attrs.get('engine', 'search')})")
if hits.empty:
    st.stop()
st.dataframe(
    with_session_links(hits),
    hide_index=True,
    key="search-results",
    column_order=["open", "score", "session_id", "msg_idx", "role", "kind", "snippet"],
    column_config={
        "open": ui.link_column(),
        "score": st.column_config.NumberColumn("score", format="%.3f"),
    },
)
st.subheader("Top hits")
for h in hits.head(10).itertuples():
    with st.container(border=True):
        ui.session_link(h.session_id, h.msg_idx)
        ui.show_text(h.snippet)
