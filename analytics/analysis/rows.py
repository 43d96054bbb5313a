"""The stored rows of a chunk of messages, as the message-level analysers read them.

Two shapes of the same rows: Python tuples (``load_rows``), from which
``contexts_from_rows`` builds the records the analysers take, and Arrow tables
(``load_tables``), which DuckDB hands over without making a Python object per value. The
tagging worker gets its chunks as Arrow tables packed into one buffer (``pack``): no
per-value pickling in the ingest process, which is busy parsing meanwhile; the worker turns
them into rows (``rows_from_tables``) and the same records. While a file is parsed, the rows
just stored come in both shapes from what the loader held (:class:`StoredRecords`), without
reading them back.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analytics.gcpause import no_cyclic_gc
from analytics.models import Message, MessageContext, ToolCall, trusted

_MSG_COLS = [
    "session_id", "msg_idx", "source_id", "parent_source_id", "role", "ts", "text",
    "is_sidechain", "is_compaction_summary", "error", "native_type", "model", "location",
]
_CALL_COLS = [
    "session_id", "msg_idx", "call_id", "tool", "command", "input", "output", "status",
    "exit_code", "started_at", "ended_at", "result_msg_idx",
]
Rows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]
"""(message rows, tool-call rows) as ``load_rows`` returns them."""
_MSG_SQL = (
    f"SELECT {', '.join(_MSG_COLS)} FROM messages "
    "WHERE session_id = $sid AND msg_idx BETWEEN $lo AND $hi"
)
# Two range predicates DuckDB can skip row groups with (one OR of both scans the whole
# table); rowid restores the table's order, in which the analysers have always seen calls.
_CALL_SQL = (
    f"SELECT rowid, {', '.join(_CALL_COLS)} FROM tool_calls "
    "WHERE session_id = $sid AND msg_idx BETWEEN $lo AND $hi "
    f"UNION ALL SELECT rowid, {', '.join(_CALL_COLS)} FROM tool_calls "
    "WHERE session_id = $sid AND result_msg_idx BETWEEN $lo AND $hi "
    "AND NOT msg_idx BETWEEN $lo AND $hi"
)
_MSG_IDX = _MSG_COLS.index("msg_idx")
def _message_values(row: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of the ``Message`` of a message row (``_MSG_COLS``; a NULL text is "").
    A dict display, which Python builds at its final size in one step: ``dict(zip(…))``
    makes a pair per column and grows the dict twice (a fifth of the time a chunk's
    records take)."""
    (session_id, msg_idx, source_id, parent_source_id, role, ts, text, is_sidechain,
     is_compaction_summary, error, native_type, model, location) = row
    return {
        "session_id": session_id, "msg_idx": msg_idx, "source_id": source_id,
        "parent_source_id": parent_source_id, "role": role, "ts": ts,
        "text": text if text is not None else "", "is_sidechain": is_sidechain,
        "is_compaction_summary": is_compaction_summary, "error": error,
        "native_type": native_type, "model": model, "location": location,
    }


def _call_values(row: tuple[Any, ...]) -> dict[str, Any]:
    """The fields of the ``ToolCall`` of a tool-call row (rowid, then ``_CALL_COLS``), as
    :func:`_message_values` builds them."""
    (_rowid, session_id, msg_idx, call_id, tool, command, input_, output, status, exit_code,
     started_at, ended_at, result_msg_idx) = row
    return {
        "session_id": session_id, "msg_idx": msg_idx, "call_id": call_id, "tool": tool,
        "command": command, "input": input_, "output": output, "status": status,
        "exit_code": exit_code, "started_at": started_at, "ended_at": ended_at,
        "result_msg_idx": result_msg_idx,
    }


def load_contexts(
    con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int
) -> list[MessageContext]:
    """Messages ``lo..hi`` of a session with the calls they make and the results they carry."""
    return contexts_from_rows(*load_rows(con, session_id, lo, hi))


def load_rows(con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int) -> Rows:
    """The message rows (``_MSG_COLS``, in msg_idx order) and tool-call rows (rowid, then
    ``_CALL_COLS``, in table order) of messages ``lo..hi``, for ``contexts_from_rows``."""
    params = {"sid": session_id, "lo": lo, "hi": hi}

    def rows(sql: str) -> list[tuple[Any, ...]]:
        """``fetchall()``'s rows, zipped from the columns: DuckDB turns a column into Python
        objects a third faster than it builds rows (a NULL is None either way)."""
        columns = con.execute(sql, params).fetchnumpy().values()
        return list(zip(*(c.tolist() for c in columns), strict=True))

    with no_cyclic_gc():  # thousands of new tuples, no cycles (see ``contexts_from_rows``)
        msgs = rows(_MSG_SQL)
        msgs.sort(key=itemgetter(_MSG_IDX))  # cheaper here than an ORDER BY
        calls = rows(_CALL_SQL)
        calls.sort(key=itemgetter(0))
    return msgs, calls


def contexts_from_rows(
    msgs: list[tuple[Any, ...]], calls: list[tuple[Any, ...]]
) -> list[MessageContext]:
    """Each message with the calls it makes and the results it carries. The cyclic collector
    is off meanwhile: the records hold no cycles, and building thousands of them would have
    it walk the caller's whole heap again and again (as long as building them, when the
    caller holds many records already)."""
    call_fields, msg_fields = set(_CALL_COLS), set(_MSG_COLS)
    context_fields = {"message", "calls", "results"}
    with no_cyclic_gc():
        by_call, by_result = _by_message(
            trusted(ToolCall, _call_values(row), call_fields) for row in calls
        )
        out = []
        for row in msgs:
            d = _message_values(row)
            idx = d["msg_idx"]
            calls_of = by_call.get(idx)
            results_of = by_result.get(idx)
            out.append(_context(d, calls_of, results_of, msg_fields, context_fields))
        return out


def _by_message(
    calls: Iterable[ToolCall],
) -> tuple[dict[int, list[ToolCall]], dict[int, list[ToolCall]]]:
    """``calls`` by the message that makes them and by the one that carries their result."""
    by_call: dict[int, list[ToolCall]] = defaultdict(list)
    by_result: dict[int, list[ToolCall]] = defaultdict(list)
    for call in calls:
        by_call[call.msg_idx].append(call)
        if call.result_msg_idx is not None:
            by_result[call.result_msg_idx].append(call)
    return by_call, by_result


def _context(
    values: dict[str, Any],
    calls: list[ToolCall] | None,
    results: list[ToolCall] | None,
    msg_fields: set[str],
    context_fields: set[str],
) -> MessageContext:
    """The context of the message of ``values`` with the calls it makes and answers (None:
    none), built as ``trusted`` builds records."""
    context: MessageContext = trusted(MessageContext, {
        "message": trusted(Message, values, msg_fields),
        "calls": calls if calls is not None else [],
        "results": results if results is not None else [],
    }, context_fields)
    return context


# --------------------------------------------------------------------------- Arrow tables

Tables = tuple[pa.Table, pa.Table]
"""(message table, tool-call table): ``load_rows``'s rows, as Arrow tables in the same order."""


def load_tables(con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int) -> Tables:
    """``load_rows``, as Arrow tables (sorted natively, no Python object per value)."""
    params = {"sid": session_id, "lo": lo, "hi": hi}
    msgs = con.execute(_MSG_SQL, params).fetch_arrow_table()
    calls = con.execute(_CALL_SQL, params).fetch_arrow_table()
    return _sorted(msgs, "msg_idx"), _sorted(calls, "rowid")


def _sorted(table: pa.Table, key: str) -> pa.Table:
    """``table`` in ``key`` order; as it is when it is in order already (scans mostly return
    rows in table order; sorting copies every column, texts included)."""
    keys = table.column(key).to_numpy()
    if len(keys) < 2 or bool((keys[1:] >= keys[:-1]).all()):
        return table
    return table.sort_by(key)


def msg_indices(tables: Tables) -> list[int]:
    """msg_idx of the messages of ``tables``, in order."""
    indices: list[int] = tables[0].column("msg_idx").to_pylist()
    return indices


def rows_from_tables(tables: Tables) -> Rows:
    """The rows ``load_rows`` returns for the same messages. Column by column with
    ``to_pylist`` (for texts as fast as going through numpy, and unlike numpy's conversion
    of a string column it does not import pandas into the tagging worker), but for
    timestamps (``_pylist``)."""
    with no_cyclic_gc():
        return _table_rows(tables[0]), _table_rows(tables[1])


def _table_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(_pylist(col) for col in table.columns), strict=True))


def _pylist(column: pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``. Timestamps (naive, to the microsecond at most) that hold a
    value go through numpy, which makes the same datetimes thirty times faster than Arrow
    (half the time the analysers' rows of a chunk take), read from the Arrow buffers
    themselves: pyarrow's own conversions to numpy import pandas, which the tagging worker
    (it reads the calls' times for the polling loops) has not loaded."""
    kind = column.type
    if (
        pa.types.is_timestamp(kind)
        and kind.tz is None
        and kind.unit in ("s", "ms", "us")
        and column.null_count < len(column)
    ):
        return _timestamps(pc.cast(column, pa.int64()).combine_chunks(), kind.unit)
    return column.to_pylist()


def _timestamps(ticks: pa.Array, unit: str) -> list[Any]:
    """Naive datetimes (None where null) of an int64 array of ``unit`` ticks since 1970."""
    validity, data = ticks.buffers()
    lo, hi = ticks.offset, ticks.offset + len(ticks)
    values: list[Any] = (
        np.frombuffer(data, dtype=np.int64)[lo:hi].astype(f"datetime64[{unit}]").astype(object).tolist()
    )
    if validity is not None and ticks.null_count:
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[lo:hi]
        for i in np.flatnonzero(valid == 0).tolist():
            values[i] = None
    return values


def tail_tables(tables: Tables, n: int) -> Tables:
    """The last ``n`` messages of ``tables``, with the calls they make or answer: copies,
    not slices (a slice would keep the whole chunk's buffers alive as the next one's
    context)."""
    msgs, calls = tables
    msgs = msgs.take(pa.array(range(max(0, msgs.num_rows - n), msgs.num_rows), pa.int64()))
    return msgs, _calls_touching(calls, set(msg_indices((msgs, calls))))


def with_calls(tables: Tables) -> Tables:
    """Only the messages that make a call or carry a result (those the polling and tooling
    analysers read); every call is kept."""
    msgs, calls = tables
    touched = set(calls.column("msg_idx").to_pylist())
    touched.update(calls.column("result_msg_idx").to_pylist())
    keep = [i in touched for i in msg_indices(tables)]
    return msgs.filter(pa.array(keep, type=pa.bool_())), calls


def _calls_touching(calls: pa.Table, idx: set[int]) -> pa.Table:
    """The calls made by, or answered in, messages ``idx``."""
    made = calls.column("msg_idx").to_pylist()
    answered = calls.column("result_msg_idx").to_pylist()
    keep = [m in idx or r in idx for m, r in zip(made, answered, strict=True)]
    return calls.filter(pa.array(keep, type=pa.bool_()))


def contexts_from_tables(tables: Tables) -> list[MessageContext]:
    """``contexts_from_rows`` of Arrow tables."""
    return contexts_from_rows(*rows_from_tables(tables))


UNTAGGED_COLUMNS = frozenset({
    "ts", "source_id", "parent_source_id", "native_type", "model", "location",
})
"""Columns of ``load_tables``' rows that the tagging worker never reads (a test checks that
its tags and findings are the same without them). The calls' times stay: the polling
analyser, which the worker runs too, reads how long a loop ran."""


def for_tagging(tables: Tables) -> Tables:
    """``tables`` with the ``UNTAGGED_COLUMNS`` all nulls: what the tagging worker gets. Its
    contexts then hold None there, and it neither copies those values out of shared memory
    nor makes a Python object of each (a datetime per message and per call)."""
    return _nulled(tables[0]), _nulled(tables[1])


def _nulled(table: pa.Table) -> pa.Table:
    columns = [
        pa.nulls(table.num_rows, col.type) if name in UNTAGGED_COLUMNS else col
        for name, col in zip(table.column_names, table.columns, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=table.schema)


def pack(*tables: pa.Table) -> pa.Buffer:
    """Arrow tables as one buffer (Arrow IPC streams, one after another; it pickles as bytes)."""
    sink = pa.BufferOutputStream()
    for table in tables:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    return sink.getvalue()


def unpack(packed: bytes | pa.Buffer | memoryview, n: int) -> list[pa.Table]:
    """The ``n`` tables of ``pack``."""
    reader = pa.BufferReader(packed)
    return [pa.ipc.open_stream(reader).read_all() for _ in range(n)]


# --------------------------------------------------------------------------- records just stored


class StoredRecords:
    """One session's messages and tool calls as a loader appended them (redacted, ids
    remapped), with the Arrow tables it appended (``to_arrow``): the chunks of a session
    being parsed, in both shapes, as :func:`load_tables` and :func:`contexts_from_tables`
    would read them back, without a query nor a Python object made per stored value (that
    process is the one parsing). Exact only while the tables hold no other row of the
    session than those added here, and none of those changed: what ``AnalysisStream``
    checks. :meth:`release` drops what no later chunk reads.

    Messages come in ``msg_idx`` order as a rule: a chunk of them is then a slice of what
    is kept, found by bisection (no copy, no pass over every message kept)."""

    def __init__(self, session_id: str) -> None:
        from analytics.store.writer import to_arrow

        self.session_id = session_id
        self._messages: list[Message] = []
        self._idx: list[int] = []
        """msg_idx of ``_messages``."""
        self._in_order = True
        """``_idx`` never decreases."""
        self._calls: list[ToolCall] = []
        self._msg_table: pa.Table = to_arrow("messages", []).select(_MSG_COLS)
        """``_MSG_COLS`` of ``_messages``, row for row."""
        calls = to_arrow("tool_calls", []).select(_CALL_COLS)
        self._call_table: pa.Table = calls.add_column(0, "rowid", pa.array([], pa.int64()))
        """An insertion counter as ``rowid``, then ``_CALL_COLS`` of ``_calls``, row for row."""
        self._rowid = 0

    def add(
        self,
        messages: Sequence[Message],
        calls: Sequence[ToolCall],
        msg_table: pa.Table | None,
        call_table: pa.Table | None,
    ) -> None:
        """Keep the session's part of one append: records of any session and the tables
        stored of them (None: no rows)."""
        if msg_table is not None:
            mine = self._mine(msg_table)
            new = _masked(msg_table.select(_MSG_COLS), mine)
            idx = new.column("msg_idx").to_numpy()
            self._in_order = self._in_order and _ascending_after(self._idx, idx)
            self._messages.extend(_kept(messages, mine.tolist()))
            self._idx.extend(idx.tolist())
            self._msg_table = pa.concat_tables([self._msg_table, new])
        if call_table is not None:
            mine = self._mine(call_table)
            self._calls.extend(_kept(calls, mine.tolist()))
            rowid = pa.array(range(self._rowid, self._rowid + len(calls)), pa.int64())
            self._rowid += len(calls)
            new = _masked(call_table.select(_CALL_COLS).add_column(0, "rowid", rowid), mine)
            self._call_table = pa.concat_tables([self._call_table, new])

    def _mine(self, table: pa.Table) -> np.ndarray:
        """Whether each row of a table appended is of this session: from its session_id
        column, at C speed (the records it was made of, row for row, are not visited)."""
        same = pc.equal(table.column("session_id"), self.session_id)
        mask: np.ndarray = same.to_numpy(zero_copy_only=False)
        return mask

    def _span(self, lo: int, hi: int) -> tuple[int, int] | None:
        """Where the messages ``lo..hi`` are in ``_messages`` (in order: None)."""
        if not self._in_order:
            return None
        return bisect_left(self._idx, lo), bisect_right(self._idx, hi)

    def _touching(self, lo: int, hi: int) -> np.ndarray:
        """Whether each call of ``_calls`` is made or answered in messages ``lo..hi``: from
        the columns of ``_call_table`` (row for row), at C speed."""
        table = self._call_table
        made = table.column("msg_idx").to_numpy()
        answered = table.column("result_msg_idx").to_numpy()  # NULL: NaN, never in range
        mask: np.ndarray = ((made >= lo) & (made <= hi)) | ((answered >= lo) & (answered <= hi))
        return mask

    def tables(self, lo: int, hi: int) -> Tables:
        """``load_tables`` of messages ``lo..hi``."""
        span = self._span(lo, hi)
        if span is not None:
            msgs = self._msg_table.slice(span[0], span[1] - span[0])
        else:
            idx = np.asarray(self._idx)
            msgs = _sorted(_masked(self._msg_table, (idx >= lo) & (idx <= hi)), "msg_idx")
        return msgs, _masked(self._call_table, self._touching(lo, hi))

    def call_contexts(self, lo: int, hi: int) -> list[MessageContext]:
        """``contexts_from_tables(with_calls(self.tables(lo, hi)))``: the messages ``lo..hi``
        that make a call or carry a result, as the database gives them back (timestamps
        naive, in UTC; a text None is "")."""
        call_fields, msg_fields = set(_CALL_COLS), set(_MSG_COLS)
        context_fields = {"message", "calls", "results"}
        with no_cyclic_gc():
            calls = self._calls
            by_call, by_result = _by_message(
                _stored_call(calls[i], call_fields)
                for i in np.flatnonzero(self._touching(lo, hi)).tolist()
            )
            out = []
            for message in self._chunk_messages(lo, hi):
                idx = message.msg_idx
                calls_of = by_call.get(idx)
                results_of = by_result.get(idx)
                if calls_of is None and results_of is None:
                    continue
                d = dict(vars(message))
                d["ts"] = _stored_ts(d["ts"])
                if d["text"] is None:
                    d["text"] = ""
                out.append(_context(d, calls_of, results_of, msg_fields, context_fields))
            return out

    def _chunk_messages(self, lo: int, hi: int) -> list[Message]:
        """The messages ``lo..hi``, in ``msg_idx`` order (stable)."""
        span = self._span(lo, hi)
        if span is not None:
            return self._messages[span[0]:span[1]]
        chunk = [m for m, i in zip(self._messages, self._idx, strict=True) if lo <= i <= hi]
        chunk.sort(key=attrgetter("msg_idx"))
        return chunk

    def release(self, below: int) -> None:
        """Drop the messages below ``msg_idx`` ``below`` and the calls neither made nor
        answered from there on: no chunk from ``below`` on reads them."""
        span = self._span(below, 1 << 62)
        if span is not None:
            first = span[0]
            self._messages, self._idx = self._messages[first:], self._idx[first:]
            self._msg_table = self._msg_table.slice(first)
        else:
            mask = np.asarray(self._idx) >= below
            keep = mask.tolist()
            self._messages, self._idx = _kept(self._messages, keep), _kept(self._idx, keep)
            self._msg_table = _masked(self._msg_table, mask)
        calls = self._touching(below, 1 << 62)
        self._calls = _kept(self._calls, calls.tolist())
        self._call_table = _masked(self._call_table, calls)


def _stored_call(call: ToolCall, fields: set[str]) -> ToolCall:
    """A copy of ``call`` as the database gives it back (``_stored_ts``)."""
    values = dict(vars(call))
    values["started_at"] = _stored_ts(values["started_at"])
    values["ended_at"] = _stored_ts(values["ended_at"])
    return trusted(ToolCall, values, fields)


def _ascending_after(before: list[int], values: np.ndarray) -> bool:
    """Whether ``values`` never decrease, nor fall below the last of ``before``."""
    if not len(values):
        return True
    if before and before[-1] > values[0]:
        return False
    return bool((values[1:] >= values[:-1]).all())


_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=UTC)


def _stored_ts(ts: datetime | None) -> datetime | None:
    """``ts`` as a TIMESTAMP column gives it back: an aware time converted to UTC, without
    its zone (as Arrow converts it when it is stored). By adding its distance from the
    epoch to the naive epoch: exact (whole microseconds), and a third of the cost of
    ``astimezone(UTC).replace(tzinfo=None)`` (``replace`` parses keywords)."""
    if ts is None or ts.tzinfo is None:
        return ts
    return _EPOCH + (ts - _EPOCH_UTC)


def _kept(items: Sequence[Any], keep: list[bool]) -> list[Any]:
    if all(keep):
        return list(items)
    return [x for x, k in zip(items, keep, strict=True) if k]


def _masked(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``table`` flagged in ``keep``: ``table`` itself when that is all of them."""
    if keep.all():
        return table
    return table.filter(pa.array(keep, type=pa.bool_()))
