"""SQL: a read-only console over the database, with the schema beside it."""

import streamlit as st

from analytics.explore import ui
from analytics.explore.sandbox import EXAMPLE_QUERIES, schema_df

st.title("SQL console")
st.caption(
    "One read-only query at a time (SELECT, WITH, DESCRIBE, SHOW, EXPLAIN); "
    "no file or network access; at most 10,000 rows; 10 s limit."
)

examples = list(EXAMPLE_QUERIES)
if ui.follow_param("sql", "sql-text"):
    st.session_state["sql-autorun"] = bool(ui.query_param("sql"))
if "sql-text" not in st.session_state:
    st.session_state["sql-text"] = EXAMPLE_QUERIES[examples[0]]


def use_example() -> None:
    st.session_state["sql-text"] = EXAMPLE_QUERIES[st.session_state["sql-example"]]


left, right = st.columns([3, 1])
with left:
    st.selectbox("Example queries", examples, key="sql-example", on_change=use_example)
    sql = st.text_area("Query", key="sql-text", height=180)
    if st.button("Run", type="primary", key="sql-run") or st.session_state.pop(
        "sql-autorun", False
    ):
        st.session_state["sql-result"] = ui.run_sql(sql)
    result = st.session_state.get("sql-result")
    if result is not None:
        shown = result.head(ui.TABLE_ROW_CAP)  # 10k rows of tool output froze the browser
        st.caption(ui.sql_result_note(len(result), bool(result.attrs.get("truncated")), len(shown)))
        st.dataframe(shown, hide_index=True, key="sql-table")
        st.download_button(
            "Download CSV",
            ui.csv_when_clicked(result),
            "query.csv",
            mime="text/csv",
            key="sql-download",
        )
with right:
    st.subheader("Schema")
    schema = ui.query(schema_df)
    for table, cols in schema.groupby("table_name", sort=True):
        with st.expander(ui.md_escape(table)):
            st.dataframe(cols[["column_name", "data_type"]], hide_index=True)
