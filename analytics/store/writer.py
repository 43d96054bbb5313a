"""Bulk writes of pydantic records into DuckDB (Arrow appends, never row-by-row)."""

from __future__ import annotations

import contextlib
import shutil
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from pydantic import BaseModel

from analytics.store.db import sql_string


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


TABLE_COLUMNS: dict[str, list[str]] = {
    "messages": [
        "session_id", "msg_idx", "source_id", "parent_source_id", "role", "ts", "text",
        "n_chars", "is_sidechain", "is_compaction_summary", "error", "native_type", "model",
        "location",
    ],
    "tool_calls": [
        "session_id", "msg_idx", "call_id", "tool", "command", "input", "output", "status",
        "exit_code", "started_at", "ended_at", "duration_s", "result_msg_idx",
    ],
    "raw_records": ["path", "session_id", "location", "record_type", "known", "ts", "raw"],
    "quarantine": ["path", "location", "error", "raw"],
    "tags": [
        "session_id", "msg_idx", "tag", "score", "source", "evidence", "start_char",
        "end_char", "tagger_version",
    ],
    "polling_loops": [
        "session_id", "msg_idx", "call_id", "interval_s", "max_iterations", "max_wait_s",
        "target", "success_pattern", "failure_pattern", "outcome", "waited_s",
    ],
    "launches": [
        "session_id", "msg_idx", "call_id", "engine", "model", "host", "flags",
        "changed_flags", "env", "unknown_flags",
    ],
    "server_events": ["session_id", "msg_idx", "engine", "event", "detail", "log_ts"],
    "measurements": ["session_id", "msg_idx", "metric", "value", "unit", "label", "source"],
    "campaigns": [
        "campaign_id", "session_id", "goal_text", "target_metric", "target_value", "unit",
        "baseline_value", "best_value", "start_msg_idx", "end_msg_idx", "status",
    ],
    "levers": [
        "campaign_id", "session_id", "seq", "name", "description", "start_msg_idx",
        "end_msg_idx", "metric", "value_before", "value_after", "delta_pct", "outcome",
        "evidence_msg_idx",
    ],
    "readiness_claims": [
        "session_id", "msg_idx", "claim_text", "subject", "verdict", "reason",
        "evidence_msg_idx", "contradicted_by_msg_idx",
    ],
    "redactions": ["session_id", "msg_idx", "field", "kind", "count", "path"],
}

JSON_COLUMNS = {
    "flags", "changed_flags", "env", "unknown_flags", "evidence_msg_idx",
}

# Types for columns that may be all-None in a batch (Arrow cannot infer them).
_ARROW_TYPES: dict[str, pa.DataType] = {
    "msg_idx": pa.int32(), "n_chars": pa.int32(), "exit_code": pa.int32(),
    "result_msg_idx": pa.int32(), "start_char": pa.int32(), "end_char": pa.int32(),
    "max_iterations": pa.int32(), "start_msg_idx": pa.int32(), "end_msg_idx": pa.int32(),
    "seq": pa.int32(), "contradicted_by_msg_idx": pa.int32(), "count": pa.int32(),
    "ts": pa.timestamp("us"), "started_at": pa.timestamp("us"), "ended_at": pa.timestamp("us"),
    "is_sidechain": pa.bool_(), "is_compaction_summary": pa.bool_(), "known": pa.bool_(),
    "score": pa.float64(), "interval_s": pa.float64(), "max_wait_s": pa.float64(),
    "waited_s": pa.float64(), "duration_s": pa.float64(), "value": pa.float64(),
    "target_value": pa.float64(), "baseline_value": pa.float64(), "best_value": pa.float64(),
    "value_before": pa.float64(), "value_after": pa.float64(), "delta_pct": pa.float64(),
    "evidence_msg_idx": pa.string(),
}


_DERIVED = {"n_chars", "duration_s"} | JSON_COLUMNS
"""Columns not read from a record's fields as they are (see ``_derived``)."""

_SCHEMAS = {
    table: pa.schema([pa.field(c, _ARROW_TYPES.get(c, pa.string())) for c in cols])
    for table, cols in TABLE_COLUMNS.items()
}


def _derived(rows: Sequence[Any], col: str, listed: dict[str, Sequence[Any]]) -> list[Any]:
    """The column ``col`` of ``_DERIVED``; ``listed``: the columns listed before it."""
    if col == "n_chars":  # ("text" is listed before it)
        return [len(t or "") for t in listed["text"]]
    if col == "duration_s":
        return [r.duration_s for r in rows]
    return [_json(getattr(r, col, None)) for r in rows]


def _columns(
    table: str, rows: Sequence[Any], extra: dict[str, Any] | None
) -> Iterator[Sequence[Any]]:
    """The columns of ``table`` one at a time, in ``TABLE_COLUMNS`` order. The fields read
    as they are come out of one pass over the records (an ``itemgetter`` of them all, its
    tuples turned into columns by ``zip``: a third of the time of a list per field)."""
    dicts = [vars(r) for r in rows]
    names = TABLE_COLUMNS[table]
    plain = [c for c in names if not (extra and c in extra) and c not in _DERIVED]
    fields = _fields(dicts, plain)
    listed: dict[str, Sequence[Any]] = {}
    for c in names:
        if extra and c in extra:
            column: Sequence[Any] = [extra[c]] * len(rows)
        elif c in _DERIVED:
            column = _derived(rows, c, listed)
        else:
            column = fields[c] if fields is not None else [d.get(c) for d in dicts]
        listed[c] = column
        yield column


def _fields(dicts: list[dict[str, Any]], names: list[str]) -> dict[str, Sequence[Any]] | None:
    """The values of ``names`` in every record's fields, a tuple per name; None when some
    record has not all of them (then each is read with a default), or for one name
    (``itemgetter`` of one gives no tuples; one list is read as fast)."""
    if len(names) < 2 or not dicts:
        return None
    try:
        return dict(zip(names, zip(*map(itemgetter(*names), dicts), strict=True), strict=True))
    except KeyError:
        return None


def to_arrow(table: str, rows: Sequence[Any], extra: dict[str, Any] | None = None) -> pa.Table:
    """The records as an Arrow table of ``table``'s columns: a sequence per column (see
    ``_columns``), converted by Arrow in one call each (a third faster than
    ``Table.from_pylist`` of the dicts)."""
    return from_columns(table, _columns(table, rows, extra))


def to_columns(
    table: str, rows: Sequence[Any], extra: dict[str, Any] | None = None
) -> list[Sequence[Any]]:
    """The records as one sequence per column of ``table`` (``TABLE_COLUMNS``), the values
    ``to_arrow`` stores. Plain Python: no Arrow call, so no pandas import (``pa.array``
    imports pandas in the process that first calls it, a fifth of a second)."""
    return list(_columns(table, rows, extra))


def from_columns(table: str, columns: Iterable[Sequence[Any]]) -> pa.Table:
    """The Arrow table of ``table`` holding ``columns`` (as ``to_columns`` lists them),
    each converted as it comes."""
    schema = _SCHEMAS[table]
    arrays = [pa.array(v, type=f.type) for v, f in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def append(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[BaseModel] | Sequence[Any],
    extra: dict[str, Any] | None = None,
) -> int:
    """Append records to ``table`` in one Arrow scan. ``extra`` sets constant columns.

    The query names the local variable holding the Arrow table, which DuckDB finds by
    itself (a replacement scan): half the cost of registering and unregistering it as a
    view, which an ingest of many small files pays a dozen times per file."""
    stored = append_stored(con, table, rows, extra)
    return 0 if stored is None else int(stored.num_rows)


def append_stored(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[BaseModel] | Sequence[Any],
    extra: dict[str, Any] | None = None,
) -> pa.Table | None:
    """:func:`append`, returning the Arrow table stored (None: no rows), for a caller that
    reads the rows on."""
    if not rows:
        return None
    stored = to_arrow(table, rows, extra)
    append_table(con, table, stored)
    return stored


def append_table(con: duckdb.DuckDBPyConnection, table: str, arrow_rows: pa.Table) -> int:
    """Append an Arrow table of ``table``'s columns (as ``to_arrow`` builds it)."""
    if not arrow_rows.num_rows:
        return 0
    con.execute(_insert_sql(table, "arrow_rows"))  # (in this frame: DuckDB looks here)
    return int(arrow_rows.num_rows)


def _insert_sql(table: str, source: str) -> str:
    """The statement inserting the table's columns from ``source`` (a relation with them)."""
    cols = ", ".join(TABLE_COLUMNS[table])
    return f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {source}"


class Staging:
    """Rows of one large file written to Parquet files first, then inserted with one
    ``INSERT … SELECT FROM read_parquet`` per table inside the caller's transaction.

    DuckDB keeps the rows of many appends to an open transaction in memory until the
    commit; one bulk insert from Parquet streams them to the database file instead, so
    the memory an ingest needs stays bounded whatever the size of the file. The Parquet
    writes run on a thread of their own (pyarrow encodes and compresses without the GIL)
    while the caller parses on; at most ``BEHIND`` batches wait for it."""

    BEHIND = 4

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._writers: dict[str, Any] = {}  # table -> pyarrow.parquet.ParquetWriter
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="transcripts-staging")
        self._out: deque[Future[None]] = deque()

    def append(
        self,
        table: str,
        rows: Sequence[BaseModel] | Sequence[Any],
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Stage records for ``table`` (as :func:`append` would store them)."""
        if not rows:
            return 0
        return self.append_table(table, to_arrow(table, rows, extra))

    def append_table(self, table: str, arrow: pa.Table) -> int:
        """Stage an Arrow table of ``table``'s columns (as ``to_arrow`` builds it)."""
        if not arrow.num_rows:
            return 0
        writer = self._writers.get(table)
        if writer is None:
            import pyarrow.parquet as pq  # only large files are staged

            writer = pq.ParquetWriter(self.dir / f"{table}.parquet", arrow.schema,
                                      compression="lz4")
            self._writers[table] = writer
        while len(self._out) >= self.BEHIND:  # (bounded memory; a failed write raises here)
            self._out.popleft().result()
        self._out.append(self._pool.submit(writer.write_table, arrow))
        return int(arrow.num_rows)

    def _written(self) -> None:
        """Wait for the writes handed over; raise the first one's error."""
        while self._out:
            self._out.popleft().result()

    def load(self, con: duckdb.DuckDBPyConnection) -> None:
        """Insert every staged table; the files are removed by :meth:`close`."""
        self._written()
        for table, writer in self._writers.items():
            writer.close()
            parquet = f"read_parquet({sql_string(self.dir / f'{table}.parquet')})"
            con.execute(_insert_sql(table, parquet))
        self._writers = {}

    def close(self) -> None:
        # (a failed file: its writes still queued are dropped, and their errors, not the
        # ones to raise, with them)
        self._pool.shutdown(cancel_futures=True)
        self._out.clear()
        for writer in self._writers.values():
            # (files about to be removed: a writer that failed must not hide why it failed)
            with contextlib.suppress(Exception):
                writer.close()
        self._writers = {}
        shutil.rmtree(self.dir, ignore_errors=True)
