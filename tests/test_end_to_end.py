"""The bundled samples through every surface: ingest, CLI, notebook, explorer, report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from analytics.ingest import ingest
from analytics.samples_path import sample_inputs

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app" / "streamlit_app.py"
PAGES = ["session", "campaign", "readiness", "polling", "search", "sql", "annotate"]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "transcripts.duckdb"
    res = ingest(sample_inputs(), db=db)
    assert not res.errors, res.errors
    return db


def _q(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_every_format_is_represented_and_counts_reconcile(demo_db: Path) -> None:
    formats = {r[0] for r in _q(demo_db, "SELECT DISTINCT source_format FROM sessions")}
    assert formats == {"opencode", "claude_code", "codex", "transcript_text"}
    for read, stored, quarantined in _q(
        demo_db, "SELECT records_read, records_stored, records_quarantined FROM ingest_files"
    ):
        assert read == stored + quarantined
    biggest = _q(demo_db, "SELECT max(n_messages) FROM sessions")[0][0]
    assert biggest >= 300


_TAG_SOURCES = """
    SELECT t.tag, t.evidence, t.start_char, t.end_char,
           list_filter([m.text, m.error] || list(c.command) || list(c.output),
                       lambda s: s IS NOT NULL) AS texts
    FROM tags t JOIN messages m USING (session_id, msg_idx)
    LEFT JOIN tool_calls c ON c.session_id = t.session_id
         AND t.msg_idx IN (c.msg_idx, c.result_msg_idx)
    GROUP BY t.session_id, t.msg_idx, t.tag, t.evidence, t.start_char, t.end_char, m.text,
             m.error
"""


def test_every_tag_span_quotes_its_evidence(demo_db: Path) -> None:
    """The README's reading of a tag: ``evidence`` is ``text[start_char:end_char]`` of the
    text it came from (the message text or error, or its tool call's command or output);
    a tag whose evidence quotes nothing (a status, an exit code) has no span (NULL)."""
    for tag, evidence, start, end, texts in _q(demo_db, _TAG_SOURCES):
        assert evidence, tag
        if start is None:
            assert end is None, (tag, evidence)
            continue
        assert start < end and any(t[start:end] == evidence for t in texts), (
            tag, evidence, start, end)


def test_the_qwen_story(demo_db: Path) -> None:
    """Case study 001: "ready?" at 6852, a premature "it's up!" at 6853."""
    tags = {r[0] for r in _q(demo_db, "SELECT t.tag FROM tags t JOIN messages m USING "
                                      "(session_id, msg_idx) WHERE m.source_id = '6852'")}
    assert "user_checkin" in tags
    (verdict, contradicted), = _q(
        demo_db,
        "SELECT c.verdict, c.contradicted_by_msg_idx FROM readiness_claims c JOIN messages m "
        "USING (session_id, msg_idx) WHERE m.source_id = '6853'",
    )
    assert verdict == "premature" and contradicted is not None


def test_the_deepseek_campaign(demo_db: Path) -> None:
    """Case study 000: the levers in the order the case study tells them."""
    rows = _q(demo_db, "SELECT l.name, l.outcome FROM levers l JOIN sessions s USING (session_id) "
                       "WHERE s.source_format = 'opencode' ORDER BY seq")
    outcomes = [o for _, o in rows]
    assert outcomes[:7] == ["improved", "no_effect", "not_applicable", "failed", "failed",
                            "worse", "improved"]
    assert "MTP" in rows[6][0]
    ok = _q(demo_db, "SELECT t.tag FROM tags t JOIN messages m USING (session_id, msg_idx) "
                     "WHERE m.role = 'user' AND trim(m.text) = 'ok?'")
    assert ("user_checkin",) in ok


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_real_sessions(demo_db: Path, page: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSCRIPTS_DB", str(demo_db))
    for (sid,) in _q(demo_db, "SELECT session_id FROM sessions ORDER BY 1"):
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.query_params["session"] = sid
        at.run()
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, sid, [e.value for e in at.exception])


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "analytics.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_cli_surfaces(demo_db: Path, tmp_path: Path) -> None:
    db = str(demo_db)
    res = _cli("sessions", "--db", db, cwd=tmp_path)
    assert res.returncode == 0 and "qwen36_kpro5_deploy" in res.stdout
    res = _cli("search", "fired up and ready to roll", "--db", db, cwd=tmp_path)
    assert res.returncode == 0 and "matches" in res.stdout
    res = _cli("show", "qwen36", "--tags", "--db", db, cwd=tmp_path)
    assert res.returncode == 0 and "user_checkin" in res.stdout
    out = tmp_path / "report" / "qwen.md"
    out.parent.mkdir()
    res = _cli("report", "qwen36", "--out", str(out), "--db", db, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "premature" in out.read_text()
    campaign = tmp_path / "report" / "dsv4.md"
    res = _cli("report", "opencode:ses_", "--out", str(campaign), "--db", db, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "FP8" in campaign.read_text()
    assert list(out.parent.glob("*.png"))
    res = _cli("export", "--parquet", str(tmp_path / "pq"), "--db", db, cwd=tmp_path)
    assert res.returncode == 0
    n = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{tmp_path / 'pq' / 'messages'}/**/*.parquet', "
        "hive_partitioning = true)").fetchone()
    assert n == _q(demo_db, "SELECT count(*) FROM messages")[0]


def test_demo_no_serve_in_a_fresh_folder(tmp_path: Path) -> None:
    res = _cli("demo", "--no-serve", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "transcripts.duckdb").exists()
    assert "Ingest summary" in res.stdout and "Readiness claims premature" in res.stdout


def test_notebook_cells_run(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = json.loads((ROOT / "notebooks" / "questions.ipynb").read_text())
    monkeypatch.chdir(demo_db.parent)
    scope: dict[str, object] = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), scope)  # noqa: S102 - our own notebook


def _notebook_answers(db: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Each code cell's last expression (what Jupyter shows), keyed by the heading above it."""
    import ast

    nb = json.loads((ROOT / "notebooks" / "questions.ipynb").read_text())
    monkeypatch.chdir(db.parent)
    scope: dict[str, object] = {}
    answers: dict[str, object] = {}
    heading = ""
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code":
            heading = source.strip()
            continue
        body = ast.parse(source).body
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        exec(compile(ast.Module(body, []), "cell", "exec"), scope)  # noqa: S102
        if last is not None:
            answers[heading] = eval(compile(ast.Expression(last.value), "cell", "eval"), scope)  # noqa: S307
    return answers


def test_the_notebook_answers_how_long_users_waited_before_checking_in(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = _notebook_answers(demo_db, monkeypatch)
    (question,) = [h for h in answers if "check in" in h]
    frame = answers[question]
    assert "how long did they wait" in question
    waited = [c for c in frame.columns if "wait" in c]  # type: ignore[attr-defined]
    assert waited, frame.columns  # type: ignore[attr-defined]
    row = frame.set_index("session_id").loc["opencode:ses_1de6e26c7ffenRgm6PM4TAYR8E"]  # type: ignore[attr-defined]
    assert row["checkins"] == 3 and all(row[c] > 0 for c in waited)


def test_every_fixture_transcript_goes_through_every_analyser(tmp_path: Path) -> None:
    """Odd but valid inputs (aborted, running, compacted, subagents, secrets…) must not trip
    any analyser: every transcript file among the test fixtures ingests without an error."""
    fixtures = ROOT / "tests" / "fixtures"
    dirs = [fixtures / d for d in ("claude_code", "codex", "opencode", "transcript_text")]
    secrets = [p for p in (fixtures / "secrets").iterdir()
               if p.suffix in (".jsonl", ".txt") or p.name == "opencode_export.json"]
    res = ingest(dirs + secrets, db=tmp_path / "t.duckdb")
    assert [f.error for f in res.errors] == []
    assert res.totals()["sessions"] >= 10
