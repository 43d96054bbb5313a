"""Runs the analysers over what the parsers stored.

Message-level analysers (tagging, polling, tooling) see each message once, with
its tool calls and results, a chunk of messages at a time (on two or more cores a forked
worker process tags while this one runs the rest: ``tagging/worker.py``). A
:class:`MessageRun` can be fed while a long file is still being parsed (``ingest.py``),
so the worker tags the first chunks while the rest is read. Session-level analysers
(launch diffs, campaigns, readiness) are recomputed for every session an ingest touched.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from analytics.analysis.rows import (
    StoredRecords,
    Tables,
    contexts_from_tables,
    for_tagging,
    load_contexts,
    load_tables,
    msg_indices,
    pack,
    tail_tables,
    unpack,
    with_calls,
)
from analytics.errors import AnalyticsError
from analytics.gcpause import no_cyclic_gc
from analytics.models import (
    Launch,
    Measurement,
    MessageContext,
    PollingLoop,
    ReadinessClaim,
    ServerEvent,
    Tag,
    ToolCall,
    trusted,
)
from analytics.store.writer import append, append_table, from_columns, to_arrow, to_columns
from analytics.timing import PEAK_RSS_MIB, TIMINGS, timed

if TYPE_CHECKING:
    from analytics.analysis.campaigns import Goal
    from analytics.analysis.tagging import Tagger
    from analytics.analysis.tagging.worker import TagWorker

CHUNK = 5000
TAG_MARGIN = 50
"""Messages before a chunk (or before the first new message of an append) that are
tagged again as the chunk's context."""

CLAIM_TAG = "readiness_claim"
"""The tag whose messages' texts a run keeps (``KnownRows.claim_texts``)."""


@dataclass
class KnownRows:
    """What a :class:`MessageRun` read of its session's messages on its way that the
    session analysis would otherwise read again from the database (the text column of a
    long session: much of its bytes)."""

    claim_texts: dict[int, str | None] = field(default_factory=dict)
    """msg_idx -> text of the messages of the chunks the run tagged that claim readiness
    (``CLAIM_TAG``), from the chunks' rows: the verdicts read them
    (``SessionFrames.known_texts``)."""
    goals: list[Goal] | None = None
    """The goals stated in the session (``campaigns.goals_in``), in message order, when
    the run read all its messages (it analysed the session from the first on); else None."""


Meanwhile = Callable[[int, KnownRows], None]
"""What :meth:`MessageRun.close` runs while the worker tags the last chunks: given
``MessageRun.settled`` and ``MessageRun.seen``."""

MESSAGE_TABLES = ("tags", "polling_loops", "launches", "server_events", "measurements")


@dataclass
class MessageOutputs:
    tags: pa.Table | None = None
    """As ``to_arrow("tags", …)`` builds them (None: none)."""
    polling: list[PollingLoop] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    events: list[ServerEvent] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    rechecks: bool = False
    """The messages re-check a background job (``polling.rechecks``): the loops and tags of
    the session's runs of re-checks are found again among all its calls once these outputs
    are written (:meth:`MessageRun.close`)."""

    @property
    def n_rows(self) -> int:
        """Rows these outputs add to the tables."""
        n_tags = self.tags.num_rows if self.tags is not None else 0
        return (
            n_tags + len(self.polling) + len(self.launches) + len(self.events)
            + len(self.measurements)
        )


def merged(outputs: list[MessageOutputs]) -> MessageOutputs:
    """The outputs of several chunks as one, rows in the same order (the tags of the chunks
    are tables of one schema: ``to_arrow("tags", …)``)."""
    tags = [o.tags for o in outputs if o.tags is not None and o.tags.num_rows]
    out = MessageOutputs(tags=pa.concat_tables(tags) if tags else None)
    for o in outputs:
        out.rechecks |= o.rechecks
        out.polling.extend(o.polling)
        out.launches.extend(o.launches)
        out.events.extend(o.events)
        out.measurements.extend(o.measurements)
    return out


@dataclass
class _Chunk:
    """A chunk analysed but not written yet: its tags may still be with the worker."""

    tables: Tables | None
    """Kept, with ``before``, while the worker has the chunk: to tag it here should it fail."""
    before: Tables | None
    """The messages just before the chunk, tagged with it as its context."""
    mine: set[int]
    """msg_idx of the chunk's messages."""
    tail: int
    """msg_idx from which the chunk's tags are context for the next chunk."""
    tags: pa.Table | None = None
    """Tags of ``before`` and the chunk, as ``tag_in_context`` returns them (``to_arrow``)."""
    claim_texts: dict[int, str | None] = field(default_factory=dict)
    """msg_idx -> text of the messages ``tags`` say claim readiness (``CLAIM_TAG``)."""
    facts: ChunkFacts | None = None
    """The chunk's ``chunk_facts``, found when it is handed over or with its tags (added to
    ``outputs`` once written)."""
    outputs: MessageOutputs = field(default_factory=MessageOutputs)

    def tag_here(self, tagger: Tagger) -> list[MessageContext]:
        """Tag the chunk in this process (no worker, or it failed), and find its
        ``chunk_facts``; returns its contexts."""
        assert self.tables is not None and self.before is not None
        with timed("load contexts"):
            contexts = contexts_from_tables(self.tables)
            before = contexts_from_tables(self.before)
        with timed("tagging"):
            tags = to_arrow("tags", tag_in_context(tagger, contexts, before))
        self.tagged(tags, chunk_facts(contexts, self.tables[0]))
        return contexts

    def tagged(self, tags: pa.Table, facts: ChunkFacts | None) -> None:
        """The chunk's tags are in, with its facts unless they were found already: keep
        them, and the texts of the messages the tags say claim readiness, and let go of the
        chunk's rows."""
        assert self.tables is not None and self.before is not None
        self.tags = tags
        if facts is not None:
            self.facts = facts
        self.claim_texts = texts_tagged(tags, CLAIM_TAG, self.before[0], self.tables[0])
        self.tables = self.before = None


def texts_tagged(tags: pa.Table, tag: str, *messages: pa.Table) -> dict[int, str | None]:
    """msg_idx -> text of the messages of the tables ``messages`` (``load_tables``' first
    table) that a table of tags (``to_arrow("tags", …)``) tags ``tag``, at C speed."""
    found = tags.filter(pc.equal(tags.column("tag"), tag)).column("msg_idx")
    if not len(found):
        return {}
    out: dict[int, str | None] = {}
    for table in messages:
        rows = table.filter(pc.is_in(table.column("msg_idx"), value_set=found.combine_chunks()))
        out.update(zip(rows.column("msg_idx").to_pylist(), rows.column("text").to_pylist(),
                       strict=True))
    return out


def tag_in_context(
    tagger: Tagger, contexts: list[MessageContext], before: list[MessageContext] | None
) -> list[Tag]:
    """Tags of ``contexts`` and of ``before`` (the messages just before them), tagged together."""
    if not before:
        return tagger.tag(contexts)
    mine = {c.message.msg_idx for c in contexts}
    batch = [c for c in before if c.message.msg_idx not in mine] + contexts
    batch.sort(key=lambda c: c.message.msg_idx)
    return tagger.tag(batch)


ChunkFacts = tuple[list[PollingLoop], list[Measurement], list["Goal"]]
"""A chunk's polling loops, the numbers stated in its prose and the goals stated there."""
FACTS_KEY = b"transcripts.chunk_facts"
"""Schema metadata of a chunk's messages handed to the worker: ``b"1"`` asks it for the
chunk's ``chunk_facts`` besides the tags."""


def chunk_facts(contexts: list[MessageContext], messages: pa.Table) -> ChunkFacts:
    """What a chunk holds besides its tags that needs nothing from the chunks before it:
    the polling loops of ``contexts`` (all the chunk's messages with their calls), and the
    numbers and goals stated in the prose of ``messages`` (the chunk's ``load_tables``
    messages). The tagging worker finds them with the tags, or the ingest process when
    the worker is behind (``MessageRun.FACTS_BACKLOG``); a chunk tagged here finds them
    here. Either way the same: the polling loops are those of the messages with calls."""
    from analytics.analysis.campaigns import goals_in
    from analytics.analysis.stated import prose_rows, stated_in_rows

    with timed("polling"):
        polling = polling_loops(contexts)
    with timed("stated numbers"):
        prose = prose_rows(messages)
        goals = goals_in((i, role, t) for _, i, role, t in prose)  # (a goal is stated in one message)
        return polling, stated_in_rows(prose), goals


def polling_loops(contexts: list[MessageContext]) -> list[PollingLoop]:
    """The polling loops of the calls ``contexts`` make, in order."""
    from analytics.analysis.tagging import analyse_polling

    # (a loop is a call the message makes, not a result it carries)
    return [loop for ctx in contexts if ctx.calls for loop in analyse_polling(ctx)]


def new_tag_rows(tags: pa.Table, mine: set[int], known: set[tuple[int, str]]) -> pa.Table:
    """Of a table of tags (``to_arrow("tags", …)``), the rows on the messages ``mine`` and
    those of the context before them that are not ``known`` (stored already), in order."""
    inside = pc.is_in(tags.column("msg_idx"), value_set=pa.array(sorted(mine), pa.int32()))
    flags: list[bool] = inside.to_pylist()
    if all(flags):
        return tags
    keep = [
        ok or (i, t) not in known
        for ok, i, t in zip(
            flags, tags.column("msg_idx").to_pylist(), tags.column("tag").to_pylist(), strict=True
        )
    ]
    return tags.filter(pa.array(keep, pa.bool_()))


def tag_keys(tags: pa.Table, from_idx: int) -> set[tuple[int, str]]:
    """(msg_idx, tag) of the rows of a table of tags on messages ``msg_idx >= from_idx``."""
    late = tags.filter(pc.greater_equal(tags.column("msg_idx"), from_idx))
    return set(zip(late.column("msg_idx").to_pylist(), late.column("tag").to_pylist(), strict=True))


class Analyser:
    """Holds the (lazily built) tagger and per-session tooling state for one ingest run."""

    def __init__(self, rules: Path | None = None) -> None:
        self.rules = rules
        """The extra tag patterns this analyser's tagger is built with."""
        self._tagger: Tagger | None = None
        self._tooling: dict[str, Any] = {}

    @property
    def tagger(self) -> Tagger:
        """Built on first use (it imports spaCy): an ingest whose tagging all happens in the
        worker process never builds it here."""
        if self._tagger is None:
            from analytics.analysis.tagging import Tagger

            self._tagger = Tagger(extra_rules=self.rules)
        return self._tagger

    @property
    def tagger_loaded(self) -> bool:
        return self._tagger is not None

    def warm_up(self) -> None:
        """Build the tagger and load its models now rather than on the first message."""
        self.tagger.warm_up()

    def forget_sessions(self) -> None:
        """Drop the per-session tooling state held in memory (it is re-read from the
        database when a session is analysed next)."""
        self._tooling.clear()

    def _extractor(self, session_id: str) -> Any:
        from analytics.analysis.tooling import ToolingExtractor

        if session_id not in self._tooling:
            self._tooling[session_id] = ToolingExtractor()
        return self._tooling[session_id]

    def analyse(
        self,
        contexts: list[MessageContext],
        before: list[MessageContext] | None = None,
        known: set[tuple[int, str]] | None = None,
    ) -> MessageOutputs:
        """Tags, polling loops, tooling facts and stated numbers of ``contexts``. A
        message's tags can depend on its neighbours (a run of re-checks of one background
        job, the error an explanation follows), so ``before`` — the messages just before ``contexts`` —
        are tagged with them again; of their tags only those not in ``known`` (the ones
        already stored) are returned."""
        from analytics.analysis.stated import stated_measurements

        if not contexts:
            return MessageOutputs()
        with timed("tagging"):
            tags = tag_in_context(self.tagger, contexts, before)
        out = self._analyse_calls(contexts)
        with timed("stated numbers"):
            for ctx in contexts:
                out.measurements.extend(stated_measurements(ctx.message))
        out.tags = new_tag_rows(
            to_arrow("tags", tags), {c.message.msg_idx for c in contexts}, known or set()
        )
        return out

    def _analyse_calls(
        self, contexts: list[MessageContext], polling: bool = True
    ) -> MessageOutputs:
        """Everything but the tags and the numbers stated in prose: polling loops (unless
        ``polling`` is false: ``chunk_facts`` finds them) and tooling facts."""
        from analytics.analysis.tagging.polling import rechecks

        out = MessageOutputs()
        with timed("polling"):
            if polling:
                out.polling.extend(polling_loops(contexts))
            out.rechecks = rechecks(contexts)
        with timed("tooling"):
            session_id: str | None = None
            extractor: Any = None
            for ctx in contexts:
                if ctx.message.session_id != session_id:  # every session gets its extractor
                    session_id = ctx.message.session_id
                    extractor = self._extractor(session_id)
                if not (ctx.calls or ctx.results):
                    continue  # most messages: nothing to extract
                facts = extractor.extract(ctx)
                out.launches.extend(facts.launches)
                out.events.extend(facts.server_events)
                out.measurements.extend(facts.measurements)
        return out

    # -- message level -------------------------------------------------------

    def run_messages(
        self,
        con: duckdb.DuckDBPyConnection,
        session_id: str,
        start_idx: int,
        extra_idx: Iterable[int] = (),
        meanwhile: Meanwhile | None = None,
    ) -> int:
        """Analyse messages ``msg_idx >= start_idx`` plus ``extra_idx`` (older messages whose
        tool calls just completed), replacing any analysis rows they had (``meanwhile``:
        see :meth:`MessageRun.close`)."""
        return MessageRun(self, con, session_id, start_idx, extra_idx).finish(meanwhile)

    def _tag_packed(
        self, packed: bytes | pa.Buffer | memoryview
    ) -> tuple[list[Sequence[Any]], ChunkFacts | None]:
        """What the worker process runs: ``tag_in_context`` of a chunk and of the margin
        before it, handed over as ``pack(*margin, *chunk)``, and, when the chunk's table of
        messages says so (``FACTS_KEY``), its other findings that need no state
        (``chunk_facts``; None otherwise); the tags as the columns of
        their table (``to_columns``: no pydantic record to unpickle in the ingest process,
        which makes the table of them, ``from_columns``). Not the table itself: the first
        ``pa.array`` call of a process imports pandas, which the ingest process has done
        already, and which would cost the worker, the ingest's critical path, a fifth of
        a second."""
        before_msgs, before_calls, msgs, calls = unpack(packed, 4)
        contexts = contexts_from_tables((msgs, calls))
        tags = tag_in_context(
            self.tagger, contexts, contexts_from_tables((before_msgs, before_calls))
        )
        wanted = (msgs.schema.metadata or {}).get(FACTS_KEY) == b"1"
        return to_columns("tags", tags), chunk_facts(contexts, msgs) if wanted else None

    def _restore_tooling(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        from analytics.analysis.tooling import ToolingExtractor

        if session_id in self._tooling:
            return
        row = con.execute(
            "SELECT state FROM analysis_state WHERE session_id = ? AND analyser = 'tooling'",
            [session_id],
        ).fetchone()
        if row and row[0]:
            try:
                self._tooling[session_id] = ToolingExtractor.from_state(orjson.loads(row[0]))
            except (AnalyticsError, ValueError):
                pass  # a state from another version: start afresh

    def _save_tooling(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        extractor = self._tooling.get(session_id)
        if extractor is None:
            return
        # (no key to replace on: see migrations.UNKEYED)
        con.execute(
            "DELETE FROM analysis_state WHERE session_id = ? AND analyser = 'tooling'",
            [session_id],
        )
        con.execute(
            "INSERT INTO analysis_state VALUES (?, 'tooling', ?)",
            [session_id, orjson.dumps(extractor.state(), default=str).decode()],
        )

    def clear_from(
        self, con: duckdb.DuckDBPyConnection, session_id: str, from_idx: int = 0
    ) -> None:
        """Delete the message-level analysis of messages ``msg_idx >= from_idx`` before they
        are analysed again, and the tooling state held for the session in memory (read again
        from the database; analysing from the first message on, that one goes too)."""
        for table in MESSAGE_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE session_id = ? AND msg_idx >= ?",
                [session_id, from_idx],
            )
        self._tooling.pop(session_id, None)
        if from_idx <= 0:
            con.execute("DELETE FROM analysis_state WHERE session_id = ?", [session_id])

    @staticmethod
    def _delete(con: duckdb.DuckDBPyConnection, session_id: str, idx: list[int]) -> None:
        for table in MESSAGE_TABLES:
            con.execute(
                f"DELETE FROM {table} WHERE session_id = ? AND list_contains(?, msg_idx)",
                [session_id, idx],
            )

    @staticmethod
    def _write(con: duckdb.DuckDBPyConnection, out: MessageOutputs) -> None:
        if out.tags is not None:
            append_table(con, "tags", out.tags)
        append(con, "polling_loops", out.polling)
        append(con, "launches", out.launches)
        append(con, "server_events", out.events)
        append(con, "measurements", out.measurements)

class SessionRun:
    """The session-level analysis of one session after the message-level analysis of
    ``msg_idx >= first_changed`` changed: campaigns as a whole, readiness verdicts only for
    the claims whose evidence window reaches the changed messages. ``fresh``: the session
    has no session-level rows yet (nothing to delete: each delete scans its table, which a
    first ingest of many files pays for every file).

    :meth:`prepare` does the part that reads only the rows a parse stores (messages) and
    the message-level analysis written already and final: an ingest runs it while the
    tagging worker still tags the session's last chunks, time this process would otherwise
    spend waiting.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        session_id: str,
        first_changed: int = 0,
        fresh: bool = False,
    ) -> None:
        from analytics.analysis.readiness import claims_affected_from
        from analytics.analysis.session import load_session_frames

        self.con, self.session_id, self.fresh = con, session_id, fresh
        self.claims_from = claims_affected_from(first_changed)
        self.frames = load_session_frames(con, session_id)
        self._stated: list[Goal] | None = None
        """The session's stated goals (``campaigns.stated_goals``) once prepared."""
        self._judged: list[ReadinessClaim] = []
        """Verdicts given by :meth:`prepare`: of the claims below ``_judge_from``."""
        self._judge_from = self.claims_from

    def prepare(
        self, settled_below: int | None = None, seen: KnownRows | None = None
    ) -> None:
        """Session statistics and stated goals (once: :meth:`finish` calls it too).
        ``settled_below``: this process has nothing else to do (an ingest waiting for its
        tagging worker) and the message-level analysis of the messages below this
        ``msg_idx`` is written and final (``MessageRun.settled``); so the native ids of
        the messages verdicts can name are read as well, whether or not the session has
        claims, and the claims whose verdicts read only those messages are judged (those
        not judged yet: called again as more is settled, it judges the next ones).
        ``seen``: what the caller read of the session's messages already
        (``MessageRun.seen``), which is then not read again: the stated goals, and the
        texts of the claims (kept by reference: the run adds the last chunks' before
        :meth:`finish`)."""
        from analytics.analysis.campaigns import stated_goals
        from analytics.analysis.readiness import LOOKBACK, judge_settled_claims

        if self._stated is None:
            refresh_session_stats(self.con, self.session_id)
            if seen is not None:
                self.frames.known_texts = seen.claim_texts
            with timed("session analysis"):
                if seen is not None and seen.goals is not None:
                    self._stated = seen.goals  # (in message order, as the chunks came)
                else:
                    self._stated = stated_goals(self.frames)
                if settled_below is not None:
                    self.frames.source_id(max(0, self.claims_from - LOOKBACK))
        if settled_below is not None:
            with timed("session analysis"):
                judged, self._judge_from = judge_settled_claims(
                    self.frames, self._judge_from, settled_below
                )
                self._judged.extend(judged)

    def finish(self) -> None:
        """The rest, once the message-level analysis is written; writes the results."""
        from analytics.analysis.session import analyse_session

        self.prepare()
        con, session_id = self.con, self.session_id
        self._diff_launches()
        with timed("session analysis"):
            result = analyse_session(self.frames, self._judge_from, self._stated)
        if not self.fresh:
            for table in ("campaigns", "levers"):
                con.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
            con.execute(
                "DELETE FROM readiness_claims WHERE session_id = ? AND msg_idx >= ?",
                [session_id, self.claims_from],
            )
        append(con, "campaigns", result.campaigns)
        append(con, "levers", result.levers)
        append(con, "readiness_claims", self._judged + result.claims)

    def _diff_launches(self) -> None:
        """The session's launches again, each with what changed since the one before."""
        from analytics.analysis.tooling import diff_launches

        con, session_id = self.con, self.session_id
        rows = con.execute(
            "SELECT session_id, msg_idx, call_id, engine, model, host, flags, env, unknown_flags "
            "FROM launches WHERE session_id = ? ORDER BY msg_idx",
            [session_id],
        ).fetchall()
        if not rows:
            return
        launches = [
            Launch(
                session_id=r[0], msg_idx=r[1], call_id=r[2], engine=r[3], model=r[4], host=r[5],
                flags=orjson.loads(r[6]) if r[6] else {},
                env=orjson.loads(r[7]) if r[7] else {},
                unknown_flags=orjson.loads(r[8]) if r[8] else {},
            )
            for r in rows
        ]
        con.execute("DELETE FROM launches WHERE session_id = ?", [session_id])
        append(con, "launches", diff_launches(launches))


class MessageRun:
    """The message-level analysis of one session from ``start_idx`` on, chunk by chunk.

    :meth:`feed` analyses the messages stored so far (up to a ``msg_idx``) and returns
    without waiting for the tagging worker, so an ingest can hand over the chunks of a long
    file while it goes on parsing the rest; :meth:`close` waits for the last tags and
    writes them. Outputs are written chunk by chunk, in order, exactly as in one pass.
    """

    WORKER_BACKLOG = 2
    """Chunks the worker may hold before this process tags the next ones itself."""
    STREAM_BACKLOG = 8
    """The same while the ingest is still parsing (this process has better things to do),
    or while the tagger is not loaded in this process."""
    FACTS_BACKLOG = 2
    """Chunks the worker has not answered (the one it tags and one waiting) from which this
    process finds the ``chunk_facts`` of the next one itself."""
    WRITE_ROWS = 50_000
    """Output rows of analysed chunks held before they are appended together: an append
    costs about a millisecond whatever its size, and a chunk has five tables."""

    def __init__(
        self,
        analyser: Analyser,
        con: duckdb.DuckDBPyConnection,
        session_id: str,
        start_idx: int,
        extra_idx: Iterable[int] = (),
        worker: TagWorker | None = None,
    ) -> None:
        self.analyser, self.con, self.session_id = analyser, con, session_id
        self.next_lo = start_idx
        """The first message not handed to a chunk yet."""
        self.n = 0
        self.worker = worker
        """The tagging worker: given (already forked), or forked by :meth:`feed`."""
        self._may_fork = worker is None
        """One worker per run at most: one that failed is not forked again."""
        self.pending: deque[_Chunk] = deque()
        self.settled = max(0, start_idx - TAG_MARGIN)
        """The analysis rows of the messages below this ``msg_idx`` are written and this
        run writes no more of them: the chunks not written yet tag the messages from there
        on (their own, and the last ``TAG_MARGIN`` before them as context)."""
        self._popped_tail = self.settled
        """``tail`` of the last chunk out of ``pending`` (``settled`` once written)."""
        self.unwritten: list[MessageOutputs] = []
        """Outputs of the chunks out of ``pending``, in order, not appended yet."""
        self._unwritten_rows = 0
        self.rechecks = False
        """A message analysed re-checks a background job (``MessageOutputs.rechecks``)."""
        self.seen = KnownRows(goals=[] if start_idx == 0 else None)
        """What the session analysis reads of the messages, read on the way."""
        analyser._restore_tooling(con, session_id)
        extra = sorted({i for i in extra_idx if i < start_idx})
        self.first = min([start_idx, *extra])
        """The first message this run analyses."""
        if extra:
            analyser._delete(con, session_id, extra)
        with no_cyclic_gc():
            for i in extra:  # older messages whose calls just completed, each in its context
                self._redo(i)
            # The messages just before the first new one are tagged again as context.
            margin_lo = max(0, start_idx - TAG_MARGIN)
            self.before: Tables | None = None
            """None: no message before the first new one (the first chunk's tables, emptied,
            stand for them: no query for a session analysed from its start)."""
            self.known: set[tuple[int, str]] = set()
            if start_idx > 0:
                with timed("load contexts"):
                    self.before = load_tables(con, session_id, margin_lo, start_idx - 1)
                    self.known = self._stored_tags(margin_lo, start_idx - 1)

    def _stored_tags(self, lo: int, hi: int) -> set[tuple[int, str]]:
        """(msg_idx, tag) of the tags stored for messages ``lo..hi``."""
        rows = self.con.execute(
            "SELECT msg_idx, tag FROM tags WHERE session_id = ? AND msg_idx BETWEEN ? AND ?",
            [self.session_id, lo, hi],
        ).fetchall()
        return {(int(i), str(t)) for i, t in rows}

    def _redo(self, msg_idx: int) -> None:
        """Analyse one older message again, tagged with the ``TAG_MARGIN`` messages before it."""
        lo = max(0, msg_idx - TAG_MARGIN)
        with timed("load contexts"):
            contexts = load_contexts(self.con, self.session_id, lo, msg_idx)
            known = self._stored_tags(lo, msg_idx)
        redo = [c for c in contexts if c.message.msg_idx == msg_idx]
        before = [c for c in contexts if c.message.msg_idx < msg_idx]
        out = self.analyser.analyse(redo, before, known)
        self.rechecks |= out.rechecks
        self.analyser._write(self.con, out)

    def feed(self, upto: int, final: bool = False, records: StoredRecords | None = None) -> None:
        """Analyse the messages up to ``msg_idx`` ``upto``: whole chunks only unless
        ``final`` (then the last, shorter one too). ``records``: the session's rows as they
        were stored, read instead of the database."""
        from analytics.analysis.tagging import worker as tag_worker

        lo, analyser = self.next_lo, self.analyser
        n = upto - lo + 1  # (a worker for more than a chunk, or for one while parsing on)
        if self._may_fork and (n > CHUNK or (n == CHUNK and not final)) and tag_worker.available():
            self._may_fork = False
            if final:  # this process will tag too: load once, here, rather than in each
                analyser.warm_up()
            # (while the file is still parsed the worker loads the tagger itself, in parallel)
            self.worker = tag_worker.start(analyser._tag_packed)
        # Chunks the worker may hold before this process tags one itself: few once the
        # tagger is loaded here; while parsing, or before loading spaCy (most of a second)
        # for a chunk or two, more.
        backlog = (
            self.WORKER_BACKLOG if final and analyser.tagger_loaded else self.STREAM_BACKLOG
        )
        worker = self.worker
        while lo <= upto and (final or lo + CHUNK - 1 <= upto):
            hi = min(lo + CHUNK - 1, upto)
            with no_cyclic_gc():
                with timed("load contexts"):
                    if records is None:
                        tables = load_tables(self.con, self.session_id, lo, hi)
                    else:
                        tables = records.tables(lo, hi)
                    indices = msg_indices(tables)
                if self.before is None:
                    self.before = (tables[0].schema.empty_table(), tables[1].schema.empty_table())
                chunk = _Chunk(
                    tables,
                    self.before,
                    mine=set(indices),
                    tail=indices[-TAG_MARGIN] if len(indices) >= TAG_MARGIN else lo,
                )
                contexts: list[MessageContext] | None = None
                facts_here = False
                if not indices:
                    chunk.tags, chunk.tables, chunk.before = to_arrow("tags", []), None, None
                    chunk.facts = ([], [], [])
                elif worker is not None and not worker.gone and (
                    worker.outstanding < backlog or self._waited_for(worker, backlog, final)
                ):
                    # The worker finds the chunk's facts too unless it is behind: then this
                    # process, which would wait for it sooner or later, finds them.
                    facts_here = worker.unanswered >= self.FACTS_BACKLOG
                    msgs, calls = for_tagging(tables)
                    msgs = msgs.replace_schema_metadata({FACTS_KEY: b"0" if facts_here else b"1"})
                    worker.submit(pack(*for_tagging(self.before), msgs, calls))
                else:  # no worker, or it has enough to do: tag this chunk here
                    contexts = chunk.tag_here(analyser.tagger)
                if contexts is None:  # the polling and tooling analysers read only these
                    if indices:  # the session's extractor, whose state is saved, all the same
                        analyser._extractor(self.session_id)  # (a session without calls too)
                    with timed("load contexts"):
                        if records is None:
                            contexts = contexts_from_tables(with_calls(tables))
                        else:
                            contexts = records.call_contexts(lo, hi)
                    if facts_here:  # (the polling loops are those of the messages with calls)
                        chunk.facts = chunk_facts(contexts, tables[0])
                # (the chunk's polling loops are among its facts)
                chunk.outputs = analyser._analyse_calls(contexts, polling=False)
                self.rechecks |= chunk.outputs.rechecks
                self.pending.append(chunk)
                self._write_done(block=False)
            # the next chunk's context: the last TAG_MARGIN messages, not the whole chunk
            self.before = tail_tables(tables, TAG_MARGIN)
            self.n += len(indices)
            lo = hi + 1
        self.next_lo = lo

    def _waited_for(self, worker: TagWorker, backlog: int, final: bool) -> bool:
        """Hand a chunk to a worker holding its whole backlog when this process has not
        loaded the tagger, rather than load spaCy here (most of a second) to tag it: while
        the file is still parsed, after waiting for the worker to tag its oldest chunk
        (writing it; the worker, which has the backlog, is the slower side then, and waiting
        bounds the chunks held all the same); at the end of the file, at once (a few chunks
        at most: the rest of a streamed session), as the worker shares what it still has
        with a helper forked from it, spaCy loaded, once the last chunk is in (see
        ``TagWorker.last_submitted``). True: submit (False: the worker is gone, or tag
        here)."""
        if self.analyser.tagger_loaded:
            return False
        while not final and worker.outstanding >= backlog and not worker.gone:
            self._write_done(block=False, wait_one=True)
        return not worker.gone and self.worker is worker

    def finish(
        self, meanwhile: Meanwhile | None = None, records: StoredRecords | None = None
    ) -> int:
        """Analyse the rest of the session's stored messages (read from ``records`` if
        given, see :meth:`feed`), then :meth:`close`."""
        hi = self.con.execute(
            "SELECT max(msg_idx) FROM messages WHERE session_id = ?", [self.session_id]
        ).fetchone()
        try:
            self.feed(hi[0] if hi and hi[0] is not None else -1, final=True, records=records)
        except BaseException:
            self.stop_worker()
            raise
        return self.close(meanwhile)

    def close(self, meanwhile: Meanwhile | None = None) -> int:
        """Wait for the worker's last tags, write everything, save the tooling state;
        returns the number of messages analysed. ``meanwhile``: work that reads none of
        the outputs this run has yet to write, done before waiting for the worker (it is
        done either way), and again each time a chunk the worker answered settled more
        (but for the last one); it is given ``settled`` and ``seen``, whose claim texts the
        tags of the last chunks still add to as they come in (before this returns)."""
        if self.worker is not None:
            self.worker.last_submitted()
        try:
            with no_cyclic_gc():
                self._write_done(block=False)
                self._write_unwritten()  # while the worker tags the last chunks
                if meanwhile is not None:
                    meanwhile(self.settled, self.seen)
                    # Each chunk the worker answers settles more messages: meanwhile is
                    # given them while the worker tags the rest, not left for after.
                    while self.pending and self.worker is not None and not self.worker.gone:
                        settled = self.settled
                        self._write_done(block=False, wait_one=True)
                        self._write_unwritten()
                        if self.pending and self.settled > settled:
                            meanwhile(self.settled, self.seen)
                self._write_done(block=True)
        finally:
            self.stop_worker()
        if self.rechecks:
            with timed("polling"):
                self._session_rechecks()
        self.analyser._save_tooling(self.con, self.session_id)
        return self.n

    def _session_rechecks(self) -> None:
        """The polling loops of the session's runs of ``write_stdin`` polls, and the
        ``polling_loop`` tags of its runs of re-checks, from its calls from the start of
        the run the first message analysed is in (``runs_boundary``): a run cut by the end
        of a chunk (or of an ingest, or by a message analysed again alone) is seen whole.
        Its loops are replaced; of its tags, those a chunk that saw only part of the run
        did not give are added (as the tagger gives them)."""
        from analytics.analysis.tagging.polling import RECHECK_TOOLS, rechecks_of, session_loops

        con, session_id = self.con, self.session_id
        lo = runs_boundary(con, session_id, self.first)
        calls = session_calls(con, session_id, lo)
        if any(call.tool in RECHECK_TOOLS for _, call in calls):
            con.execute(
                "DELETE FROM polling_loops WHERE session_id = $sid AND msg_idx >= $lo AND call_id "
                "IN (SELECT call_id FROM tool_calls WHERE session_id = $sid "
                "AND list_contains($tools, tool))",
                {"sid": session_id, "lo": lo, "tools": sorted(RECHECK_TOOLS)},
            )
            started = background_commands(con, session_id)
            append(con, "polling_loops", session_loops(session_id, calls, started))
        wanted = rechecks_of(calls)
        if not wanted:
            return
        tagged = {int(r[0]) for r in con.execute(
            "SELECT msg_idx FROM tags WHERE session_id = ? AND tag = 'polling_loop' "
            "AND list_contains(?, msg_idx)", [session_id, sorted(wanted)]
        ).fetchall()}
        missing = [i for i in sorted(wanted) if i not in tagged]
        if missing:
            tagger = self.analyser.tagger
            append(con, "tags", [tagger.recheck_tag(session_id, i, wanted[i]) for i in missing])

    def stop_worker(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.close()
            stage = "tagging (in the worker process)"
            TIMINGS[stage] += worker.seconds
            PEAK_RSS_MIB[stage] = max(PEAK_RSS_MIB.get(stage, 0.0), worker.peak_rss_mib)

    def _write_done(self, block: bool, wait_one: bool = False) -> None:
        """Write the leading chunks of ``pending`` whose tags are in (all of them if
        ``block``; with ``wait_one``, waiting for the first one's); keeps ``known`` (tags
        stored in the last ``TAG_MARGIN`` messages). Their outputs are appended once
        ``WRITE_ROWS`` are held, and when ``block``."""
        from analytics.analysis.tagging.worker import WorkerGone

        pending, worker = self.pending, self.worker
        while pending:
            head = pending[0]
            if head.tags is None:
                assert worker is not None  # only chunks handed to the worker wait for tags
                try:
                    with timed("tagging (waiting for the worker)"):
                        columns = worker.take(block or wait_one)
                    wait_one = False
                except WorkerGone as exc:
                    warnings.warn(f"tagging worker failed ({exc}); tagging in this process",
                                  RuntimeWarning, stacklevel=2)
                    self.stop_worker()
                    worker = None
                    for chunk in pending:  # the worker's chunks, tagged here instead
                        if chunk.tags is None:
                            chunk.tag_here(self.analyser.tagger)
                    continue
                if columns is None:
                    break
                # (answers come in order)
                tag_columns, facts = columns
                head.tagged(from_columns("tags", tag_columns), facts)
                continue
            pending.popleft()
            self._popped_tail = head.tail
            assert head.facts is not None
            polling, stated, goals = head.facts
            head.outputs.polling.extend(polling)
            head.outputs.measurements.extend(stated)  # (after the tooling's, as they were)
            if self.seen.goals is not None:  # (chunks are written in order)
                self.seen.goals.extend(goals)
            tags = head.outputs.tags = new_tag_rows(head.tags, head.mine, self.known)
            self.seen.claim_texts.update(head.claim_texts)
            self.unwritten.append(head.outputs)
            self._unwritten_rows += head.outputs.n_rows
            self.known = {k for k in self.known if k[0] >= head.tail} | tag_keys(tags, head.tail)
        if block or self._unwritten_rows >= self.WRITE_ROWS:
            self._write_unwritten()

    def _write_unwritten(self) -> None:
        """Append the outputs of the chunks out of ``pending``, in one append per table."""
        if self.unwritten:
            with timed("write analysis"):
                self.analyser._write(self.con, merged(self.unwritten))
            self.unwritten, self._unwritten_rows = [], 0
            self.settled = self._popped_tail


_SESSION_CALLS_SQL = """
SELECT msg_idx, call_id, tool, command,
    CASE WHEN list_contains($inputs, tool) THEN input END,
    CASE WHEN list_contains($outputs, tool) THEN output ELSE left(output, $header) END,
    status, exit_code, started_at, ended_at, result_msg_idx
FROM tool_calls WHERE session_id = $sid AND msg_idx BETWEEN $lo AND $hi ORDER BY msg_idx, rowid
"""
_HEADER_CHARS = 400
"""Enough of an output for the header a command left running has (``command_output``)."""
_CALL_FIELDS = {
    "session_id", "msg_idx", "call_id", "tool", "command", "input", "output", "status",
    "exit_code", "started_at", "ended_at", "result_msg_idx",
}
RUNS_SPAN = 512
"""Messages read at a time looking back for the start of a run of re-checks."""


def session_calls(
    con: duckdb.DuckDBPyConnection, session_id: str, lo: int, hi: int = 1 << 62
) -> list[tuple[int, ToolCall]]:
    """(msg_idx, call) of the calls messages ``lo..hi`` of a session make, in order, with
    what runs of re-checks and their loops read of them (``polling.runs_of``,
    ``session_loops``): the input of re-checks (the job they read), the output of
    ``write_stdin`` polls (what they printed) and the start of any other output (the
    header of a command left running)."""
    from analytics.analysis.tagging.polling import (
        BACKGROUND_CHECK_TOOLS,
        STDIN_TOOLS,
        WAIT_TOOLS,
    )

    rows = con.execute(_SESSION_CALLS_SQL, {
        "sid": session_id, "lo": lo, "hi": hi,
        "inputs": sorted(BACKGROUND_CHECK_TOOLS | WAIT_TOOLS | STDIN_TOOLS),
        "outputs": sorted(BACKGROUND_CHECK_TOOLS | STDIN_TOOLS),
        "header": _HEADER_CHARS,
    }).fetchall()
    return [
        (idx, trusted(ToolCall, {
            "session_id": session_id, "msg_idx": idx, "call_id": call_id, "tool": tool,
            "command": command, "input": input_, "output": output, "status": status,
            "exit_code": exit_code, "started_at": started, "ended_at": ended,
            "result_msg_idx": result_idx,
        }, _CALL_FIELDS))
        for idx, call_id, tool, command, input_, output, status, exit_code, started, ended,
        result_idx in rows
    ]


def background_commands(con: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, str]:
    """Background job id -> the command that started it, over all of a session's calls
    (``polling.background_commands``): a run of re-checks may start long after its job."""
    from analytics.analysis.tagging.polling import SHELL_TOOLS, background_job_started
    from analytics.formats import CLAUDE_BACKGROUND_PREFIX

    found: dict[str, str] = {}
    for command, output in con.execute(
        "SELECT command, left(output, $header) FROM tool_calls WHERE session_id = $sid "
        "AND starts_with(output, $start) AND command IS NOT NULL AND list_contains($shells, "
        "lower(tool)) ORDER BY msg_idx, rowid",
        {"sid": session_id, "header": _HEADER_CHARS, "start": CLAUDE_BACKGROUND_PREFIX,
         "shells": sorted(SHELL_TOOLS)},
    ).fetchall():
        job = background_job_started(output)
        if job is not None:
            found[job] = command
    return found



def runs_boundary(con: duckdb.DuckDBPyConnection, session_id: str, msg_idx: int) -> int:
    """A ``msg_idx`` at most ``msg_idx`` no run of re-checks reaches across: the message
    after the last call before it that ends runs (``polling.ends_runs``) with no re-check
    after it in its message; 0 when there is none."""
    from analytics.analysis.tagging.polling import RECHECK_TOOLS, ends_runs

    hi = msg_idx
    while hi > 0:
        lo = max(0, hi - RUNS_SPAN)
        rechecked: set[int] = set()  # messages with a re-check after the calls seen
        for idx, call in reversed(session_calls(con, session_id, lo, hi - 1)):
            if call.tool in RECHECK_TOOLS:
                rechecked.add(idx)
            elif idx not in rechecked and ends_runs(call):
                return idx + 1
        hi = lo
    return 0


LEADING_CONTEXT_BLOCKS = r"^(\s*<([a-z][a-z0-9_-]*)[^>]*>.*?</[a-z][a-z0-9_-]*>)*\s*"
"""Context an agent puts before the user's words (``<ide_opened_file>…</ide_opened_file>``),
and the white space around it (``trim`` leaves newlines)."""


def refresh_callers(con: duckdb.DuckDBPyConnection, paths: list[str]) -> None:
    """Judge again the campaigns of the sessions that ran subagents, where the caller or a
    subagent was stored from ``paths``: a campaign reads its subagents' measurements
    (``SessionFrames`` places them at the call that ran the subagent), and a subagent's file
    may be stored after its caller's, in the same ingest or a later one, or by another
    worker of a pool."""
    from analytics.analysis.campaigns import find_campaigns
    from analytics.analysis.session import load_session_frames

    callers = con.execute(
        "SELECT DISTINCT p.session_id FROM sessions k JOIN sessions p "
        "ON p.session_id = k.parent_session_id "
        "WHERE list_contains($paths, k.source_path) OR list_contains($paths, p.source_path) "
        "ORDER BY 1",
        {"paths": paths},
    ).fetchall()
    for (session_id,) in callers:
        campaigns, levers = find_campaigns(load_session_frames(con, session_id))
        con.execute("BEGIN TRANSACTION")
        try:
            for table in ("campaigns", "levers"):
                con.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
            append(con, "campaigns", campaigns)
            append(con, "levers", levers)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def refresh_session_stats(con: duckdb.DuckDBPyConnection, session_id: str) -> None:
    con.execute(
        """
        UPDATE sessions SET
            n_messages = s.n,
            started_at = coalesce(sessions.started_at, s.first_ts),
            ended_at = greatest(coalesce(sessions.ended_at, s.last_ts), s.last_ts)
        FROM (SELECT count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts
              FROM messages WHERE session_id = ?) s
        WHERE sessions.session_id = ?
        """,
        [session_id, session_id],
    )
    # Sessions without a native title are named by their first real user request:
    # the words after any leading <ide_opened_file>-style context blocks the agent adds.
    con.execute(
        """
        UPDATE sessions SET title = (
            SELECT left(trim(split_part(body, chr(10), 1)), 100) FROM (
                SELECT msg_idx, trim(regexp_replace(text, $blocks, '', 's')) AS body
                FROM messages
                WHERE session_id = $s AND role = 'user' AND NOT is_compaction_summary)
            WHERE length(body) > 0 AND NOT starts_with(body, '<')
              AND NOT starts_with(body, '[Request interrupted')
            ORDER BY msg_idx LIMIT 1)
        WHERE session_id = $s AND (title IS NULL OR title = '')
        """,
        {"s": session_id, "blocks": LEADING_CONTEXT_BLOCKS},
    )
