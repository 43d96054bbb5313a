"""One changed file's rows on their way into the tables: the loader that redacts and
stores what a parser yields, in chunks, and the analysis stream that tags a long session
while it is still parsed.

Apart from ``ingest.py`` because it needs the pydantic records (``analytics.models``), which
take longer to import than a re-ingest of unchanged files takes in all: ``Ingestor``
imports this module only when a file is actually loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb

from analytics.models import (
    Message,
    Quarantined,
    RawRecord,
    Session,
    ToolCall,
    ToolResult,
)

if TYPE_CHECKING:  # the writer (pyarrow) is imported when rows are written
    import pyarrow as pa

    from analytics.analysis.rows import StoredRecords
    from analytics.analysis.run import Meanwhile
    from analytics.store.writer import Staging

Owner = Callable[[str], str | None]
"""The source path of another file that holds a session id already (None: none does)."""

FLUSH_EVERY = 10_000
STREAM_LAG = 1000
"""Messages at the end of what is stored that the analysis stream leaves for later: their
tool calls may still be on their way (a call is stored when its result arrives)."""
PREFORK_BYTES = 32 * 2**20
"""A file at least this large is expected to be streamed: its tagging worker is forked
before the parse starts, to load spaCy meanwhile."""


class FileLoader:
    """Streams one parser's items into the tables, in chunks, inside the caller's transaction."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: str,
        redactor: Any | None,
        owner_of: Owner,
        staging: Staging | None = None,
    ) -> None:
        self.con = con
        self.path = path
        self.staging = staging
        self._put: Callable[..., int] = (
            staging.append if staging is not None else partial(_direct_append, con)
        )
        self._put_table: Callable[[str, pa.Table], int] = (
            staging.append_table if staging is not None else partial(_direct_append_table, con)
        )
        self.redactor = redactor
        self.owner_of = owner_of
        self.claimed: set[str] = set()
        """Native session ids of this file whose owner was looked up."""
        self.remap: dict[str, str] = {}
        self.sessions: dict[str, Session] = {}
        self.messages: list[Message] = []
        self.calls: list[ToolCall] = []
        self.raws: list[RawRecord] = []
        self.quarantined: list[Quarantined] = []
        self.redactions: list[Any] = []
        self.orphans: list[ToolResult] = []
        self._to_redact: list[tuple[Any, str, str | None, int | None, str]] = []
        """(item, attribute, session, msg_idx, field) of each text read and not yet
        redacted, in the order read: redacted together at the next flush, before storing."""
        self.settled_only: set[tuple[str, int]] = set()
        """Of the messages ``finish`` returns, those only results that ``settles`` reached."""
        self.n_messages = 0
        self.first_idx: dict[str, int] = {}
        self.last_idx: dict[str, int] = {}
        """The latest message of each session (stored by the next flush)."""
        self.stream: AnalysisStream | None = None
        """Analysis that runs while the file is parsed (see :class:`AnalysisStream`)."""

    def _sid(self, sid: str | None) -> str | None:
        if sid is None:
            return None
        return self.remap.get(sid, sid)

    def _claim_session(self, s: Session) -> None:
        if s.session_id in self.claimed:
            return
        self.claimed.add(s.session_id)
        owner = self.owner_of(s.session_id)
        if owner is not None and owner != self.path:
            # Same native session stored from another file (e.g. a copy): keep both, apart.
            suffix = hashlib.sha256(self.path.encode()).hexdigest()[:8]
            self.remap[s.session_id] = f"{s.session_id}@{suffix}"

    def add(self, item: Any) -> None:
        if isinstance(item, Message):
            if self.remap and item.session_id in self.remap:
                item.session_id = self.remap[item.session_id]
            if self.redactor is not None:
                self._to_redact.append((item, "text", item.session_id, item.msg_idx, "text"))
            self.first_idx.setdefault(item.session_id, item.msg_idx)
            self.last_idx[item.session_id] = item.msg_idx
            self.messages.append(item)
            self.n_messages += 1
            if self.stream is not None:
                self.stream.check(item.session_id, item.msg_idx)
                if self.n_messages == self.stream.first_chunk_messages:
                    self.flush()  # (the first chunk for the worker, which waits for it)
        elif isinstance(item, ToolCall):
            if self.remap and item.session_id in self.remap:
                item.session_id = self.remap[item.session_id]
            if self.redactor is not None:
                for fld in ("command", "input", "output"):
                    if getattr(item, fld):
                        self._to_redact.append((item, fld, item.session_id, item.msg_idx, fld))
            if self.stream is not None:  # (its result comes after it: msg_idx is the first)
                self.stream.check(item.session_id, item.msg_idx)
            self.calls.append(item)
        elif isinstance(item, Session):
            item.source_path = self.path
            self._claim_session(item)
            item.session_id = self._sid(item.session_id) or item.session_id
            item.parent_session_id = self._sid(item.parent_session_id)
            prev = self.sessions.get(item.session_id)
            if prev is None:
                self.sessions[item.session_id] = item
            else:
                for name, value in item.model_dump(exclude_none=True).items():
                    setattr(prev, name, value)
        elif isinstance(item, ToolResult):
            item.session_id = self._sid(item.session_id) or item.session_id
            if self.redactor is not None and item.output:
                self._to_redact.append(
                    (item, "output", item.session_id, item.result_msg_idx, "output")
                )
            self.orphans.append(item)
        elif isinstance(item, RawRecord):
            item.session_id = self._sid(item.session_id)
            if self.redactor is not None:
                self._to_redact.append((item, "raw", item.session_id, None, "raw"))
            self.raws.append(item)
        elif isinstance(item, Quarantined):
            if self.redactor is not None:
                self._to_redact.append((item, "raw", None, None, "quarantine"))
            self.quarantined.append(item)
        if len(self.messages) + len(self.calls) + len(self.raws) >= FLUSH_EVERY:
            self.flush()

    def _stored_tables(self) -> tuple[pa.Table | None, pa.Table | None]:
        """The Arrow tables of the messages and calls read since the last flush, with their
        texts redacted (None: no rows), after redacting every text read since then.

        Most texts hold nothing to redact: the messages' and calls' texts are searched
        for anything that may be a secret in the columns of the tables to store, all at
        once (``Redactor.may_hold_secrets``), and only those that may hold one are
        redacted one by one (a table is built again when one of its texts changed).
        What was replaced is noted in the order the texts were read."""
        from analytics.store.writer import to_arrow

        messages = to_arrow("messages", self.messages) if self.messages else None
        calls = to_arrow("tool_calls", self.calls) if self.calls else None
        todo, self._to_redact = self._to_redact, []
        redactor = self.redactor
        if not todo or redactor is None:
            return messages, calls
        maybe: set[tuple[int, str]] = set()  # (id(item), attribute) that may hold one
        for table, rows, attrs in (
            (messages, self.messages, ("text",)), (calls, self.calls, ("command", "input", "output"))
        ):
            if table is None:
                continue
            for attr in attrs:
                found = redactor.may_hold_secrets(table.column(attr))
                maybe.update((id(rows[i]), attr) for i, hit in enumerate(found) if hit)
        changed: set[type] = set()
        for item, attr, sid, idx, fld in todo:
            if isinstance(item, (Message, ToolCall)) and (id(item), attr) not in maybe:
                continue
            new, counts = redactor.redact(getattr(item, attr) or "")
            if counts:  # (no count: nothing replaced, the text is as it was)
                setattr(item, attr, new)
                changed.add(type(item))
            for kind, count in counts.items():
                self.redactions.append(_Redaction(sid, idx, fld, kind, count))
        if Message in changed:
            messages = to_arrow("messages", self.messages)
        if ToolCall in changed:
            calls = to_arrow("tool_calls", self.calls)
        return messages, calls

    def flush(self) -> None:
        messages, calls = self._stored_tables()
        put, stream = self._put, self.stream
        for name, table in (("messages", messages), ("tool_calls", calls)):
            if table is not None:
                self._put_table(name, table)
        if stream is not None:  # (it reads the rows as they go in: a streamed file is never staged)
            assert self.staging is None
            appended = Appended(self.messages, self.calls, messages, calls)
        put("raw_records", self.raws, extra={"path": self.path})
        put("quarantine", self.quarantined, extra={"path": self.path})
        put("redactions", self.redactions, extra={"path": self.path})
        self.messages, self.calls, self.raws, self.quarantined, self.redactions = [], [], [], [], []
        if stream is not None:
            stream.stored(self.first_idx, self.last_idx, appended)

    def finish(self) -> list[tuple[str, int]]:
        """Flush, store sessions and apply orphan results; return (session, msg_idx) of calls
        completed by those results."""
        self.flush()
        if self.staging is not None:
            self.staging.load(self.con)
        for s in self.sessions.values():
            self.con.execute("DELETE FROM sessions WHERE session_id = ?", [s.session_id])
            cols = list(Session.model_fields)
            self.con.execute(
                f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [getattr(s, c) for c in cols],
            )
        touched: list[tuple[str, int]] = []
        changed: set[tuple[str, int]] = set()  # touched by a result that does more than settle
        for r in self.orphans:
            row = self.con.execute(
                """
                UPDATE tool_calls SET output = coalesce(?, output), status = ?,
                    exit_code = coalesce(?, exit_code),
                    ended_at = ?, result_msg_idx = ?,
                    duration_s = date_diff('millisecond', started_at, ?) / 1000.0
                WHERE session_id = ? AND call_id = ? RETURNING msg_idx
                """,
                [r.output, r.status, r.exit_code, r.ended_at, r.result_msg_idx, r.ended_at,
                 r.session_id, r.call_id],
            ).fetchall()
            if not row and r.result_msg_idx is not None:
                # A result whose call was never seen (the call was in a file we do not have):
                # keep it as a call of unknown tool on the message that carries the result.
                # (straight into the table: staged rows were loaded already)
                _direct_append(self.con, "tool_calls", [ToolCall(
                    session_id=r.session_id, msg_idx=r.result_msg_idx, call_id=r.call_id,
                    output=r.output, status=r.status, exit_code=r.exit_code,
                    ended_at=r.ended_at, result_msg_idx=r.result_msg_idx,
                )])
            hit = [(r.session_id, x[0]) for x in row]
            if r.result_msg_idx is not None:
                hit.append((r.session_id, r.result_msg_idx))
            touched.extend(hit)
            if not r.settles:
                changed.update(hit)
        self.settled_only = {t for t in touched if t not in changed}
        return touched


class Appended(NamedTuple):
    """The messages and tool calls of one flush, with the Arrow tables stored of them
    (None: no rows)."""

    messages: list[Message]
    calls: list[ToolCall]
    msg_table: pa.Table | None
    call_table: pa.Table | None


@dataclass
class _Redaction:
    session_id: str | None
    msg_idx: int | None
    field: str
    kind: str
    count: int



class AnalysisStream:
    """Message-level analysis of a long file's main session while the file is still parsed.

    After each flush the messages stored so far, but for the last ``STREAM_LAG`` (their tool
    calls may not have come back yet), are fed to a :class:`~analytics.analysis.run.MessageRun`:
    its worker process tags them on the second core while this one parses on. The result is
    kept only if nothing it read changed later, i.e. no message or tool call of the session
    arrived below the point already analysed (a result that came back much later, a call
    completed by an orphan result); otherwise the session is analysed again from scratch,
    after the parse, exactly as without the stream.

    The run reads the chunks it is fed from the records the flushes stored
    (:class:`~analytics.analysis.rows.StoredRecords`), not from the database, when those
    hold every row of the session: kept from the session's first flush on, for the session
    most likely to be streamed. What the run has read is let go after each feed. The rest of
    the session, after the parse, too, unless orphan results completed calls of the session
    (they changed its rows in the database only): then it is read from the database.
    """

    def __init__(
        self, analyser: Any, con: duckdb.DuckDBPyConnection, size: int,
        core_free: Callable[[], object] | None = None,
    ) -> None:
        """``core_free``: called once the worker forked for the file leaves a core free
        (``TagWorker.when_core_free``; at once when none is forked), whoever holds it then."""
        from analytics.analysis.tagging import worker as tag_worker

        self.analyser, self.con = analyser, con
        self.run: Any | None = None  # a MessageRun once a session is long enough
        self.session_id: str | None = None
        self.late = False
        self.worker: Any | None = None
        """Forked up front for a large file, so that it loads spaCy while the first rows
        are parsed; the run takes it over (or it is stopped unused)."""
        if size >= PREFORK_BYTES:
            self.worker = tag_worker.start(analyser._tag_packed, prepare=analyser.warm_up)
        if core_free is not None:
            if self.worker is not None:
                self.worker.when_core_free(core_free)
            else:
                core_free()
        from analytics.analysis.run import CHUNK

        self.first_chunk_messages = CHUNK + STREAM_LAG
        """Messages read from the file when a session of them all can stream its first
        chunk: the file's loader flushes then (``FileLoader.add``) besides every
        ``FLUSH_EVERY`` rows, so that the worker, which has loaded spaCy by then, gets its
        first chunk as soon as there is one (a file of several sessions may have none yet:
        one flush more)."""
        self.records: StoredRecords | None = None
        """The rows of the session streamed (before the run, of the longest one) as they
        were stored, from its first flush on; None: not all of them were kept."""
        self._flushed: set[str] = set()
        """Sessions with rows stored by the flushes before the last one."""

    def check(self, session_id: str, msg_idx: int) -> None:
        """A message or call of ``msg_idx`` arrives: too late if that part is analysed."""
        if self.run is not None and session_id == self.session_id and msg_idx < self.run.next_lo:
            self.late = True

    def stored(
        self, first_idx: dict[str, int], last_idx: dict[str, int], appended: Appended
    ) -> None:
        """Everything added so far is stored (``appended`` by the last flush): feed what is
        safe to analyse."""
        from analytics.analysis.run import CHUNK, MessageRun

        if self.late:
            self.records = None
            return
        if self.run is None:
            sid = max(last_idx, key=lambda s: last_idx[s] - first_idx[s], default=None)
            self._keep(sid, appended)
            # Streamed from its first whole chunk on: at the first flush of a long file, when
            # the worker forked for it has just loaded spaCy (it would wait for a second one).
            if sid is None or last_idx[sid] - STREAM_LAG - first_idx[sid] + 1 < CHUNK:
                return  # short sessions are analysed after the parse
            self.session_id = sid
            self.run = MessageRun(self.analyser, self.con, sid, first_idx[sid], worker=self.worker)
            self.worker = None
        elif self.records is not None:
            self.records.add(*appended)
        assert self.session_id is not None
        self.run.feed(last_idx[self.session_id] - STREAM_LAG, records=self.records)
        if self.records is not None:
            self.records.release(self.run.next_lo)

    def _keep(self, session_id: str | None, appended: Appended) -> None:
        """Before the run: keep the rows of ``session_id`` (the longest session so far) if
        none of them was stored by an earlier flush (then all of them are kept)."""
        from analytics.analysis.rows import StoredRecords

        if self.records is None or self.records.session_id != session_id:
            if session_id is None or session_id in self._flushed:
                self.records = None  # (its earlier rows were not kept)
            else:
                self.records = StoredRecords(session_id)
        if self.records is not None:
            self.records.add(*appended)
        self._flushed.update(m.session_id for m in appended.messages)
        self._flushed.update(c.session_id for c in appended.calls)

    def finish(
        self, start: int, extra: list[int], meanwhile: Meanwhile | None = None,
        settled: Collection[int] = (),
    ) -> None:
        """After the parse: analyse the rest of the session, or all of it again if
        something arrived late; ``extra`` are messages whose calls the load completed.
        ``meanwhile``: work that reads no analysis still to be written, done while the
        worker tags the last chunks (if the stream is kept; left to the caller otherwise);
        it is given the ``msg_idx`` below which the analysis is final
        (``MessageRun.settled``) and what the run read of the messages (``MessageRun.seen``).
        ``settled``: those of ``extra`` whose calls a result only
        settled (``ToolResult.settles``): analysed already, each is analysed again alone."""
        run = self.run
        assert run is not None
        records, self.records = self.records, None
        analysed = [i for i in extra if i < run.next_lo]
        if self.late or any(i not in settled for i in analysed):
            run.stop_worker()
            self.analyser.clear_from(self.con, self.session_id, start)
            self.analyser.run_messages(self.con, self.session_id, start, extra)
            return
        run.finish(meanwhile, records=None if extra else records)
        if analysed:  # (a process seen to exit long after the call that started it)
            self.analyser.run_messages(self.con, self.session_id, run.next_lo, analysed)

    def abort(self) -> None:
        """Stop the worker, whoever holds it (a no-op once the run closed it); let go of
        the rows kept."""
        self.records = None
        if self.run is not None:
            self.run.stop_worker()
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _direct_append(con: duckdb.DuckDBPyConnection, table: str, rows: Any, **kw: Any) -> int:
    from analytics.store.writer import append

    return append(con, table, rows, **kw)


def _direct_append_table(con: duckdb.DuckDBPyConnection, table: str, arrow: pa.Table) -> int:
    from analytics.store.writer import append_table

    return append_table(con, table, arrow)
