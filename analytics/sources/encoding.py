"""Text encodings of source files: UTF-8 (with or without a byte order mark) and UTF-16
with a byte order mark, which every reader sees as UTF-8.

A UTF-16 file (PowerShell 5's ``opencode export ID > session.json``, Notepad's "Unicode")
is transcoded in memory; a UTF-8 file is read as it is, with one small peek at its start,
so the hot path stays a plain binary read. Offsets in a transcoded file count UTF-8 bytes,
not the file's: such a file is never resumed from an offset (see ``transcoded``).

UTF-16 without a byte order mark is not supported: its endianness is a guess, and it is
told apart from UTF-8 only by its NUL bytes. It is a :class:`SourceError` saying so.
"""

from __future__ import annotations

import codecs
import io
from pathlib import Path
from typing import BinaryIO, TextIO

from analytics.errors import SourceError
from analytics.formats import UTF8_BOM, UTF16_BOMS

PEEK_BYTES = 64
"""How much of a file's start decides its encoding."""

NO_BOM = (
    "UTF-16 text without a byte order mark is not supported; "
    "save it as UTF-8 (or as UTF-16 with a byte order mark)"
)


def path_text(path: str | Path) -> str:
    """``path`` (or a name taken from it) as valid UTF-8 text, to store and compare: a name
    whose bytes are not UTF-8 (Latin-1 names from an old archive) reaches Python with
    surrogate escapes, which DuckDB cannot store. Those bytes are written ``\\xNN``, so the
    same file always gets the same text; other names are returned as they are."""
    text = str(path)
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def utf16_codec(start: bytes) -> str | None:
    """``utf-16-le``/``utf-16-be`` when ``start`` opens with that byte order mark, else None.

    ``FF FE 00 00`` is UTF-32 LE's mark (text never starts with U+0000): not UTF-16."""
    if start.startswith(b"\xff\xfe\x00\x00"):
        return None
    return UTF16_BOMS.get(start[:2])


def utf16_without_bom(start: bytes) -> bool:
    """True when ``start`` reads as UTF-16 with no byte order mark: every other byte NUL and
    the rest not (transcripts start with ASCII). UTF-8 text and JSON hold no NUL bytes."""
    start = start[:PEEK_BYTES]
    if len(start) < 4 or utf16_codec(start) is not None:
        return False
    even, odd = start[0::2], start[1::2]
    return (not any(odd) and all(even)) or (not any(even) and all(odd))


def codec_of(path: Path, start: bytes) -> str | None:
    """The UTF-16 codec of a file whose first bytes are ``start`` (None: UTF-8);
    :class:`SourceError` for UTF-16 without a byte order mark."""
    codec = utf16_codec(start)
    if codec is None and utf16_without_bom(start):
        raise SourceError(str(path), NO_BOM)
    return codec


def transcoded(path: Path) -> bool:
    """True when readers see ``path`` transcoded (UTF-16 with a byte order mark), so offsets
    they report are not offsets in the file."""
    with path.open("rb") as fh:
        return utf16_codec(fh.read(4)) is not None


def to_utf8(data: bytes, codec: str) -> bytes:
    """``data`` (after its byte order mark) as UTF-8. A lone last byte (an odd byte count: a
    truncated file) or an unpaired surrogate becomes U+FFFD, as invalid UTF-8 does for the
    text reader; the JSON readers then quarantine the record that holds it."""
    return data.decode(codec, errors="replace").encode("utf-8")


def utf8_bytes(path: Path, data: bytes) -> bytes:
    """A whole file's ``data`` as UTF-8 without a byte order mark."""
    codec = codec_of(path, data[:PEEK_BYTES])
    if codec is not None:
        return to_utf8(data[2:], codec)
    return data.removeprefix(UTF8_BOM)


def utf8_head(head: bytes) -> bytes:
    """The first bytes of a file as UTF-8 without a byte order mark (for detection). A
    UTF-16 head cut inside a character drops the cut character, not a U+FFFD in its place."""
    codec = utf16_codec(head)
    if codec is None:
        return head.removeprefix(UTF8_BOM)
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    return decoder.decode(head[2:], final=False).encode("utf-8")


def open_utf8(path: Path) -> BinaryIO:
    """``path`` opened for reading as UTF-8 bytes: the file itself (at its start, a UTF-8
    byte order mark left for the caller to skip), or a UTF-16 file's text transcoded."""
    fh = path.open("rb")
    try:
        codec = codec_of(path, fh.read(PEEK_BYTES))
        if codec is None:
            fh.seek(0)
            return fh
        fh.seek(2)
        data = fh.read()
    except BaseException:
        fh.close()
        raise
    fh.close()
    return io.BytesIO(to_utf8(data, codec))


def open_text(path: Path) -> TextIO:
    """``path`` opened as text (universal newlines off), streamed: UTF-8 with an optional
    byte order mark or UTF-16 with one; undecodable bytes become U+FFFD."""
    with path.open("rb") as fh:
        codec = codec_of(path, fh.read(PEEK_BYTES))
    encoding = "utf-16" if codec is not None else "utf-8-sig"  # ("utf-16" reads the mark)
    return path.open("r", encoding=encoding, errors="replace", newline="")
