"""The parser protocol every format module follows.

A format module is pure: it reads a file (or folder) and yields records from
``analytics.models``; it never touches the database. It exposes:

- ``FORMAT``: its name (one of ``analytics.models.FORMATS``);
- ``APPENDABLE``: True when files only grow by appended lines (JSONL), so an
  incremental ingest can resume from ``Ledger.end_offset``;
- ``PARSER_VERSION``: bumped (in ``analytics.formats.PARSER_VERSIONS``) when the rows a
  file gives change: files stored by another version are read again;
- ``sniff(path, head) -> bool``: content detection from the first bytes;
- ``parse(path, ledger, resume=None) -> Iterator[ParsedItem]``: lazy parsing.
  Every record read is counted on ``ledger`` as stored or quarantined; unknown
  record types are yielded as ``RawRecord(known=False)`` and counted in
  ``ledger.unknown_types``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from analytics.models import Ledger, ParsedItem, Resume


class FormatModule(Protocol):
    FORMAT: str
    APPENDABLE: bool
    PARSER_VERSION: int

    def sniff(self, path: Path, head: bytes) -> bool: ...

    def parse(
        self, path: Path, ledger: Ledger, resume: Resume | None = None
    ) -> Iterator[ParsedItem]: ...


def session_id(fmt: str, native_id: str) -> str:
    """The stable session id used in every table."""
    return f"{fmt}:{native_id}"
