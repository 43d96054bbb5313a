"""Transcript explorer: routing only. Pages live in app/views/ (not pages/, which Streamlit would also list on its own), logic in analytics.explore."""

import streamlit as st

st.set_page_config(page_title="Transcript explorer", page_icon="🧭", layout="wide")

PAGES = [
    st.Page("views/sessions.py", title="Sessions", icon="📋", url_path="sessions", default=True),
    st.Page("views/session.py", title="Session", icon="💬", url_path="session"),
    st.Page("views/campaign.py", title="Campaign", icon="📈", url_path="campaign"),
    st.Page("views/readiness.py", title="Readiness", icon="✅", url_path="readiness"),
    st.Page("views/polling.py", title="Polling & aborts", icon="⏳", url_path="polling"),
    st.Page("views/search.py", title="Search", icon="🔍", url_path="search"),
    st.Page("views/sql.py", title="SQL", icon="🧮", url_path="sql"),
    st.Page("views/annotate.py", title="Annotate", icon="🏷️", url_path="annotate"),
]

st.navigation(PAGES).run()
