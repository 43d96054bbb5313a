"""Train the sentence classifier behind the ``diagnosis`` tag (deterministic; dev gold only).

    python scripts/train_diagnosis.py [--gold data/gold/dev.tsv] [--folds 5] [--repeats 3] [--seed 0]
    python scripts/train_diagnosis.py --export-only   # re-export the weights of the shipped model

Examples: ``analytics/analysis/tagging/models/diagnosis_examples.jsonl`` (synthetic sentences
and the cause sentences of positive dev records, each with its source) plus every sentence of
the negative dev records. Held-out gold is never read.

Stages: load dev records (ingest their transcripts into a temporary database, rule hits from a
Tagger without the model) -> k-fold cross-validation over dev records, repeated with other fold
splits (out-of-fold message scores) -> Platt calibration on the pooled scores and the threshold
that maximises the mean dev F1 of "rule hit OR model" -> final model on everything -> ``models/diagnosis/`` (spaCy pipeline + ``tagger.json``).

The tagger does not run the pipeline: it scores with the pipeline's tokenizer and the classifier
weights exported next to it (``weights.npz``), written here with every model.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import spacy
from spacy.language import Language
from spacy.training import Example
from spacy.util import fix_random_seed, minibatch

from analytics.analysis.evaluate import gold_file_path
from analytics.analysis.rows import load_contexts
from analytics.analysis.tagging import pipeline
from analytics.analysis.tagging.diagnosis_model import (
    LABEL,
    MODEL_DIR,
    SETTINGS_FILE,
    WEIGHTS_FILE,
    BowWeights,
    candidates,
    sentences,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = MODEL_DIR.parent / "diagnosis_examples.jsonl"
OTHER = "other"
EPOCHS = 20
DROPOUT = 0.2
BOW = {
    "@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True,
    "ngram_size": 1, "no_output_layer": False, "length": 2**17, "nO": None,
}


@dataclass(frozen=True)
class DevRecord:
    key: str
    """``file|source_id``"""
    label: int
    text: str
    rule_hit: bool


# --- stage 1: dev records ------------------------------------------------------

def read_dev(gold: Path) -> dict[str, tuple[str, str, int]]:
    out: dict[str, tuple[str, str, int]] = {}
    with gold.open(newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["tag"] == LABEL:
                out[f"{row['file']}|{row['source_id']}"] = (row["file"], row["source_id"], int(row["label"]))
    return out


def load_records(gold: Path) -> list[DevRecord]:
    """Ingest the dev transcripts; text and rule hit of every labelled assistant record."""
    from analytics.analysis.tagging import Tagger
    from analytics.ingest import ingest

    labelled = read_dev(gold)
    files = sorted({f for f, _, _ in labelled.values()})
    pipeline.DEFAULT_DIAGNOSIS_MODEL = None  # rules only: the model being trained is not used
    tagger = Tagger()
    records: list[DevRecord] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "dev.duckdb"
        ingest([gold_file_path(gold, f) for f in files], db=db, build_index=False)
        con = duckdb.connect(str(db), read_only=True)
        by_path = {Path(p).resolve(): sid for sid, p in con.execute("SELECT session_id, source_path FROM sessions").fetchall()}
        for f in files:
            sid = by_path[gold_file_path(gold, f).resolve()]
            contexts = load_contexts(con, sid, 0, 10**9)
            hits = {t.msg_idx for t in tagger.tag(contexts) if t.tag == LABEL}
            for ctx in contexts:
                key = f"{f}|{ctx.message.source_id}"
                if key in labelled and ctx.message.role == "assistant" and ctx.message.text.strip():
                    text = ctx.message.text[: pipeline.MAX_PROSE_CHARS]
                    records.append(DevRecord(key, labelled[key][2], text, ctx.message.msg_idx in hits))
        con.close()
    return records


def read_examples() -> list[dict[str, object]]:
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    for i, r in enumerate(rows, 1):
        if not {"text", "label", "source"} <= r.keys():
            raise SystemExit(f"Error: {EXAMPLES}:{i}: needs text, label and source")
    return rows


def dev_key(source: object) -> str | None:
    """``dev gold: <file>|<source_id> (…)`` -> ``<file>|<source_id>``."""
    s = str(source)
    return s.removeprefix("dev gold: ").split(" (", 1)[0] if s.startswith("dev gold: ") else None


def training_sentences(
    records: Iterable[DevRecord], examples: list[dict[str, object]], keep: set[str]
) -> list[tuple[str, int]]:
    """Synthetic sentences, cause sentences of kept positive records, all sentences of kept
    negative records."""
    out = [(str(e["text"]), int(str(e["label"]))) for e in examples
           if dev_key(e["source"]) is None or dev_key(e["source"]) in keep]
    for r in records:
        if r.key in keep and r.label == 0:
            out.extend((r.text[a:b], 0) for a, b in sentences(r.text))
    return out


# --- stage 2: model -------------------------------------------------------------

def train(data: list[tuple[str, int]], seed: int) -> Language:
    fix_random_seed(seed)
    nlp = spacy.blank("en")
    textcat = nlp.add_pipe("textcat", config={"model": BOW})
    textcat.add_label(LABEL)  # type: ignore[attr-defined]
    textcat.add_label(OTHER)  # type: ignore[attr-defined]
    examples = [
        Example.from_dict(nlp.make_doc(t), {"cats": {LABEL: float(y), OTHER: float(1 - y)}})
        for t, y in data
    ]
    optimizer = nlp.initialize(lambda: examples)
    rnd = random.Random(seed)
    for _ in range(EPOCHS):
        rnd.shuffle(examples)
        for batch in minibatch(examples, size=16):
            nlp.update(batch, sgd=optimizer, drop=DROPOUT)
    return nlp


def message_scores(nlp: Language, texts: list[str]) -> list[float]:
    """Best raw sentence score per message over its candidate sentences (0 without one).
    Every sentence that is not quoted: a cue-word prefilter (because, due, fail, …) used to gate
    the model, but it hid exactly the causes stated without cue words that the model is for
    ("it was the torch-compile flag")."""
    out: list[float] = []
    for text in texts:
        cands = [text[a:b] for a, b in candidates(text)]
        out.append(max((d.cats[LABEL] for d in nlp.pipe(cands)), default=0.0))
    return out


# --- stage 3: cross-validation, calibration, threshold ---------------------------

def folds(records: list[DevRecord], k: int, seed: int) -> list[set[str]]:
    rnd = random.Random(seed)
    out: list[set[str]] = [set() for _ in range(k)]
    for label in (0, 1):
        keys = sorted(r.key for r in records if r.label == label)
        rnd.shuffle(keys)
        for i, key in enumerate(keys):
            out[i % k].add(key)
    return out


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def platt(raw: list[float], y: list[int]) -> tuple[float, float]:
    """Logistic regression of y on logit(raw) (Newton's method, a small L2 term)."""
    x = np.array([_logit(p) for p in raw])
    t = np.array(y, dtype=float)
    w = np.array([1.0, 0.0])
    design = np.stack([x, np.ones_like(x)], axis=1)
    for _ in range(50):
        p = 1 / (1 + np.exp(-(design @ w)))
        grad = design.T @ (p - t) + 1e-3 * w
        hess = design.T @ (design * (p * (1 - p))[:, None]) + 1e-3 * np.eye(2)
        w = w - np.linalg.solve(hess, grad)
    return float(w[0]), float(w[1])


def calibrated(raw: float, ab: tuple[float, float]) -> float:
    return 1 / (1 + math.exp(-(ab[0] * _logit(raw) + ab[1])))


def f1(records: list[DevRecord], probs: list[float], threshold: float) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for r, p in zip(records, probs, strict=True):
        pred = r.rule_hit or p >= threshold
        tp += pred and r.label == 1
        fp += pred and r.label == 0
        fn += (not pred) and r.label == 1
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    return prec, rec, (2 * prec * rec / (prec + rec) if prec + rec else 0.0)


def choose_threshold(records: list[DevRecord], repeats: list[list[float]]) -> float:
    """Middle of the widest run of thresholds (0.05..0.95 by 0.01) with the best dev F1, averaged
    over the cross-validation repeats (one repeat's fold split moves a single record's score)."""
    grid = [round(0.05 + 0.01 * i, 2) for i in range(91)]
    scores = [round(float(np.mean([f1(records, probs, t)[2] for probs in repeats])), 6) for t in grid]
    best = max(scores)
    runs: list[list[float]] = []
    for t, s in zip(grid, scores, strict=True):
        if s == best:
            if runs and round(t - runs[-1][-1], 2) == 0.01:
                runs[-1].append(t)
            else:
                runs.append([t])
    widest = max(runs, key=len)
    return round(widest[len(widest) // 2], 2)


def out_of_fold(records: list[DevRecord], examples: list[dict[str, object]], k: int, seed: int) -> list[float]:
    """Raw score of every dev record from a model trained without its fold."""
    all_keys = {r.key for r in records}
    oof: dict[str, float] = {}
    for i, fold in enumerate(folds(records, k, seed)):
        nlp = train(training_sentences(records, examples, all_keys - fold), seed + i)
        held = [r for r in records if r.key in fold]
        oof.update(zip((r.key for r in held), message_scores(nlp, [r.text for r in held]), strict=True))
    return [oof[r.key] for r in records]


def export_weights(nlp: Language) -> None:
    """Write what the tagger scores with (it does not load the pipeline)."""
    BowWeights.from_pipeline(nlp).save(MODEL_DIR / WEIGHTS_FILE)
    print(f"wrote {MODEL_DIR / WEIGHTS_FILE}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gold", type=Path, default=ROOT / "data" / "gold" / "dev.tsv")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--export-only", action="store_true",
                    help="only write the weights file of the pipeline in models/diagnosis/")
    args = ap.parse_args()
    if args.export_only:
        export_weights(spacy.load(MODEL_DIR))
        return
    if "heldout" in args.gold.name:
        raise SystemExit("Error: train on dev gold only; held-out is measured, never trained on")
    records = load_records(args.gold)
    examples = read_examples()
    raws = [out_of_fold(records, examples, args.folds, args.seed + 100 * r) for r in range(args.repeats)]
    labels = [r.label for r in records]
    ab = platt([p for raw in raws for p in raw], labels * args.repeats)
    repeats = [[calibrated(p, ab) for p in raw] for raw in raws]
    threshold = choose_threshold(records, repeats)
    rules_only = f1(records, [0.0] * len(records), 2.0)
    combined = tuple(float(np.mean(x)) for x in zip(*(f1(records, probs, threshold) for probs in repeats), strict=True))
    print(f"dev records: {len(records)} ({sum(labels)} positive); examples: {len(examples)}")
    print(f"cross-validated dev  rules only  P {rules_only[0]:.3f} R {rules_only[1]:.3f} F1 {rules_only[2]:.3f}")
    print(f"cross-validated dev  rules|model P {combined[0]:.3f} R {combined[1]:.3f} F1 {combined[2]:.3f}"
          f"  ({args.folds} folds x {args.repeats} repeats; threshold {threshold}, platt a={ab[0]:.3f} b={ab[1]:.3f})")

    all_keys = {r.key for r in records}
    nlp = train(training_sentences(records, examples, all_keys), args.seed)
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    nlp.to_disk(MODEL_DIR)
    export_weights(nlp)
    settings = {
        "version": f"bow{BOW['ngram_size']}-s{args.seed}-n{len(examples)}+{len(records)}",
        "threshold": threshold,
        "platt": [round(ab[0], 6), round(ab[1], 6)],
        "cv": {"folds": args.folds, "repeats": args.repeats, "precision": round(combined[0], 4), "recall": round(combined[1], 4),
               "f1": round(combined[2], 4), "rules_only_f1": round(rules_only[2], 4)},
        "trained_on": f"{args.gold.relative_to(ROOT) if args.gold.is_relative_to(ROOT) else args.gold} + {EXAMPLES.name}",
    }
    (MODEL_DIR / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")
    size = sum(p.stat().st_size for p in MODEL_DIR.rglob("*") if p.is_file())
    print(f"wrote {MODEL_DIR} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
