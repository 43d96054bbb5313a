"""The transcript formats, by name.

A module of its own so that naming a format (validating ``--format``, listing the
choices in an error) does not import the pydantic records of ``analytics.models``: a
re-ingest of unchanged files never needs them.
"""

import re

FORMATS = ("opencode", "claude_code", "codex", "transcript_text")

PARSER_VERSIONS = {"opencode": 1, "claude_code": 2, "codex": 2, "transcript_text": 1}
"""The version of each format's parser (its module's ``PARSER_VERSION``). Bump a format's
number when the rows its files give change (a record read otherwise, a field filled that
was not): ``ingest_files.parser_version`` keeps the number a file was read with, and an
ingest reads an unchanged file again whole when its stored number differs (NULL: stored
before parsers had versions). Here rather than in the parser modules: a re-ingest of
unchanged files compares them without importing any parser."""

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

CODEX_MESSAGE_COPIES = ("event_msg/user_message", "event_msg/agent_message")
"""``messages.native_type`` of the Codex events that repeat a ``response_item`` message word for
word (newer builds write each prompt and reply twice); stored as ``system`` rows by the parser,
and no search document of their own when the message they repeat is beside them."""

CLAUDE_BACKGROUND_PREFIX = "Command running in background with ID: "
"""What Claude Code's ``Bash`` returns for a command run with ``run_in_background`` (FORMATS.md),
before the id ``BashOutput``/``KillShell`` name the job by (``bash_id``, ``shell_id``)."""
CLAUDE_BACKGROUND_STARTED = "^" + re.escape(CLAUDE_BACKGROUND_PREFIX) + r"(?P<job>\S+)"

CODEX_SESSION_RUNNING = "Process running with session ID "
"""The line of a unified exec header (``CODEX_EXEC_HEADER``) whose process runs on, before the
id of its exec session (``write_stdin`` names it as ``session_id``)."""
CODEX_EXEC_HEADER = (
    r"(?:Chunk ID: [^\n]*\n)?(?:Exit code: (?P<exit_code>-?\d+)\n)?"
    r"Wall time: (?P<wall_time>\d+(?:\.\d+)?)?[^\n]*\n"
    r"(?:Process exited with code (?P<exited>-?\d+)\n)?"
    rf"(?:{CODEX_SESSION_RUNNING}(?P<session_id>[^\n]+)\n)?"
    r"(?:[^\n]*\n){0,3}?Output:(?:\n|\Z)"
)
"""The header Codex writes before a command's output (FORMATS.md), in its two shapes: unified
exec (``exec_command``, ``write_stdin``) writes ``Chunk ID: x`` (when it has one), ``Wall time:
0.0500 seconds``, ``Process exited with code N`` or ``Process running with session ID N``,
``Original token count: N``; the freeform shell tool ``Exit code: N``, ``Wall time: 1.2
seconds``, ``Total output lines: N``; both then ``Output:`` and what the command printed. The
stored output keeps it; ``analytics.command_output`` reads it, as facts, for every analyser."""


FILE_WRITING_TOOLS = frozenset({
    "write", "edit", "multiedit", "notebookedit", "patch", "apply_patch",
    "str_replace_based_edit_tool", "str_replace_editor",
})
"""The file tools (lower-cased names, of ``FILE_TOOLS``) that write or change a file."""

FILE_TOOLS = FILE_WRITING_TOOLS | frozenset({
    "read", "notebookread", "glob", "grep", "ls", "list", "view", "todowrite", "todoread",
})
"""The agents' tools (lower-cased names) that read, write or find files: their input names or
holds a file (a launch script, a benchmark script), it does not run it; their output is the
file's text or a list of files, not what a program printed."""


SUBAGENT_TOOLS = frozenset({"task", "agent"})
"""The agents' tools (lower-cased names) that run a subagent (Claude Code ``Task``/``Agent``,
opencode ``task``): the subagent's records are a session of their own whose
``parent_session_id`` is the caller's, and the call lasts while the subagent works."""
