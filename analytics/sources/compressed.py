"""Transcripts kept compressed (``rollout.jsonl.gz``, ``session.jsonl.xz``, ``notes.txt.bz2``):
read through a decompressed copy, by content (the magic number), not by name.

Detection sniffs the first bytes of the decompressed stream; the ingest decompresses the
file into a temporary folder, parses the copy, and stores everything under the compressed
file's own path. A compressed file is never appended to: when it changes it is read again
whole. Python's standard library reads gzip, bzip2 and xz; a zstd file is named as such in
its error, with the command that decompresses it.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

OPENERS: dict[str, tuple[bytes, Callable[..., Any], tuple[str, ...], str]] = {
    "gzip": (b"\x1f\x8b", gzip.open, (".gz", ".gzip", ".z"), "gzip -dc"),
    "bzip2": (b"BZh", bz2.open, (".bz2",), "bzip2 -dc"),
    "xz": (b"\xfd7zXZ\x00", lzma.open, (".xz", ".lzma"), "xz -dc"),
}
"""compression -> (magic number, opener, file name suffixes, the command that writes what it
holds to standard output)."""
NOT_READ = {"zstd": (b"\x28\xb5\x2f\xfd", "zstd -dc")}
"""Compressions Python's standard library does not read: (magic number, the same command)."""
DECOMPRESS_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)
"""What reading a truncated or corrupt archive raises (``gzip.BadGzipFile`` is an OSError)."""


def not_read(head: bytes, name: str) -> str | None:
    """What to say of a file compressed in a way not read here, or None."""
    for kind, (magic, command) in NOT_READ.items():
        if head.startswith(magic):
            return f"a {kind}-compressed file: decompress it first (`{command} {name} > copy`)"
    return None


def unreadable(kind: str, name: str, exc: BaseException) -> str:
    """The error of an archive that cannot be decompressed, with what to do about it."""
    return (
        f"a {kind}-compressed file that cannot be decompressed ({exc}); it is truncated or "
        f"corrupt: `{OPENERS[kind][3]} {name} > copy` writes out what is readable, ingest that"
    )
HEAD_READ = 1 << 20
"""Decompressed bytes read for detection at most."""


def compression(head: bytes) -> str | None:
    """The compression ``head`` (a file's first bytes) starts with, of those read here."""
    return next((name for name, (magic, *_) in OPENERS.items() if head.startswith(magic)), None)


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
