"""Transcripts kept compressed (``rollout.jsonl.gz``, ``session.jsonl.xz``, ``notes.txt.bz2``):
read through a decompressed copy, by content (the magic number), not by name.

Detection sniffs the first bytes of the decompressed stream; the ingest decompresses the
file into a temporary folder, parses the copy, and stores everything under the compressed
file's own path. A compressed file is never appended to: when it changes it is read again
whole. Python's standard library reads gzip, bzip2 and xz; a zstd file is named as such in
its error.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

OPENERS: dict[str, tuple[bytes, Callable[..., Any], tuple[str, ...]]] = {
    "gzip": (b"\x1f\x8b", gzip.open, (".gz", ".gzip", ".z")),
    "bzip2": (b"BZh", bz2.open, (".bz2",)),
    "xz": (b"\xfd7zXZ\x00", lzma.open, (".xz", ".lzma")),
}
"""compression -> (magic number, opener, file name suffixes)."""
HEAD_READ = 1 << 20
"""Decompressed bytes read for detection at most."""


def compression(head: bytes) -> str | None:
    """The compression ``head`` (a file's first bytes) starts with, of those read here."""
    return next((name for name, (magic, _, _) in OPENERS.items() if head.startswith(magic)), None)


def compression_of(path: Path) -> str | None:
    """``compression`` of a file (None for a folder or an unreadable file)."""
    try:
        with path.open("rb") as fh:
            return compression(fh.read(8))
    except OSError:
        return None


def plain_head(path: Path, kind: str, size: int) -> bytes:
    """The first ``size`` bytes of the decompressed content (fewer when it is shorter).
    Raises OSError, EOFError or lzma.LZMAError when it cannot be decompressed."""
    opener = OPENERS[kind][1]
    with opener(path, "rb") as fh:
        return fh.read(min(size, HEAD_READ))


def plain_name(path: Path, kind: str) -> str:
    """The file's name without its compression suffix (``rollout-….jsonl.gz`` ->
    ``rollout-….jsonl``): what parsers read ids and the session title from."""
    for suffix in OPENERS[kind][2]:
        if path.name.lower().endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return path.name


@contextmanager
def decompressed(path: Path, kind: str, folder: Path | None = None) -> Iterator[Path]:
    """A decompressed copy of ``path`` under its ``plain_name``, in a temporary folder
    (inside ``folder`` when given: beside the database, rather than in a /tmp that may be
    memory), removed on exit."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".transcripts-plain-", dir=folder) as tmp:
        plain = Path(tmp) / plain_name(path, kind)
        opener: Any = OPENERS[kind][1]
        with opener(path, "rb") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        yield plain
