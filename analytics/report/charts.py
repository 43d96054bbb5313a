"""Deterministic PNG charts for the postmortem (Agg backend, fixed size and dpi,
no timestamps or software name in the PNG metadata)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analytics.analysis.campaigns import load_name, stated_concurrency  # noqa: E402
from analytics.models import Campaign, Lever  # noqa: E402

FIGSIZE = (8.0, 4.0)
DPI = 100
PNG_METADATA = {"Software": None}
OUTCOME_COLOURS = {
    "improved": "#2a9d3f",
    "no_effect": "#7f7f7f",
    "worse": "#d62728",
    "failed": "#8c2d04",
    "not_applicable": "#bcbcbc",
    "pending": "#1f77b4",
}


def chart_series(campaign: Campaign, rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The measurements ``rows`` of the campaign's metric as the chart's lines: one per
    load (``load_name``: the runs of every launch at concurrency 64 are one line, a run at
    concurrency 128 another), named, in message order; the goal's load is named so."""
    goal_load = stated_concurrency(campaign.goal_text or "")
    loads = [load_name(None if pd.isna(v) else str(v), goal_load) or "" for v in rows["label"]]
    rows = rows.assign(load=loads)
    return [
        (load, rows[rows["load"] == load].sort_values("msg_idx")) for load in sorted(set(loads))
    ]


def metric_chart(
    campaign: Campaign, levers: list[Lever], measurements: pd.DataFrame, out: Path
) -> Path | None:
    """The campaign's metric over the session (x = message index), a line per load
    (``load_name``), levers marked as vertical lines coloured by outcome, target as a dashed
    line when in range."""
    metric = campaign.target_metric
    rows = measurements[measurements["metric"] == metric] if not measurements.empty else None
    if rows is None or rows.empty:
        return None
    plt.rcParams["svg.hashsalt"] = "transcript-analytics"
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for load, part in chart_series(campaign, rows):
        ax.plot(part["msg_idx"], part["value"], marker="o", linewidth=1.2, label=load or metric)
    top = float(rows["value"].max())
    for lever in levers:
        if lever.start_msg_idx is None:
            continue
        colour = OUTCOME_COLOURS.get(lever.outcome, "#000000")
        ax.axvline(lever.start_msg_idx, color=colour, linestyle=":", linewidth=1)
        ax.annotate(
            str(lever.seq),
            (lever.start_msg_idx, top),
            textcoords="offset points",
            xytext=(2, 4),
            fontsize=8,
            color=colour,
        )
    target = campaign.target_value
    if target is not None and target <= top * 1.5:
        ax.axhline(target, color="#444444", linestyle="--", linewidth=1, label=f"target {target:g}")
    elif target is not None:
        ax.set_title(
            f"{metric} (target {target:g} {campaign.unit or ''} is off the chart)", fontsize=9
        )
    if not ax.get_title():
        ax.set_title(f"{metric} over the session; numbers mark levers", fontsize=9)
    ax.set_xlabel("message index")
    ax.set_ylabel(f"{metric} ({campaign.unit})" if campaign.unit else str(metric))
    ax.set_ylim(bottom=0, top=top * 1.15 if target is None or target > top * 1.5 else None)
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=DPI, metadata=PNG_METADATA)
    plt.close(fig)
    return out
