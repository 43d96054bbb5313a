"""Helpers shared by the tests (imported as ``from _samples import ...``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from analytics import machine
from analytics.models import Ledger, ParsedItem, Resume

SHARED_SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"
"""The public sample files shared between projects (absent on some machines)."""


def run(
    module: ModuleType, path: Path, resume: Resume | None = None
) -> tuple[list[ParsedItem], Ledger]:
    """Every item ``module.parse`` yields for ``path``, and its ledger, which must balance."""
    ledger = Ledger()
    items = list(module.parse(path, ledger, resume))
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    return items, ledger


def of(items: list[ParsedItem], kind: type) -> list:
    return [i for i in items if isinstance(i, kind)]


def resumed_equals_whole(module: ModuleType, source: Path, path: Path, cut: int) -> None:
    """Parsing the first ``cut`` lines of ``source`` at ``path``, then the rest from where
    that stopped (``source`` copied over ``path``, as a live file grows), gives the items of
    one parse of the whole file: messages, tool calls once their results came, the records
    read and the session."""
    import shutil

    from analytics.models import Message, Session, ToolCall, ToolResult

    lines = source.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:cut]) + b"\n")
    first, ledger1 = run(module, path)
    shutil.copy(source, path)
    resume = Resume(offset=ledger1.end_offset, line=ledger1.end_line, state=ledger1.state)
    second, ledger2 = run(module, path, resume)
    full, ledger_full = run(module, source)

    assert of(first, Message) + of(second, Message) == of(full, Message)
    calls = {c.call_id: c for c in of(first, ToolCall) + of(second, ToolCall)}
    for result in of(second, ToolResult):
        if calls[result.call_id].status == "running":
            update = result.model_dump(exclude={"session_id", "call_id"})
            calls[result.call_id] = calls[result.call_id].model_copy(update=update)
    assert calls == {c.call_id: c for c in of(full, ToolCall)}
    assert ledger1.records_read + ledger2.records_read == ledger_full.records_read
    ignore = {"source_path"}
    assert of(second, Session)[-1].model_dump(exclude=ignore) == of(full, Session)[-1].model_dump(
        exclude=ignore
    )


def non_blank_lines(path: Path) -> int:
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())


def table_rows(
    db: Path, tables: Iterable[str] | Mapping[str, str]
) -> dict[str, list[tuple[object, ...]]]:
    """Every row of each table of the database at ``db``, sorted (``ORDER BY ALL``), to compare
    two databases. ``tables`` may map a table to the columns to compare (a select list, e.g.
    ``"* EXCLUDE (ingested_at)"``); a plain list compares all columns."""
    select = tables if isinstance(tables, Mapping) else dict.fromkeys(tables, "*")
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT {cols} FROM {t} ORDER BY ALL").fetchall()
            for t, cols in select.items()
        }
    finally:
        con.close()


def all_tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """``table_rows`` of every table of the schema, but for the times of the ingest itself
    (``ingest_files.ingested_at``, ``_migrations.applied_at``)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' AND table_catalog = current_database()"
        ).fetchall()]
    finally:
        con.close()
    skip = {"ingest_files": "* EXCLUDE (ingested_at)", "_migrations": "name"}
    return table_rows(db, {t: skip.get(t, "*") for t in names})


needs_worker = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and machine.cores() >= 2),
    reason="a tagging worker needs Linux (fork) and two cores (within a CPU quota)",
)
"""For tests of the tagging worker: the platform and cores only, not ``worker.available()``
(which also reads the environment switch and this process's size, and would skip silently)."""


def submitted_jobs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Jobs handed to any tagging worker from now on (the worker still gets them)."""
    from analytics.analysis.tagging.worker import TagWorker

    jobs: list[object] = []
    real = TagWorker.submit

    def submit(self: TagWorker, job: object) -> None:
        jobs.append(job)
        real(self, job)

    monkeypatch.setattr(TagWorker, "submit", submit)
    return jobs


def claude_code_line(i: int, session: str, role: str, content: object) -> str:
    """Record ``i`` of a Claude Code session's JSONL (uuids chained, a second apart from
    2026-05-14 12:00), without its newline."""
    return json.dumps({
        "type": role, "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
        "sessionId": session, "timestamp": f"2026-05-14T12:{i // 60:02d}:{i % 60:02d}Z",
        "message": {"role": role, "content": content},
    })
