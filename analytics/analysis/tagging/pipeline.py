"""The Tagger: message-level tags for a batch of consecutive messages of one session.

Prose (user and assistant text, context wrappers masked, truncated) goes
through a spaCy pipeline; tool calls and markers are matched with regex and
shell parsing, never tokenised.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from spacy.language import Language
from spacy.tokens import Doc

from analytics.analysis.literals import Gated, lowered
from analytics.analysis.tagging.components import (
    PATTERNS_DIR,
    SPANS_KEY,
    RuleError,
    build_nlp,
    lexicon,
    quoted_regions,
    read_jsonl,
    validate_prose_rule,
)
from analytics.analysis.tagging.diagnosis_model import MODEL_DIR, DiagnosisModel
from analytics.analysis.tagging.polling import (
    background_rechecks,
    file_tool,
    loop_shape,
    recheck_evidence,
    shell_tool,
)
from analytics.analysis.tagging.tools import (
    Hit,
    ToolRules,
    error_hits,
    exit_code_hit,
    load_extra_regex_rules,
    message_error,
    printed_hits,
)
from analytics.analysis.tagging.triggers import WINDOW_CHARS, Trigger, compile_triggers, windows
from analytics.command_output import command_output
from analytics.gcpause import no_cyclic_gc
from analytics.models import MessageContext, Tag, ToolCall, trusted

RULES_VERSION = "1.1"
"""1.1: a tag whose evidence quotes no text has no span (NULL offsets, not 0, 0); a span
ends where its (cut) evidence does."""
MAX_PROSE_CHARS = 4000
"""Prose longer than this is cut before tokenising (tags are about what a message opens with)."""
PIPE_BATCH = 64
PROSE_ROLES = ("user", "assistant")
SHORT_PROSE_CHARS = 2 * WINDOW_CHARS
"""Prose up to this long is tokenised whole when it has a trigger hit; longer prose in windows."""
WHOLE_MESSAGE_LABELS = frozenset({"user_checkin"})
"""Labels whose gate judges the whole message (the check-in gate looks at every word)."""
PIECE_CACHE_SIZE = 50_000
"""Distinct prose windows whose spans are remembered (per Tagger)."""
SHORT_CACHE_SIZE = 20_000
"""Distinct texts up to ``SHORT_PROSE_CHARS`` whose ``prose`` (user messages) and
``_regions`` are remembered (per Tagger): check-ins ("ok?", "status?") and other short
messages repeat many times in a session."""
_WORD = re.compile(r"\S+")
_Regions = list[tuple[int, int]]
"""Character ranges of a text (``quoted_regions``)."""
_PieceKey = tuple[str, str, tuple[tuple[int, int], ...], bool]
"""(role, window text, quoted regions inside it, failure context)"""
OPENER_CHARS = 200
"""How much of a message's start is read for a failure opener."""
_SENT_END = re.compile(r"[.!?:\n]")
DEFAULT_DIAGNOSIS_MODEL: Path | None = MODEL_DIR
"""The trained ``diagnosis`` classifier a Tagger uses unless told otherwise (None: rules only)."""
_DEFAULT = object()


def _patterns_hash(extra: Path | None) -> str:
    h = hashlib.sha256()
    for p in sorted(PATTERNS_DIR.glob("*.jsonl")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    if extra is not None:
        h.update(extra.read_bytes())
    return h.hexdigest()[:8]


_K = TypeVar("_K")
_V = TypeVar("_V")


def _remembered(cache: dict[_K, _V], key: _K, make: Callable[..., _V], *args: Any) -> _V:
    """``make(*args)``, remembered under ``key`` in ``cache``, which is emptied once it holds
    ``SHORT_CACHE_SIZE`` entries."""
    if key in cache:
        return cache[key]
    if len(cache) >= SHORT_CACHE_SIZE:
        cache.clear()
    value = cache[key] = make(*args)
    return value


class Tagger:
    """Rules-based tagger. ``Tagger(extra_rules=path)`` adds a custom JSONL taxonomy."""

    def __init__(self, extra_rules: Path | None = None, diagnosis_model: Any = _DEFAULT) -> None:
        """``diagnosis_model``: directory of the trained classifier (default
        ``DEFAULT_DIAGNOSIS_MODEL``), or None for rules only."""
        model_dir = DEFAULT_DIAGNOSIS_MODEL if diagnosis_model is _DEFAULT else diagnosis_model
        self.diagnosis = DiagnosisModel(Path(model_dir)) if model_dir is not None else None
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
        if self.diagnosis is not None:
            self.version += f"+diagnosis-{self.diagnosis.settings.version}"
        self.tools = ToolRules(extra_regex)
        self._context = [
            Gated.compile(r["regex"], re.S | re.M) for r in read_jsonl(PATTERNS_DIR / "context.jsonl")
        ]
        """Context wrappers, each with the literals one of which its matches contain: a user
        message without them (most) is not scanned by the regex (nothing to blank out)."""
        self._nlp: Language | None = None
        opener = sorted(lexicon()["failure_opener"], key=len, reverse=True)
        self._opener = re.compile(r"\b(?:" + "|".join(map(re.escape, opener)) + r")\b")
        self._piece_cache: dict[_PieceKey, list[tuple[str, str, str, int, int]]] = {}
        self._trigger_cache: dict[str, list[tuple[frozenset[str], list[Trigger] | None]]] = {}
        self._short_regions: dict[tuple[str, str], list[tuple[int, int]]] = {}
        """(role, text) -> ``_regions``, for texts up to ``SHORT_PROSE_CHARS``."""
        self._user_prose: dict[str, str | None] = {}
        """A user message's text -> its ``prose``, for texts up to ``SHORT_PROSE_CHARS``."""

    @cached_property
    def _checkin_max(self) -> int:
        """The check-in gate's word limit (asked for every user message: looked up once)."""
        return int(self.nlp.get_pipe("checkin_gate").max_tokens)  # type: ignore[attr-defined]

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            self._nlp = build_nlp([self.extra_rules] if self.extra_rules else [])
        return self._nlp

    # --- public ------------------------------------------------------------
    def warm_up(self) -> None:
        """Build now what the first ``tag`` call would build (the spaCy pipelines, the prose
        prefilters, the diagnosis model): before forking a worker, so it is built once."""
        for role in PROSE_ROLES:
            self._triggers(role)
        if self.diagnosis is not None:
            self.diagnosis.load(self.nlp.tokenizer)

    def tag(self, batch: list[MessageContext]) -> list[Tag]:
        """Tags for ``batch`` (consecutive messages of one session, msg_idx order)."""
        with no_cyclic_gc():  # many short-lived matches, spans and hits, no cycles
            return self._tag(batch)

    def _tag(self, batch: list[MessageContext]) -> list[Tag]:
        found: dict[tuple[int, str], Tag] = {}

        def add(ctx: MessageContext, msg_idx: int, hit: Hit) -> None:
            key = (msg_idx, hit.label)
            if key not in found:
                found[key] = _new_tag(
                    ctx.message.session_id, msg_idx, hit.label, 1.0, "rules", hit.evidence,
                    hit.start, hit.end, self.version,
                )

        self.tools.note_silent(
            [call.output for ctx in batch for call in ctx.results if call.output]
            + [c.message.text for c in batch if c.message.role == "tool" and not c.results and c.message.text],
            [ctx.message.text for ctx in batch if ctx.message.role != "assistant" and ctx.message.text],
        )
        for ctx in batch:
            for idx, hit in self._structural(ctx):
                add(ctx, idx, hit)
        rechecks = background_rechecks(batch)
        by_idx = {ctx.message.msg_idx: ctx for ctx in batch} if rechecks else {}
        for idx, call in rechecks.items():
            evidence = recheck_evidence(call)
            add(by_idx[idx], idx, Hit("polling_loop", "polling:background", evidence, None, None))
        errors = {idx for idx, label in found if label == "error"}
        texts = [self.prose(ctx) for ctx in batch]  # read by the rules and the classifier
        quoted: list[_Regions | None] = [None] * len(batch)  # found once, read by both
        for ctx, hit in self._prose_hits(batch, texts, errors, quoted):
            add(ctx, ctx.message.msg_idx, hit)
        for tag in self._model_tags(batch, texts, found, quoted):
            found[(tag.msg_idx, tag.tag)] = tag
        return sorted(found.values(), key=lambda t: (t.msg_idx, t.tag))

    def recheck_tag(self, session_id: str, msg_idx: int, call: ToolCall) -> Tag:
        """The ``polling_loop`` tag :meth:`tag` gives a re-check of a background job in a
        run of them (``polling.rechecks_of``) when the message has none otherwise."""
        return _new_tag(
            session_id, msg_idx, "polling_loop", 1.0, "rules", recheck_evidence(call),
            None, None, self.version,
        )

    # --- learned: diagnosis ------------------------------------------------
    def _model_tags(
        self,
        batch: list[MessageContext],
        texts: list[str | None],
        found: dict[tuple[int, str], Tag],
        quoted: list[_Regions | None],
    ) -> list[Tag]:
        """``diagnosis`` from the classifier for assistant messages the rules did not tag:
        score = calibrated probability of the best candidate sentence. ``texts``: the
        ``prose`` of each message of ``batch``; ``quoted``: their ``quoted_regions`` where
        ``_prose_hits`` found them (None elsewhere)."""
        if self.diagnosis is None:
            return []
        todo: list[tuple[MessageContext, str]] = []
        todo_quoted: list[_Regions | None] = []
        for ctx, text, q in zip(batch, texts, quoted, strict=True):
            if text is None:
                continue
            msg = ctx.message
            if msg.role != "assistant" or (msg.msg_idx, "diagnosis") in found:
                continue
            todo.append((ctx, text))
            todo_quoted.append(q)
        threshold = self.diagnosis.settings.threshold
        tags: list[Tag] = []
        # (a no-op once loaded: warm_up loads it; this sees to a Tagger used without it)
        self.diagnosis.load(self._nlp.tokenizer if self._nlp is not None else None)
        scored = self.diagnosis.best([t for _, t in todo], todo_quoted, at_least=threshold)
        for (ctx, text), best in zip(todo, scored, strict=True):
            if best is None or best.probability < threshold:
                continue
            tags.append(_new_tag(
                ctx.message.session_id, ctx.message.msg_idx, "diagnosis",
                round(best.probability, 4), "model", text[best.start : best.end][:200],
                best.start, best.end, self.version,
            ))
        return tags

    # --- structure: markers, tool calls, results ---------------------------
    def _structural(self, ctx: MessageContext) -> Iterator[tuple[int, Hit]]:
        msg = ctx.message
        idx = msg.msg_idx
        tools = self.tools
        abort = tools.abort("error", msg.error) if msg.error else None
        if abort is None and msg.role != "assistant":
            abort = tools.abort("text", msg.text)
        for call in ctx.results:
            if abort is not None:
                break
            if call.status == "aborted":
                abort = Hit("user_abort", "abort:status", "status aborted", None, None)
                found = self.tools.abort("output", call.output)
                abort = found or abort
            else:
                abort = self.tools.abort("output", call.output)
        if abort is not None:
            yield idx, abort
        err = message_error(tools, msg) if msg.error else None
        if err is not None:
            yield idx, err
        for call in ctx.calls:
            if shell_tool(call):
                shape = loop_shape(call.command or "")
                if shape is not None:
                    yield idx, Hit("polling_loop", f"polling:{shape.kind}", (call.command or "")[:200], 0, min(len(call.command or ""), 200))
                for hit in self.tools.command_hits(call):
                    yield idx, hit
            elif call.tool and call.input and not file_tool(call):
                for hit in self.tools.command_hits(_as_command(call)):
                    if hit.label in ("smoke_test", "launch", "benchmark"):
                        yield idx, hit
        for call in ctx.results:
            out_hits = printed_hits(self.tools, command_output(call.output))
            for hit in error_hits(self.tools, call, abort is not None, out_hits):
                yield idx, hit
            for hit in out_hits:
                if hit.label != "error":
                    yield idx, hit
        if msg.role == "tool" and not ctx.results:
            for hit in self._orphan_output_hits(msg.text):
                if abort is None or hit.label != "error":
                    yield idx, hit
        for hit in self.tools.text_hits("text", msg.text, msg.role):
            yield idx, hit

    def _orphan_output_hits(self, text: str) -> list[Hit]:
        """Hits in a tool record whose call is not at hand: its text is the output, and a
        header's non-zero exit code is an error when the output shows none."""
        printed = command_output(text)
        hits = printed_hits(self.tools, printed)
        by_exit = exit_code_hit(printed.exit_code)
        if by_exit is not None and not any(h.label == "error" for h in hits):
            hits.append(by_exit)
        return hits

    # --- prose -------------------------------------------------------------
    def prose(self, ctx: MessageContext) -> str | None:
        """The text worth tokenising, context wrappers blanked out (offsets kept); None to skip."""
        msg = ctx.message
        if msg.role not in PROSE_ROLES or not msg.text or msg.text.isspace():
            return None  # (``not text.strip()``, without copying the text)
        if msg.role == "user" and (msg.is_compaction_summary or msg.is_sidechain):
            return None
        text = msg.text[:MAX_PROSE_CHARS]
        if msg.role != "user":
            return text
        if len(text) > SHORT_PROSE_CHARS:
            return self._unwrapped(text)
        return _remembered(self._user_prose, text, self._unwrapped, text)

    def _unwrapped(self, text: str) -> str | None:
        """A user message's ``text`` with its context wrappers blanked out; None when nothing
        else is left."""
        low = lowered(text)  # of the text as it is now: lowered again after a change
        for rx in self._context:
            if rx.may_match(low):
                blanked = rx.regex.sub(lambda m: " " * len(m.group(0)), text)
                if blanked != text:
                    text, low = blanked, lowered(blanked)
        return text if text.strip() else None

    # --- prose prefilter ----------------------------------------------------
    def _triggers(self, role: str) -> list[tuple[frozenset[str], list[Trigger] | None]]:
        """(labels, prefilters) for the prose rules of ``role``: whole-message labels
        apart from the rest; None when a rule cannot be prefiltered."""
        if role not in self._trigger_cache:
            by_label = self.nlp.get_pipe("tag_patterns").triggers.get(role, {})  # type: ignore[attr-defined]
            groups: list[tuple[frozenset[str], list[Trigger] | None]] = []
            for whole in (True, False):
                labels = frozenset(k for k in by_label if (k in WHOLE_MESSAGE_LABELS) == whole)
                rules = [r for k in labels for r in by_label[k]]
                if not rules:
                    continue
                if any(r is None for r in rules):
                    groups.append((labels, None))
                else:
                    groups.append((labels, compile_triggers([v for r in rules if r for v in r])))
            self._trigger_cache[role] = groups
        return self._trigger_cache[role]

    def _regions(self, role: str, text: str) -> list[tuple[int, int]]:
        """Character ranges of ``text`` (a message of ``role``) worth tokenising: none without
        a trigger hit, the whole text when it is short or a whole-message rule fired, else
        windows around the hits."""
        if len(text) > SHORT_PROSE_CHARS:
            return self._find_regions(role, text)
        return _remembered(self._short_regions, (role, text), self._find_regions, role, text)

    def _find_regions(self, role: str, text: str) -> list[tuple[int, int]]:
        """``_regions`` of ``text``, found anew (not looked up in ``_short_regions``)."""
        hits: list[tuple[int, int]] = []
        lower = text.lower()
        short = len(text) <= SHORT_PROSE_CHARS
        for labels, triggers in self._triggers(role):
            whole = labels <= WHOLE_MESSAGE_LABELS
            if labels == {"user_checkin"} and _more_words_than(text, self._checkin_max):
                continue  # the check-in gate drops it anyway
            if triggers is None:
                return [(0, len(text))]
            for trigger in triggers:
                if (whole or short) and trigger.search(lower):
                    return [(0, len(text))]
                if not (whole or short):
                    hits.extend(trigger.spans(lower))
        return windows(text, sorted(hits)) if hits else []

    def _failure_context(self, text: str) -> bool:
        """The message opens with a failure ("Startup failed: …", "OOM at 0.9 …")."""
        head = _SENT_END.split(text[:OPENER_CHARS].lower(), maxsplit=1)[0]
        return self._opener.search(head) is not None

    def _prose_hits(
        self,
        batch: list[MessageContext],
        texts: list[str | None],
        errors: set[int],
        quoted_out: list[_Regions | None],
    ) -> Iterator[tuple[MessageContext, Hit]]:
        """Prose tags of ``batch``: trigger windows through spaCy (``nlp.pipe``), each
        distinct window once (short messages such as "ok?" repeat a lot). ``texts``: the
        ``prose`` of each message; ``errors``: msg_idx of the records tagged ``error`` (an
        assistant message after one explains it); ``quoted_out[i]`` receives the
        ``quoted_regions`` of ``texts[i]`` where they are computed (for the classifier)."""
        todo: list[tuple[MessageContext, int, _PieceKey]] = []
        fresh: dict[_PieceKey, None] = {}
        after_error = False
        for i, (ctx, text) in enumerate(zip(batch, texts, strict=True)):
            msg = ctx.message  # read once: each field of a record costs a lookup
            failed = after_error
            if msg.msg_idx in errors:
                after_error = True
            elif text is not None and msg.role == "assistant":
                after_error = False
            if text is None:
                continue
            role: str = msg.role
            regions = self._regions(role, text)
            if not regions:
                continue
            failed = role == "assistant" and (failed or self._failure_context(text))
            quoted = quoted_out[i] = quoted_regions(text)
            for a, b in regions:
                inside = tuple((max(x, a) - a, min(y, b) - a) for x, y in quoted if x < b and y > a)
                key: _PieceKey = (role, text[a:b], inside, failed)
                todo.append((ctx, a, key))
                if key not in self._piece_cache:
                    fresh[key] = None
        if fresh:
            self._run_spacy(list(fresh), keep={key for _, _, key in todo})
        for ctx, offset, key in todo:
            for label, rule, evidence, start, end in self._piece_cache[key]:
                yield ctx, Hit(label, rule, evidence, offset + start, offset + end)

    def _run_spacy(self, keys: list[_PieceKey], keep: set[_PieceKey]) -> None:
        """Spans of the pieces ``keys`` into the cache; when it is full, it is emptied
        but for the pieces in ``keep`` (those the current batch still reads)."""
        nlp = self.nlp
        if len(self._piece_cache) + len(keys) > PIECE_CACHE_SIZE:
            self._piece_cache = {k: v for k, v in self._piece_cache.items() if k in keep}

        def docs() -> Iterator[Doc]:
            for role, text, quoted, failed in keys:
                doc = nlp.make_doc(text)
                doc.user_data["text"] = text
                doc.user_data["role"] = role
                doc.user_data["quoted"] = list(quoted)
                doc.user_data["failure_context"] = failed
                yield doc

        for key, doc in zip(keys, nlp.pipe(docs(), batch_size=PIPE_BATCH), strict=True):
            self._piece_cache[key] = [
                (span.label_, span.id_, span.text, span.start_char, span.end_char)
                for span in doc.spans.get(SPANS_KEY, [])
            ]


_TAG_FIELDS = set(Tag.model_fields)


def _new_tag(
    session_id: str, msg_idx: int, label: str, score: float, source: str, evidence: str,
    start: int | None, end: int | None, version: str,
) -> Tag:
    """``Tag(...)`` of these values, all of the declared types already, built as
    ``trusted`` builds records: a chunk yields thousands of tags, and validating each
    costs five times as much as building it. Evidence is cut at 200 characters; the span
    ends where the evidence does, so that it always reads ``text[start_char:end_char]``."""
    if start is not None and end is not None:
        end = min(end, start + len(evidence))
    return trusted(Tag, {
        "session_id": session_id, "msg_idx": msg_idx, "tag": label, "score": score,
        "source": source, "evidence": evidence, "start_char": start, "end_char": end,
        "tagger_version": version,
    }, _TAG_FIELDS)


def _more_words_than(text: str, n: int) -> bool:
    """True when ``text`` has more than ``n`` whitespace-separated words (each is >= 1 token)."""
    count = 0
    for _ in _WORD.finditer(text):
        count += 1
        if count > n:
            return True
    return False


def _as_command(call: Any) -> Any:
    """Non-shell tools (e.g. a python/REPL tool) checked through their input text."""
    from analytics.models import ToolCall

    return ToolCall(
        session_id=call.session_id, msg_idx=call.msg_idx, call_id=call.call_id,
        tool=call.tool, command=call.input, input=None,
    )
