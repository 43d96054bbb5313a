"""Agreement statistics for human labels: against automatic tags, and between annotators."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import combinations

import pandas as pd

ITEM = ["session_id", "msg_idx", "tag"]


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def tag_precision_recall(labels: pd.DataFrame) -> pd.DataFrame:
    """Per tag, automatic tags scored against human labels.

    ``labels`` has one row per human label: columns ``tag``, ``value`` (the human
    says the tag applies) and ``auto`` (an automatic tag is on that message).
    """
    rows = []
    for tag, g in labels.groupby("tag", sort=True):
        human, auto = g["value"].astype(bool), g["auto"].astype(bool)
        tp = int((human & auto).sum())
        fp = int((~human & auto).sum())
        fn = int((human & ~auto).sum())
        precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        f1 = (
            2 * precision * recall / (precision + recall)
            if precision is not None and recall is not None and precision + recall > 0
            else None
        )
        rows.append(
            {
                "tag": tag,
                "labels": len(g),
                "tp": tp,
                "fp": fp,
                "fn": fn,
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    cols = ["tag", "labels", "tp", "fp", "fn", "precision", "recall", "f1"]
    return pd.DataFrame(rows, columns=cols)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items (None when undefined)."""
    if len(a) != len(b):
        raise ValueError(f"raters labelled different numbers of items: {len(a)} vs {len(b)}")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    categories = set(a) | set(b)
    expected = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in categories)
    if expected == 1:
        return 1.0 if observed == 1 else None
    return (observed - expected) / (1 - expected)


def annotator_agreement(labels: pd.DataFrame) -> pd.DataFrame:
    """Per pair of annotators: items both labelled, raw agreement, Cohen's kappa.

    ``labels`` has columns session_id, msg_idx, tag, annotator, value (one
    current label per annotator and item)."""
    cols = ["annotator_a", "annotator_b", "items", "agreement", "kappa"]
    rows = []
    wide = labels.pivot_table(index=ITEM, columns="annotator", values="value", aggfunc="last")
    for x, y in combinations(sorted(wide.columns), 2):
        both = wide[[x, y]].dropna()
        a = both[x].astype(bool).tolist()
        b = both[y].astype(bool).tolist()
        agree = _ratio(sum(p == q for p, q in zip(a, b, strict=True)), len(a))
        rows.append(
            {
                "annotator_a": x,
                "annotator_b": y,
                "items": len(a),
                "agreement": agree,
                "kappa": cohen_kappa(a, b),
            }
        )
    return pd.DataFrame(rows, columns=cols)
