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
