"""Exact counts for the bundled samples, established from the raw files independently
of the parsers (plain json / regex over the source), then compared with the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from analytics.ingest import ingest

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
CC = next(SAMPLES.glob("claude_code_*/*.jsonl"))
CODEX = next(SAMPLES.glob("codex_*/*.jsonl"))
OPENCODE = SAMPLES / "opencode_deepseek_v4_campaign.json"
TEXT = SAMPLES / "qwen36_kpro5_deploy.txt"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _expected_cc() -> dict[str, int]:
    lines = _lines(CC)
    msgs = [o for o in lines if o["type"] in ("user", "assistant", "system")]
    uses = [b for o in lines if o["type"] == "assistant"
            for b in o["message"]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    markers = sum(
        1 for o in lines if o["type"] == "user"
        for b in (o["message"]["content"] if isinstance(o["message"]["content"], list) else [])
        if isinstance(b, dict) and str(b.get("text") or b.get("content") or "")
        .startswith("[Request interrupted by user")
    )
    return {"messages": len(msgs), "tool_calls": len(uses), "records": len(lines),
            "interrupts": markers}


def _expected_codex() -> dict[str, int]:
    lines = _lines(CODEX)
    carrying = {"message", "reasoning", "function_call", "function_call_output",
                "custom_tool_call", "custom_tool_call_output", "local_shell_call"}
    msgs = [o for o in lines if o["type"] == "response_item" and o["payload"]["type"] in carrying]
    events = [o for o in lines if o["type"] == "event_msg"
              and o["payload"]["type"] in ("user_message", "agent_message", "turn_aborted")]
    compacted = [o for o in lines if o["type"] == "compacted"]
    calls = [o for o in lines if o["type"] == "response_item"
             and o["payload"]["type"] in ("function_call", "custom_tool_call", "local_shell_call")]
    return {"messages": len(msgs) + len(events) + len(compacted), "tool_calls": len(calls),
            "records": len(lines)}


def _expected_opencode() -> dict[str, int]:
    export = json.loads(OPENCODE.read_text())
    parts = [p for m in export["messages"] for p in m["parts"]]
    return {"messages": len(export["messages"]),
            "tool_calls": sum(p["type"] == "tool" for p in parts),
            "aborted": sum(p["type"] == "tool" and p["state"].get("status") == "error"
                           and "aborted" in str(p["state"].get("error", "")).lower()
                           for p in parts),
            "records": 1 + len(export["messages"]) + len(parts)}


def _expected_text() -> dict[str, int]:
    headers = re.findall(r"^<msg id=(\d+)> (user|assistant|system|tool):", TEXT.read_text(), re.M)
    return {"messages": len(headers), "records": len(headers),
            "user": sum(r == "user" for _, r in headers)}


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    db = tmp_path_factory.mktemp("counts") / "t.duckdb"
    res = ingest([CC, CODEX, OPENCODE, TEXT], db=db)
    assert not res.errors
    return duckdb.connect(str(db), read_only=True)


def _stored(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, int]:
    key = str(path.resolve())
    q = lambda sql: con.execute(sql, [key]).fetchone()[0]  # noqa: E731
    sess = "(SELECT session_id FROM sessions WHERE source_path = ?)"
    return {
        "messages": q(f"SELECT count(*) FROM messages WHERE session_id IN {sess}"),
        "tool_calls": q(f"SELECT count(*) FROM tool_calls WHERE session_id IN {sess}"),
        "aborted": q(f"SELECT count(*) FROM tool_calls WHERE status = 'aborted' "
                     f"AND session_id IN {sess}"),
        "records": q("SELECT records_read FROM ingest_files WHERE path = ?"),
        "user": q(f"SELECT count(*) FROM messages WHERE role = 'user' AND session_id IN {sess}"),
        "interrupts": q(f"SELECT count(*) FROM messages WHERE starts_with(text, "
                        f"'[Request interrupted by user') AND session_id IN {sess}"),
    }


@pytest.mark.parametrize("path, expected", [
    (CC, _expected_cc), (CODEX, _expected_codex), (OPENCODE, _expected_opencode),
    (TEXT, _expected_text),
], ids=["claude_code", "codex", "opencode", "transcript_text"])
def test_counts_match_the_raw_file(con: duckdb.DuckDBPyConnection, path: Path, expected) -> None:  # type: ignore[no-untyped-def]
    want = expected()
    got = _stored(con, path)
    assert {k: got[k] for k in want} == want
