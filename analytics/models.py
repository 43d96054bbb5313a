"""Pydantic records: what parsers yield and what the store writes.

Parsers are pure generators of these records; they know nothing of DuckDB.
Field docstrings double as the column documentation of the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from analytics.formats import FORMATS as FORMATS

SCHEMA_VERSION = 1

Role = Literal["user", "assistant", "system", "tool"]
ToolStatus = Literal["completed", "error", "aborted", "running"]


R = TypeVar("R", bound=BaseModel)
_new = object.__new__
_set = object.__setattr__
_SLOTS = BaseModel.__dict__
_set_fields_set = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


def trusted(cls: type[R], values: dict[str, Any], fields: set[str]) -> R:
    """``cls(**values)`` without validation, for values already of the declared types that
    name every field in declaration order: the same record (``__dict__``, fields set, no
    extras or private attributes) at a third of the cost, for the records made by the
    hundred thousand (parsed lines, rows read back, numbers and events found in outputs).

    ``fields``: the names of every field, as the fields-set, shared by the records of a
    class (pydantic only ever adds a name to it, present already, or copies it; a set per
    record costs a quarter of the construction time and 700 bytes). The slots are set
    through their descriptors, looked up once, not by name for each record."""
    record = _new(cls)
    _set(record, "__dict__", values)
    _set_fields_set(record, fields)
    _set_extra(record, None)
    _set_private(record, None)
    return record


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Session(_Record):
    """One conversation. Parsers may yield the same session more than once; later
    non-null fields win. Counts and first/last timestamps are derived by the store."""

    session_id: str
    """Stable id: ``<format>:<native id>``; the same on every run and machine."""
    source_format: str
    """One of FORMATS."""
    native_id: str
    """The agent's own id for the session (Claude Code sessionId, opencode ses_…, Codex uuid, file stem)."""
    source_path: str
    """The file (or opencode storage folder / database) it was read from."""
    title: str | None = None
    agent: str | None = None
    """Agent name and version, e.g. ``claude-code 2.0.42``, ``opencode 1.14.46``, ``codex_cli_rs 0.144.1``."""
    model: str | None = None
    """The first model seen in the session."""
    cwd: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    parent_session_id: str | None = None
    """For subagent / child sessions: the session that spawned them."""


class Message(_Record):
    """One native record that carries a message, a tool call or a tool result."""

    session_id: str
    msg_idx: int
    """0-based order within the session."""
    source_id: str
    """Native id: Claude Code line uuid; opencode message id; Codex ``L<line>``; transcript_text the msg number."""
    parent_source_id: str | None = None
    role: Role
    """user | assistant | system | tool (tool results, even where the native role is 'user')."""
    ts: datetime | None = None
    text: str = ""
    """Prose of the record (text blocks; for tool-result records, the output)."""
    is_sidechain: bool = False
    is_compaction_summary: bool = False
    error: str | None = None
    """Error attached to the record (opencode message error name: message; Codex turn_aborted …)."""
    native_type: str | None = None
    """The native record type (``assistant``, ``response_item/function_call`` …)."""
    model: str | None = None
    location: str | None = None
    """Where in the source: ``line 12`` or a storage path."""

    @property
    def n_chars(self) -> int:
        return len(self.text)


class ToolCall(_Record):
    """A tool invocation joined with its result (when the result has been seen)."""

    session_id: str
    msg_idx: int
    """The message carrying the call."""
    call_id: str
    tool: str | None = None
    """Tool name as the agent named it (Bash, bash, exec_command, shell …)."""
    command: str | None = None
    """The shell command for shell tools."""
    input: str | None = None
    """The call's input as JSON text."""
    output: str | None = None
    status: ToolStatus = "running"
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    result_msg_idx: int | None = None
    """The message carrying the result (same as msg_idx when they share a record)."""

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.ended_at:
            return (self.ended_at - self.started_at).total_seconds()
        return None


class ToolResult(_Record):
    """A result whose call was emitted earlier (e.g. in a previous incremental ingest)."""

    session_id: str
    call_id: str
    output: str | None = None
    """None: the output stored with the call stays (a late exit code, say)."""
    status: ToolStatus = "completed"
    exit_code: int | None = None
    ended_at: datetime | None = None
    result_msg_idx: int | None = None
    settles: bool = False
    """Only says how a call stored as still running ended (its status and exit code: a
    process seen to exit later). No tag of the call's message reads those of such a call,
    so an analysis that read it needs only that message analysed again, not the session."""


class RawRecord(_Record):
    """A record that carries no message (snapshots, token counts, unknown types): kept raw."""

    session_id: str | None = None
    location: str
    record_type: str
    known: bool = True
    """False for record types the parser does not know (counted in ingest_files.unknown_types)."""
    ts: datetime | None = None
    raw: str


class Quarantined(_Record):
    """A record that could not be parsed, with why."""

    location: str
    error: str
    raw: str


ParsedItem = Session | Message | ToolCall | ToolResult | RawRecord | Quarantined


@dataclass(slots=True)
class Ledger:
    """Per-file accounting kept by a parser while it runs: read = stored + quarantined.
    (A plain dataclass, not a record: it is updated twice per line read.)"""

    format_version: str | None = None
    records_read: int = 0
    records_stored: int = 0
    records_quarantined: int = 0
    unknown_types: dict[str, int] = field(default_factory=dict)
    end_offset: int = 0
    """Bytes consumed (complete records only): where an incremental ingest resumes."""
    end_line: int = 0
    """Lines consumed, for the same purpose."""
    state: dict[str, object] = field(default_factory=dict)
    """Parser-private state needed to resume (e.g. pending tool calls, counters)."""

    def stored(self) -> None:
        self.records_read += 1
        self.records_stored += 1

    def quarantined(self) -> None:
        self.records_read += 1
        self.records_quarantined += 1

    def unknown(self, record_type: str) -> None:
        self.unknown_types[record_type] = self.unknown_types.get(record_type, 0) + 1


class Resume(BaseModel):
    """Where to resume an append-only file, and the state left by the previous run."""

    offset: int = 0
    line: int = 0
    next_msg_idx: dict[str, int] = Field(default_factory=dict)
    state: dict[str, object] = Field(default_factory=dict)


# ---------------------------------------------------------------------------
# Analyser outputs (written by analysers, stored as-is)
# ---------------------------------------------------------------------------

TagName = Literal[
    "user_checkin",
    "user_abort",
    "polling_loop",
    "diagnosis",
    "readiness_claim",
    "smoke_test",
    "benchmark",
    "error",
    "launch",
]
TAGS: tuple[str, ...] = (
    "user_checkin",
    "user_abort",
    "polling_loop",
    "diagnosis",
    "readiness_claim",
    "smoke_test",
    "benchmark",
    "error",
    "launch",
)


class MessageContext(BaseModel):
    """What an analyser sees of one message: the record, the tool calls it makes,
    and the tool calls whose results it carries (the same call may be in both)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    message: Message
    calls: list[ToolCall] = Field(default_factory=list)
    results: list[ToolCall] = Field(default_factory=list)


class Tag(_Record):
    session_id: str
    msg_idx: int
    tag: str
    """One of TAGS, or a custom tag from a ``--rules`` file."""
    score: float = 1.0
    source: Literal["rules", "model", "human"] = "rules"
    evidence: str | None = None
    """The text span that triggered the tag."""
    start_char: int | None = None
    end_char: int | None = None
    """Offsets of the evidence inside the text it came from (the message's text or error, or
    its tool call's command or output): ``evidence == text[start_char:end_char]``. None when
    the evidence quotes no text (a call's status or exit code, a tool and its input)."""
    tagger_version: str = ""


class PollingLoop(_Record):
    session_id: str
    msg_idx: int
    call_id: str | None = None
    interval_s: float | None = None
    max_iterations: int | None = None
    max_wait_s: float | None = None
    target: str | None = None
    success_pattern: str | None = None
    failure_pattern: str | None = None
    outcome: Literal["ready", "failed", "aborted", "timeout", "unknown"] = "unknown"
    waited_s: float | None = None


class Launch(_Record):
    session_id: str
    msg_idx: int
    call_id: str | None = None
    engine: str
    """sglang | vllm | docker | other"""
    model: str | None = None
    host: str | None = None
    flags: dict[str, object] = Field(default_factory=dict)
    """Canonical flag name (``--tp-size``) -> typed value; env vars as ``env:NAME``."""
    changed_flags: dict[str, object] | None = None
    """Flag -> [before, after] relative to the previous launch of the same engine."""
    env: dict[str, str] = Field(default_factory=dict)
    unknown_flags: dict[str, str | None] = Field(default_factory=dict)
    """Unrecognised flag -> suggested canonical name (or None)."""


class ServerEvent(_Record):
    session_id: str
    msg_idx: int
    engine: str
    event: str
    detail: str | None = None
    log_ts: str | None = None


class Measurement(_Record):
    session_id: str
    msg_idx: int
    metric: str
    value: float
    unit: str | None = None
    label: str | None = None
    """Conditions that make it comparable, e.g. ``concurrency=16`` or ``bs=1``."""
    source: str | None = None
    """Where it was read: a tool's output (``bench_serving``, ``decode_log``, ``server_log``,
    ``nvidia_smi`` …) or prose (``PROSE_SOURCES``)."""


STATED_SOURCE = "stated"
"""``Measurement.source`` of a figure someone wrote in prose ("we're at ~800 tok/s")."""
PROFILE_SOURCE = "profile"
"""``Measurement.source`` of a share of time written in prose ("63% of decode time is …")."""
PROSE_SOURCES = (STATED_SOURCE, PROFILE_SOURCE)
"""Sources of measurements read from what people wrote, not measured by a tool."""
BENCH_SERVING_SOURCE, BENCH_ONE_BATCH_SOURCE, VLLM_BENCH_SOURCE = (
    "bench_serving", "bench_one_batch", "vllm_bench"
)
"""``Measurement.source`` of the numbers a serving benchmark's result block printed (SGLang's
``bench_serving``, ``vllm bench serve``), of SGLang's ``bench_one_batch`` and of ``vllm bench
throughput|latency`` (``tooling.benchmarks``)."""
BENCHMARK_SOURCES = (BENCH_SERVING_SOURCE, BENCH_ONE_BATCH_SOURCE, VLLM_BENCH_SOURCE)
"""Sources of measurements a benchmark's own result printed."""


class Campaign(_Record):
    campaign_id: str
    session_id: str
    goal_text: str | None = None
    target_metric: str | None = None
    target_value: float | None = None
    unit: str | None = None
    baseline_value: float | None = None
    best_value: float | None = None
    start_msg_idx: int | None = None
    end_msg_idx: int | None = None
    status: str | None = None
    """met | not_met | abandoned | in_progress"""


class Lever(_Record):
    campaign_id: str
    session_id: str
    seq: int
    name: str
    description: str | None = None
    start_msg_idx: int | None = None
    end_msg_idx: int | None = None
    metric: str | None = None
    value_before: float | None = None
    value_after: float | None = None
    delta_pct: float | None = None
    outcome: Literal["improved", "no_effect", "worse", "failed", "not_applicable", "pending"]
    evidence_msg_idx: int | None = None


class ReadinessClaim(_Record):
    session_id: str
    msg_idx: int
    claim_text: str
    subject: str | None = None
    verdict: Literal["premature", "supported", "unverified"]
    reason: str
    evidence_msg_idx: list[int] = Field(default_factory=list)
    contradicted_by_msg_idx: int | None = None
