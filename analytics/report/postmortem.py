"""The postmortem of one session: Markdown plus PNG charts beside it.

Everything is read from the database; campaigns, levers and readiness verdicts
come from their tables, or are derived on the fly (pure) when the ingest did not
store them. The same database gives a byte-identical report apart from the one
``Generated at`` line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from analytics.analysis.campaigns import comparable_label, describe_changes, tool_measurements
from analytics.analysis.session import SessionFrames, analyse_session, load_session_frames
from analytics.analysis.timeaccounting import ABORT_EVENTS_CTE, time_accounting_select
from analytics.analysis.tooling.launches import disaggregation_role
from analytics.analysis.waits import session_waits
from analytics.command_output import command_output
from analytics.errors import SessionNotFoundError
from analytics.models import BENCHMARK_SOURCES, Campaign, Lever, ReadinessClaim
from analytics.report.charts import metric_chart

GENERATED_PREFIX = "_Generated at "
MAX_TIMELINE = 80
MAX_CLAIMS = 50
"""Claims written out in full (a paragraph each); a long session makes thousands."""
MAX_TABLE_ROWS = 250
"""Rows of the polling-loop and abort tables; the rest stay one SQL query away."""
KEY_EVENTS = (
    "server_ready",
    "oom",
    "crash",
    "uvicorn_running",
    "health_ok",
    "cuda_graph_begin",
    "draft_cuda_graph_begin",
    "cuda_graph_end",
)
FAILURE_EVENTS = ("oom", "crash")
"""Server events that say a launch failed (a relaunch after one acts on a diagnosis)."""
BENCH_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("requests", ("successful_requests",)),
    ("output tok/s", ("output_token_throughput", "throughput_output_tokens")),
    ("total tok/s", ("total_token_throughput", "throughput_total_tokens")),
    ("TTFT median ms", ("ttft_median",)),
    ("TTFT p99 ms", ("ttft_p99",)),
    ("ITL median ms", ("itl_median",)),
    ("accept length", ("accept_length",)),
    ("prefill tok/s", ("prefill_throughput",)),
    ("decode tok/s", ("decode_median_throughput",)),
    ("latency avg s", ("latency_avg",)),
)
"""The benchmark table's columns, each the first of its metrics a run printed (SGLang's
and vLLM's serving benchmarks, ``vllm bench throughput|latency``, ``bench_one_batch``);
a column no run printed is left out."""
HEADLINE_METRICS = (
    "output_token_throughput",
    "throughput_output_tokens",
    "decode_median_throughput",
    "total_token_throughput",
    "throughput_total_tokens",
    "latency_avg",
)
"""The number a timeline names a benchmark run by, the first of these it printed."""


def _missing(value: Any) -> bool:
    """None, NaN, NaT or pandas NA (scalars only)."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _cell(value: Any) -> str:
    if _missing(value):
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _short(text: Any, n: int = 120) -> str:
    flat = " ".join(("" if _missing(text) else str(text)).split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _duration(seconds: Any) -> str:
    if _missing(seconds):
        return "–"
    s = int(round(float(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h {m:02d}m {sec:02d}s" if h else f"{m}m {sec:02d}s"


class _Session:
    """The frames plus what the analysis says about them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        self.frames: SessionFrames = load_session_frames(con, session_id)
        if self.frames.session.empty:
            raise SessionNotFoundError(session_id, "database")
        self.campaigns, self.levers, self.claims = _analysis(con, session_id, self.frames)
        self.times = _time_row(con, session_id)
        self.aborts = _abort_events(con, session_id)
        """(first, last) msg_idx of each user interruption, in order."""
        self.waits = session_waits(con, session_id)
        """The session's waits (``waits.session_waits``), in order."""

    def timed(self) -> bool:
        """Whether any message has a time: without one, every wall-clock duration reads 0."""
        ts = self.frames.messages.get("ts")
        return ts is not None and bool(ts.notna().any())

    def ts(self, msg_idx: int | None) -> str:
        value = self.frames.message_value(msg_idx, "ts")
        if value is None:
            return "–"
        return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S")

    def text(self, msg_idx: int | None) -> str:
        return str(self.frames.message_value(msg_idx, "text") or "")

    def ref(self, msg_idx: int | None) -> str:
        return self.frames.ref(msg_idx)


def _analysis(
    con: duckdb.DuckDBPyConnection, session_id: str, frames: SessionFrames
) -> tuple[list[Campaign], list[Lever], list[ReadinessClaim]]:
    def rows(table: str, order: str) -> list[dict[str, Any]]:
        df = con.execute(
            f"SELECT * FROM {table} WHERE session_id = ? ORDER BY {order}", [session_id]
        ).df()
        return [{k: (None if _isna(v) else v) for k, v in r.items()} for r in df.to_dict("records")]

    campaigns = [Campaign(**r) for r in rows("campaigns", "start_msg_idx, campaign_id")]
    levers = [Lever(**r) for r in rows("levers", "campaign_id, seq")]
    claims = []
    for r in rows("readiness_claims", "msg_idx"):
        ev = r.get("evidence_msg_idx")
        r["evidence_msg_idx"] = json.loads(ev) if isinstance(ev, str) else list(ev or [])
        claims.append(ReadinessClaim(**r))
    tagged = frames.tags
    has_claim_tags = not tagged.empty and bool((tagged["tag"] == "readiness_claim").any())
    if campaigns or claims:
        return campaigns, levers, claims
    fresh = analyse_session(frames)
    return fresh.campaigns, fresh.levers, fresh.claims if has_claim_tags else []


def _isna(value: Any) -> bool:
    return not isinstance(value, list | tuple | dict | str) and pd.isna(value)


def _time_row(con: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any]:
    df = con.execute(
        f"SELECT * FROM ({time_accounting_select()}) WHERE session_id = ?", [session_id]
    ).df()
    return df.to_dict("records")[0] if len(df) else {}


# --------------------------------------------------------------------------- sections


def _header(s: _Session, generated: str) -> list[str]:
    row = s.frames.session.iloc[0]
    title = row.get("title") or row["session_id"]
    return [
        f"# Postmortem: {title}",
        "",
        f"{GENERATED_PREFIX}{generated}_",
        "",
        f"- Session: `{row['session_id']}` ({row['source_format']})",
        f"- Agent: {_cell(row.get('agent'))}; model: {_cell(row.get('model'))}",
        _period(s),
        "",
    ]


def _period(s: _Session) -> str:
    """From the first to the last message that has a time (a last record without one,
    e.g. a Codex event, must not end the period at "–")."""
    msgs = s.frames.messages
    timed = msgs.loc[msgs["ts"].notna(), "msg_idx"] if "ts" in msgs else pd.Series(dtype=int)
    if timed.empty:
        return "- No timestamps."
    return f"- From {s.ts(int(timed.min()))} to {s.ts(int(timed.max()))}"


def _summary(s: _Session) -> list[str]:
    f = s.frames
    msgs = f.messages
    roles = msgs["role"].value_counts().to_dict() if not msgs.empty else {}
    tags = f.tags
    n_tag = (
        (lambda t: int(tags.loc[tags["tag"] == t, "msg_idx"].nunique()))
        if not tags.empty
        else (lambda t: 0)
    )
    verdicts = {
        v: sum(1 for c in s.claims if c.verdict == v)
        for v in ("premature", "supported", "unverified")
    }
    lines = ["## Summary", ""]
    system = f", {roles['system']} system" if roles.get("system") else ""
    lines.append(
        f"- {len(msgs)} messages ({roles.get('user', 0)} user, {roles.get('assistant', 0)} assistant, "
        f"{roles.get('tool', 0)} tool{system}), {len(f.tool_calls)} tool calls."
    )
    lines.append(
        f"- {_count(len(s.aborts), 'user abort')}, "
        f"{_count(n_tag('user_checkin'), 'check-in')}, "
        f"{_count(len(f.polling_loops), 'polling loop')}"
        + (f" in {_count(len(s.waits), 'wait')}" if s.waits else "")
        + f" ({_duration(s.times.get('polling_wait_s'))} waiting)."
    )
    lines.append(
        f"- {len(s.claims)} readiness claims: {verdicts['premature']} premature, "
        f"{verdicts['supported']} supported, {verdicts['unverified']} unverified."
    )
    for c in s.campaigns:
        own = [lv for lv in s.levers if lv.campaign_id == c.campaign_id]
        counts = pd.Series([lv.outcome for lv in own]).value_counts().to_dict() if own else {}
        outcome_words = ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in sorted(counts.items()))
        lines.append(
            f"- Campaign “{_short(c.goal_text, 90)}” ({c.target_metric}): baseline "
            f"{_cell(c.baseline_value)}, best {_cell(c.best_value)}, target {_cell(c.target_value)} "
            f"{c.unit or ''} — **{c.status}** after {len(own)} levers"
            + (f" ({outcome_words})." if outcome_words else ".")
        )
    if not s.campaigns:
        lines.append("- No optimisation campaign (no stated performance target).")
    return lines + [""]


def _timeline(s: _Session) -> list[str]:
    f = s.frames
    events: list[tuple[int, int, str]] = []
    for c in s.campaigns:
        events.append((c.start_msg_idx or 0, 0, f"goal stated: “{_short(c.goal_text, 90)}”"))
    for lv in s.levers:
        events.append((lv.start_msg_idx or 0, 1, f"lever {lv.seq} starts: {lv.name}"))
        if lv.evidence_msg_idx is not None:
            events.append(
                (
                    lv.evidence_msg_idx,
                    5,
                    f"lever {lv.seq} {lv.name}: **{lv.outcome}**"
                    + (f" ({lv.delta_pct:+.1f}%)" if lv.delta_pct is not None else ""),
                )
            )
    if not f.launches.empty:
        for r in f.launches.itertuples(index=False):
            changed = r.changed_flags if isinstance(r.changed_flags, dict) else None
            what = (
                describe_changes(changed)
                if changed
                else "restart"
                if changed == {}
                else "first launch"
            )
            flags = r.flags if isinstance(r.flags, dict) else {}
            role = disaggregation_role(flags)
            server = f"{r.engine} {role}" if role else r.engine
            events.append((int(r.msg_idx), 2, f"launch ({server}): {_short(what, 80)}"))
    for msg_idx, event in _server_events_first_seen(f.server_events):
        events.append((msg_idx, 3, f"server: {event}"))
    for msg_idx, quote in _diagnoses_acted_on(s):
        events.append((msg_idx, 5, f"diagnosis “{quote}”"))
    if not f.tags.empty:
        # an interruption is one event however many marker records it wrote
        later_markers = {
            i for first, last in s.aborts for i in range(first + 1, last + 1)
        }
        for r in f.tags.drop_duplicates(["msg_idx", "tag"]).itertuples(index=False):
            if r.tag == "user_abort" and int(r.msg_idx) in later_markers:
                continue
            if r.tag in ("user_checkin", "user_abort"):
                quote = (
                    f" “{_short(r.evidence, 40)}”"
                    if isinstance(r.evidence, str) and r.evidence
                    else ""
                )
                events.append((int(r.msg_idx), 4, f"{r.tag.replace('_', ' ')}{quote}"))
    for claim in s.claims:
        events.append(
            (
                claim.msg_idx,
                6,
                f"readiness claim “{_short(claim.claim_text, 60)}”: **{claim.verdict}**",
            )
        )
    if not f.measurements.empty and s.campaigns:
        metrics = {c.target_metric for c in s.campaigns}
        measured = tool_measurements(f.measurements)
        for r in measured[measured["metric"].isin(metrics)].itertuples(index=False):
            # (the load conditions: which launch or repeat a run was is not one)
            conditions = comparable_label(r.label) if isinstance(r.label, str) else None
            label = f" @ {conditions}" if conditions else ""
            events.append((int(r.msg_idx), 4, f"measured {r.metric}{label} = {r.value:g}"))
    if not s.campaigns:  # (a campaign's runs are named by its target metric above)
        for run in benchmark_runs(f.measurements):
            events.append((run.msg_idx, 4, _run_event(run)))
    events = sorted(set(events))
    lines = ["## Timeline", ""]
    if len(events) > MAX_TIMELINE:
        lines += [f"_First {MAX_TIMELINE} of {len(events)} key events._", ""]
    if not events:
        return lines + ["No key events.", ""]
    rows = [[s.ref(i), s.ts(i), what] for i, _, what in events[:MAX_TIMELINE]]
    return lines + _table(["message", "time", "event"], rows) + [""]


def _server_events_first_seen(server_events: pd.DataFrame) -> list[tuple[int, str]]:
    """The key server events, each log line at the message that first showed it: a
    ``grep`` or ``tail`` of a log read earlier shows its stamped lines again, which is no
    new event (a graph capture "beginning" again after the server crashed). A line
    without a time of its own (``log_ts``) cannot be told from a new one and is kept."""
    if server_events.empty:
        return []
    out: list[tuple[int, str]] = []
    shown: dict[tuple[str, object, object], int] = {}
    for r in server_events.itertuples(index=False):
        if r.event not in KEY_EVENTS:
            continue
        msg_idx, stamp = int(r.msg_idx), getattr(r, "log_ts", None)
        if not _missing(stamp):
            first = shown.setdefault((r.event, r.detail, stamp), msg_idx)
            if first != msg_idx:
                continue
        out.append((msg_idx, r.event))
    return out


def _diagnoses_acted_on(s: _Session) -> list[tuple[int, str]]:
    """For each relaunch after a launch that failed (an OOM or crash line first seen, or a
    message tagged ``error``, between the two), the last diagnosis before the relaunch,
    the one it acted on: (its msg_idx, its words from the start of the sentence holding
    the tagged span)."""
    f = s.frames
    if f.launches.empty or f.tags.empty:
        return []
    launches = sorted({int(i) for i in f.launches["msg_idx"]})
    tags = f.tags
    diagnoses = tags[tags["tag"] == "diagnosis"].drop_duplicates("msg_idx", keep="first")
    failed_at = {int(i) for i in tags.loc[tags["tag"] == "error", "msg_idx"]}
    failed_at |= {
        i for i, event in _server_events_first_seen(f.server_events) if event in FAILURE_EVENTS
    }
    out = []
    for before, relaunch in zip(launches, launches[1:], strict=False):
        if not any(before <= i < relaunch for i in failed_at):
            continue
        between = diagnoses[(diagnoses["msg_idx"] > before) & (diagnoses["msg_idx"] < relaunch)]
        if len(between):
            last = between.iloc[-1]
            out.append((int(last["msg_idx"]), _diagnosis_quote(s.text(int(last["msg_idx"])), last)))
    return out


_CLAUSE_END = re.compile(r"[.!?](?=\s)|\n|\s[—–]\s")
"""Where a sentence or a clause set off by a dash ends (the next one starts after it)."""


def _diagnosis_quote(text: str, tag: Any) -> str:
    """A diagnosis's words from the start of the sentence (or dashed clause) holding its
    tagged span (the message's first words without a span)."""
    start = tag.get("start_char")
    if not _missing(start) and 0 <= int(start) < len(text):
        ends = [m.end() for m in _CLAUSE_END.finditer(text, 0, int(start))]
        text = text[ends[-1] if ends else 0:]
    return _short(text, 70)


@dataclass
class BenchRun:
    """One benchmark result a tool printed: its message, its load (``comparable_label``)
    and its numbers by metric."""

    msg_idx: int
    load: str | None
    values: dict[str, float]

    def first(self, metrics: tuple[str, ...]) -> float | None:
        return next((self.values[m] for m in metrics if m in self.values), None)


def benchmark_runs(measurements: pd.DataFrame) -> list[BenchRun]:
    """The benchmark results of a session in message order: the numbers one message printed
    at one label are a run, a second block at the same label in the same output another."""
    if measurements.empty or "source" not in measurements.columns:
        return []
    rows = measurements[measurements["source"].isin(BENCHMARK_SOURCES)]
    runs: dict[tuple[int, str | None, int], dict[str, float]] = {}
    seen: dict[tuple[int, str | None, str], int] = {}
    for r in rows.itertuples(index=False):
        label = r.label if isinstance(r.label, str) else None
        key = (int(r.msg_idx), label, str(r.metric))
        nth = seen[key] = seen.get(key, -1) + 1
        runs.setdefault((int(r.msg_idx), label, nth), {})[str(r.metric)] = float(r.value)
    ordered = sorted(runs.items(), key=lambda item: item[0][0])  # (stable: printed order)
    return [BenchRun(i, comparable_label(label), values) for (i, label, _), values in ordered]


def _run_event(run: BenchRun) -> str:
    at = f" @ {run.load}" if run.load else ""
    metric = next((m for m in HEADLINE_METRICS if m in run.values), None)
    return f"benchmark{at}" + (f": {metric} = {run.values[metric]:g}" if metric else "")


def _benchmarks(s: _Session) -> list[str]:
    lines = ["## Benchmarks", ""]
    runs = benchmark_runs(s.frames.measurements)
    if not runs:
        return lines + ["None.", ""]
    columns = [
        (header, metrics)
        for header, metrics in BENCH_COLUMNS
        if any(run.first(metrics) is not None for run in runs)
    ]
    if len(runs) > MAX_TABLE_ROWS:
        lines += [
            f"_The first {MAX_TABLE_ROWS} of {len(runs)} runs; every number is in the "
            "`measurements` table._",
            "",
        ]
    lines += [f"{_count(len(runs), 'benchmark run')}, as the benchmark printed them:", ""]
    timed = s.timed()
    rows = [
        [
            s.ref(run.msg_idx),
            *([s.ts(run.msg_idx)] if timed else []),
            run.load,
            *(run.first(metrics) for _, metrics in columns),
        ]
        for run in runs[:MAX_TABLE_ROWS]
    ]
    headers = ["message", *(["time"] if timed else []), "load", *(h for h, _ in columns)]
    return lines + _table(headers, rows) + [""]


def _campaigns(s: _Session, out: Path) -> list[str]:
    lines = ["## Campaigns", ""]
    if not s.campaigns:
        return lines + ["None found.", ""]
    for n, c in enumerate(s.campaigns, start=1):
        own = [lv for lv in s.levers if lv.campaign_id == c.campaign_id]
        lines += [
            f"### Campaign {n}: {c.target_metric}",
            "",
            f"> {_short(c.goal_text, 300)} ({s.ref(c.start_msg_idx)})",
            "",
            f"Target {_cell(c.target_value)} {c.unit or ''}; baseline {_cell(c.baseline_value)}; "
            f"best {_cell(c.best_value)}; status **{c.status}** "
            f"({s.ref(c.start_msg_idx)} → {s.ref(c.end_msg_idx)}).",
            "",
        ]
        rows = [
            [
                lv.seq,
                lv.name,
                f"**{lv.outcome}**",
                lv.value_before,
                lv.value_after,
                None if lv.delta_pct is None else f"{lv.delta_pct:+.1f}%",
                f"{s.ref(lv.start_msg_idx)} → {s.ref(lv.end_msg_idx)}",
            ]
            for lv in own
        ]
        lines += _table(["#", "lever", "outcome", "before", "after", "Δ", "messages"], rows) + [""]
        lines += [f"{lv.seq}. {lv.name}: {_short(lv.description, 400)}" for lv in own] + [""]
        chart = out.with_name(f"{out.stem}-campaign{n}.png")
        if metric_chart(c, own, tool_measurements(s.frames.measurements), chart):
            lines += [f"![{c.target_metric} over the session]({chart.name})", ""]
    return lines


def _claims_listed(claims: list[ReadinessClaim]) -> list[ReadinessClaim]:
    """At most MAX_CLAIMS claims, in message order: the premature ones first (a
    postmortem's findings), then the earliest of the others."""
    if len(claims) <= MAX_CLAIMS:
        return claims
    ranked = sorted(claims, key=lambda c: (c.verdict != "premature", c.msg_idx))
    return sorted(ranked[:MAX_CLAIMS], key=lambda c: c.msg_idx)


def _claims(s: _Session) -> list[str]:
    lines = ["## Readiness claims", ""]
    if not s.claims:
        return lines + ["None.", ""]
    listed = _claims_listed(s.claims)
    if len(listed) < len(s.claims):
        lines += [
            f"_{len(listed)} of {len(s.claims)} claims: the premature ones first, then the "
            "earliest; every claim is in the `readiness_claims` table._",
            "",
        ]
    for c in listed:
        lines += [
            f"### {s.ref(c.msg_idx)} ({s.ts(c.msg_idx)}) — **{c.verdict}** ({c.subject})",
            "",
            f"> {_short(c.claim_text, 300)}",
            "",
            f"{c.reason}",
            "",
        ]
        if c.evidence_msg_idx:
            lines.append(
                "Evidence before it: " + ", ".join(s.ref(i) for i in c.evidence_msg_idx) + "."
            )
        if c.contradicted_by_msg_idx is not None:
            quote = _contradiction_quote(s, c.contradicted_by_msg_idx)
            lines.append(f"Contradicted by {s.ref(c.contradicted_by_msg_idx)}: `{quote}`")
        lines.append("")
    return lines


def _contradiction_quote(s: _Session, msg_idx: int) -> str:
    tc = s.frames.tool_calls
    if not tc.empty:
        rows = tc[(tc["result_msg_idx"] == msg_idx) | (tc["msg_idx"] == msg_idx)]
        printed = (command_output(o).text for o in rows["output"] if isinstance(o, str))
        outputs = [text for text in printed if text.strip()]
        if outputs:
            return _short(outputs[-1], 160).replace("`", "'")
    return _short(s.text(msg_idx), 160).replace("`", "'")


def _polling(s: _Session) -> list[str]:
    f = s.frames
    lines = ["## Polling and aborts", ""]
    pl = f.polling_loops
    if pl.empty:
        lines += ["No polling loops.", ""]
    else:
        outcomes = pl["outcome"].value_counts().sort_index().to_dict()
        waits = s.waits
        lines += [
            f"{_count(len(pl), 'polling loop')} in {_count(len(waits), 'wait')} (a wait: the "
            "polls of one target until one ends it ready, failed, aborted or timed out, or "
            "a server is launched); loop outcomes: "
            + ", ".join(f"{k} {v}" for k, v in outcomes.items())
            + f"; waited {_duration(s.times.get('polling_wait_s'))} in total.",
            "",
        ]
        listed = waits
        if len(waits) > MAX_TABLE_ROWS:
            longest = sorted(
                waits,
                key=lambda w: (_missing(w.waited_s), -(w.waited_s or 0.0), w.first_msg_idx),
            )
            listed = sorted(longest[:MAX_TABLE_ROWS], key=lambda w: w.wait_no)
            lines += [
                f"_{len(listed)} of {len(waits)} waits: the longest, in message order; every "
                "wait is in the `v_waits` view, every loop in the `polling_loops` table._",
                "",
            ]
        timed = s.timed()
        rows = [
            [
                w.wait_no,
                s.ref(w.first_msg_idx),
                *([s.ts(w.first_msg_idx)] if timed else []),
                s.ref(w.last_msg_idx) if w.last_msg_idx != w.first_msg_idx else "–",
                w.polls,
                _interval(w.interval_min_s, w.interval_max_s),
                _duration(w.waited_s),
                w.checkins,
                w.outcome,
                _short(w.target, 50),
            ]
            for w in listed
        ]
        lines += _table(
            ["wait", "first poll", *(["time"] if timed else []), "last poll", "polls",
             "every", "waited", "check-ins", "ended", "target"],
            rows,
        ) + [""]
    tags = f.tags
    aborts = s.aborts
    checkins = (
        sorted({int(i) for i in tags.loc[tags["tag"] == "user_checkin", "msg_idx"]})
        if not tags.empty
        else []
    )
    lines.append(
        f"{_count(len(aborts), 'user abort')}; {_count(len(checkins), 'check-in')}; "
        "time lost after aborts "
        f"{_duration(s.times.get('lost_after_aborts_s'))}; check-in latency avg "
        f"{_duration(s.times.get('checkin_latency_avg_s'))}, max {_duration(s.times.get('checkin_latency_max_s'))}."
    )
    lines.append("")
    rows = []
    if len(aborts) > MAX_TABLE_ROWS:
        lines += [f"_The first {MAX_TABLE_ROWS} of {len(aborts)} user aborts._", ""]
    for first, last in aborts[:MAX_TABLE_ROWS]:
        follow = next((c for c in checkins if last < c <= last + 3), None)
        rows.append(
            [
                s.ref(first),
                s.ts(first),
                _aborted_what(s, first, last),
                "–" if follow is None else f"{s.ref(follow)} “{_short(s.text(follow), 30)}”",
            ]
        )
    if rows:
        lines += _table(["abort at", "time", "aborted", "check-in after"], rows) + [""]
    return lines


def _interval(low: Any, high: Any) -> str:
    """The sleep between a wait's polls: one value, or the range of them."""
    if _missing(low) or _missing(high):
        return "–"
    a, b = f"{float(low):g}", f"{float(high):g}"
    return f"{a} s" if a == b else f"{a}–{b} s"


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 ("1 user abort", "3 check-ins")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _abort_events(con: duckdb.DuckDBPyConnection, session_id: str) -> list[tuple[int, int]]:
    """(first, last) msg_idx of each user interruption, as the views count them
    (``ABORT_EVENTS_CTE``: a run of consecutive messages tagged ``user_abort`` is one)."""
    rows = con.execute(
        f"WITH {ABORT_EVENTS_CTE.strip()} SELECT msg_idx, last_msg_idx FROM abort_events "
        "WHERE session_id = ? ORDER BY msg_idx",
        [session_id],
    ).fetchall()
    return [(int(first), int(last)) for first, last in rows]


def _aborted_what(s: _Session, first: int, last: int) -> str:
    """The command of the call the interruption stopped, else its marker's text."""
    tc = s.frames.tool_calls
    if not tc.empty:
        inside = tc["msg_idx"].between(first, last) | tc["result_msg_idx"].between(first, last)
        rows = tc[inside & tc["command"].notna()]
        if len(rows):
            return _short(one_line(rows["command"].iloc[-1]), 70)
    return _short(s.text(first), 70)


_OPENS = ("do", "then", "else", "{", "(", "|", "&&", "||", "&", ";")
"""Line ends after which the shell reads on (a newline there is no command separator)."""


def one_line(command: str) -> str:
    """A multi-line shell command as one line that reads the same: each line break that
    ends a command becomes ``; `` (``for …; do sleep 25; r=$(…)``, not ``do sleep 25
    r=$(…)``), the others a space."""
    out = ""
    for line in (part.strip() for part in command.splitlines()):
        if not line:
            continue
        if out.endswith("\\"):  # a continued line
            out = out[:-1].rstrip()
        elif out and not out.endswith(_OPENS):
            out += ";"
        out = f"{out} {line}" if out else line
    return out


def _time_accounting(s: _Session) -> list[str]:
    t = s.times
    lines = ["## Time accounting", ""]
    if not t or not s.timed():
        return lines + ["No timestamps.", ""]
    threshold = _duration(t.get("idle_threshold_s"))
    rows = [
        ["wall clock (first to last message)", _duration(t.get("wall_clock_s"))],
        ["agent working", _duration(t.get("agent_working_s"))],
        ["  of which tool calls", _duration(t.get("tool_s"))],
        ["  of which polling loops", _duration(t.get("polling_wait_s"))],
        ["waiting for the user", _duration(t.get("waiting_for_user_s"))],
        [
            f"idle (gaps over {threshold}, {int(t.get('idle_gaps') or 0)} gaps)",
            _duration(t.get("idle_s")),
        ],
        ["lost after aborts", _duration(t.get("lost_after_aborts_s"))],
        ["aborted tool calls", _duration(t.get("aborted_tool_s"))],
    ]
    return lines + _table(["where", "time"], rows) + [""]


def write_report(con: duckdb.DuckDBPyConnection, session_id: str, out: Path) -> Path:
    """Write the postmortem of ``session_id`` to ``out`` (Markdown) with PNG charts
    beside it; return ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    s = _Session(con, session_id)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = (
        _header(s, generated)
        + _summary(s)
        + _timeline(s)
        + _campaigns(s, out)
        + _benchmarks(s)
        + _claims(s)
        + _polling(s)
        + _time_accounting(s)
    )
    out.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return out
