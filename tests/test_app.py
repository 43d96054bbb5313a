"""AppTest smoke test per explorer page, the main interactions, and the
explorer's query functions on a small realistic database."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest_app import S_CC, S_CX, S_OC, XSS_TEXT, build_app_db, msg_idx
from streamlit.testing.v1 import AppTest

from analytics import explore
from analytics.explore.agreement import annotator_agreement, cohen_kappa, tag_precision_recall
from analytics.explore.ui import md_escape

APP = Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py"
PAGES = {
    "sessions": "Sessions",
    "session": "Session",
    "campaign": "Campaign",
    "readiness": "Readiness claims",
    "polling": "Polling & aborts",
    "search": "Search",
    "sql": "SQL console",
    "annotate": "Annotate",
}


@pytest.fixture(scope="module")
def app_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app_db(tmp_path_factory.mktemp("appdb") / "fixture.duckdb")


@pytest.fixture
def use_db(app_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRANSCRIPTS_DB", str(app_db))
    return app_db


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    if page != "sessions":
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text if not t.value.startswith("error: ")]


def heads(at: AppTest) -> list[str]:
    """The header line of each message shown on the Session page."""
    return [m.value for m in at.markdown if m.value.startswith(("**#", "▶"))]


def frame(at: AppTest, column: str) -> pd.DataFrame:
    """The first table on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with a {column!r} column")


# --- every page renders ---------------------------------------------------------


@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders(use_db: Path, page: str) -> None:
    at = open_page(page)
    assert [t.value for t in at.title] == [PAGES[page]]
    assert not at.error, [e.value for e in at.error]


# --- Sessions -------------------------------------------------------------------


def test_sessions_headline_and_filters(use_db: Path) -> None:
    at = open_page("sessions")
    m = metrics(at)
    assert m["Sessions"] == "3"
    assert m["Messages"] == "23"
    assert m["Check-ins"] == "2"
    assert m["Aborts"] == "2"
    assert m["Premature claims"] == "1"
    at.multiselect(key="sessions-format").select("opencode").run()
    assert metrics(at)["Sessions"] == "1"
    assert metrics(at)["Check-ins"] == "1"
    at.multiselect(key="sessions-format").unselect("opencode").run()
    at.text_input(key="sessions-text").input("qwen").run()
    assert metrics(at)["Sessions"] == "1"
    table = at.dataframe[0].value
    assert list(table["session_id"]) == [S_CC]
    assert table["open"].iloc[0] == "session?session=claude_code%3A9f1c-qwen"


# --- Session --------------------------------------------------------------------


def test_session_opens_at_linked_message(use_db: Path) -> None:
    target = msg_idx(S_OC, "12479")
    at = open_page("session", session=S_OC, msg=str(target))
    assert at.selectbox(key="session-pick").value == S_OC
    assert "ok?" in texts(at)
    heads = [m.value for m in at.markdown if m.value.startswith("▶")]
    assert len(heads) == 1 and f"#{target}" in heads[0] and "user\\_checkin" in heads[0]
    labels = [e.label for e in at.expander]
    assert any("aborted" in label for label in labels)
    assert any("seq 1 16" in c.value for c in at.code)


def test_session_jump_search_and_tag_filter(use_db: Path) -> None:
    at = open_page("session", session=S_OC)
    at.text_input(key="session-jump").input("12477").run()
    assert at.query_params["msg"] in (str(msg_idx(S_OC, "12477")), [str(msg_idx(S_OC, "12477"))])
    assert texts(at)[0].startswith("The bottleneck")  # the window starts 2 before the target
    at.text_input(key="session-jump").input("").run()
    at.multiselect(key="session-tags").select("error").run()
    shown = texts(at)
    assert len(shown) == 2 and all("memory" in t.lower() or "Traceback" in t for t in shown)
    at.multiselect(key="session-tags").unselect("error").run()
    at.text_input(key="session-search").input("illegal memory").run()
    assert len(texts(at)) == 1 and "illegal memory" in texts(at)[0]


def test_session_paging(use_db: Path) -> None:
    at = open_page("session", session=S_OC)
    at.selectbox(key="session-size").set_value(25).run()
    assert len(heads(at)) == 13
    at.session_state["session-start"] = 10
    at.run()
    assert len(heads(at)) == 3 and heads(at)[0].startswith("**#10**")
    at.button[0].click().run()  # First
    assert len(heads(at)) == 13


def test_session_first_click_after_a_jump_pages(use_db: Path) -> None:
    """The jump writes ?msg= into the URL; the next run must not read that back as a
    new link and undo the click (a swallowed first Previous/Next after every jump)."""
    at = open_page("session", session=S_OC)
    at.selectbox(key="session-size").set_value(25).run()
    at.text_input(key="session-jump").input("12477").run()
    jumped = heads(at)[0]
    at.button(key="session-first").click().run()
    assert heads(at)[0].startswith("**#0**"), (jumped, heads(at)[0])


def test_picking_another_session_starts_at_its_first_message(use_db: Path) -> None:
    """A link's ?msg= belongs to the linked session, not to the next one picked."""
    at = open_page("session", session=S_OC, msg=str(msg_idx(S_OC, "12479")))
    at.selectbox(key="session-pick").set_value(S_CC).run()
    assert heads(at)[0].startswith("**#0**"), heads(at)[0]
    assert "msg" not in at.query_params


def test_transcript_text_is_rendered_inert(use_db: Path) -> None:
    at = open_page("session", session=S_CX)
    assert XSS_TEXT in texts(at)
    for md in at.markdown:
        assert "<script" not in md.value
        assert "![img](" not in md.value
        assert "](javascript" not in md.value
    for el in list(at.markdown) + list(at.caption):
        assert not getattr(el.proto, "allow_html", False)
    # the raw HTML in the tool output is shown as code, not rendered
    assert any("<script>x()</script>" in c.value for c in at.code)


def test_md_escape_neutralises_links_and_images() -> None:
    escaped = md_escape("![img](http://x/y.png) [a](javascript:alert(1)) <b>")
    assert "![" not in escaped and "](" not in escaped and "<b>" not in escaped


# --- Campaign, Readiness, Polling -----------------------------------------------


def test_campaign_chart_and_levers(use_db: Path) -> None:
    at = open_page("campaign", campaign="dsv4-decode")
    m = metrics(at)
    assert m["Target"].startswith("1000") and m["Levers"] == "4"
    assert at.get("vega_lite_chart"), "campaign chart missing"
    levers = at.dataframe[0].value
    assert list(levers["outcome"]) == ["improved", "no_effect", "improved", "worse"]
    assert levers["open"].iloc[0].startswith("session?session=opencode%3Ases_dsv4&msg=")


def test_campaign_chart_layers() -> None:
    con = duckdb.connect()
    series = pd.DataFrame(
        {"msg_idx": [1, 3], "value": [25.0, 26.6], "unit": "tok/s", "label": ["a", "b"]}
    )
    levers = pd.DataFrame(
        {
            "seq": [1],
            "name": ["fp8"],
            "outcome": ["improved"],
            "value_before": [25.0],
            "value_after": [26.6],
            "delta_pct": [6.4],
            "start_msg_idx": [2],
            "end_msg_idx": [3],
        }
    )
    spec = explore.campaign_chart(series, levers, 1000.0, "decode_tok_s").to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["line", "rule", "point", "rule"]
    assert spec["layer"][1]["encoding"]["color"]["field"] == "outcome"
    assert spec["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"  # target is 40x away
    near = explore.campaign_chart(series, levers, 30.0, "decode_tok_s").to_dict()
    assert "type" not in near["layer"][0]["encoding"]["y"]["scale"]
    con.close()


def test_campaign_chart_draws_a_line_per_load_condition() -> None:
    """Runs at concurrency 1 and 16 are different series (as in the report's chart): one
    line through both would read as the metric swinging; which launch a run was against
    (``launch_msg_idx``) is not a condition, so those runs share a line."""
    series = pd.DataFrame(
        {
            "msg_idx": [1, 2, 5, 6],
            "value": [25.0, 10.2, 26.8, 10.8],
            "unit": "tok/s",
            "label": [
                "concurrency=16,launch_msg_idx=0",
                "concurrency=1",
                "concurrency=16,launch_msg_idx=4",
                "concurrency=1",
            ],
        }
    )
    levers = pd.DataFrame(
        {
            "seq": [1],
            "name": ["fp8"],
            "outcome": ["improved"],
            "value_before": [25.0],
            "value_after": [26.8],
            "delta_pct": [7.2],
            "start_msg_idx": [3],
            "end_msg_idx": [6],
            "evidence_msg_idx": [5],
        }
    )
    spec = explore.campaign_chart(series, levers, 1000.0, "output_token_throughput").to_dict()
    line = spec["layer"][0]
    assert line["encoding"]["color"]["field"] == "conditions"
    assert spec["resolve"]["scale"]["color"] == "independent"
    rows = spec["datasets"][line["data"]["name"]]
    assert sorted({r["conditions"] for r in rows}) == ["concurrency=1", "concurrency=16"]
    point = spec["layer"][2]
    assert spec["datasets"][point["data"]["name"]][0]["at_result"] == 5  # where it was measured


def test_readiness_claims_with_evidence(use_db: Path) -> None:
    at = open_page("readiness")
    m = metrics(at)
    assert (m["premature"], m["supported"], m["unverified"]) == ("1", "1", "0")
    at.multiselect(key="readiness-verdicts").select("premature").run()
    shown = texts(at)
    assert any("illegal memory access" in t for t in shown)  # the contradiction
    assert any("up and ready" in t for t in shown)  # the claim
    links = at.get("page_link")
    assert links and all(p.proto.page.endswith("session") for p in links)
    roles = [p.proto.label.split("\\:")[0] for p in links[1:]]  # labels are md-escaped
    assert "claim" in roles and "contradicted by" in roles, roles


def test_polling_page_figures(use_db: Path) -> None:
    at = open_page("polling")
    m = metrics(at)
    assert (m["Polling loops"], m["Aborts"], m["Check-ins"]) == ("2", "2", "2")
    aborts = frame(at, "interrupted_status")
    row = aborts[aborts["session_id"] == S_OC].iloc[0]
    assert row["interrupted_status"] == "aborted" and bool(row["was_polling"])
    waits = frame(at, "checkins")  # one wait per loop here: each is the only poll of its target
    assert len(waits) == 2 and set(waits["polls"]) == {1}


def _swamp(db: Path, session: str, n: int = 1200) -> None:
    """``n`` more messages in ``session``, each a check-in, an unverified claim and a
    polling loop: a long session's rows, sorted before the other sessions' ones."""
    with duckdb.connect(str(db)) as con:
        con.execute(
            "INSERT INTO messages (session_id, msg_idx, source_id, role, ts, text, n_chars,"
            " is_sidechain, is_compaction_summary) SELECT ?, 1000 + i, 'x' || i, 'user',"
            " TIMESTAMP '2025-05-01 12:00:00' + INTERVAL (i) SECOND, 'status?', 7, false, false"
            " FROM range(?) t(i)",
            [session, n],
        )
        con.execute(
            "INSERT INTO tags SELECT session_id, msg_idx, 'user_checkin', 1.0, 'rules',"
            " 'status?', 0, 7, 'rules-0.1' FROM messages WHERE session_id = ? AND msg_idx >= 1000",
            [session],
        )
        con.execute(
            "INSERT INTO readiness_claims SELECT session_id, msg_idx, 'up', 'server',"
            " 'unverified', 'no check', '[]', NULL FROM messages"
            " WHERE session_id = ? AND msg_idx >= 1000",
            [session],
        )
        con.execute(
            "INSERT INTO polling_loops SELECT session_id, msg_idx, 'p' || msg_idx, 5, 1, 5,"
            " 'x', NULL, NULL, 'unknown', 500 FROM messages"
            " WHERE session_id = ? AND msg_idx >= 1000",
            [session],
        )


def test_readiness_page_shows_one_sessions_claims(own_db: Path) -> None:
    """A long session's 1,200 claims fill the capped table: another session's claims are
    reached by picking that session, and the verdict counts are that session's."""
    _swamp(own_db, "claude_code:0000-long")  # sorts before every fixture session
    at = open_page("readiness")
    assert metrics(at)["unverified"] == "1200"
    assert S_CC not in set(frame(at, "claim_text")["session_id"])  # cut off
    at.selectbox(key="readiness-session").set_value(S_CC).run()
    assert set(frame(at, "claim_text")["session_id"]) == {S_CC}
    m = metrics(at)
    assert (m["premature"], m["supported"], m["unverified"]) == ("0", "1", "0")


def test_polling_page_shows_one_sessions_rows(own_db: Path) -> None:
    _swamp(own_db, "claude_code:0000-long")
    at = open_page("polling")
    assert metrics(at)["Check-ins"] == "1202"
    assert S_OC not in set(frame(at, "checkin_text")["session_id"])  # cut off
    at.selectbox(key="polling-session").set_value(S_OC).run()
    m = metrics(at)
    assert (m["Polling loops"], m["Aborts"], m["Check-ins"]) == ("1", "1", "1")
    assert set(frame(at, "checkin_text")["session_id"]) == {S_OC}
    assert set(frame(at, "max_iterations")["session_id"]) == {S_OC}
    assert set(frame(at, "interrupted_status")["session_id"]) == {S_OC}
    assert set(frame(at, "checkins")["session_id"]) == {S_OC}


# --- Search, SQL ----------------------------------------------------------------


def test_search_ranks_hits_and_links(use_db: Path) -> None:
    at = open_page("search", q="memory")
    hits = frame(at, "snippet")
    assert len(hits) >= 2
    assert set(hits["session_id"]) == {S_OC}
    assert hits["score"].is_monotonic_decreasing
    assert any("out of memory" in t.lower() for t in texts(at))


def test_sql_console_says_a_result_was_cut_and_how_to_see_the_rest(use_db: Path) -> None:
    """The console fetches up to 10,000 rows; the table shows the first 1,000 of them (10k
    rows of tool output froze the page for 8 s), the CSV download holds all it fetched."""
    at = open_page("sql")
    at.text_area(key="sql-text").input("SELECT * FROM range(20000)").run()
    at.button(key="sql-run").click().run()
    assert len(frame(at, "range")) == 1_000
    note = next(c.value for c in at.caption if "10,000" in c.value and "read-only" not in c.value)
    assert note.startswith("First 10,000 rows") and "LIMIT" in note and "OFFSET" in note
    assert "first 1,000" in note and "Download CSV" in note
    assert at.session_state["sql-result"].shape[0] == 10_000  # what the download writes


def test_sql_console_shows_a_small_result_whole(use_db: Path) -> None:
    at = open_page("sql")
    at.text_area(key="sql-text").input("SELECT * FROM range(1500)").run()
    at.button(key="sql-run").click().run()
    assert len(frame(at, "range")) == 1_000
    note = next(c.value for c in at.caption if "1,500" in c.value)
    assert note.startswith("1,500 rows") and "first 1,000" in note
    at.text_area(key="sql-text").input("SELECT * FROM range(20)").run()
    at.button(key="sql-run").click().run()
    assert len(frame(at, "range")) == 20
    assert any(c.value == "20 rows" for c in at.caption)


def test_sql_console_runs_and_refuses(use_db: Path) -> None:
    at = open_page("sql")
    at.button(key="sql-run").click().run()
    result = frame(at, "session_id")
    assert len(result) == 3 and "session_id" in result.columns
    assert at.get("download_button")
    at.text_area(key="sql-text").input("COPY sessions TO '/tmp/x.csv'").run()
    at.button(key="sql-run").click().run()
    assert any("Refused a COPY statement" in e.value for e in at.error)
    at.text_area(key="sql-text").input("SELECT * FROM read_csv('/etc/passwd')").run()
    at.button(key="sql-run").click().run()
    assert any("cannot read or write files" in e.value for e in at.error)


def test_sql_query_param_autoruns(use_db: Path) -> None:
    at = open_page("sql", sql="SELECT count(*) AS n FROM messages")
    assert frame(at, "n")["n"].iloc[0] == 23


# --- Annotate -------------------------------------------------------------------


def test_annotate_saves_labels_and_shows_agreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = build_app_db(tmp_path / "annotate.duckdb")
    monkeypatch.setenv("TRANSCRIPTS_DB", str(db))
    target = msg_idx(S_CC, "a4")
    at = open_page("annotate", session=S_CC, msg=str(target))
    assert "ready?" in texts(at)
    kappa = frame(at, "kappa")
    assert list(kappa[["annotator_a", "annotator_b", "items"]].iloc[0]) == ["alice", "bob", 4]
    at.text_input(key="annotate-annotator").input("carol").run()
    at.multiselect(key="annotate-tags").select("user_checkin")
    at.button[0].click().run()  # the form's submit button
    assert not at.error, [e.value for e in at.error]
    assert any("Saved 9 label" in s.value for s in at.success)
    pr = frame(at, "precision").set_index("tag")
    assert pr.loc["user_checkin", "labels"] == 7
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT tag, value FROM annotations WHERE annotator = 'carol' AND msg_idx = ?",
            [target],
        ).fetchall()
    finally:
        con.close()
    assert ("user_checkin", True) in rows and ("launch", False) in rows and len(rows) == 9


def test_annotate_requires_annotator(use_db: Path) -> None:
    at = open_page("annotate", session=S_CC, msg="0")
    at.button[0].click().run()
    assert any("annotator" in e.value for e in at.error)


# --- database trouble -------------------------------------------------------------


@pytest.fixture
def locked_db(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    db = build_app_db(tmp_path / "locked.duckdb")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True);"
            " time.sleep(120)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield db, holder
    holder.kill()
    holder.wait()


def test_locked_database_shows_message_and_retry(
    locked_db: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, holder = locked_db
    monkeypatch.setenv("TRANSCRIPTS_DB", str(db))
    at = open_page("sessions")
    assert any("locked" in e.value for e in at.error)
    assert at.button(key="db-retry").label == "Retry"
    assert not at.dataframe
    holder.kill()
    holder.wait()
    at.button(key="db-retry").click().run()
    assert not at.error and metrics(at)["Sessions"] == "3"


def test_missing_database_explains_how_to_create_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRANSCRIPTS_DB", str(tmp_path / "nothing.duckdb"))
    at = open_page("session")
    assert any("no such database" in e.value for e in at.error)
    assert any("transcripts ingest" in c.value for c in at.code)
    assert at.button(key="db-retry")


# --- library pieces the pages call -----------------------------------------------


def test_checkin_latency_and_aborts(app_db: Path) -> None:
    con = duckdb.connect(str(app_db), read_only=True)
    try:
        lat = explore.checkin_latency(con).set_index("checkin_text")
        assert lat.loc["ok?", "silence_before_s"] == 220.0
        assert lat.loc["ok?", "reply_after_s"] == 20.0
        assert lat.loc["ready?", "prev_role"] == "assistant"
        ab = explore.aborts(con).set_index("session_id")
        assert ab.loc[S_CX, "interrupted_tool"] == "shell"
        assert not bool(ab.loc[S_CX, "was_polling"])
    finally:
        con.close()


def test_search_fallback_and_scope(app_db: Path) -> None:
    con = duckdb.connect(str(app_db), read_only=True)
    try:
        hits = explore.search_messages(con, "ready", session_id=S_CC)
        assert set(hits["session_id"]) == {S_CC}
        assert list(hits.columns) == [
            "session_id",
            "msg_idx",
            "source_id",
            "role",
            "kind",
            "snippet",
            "score",
        ]
        assert explore.search_messages(con, "   ").empty
    finally:
        con.close()


def test_cohen_kappa_known_values() -> None:
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == 0.0
    # 20 items: 10 yes/yes, 5 no/no, 3 yes/no, 2 no/yes:
    # po = .75, pe = .65 * .60 + .35 * .40 = .53, kappa = .22 / .47
    a = [True] * 13 + [False] * 7
    b = [True] * 10 + [False] * 3 + [True] * 2 + [False] * 5
    assert cohen_kappa(a, b) == pytest.approx(0.22 / 0.47)
    assert cohen_kappa([], []) is None


def test_precision_recall_and_annotator_agreement() -> None:
    labels = pd.DataFrame(
        {
            "session_id": ["s"] * 6,
            "msg_idx": [1, 2, 3, 1, 2, 3],
            "tag": ["t"] * 6,
            "annotator": ["a", "a", "a", "b", "b", "b"],
            "value": [True, True, False, True, False, False],
            "auto": [True, False, True, True, False, True],
        }
    )
    pr = tag_precision_recall(labels).set_index("tag").loc["t"]
    assert (pr["tp"], pr["fp"], pr["fn"]) == (2, 2, 1)
    assert pr["precision"] == 0.5 and pr["recall"] == pytest.approx(2 / 3)
    agree = annotator_agreement(labels).iloc[0]
    assert agree["items"] == 3 and agree["agreement"] == pytest.approx(2 / 3)


def test_app_path_and_command() -> None:
    assert explore.app_path() == APP
    cmd = explore.streamlit_command(8765)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and "8765" in cmd


# --- real transcripts: what the small fixture does not have ---------------------


@pytest.fixture
def own_db(app_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, writable copy of the fixture database, used by the explorer."""
    path = tmp_path / "own.duckdb"
    path.write_bytes(app_db.read_bytes())
    monkeypatch.setenv("TRANSCRIPTS_DB", str(path))
    return path


def test_session_page_opened_from_the_menu_warns_nothing(use_db: Path) -> None:
    at = open_page("session")
    assert not at.warning, [w.value for w in at.warning]
    assert heads(at)


def test_date_filter_says_which_sessions_it_cannot_place(own_db: Path) -> None:
    """A session without timestamps (a plain-text transcript) has no start: a date range,
    even one around every session, leaves it out, and the page says so."""
    import datetime

    with duckdb.connect(str(own_db)) as con:
        con.execute("UPDATE messages SET ts = NULL WHERE session_id = ?", [S_CX])
        con.execute("UPDATE sessions SET started_at = NULL, ended_at = NULL WHERE session_id = ?",
                    [S_CX])
    at = open_page("sessions")
    wide = (datetime.date(2020, 1, 1), datetime.date(2030, 1, 1))  # (the widget keeps ±10 years)
    at.date_input(key="sessions-dates").set_value(wide).run()
    assert metrics(at)["Sessions"] == "2"
    note = next(c.value for c in at.caption if "of 3 sessions" in c.value)
    assert "1 session has no start time" in note and "date filter" in note
    at.multiselect(key="sessions-format").select("opencode").run()  # not among the rest
    note = next(c.value for c in at.caption if "of 3 sessions" in c.value)
    assert "start time" not in note


def test_session_without_timestamps_shows_no_nat(own_db: Path) -> None:
    with duckdb.connect(str(own_db)) as con:
        con.execute("UPDATE messages SET ts = NULL WHERE session_id = ?", [S_CX])
    at = open_page("session", session=S_CX)
    assert heads(at) and not any("NaT" in h for h in heads(at)), heads(at)


def _campaign_metrics(own_db: Path, row: tuple[object, ...]) -> dict[str, str]:
    """The Campaign page's figures for one campaign row (id, goal, metric, target, unit,
    baseline, best, status) stored in the Claude Code sample's session."""
    cid, goal, metric, target, unit, baseline, best, status = row
    with duckdb.connect(str(own_db)) as con:
        con.execute(
            "INSERT INTO campaigns VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)",
            [cid, S_CC, goal, metric, target, unit, baseline, best, status],
        )
    return metrics(open_page("campaign", campaign=str(cid)))


def test_campaign_without_baseline_shows_dashes(own_db: Path) -> None:
    m = _campaign_metrics(own_db, (
        "no-baseline", "reach 70 tok/s", "output_token_throughput", 70, "tok/s", None, None,
        "in_progress",
    ))
    assert m["Target"] == "70 tok/s"
    assert "nan" not in (m["Baseline"] + m["Best"]).lower(), m


def test_campaign_figures_carry_their_unit(own_db: Path) -> None:
    m = _campaign_metrics(own_db, (
        "with-unit", "p50 TTFT under 200 ms", "ttft_p50", 200, "ms", 412, 230, "not_met",
    ))
    assert (m["Target"], m["Baseline"], m["Best"]) == ("200 ms", "412 ms", "230 ms"), m


@pytest.mark.parametrize(("query", "source_id"), [("63%", "12475"), ("+6%", "12473")])
def test_indexed_search_finds_numbers_and_symbols(
    own_db: Path, query: str, source_id: str
) -> None:
    from analytics.store.search import add_documents, build_index

    with duckdb.connect(str(own_db)) as con:
        for (sid,) in con.execute("SELECT session_id FROM sessions").fetchall():
            add_documents(con, sid)
        if not build_index(con, force=True):
            pytest.skip("DuckDB's fts extension is not installed")
    with duckdb.connect(str(own_db), read_only=True) as con:
        assert explore.search_messages(con, "bottleneck").attrs["engine"] == "full-text index"
        hits = explore.search_messages(con, query)
        assert hits.attrs["engine"] == "substring match"
    assert (S_OC, msg_idx(S_OC, source_id)) in set(
        zip(hits["session_id"], hits["msg_idx"], strict=True)
    )
    at = open_page("search", q=query)
    assert len(frame(at, "snippet")) == len(hits)


@pytest.mark.parametrize("needle", ["%", "_", "6%)"])
def test_search_in_session_takes_percent_and_underscore_literally(
    app_db: Path, needle: str
) -> None:
    from analytics.explore.search import fallback_search
    from analytics.explore.stream import count_matching

    with duckdb.connect(str(app_db), read_only=True) as con:
        texts_by_idx: dict[int, list[str]] = {}
        for idx, text in con.execute(
            "SELECT msg_idx, text FROM messages WHERE session_id = ?", [S_OC]
        ).fetchall():
            texts_by_idx.setdefault(idx, []).append(text or "")
        for idx, command, output in con.execute(
            "SELECT msg_idx, command, output FROM tool_calls WHERE session_id = ?", [S_OC]
        ).fetchall():
            texts_by_idx.setdefault(idx, []).extend([command or "", output or ""])
        expected = sum(any(needle in t.lower() for t in ts) for ts in texts_by_idx.values())
        assert 0 < expected < len(texts_by_idx)
        assert count_matching(con, S_OC, (), needle) == expected
        hits = fallback_search(con, needle, limit=1000, session_id=S_OC)
        assert all(needle in s.lower() for s in hits["snippet"])


def test_an_interruption_written_as_several_records_is_one_abort(tmp_path: Path) -> None:
    """Claude Code writes one interruption as two records (the rejected tool result and
    "[Request interrupted by user for tool use]"), Codex as up to three: the Sessions and
    Polling pages count interruptions, one table row each, not marker records."""
    from golden.case_studies import SessionBuilder

    from analytics.explore.sessions import sessions_overview
    from analytics.store.migrations import migrate

    con = duckdb.connect(str(tmp_path / "a.duckdb"))
    migrate(con)
    b = SessionBuilder(con, "claude_code:interrupted", "claude_code")
    b.msg("user", "benchmark it", 0)
    i = b.msg("assistant", "Running the sweep.", 1)
    r, _ = b.rejected_call(i, "vllm bench serve", 1, at=2.5)
    b.msg("assistant", "Rerunning at 16.", 4)
    u = b.msg("user", "[Request interrupted by user]", 6)
    b.tag(u, "user_abort", "[Request interrupted by user]")
    b.save("interrupted", "m")
    ab = explore.aborts(con)
    assert ab["msg_idx"].tolist() == [r, u] and ab["records"].tolist() == [2, 1]
    assert ab["interrupted_command"].iloc[0] == "vllm bench serve"
    assert "[Request interrupted by user for tool use]" in ab["abort_text"].iloc[0]
    assert sessions_overview(con)["aborts"].tolist() == [2]
    con.close()


def test_a_tool_call_without_a_command_shows_its_input_not_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Read or Edit call has no shell command (NULL, which pandas reads as NaN, a true
    value): the Session page shows its input, never the text "nan"."""
    from _samples import SHARED_SAMPLES

    from analytics.ingest import ingest

    sample = SHARED_SAMPLES / "claude_code" / "ccl_37f83ec9_v1.0.51_interrupts.jsonl"
    if not sample.exists():
        pytest.skip("shared samples absent")
    db = tmp_path / "t.duckdb"
    assert not ingest([sample], db=db, build_index=False, workers=1).errors
    monkeypatch.setenv("TRANSCRIPTS_DB", str(db))
    at = open_page("session", session="claude_code:37f83ec9-f2ea-42a9-925e-0d5c105cb6e8")
    shown = [c.value.strip() for c in at.code]
    assert shown and "nan" not in shown
    assert any(value.startswith("file_path: /") for value in shown)  # a Read call's input


def _add_call(db: Path, call_id: str, tool: str, command: str | None, input_: str, out: str) -> None:
    """A tool call on the Codex session's first message of the fixture."""
    with duckdb.connect(str(db)) as con:
        con.execute(
            "INSERT INTO tool_calls (session_id, msg_idx, call_id, tool, command, input, output,"
            " status) VALUES (?, 0, ?, ?, ?, ?, ?, 'completed')",
            [S_CX, call_id, tool, command, input_, out],
        )


def test_an_edit_call_shows_its_strings_as_written_not_as_json(own_db: Path) -> None:
    """An Edit's input is JSON whose strings hold escaped newlines and quotes: shown raw it
    is one unreadable line. Each field is a line of its own, a text of several lines
    below its name as written."""
    edit = {"file_path": "/src/app.py", "old_string": 'def f():\n    return "a"',
            "new_string": 'def f():\n    return "b"', "replace_all": False}
    _add_call(own_db, "e1", "Edit", None, json.dumps(edit), "ok")
    at = open_page("session", session=S_CX)
    shown = next(c for c in at.code if "/src/app.py" in c.value)
    assert shown.value.splitlines() == [
        "file_path: /src/app.py",
        "old_string:",
        "  def f():",
        '      return "a"',
        "new_string:",
        "  def f():",
        '      return "b"',
        "replace_all: false",
    ]
    assert shown.language != "bash"


def test_terminal_colour_codes_are_not_shown(own_db: Path) -> None:
    """Claude Code's hook messages and terminal output carry ANSI colour codes (ESC[1m …
    ESC[22m), drawn as a box and "[1m": the page shows the text without them."""
    with duckdb.connect(str(own_db)) as con:
        con.execute(
            "UPDATE messages SET text = ? WHERE session_id = ? AND msg_idx = 0",
            ["\x1b[1mPostToolUse:Edit\x1b[22m [ruff format] completed", S_CX],
        )
    _add_call(own_db, "a1", "Bash", "pytest", "{}", "\x1b[32m3 passed\x1b[0m in 0.1s")
    at = open_page("session", session=S_CX)
    assert "PostToolUse:Edit [ruff format] completed" in texts(at)
    assert "3 passed in 0.1s" in [c.value for c in at.code]
    assert not any("\x1b" in t for t in texts(at) + [c.value for c in at.code])


def test_a_long_tool_output_can_be_shown_whole(own_db: Path) -> None:
    """An output beyond the page's preview is cut with a way to see the rest."""
    body = "".join(f"line {i:06d}\n" for i in range(3000))  # 36,000 characters
    _add_call(own_db, "o1", "Bash", "cat big.log", json.dumps({"command": "cat big.log"}), body)
    at = open_page("session", session=S_CX)
    outputs = [c.value for c in at.code if c.value.startswith("line 000000")]
    assert len(outputs) == 1 and len(outputs[0]) < len(body) and "line 002999" not in outputs[0]
    at.toggle(key=f"session-full-{S_CX}-0-o1").set_value(True).run()
    assert body.rstrip("\n") in [c.value.rstrip("\n") for c in at.code]


def test_campaign_chart_names_the_goals_load() -> None:
    """A run at a load other than the goal's, above the target line, must not read as the
    target met: the series at the concurrency the goal names is marked as the goal's."""
    series = pd.DataFrame(
        {
            "msg_idx": [3, 7, 9],
            "value": [410.0, 905.0, 620.0],
            "unit": "tok/s",
            "label": ["concurrency=8,launch_msg_idx=1", "concurrency=32,launch_msg_idx=1",
                      "concurrency=8,launch_msg_idx=6"],
        }
    )
    levers = pd.DataFrame(columns=["seq", "name", "outcome", "value_before", "value_after",
                                   "delta_pct", "start_msg_idx", "end_msg_idx", "evidence_msg_idx"])
    goal = "Get decode throughput past 600 tok/s with 8 concurrent requests."
    spec = explore.campaign_chart(series, levers, 600.0, "output_token_throughput", goal).to_dict()
    line = spec["layer"][0]
    rows = spec["datasets"][line["data"]["name"]]
    assert sorted({r["conditions"] for r in rows}) == [
        "concurrency=32", "concurrency=8 (the goal's load)"
    ]
