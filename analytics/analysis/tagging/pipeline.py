"""The Tagger: message-level tags for a batch of consecutive messages of one session.

Prose (user and assistant text, context wrappers masked, truncated) goes
through a spaCy pipeline; tool calls and markers are matched with regex and
shell parsing, never tokenised.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc

from analytics.analysis.tagging.components import (
    PATTERNS_DIR,
    SPANS_KEY,
    RuleError,
    build_nlp,
    read_jsonl,
    validate_prose_rule,
)
from analytics.analysis.tagging.polling import background_rechecks, loop_shape, shell_tool
from analytics.analysis.tagging.tools import (
    Hit,
    ToolRules,
    error_hits,
    load_extra_regex_rules,
    message_error,
)
from analytics.models import MessageContext, Tag

RULES_VERSION = "1.0"
MAX_PROSE_CHARS = 4000
"""Prose longer than this is cut before tokenising (tags are about what a message opens with)."""
PIPE_BATCH = 64
PROSE_ROLES = ("user", "assistant")


def _patterns_hash(extra: Path | None) -> str:
    h = hashlib.sha256()
    for p in sorted(PATTERNS_DIR.glob("*.jsonl")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    if extra is not None:
        h.update(extra.read_bytes())
    return h.hexdigest()[:8]


class Tagger:
    """Rules-based tagger. ``Tagger(extra_rules=path)`` adds a custom JSONL taxonomy."""

    def __init__(self, extra_rules: Path | None = None) -> None:
        self.extra_rules = Path(extra_rules) if extra_rules is not None else None
        extra_regex: list[dict[str, Any]] = []
        if self.extra_rules is not None:
            if not self.extra_rules.is_file():
                raise RuleError(f"{self.extra_rules}: no such rules file")
            for row in read_jsonl(self.extra_rules):
                if "pattern" in row:
                    validate_prose_rule(row)
                elif "regex" not in row:
                    raise RuleError(
                        f"{self.extra_rules}:{row['_where']}: a rule needs 'pattern' "
                        "(prose, spaCy token pattern or phrase) or 'regex' (commands/outputs)"
                    )
            extra_regex = load_extra_regex_rules(self.extra_rules)
        self.version: str = f"rules-{RULES_VERSION}+patterns-{_patterns_hash(self.extra_rules)}"
        self.tools = ToolRules(extra_regex)
        self._context = [
            re.compile(r["regex"], re.S | re.M) for r in read_jsonl(PATTERNS_DIR / "context.jsonl")
        ]
        self._nlp: Language | None = None

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            self._nlp = build_nlp([self.extra_rules] if self.extra_rules else [])
        return self._nlp

    # --- public ------------------------------------------------------------
    def tag(self, batch: list[MessageContext]) -> list[Tag]:
        """Tags for ``batch`` (consecutive messages of one session, msg_idx order)."""
        found: dict[tuple[int, str], Tag] = {}

        def add(ctx: MessageContext, msg_idx: int, hit: Hit) -> None:
            key = (msg_idx, hit.label)
            if key not in found:
                found[key] = Tag(
                    session_id=ctx.message.session_id,
                    msg_idx=msg_idx,
                    tag=hit.label,
                    score=1.0,
                    source="rules",
                    evidence=hit.evidence,
                    start_char=hit.start,
                    end_char=hit.end,
                    tagger_version=self.version,
                )

        for ctx in batch:
            for idx, hit in self._structural(ctx):
                add(ctx, idx, hit)
        by_idx = {ctx.message.msg_idx: ctx for ctx in batch}
        for idx, call in background_rechecks(batch).items():
            evidence = f"{call.tool} {call.input or ''}"[:200]
            add(by_idx[idx], idx, Hit("polling_loop", "polling:background", evidence, 0, 0))
        for ctx, doc in self._docs(batch):
            for span in doc.spans.get(SPANS_KEY, []):
                hit = Hit(span.label_, span.id_, span.text, span.start_char, span.end_char)
                add(ctx, ctx.message.msg_idx, hit)
        return sorted(found.values(), key=lambda t: (t.msg_idx, t.tag))

    # --- structure: markers, tool calls, results ---------------------------
    def _structural(self, ctx: MessageContext) -> Iterator[tuple[int, Hit]]:
        msg = ctx.message
        idx = msg.msg_idx
        abort = self.tools.abort("error", msg.error)
        if abort is None and msg.role != "assistant":
            abort = self.tools.abort("text", msg.text)
        for call in ctx.results:
            if abort is not None:
                break
            if call.status == "aborted":
                abort = Hit("user_abort", "abort:status", "status aborted", 0, 0)
                found = self.tools.abort("output", call.output)
                abort = found or abort
            else:
                abort = self.tools.abort("output", call.output)
        if abort is not None:
            yield idx, abort
        err = message_error(self.tools, msg)
        if err is not None:
            yield idx, err
        for call in ctx.calls:
            if shell_tool(call):
                shape = loop_shape(call.command or "")
                if shape is not None:
                    yield idx, Hit("polling_loop", f"polling:{shape.kind}", (call.command or "")[:200], 0, min(len(call.command or ""), 200))
                for hit in self.tools.command_hits(call):
                    yield idx, hit
            elif call.tool and call.input:
                for hit in self.tools.command_hits(_as_command(call)):
                    if hit.label in ("smoke_test", "launch", "benchmark"):
                        yield idx, hit
        for call in ctx.results:
            out_hits = self.tools.text_hits("output", call.output or "")
            for hit in error_hits(self.tools, call, abort is not None, out_hits):
                yield idx, hit
            for hit in out_hits:
                if hit.label != "error":
                    yield idx, hit
        if msg.role == "tool" and not ctx.results:
            for hit in self.tools.text_hits("output", msg.text):
                if abort is None or hit.label != "error":
                    yield idx, hit
        for hit in self.tools.text_hits("text", msg.text, msg.role):
            yield idx, hit

    # --- prose -------------------------------------------------------------
    def prose(self, ctx: MessageContext) -> str | None:
        """The text worth tokenising, context wrappers blanked out (offsets kept); None to skip."""
        msg = ctx.message
        if msg.role not in PROSE_ROLES or not msg.text.strip():
            return None
        if msg.role == "user" and (msg.is_compaction_summary or msg.is_sidechain):
            return None
        text = msg.text[:MAX_PROSE_CHARS]
        if msg.role == "user":
            for rx in self._context:
                text = rx.sub(lambda m: " " * len(m.group(0)), text)
            if not text.strip():
                return None
        return text

    def _docs(self, batch: list[MessageContext]) -> Iterator[tuple[MessageContext, Doc]]:
        todo: list[tuple[MessageContext, str]] = []
        for ctx in batch:
            text = self.prose(ctx)
            if text is not None:
                todo.append((ctx, text))
        if not todo:
            return
        nlp = self.nlp

        def docs() -> Iterator[Doc]:
            for ctx, text in todo:
                doc = nlp.make_doc(text)
                doc.user_data["role"] = ctx.message.role
                yield doc

        for (ctx, _), doc in zip(todo, nlp.pipe(docs(), batch_size=PIPE_BATCH), strict=True):
            yield ctx, doc


def _as_command(call: Any) -> Any:
    """Non-shell tools (e.g. a python/REPL tool) checked through their input text."""
    from analytics.models import ToolCall

    return ToolCall(
        session_id=call.session_id, msg_idx=call.msg_idx, call_id=call.call_id,
        tool=call.tool, command=call.input, input=None,
    )
