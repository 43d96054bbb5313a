"""A session ingested in pieces (a live transcript growing between ingests) ends with
exactly the analysis of a session ingested whole: tags, tooling facts, campaigns,
levers and readiness verdicts, whatever the cut points."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _samples import claude_code_line, table_rows

from analytics.analysis import run
from analytics.ingest import ingest
from analytics.samples_path import samples_dir

TABLES = {
    "messages": "msg_idx, source_id, role, text",
    "tags": "msg_idx, tag, source, evidence, start_char",
    "polling_loops": "msg_idx, call_id, interval_s, target, outcome",
    "launches": "msg_idx, call_id, engine, flags, changed_flags",
    "server_events": "msg_idx, engine, event, detail",
    "measurements": "msg_idx, metric, value, label",
    "campaigns": "campaign_id, target_metric, target_value, baseline_value, best_value, status",
    "levers": "campaign_id, seq, name, value_before, value_after, outcome",
    "readiness_claims": "msg_idx, claim_text, subject, verdict, reason, contradicted_by_msg_idx",
}


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return table_rows(db, {t: f"session_id, {cols}" for t, cols in TABLES.items()})


def _jsonl_samples() -> list[Path]:
    return sorted(p for p in samples_dir().rglob("*.jsonl") if p.parent.name != "subagents")


@pytest.mark.parametrize("sample", _jsonl_samples(), ids=lambda p: p.parent.name)
def test_growing_session_ends_with_the_analysis_of_a_whole_one(
    tmp_path: Path, sample: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(sample.parent, root)
    live = root / sample.name
    lines = sample.read_bytes().splitlines(keepends=True)
    whole = tmp_path / "whole.duckdb"
    assert not ingest([root], db=whole).errors
    expected = _dump(whole)
    assert expected["readiness_claims"] and expected["tags"]

    db = tmp_path / "pieces.duckdb"
    for cut in (len(lines) // 4, len(lines) // 2, len(lines) * 3 // 4, len(lines)):
        live.write_bytes(b"".join(lines[:cut]))
        assert not ingest([root], db=db).errors
    got = _dump(db)
    for table in TABLES:
        assert got[table] == expected[table], table


@pytest.mark.parametrize("sample", _jsonl_samples(), ids=lambda p: p.parent.name)
def test_chunk_boundaries_do_not_change_the_analysis(
    tmp_path: Path, sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole.duckdb"
    assert not ingest([sample.parent], db=whole).errors
    monkeypatch.setattr(run, "CHUNK", 7)  # every 7 messages a new chunk
    chunked = tmp_path / "chunked.duckdb"
    assert not ingest([sample.parent], db=chunked).errors
    assert _dump(chunked) == _dump(whole)


def test_older_messages_analysed_again_keep_exactly_their_analysis(tmp_path: Path) -> None:
    """``run_messages(extra_idx=…)`` (older messages whose calls an append completed)
    replaces their analysis by the same analysis, the first message of a session included."""
    from analytics.analysis.run import MESSAGE_TABLES, Analyser
    from analytics.store.db import connect

    db = tmp_path / "s.duckdb"
    assert not ingest([samples_dir()], db=db, build_index=False).errors
    con = connect(db, read_only=False)
    try:
        rows = con.execute(
            "SELECT session_id, list(DISTINCT msg_idx ORDER BY msg_idx) FROM tags GROUP BY 1"
        ).fetchall()

        def analysis(sid: str, idx: list[int]) -> list[list[tuple[object, ...]]]:
            return [con.execute(
                f"SELECT * FROM {t} WHERE session_id = ? AND list_contains(?, msg_idx) "
                "ORDER BY ALL", [sid, idx]).fetchall() for t in MESSAGE_TABLES]

        analyser = Analyser()
        for sid, tagged in rows:
            extra = sorted({0, tagged[len(tagged) // 2], tagged[-1]})
            before = analysis(sid, extra)
            assert any(before)
            analyser.run_messages(con, sid, 1 << 30, extra)
            assert analysis(sid, extra) == before, sid
    finally:
        con.close()


def _background_wait(path: Path, between: int) -> list[bytes]:
    """A Claude Code session: a server started in the background, then four BashOutput
    re-checks of it with ``between`` messages of prose after each; its lines, written."""
    lines: list[bytes] = []

    def line(role: str, content: object) -> None:
        i = len(lines)
        lines.append(claude_code_line(i, "bg", role, content).encode() + b"\n")

    def call(call_id: str, tool: str, args: dict[str, object], result: str) -> None:
        line("assistant", [{"type": "tool_use", "id": call_id, "name": tool, "input": args}])
        line("user", [{"type": "tool_result", "tool_use_id": call_id, "content": result}])

    line("user", "start the server and tell me when it is up")
    call("t0", "Bash", {"command": "python -m sglang.launch_server --model-path m --port 30000",
                        "run_in_background": True}, "Command running in background with ID: b1")
    for n in range(4):
        call(f"t{n + 1}", "BashOutput", {"bash_id": "b1"},
             "<status>running</status>\n<stdout>Load weight begin</stdout>")
        for k in range(between):
            line("assistant", [{"type": "text", "text": f"Still loading ({n}.{k})."}])
    path.write_bytes(b"".join(lines))
    return lines


def test_background_rechecks_far_apart_are_tagged_however_the_session_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-checks of one background job with more messages between them than a chunk's
    context (``TAG_MARGIN``, or the chunk, if shorter): each is a polling_loop all the same,
    in chunks of any size and in a file ingested as it grew."""
    between = run.TAG_MARGIN + 10
    whole = tmp_path / "whole"
    whole.mkdir()
    _background_wait(whole / "bg.jsonl", between)
    assert not ingest([whole], db=whole / "t.duckdb").errors
    expected = _dump(whole / "t.duckdb")
    assert len([r for r in expected["tags"] if r[2] == "polling_loop"]) == 4

    for size in (3, 7, between + 5):
        monkeypatch.setattr(run, "CHUNK", size)
        cut = tmp_path / f"chunks{size}"
        cut.mkdir()
        _background_wait(cut / "bg.jsonl", between)
        assert not ingest([cut], db=cut / "t.duckdb").errors
        assert _dump(cut / "t.duckdb") == expected, size
    monkeypatch.undo()

    grown = tmp_path / "grown"
    grown.mkdir()
    lines = _background_wait(grown / "bg.jsonl", between)
    for n in (4, 8, len(lines) // 2, len(lines)):  # (a call cut from its result, too)
        (grown / "bg.jsonl").write_bytes(b"".join(lines[:n]))
        assert not ingest([grown], db=grown / "t.duckdb").errors
    assert _dump(grown / "t.duckdb") == expected
