"""Streaming reader for JSON-lines files, shared by the JSONL format parsers.

``iter_lines`` is the low-level reader: it yields one ``JsonLine`` per non-blank
line, with the decoded object or the exception that stopped it. ``read_records``
adds the accounting every parser needs: it quarantines bad lines (counting them
on the ledger), advances ``ledger.end_offset``/``end_line`` over consumed lines,
and falls back to ``raw_decode`` streaming for files of pretty-printed objects.
The caller counts each good record it yields (``ledger.stored()``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import BinaryIO

import orjson

from analytics.formats import UTF8_BOM
from analytics.models import Ledger, ParsedItem, Quarantined, Resume
from analytics.sources.encoding import open_utf8

CHUNK_SIZE = 4 << 20
MAX_RAW_CHARS = 64 * 1024
PEEK_SIZE = 4 << 20


@dataclass(slots=True)
class JsonLine:
    """One non-blank line of a JSONL file (treat as read-only; not frozen because a
    frozen dataclass is three times slower to build, and one is built per line)."""

    line_no: int
    """1-based line number (for pretty-printed files: the object's number)."""
    offset: int
    """Byte offset of the start of the line."""
    raw: bytes
    value: dict[str, object] | Exception
    """The decoded object, or why it could not be decoded."""
    terminated: bool = True
    """False for a final line with no trailing newline (possibly still being written)."""
    location: str = ""
    """``line N`` (or ``object N`` in a file of pretty-printed objects)."""

    def __post_init__(self) -> None:
        if not self.location:
            self.location = f"line {self.line_no}"

    @property
    def end(self) -> int:
        """Byte offset just past this line (and its newline)."""
        return self.offset + len(self.raw) + (1 if self.terminated else 0)


class NotAnObjectError(ValueError):
    """The line is valid JSON but not a JSON object."""


def one_line(exc: BaseException) -> str:
    """A one-line reason for a quarantine record."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'unknown error'}"


def decode_raw(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")[:MAX_RAW_CHARS]


def _decode(raw: bytes) -> dict[str, object] | Exception:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return exc
    if not isinstance(value, dict):
        return NotAnObjectError(f"not a JSON object but {type(value).__name__}")
    return value


def iter_lines(path: Path, offset: int = 0, line_no: int = 0) -> Generator[JsonLine, None, None]:
    """Yield the non-blank lines of ``path`` from byte ``offset`` on.

    ``line_no`` is the number of lines before ``offset`` (the first line read is
    ``line_no + 1``). Blank lines are counted but not yielded.
    """
    # The hot loop of every JSONL parser: big reads split with bytes.split, and
    # _decode inlined (one call per line less). ``isspace`` tests the same ASCII
    # whitespace as ``strip`` but stops at the first non-blank byte.
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    with open_utf8(path) as fh:
        glued = _ends_unterminated_line(fh, offset)
        offset = skip_bom(fh, offset)
        pending = b""
        held: list[bytes] = []  # chunks of a line longer than a chunk, joined once it ends
        pos = offset
        while chunk := fh.read(CHUNK_SIZE):
            if b"\n" not in chunk:
                held.append(chunk)  # (a 60 MB base64 image: not copied at every read)
                continue
            if held:
                parts, held = b"".join([pending, *held, chunk]).split(b"\n"), []
            else:
                parts = (pending + chunk).split(b"\n")
            pending = parts.pop()
            for raw in parts:
                if glued and (not raw or raw.isspace()):
                    glued = False  # the newline that ends the line read before ``offset``
                    pos += len(raw) + 1
                    continue
                glued = False
                line_no += 1
                if raw and not raw.isspace():
                    try:
                        value: dict[str, object] | Exception = loads(raw)
                    except decode_error as exc:
                        value = exc
                    else:
                        if type(value) is not dict:
                            value = NotAnObjectError(
                                f"not a JSON object but {type(value).__name__}"
                            )
                    yield JsonLine(line_no, pos, raw, value, True, f"line {line_no}")
                pos += len(raw) + 1
        if held:
            pending = b"".join([pending, *held])
        if pending and not pending.isspace():
            yield JsonLine(line_no + 1, pos, pending, _decode(pending), terminated=False)


def _ends_unterminated_line(fh: BinaryIO, offset: int) -> bool:
    """True when the byte before ``offset`` is not a newline: an earlier read consumed a
    final line that had no newline yet (a live file), so the newline still to come ends
    that line and does not start a blank one (which would shift every line number on)."""
    if offset <= 0:
        return False
    fh.seek(offset - 1)
    return fh.read(1) not in (b"\n", b"")


def skip_bom(fh: BinaryIO, offset: int) -> int:
    """Seek ``fh`` to ``offset``, past a UTF-8 byte order mark at the start of the file.

    Editors and Windows tools write one; orjson (rightly, for a JSON text) rejects it, so
    without this the first record of such a file would be quarantined."""
    if offset == 0 and fh.read(len(UTF8_BOM)) == UTF8_BOM:
        return len(UTF8_BOM)
    fh.seek(offset)
    return offset


def read_records(
    path: Path, ledger: Ledger, offset: int = 0, line_no: int = 0
) -> Iterator[JsonLine | Quarantined]:
    """Yield decoded lines and ``Quarantined`` records, keeping ``ledger`` in step.

    Sets ``ledger.end_offset``/``end_line`` to ``offset``/``line_no`` first, then
    past every consumed line. A final unterminated line that fails to decode is
    quarantined but not consumed, so a later incremental read tries it again.
    """
    ledger.end_offset, ledger.end_line = offset, line_no
    lines = iter_lines(path, offset, line_no)
    first = next(lines, None)
    if first is None:
        return
    if isinstance(first.value, Exception) and _spans_lines(path, first.offset):
        lines.close()
        yield from _read_objects(path, ledger, offset, line_no)
        return
    for line in chain((first,), lines):
        if isinstance(line.value, Exception):
            ledger.quarantined()
            yield Quarantined(
                location=line.location, error=one_line(line.value), raw=decode_raw(line.raw)
            )
            if not line.terminated:
                return
        else:
            yield line
        ledger.end_offset, ledger.end_line = line.end, line.line_no


def parse_lines(
    path: Path,
    ledger: Ledger,
    resume: Resume | None,
    feed: Callable[[JsonLine], Iterable[ParsedItem]],
) -> Iterator[ParsedItem]:
    """The records of ``path`` from where ``resume`` left off: ``Quarantined`` for bad
    lines, ``feed(line)`` for good ones (``feed`` counts what it stores)."""
    offset, line_no = (resume.offset, resume.line) if resume else (0, 0)
    for item in read_records(path, ledger, offset, line_no):
        if isinstance(item, Quarantined):
            yield item
        else:
            yield from feed(item)


def quarantine(ledger: Ledger, line: JsonLine, reason: str) -> Quarantined:
    """Count ``line`` as quarantined and return its record."""
    ledger.quarantined()
    return Quarantined(location=line.location, error=reason, raw=decode_raw(line.raw))


def head_objects(path: Path, limit: int) -> Iterator[dict[str, object]]:
    """The decoded objects among the first ``limit`` records (a cheap look at the head)."""
    for n, item in enumerate(read_records(path, Ledger())):
        if n >= limit:
            return
        if isinstance(item, JsonLine) and isinstance(item.value, dict):
            yield item.value


def first_object(head: bytes, max_lines: int = 50) -> dict[str, object] | None:
    """The first line of ``head`` that decodes to a JSON object (for ``sniff``)."""
    return next(objects_in_head(head, max_lines), None)


def objects_in_head(head: bytes, max_lines: int = 50) -> Iterator[dict[str, object]]:
    """The lines among the first ``max_lines`` of ``head`` that decode to JSON objects."""
    for raw in head.removeprefix(UTF8_BOM).split(b"\n")[:max_lines]:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def resume_position(
    state: dict[str, object], resume: Resume | None, session_id: str
) -> tuple[int, dict[str, int]]:
    """(next msg_idx, open call id -> msg_idx) carried over from a previous parse."""
    next_idx = state.get("next_msg_idx", 0)
    if resume and session_id in resume.next_msg_idx:
        next_idx = resume.next_msg_idx[session_id]
    carried = state.get("pending", {})
    return (
        next_idx if isinstance(next_idx, int) else 0,
        dict(carried) if isinstance(carried, dict) else {},
    )


def _read_objects(
    path: Path, ledger: Ledger, offset: int, line_no: int
) -> Iterator[JsonLine | Quarantined]:
    """Stream a file of concatenated (pretty-printed) JSON objects with raw_decode."""
    with open_utf8(path) as fh:
        offset = skip_bom(fh, offset)
        data = fh.read()
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    pos, n, byte_pos = 0, 0, offset
    while True:
        start = _skip_ws(text, pos)
        byte_pos += len(text[pos:start].encode())
        line_no += text.count("\n", pos, start)
        if start >= len(text):
            break
        n += 1
        try:
            value, end = decoder.raw_decode(text, start)
            error: Exception | None = None
            if not isinstance(value, dict):
                error = NotAnObjectError(f"not a JSON object but {type(value).__name__}")
        except (json.JSONDecodeError, RecursionError) as exc:
            value, error = None, exc
            end = _next_object_start(text, start)
        chunk = text[start:end]
        raw = chunk.encode()
        byte_pos += len(raw)
        line_no += chunk.count("\n")
        if error is not None or not isinstance(value, dict):
            ledger.quarantined()
            reason = one_line(error) if error else "not a JSON object"
            yield Quarantined(location=f"object {n}", error=reason, raw=chunk[:MAX_RAW_CHARS])
        else:
            yield JsonLine(n, byte_pos - len(raw), raw, value, location=f"object {n}")
        ledger.end_offset, ledger.end_line = byte_pos, line_no
        pos = end


def _spans_lines(path: Path, offset: int) -> bool:
    """True when a JSON object starting at ``offset`` decodes across several lines."""
    with open_utf8(path) as fh:
        offset = skip_bom(fh, offset)
        head = fh.read(PEEK_SIZE).decode("utf-8", errors="replace")
    start = _skip_ws(head, 0)
    if not head.startswith("{", start):
        return False
    try:
        _, end = json.JSONDecoder().raw_decode(head, start)
    except (json.JSONDecodeError, RecursionError):
        return False  # nested beyond Python's recursion limit: not a pretty-printed file
    return "\n" in head[start:end]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _next_object_start(text: str, start: int) -> int:
    """Where to resynchronise after a broken object: the next line starting with '{'."""
    found = text.find("\n{", start + 1)
    return len(text) if found < 0 else found + 1


def parse_ts(value: object) -> datetime | None:
    """An ISO-8601 timestamp (``Z`` allowed), or None when absent or malformed."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


class BadRecordError(ValueError):
    """A record of a known type whose fields have the wrong shape."""


def opt(obj: dict[str, object], key: str, kind: type) -> object:
    """``obj[key]`` (None when absent); BadRecordError when it is not a ``kind``."""
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        raise BadRecordError(f"field {key!r} is {type(value).__name__}, expected {kind.__name__}")
    return value


def opt_str(obj: dict[str, object], key: str) -> str | None:
    value = opt(obj, key, str)
    return value if isinstance(value, str) else None


def opt_dict(obj: dict[str, object], key: str) -> dict[str, object]:
    value = opt(obj, key, dict)
    return value if isinstance(value, dict) else {}
