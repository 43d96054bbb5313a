"""The transcript formats, by name.

A module of its own so that naming a format (validating ``--format``, listing the
choices in an error) does not import the pydantic records of ``analytics.models``: a
re-ingest of unchanged files never needs them.
"""

FORMATS = ("opencode", "claude_code", "codex", "transcript_text")

UTF8_BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark (editors and Windows tools write one at the start of a file): every
reader skips it, and detection looks past it."""
