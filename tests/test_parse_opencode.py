"""opencode: export JSON, storage folder and SQLite db give the same kind of records."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from _samples import of
from _samples import run as run_parser
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.models import Ledger, Message, ParsedItem, Quarantined, RawRecord, Session, ToolCall
from analytics.sources import opencode

FIXTURES = Path(__file__).parent / "fixtures" / "opencode"
EXPORT = FIXTURES / "export_aborts.json"
DATA_HOME = FIXTURES / "data_home"
SES = "ses_7f3a1c2e0ffeAbCdEfGhIjKlMn"


def run(path: Path) -> tuple[list[ParsedItem], Ledger]:
    return run_parser(opencode, path)


def calls_by_id(items: list[ParsedItem]) -> dict[str, ToolCall]:
    return {c.call_id: c for c in of(items, ToolCall)}


# --------------------------------------------------------------------------- export


def test_export_session_fields() -> None:
    items, ledger = run(EXPORT)
    sessions = of(items, Session)
    first, last = sessions[0], sessions[-1]
    assert first.session_id == f"opencode:{SES}" and first.native_id == SES
    assert first.title == "Launch the MTP server"
    assert first.agent == "opencode 1.14.46"
    assert first.cwd == "/srv/work"
    assert first.started_at == datetime(2025, 6, 1, 10, 0, 0)
    assert first.model is None and last.model == "claude-sonnet-4-5"  # first assistant model
    assert ledger.format_version == "1.14.46"


def test_export_messages_and_aborts() -> None:
    items, _ = run(EXPORT)
    messages = of(items, Message)
    assert [m.msg_idx for m in messages] == list(range(len(messages)))
    assert [m.source_id for m in messages][:3] == ["msg_a01", "msg_a02", "msg_a03"]
    aborted = messages[1]
    assert aborted.role == "assistant" and aborted.parent_source_id == "msg_a01"
    assert aborted.error == "MessageAbortedError: Aborted"
    assert aborted.text == "Launching the server now."  # reasoning kept apart
    assert messages[2].text == "ok?"
    summary = next(m for m in messages if m.source_id == "msg_a06")
    assert summary.is_compaction_summary
    export_msg = next(m for m in messages if m.source_id == "msg_a07")
    assert export_msg.text == "Export the session."  # the ignored synthetic part is left out


def test_export_tool_statuses() -> None:
    items, _ = run(EXPORT)
    calls = calls_by_id(items)
    assert calls["call_launch"].status == "completed"
    assert calls["call_launch"].exit_code == 0
    assert calls["call_launch"].command == "./launch.sh"
    assert calls["call_launch"].duration_s == pytest.approx(1.0)
    assert calls["call_poll"].status == "aborted"  # <bash_metadata> footer
    assert (calls["call_poll"].command or "").startswith("for i in $(seq 1 16); do")
    tail = calls["call_tail"]  # "Tool execution aborted" + interrupted + partial output
    assert tail.status == "aborted"
    assert "Decode batch" in (tail.output or "") and "Tool execution aborted" in (tail.output or "")
    assert calls["call_read"].status == "error" and calls["call_read"].command is None
    assert calls["call_fail"].status == "completed" and calls["call_fail"].exit_code == 1
    assert calls["call_export"].status == "running"
    assert calls["call_pending"].status == "running"
    assert all(c.msg_idx == c.result_msg_idx for c in calls.values())
    assert json.loads(calls["call_read"].input or "") == {"filePath": "/srv/work/missing.py"}


def test_export_raw_unknown_and_quarantine() -> None:
    items, ledger = run(EXPORT)
    raw = of(items, RawRecord)
    types = {r.record_type for r in raw}
    assert {
        "part/step-start",
        "part/step-finish",
        "part/reasoning",
        "part/compaction",
        "part/file",
    } <= types
    unknown = [r for r in raw if not r.known]
    assert [r.record_type for r in unknown] == ["part/hologram"]
    assert ledger.unknown_types == {"part/hologram": 1}
    bad = of(items, Quarantined)
    reasons = {q.location: q.error for q in bad}
    assert "part is not an object with a type" in reasons["messages[3] msg_a04 parts[5] prt_a14"]
    assert "role 'system'" in reasons["messages[8] msg_a09"]
    assert ledger.records_quarantined == 3  # bad part + system message + its part
    # 1 session + 9 message infos + 22 parts
    assert ledger.records_read == 32


def test_export_invalid_json_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"info": {"id": "ses_x"}, "messages": [')
    items, ledger = run(path)
    bad = of(items, Quarantined)
    assert len(items) == len(bad) == 1
    assert bad[0].location == str(path) and "not valid JSON" in bad[0].error
    assert ledger.records_quarantined == 1


def test_export_wrong_shape_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"info": {"id": "ses_x"}, "messages": {}}')
    items, ledger = run(path)
    assert isinstance(items[0], Quarantined) and ledger.records_quarantined == 1


def test_sniff_export() -> None:
    assert opencode.sniff(EXPORT, EXPORT.read_bytes()[:65536])
    assert not opencode.sniff(EXPORT, b'{"type": "user", "sessionId": "x"}')


# --------------------------------------------------------------------------- storage


@pytest.mark.parametrize("path", [DATA_HOME, DATA_HOME / "storage"])
def test_storage_folder(path: Path) -> None:
    assert opencode.sniff(path, b"")
    items, ledger = run(path)
    sessions = {s.native_id: s for s in of(items, Session)}
    parent, child = "ses_7f3b00000001ParentSession", "ses_7f3b00000002ChildSession0"
    assert set(sessions) == {parent, child}
    assert sessions[child].parent_session_id == f"opencode:{parent}"
    assert sessions[parent].agent == "opencode 1.1.20"
    messages = of(items, Message)
    assert [(m.session_id.split(":")[1], m.msg_idx, m.source_id) for m in messages] == [
        (parent, 0, "msg_b01"),
        (parent, 1, "msg_b02"),
        (child, 0, "msg_c01"),
        (child, 1, "msg_c02"),
    ]
    assert messages[0].location == f"message/{parent}/msg_b01.json"
    assert calls_by_id(items)["call_pytest"].command == "pytest -q"
    bad = {q.location: q.error for q in of(items, Quarantined)}
    assert "not valid JSON" in bad["part/msg_b02/prt_b04.json"]
    assert "not found" in bad["part/msg_zz/prt_zz1.json"]
    # 2 sessions + 4 messages + 7 parts (one malformed, one orphan)
    assert (ledger.records_read, ledger.records_quarantined) == (13, 2)


def test_storage_messages_without_session_files(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    shutil.copytree(DATA_HOME / "storage", root)
    shutil.rmtree(root / "session")  # drop every session file
    (root / "session").mkdir()
    items, ledger = run(root)
    # sessions rebuilt from the message folders, nothing lost
    assert {s.native_id for s in of(items, Session)} == {
        "ses_7f3b00000001ParentSession",
        "ses_7f3b00000002ChildSession0",
    }
    assert len(of(items, Message)) == 4
    assert ledger.records_read == 11


def test_storage_session_file_malformed(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    shutil.copytree(DATA_HOME / "storage", root)
    (root / "session" / "proj1" / "ses_7f3b00000001ParentSession.json").write_text("{ oops")
    items, ledger = run(root)
    bad = {q.location for q in of(items, Quarantined)}
    assert "session/proj1/ses_7f3b00000001ParentSession.json" in bad
    assert len(of(items, Message)) == 4  # its messages still load, under the file-stem id
    assert ledger.records_quarantined == 3


# --------------------------------------------------------------------------- sqlite


def make_db(path: Path, wal: bool = False) -> sqlite3.Connection:
    """A tiny opencode.db (v1.2 layout); returned open so a WAL stays un-checkpointed."""
    export = json.loads(EXPORT.read_text())
    con = sqlite3.connect(path)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.executescript(
        """
        CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT);
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
            slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL,
            version TEXT NOT NULL, share_url TEXT, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, time_compacting INTEGER, time_archived INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
            session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, data TEXT NOT NULL);
        """
    )
    info = export["info"]
    con.execute(
        "INSERT INTO session VALUES (?, ?, NULL, ?, ?, ?, ?, NULL, ?, ?, NULL, NULL)",
        (
            info["id"],
            info["projectID"],
            info["slug"],
            info["directory"],
            info["title"],
            info["version"],
            info["time"]["created"],
            info["time"]["updated"],
        ),
    )
    for msg in export["messages"]:
        m = dict(msg["info"])
        mid, created = m.pop("id"), m["time"]["created"]
        m.pop("sessionID")
        con.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (mid, info["id"], created, created, json.dumps(m)),
        )
        for part in msg["parts"]:
            p = dict(part)
            pid = p.pop("id")
            p.pop("sessionID", None)
            p.pop("messageID", None)
            con.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (pid, mid, info["id"], created, created, json.dumps(p)),
            )
    # a broken row and an orphan part
    con.execute(
        "INSERT INTO message VALUES ('msg_z99', ?, ?, ?, '{broken')", (info["id"], 10**13, 10**13)
    )
    con.execute(
        "INSERT INTO part VALUES ('prt_z99', 'msg_none', ?, 1, 1, '{\"type\":\"text\"}')",
        (info["id"],),
    )
    con.commit()
    return con


def test_sqlite_db_matches_export(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    make_db(db).close()
    assert opencode.sniff(db, db.read_bytes()[:100])
    items, ledger = run(db)
    export_items, _ = run(EXPORT)
    assert [m.source_id for m in of(items, Message)] == [
        m.source_id for m in of(export_items, Message)
    ]
    assert calls_by_id(items)["call_poll"].status == "aborted"
    assert calls_by_id(items)["call_tail"].status == "aborted"
    session = of(items, Session)[-1]
    assert session.title == "Launch the MTP server" and session.model == "claude-sonnet-4-5"
    assert session.agent == "opencode 1.14.46"
    bad = {q.location: q.error for q in of(items, Quarantined)}
    assert "not valid JSON" in bad["message msg_z99"]
    assert "not found" in bad["part prt_z99"]
    assert ledger.unknown_types == {"part/hologram": 1}


def test_sqlite_wal_content_is_read(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    writer = make_db(db, wal=True)
    try:
        assert (tmp_path / "opencode.db-wal").exists()
        items, _ = run(db)
        assert len(of(items, Message)) == 8
    finally:
        writer.close()


def test_sqlite_copy_fallback_reads_wal(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    writer = make_db(src / "opencode.db", wal=True)
    try:
        dest = tmp_path / "copy"
        dest.mkdir()
        con = opencode.open_copy(src / "opencode.db", dest)
        assert con.execute("SELECT count(*) FROM message").fetchone() == (10,)
        con.close()
    finally:
        writer.close()


def test_sqlite_non_opencode_db_is_not_sniffed(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    assert not opencode.sniff(db, db.read_bytes()[:100])


def test_folder_with_only_a_db(tmp_path: Path) -> None:
    make_db(tmp_path / "opencode.db").close()
    items, _ = run(tmp_path)
    assert len(of(items, Message)) == 8


# --------------------------------------------------------------------------- robustness

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["id", "type", "role", "state", "status", "time", "text", "error"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=10,
)


@given(st.integers(0, 8), st.integers(0, 5), _JSON, st.booleans())
@settings(max_examples=150, deadline=None)
def test_export_with_random_records_never_crashes(
    msg: int, part: int, junk: object, replace_info: bool
) -> None:
    import tempfile

    doc = json.loads(EXPORT.read_text())
    target = doc["messages"][msg]
    if replace_info:
        target["info"] = junk
    elif part < len(target["parts"]):
        target["parts"][part] = junk
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.json"
        path.write_text(json.dumps(doc))
        items, ledger = run(path)
    assert of(items, Session)
    messages = of(items, Message)
    assert [m.msg_idx for m in messages] == list(range(len(messages)))


# --------------------------------------------------------------------------- 1.15 shapes
# opencode inserts text parts of its own into a user message (prompt.ts): an attached file
# becomes "Called the Read tool with the following input: …" plus the file's content, a
# skill's template, the "Continue if you have next steps…" after a compaction; they are
# marked synthetic. The records below are made here.


def test_synthetic_text_is_not_the_users(tmp_path: Path) -> None:
    def part(n: int, **fields: object) -> dict[str, object]:
        return {"id": f"prt_{n}", "sessionID": "ses_1", "messageID": "msg_1", **fields}

    typed = "Launch it with the flags in @serve.yaml, ready?"
    parts = [
        part(1, type="text", text=typed),
        part(2, type="text", synthetic=True,
             text='Called the Read tool with the following input: {"filePath":"/srv/serve.yaml"}'),
        part(3, type="text", synthetic=True, text="<file>\n00001| tp: 8  # CUDA out of memory?\n</file>"),
        part(4, type="file", mime="text/plain", filename="serve.yaml", url="file:///srv/serve.yaml"),
        part(5, type="text", text="(hidden)", synthetic=True, ignored=True),
    ]  # fmt: skip
    export = {
        "info": {"id": "ses_1", "title": "t", "version": "1.15.6", "time": {"created": 1, "updated": 2}},
        "messages": [{"info": {"id": "msg_1", "sessionID": "ses_1", "role": "user",
                               "time": {"created": 1}, "agent": "build"}, "parts": parts}],
    }  # fmt: skip
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    items, ledger = run(path)
    (message,) = of(items, Message)
    assert message.text == typed
    raw = of(items, RawRecord)
    assert [r.record_type for r in raw] == [
        "part/text/synthetic", "part/text/synthetic", "part/file", "part/text/ignored"
    ]  # fmt: skip
    assert "Called the Read tool" in raw[0].raw and all(r.known for r in raw)
    assert ledger.records_read == ledger.records_stored == 7 and ledger.unknown_types == {}
