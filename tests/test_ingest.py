"""The ingest guarantees: nothing lost, idempotent, incremental, one transaction per file."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
from _samples import all_tables

from analytics.formats import PARSER_VERSIONS
from analytics.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "samples"


def _cc_line(i: int, session: str = "11111111-2222-3333-4444-555555555555") -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    msg: dict = {"role": role, "content": f"message number {i}"}
    if role == "assistant":
        msg = {
            "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": f"reply {i}"}], "stop_reason": "end_turn",
        }
    return {
        "parentUuid": f"u{i - 1}" if i else None, "isSidechain": False, "userType": "external",
        "cwd": "/w", "sessionId": session, "version": "2.0.42", "type": role,
        "message": msg, "uuid": f"u{i}", "timestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z",
    }


def _write(path: Path, lines: list[dict], tail: str = "") -> None:
    with path.open("w") as f:
        for obj in lines:
            f.write(json.dumps(obj) + "\n")
        f.write(tail)


def _counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for t in ("sessions", "messages", "tool_calls", "raw_records", "quarantine", "tags"):
            out[t] = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        return out
    finally:
        con.close()


def _ledger(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT path, records_read, records_stored, records_quarantined FROM ingest_files"
        ).fetchall()
    finally:
        con.close()


def test_counts_reconcile_and_reingest_is_a_no_op(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(40)], tail="{not json\n")
    db = tmp_path / "t.duckdb"
    first = ingest([src], db=db)
    assert not first.errors
    before = _counts(db)
    assert before["messages"] == 40 and before["quarantine"] == 1
    for _, read, stored, quarantined in _ledger(db):
        assert read == stored + quarantined == 41
    second = ingest([src], db=db)
    assert [f.status for f in second.files] == ["unchanged"]
    assert _counts(db) == before


def test_append_reads_only_the_new_lines(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(30)]
    _write(src, lines[:20])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    _write(src, lines)  # same prefix, 10 more lines
    res = ingest([src], db=db)
    assert [f.status for f in res.files] == ["appended"]
    con = duckdb.connect(str(db), read_only=True)
    idx = [r[0] for r in con.execute("SELECT msg_idx FROM messages ORDER BY 1").fetchall()]
    src_ids = [r[0] for r in con.execute("SELECT source_id FROM messages ORDER BY msg_idx").fetchall()]
    con.close()
    assert idx == list(range(30))
    assert src_ids == [f"u{i}" for i in range(30)]
    # The appended result equals a clean ingest of the whole file.
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean)
    assert _counts(clean) == _counts(db)


def test_half_written_last_line_is_read_again_when_completed(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(10)]
    full = json.dumps(lines[9])
    _write(src, lines[:9], tail=full[: len(full) // 2])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    assert _counts(db)["quarantine"] == 1
    _write(src, lines)
    ingest([src], db=db)
    counts = _counts(db)
    assert counts["messages"] == 10 and counts["quarantine"] == 0
    (_, read, stored, quarantined), = _ledger(db)
    assert (read, stored, quarantined) == (10, 10, 0)


def test_summary_whose_leaf_is_appended_later_still_titles_the_session(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    summary = {"type": "summary", "summary": "Fix the flaky test", "leafUuid": "u5"}
    lines = [summary] + [_cc_line(i) for i in range(8)]
    _write(src, lines[:3])  # the summary is on top; its leaf u5 is not written yet
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    _write(src, lines)
    assert [f.status for f in ingest([src], db=db).files] == ["appended"]
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean)
    titles = []
    for path in (db, clean):
        con = duckdb.connect(str(path), read_only=True)
        titles.append(con.execute("SELECT title FROM sessions").fetchall())
        con.close()
    assert titles == [[("Fix the flaky test",)]] * 2


def _codex_line(ts: int, kind: str, payload: dict) -> dict:
    return {"timestamp": f"2026-01-01T00:00:{ts:02d}.000Z", "type": kind, "payload": payload}


CODEX_META = _codex_line(0, "session_meta", {"id": "0199b000-0000-7000-8000-00000000000c",
                                               "cwd": "/w", "cli_version": "0.144.1"})
CODEX_CALL = _codex_line(1, "response_item", {
    "type": "function_call", "name": "shell", "call_id": "call_x",
    "arguments": json.dumps({"command": ["bash", "-lc", "make test"]})})
CODEX_OUTPUT = _codex_line(2, "response_item", {
    "type": "function_call_output", "call_id": "call_x", "output": "1 failed"})
CODEX_EXIT = _codex_line(3, "event_msg", {"type": "exec_command_end", "call_id": "call_x",
                                          "exit_code": 2})


def _appended(src: Path, lines: list[dict], db: Path, query: str) -> list[tuple]:
    """Ingest ``src`` as it is, write it whole as ``lines``, ingest again (an append) and
    return ``query``'s rows."""
    ingest([src], db=db)
    _write(src, lines)
    assert [f.status for f in ingest([src], db=db).files] == ["appended"]
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(query).fetchall()
    con.close()
    return rows


@pytest.mark.parametrize("order", ["exit_last", "exit_first"])
@pytest.mark.parametrize("cut", [1, 2])
def test_codex_exit_code_appended_after_a_stop_still_reaches_its_call(
    tmp_path: Path, order: str, cut: int
) -> None:
    """exec_command_end may come before or after the call's output; a live rollout's
    ingest can stop anywhere around them."""
    body = [CODEX_CALL, CODEX_OUTPUT, CODEX_EXIT]
    if order == "exit_first":
        body = [CODEX_CALL, CODEX_EXIT, CODEX_OUTPUT]
    lines = [CODEX_META, *body]
    src = tmp_path / "rollout-2026-01-01T00-00-00-0199b000-0000-7000-8000-00000000000c.jsonl"
    db = tmp_path / "t.duckdb"
    _write(src, lines[:cut + 1])
    rows = _appended(src, lines, db, "SELECT call_id, output, status, exit_code FROM tool_calls")
    assert rows == [("call_x", "1 failed", "error", 2)]


def test_calls_that_never_get_an_exit_code_do_not_pile_up_in_the_resume_state(
    tmp_path: Path,
) -> None:
    """A tool call that is not a shell command never gets an exec_command_end: only the
    latest few completed calls are carried to the next ingest, waiting for one."""
    from analytics.sources.codex import NO_EXIT_KEPT

    calls = []
    for i in range(NO_EXIT_KEPT + 36):
        calls += [
            _codex_line(1, "response_item", {"type": "function_call", "name": "update_plan",
                                             "call_id": f"c{i}", "arguments": "{}"}),
            _codex_line(2, "response_item", {"type": "function_call_output",
                                             "call_id": f"c{i}", "output": "ok"}),
        ]
    src = tmp_path / "rollout-2026-01-01T00-00-00-0199b000-0000-7000-8000-00000000000c.jsonl"
    _write(src, [CODEX_META, *calls])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    con = duckdb.connect(str(db), read_only=True)
    (state,) = con.execute("SELECT resume_state FROM ingest_files").fetchone()
    n_calls = con.execute("SELECT count(*) FROM tool_calls").fetchone()[0]
    con.close()
    carried = json.loads(state)["no_exit"]
    assert n_calls == NO_EXIT_KEPT + 36
    assert list(carried) == [f"c{i}" for i in range(36, NO_EXIT_KEPT + 36)]


def test_line_read_before_its_newline_was_written_keeps_line_numbers(tmp_path: Path) -> None:
    """Codex message ids are line numbers: a stop right after a complete last line, before
    its newline, must not make the newline a line of its own."""
    src = tmp_path / "rollout-2026-01-01T00-00-00-0199b000-0000-7000-8000-00000000000c.jsonl"
    lines = [CODEX_META, CODEX_CALL, CODEX_OUTPUT, CODEX_EXIT]
    db = tmp_path / "t.duckdb"
    _write(src, lines[:1], tail=json.dumps(CODEX_CALL))  # line 2, no newline yet
    ids = _appended(src, lines, db, "SELECT source_id, location FROM messages ORDER BY msg_idx")
    assert ids == [("L2", "line 2"), ("L3", "line 3")]


def test_rewritten_file_replaces_its_rows(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(10)])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    _write(src, [_cc_line(i) for i in range(5)])
    res = ingest([src], db=db)
    assert [f.status for f in res.files] == ["ingested"]
    assert _counts(db)["messages"] == 5


def test_grown_file_whose_stored_part_changed_is_ingested_again(tmp_path: Path) -> None:
    """The resumed load, run while the file is hashed, is rolled back once the hash shows
    the part stored before changed; the file is then read whole."""
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(10)])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    _write(src, [_cc_line(i, session="99999999-2222-3333-4444-555555555555") for i in range(14)])
    res = ingest([src], db=db)
    assert [f.status for f in res.files] == ["ingested"]
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean)
    assert _counts(db) == _counts(clean)
    con = duckdb.connect(str(db), read_only=True)
    sessions = con.execute("SELECT session_id FROM sessions").fetchall()
    (sha, prefix), = con.execute("SELECT sha256, prefix_sha256 FROM ingest_files").fetchall()
    con.close()
    assert sessions == [("claude_code:99999999-2222-3333-4444-555555555555",)]
    assert sha == prefix == hashlib.sha256(src.read_bytes()).hexdigest()


def test_unknown_file_is_one_error_and_the_run_goes_on(tmp_path: Path) -> None:
    good = tmp_path / "a.jsonl"
    _write(good, [_cc_line(i) for i in range(4)])
    (tmp_path / "notes.txt").write_text("just some notes\nnothing to see\n")
    res = ingest([tmp_path], db=tmp_path / "t.duckdb")
    assert len(res.errors) == 1
    err = res.errors[0].error or ""
    assert "notes.txt" in err and "claude_code" in err and "\n" not in err
    assert res.totals()["messages"] == 4


def test_stable_ids_across_databases(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(6)])
    ids = []
    for name in ("a.duckdb", "b.duckdb"):
        ingest([src], db=tmp_path / name)
        con = duckdb.connect(str(tmp_path / name), read_only=True)
        ids.append(con.execute("SELECT session_id, msg_idx, source_id FROM messages ORDER BY 2").fetchall())
        con.close()
    assert ids[0] == ids[1]
    assert ids[0][0][0] == "claude_code:11111111-2222-3333-4444-555555555555"


def test_a_copied_file_does_not_merge_into_the_original(tmp_path: Path) -> None:
    a = tmp_path / "a" / "s.jsonl"
    a.parent.mkdir()
    _write(a, [_cc_line(i) for i in range(6)])
    b = tmp_path / "b" / "s.jsonl"
    b.parent.mkdir()
    shutil.copy(a, b)
    db = tmp_path / "t.duckdb"
    ingest([tmp_path], db=db)
    con = duckdb.connect(str(db), read_only=True)
    per = con.execute("SELECT session_id, count(*) FROM messages GROUP BY 1 ORDER BY 1").fetchall()
    con.close()
    assert [n for _, n in per] == [6, 6]


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/samples not present")
def test_real_samples_reconcile(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    res = ingest([SHARED / "claude_code", SHARED / "codex"], db=db)
    assert not res.errors
    for _, read, stored, quarantined in _ledger(db):
        assert read == stored + quarantined
    con = duckdb.connect(str(db), read_only=True)
    # Every non-blank line of every file is accounted for.
    for path, read in con.execute("SELECT path, records_read FROM ingest_files").fetchall():
        with open(path, "rb") as f:
            assert read == sum(1 for line in f if line.strip())
    con.close()


def test_custom_rules_retag_an_already_ingested_file(tmp_path: Path) -> None:
    src = ROOT / "data" / "samples" / "qwen36_kpro5_deploy.txt"
    rules = ROOT / "docs" / "examples" / "my_rules.jsonl"
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    ingest([src], db=db, rules=rules)
    con = duckdb.connect(str(db), read_only=True)
    builtin = {r[0] for r in con.execute("SELECT DISTINCT tag FROM tags").fetchall()}
    versions = con.execute("SELECT count(DISTINCT tagger_version) FROM tags").fetchone()
    con.close()
    assert "user_checkin" in builtin and len(builtin - {
        "user_checkin", "user_abort", "polling_loop", "diagnosis", "readiness_claim",
        "smoke_test", "benchmark", "error", "launch"}) >= 1
    assert versions == (1,)


def test_search_finds_appended_messages_before_the_index_is_rebuilt(tmp_path: Path) -> None:
    from analytics.store.search import search

    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(60)]
    lines[55]["message"]["content"] = "zebracorn overflow in the decoder"
    _write(src, lines[:50])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    _write(src, lines)
    ingest([src], db=db)
    con = duckdb.connect(str(db), read_only=True)
    hits = search(con, "zebracorn decoder")
    old = search(con, "message number 4")
    con.close()
    assert list(hits["source_id"])[:1] == ["u55"]
    assert len(old) > 0


def _unindexed_db(tmp_path: Path) -> Path:
    """A 30-message session ingested without its index; "zebracorn" is in message u7."""
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(30)]
    lines[7]["message"]["content"] = "zebracorn overflow in the decoder"
    _write(src, lines)
    db = tmp_path / "t.duckdb"
    ingest([src], db=db, build_index=False)
    return db


def test_documents_are_copied_for_search_only_when_the_index_is_built(tmp_path: Path) -> None:
    from analytics.store.search import build_index, search

    db = _unindexed_db(tmp_path)
    con = duckdb.connect(str(db))
    assert con.execute("SELECT count(*) FROM search_docs").fetchone() == (0,)
    assert list(search(con, "zebracorn")["source_id"]) == ["u7"]  # found where stored
    assert build_index(con)
    assert con.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
    n_docs = con.execute("SELECT count(*) FROM search_docs").fetchone()
    assert n_docs is not None and n_docs[0] >= 30
    assert list(search(con, "zebracorn")["source_id"]) == ["u7"]  # found by BM25
    con.close()


def test_a_database_written_before_search_pending_is_searched_read_only(tmp_path: Path) -> None:
    """Read-only readers do not migrate: a database of the version before m006 has no
    ``search_pending`` and is searched all the same (by BM25 and substring)."""
    from analytics.store.search import build_index, search

    db = _unindexed_db(tmp_path)
    con = duckdb.connect(str(db))
    assert build_index(con)
    con.execute("DROP TABLE search_pending")  # as that version left it
    con.execute("DELETE FROM _migrations WHERE name LIKE 'm006%'")
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    assert list(search(con, "zebracorn")["source_id"]) == ["u7"]
    con.close()


def test_copying_pending_documents_is_all_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted between the copy and the clean-up (Ctrl-C in ``--watch``), the index
    build leaves the documents pending, not copied twice."""
    from analytics.store import search as search_module

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(30)])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db, build_index=False)
    con = duckdb.connect(str(db))
    real = con.execute
    calls = []

    class Interrupted(Exception):
        pass

    class Con:
        def __getattr__(self, name: str) -> object:
            return getattr(con, name)

        def execute(self, sql: str, *args: object) -> object:
            if sql.strip().startswith("DELETE FROM search_pending"):
                calls.append(sql)
                raise Interrupted
            return real(sql, *args)

    with pytest.raises(Interrupted):
        search_module._materialise(Con())  # type: ignore[arg-type]
    assert calls
    assert con.execute("SELECT count(*) FROM search_docs").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM search_pending").fetchone() == (1,)
    con.close()


@pytest.mark.parametrize(("batch", "sessions_per_batch"), [(1, 1000), (3, 1000), (7, 1000),
                                                          (10**9, 1000), (10**9, 1), (30, 2)])
def test_documents_are_copied_in_batches_as_in_one_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, sessions_per_batch: int
) -> None:
    """The copy goes a batch of messages at a time (a one-statement sort of every text could
    run out of memory on a huge session), small sessions together: the same documents,
    doc_id in the same order."""
    from analytics.store import search as search_module

    sessions = [
        [_cc_line(i, f"{k}1111111-2222-3333-4444-555555555555") for i in range(23)]
        for k in (1, 2)
    ]
    for k, lines in enumerate(sessions):
        _write(tmp_path / f"s{k}.jsonl", lines)
    db = tmp_path / "t.duckdb"
    ingest([tmp_path], db=db, build_index=False)
    one_statement = tmp_path / "one.duckdb"
    shutil.copy(db, one_statement)

    def copied(path: Path) -> list[tuple[object, ...]]:
        with duckdb.connect(str(path)) as con:
            search_module._materialise(con)
            assert con.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
            return con.execute(
                "SELECT doc_id, session_id, msg_idx, kind, body FROM search_docs ORDER BY doc_id"
            ).fetchall()

    expected = copied(one_statement)  # (one batch: neither limit is reached)
    monkeypatch.setattr(search_module, "COPY_BATCH", batch)
    monkeypatch.setattr(search_module, "BATCH_SESSIONS", sessions_per_batch)
    with duckdb.connect(str(db)) as con:
        batches = search_module._batches(con)
    assert sum(len(b) for b in batches) == 2 * -(-23 // min(batch, 23))
    assert all(len(b) <= sessions_per_batch for b in batches)
    docs = copied(db)
    assert docs == expected
    assert [d[0] for d in docs] == list(range(1, len(docs) + 1))
    assert [d[1:4] for d in docs] == sorted(d[1:4] for d in docs)
    assert len(docs) == 46 and len({d[1] for d in docs}) == 2


def test_a_file_that_grows_while_it_is_parsed_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records appended during the parse are read by it; the next ingest finds nothing new
    (it used to see the stored size below the read offset and re-ingest the whole file)."""
    from analytics.sources import claude_code

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(20)])
    real = claude_code.parse

    def growing(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        for n, item in enumerate(real(*args, **kwargs)):  # type: ignore[arg-type]
            if n == 0:
                with src.open("a") as f:
                    f.write("".join(json.dumps(_cc_line(i)) + "\n" for i in range(20, 30)))
            yield item

    db = tmp_path / "t.duckdb"
    with monkeypatch.context() as m:
        m.setattr(claude_code, "parse", growing)
        first = ingest([src], db=db, build_index=False)
    assert first.totals()["messages"] == 30
    again = ingest([src], db=db, build_index=False)
    assert [f.status for f in again.files] == ["unchanged"]
    assert again.totals()["messages"] == 30


def test_a_session_ending_with_a_running_tool_call_is_analysed(tmp_path: Path) -> None:
    """The last call has no result yet (the agent is still waiting): NULLs must not break any
    analyser."""
    lines = [_cc_line(i) for i in range(4)]
    claim = _cc_line(5)
    claim["message"]["content"] = [{"type": "text", "text": "The server is up and ready now."}]
    call = _cc_line(7)
    call["message"]["content"] = [
        {"type": "text", "text": "Benchmarking at concurrency 16 to reach the 1000 tok/s target."},
        {"type": "tool_use", "id": "toolu_last", "name": "Bash",
         "input": {"command": "curl -s localhost:30000/v1/chat/completions -d '{\"messages\": []}'"}},
    ]
    src = tmp_path / "s.jsonl"
    _write(src, lines + [claim, call])
    res = ingest([src], db=tmp_path / "t.duckdb")
    assert not res.errors, res.errors[0].error
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    status = con.execute("SELECT status, result_msg_idx FROM tool_calls").fetchall()
    claims = con.execute("SELECT verdict FROM readiness_claims").fetchall()
    con.close()
    assert status == [("running", None)]
    assert claims == [("unverified",)]


def test_content_shas_hashes_prefixes_in_one_read(tmp_path: Path) -> None:
    import hashlib
    import os

    from analytics.ingest import content_sha, content_shas

    f = tmp_path / "a.jsonl"
    data = os.urandom(3 * (1 << 20) + 123)
    f.write_bytes(data)
    marks = [0, 5, 1 << 20, len(data), len(data) + 10]
    whole, at = content_shas(f, marks)
    assert whole == hashlib.sha256(data).hexdigest()
    for m in marks:
        assert at[m] == hashlib.sha256(data[:m]).hexdigest(), m
    assert content_sha(f, 7) == hashlib.sha256(data[:7]).hexdigest()


def test_watch_ingests_again_only_when_a_file_changed(tmp_path: Path) -> None:
    from analytics.ingest import IngestSummary, watch

    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(12)]
    _write(src, lines[:6])
    rounds: list[IngestSummary] = []

    def report(summary: IngestSummary) -> None:
        rounds.append(summary)
        if len(rounds) == 1:
            _write(src, lines)  # the live session grows between two polls

    watch([src], 0.01, report, polls=3, db=tmp_path / "t.duckdb")
    assert [[f.status for f in r.files] for r in rounds] == [["ingested"], ["appended"]]
    assert _counts(tmp_path / "t.duckdb")["messages"] == 12
    clean = tmp_path / "clean.duckdb"
    ingest([src], db=clean)
    assert _counts(clean) == _counts(tmp_path / "t.duckdb")


def test_watch_reports_a_missing_path_at_once(tmp_path: Path) -> None:
    from analytics.ingest import IngestSummary, watch

    rounds: list[IngestSummary] = []
    watch([tmp_path / "nope.jsonl"], 0.01, rounds.append, polls=2, db=tmp_path / "t.duckdb")
    assert len(rounds) == 1 and rounds[0].errors  # said once, in the first round


def test_watch_retries_a_round_that_finds_another_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analytics import ingest as ingest_module
    from analytics.errors import DatabaseLockedError
    from analytics.ingest import IngestSummary, watch

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(6)])
    real = ingest_module.ingest
    calls: list[dict[str, object]] = []

    def busy_once(paths: list[Path], **options: object) -> IngestSummary:
        calls.append(dict(options))
        if len(calls) == 1:
            raise DatabaseLockedError(str(options["db"]))
        return real(paths, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "ingest", busy_once)
    rounds: list[IngestSummary] = []
    locked: list[DatabaseLockedError] = []
    watch([src], 0.01, rounds.append, polls=3, locked=locked.append,
          db=tmp_path / "t.duckdb", reanalyse=True)
    assert len(locked) == 1
    assert [[f.status for f in r.files] for r in rounds] == [["ingested"]]
    assert [c["reanalyse"] for c in calls] == [True, True]  # until a round got through
    with pytest.raises(DatabaseLockedError):  # without ``locked``, the error ends the watch
        calls.clear()
        watch([src], 0.01, rounds.append, polls=1, db=tmp_path / "u.duckdb")


def test_watch_reanalyses_only_in_its_first_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analytics import ingest as ingest_module
    from analytics.ingest import IngestSummary, watch

    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(12)]
    _write(src, lines[:6])
    real = ingest_module.ingest
    asked: list[object] = []

    def spy(paths: list[Path], **options: object) -> IngestSummary:
        asked.append(options.get("reanalyse"))
        return real(paths, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "ingest", spy)

    def report(summary: IngestSummary) -> None:
        _write(src, lines[: 6 + 2 * len(asked)])  # something changes every round

    watch([src], 0.01, report, polls=3, db=tmp_path / "t.duckdb", reanalyse=True)
    assert asked == [True, False, False]


def test_a_warm_analyser_is_not_reused_with_other_rules(tmp_path: Path) -> None:
    from analytics.ingest import Warm

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(4)])
    rules = ROOT / "docs" / "examples" / "my_rules.jsonl"
    warm = Warm()
    ingest([src], db=tmp_path / "a.duckdb", warm=warm)
    plain = warm.analyser
    ingest([src], db=tmp_path / "b.duckdb", warm=warm, rules=rules)
    assert warm.analyser is not plain and warm.analyser.rules == rules


def test_an_unchanged_file_is_skipped_without_the_heavy_imports(tmp_path: Path) -> None:
    """A no-op re-ingest is mostly interpreter start-up: keep the heavy imports (pandas,
    pyarrow, the pydantic records, the parsers) off its path. It still reports what is
    stored for the file."""
    import subprocess
    import sys

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(5)])
    db = tmp_path / "t.duckdb"
    first = ingest([src], db=db).files[0]
    heavy = ("pandas", "pyarrow", "pydantic", "analytics.models", "analytics.sources.claude_code")
    code = (
        "import json, sys; from analytics.ingest import ingest; "
        f"f = ingest([r'{src}'], db=r'{db}').files[0]; "
        "print(json.dumps([f.status, f.format, f.sessions, f.messages, f.records_read, "
        f"f.records_stored, [m for m in {heavy!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [
        "unchanged", "claude_code", first.sessions, first.messages, first.records_read,
        first.records_stored, [],
    ]
    assert (first.sessions, first.messages) == (1, 5)


def as_if_an_older_parser_stored_it(db: Path, version: int | None) -> None:
    """Make the stored rows of ``db`` what an older parser could have left: a message read
    otherwise, and that parser's ``version`` (None: stored before parsers had versions)."""
    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE messages SET text = 'as an older parser read it' WHERE msg_idx = 0")
        con.execute("UPDATE ingest_files SET parser_version = ?", [version])
    finally:
        con.close()


def _first_text(db: Path) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return str(con.execute("SELECT text FROM messages WHERE msg_idx = 0").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("stored", [None, "older"])
@pytest.mark.parametrize("touched", [False, True])
def test_an_unchanged_file_stored_by_an_older_parser_is_read_again(
    tmp_path: Path, stored: str | None, touched: bool
) -> None:
    """After an upgrade whose parser gives other rows, an unchanged file (same size and
    mtime, or only its mtime changed: same sha256) is read again whole and gets the current
    parser's rows, as a fresh database does; the summary counts it as re-read."""
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(8)], tail="{not json\n")
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    as_if_an_older_parser_stored_it(db, None if stored is None else PARSER_VERSIONS["claude_code"] - 1)
    if touched:
        src.touch()
    fresh = tmp_path / "fresh.duckdb"
    ingest([src], db=fresh)
    again = ingest([src], db=db)
    (f,) = again.files
    assert (f.status, f.reread) == ("ingested", True)
    assert (again.totals()["ingested"], again.totals()["reread"], again.totals()["unchanged"]) == (1, 1, 0)
    assert (f.sessions, f.messages, f.records_read) == (1, 8, 9)
    assert f.records_read == f.records_stored + f.records_quarantined
    assert all_tables(db) == all_tables(fresh)  # (ingest_files.parser_version the current one)
    third = ingest([src], db=db).files[0]
    assert (third.status, third.reread) == ("unchanged", False)


def test_a_file_stored_by_the_current_parser_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same parser version: skipped (its stored rows stand, even altered). A newer one
    (an upgrade that bumped the format's version): read again; another format's files stay."""
    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(4)])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    as_if_an_older_parser_stored_it(db, PARSER_VERSIONS["claude_code"])
    f = ingest([src], db=db).files[0]
    assert (f.status, f.reread, _first_text(db)) == ("unchanged", False, "as an older parser read it")
    monkeypatch.setitem(PARSER_VERSIONS, "codex", PARSER_VERSIONS["codex"] + 1)
    assert ingest([src], db=db).files[0].status == "unchanged"
    monkeypatch.setitem(PARSER_VERSIONS, "claude_code", PARSER_VERSIONS["claude_code"] + 1)
    f = ingest([src], db=db).files[0]
    assert (f.status, f.reread, _first_text(db)) == ("ingested", True, "message number 0")
    assert ingest([src], db=db).files[0].status == "unchanged"


def test_a_grown_file_stored_by_an_older_parser_is_read_again_whole(tmp_path: Path) -> None:
    """An appended file is not resumed from its offset then: the part stored by the older
    parser is read again too (it changed, so it is not counted as re-read)."""
    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(12)]
    _write(src, lines[:6])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    as_if_an_older_parser_stored_it(db, None)
    _write(src, lines)
    f = ingest([src], db=db).files[0]
    assert (f.status, f.reread, f.messages, f.records_read) == ("ingested", False, 12, 12)
    fresh = tmp_path / "fresh.duckdb"
    ingest([src], db=fresh)
    assert all_tables(db) == all_tables(fresh)


def test_watch_reads_again_a_file_stored_by_an_older_parser(tmp_path: Path) -> None:
    from analytics.ingest import IngestSummary, watch

    src = tmp_path / "s.jsonl"
    _write(src, [_cc_line(i) for i in range(4)])
    db = tmp_path / "t.duckdb"
    ingest([src], db=db)
    as_if_an_older_parser_stored_it(db, None)
    rounds: list[IngestSummary] = []
    watch([src], 0.01, rounds.append, polls=2, db=db)
    assert [[(f.status, f.reread) for f in r.files] for r in rounds] == [[("ingested", True)]]
    assert _first_text(db) == "message number 0"


def test_an_unchanged_file_is_not_detected_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its stored format stands for its detection (the same bytes and mtime: the content
    that was detected); a file that changed is detected again."""
    from analytics.sources import detect

    folder = tmp_path / "in"
    folder.mkdir()
    lines = [_cc_line(i) for i in range(6)]
    _write(folder / "a.jsonl", lines)
    _write(folder / "b.jsonl", [_cc_line(i, session="b") for i in range(3)])
    db = tmp_path / "t.duckdb"
    ingest([folder], db=db, workers=1)
    real = detect.detect_format
    detected: list[str] = []

    def detect_format(path: Path) -> str:
        detected.append(path.name)
        if path.name == "a.jsonl":
            raise AssertionError("an unchanged file is detected again")
        return real(path)

    monkeypatch.setattr(detect, "detect_format", detect_format)
    _write(folder / "b.jsonl", [_cc_line(i, session="b") for i in range(5)])
    summary = ingest([folder, folder / "a.jsonl"], db=db, workers=1)
    assert detected == ["b.jsonl"]
    assert [(Path(f.path).name, f.format, f.status) for f in summary.files] == [
        ("a.jsonl", "claude_code", "unchanged"),
        ("b.jsonl", "claude_code", "appended"),
        ("a.jsonl", "claude_code", "unchanged"),
    ]
    assert summary.files[0].messages == 6


def test_a_warm_ingest_reuses_what_the_last_one_loaded(tmp_path: Path) -> None:
    from analytics.ingest import Warm

    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(8)]
    _write(src, lines[:4])
    warm = Warm()
    ingest([src], db=tmp_path / "t.duckdb", warm=warm)
    loaded = (warm.analyser, warm.redactor)
    assert None not in loaded
    _write(src, lines)
    ingest([src], db=tmp_path / "t.duckdb", warm=warm)
    assert (warm.analyser, warm.redactor) == loaded


def test_a_new_file_is_hashed_while_it_is_parsed(tmp_path: Path) -> None:
    """The hash of a new file (computed on a thread during the parse) is its content's, and
    an append to it is read from where the ingest stopped."""
    import hashlib
    import threading

    from analytics.ingest import content_sha

    src = tmp_path / "a.jsonl"
    _write(src, [_cc_line(i) for i in range(30)])
    db = tmp_path / "t.duckdb"
    assert not ingest([src], db=db).errors
    with duckdb.connect(str(db), read_only=True) as con:
        sha, prefix = con.execute(
            "SELECT sha256, prefix_sha256 FROM ingest_files").fetchone()  # type: ignore[misc]
    assert sha == prefix == hashlib.sha256(src.read_bytes()).hexdigest()
    data = src.read_bytes()
    for n in (0, 1, 100, len(data), len(data) + 10):
        assert content_sha(src, n) == hashlib.sha256(data[:n]).hexdigest()
    cancel = threading.Event()
    cancel.set()
    # cancelled: it stops reading (its digest means nothing, but is not the content's)
    assert content_sha(src, len(data), cancel) != hashlib.sha256(data).hexdigest()
    with src.open("a") as f:
        f.write(json.dumps(_cc_line(30)) + "\n")
    res = ingest([src], db=db)
    assert [f.status for f in res.files] == ["appended"] and _counts(db)["messages"] == 31


def test_an_exclusive_ingest_stores_the_same_tables(tmp_path: Path) -> None:
    """Opened for smaller row groups (as the CLI does) or not: the same rows, an append and
    an index build included."""
    from _samples import all_tables

    from analytics.samples_path import samples_dir

    src = tmp_path / "src"
    shutil.copytree(samples_dir(), src)
    grown = src / "grown.jsonl"
    grown.write_text("".join(json.dumps(_cc_line(i)) + "\n" for i in range(40)))
    dbs = {}
    for exclusive in (False, True):
        db = dbs[exclusive] = tmp_path / f"{exclusive}.duckdb"
        ingest([src], db=db, exclusive=exclusive, workers=1)
    with grown.open("a") as f:
        f.write("".join(json.dumps(_cc_line(i)) + "\n" for i in range(40, 60)))
    for exclusive, db in dbs.items():
        summary = ingest([src], db=db, exclusive=exclusive, workers=1)
        assert [f.status for f in summary.files if f.status != "unchanged"] == ["appended"]
    assert all_tables(dbs[True]) == all_tables(dbs[False])


@pytest.mark.parametrize(("cores", "given", "during"), [(2, 4, 1), (8, 4, 4), (8, 16, 6)])
def test_duckdb_runs_on_fewer_threads_while_a_file_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, given: int, during: int
) -> None:
    """All cores but two, or fewer if the connection had fewer (an ingest pool's worker);
    the connection's setting is back afterwards, a failed parse included."""
    from analytics import ingest as ingest_module
    from analytics.ingest_load import FileLoader
    from analytics.samples_path import sample_inputs
    from analytics.store.db import connect

    monkeypatch.setattr(ingest_module.machine, "cores", lambda: cores)
    seen: set[int] = set()
    add = FileLoader.add

    def spy(self: FileLoader, item: object) -> None:
        seen.add(int(self.con.execute("SELECT current_setting('threads')").fetchone()[0]))
        add(self, item)

    monkeypatch.setattr(FileLoader, "add", spy)
    con = connect(tmp_path / "t.duckdb", read_only=False)
    try:
        con.execute(f"SET threads = {given}")
        ingestor = ingest_module.Ingestor(con, analyse=False)
        sample, fmt, _ = next(u for u in ingest_module.iter_units(sample_inputs()) if u[0].is_file())
        result = ingestor.ingest_unit(sample, fmt or "")
        assert result.status == "ingested" and seen == {during}
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == given

        def fail(self: FileLoader, item: object) -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr(FileLoader, "add", fail)
        other = tmp_path / sample.name
        shutil.copy(sample, other)
        with pytest.raises(RuntimeError):
            ingestor.ingest_unit(other, fmt or "")
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == given
    finally:
        con.close()


BLANK_FILES = {"empty.jsonl": b"", "blank.txt": b"  \n\t\r\n", "bom.json": b"\xef\xbb\xbf\n"}


def test_an_empty_file_is_skipped_and_ingested_once_it_has_content(tmp_path: Path) -> None:
    """A session an agent created and never wrote: no error, nothing stored, and the
    next ingest after it was written ingests it."""
    for name, content in BLANK_FILES.items():
        (tmp_path / name).write_bytes(content)
    _write(tmp_path / "s.jsonl", [_cc_line(i) for i in range(4)])
    db = tmp_path / "t.duckdb"
    first = ingest([tmp_path], db=db)
    assert not first.errors
    assert sorted(Path(f.path).name for f in first.skipped) == sorted(BLANK_FILES)
    assert first.totals()["skipped"] == 3 and first.totals()["ingested"] == 1
    assert [Path(p).name for p, *_ in _ledger(db)] == ["s.jsonl"]
    assert _counts(db)["sessions"] == 1
    _write(tmp_path / "empty.jsonl", [_cc_line(i, "99999999-2222-3333-4444-555555555555")
                                      for i in range(3)])
    second = ingest([tmp_path], db=db)
    status = {Path(f.path).name: f.status for f in second.files}
    assert status == {"empty.jsonl": "ingested", "blank.txt": "skipped", "bom.json": "skipped",
                      "s.jsonl": "unchanged"}
    assert _counts(db)["messages"] == 4 + 3


@pytest.mark.parametrize("fmt", ["auto", "claude_code", "transcript_text"])
def test_an_empty_file_named_alone_is_skipped_whatever_the_format(
    tmp_path: Path, fmt: str
) -> None:
    """Named on the command line, or with ``--format`` (whose parser would make an
    empty session of it), an empty file stores nothing."""
    src = tmp_path / "new.jsonl"
    src.write_bytes(b"\n")
    db = tmp_path / "t.duckdb"
    summary = ingest([src], db=db, fmt=fmt)
    assert [(f.status, f.error) for f in summary.files] == [("skipped", None)]
    assert _ledger(db) == [] and _counts(db)["sessions"] == 0


def test_watch_skips_an_empty_file_until_it_is_written(tmp_path: Path) -> None:
    from analytics.ingest import IngestSummary, watch

    (tmp_path / "sessions").mkdir()
    src = tmp_path / "sessions" / "live.jsonl"
    src.write_bytes(b"")
    rounds: list[IngestSummary] = []

    def report(summary: IngestSummary) -> None:
        rounds.append(summary)
        if len(rounds) == 1:
            _write(src, [_cc_line(i) for i in range(5)])

    watch([src.parent], 0.01, report, polls=3, db=tmp_path / "t.duckdb")
    assert [[f.status for f in r.files] for r in rounds] == [["skipped"], ["ingested"]]
    assert _counts(tmp_path / "t.duckdb")["messages"] == 5


def test_a_session_is_titled_by_the_words_after_ide_context(tmp_path: Path) -> None:
    ide = "<ide_opened_file>The user opened the file /s/start.sh in the IDE.</ide_opened_file>"
    ask = "can you get vllm running with this script?"
    lines = [_cc_line(i) for i in range(4)]
    lines[0]["message"]["content"] = [{"type": "text", "text": ide}, {"type": "text", "text": ask}]
    lines[2]["message"]["content"] = "2"
    _write(tmp_path / "s.jsonl", lines)
    db = tmp_path / "t.duckdb"
    ingest([str(tmp_path / "s.jsonl")], db=str(db), workers=1)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT title FROM sessions").fetchall() == [(ask,)]
    finally:
        con.close()


@pytest.mark.parametrize(("query", "line"), [("30000", 7), ("H200", 9), ("100%", 11)])
def test_indexed_search_finds_what_the_index_does_not_keep(
    tmp_path: Path, query: str, line: int
) -> None:
    """The BM25 index keeps letter tokens only; numbers and symbols are found verbatim."""
    from analytics.store.search import search

    texts = {7: "the server listens on port 30000", 9: "this box is an H200 node",
             11: "GPU utilisation stays at 100% during decode"}
    with _indexed(tmp_path, texts) as con:
        assert list(search(con, "utilisation")["source_id"]) == ["u11"]
        assert list(search(con, query)["source_id"]) == [f"u{line}"]


@contextmanager
def _indexed(tmp_path: Path, texts: dict[int, str]) -> Iterator[duckdb.DuckDBPyConnection]:
    """A database of a 30-message session whose messages ``texts`` say what they map to,
    with its BM25 index built (the test is skipped where DuckDB's fts extension is not)."""
    from analytics.store.search import build_index

    src = tmp_path / "s.jsonl"
    lines = [_cc_line(i) for i in range(30)]
    for i, text in texts.items():
        lines[i]["message"]["content"] = text
    _write(src, lines)
    db = tmp_path / "t.duckdb"
    ingest([src], db=db, build_index=False)
    con = duckdb.connect(str(db))
    try:
        if not build_index(con, force=True):
            pytest.skip("DuckDB's fts extension is not installed")
        yield con
    finally:
        con.close()


def test_search_ranks_documents_holding_the_whole_phrase_first(tmp_path: Path) -> None:
    """"out of memory" is two stop words and "memory": BM25 alone ranks a document that says
    "memory" often (nvidia-smi queries) above the one OOM; the one holding the phrase leads."""
    from analytics.store.search import search

    smi = "nvidia-smi --query-gpu=memory.used,memory.total: memory used, memory free, memory"
    texts = {i: smi for i in (3, 5, 7)}
    texts[20] = (
        "The decode server died: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.00 GiB while the rest of the node kept running its other jobs as before without it"
    )
    with _indexed(tmp_path, texts) as con:
        found = search(con, "Out of  memory")
        assert list(found["source_id"])[0] == "u20"
        assert list(found["score"]) == sorted(found["score"], reverse=True)
        assert set(found["source_id"]) == {"u3", "u5", "u7", "u20"}


def test_paths_as_the_readme_writes_them_start_at_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's notebook example is ``analytics.ingest(["~/.claude/projects"], db=...)``:
    no shell expands ``~`` in Python, so the library does (paths and the database)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    projects = tmp_path / ".claude" / "projects" / "p"
    projects.mkdir(parents=True)
    _write(projects / "s.jsonl", [_cc_line(i) for i in range(4)])
    res = ingest(["~/.claude/projects"], db="~/t.duckdb", workers=1)
    assert not res.errors, res.errors
    assert _counts(tmp_path / "t.duckdb")["messages"] == 4
    from analytics import connect, sessions_df

    assert len(sessions_df("~/t.duckdb")) == 1
    connect("~/t.duckdb").close()


def test_files_ingested_one_run_at_a_time_share_row_groups(tmp_path: Path) -> None:
    """Each ``ingest`` run (and a long run between files, to let readers in) closes the
    database: a table with an index then starts a new row group of its own after every
    close, and a folder of small sessions left ``sessions``/``ingest_files`` in one row
    group per second of ingest (a file six times its size, and every per-file lookup slower
    than the one before)."""
    db = tmp_path / "db.duckdb"
    for k in range(6):
        src = tmp_path / f"s{k}.jsonl"
        _write(src, [_cc_line(i, session=f"{k:08x}-2222-3333-4444-555555555555") for i in range(4)])
        ingest([src], db=db, build_index=False)
    _write(tmp_path / "s0.jsonl", [_cc_line(i, session=f"{0:08x}-2222-3333-4444-555555555555")
                                   for i in range(3)])  # rewritten: stored again, not twice
    ingest([tmp_path / "s0.jsonl"], db=db, build_index=False)
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in ("sessions", "ingest_files"):
            groups = con.execute(
                f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{table}')"
            ).fetchone()
            assert groups == (1,), table
        assert con.execute(
            "SELECT count(*), count(DISTINCT session_id), min(n_messages) FROM sessions"
        ).fetchone() == (6, 6, 3)
        assert con.execute("SELECT count(*), count(DISTINCT path) FROM ingest_files").fetchone() == (6, 6)
    finally:
        con.close()


def test_codex_event_copies_of_messages_are_found_once(tmp_path: Path) -> None:
    """Codex writes each prompt and reply twice (a response_item message and an event_msg);
    a search finds the message, not its copy too. An event with no twin is still found."""
    from analytics.store.search import build_index, search

    def message(ts: int, role: str, text: str) -> dict:
        return _codex_line(ts, "response_item", {
            "type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]})

    def event(ts: int, kind: str, text: str) -> dict:
        return _codex_line(ts, "event_msg", {"type": kind, "message": text})

    path = tmp_path / "rollout-2026-01-01T00-00-00-0199b000-0000-7000-8000-00000000000c.jsonl"
    _write(path, [
        CODEX_META,
        message(1, "user", "is the quokka server up?"), event(1, "user_message", "is the quokka server up?"),
        message(2, "assistant", "The quokka server is up."),
        event(2, "agent_message", "The quokka server is up."),
        event(3, "agent_message", "A quokka note with no twin."),
    ])
    db = tmp_path / "c.duckdb"
    assert not ingest([path], db=db, build_index=False).errors
    for indexed in (False, True):
        con = duckdb.connect(str(db), read_only=not indexed)
        if indexed:
            build_index(con, force=True)
        found = search(con, "quokka")
        con.close()
        assert sorted(zip(found["role"], found["snippet"], strict=True)) == [
            ("assistant", "The quokka server is up."),
            ("system", "A quokka note with no twin."),
            ("user", "is the quokka server up?"),
        ], indexed


def test_messages_df_reads_some_columns_of_a_range(tmp_path: Path) -> None:
    """A dashboard reads a window of a long session without its texts."""
    from analytics import messages_df

    db = tmp_path / "t.duckdb"
    ingest([ROOT / "data" / "samples" / "qwen36_kpro5_deploy.txt"], db=db)
    with duckdb.connect(str(db), read_only=True) as con:
        sid = con.execute(
            "SELECT session_id FROM sessions ORDER BY n_messages DESC LIMIT 1"
        ).fetchone()[0]
    df = messages_df(db, session_id=sid, columns=["msg_idx", "role"], msg_range=(10, 19))
    assert list(df.columns) == ["msg_idx", "role"] and df["msg_idx"].tolist() == list(range(10, 20))
    with pytest.raises(duckdb.BinderException, match="nope"):
        messages_df(db, columns=["nope"])


def test_the_heap_of_a_parse_is_frozen_for_the_analysis_and_thawed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The objects alive after a file's parse are left out of the collector's passes while
    it is analysed (``gcpause.no_cyclic_gc(freeze=True)``), and put back once it is loaded,
    the collector on again; a parse that fails thaws them too."""
    import gc

    from analytics import ingest_load
    from analytics.analysis.run import SessionRun

    src = tmp_path / "a.jsonl"
    _write(src, [_cc_line(i) for i in range(30)])
    frozen_then: list[int] = []
    finish = SessionRun.finish

    def spy(self: SessionRun) -> None:
        frozen_then.append(gc.get_freeze_count())
        finish(self)

    monkeypatch.setattr(SessionRun, "finish", spy)
    assert not ingest([src], db=tmp_path / "t.duckdb").errors
    assert frozen_then and all(n > 1000 for n in frozen_then)
    assert gc.get_freeze_count() == 0 and gc.isenabled()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("input/output error")

    monkeypatch.setattr(ingest_load.FileLoader, "finish", broken)
    bad = tmp_path / "b.jsonl"
    _write(bad, [_cc_line(i) for i in range(3)])
    assert ingest([bad], db=tmp_path / "t.duckdb").errors
    assert gc.get_freeze_count() == 0 and gc.isenabled()
