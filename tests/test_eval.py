"""evaluate(): scoring tags against gold TSVs; and the held-out goals on the real samples."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.analysis.evaluate import (
    GoldError,
    evaluate,
    evaluate_files,
    format_eval,
    read_gold,
)
from analytics.store.db import connect

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "data" / "gold"
SHARED = ROOT.parent / "shared" / "samples"
HEADER = "file\tsource_id\ttag\tlabel\tnote\n"


@pytest.fixture()
def con() -> duckdb.DuckDBPyConnection:
    c = connect(":memory:", read_only=False)
    c.execute(
        "INSERT INTO sessions (session_id, source_format, native_id, source_path) VALUES "
        "('s1', 'claude_code', 'n1', '/abs/somewhere/data/samples/a.jsonl'), "
        "('s2', 'codex', 'n2', '/other/place/b.jsonl')"
    )
    msgs = [("s1", 0, "u1", "user", "ok?"), ("s1", 1, "a1", "assistant", "The server is ready."),
            ("s1", 2, "a2", "assistant", "Let me check."), ("s2", 0, "L3", "user", "status?")]
    for sid, idx, src, role, text in msgs:
        c.execute(
            "INSERT INTO messages (session_id, msg_idx, source_id, role, text) VALUES (?, ?, ?, ?, ?)",
            [sid, idx, src, role, text],
        )
    for sid, idx, tag in [("s1", 0, "user_checkin"), ("s1", 2, "readiness_claim"), ("s2", 0, "user_checkin")]:
        c.execute(
            "INSERT INTO tags (session_id, msg_idx, tag, score, source) VALUES (?, ?, ?, 1.0, 'rules')",
            [sid, idx, tag],
        )
    return c


def write(tmp_path: Path, rows: list[str]) -> Path:
    p = tmp_path / "gold.tsv"
    p.write_text(HEADER + "\n".join(rows) + "\n")
    return p


def test_scores_and_error_lists(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    gold = write(tmp_path, [
        "data/samples/a.jsonl\tu1\tuser_checkin\t1\tok?",
        "data/samples/a.jsonl\ta1\treadiness_claim\t1\tclaim",
        "data/samples/a.jsonl\ta2\treadiness_claim\t0\tplan",
        "data/samples/a.jsonl\ta1\tdiagnosis\t0\t",
        "../x/b.jsonl\tL3\tuser_checkin\t1\t",
        "data/samples/a.jsonl\tmissing\tuser_checkin\t1\t",
        "nowhere/c.jsonl\tu1\tuser_checkin\t0\t",
    ])
    r = evaluate(gold, con)
    ck = r.scores["user_checkin"]
    assert (ck.tp, ck.fp, ck.fn) == (2, 0, 0) and ck.f1 == 1.0
    rc = r.scores["readiness_claim"]
    assert (rc.tp, rc.fp, rc.fn, rc.support) == (0, 1, 1, 1)
    assert rc.precision == 0.0 and rc.recall == 0.0 and rc.f1 == 0.0
    assert r.scores["diagnosis"].tn == 1 and r.scores["diagnosis"].f1 == 1.0
    assert [i.source_id for i in r.false_positives] == ["a2"]
    assert r.false_negatives[0].text == "The server is ready."
    assert {u.source_id for u in r.unmatched} == {"missing", "u1"}
    text = format_eval(r)
    assert "readiness_claim" in text and "False positives (1)" in text and "not found" in text


def test_human_tags_are_not_predictions(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    con.execute("INSERT INTO tags (session_id, msg_idx, tag, source) VALUES ('s1', 2, 'diagnosis', 'human')")
    r = evaluate(write(tmp_path, ["data/samples/a.jsonl\ta2\tdiagnosis\t0\t"]), con)
    assert r.scores["diagnosis"].fp == 0


@pytest.mark.parametrize(
    "content,needle",
    [
        ("file\tsource_id\ttag\nx\ty\tz\n", "label"),
        (HEADER + "a\tb\tuser_checkin\tyes\t\n", "0 or 1"),
    ],
)
def test_bad_gold(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "g.tsv"
    p.write_text(content)
    with pytest.raises(GoldError, match=needle):
        read_gold(p)
    with pytest.raises(GoldError, match="no such gold file"):
        read_gold(tmp_path / "absent.tsv")


def test_gold_files_are_well_formed() -> None:
    rows = read_gold(GOLD / "dev.tsv") + read_gold(GOLD / "heldout.tsv")
    assert len(rows) >= 400
    keys = [(r.file, r.source_id, r.tag) for r in rows]
    assert len(keys) == len(set(keys)), "a record/tag is labelled twice"
    dev = {(r.file, r.source_id) for r in read_gold(GOLD / "dev.tsv")}
    held = {(r.file, r.source_id) for r in read_gold(GOLD / "heldout.tsv")}
    assert not dev & held, "dev and held-out share records"
    from analytics.models import TAGS

    assert {r.tag for r in rows} <= set(TAGS)
    assert sum(r.label == 0 for r in rows) > 100  # hard negatives are part of the set


# --- goals on the held-out set (real ingest pipeline) -------------------------

GOALS = {
    "user_checkin": 0.9, "user_abort": 0.9, "polling_loop": 0.9,
    "diagnosis": 0.8, "readiness_claim": 0.8,
    "smoke_test": 0.85, "benchmark": 0.85, "error": 0.85, "launch": 0.85,
}
KNOWN_SHORT: dict[str, str] = {}
"""tag -> why its held-out goal is not met yet (the test is then an expected failure)."""


@pytest.fixture(scope="module")
def heldout_result(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("analytics.ingest")
    if not SHARED.is_dir() or not (ROOT / "data" / "samples").is_dir():
        pytest.skip("sample transcripts absent")
    db = tmp_path_factory.mktemp("eval") / "eval.duckdb"
    return evaluate_files(GOLD / "heldout.tsv", db=db)


@pytest.mark.slow
@pytest.mark.parametrize(
    "tag",
    [pytest.param(t, marks=pytest.mark.xfail(reason=KNOWN_SHORT[t], strict=False)) if t in KNOWN_SHORT else t
     for t in GOALS],
)
def test_heldout_goal(heldout_result, tag: str) -> None:
    assert not heldout_result.unmatched, format_eval(heldout_result)
    assert heldout_result.f1(tag) >= GOALS[tag], format_eval(heldout_result)
