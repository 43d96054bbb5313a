"""The transcript formats, by name.

A module of its own so that naming a format (validating ``--format``, listing the
choices in an error) does not import the pydantic records of ``analytics.models``: a
re-ingest of unchanged files never needs them.
"""

FORMATS = ("opencode", "claude_code", "codex", "transcript_text")

UTF8_BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark (editors and Windows tools write one at the start of a file): every
reader skips it, and detection looks past it."""

UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
"""UTF-16 byte order marks and their codecs. Windows writes UTF-16 LE with a BOM (PowerShell 5's
``>`` redirection, Notepad's "Unicode"); some tools write BE. Readers go through
``analytics.sources.encoding``, which hands them such a file as UTF-8."""

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (opencode's ``opencode.db``): the opencode
reader recognises its database by them, and the store refuses such a file as ``--db``."""

CODEX_EXEC_HEADER = r"Chunk ID: [^\n]*\n(?:[^\n]*\n){0,6}?Output:\n"
"""The header Codex writes before a command's output (chunk id, wall time, exit code, token
count, then ``Output:``; FORMATS.md): the stored output keeps it, readers of what the command
printed skip it."""
