"""Scoring the tags in a database against a labelled gold set.

A gold file is a TSV with the columns ``file, source_id, tag, label, note``:
``label`` is 1 when the record has the tag and 0 when it was checked and does
not. ``file`` is the transcript path relative to the repository root (or
absolute); it is matched to ``sessions.source_path`` by resolved path, then by
the longest path suffix. Only labelled (record, tag) pairs are scored.
"""

from __future__ import annotations

import csv
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from analytics.errors import AnalyticsError
from analytics.models import TAGS

GOLD_COLUMNS = ("file", "source_id", "tag", "label", "note")


class GoldError(AnalyticsError):
    """The gold file is missing or malformed."""


@dataclass(frozen=True)
class GoldRow:
    file: str
    source_id: str
    tag: str
    label: int
    note: str = ""


@dataclass
class EvalItem:
    """A gold record the tagger got wrong (or could not find)."""

    file: str
    source_id: str
    tag: str
    session_id: str | None
    msg_idx: int | None
    text: str
    note: str = ""


@dataclass
class TagScore:
    tag: str
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def support(self) -> int:
        """Gold positives."""
        return self.tp + self.fn

    @property
    def precision(self) -> float:
        if self.tp + self.fp == 0:
            return 1.0 if self.support == 0 else 0.0
        return self.tp / (self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self.tp / self.support if self.support else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class EvalResult:
    scores: dict[str, TagScore] = field(default_factory=dict)
    false_positives: list[EvalItem] = field(default_factory=list)
    false_negatives: list[EvalItem] = field(default_factory=list)
    unmatched: list[GoldRow] = field(default_factory=list)
    """Gold rows whose file or record is not in the database."""
    n_gold: int = 0

    def f1(self, tag: str) -> float:
        return self.scores[tag].f1 if tag in self.scores else 0.0


def read_gold(path: Path) -> list[GoldRow]:
    """Rows of a gold TSV (header required; lines starting with ``#`` ignored)."""
    if not path.is_file():
        raise GoldError(f"{path}: no such gold file; expected a TSV with columns {', '.join(GOLD_COLUMNS)}")
    rows: list[GoldRow] = []
    with path.open(encoding="utf-8", newline="") as fh:
        lines = (line for line in fh if line.strip() and not line.startswith("#"))
        reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = [c for c in GOLD_COLUMNS[:4] if c not in (reader.fieldnames or [])]
        if missing:
            raise GoldError(f"{path}: missing columns {missing}; the header must be {' TAB '.join(GOLD_COLUMNS)}")
        for n, rec in enumerate(reader, 2):
            label = (rec.get("label") or "").strip()
            if label not in ("0", "1"):
                raise GoldError(f"{path}:{n}: label must be 0 or 1, got {label!r}")
            rows.append(
                GoldRow(
                    file=rec["file"].strip(),
                    source_id=rec["source_id"].strip(),
                    tag=rec["tag"].strip(),
                    label=int(label),
                    note=(rec.get("note") or "").strip(),
                )
            )
    return rows


def repo_root(start: Path) -> Path:
    """The nearest folder above ``start`` holding pyproject.toml (else the cwd)."""
    for parent in [start.resolve(), *start.resolve().parents]:
        if (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def gold_file_path(gold: Path, file: str) -> Path:
    p = Path(file)
    return p if p.is_absolute() else repo_root(gold.parent) / p


def _match_sessions(gold: Path, files: set[str], sessions: list[tuple[str, str]]) -> dict[str, list[str]]:
    """gold file -> session ids, by resolved path, folder containment, then longest suffix."""
    resolved = [(sid, Path(sp).resolve(), Path(sp).parts) for sid, sp in sessions if sp]
    out: dict[str, list[str]] = {}
    for f in files:
        target = gold_file_path(gold, f).resolve()
        hits = [sid for sid, rp, _ in resolved if rp == target or target in rp.parents]
        if not hits:
            parts = Path(f).parts
            parts = tuple(p for p in parts if p not in ("..", "."))
            for k in range(len(parts), 0, -1):
                tail = parts[-k:]
                hits = [sid for sid, _, sp in resolved if tuple(sp[-k:]) == tail]
                if hits:
                    break
        out[f] = hits
    return out


def evaluate(gold: Path, con: duckdb.DuckDBPyConnection) -> EvalResult:
    """Per-tag precision/recall/F1 of the ``tags`` table against ``gold``."""
    gold = Path(gold)
    rows = read_gold(gold)
    sessions = con.execute("SELECT session_id, source_path FROM sessions").fetchall()
    by_file = _match_sessions(gold, {r.file for r in rows}, sessions)
    wanted = {sid for sids in by_file.values() for sid in sids}
    msgs: dict[tuple[str, str], list[tuple[str, int, str]]] = defaultdict(list)
    tags: set[tuple[str, int, str]] = set()
    if wanted:
        ids = sorted(wanted)
        for sid, idx, source_id, text in con.execute(
            "SELECT session_id, msg_idx, source_id, text FROM messages WHERE list_contains(?, session_id)",
            [ids],
        ).fetchall():
            msgs[(sid, str(source_id))].append((sid, idx, text or ""))
        tags = {
            (sid, idx, tag)
            for sid, idx, tag in con.execute(
                "SELECT session_id, msg_idx, tag FROM tags "
                "WHERE list_contains(?, session_id) AND coalesce(source, 'rules') <> 'human'",
                [ids],
            ).fetchall()
        }
    result = EvalResult(n_gold=len(rows))
    for tag in TAGS:
        result.scores[tag] = TagScore(tag)
    for row in rows:
        hits = [m for sid in by_file.get(row.file, []) for m in msgs.get((sid, row.source_id), [])]
        if not hits:
            result.unmatched.append(row)
            continue
        predicted = any((sid, idx, row.tag) in tags for sid, idx, _ in hits)
        score = result.scores.setdefault(row.tag, TagScore(row.tag))
        sid, idx, text = hits[0]
        item = EvalItem(row.file, row.source_id, row.tag, sid, idx, text[:400], row.note)
        if row.label and predicted:
            score.tp += 1
        elif row.label:
            score.fn += 1
            result.false_negatives.append(item)
        elif predicted:
            score.fp += 1
            result.false_positives.append(item)
        else:
            score.tn += 1
    return result


def evaluate_files(gold: Path, db: Path | None = None, rules: Path | None = None) -> EvalResult:
    """Ingest the transcripts a gold file names (into ``db`` or a temporary database) and score them."""
    from analytics.ingest import ingest

    gold = Path(gold)
    files = sorted({r.file for r in read_gold(gold)})
    paths = [gold_file_path(gold, f) for f in files]
    paths = [p for p in paths if p.exists()]
    with tempfile.TemporaryDirectory() as tmp:
        target = db or Path(tmp) / "eval.duckdb"
        ingest(paths, db=target, rules=rules, build_index=False)
        con = duckdb.connect(str(target), read_only=True)
        try:
            return evaluate(gold, con)
        finally:
            con.close()


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def format_eval(result: EvalResult, max_errors: int = 15) -> str:
    """A plain-text table (no colours) for the CLI and logs."""
    head = f"{'tag':<16} {'support':>7} {'tp':>4} {'fp':>4} {'fn':>4} {'precision':>9} {'recall':>7} {'f1':>6}"
    lines = [head, "-" * len(head)]
    tot = TagScore("micro")
    for tag, s in result.scores.items():
        if s.tp + s.fp + s.fn + s.tn == 0:
            continue
        tot.tp, tot.fp, tot.fn, tot.tn = tot.tp + s.tp, tot.fp + s.fp, tot.fn + s.fn, tot.tn + s.tn
        lines.append(
            f"{tag:<16} {s.support:>7} {s.tp:>4} {s.fp:>4} {s.fn:>4} "
            f"{s.precision:>9.3f} {s.recall:>7.3f} {s.f1:>6.3f}"
        )
    lines.append("-" * len(head))
    lines.append(
        f"{'micro':<16} {tot.support:>7} {tot.tp:>4} {tot.fp:>4} {tot.fn:>4} "
        f"{tot.precision:>9.3f} {tot.recall:>7.3f} {tot.f1:>6.3f}"
    )
    matched = result.n_gold - len(result.unmatched)
    lines.append(f"{result.n_gold} gold rows, {matched} matched, {len(result.unmatched)} not found in the database")
    for title, items in (("False positives", result.false_positives), ("False negatives", result.false_negatives)):
        if items:
            lines.append(f"\n{title} ({len(items)}):")
            for it in items[:max_errors]:
                lines.append(f"  {it.tag:<15} {Path(it.file).name}:{it.source_id}  {_one_line(it.text)}")
            if len(items) > max_errors:
                lines.append(f"  … {len(items) - max_errors} more")
    if result.unmatched:
        lines.append(f"\nNot found ({len(result.unmatched)}):")
        for row in result.unmatched[:max_errors]:
            lines.append(f"  {row.tag:<15} {row.file}:{row.source_id}")
    return "\n".join(lines)
