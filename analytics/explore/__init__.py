"""Query functions behind the Streamlit explorer (``app/``).

All SQL of the explorer lives in this package; each function takes a DuckDB
connection and returns a pandas DataFrame, so notebooks can use them too.
The Streamlit glue is in :mod:`analytics.explore.ui` (imported only by pages).
"""

from analytics.explore.agreement import annotator_agreement, cohen_kappa, tag_precision_recall
from analytics.explore.annotate import TAG_VOCABULARY, current_labels, save_labels
from analytics.explore.campaigns import campaign_chart, campaign_levers, campaign_series, campaigns
from analytics.explore.launcher import app_path, run_app, streamlit_command
from analytics.explore.polling import aborts, checkin_latency, polling_loops
from analytics.explore.readiness import claims
from analytics.explore.sandbox import (
    EXAMPLE_QUERIES,
    SqlRefusedError,
    run_readonly_sql,
    sandbox_connection,
    schema_df,
)
from analytics.explore.search import search_messages
from analytics.explore.sessions import SessionFilter, filter_sessions, sessions_overview
from analytics.explore.stream import message_window, resolve_message, tool_calls_between

__all__ = [
    "EXAMPLE_QUERIES",
    "TAG_VOCABULARY",
    "SessionFilter",
    "SqlRefusedError",
    "aborts",
    "annotator_agreement",
    "app_path",
    "campaign_chart",
    "campaign_levers",
    "campaign_series",
    "campaigns",
    "checkin_latency",
    "claims",
    "cohen_kappa",
    "current_labels",
    "filter_sessions",
    "message_window",
    "polling_loops",
    "resolve_message",
    "run_app",
    "run_readonly_sql",
    "sandbox_connection",
    "save_labels",
    "schema_df",
    "search_messages",
    "sessions_overview",
    "streamlit_command",
    "tag_precision_recall",
    "tool_calls_between",
]
