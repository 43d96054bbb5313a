"""The Campaign page: a metric over a session with lever markers and the target."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import duckdb
import pandas as pd

from analytics.models import PROSE_SOURCES
from analytics.store.db import sql_string

if TYPE_CHECKING:
    import altair as alt

OUTCOME_COLOURS = {
    "improved": "#2ca02c",
    "no_effect": "#7f7f7f",
    "worse": "#d62728",
    "failed": "#9467bd",
    "not_applicable": "#bcbd22",
    "pending": "#1f77b4",
}


def campaigns(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every campaign with its number of levers."""
    return con.execute(
        """
        SELECT c.campaign_id, c.session_id, c.goal_text, c.target_metric, c.target_value,
               c.unit, c.baseline_value, c.best_value, c.start_msg_idx, c.end_msg_idx, c.status,
               (SELECT count(*) FROM levers l WHERE l.campaign_id = c.campaign_id
                  AND l.session_id = c.session_id) AS levers
        FROM campaigns c ORDER BY c.session_id, c.start_msg_idx NULLS LAST, c.campaign_id
        """
    ).df()


def campaign_series(con: duckdb.DuckDBPyConnection, campaign_id: str) -> pd.DataFrame:
    """Measurements of the campaign's target metric inside its message range (those a
    tool measured, as the campaign was judged on), with the message time when known."""
    prose = ", ".join(sql_string(s) for s in PROSE_SOURCES)
    return con.execute(
        f"""
        SELECT m.msg_idx, msg.ts, m.value, m.unit, m.label, m.metric
        FROM campaigns c
        JOIN measurements m ON m.session_id = c.session_id
             AND (c.target_metric IS NULL OR m.metric = c.target_metric)
             AND m.msg_idx BETWEEN coalesce(c.start_msg_idx, 0)
                               AND coalesce(c.end_msg_idx, 2147483647)
             AND coalesce(m.source, '') NOT IN ({prose})
        LEFT JOIN messages msg ON msg.session_id = m.session_id AND msg.msg_idx = m.msg_idx
        WHERE c.campaign_id = ?
        ORDER BY m.msg_idx
        """,
        [campaign_id],
    ).df()


def campaign_levers(con: duckdb.DuckDBPyConnection, campaign_id: str) -> pd.DataFrame:
    """The levers tried in the campaign, in order."""
    return con.execute(
        """
        SELECT l.seq, l.name, l.outcome, l.value_before, l.value_after, l.delta_pct,
               l.metric, l.start_msg_idx, l.end_msg_idx, l.evidence_msg_idx, l.description,
               l.session_id, coalesce(l.evidence_msg_idx, l.end_msg_idx, l.start_msg_idx) AS msg_idx
        FROM levers l WHERE l.campaign_id = ? ORDER BY l.seq, l.start_msg_idx
        """,
        [campaign_id],
    ).df()


def use_log_scale(values: pd.Series, target: float | None) -> bool:
    """A log axis when the target is an order of magnitude away from the values,
    so both the progress and the remaining distance stay visible."""
    points = [float(v) for v in values.dropna()]
    if target is not None and not pd.isna(target):
        points.append(float(target))
    return bool(points) and min(points) > 0 and max(points) / min(points) >= 10


def _with_conditions(series: pd.DataFrame, goal_concurrency: int | None = None) -> pd.DataFrame:
    """The series with ``conditions``: the load a run was measured under (its label
    without the keys that only name the run, as campaigns compare them; ``load_name``),
    the goal's load marked."""
    from analytics.analysis.campaigns import load_name

    labels = series["label"] if "label" in series else pd.Series(None, index=series.index)
    return series.assign(
        conditions=[
            (load_name(lb, goal_concurrency) if isinstance(lb, str) else None) or "all runs"
            for lb in labels
        ]
    )


def campaign_chart(
    series: pd.DataFrame, levers: pd.DataFrame, target: float | None, metric: str,
    goal_text: str | None = None,
) -> alt.LayerChart:
    """Metric over message order, a line per load condition (runs at concurrency 1 and 16
    are not one series, as in the report's chart), the load the goal names (in
    ``goal_text``) marked as such; a rule per lever coloured by outcome, at its end, with
    its result where it was measured; the target line."""
    import altair as alt

    from analytics.analysis.campaigns import stated_concurrency

    x = alt.X("msg_idx:Q", title="message")
    log = use_log_scale(series["value"], target)
    y_scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    layers: list[alt.Chart] = [
        alt.Chart(_with_conditions(series, stated_concurrency(goal_text or "")))
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("value:Q", title=f"{metric} (log scale)" if log else metric, scale=y_scale),
            color=alt.Color("conditions:N", title="load"),
            tooltip=["msg_idx", "value", "unit", "conditions", "label"],
        )
    ]
    if not levers.empty:
        ends = levers["end_msg_idx"].fillna(levers["start_msg_idx"])
        result = levers["evidence_msg_idx"] if "evidence_msg_idx" in levers else ends
        marks = levers.assign(at=ends, at_result=result.fillna(ends))
        colour = alt.Color(
            "outcome:N",
            scale=alt.Scale(domain=list(OUTCOME_COLOURS), range=list(OUTCOME_COLOURS.values())),
            title="lever outcome",
        )
        layers.append(
            alt.Chart(marks)
            .mark_rule(strokeDash=[4, 3], strokeWidth=2)
            .encode(
                x=alt.X("at:Q"),
                color=colour,
                tooltip=["seq", "name", "outcome", "value_before", "value_after", "delta_pct"],
            )
        )
        layers.append(
            alt.Chart(marks.dropna(subset=["value_after"]))
            .mark_point(size=90, filled=True)
            .encode(x="at_result:Q", y="value_after:Q", color=colour, tooltip=["name", "outcome"])
        )
    if target is not None and not pd.isna(target):
        layers.append(
            alt.Chart(pd.DataFrame({"target": [target]}))
            .mark_rule(color="black")
            .encode(y="target:Q", tooltip=["target"])
        )
    chart = alt.layer(*layers, height=360).resolve_scale(color="independent")
    return cast("alt.LayerChart", chart)
