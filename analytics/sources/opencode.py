"""opencode sessions: ``opencode export`` JSON, the storage folder, and ``opencode.db``.

All three inputs hold the same objects (reference/FORMATS.md §A): a session info,
message infos and their parts. Each reader turns its input into ``_SessionInput``
values and one mapper (``_session_records``) turns those into records, so the
three inputs give the same rows.

Decisions worth knowing:

- ``Message.text`` joins the message's ``text`` parts with blank lines, except the ones
  opencode wrote itself: ``synthetic`` parts (an attached file's "Called the Read tool …"
  and its content, a skill's template, the "Continue if you have next steps…" after a
  compaction) and ``ignored`` ones are known ``RawRecord``s ``part/text/synthetic`` and
  ``part/text/ignored``, so a user message holds what the user typed. ``reasoning`` parts
  are kept apart too (``part/reasoning``), so taggers do not read thinking-aloud as claims.
- Ledger: the session info, each message info and each part is one record. Text
  and tool parts are stored inside their Message / ToolCall; the other known part
  types (step-start, step-finish, snapshot, patch, file, agent, subtask, retry,
  compaction, reasoning) are stored as known ``RawRecord``s.
- ``is_compaction_summary`` is set on the message whose info says ``summary: true``
  (the assistant message holding a compaction summary), the analogue of Claude
  Code's ``isCompactSummary``; the ``compaction`` part that asked for it is a RawRecord.
- A folder holding both ``storage/`` and ``opencode.db`` (``~/.local/share/opencode``
  after the 1.2 migration) is read from the database, which holds the migrated
  storage content; :func:`analytics.sources.detect.iter_inputs` does the same.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from analytics.errors import SourceError
from analytics.formats import PARSER_VERSIONS, SQLITE_MAGIC, UTF8_BOM
from analytics.models import (
    Ledger,
    Message,
    ParsedItem,
    Quarantined,
    RawRecord,
    Resume,
    Session,
    ToolCall,
    ToolStatus,
)
from analytics.sources.base import session_id as make_session_id
from analytics.sources.encoding import NO_BOM, path_text, utf8_bytes

FORMAT = "opencode"
APPENDABLE = False
PARSER_VERSION = PARSER_VERSIONS[FORMAT]
"""Bump it (in ``analytics.formats.PARSER_VERSIONS``) when the rows a file gives change."""

SHELL_TOOLS = frozenset({"bash", "shell"})
TEXT_PARTS = frozenset({"text"})
RAW_PARTS = frozenset(
    {
        "reasoning",
        "step-start",
        "step-finish",
        "snapshot",
        "patch",
        "file",
        "agent",
        "subtask",
        "retry",
        "compaction",
    }
)
ABORTED_TOOL_ERROR = "Tool execution aborted"
_ABORT_FOOTER = re.compile(
    r"<(bash|shell)_metadata>[\s\S]*?User aborted the command[\s\S]*?</\1_metadata>"
)
_EXPORT_HEAD = re.compile(rb'^\s*\{\s*"info"\s*:\s*\{')
_SESSION_ID = re.compile(rb'"id"\s*:\s*"ses_')
MAX_RAW_CHARS = 100_000


# ---------------------------------------------------------------------------
# Input shape shared by the three readers
# ---------------------------------------------------------------------------


@dataclass
class _Entry:
    """One native record: its parsed JSON value, or why it could not be read."""

    location: str
    value: Any = None
    error: str | None = None
    raw_text: str | None = None

    def raw(self) -> str:
        if self.raw_text is not None:
            return _clip(self.raw_text)
        return _clip(_dumps(self.value))


@dataclass
class _MessageInput:
    info: _Entry | None
    """None when parts refer to a message that does not exist."""
    parts: list[_Entry] = field(default_factory=list)


@dataclass
class _SessionInput:
    info: _Entry | None
    """None when the session's info record is absent (orphan messages)."""
    fallback_id: str
    messages: Iterable[_MessageInput]


class _BadRecord(ValueError):
    """A record of a known type whose content does not fit."""


# ---------------------------------------------------------------------------
# Protocol
# ---------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """An export JSON, a storage folder (or its parent), or an opencode SQLite db."""
    if path.is_dir():
        return storage_root(path) is not None
    if head.startswith(SQLITE_MAGIC):
        return is_opencode_db(path)
    return bool(_EXPORT_HEAD.match(head.removeprefix(UTF8_BOM)) and _SESSION_ID.search(head))


def parse(path: Path, ledger: Ledger, resume: Resume | None = None) -> Iterator[ParsedItem]:
    """Every session in ``path``; ``resume`` is ignored (inputs are re-read whole)."""
    if path.is_dir():
        # (``opencode.db`` first, as --discover takes it: ``opencode-beta.db`` sorts before it)
        named = sorted(path.glob("opencode*.db"), key=lambda db: (db.name != "opencode.db", db.name))
        dbs = [db for db in named if is_opencode_db(db)]
        root = storage_root(path)
        if dbs:  # opencode >= 1.2 migrated storage/ into the database
            yield from parse(dbs[0], ledger)
        elif root is not None:
            yield from _emit(str(path), _storage_sessions(root, ledger), ledger)
        else:
            yield _quarantine(ledger, str(path), "not an opencode storage folder", "")
        return
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        yield from _emit(str(path), _db_sessions(path, ledger), ledger)
    else:
        yield from _emit(str(path), _export_sessions(path, ledger), ledger)


def _emit(
    source_path: str, sessions: Iterator[_SessionInput | Quarantined], ledger: Ledger
) -> Iterator[ParsedItem]:
    for item in sessions:
        if isinstance(item, Quarantined):
            yield item
        else:
            yield from _session_records(source_path, item, ledger)


# ---------------------------------------------------------------------------
# Mapping native objects to records
# ---------------------------------------------------------------------------


def _session_records(source_path: str, src: _SessionInput, ledger: Ledger) -> Iterator[ParsedItem]:
    info: dict[str, Any] = {}
    if src.info is not None:
        if isinstance(src.info.value, dict) and src.info.error is None:
            info = src.info.value
            ledger.stored()
        else:
            yield _quarantine(
                ledger,
                src.info.location,
                src.info.error or "session info is not an object",
                src.info.raw(),
            )
    native_id = _str(info.get("id")) or src.fallback_id
    sid = make_session_id(FORMAT, native_id)
    session = _session(sid, native_id, source_path, info)
    if ledger.format_version is None:
        ledger.format_version = _str(info.get("version"))
    yield session
    msg_idx = 0
    first_model: str | None = None
    for msg in src.messages:
        items = list(_message_records(sid, msg_idx, msg, ledger))
        for item in items:
            if isinstance(item, Message):
                msg_idx += 1
                if first_model is None and item.role == "assistant":
                    first_model = item.model
        yield from items
    if session.model is None and first_model is not None:
        yield session.model_copy(update={"model": first_model})


def _session(sid: str, native_id: str, source_path: str, info: dict[str, Any]) -> Session:
    version = _str(info.get("version"))
    time = _dict(info.get("time"))
    parent = _str(info.get("parentID"))
    return Session(
        session_id=sid,
        source_format=FORMAT,
        native_id=native_id,
        source_path=source_path,
        title=_str(info.get("title")),
        agent=f"opencode {version}" if version else "opencode",
        model=_model_name(info.get("model")),
        cwd=_str(info.get("directory")),
        started_at=_ms(time.get("created")),
        ended_at=_ms(time.get("updated")),
        parent_session_id=make_session_id(FORMAT, parent) if parent else None,
    )


def _message_records(
    sid: str, msg_idx: int, msg: _MessageInput, ledger: Ledger
) -> Iterator[ParsedItem]:
    if msg.info is None:
        for part in msg.parts:
            yield _quarantine(
                ledger, part.location, "part of a message that was not found", part.raw()
            )
        return
    try:
        message = _message(sid, msg_idx, msg.info)
    except _BadRecord as exc:
        yield _quarantine(ledger, msg.info.location, str(exc), msg.info.raw())
        for part in msg.parts:
            yield _quarantine(
                ledger, part.location, "part of a message that was quarantined", part.raw()
            )
        return
    ledger.stored()
    texts: list[str] = []
    rest: list[ParsedItem] = []
    for part in msg.parts:
        rest.extend(_part_records(sid, msg_idx, part, texts, ledger))
    message.text = "\n\n".join(texts)
    yield message
    yield from rest


def _message(sid: str, msg_idx: int, entry: _Entry) -> Message:
    if entry.error is not None:
        raise _BadRecord(entry.error)
    info = entry.value
    if not isinstance(info, dict):
        raise _BadRecord("message info is not an object")
    msg_id = _str(info.get("id"))
    role = info.get("role")
    if not msg_id:
        raise _BadRecord("message info has no id")
    if role not in ("user", "assistant"):
        raise _BadRecord(f"message role {role!r} is not user or assistant")
    return Message(
        session_id=sid,
        msg_idx=msg_idx,
        source_id=msg_id,
        parent_source_id=_str(info.get("parentID")),
        role=role,
        ts=_ms(_dict(info.get("time")).get("created")),
        is_compaction_summary=info.get("summary") is True,
        error=_error_text(info.get("error")),
        native_type=role,
        model=_str(info.get("modelID")) or _model_name(info.get("model")),
        location=entry.location,
    )


def _part_records(
    sid: str, msg_idx: int, entry: _Entry, texts: list[str], ledger: Ledger
) -> Iterator[ParsedItem]:
    part = entry.value
    if (
        entry.error is not None
        or not isinstance(part, dict)
        or not isinstance(part.get("type"), str)
    ):
        reason = entry.error or "part is not an object with a type"
        yield _quarantine(ledger, entry.location, reason, entry.raw())
        return
    ptype = part["type"]
    try:
        if ptype in TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise _BadRecord("text part without text")
            aside = _aside(part)
            if aside is None:
                texts.append(text)
            else:
                yield _raw_part(sid, entry, part, f"part/{ptype}/{aside}", known=True)
            ledger.stored()
        elif ptype == "tool":
            call = _tool_call(sid, msg_idx, part)
            ledger.stored()
            yield call
        else:
            known = ptype in RAW_PARTS
            if not known:
                ledger.unknown(f"part/{ptype}")
            ledger.stored()
            yield _raw_part(sid, entry, part, f"part/{ptype}", known)
    except _BadRecord as exc:
        yield _quarantine(ledger, entry.location, str(exc), entry.raw())


def _aside(part: dict[str, Any]) -> str | None:
    """Why a text part is not the message's prose: opencode inserted it (``synthetic``) or
    hides it (``ignored``); None for prose."""
    if part.get("ignored"):
        return "ignored"
    return "synthetic" if part.get("synthetic") else None


def _raw_part(
    sid: str, entry: _Entry, part: dict[str, Any], record_type: str, known: bool
) -> RawRecord:
    time = _dict(part.get("time"))
    return RawRecord(
        session_id=sid,
        location=entry.location,
        record_type=record_type,
        known=known,
        ts=_ms(time.get("start") or time.get("created")),
        raw=entry.raw(),
    )


def _tool_call(sid: str, msg_idx: int, part: dict[str, Any]) -> ToolCall:
    state = part.get("state")
    if not isinstance(state, dict):
        raise _BadRecord("tool part without a state object")
    native = state.get("status")
    tool = _str(part.get("tool"))
    args = state.get("input")
    metadata = _dict(state.get("metadata"))
    partial = _str(metadata.get("output"))
    status: ToolStatus
    if native == "completed":
        output = _text(state.get("output"))
        status = "completed"
    elif native == "error":
        error = _text(state.get("error"))
        output = "\n\n".join(t for t in (partial, error) if t) or None
        status = "error"
        if (error or "").startswith(ABORTED_TOOL_ERROR):
            status = "aborted"
    elif native in ("running", "pending"):
        output = partial
        status = "running"
    else:
        raise _BadRecord(f"tool state status {native!r} is not pending/running/completed/error")
    if metadata.get("interrupted") is True or _has_abort_footer(output, partial):
        status = "aborted"
    command = None
    if tool is not None and tool.lower() in SHELL_TOOLS and isinstance(args, dict):
        command = _str(args.get("command"))
    time = _dict(state.get("time"))
    exit_code = metadata.get("exit")
    return ToolCall(
        session_id=sid,
        msg_idx=msg_idx,
        call_id=_str(part.get("callID")) or _str(part.get("id")) or f"{msg_idx}:tool",
        tool=tool,
        command=command,
        input=_dumps(args) if args is not None else None,
        output=output,
        status=status,
        exit_code=exit_code
        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        started_at=_ms(time.get("start")),
        ended_at=_ms(time.get("end")),
        result_msg_idx=msg_idx,
    )


def _has_abort_footer(*texts: str | None) -> bool:
    return any(t and _ABORT_FOOTER.search(t) for t in texts)


def _error_text(error: object) -> str | None:
    if error is None:
        return None
    if not isinstance(error, dict):
        return str(error)
    name = _str(error.get("name")) or "Error"
    message = _str(_dict(error.get("data")).get("message"))
    return f"{name}: {message}" if message else name


def _model_name(model: object) -> str | None:
    """``model`` is ``{id, providerID}`` on sessions and ``{providerID, modelID}`` on user messages."""
    if isinstance(model, str):
        return model or None
    m = _dict(model)
    return _str(m.get("id")) or _str(m.get("modelID"))


# ---------------------------------------------------------------------------
# Reader 1: `opencode export` JSON
# ---------------------------------------------------------------------------


def _export_sessions(path: Path, ledger: Ledger) -> Iterator[_SessionInput | Quarantined]:
    data = utf8_bytes(path, path.read_bytes())
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield _quarantine(ledger, str(path), f"not valid JSON: {exc}", _decode(data))
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        yield _quarantine(
            ledger, str(path), "not an opencode export: expected {info, messages[]}", _decode(data)
        )
        return
    messages = [_export_message(i, m) for i, m in enumerate(doc["messages"])]
    info = _Entry("info", doc.get("info"))
    yield _SessionInput(info=info, fallback_id=path_text(path.stem), messages=messages)


def _export_message(i: int, item: object) -> _MessageInput:
    if not isinstance(item, dict):
        return _MessageInput(_Entry(f"messages[{i}]", item, error="message is not an object"))
    info = item.get("info")
    msg_id = _str(_dict(info).get("id"))
    where = f"messages[{i}] {msg_id}" if msg_id else f"messages[{i}]"
    entry = _Entry(where, info)
    parts = item.get("parts", [])
    if not isinstance(parts, list):
        bad = _Entry(f"{where} parts", parts, error="parts is not a list")
        return _MessageInput(entry, [bad])
    return _MessageInput(entry, [_export_part(where, j, p) for j, p in enumerate(parts)])


def _export_part(where: str, j: int, part: object) -> _Entry:
    part_id = _str(_dict(part).get("id"))
    return _Entry(f"{where} parts[{j}]" + (f" {part_id}" if part_id else ""), part)


# ---------------------------------------------------------------------------
# Reader 2: the storage folder (pretty-printed JSON files)
# ---------------------------------------------------------------------------


def storage_root(path: Path) -> Path | None:
    """``path`` itself or ``path/storage`` when it holds ``session/`` and ``message/``."""
    for candidate in (path, path / "storage"):
        if (candidate / "session").is_dir() and (candidate / "message").is_dir():
            return candidate
    return None


def _storage_sessions(root: Path, ledger: Ledger) -> Iterator[_SessionInput | Quarantined]:
    seen_sessions: set[str] = set()
    seen_messages: set[str] = set()
    for file in sorted((root / "session").glob("*/*.json"), key=lambda p: (p.stem, str(p))):
        info = _read_json(root, file)
        native = _str(_dict(info.value).get("id")) or file.stem
        seen_sessions.add(native)
        yield _SessionInput(info, file.stem, _storage_messages(root, native, seen_messages))
    for folder in sorted(p for p in (root / "message").iterdir() if p.is_dir()):
        if folder.name not in seen_sessions:
            yield _SessionInput(
                None, folder.name, _storage_messages(root, folder.name, seen_messages)
            )
    yield from _orphan_parts(root, seen_messages, ledger)


def _storage_messages(root: Path, native: str, seen: set[str]) -> Iterator[_MessageInput]:
    infos = [_read_json(root, f) for f in (root / "message" / native).glob("*.json")]
    infos.sort(key=_message_order)
    for info in infos:
        msg_id = _str(_dict(info.value).get("id")) or Path(info.location).stem
        seen.add(msg_id)
        part_files = sorted((root / "part" / msg_id).glob("*.json"))
        yield _MessageInput(info, [_read_json(root, f) for f in part_files])


def _orphan_parts(root: Path, seen: set[str], ledger: Ledger) -> Iterator[Quarantined]:
    part_dir = root / "part"
    if not part_dir.is_dir():
        return
    for folder in sorted(p for p in part_dir.iterdir() if p.is_dir()):
        if folder.name in seen:
            continue
        for file in sorted(folder.glob("*.json")):
            entry = _read_json(root, file)
            yield _quarantine(
                ledger, entry.location, "part of a message that was not found", entry.raw()
            )


def _read_json(root: Path, file: Path) -> _Entry:
    location = path_text(file.relative_to(root).as_posix())
    try:
        data = utf8_bytes(file, file.read_bytes())
    except OSError as exc:
        return _Entry(location, error=f"cannot read: {exc}", raw_text="")
    except SourceError:  # (UTF-16 without a byte order mark)
        return _Entry(location, error=NO_BOM, raw_text="")
    try:
        return _Entry(location, orjson.loads(data), raw_text=_decode(data))
    except orjson.JSONDecodeError as exc:
        return _Entry(location, error=f"not valid JSON: {exc}", raw_text=_decode(data))


def _message_order(entry: _Entry) -> tuple[float, str]:
    info = _dict(entry.value)
    created = _dict(info.get("time")).get("created")
    when = float(created) if isinstance(created, int | float) else float("inf")
    return when, _str(info.get("id")) or entry.location


# ---------------------------------------------------------------------------
# Reader 3: opencode.db (SQLite, v1.2+)
# ---------------------------------------------------------------------------

_SESSION_COLUMNS = {
    "id": "id",
    "project_id": "projectID",
    "workspace_id": "workspaceID",
    "parent_id": "parentID",
    "slug": "slug",
    "directory": "directory",
    "title": "title",
    "version": "version",
    "agent": "agent",
}
_SESSION_TIMES = {
    "time_created": "created",
    "time_updated": "updated",
    "time_compacting": "compacting",
    "time_archived": "archived",
}


def is_opencode_db(path: Path) -> bool:
    """An SQLite file with opencode's ``session``, ``message`` and ``part`` tables."""
    try:
        con = open_readonly(path)
    except sqlite3.Error:
        return False
    try:
        return {"session", "message", "part"} <= _tables(con) and "data" in _columns(con, "message")
    except sqlite3.Error:
        return False
    finally:
        con.close()


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open read-only (``mode=ro``); a WAL database is read with its ``-wal`` content."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        con.close()
        raise
    return con


def open_copy(path: Path, folder: Path) -> sqlite3.Connection:
    """Copy the database and its ``-wal`` into ``folder`` and open the copy.

    For a WAL database in a folder we cannot write (``mode=ro`` needs the ``-shm``)."""
    target = folder / path.name
    shutil.copyfile(path, target)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    return sqlite3.connect(target)


def _db_sessions(path: Path, ledger: Ledger) -> Iterator[_SessionInput | Quarantined]:
    with tempfile.TemporaryDirectory(prefix="opencode-db-") as tmp:
        try:
            con = open_readonly(path)
        except sqlite3.Error:
            try:
                con = open_copy(path, Path(tmp))
            except (OSError, sqlite3.Error) as exc:
                yield _quarantine(ledger, str(path), f"cannot open SQLite database: {exc}", "")
                return
        try:
            yield from _db_read(con, ledger)
        except sqlite3.Error as exc:
            yield _quarantine(ledger, str(path), f"SQLite error while reading: {exc}", "")
        finally:
            con.close()


def _db_read(con: sqlite3.Connection, ledger: Ledger) -> Iterator[_SessionInput | Quarantined]:
    cols = _columns(con, "session")
    order = "time_created, id" if "time_created" in cols else "id"
    select = ", ".join(f'"{c}"' for c in cols)
    seen: set[str] = set()
    for row in con.execute(f"SELECT {select} FROM session ORDER BY {order}").fetchall():
        record = dict(zip(cols, row, strict=True))
        native = str(record.get("id"))
        seen.add(native)
        yield _SessionInput(_db_session_info(record), native, _db_messages(con, native))
    orphans = con.execute(
        "SELECT DISTINCT session_id FROM message WHERE session_id NOT IN (SELECT id FROM session)"
        " ORDER BY session_id"
    ).fetchall()
    for (native,) in orphans:
        yield _SessionInput(None, str(native), _db_messages(con, str(native)))
    yield from _db_orphan_parts(con, ledger)


def _db_session_info(record: dict[str, Any]) -> _Entry:
    location = f"session {record.get('id')}"
    info: dict[str, Any] = {}
    if record.get("data") is not None:
        try:
            data = _json_column(record["data"])
        except orjson.JSONDecodeError as exc:
            return _Entry(
                location, error=f"data is not valid JSON: {exc}", raw_text=str(record["data"])
            )
        info.update(_dict(data))
    for col, key in _SESSION_COLUMNS.items():
        if record.get(col) is not None:
            info[key] = record[col]
    time = dict(_dict(info.get("time")))
    for col, key in _SESSION_TIMES.items():
        if record.get(col) is not None:
            time[key] = record[col]
    info["time"] = time
    if record.get("model") is not None:
        try:
            info["model"] = _json_column(record["model"])
        except orjson.JSONDecodeError:
            info["model"] = str(record["model"])
    if record.get("share_url"):
        info["share"] = {"url": record["share_url"]}
    return _Entry(location, info)


def _db_messages(con: sqlite3.Connection, native: str) -> Iterator[_MessageInput]:
    mcols = _columns(con, "message")
    created = "time_created" if "time_created" in mcols else "NULL"
    order = "time_created, id" if "time_created" in mcols else "id"
    rows = con.execute(
        f"SELECT id, {created}, data FROM message WHERE session_id = ? ORDER BY {order}",
        (native,),
    ).fetchall()
    parts: dict[str, list[_Entry]] = {}
    for part_id, message_id, data in con.execute(
        "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id",
        (native,),
    ):
        entry = _db_entry(
            f"part {part_id}", data, {"id": part_id, "sessionID": native, "messageID": message_id}
        )
        parts.setdefault(str(message_id), []).append(entry)
    for msg_id, time_created, data in rows:
        info = _db_entry(f"message {msg_id}", data, {"id": msg_id, "sessionID": native})
        if isinstance(info.value, dict) and time_created is not None:
            info.value.setdefault("time", {}).setdefault("created", time_created)
        yield _MessageInput(info, parts.pop(str(msg_id), []))
    for entries in parts.values():
        yield _MessageInput(None, entries)


def _db_orphan_parts(con: sqlite3.Connection, ledger: Ledger) -> Iterator[Quarantined]:
    rows = con.execute(
        "SELECT id, data FROM part WHERE session_id NOT IN (SELECT id FROM session)"
        " AND session_id NOT IN (SELECT session_id FROM message) ORDER BY id"
    ).fetchall()
    for part_id, data in rows:
        yield _quarantine(
            ledger, f"part {part_id}", "part of a session without messages", _clip(str(data))
        )


def _db_entry(location: str, data: object, ids: dict[str, Any]) -> _Entry:
    try:
        value = _json_column(data)
    except orjson.JSONDecodeError as exc:
        return _Entry(location, error=f"data is not valid JSON: {exc}", raw_text=str(data))
    if not isinstance(value, dict):
        return _Entry(location, value, error="data is not a JSON object")
    return _Entry(location, {**ids, **value})


def _json_column(value: object) -> Any:
    if isinstance(value, bytes | str):
        return orjson.loads(value)
    return value


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _quarantine(ledger: Ledger, location: str, error: str, raw: str) -> Quarantined:
    ledger.quarantined()
    return Quarantined(location=location, error=error, raw=_clip(raw))


def _ms(value: object) -> datetime | None:
    """Epoch milliseconds -> naive UTC datetime."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _dumps(value)


def _dumps(value: object) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _clip(text: str) -> str:
    if len(text) <= MAX_RAW_CHARS:
        return text
    return text[:MAX_RAW_CHARS] + f"\n… [{len(text) - MAX_RAW_CHARS} more characters]"
