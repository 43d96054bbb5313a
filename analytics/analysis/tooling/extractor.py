"""Per-session tooling analyser: launches from commands, server events and numbers from outputs.

One ``ToolingExtractor`` per session, fed every message in order. It remembers files written
earlier (so ``bash run.sh`` resolves to the launch inside), the last launch of each engine
(for ``changed_flags``) and the launch in force (for benchmark labels). Message prose is never
scanned: only tool calls (``ctx.calls``) and tool outputs (``ctx.results``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.command_output import command_output
from analytics.errors import AnalyticsError
from analytics.models import (
    Launch,
    Measurement,
    MessageContext,
    ServerEvent,
    ToolCall,
    trusted,
)

from .benchmarks import benchmark_numbers
from .launches import (
    LaunchHistory,
    ScriptMemory,
    flag_changes,
    parse_launches,
    remember_written_file,
)
from .logs import ContextEngine, scan_log
from .nvidia_smi import gpu_numbers

MAX_SCAN_CHARS = 10_000_000
"""Longer outputs: the first and last half of this budget are scanned."""
MAX_COUNTED_LINES = 200_000
"""Timestamped log lines remembered per session to skip re-read numbers (then forgotten)."""


@dataclass
class ToolingFacts:
    server_events: list[ServerEvent] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)


def sniff_engine(text: str) -> str | None:
    """The engine whose logs a text holds, from cheap literal markers (None when unclear)."""
    if "(APIServer pid=" in text or "(EngineCore" in text or "vLLM API server" in text:
        return "vllm"
    if "server_args=ServerArgs(" in text or " TP0] " in text or "sglang" in text:
        return "sglang"
    if "vllm" in text:
        return "vllm"
    return None


STATE_VERSION = 3
"""Bump when the shape of ``ToolingExtractor.state()`` changes."""


class ToolingStateError(AnalyticsError):
    """A saved extractor state that cannot be restored (wrong version or shape)."""


class ToolingExtractor:
    """Stateful over one session: call ``extract`` on each message in ``msg_idx`` order.

    For incremental ingests, persist ``state()`` after the last message and continue with
    ``ToolingExtractor.from_state(saved)``: scripts written earlier still resolve and
    ``changed_flags`` still compares against the previous launch of the same server.
    """

    def __init__(self) -> None:
        self.scripts = ScriptMemory()
        self.launches = LaunchHistory()
        """The last launch of each server, which the next one is compared with."""
        self.current: Launch | None = None
        self._counted_lines: set[str] = set()

    def state(self) -> dict[str, Any]:
        """Everything ``extract`` remembers between messages, as plain JSON data."""
        return {
            "version": STATE_VERSION,
            "scripts": self.scripts.state(),
            "last_by_server": {
                server: launch.model_dump(mode="json")
                for server, launch in self.launches.last.items()
            },
            "current": self.current.model_dump(mode="json") if self.current else None,
            "counted_lines": sorted(self._counted_lines),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ToolingExtractor:
        """An extractor that continues where the one that produced ``state`` stopped."""
        version = state.get("version") if isinstance(state, dict) else None
        if version != STATE_VERSION:
            raise ToolingStateError(
                f"tooling extractor state version {version!r} is not {STATE_VERSION}; "
                "re-run the tooling analysis of the session from its first message"
            )
        extractor = cls()
        try:
            extractor.scripts = ScriptMemory.from_state(state.get("scripts") or [])
            extractor.launches.last = {
                server: Launch.model_validate(data)
                for server, data in (state.get("last_by_server") or {}).items()
            }
            current = state.get("current")
            launch = Launch.model_validate(current) if current is not None else None
            extractor._counted_lines = _counted_lines(state.get("counted_lines") or [])
        except (ValueError, TypeError, AttributeError) as exc:  # ValidationError is a ValueError
            raise ToolingStateError(f"tooling extractor state is malformed: {exc}") from exc
        if launch is not None:
            # keep the identity the live extractor had: current is the last launch of its server
            same = next((v for v in extractor.launches.last.values() if v == launch), None)
            extractor.current = same if same == launch else launch
        return extractor

    def extract(self, ctx: MessageContext) -> ToolingFacts:
        facts = ToolingFacts()
        for call in ctx.calls:
            facts.launches.extend(self._launches(ctx, call))
        for call in ctx.results:
            if call.output:
                self._scan_output(ctx, call, facts)
        return facts

    # ------------------------------------------------------------------ calls

    def _launches(self, ctx: MessageContext, call: ToolCall) -> list[Launch]:
        remember_written_file(self.scripts, call.tool, call.input)
        if not call.command:
            return []
        out: list[Launch] = []
        for spec in parse_launches(call.command, self.scripts):
            launch = spec.to_launch(ctx.message.session_id, ctx.message.msg_idx, call.call_id)
            before = self.launches.previous(launch)
            launch.changed_flags = None if before is None else flag_changes(before, launch)
            self.launches.add(launch)
            if launch.engine != "other":  # `systemctl restart nginx` is not the server in force
                self.current = launch
            out.append(launch)
        return out

    # ------------------------------------------------------------------ outputs

    def _scan_output(self, ctx: MessageContext, call: ToolCall, facts: ToolingFacts) -> None:
        text = command_output(call.output).text  # (a header's lines are no log, table or rows)
        if len(text) > MAX_SCAN_CHARS:
            half = MAX_SCAN_CHARS // 2
            text = text[:half] + "\n" + text[-half:]
        session_id, msg_idx = ctx.message.session_id, ctx.message.msg_idx
        engine: ContextEngine = (self.current.engine if self.current else None) or (
            lambda: sniff_engine(text) or "unknown"
        )
        if len(self._counted_lines) > MAX_COUNTED_LINES:
            self._counted_lines.clear()
        scan = scan_log(text, engine, self._counted_lines)
        for ev in scan.events:
            facts.server_events.append(
                _server_event(session_id, msg_idx, ev.engine, ev.event, ev.detail, ev.log_ts)
            )
        out = facts.measurements
        for num in scan.numbers:
            out.append(
                measurement(
                    session_id, msg_idx, num.metric, num.value, num.unit, num.label, num.source
                )
            )
        launch_idx = self.current.msg_idx if self.current else None
        holds = scan.reports.__contains__ if scan.reports is not None else None
        for b in benchmark_numbers(text, call.command, launch_idx, holds):
            out.append(
                measurement(session_id, msg_idx, b.metric, b.value, b.unit, b.label, b.source)
            )
        for g in gpu_numbers(text, call.command, holds):
            out.append(
                measurement(session_id, msg_idx, g.metric, g.value, g.unit, g.label, "nvidia_smi")
            )


_EVENT_FIELDS = set(ServerEvent.model_fields)
_MEASUREMENT_FIELDS = set(Measurement.model_fields)
"""The fields-sets of the records an output can hold thousands of (see ``models.trusted``)."""


def _server_event(
    session_id: str, msg_idx: int, engine: str, event: str, detail: str | None, log_ts: str | None
) -> ServerEvent:
    return trusted(ServerEvent, {
        "session_id": session_id, "msg_idx": msg_idx, "engine": engine, "event": event,
        "detail": detail, "log_ts": log_ts,
    }, _EVENT_FIELDS)


def measurement(
    session_id: str,
    msg_idx: int,
    metric: str,
    value: float,
    unit: str | None,
    label: str | None,
    source: str,
) -> Measurement:
    """A measurement built as a trusted record (no validation: ``value`` is always a float and
    the rest are plain strings at every call site); the tooling analyser and the numbers
    stated in prose both build theirs with it."""
    return trusted(Measurement, {
        "session_id": session_id, "msg_idx": msg_idx, "metric": metric, "value": value,
        "unit": unit, "label": label, "source": source,
    }, _MEASUREMENT_FIELDS)


def _counted_lines(rows: object) -> set[str]:
    """The log lines whose numbers a session counted already (``scan_log``'s ``counted``):
    kept across an incremental ingest, a poll re-reading them later adds them not again."""
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        raise ValueError("counted_lines must be a list of log lines")
    return set(rows)
