"""Transcript explorer: routing only. Pages live in app/pages/, logic in analytics.explore."""

import streamlit as st

st.set_page_config(page_title="Transcript explorer", page_icon="🧭", layout="wide")

PAGES = [
    st.Page("pages/sessions.py", title="Sessions", icon="📋", url_path="sessions", default=True),
    st.Page("pages/session.py", title="Session", icon="💬", url_path="session"),
    st.Page("pages/campaign.py", title="Campaign", icon="📈", url_path="campaign"),
    st.Page("pages/readiness.py", title="Readiness", icon="✅", url_path="readiness"),
    st.Page("pages/polling.py", title="Polling & aborts", icon="⏳", url_path="polling"),
    st.Page("pages/search.py", title="Search", icon="🔍", url_path="search"),
    st.Page("pages/sql.py", title="SQL", icon="🧮", url_path="sql"),
    st.Page("pages/annotate.py", title="Annotate", icon="🏷️", url_path="annotate"),
]

st.navigation(PAGES).run()
