"""Optimisation campaigns: a stated target, a baseline, and the levers pulled.

A *goal* is a target somebody states ("~1000 tok/s", "2x faster", "TTFT under
200 ms"). A *lever* is a change (a named technique, a launch whose flags
changed, an env change) followed by a measurement of the goal's metric under
the same conditions (same ``label``, e.g. ``concurrency=16``; keys that name the
run rather than the load, such as ``launch_msg_idx``, are ignored). The lever's
outcome compares that measurement with the value of the configuration in force
before it: the baseline, or the last lever that was kept (improved/no effect).

Knowledge lives in ``data/levers.json``, ``data/targets.json`` and
``data/failures.json``; this module only walks the session's events in order.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from analytics.analysis.literals import Gated, lowered, text_of
from analytics.analysis.tooling.launches import server_of
from analytics.command_output import command_output
from analytics.models import PROSE_SOURCES, Campaign, Lever

if TYPE_CHECKING:
    import pandas as pd

    from analytics.analysis.session import SessionFrames

NO_EFFECT_PCT = 3.0
Outcome = Literal["improved", "no_effect", "worse", "failed", "not_applicable", "pending"]
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_SEARCH_COMMAND = re.compile(r"^\s*(?:grep|rg|ag|find|ls|git|cat\s+\S+\.py|sed -n)\b")
_ASSISTANT_FAILURE = Gated.compile(
    r"\b(fail(?:s|ed|ing)?|crash(?:ed|es)?|oom(?:'d|ed)?|out of memory|invalid|not supported|"
    r"unsupported|doesn'?t work|does not work|won'?t (?:compile|work)|can'?t|cannot)\b",
    re.I,
)


# --------------------------------------------------------------------------- knowledge


def _isna(value: object) -> bool:
    """``pd.isna`` of a table's value: pandas is imported when first asked, not with this
    module, which the tagging worker imports for the goals stated in prose and which has no
    pandas loaded (a fifth of a second)."""
    import pandas as pd

    return bool(pd.isna(value))


def _load(name: str) -> dict[str, Any]:
    text = resources.files("analytics.analysis").joinpath("data", name).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass(frozen=True)
class LeverSpec:
    name: str
    role: str
    patterns: tuple[Gated, ...]
    flags: frozenset[str]
    env_prefixes: tuple[str, ...]

    def matches_flag(self, flag: str) -> bool:
        if flag.startswith("env:"):
            return any(flag[4:].startswith(p) for p in self.env_prefixes)
        return flag in self.flags

    def first_match(self, text: str, low: str | None) -> int | None:
        """Where the first of the patterns matches ``text`` (``low``: :func:`lowered` text)."""
        hits = [m.start() for p in self.patterns if (m := p.search(text, low))]
        return min(hits) if hits else None


@dataclass(frozen=True)
class Vocabulary:
    levers: tuple[LeverSpec, ...]
    start_cues: Gated
    na_cues: Gated
    revert_cues: Gated
    recap_min_levers: int
    version: int


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    data = _load("levers.json")
    specs = tuple(
        LeverSpec(
            name=item["name"],
            role=item.get("role", "primary"),
            patterns=tuple(Gated.compile(p, re.I) for p in item["patterns"]),
            flags=frozenset(item.get("flags", [])),
            env_prefixes=tuple(item.get("env_prefixes", [])),
        )
        for item in data["levers"]
    )
    return Vocabulary(
        levers=specs,
        start_cues=Gated.compile(data["start_cues"], re.I),
        na_cues=Gated.compile(data["not_applicable_cues"], re.I),
        revert_cues=Gated.compile(data["revert_cues"], re.I),
        recap_min_levers=int(data.get("recap_min_levers", 3)),
        version=int(data["version"]),
    )


@lru_cache(maxsize=1)
def _targets() -> dict[str, Any]:
    return _load("targets.json")


@lru_cache(maxsize=1)
def named_cue() -> re.Pattern[str]:
    """The cues that name the target itself ("target", "goal"): see :func:`_nearest_cue`."""
    return re.compile(str(_targets()["named_cue"]), re.I)


@lru_cache(maxsize=1)
def target_cue() -> re.Pattern[str]:
    """The words that make a number a target ("we need", "get above", ">="), as a regex:
    what a goal needs, and what makes a number stated in prose a bound, not a reading."""
    return re.compile(str(_targets()["cue"]), re.I)


@lru_cache(maxsize=1)
def _concurrency_patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.I) for p in _targets().get("concurrency_patterns", []))


def stated_concurrency(*texts: str) -> int | None:
    """The concurrency a target names, read in the first of ``texts`` that names one
    (the goal's sentence, then its whole message): the earliest match in that text."""
    for text in texts:
        found = [m for p in _concurrency_patterns() if (m := p.search(text))]
        if found:
            return int(min(found, key=lambda m: m.start()).group("n"))
    return None


@lru_cache(maxsize=1)
def _failure_patterns() -> tuple[tuple[str, Gated], ...]:
    data = _load("failures.json")
    return tuple((p["kind"], Gated.compile(p["regex"], re.I)) for p in data["patterns"])


def failure_kind(text: str) -> str | None:
    """The first failure signature in ``text`` (OOM, build/JIT failure, …), or None."""
    text = text or ""
    low = lowered(text)
    for kind, pattern in _failure_patterns():
        if pattern.search(text, low):
            return kind
    return None


def lower_is_better(metric: str | None, unit: str | None = None) -> bool:
    name = (metric or "").lower()
    if "throughput" in name or "accept" in name or (unit or "").lower() in ("tok/s", "token/s"):
        return False
    return bool(re.search(r"ttft|tpot|itl|latency|_ms\b|duration", name)) or unit in ("ms", "s")


def classify_delta(delta_pct: float, lower_better: bool) -> Outcome:
    gain = -delta_pct if lower_better else delta_pct
    if gain >= NO_EFFECT_PCT:
        return "improved"
    if gain <= -NO_EFFECT_PCT:
        return "worse"
    return "no_effect"


# --------------------------------------------------------------------------- goals


@dataclass
class Goal:
    msg_idx: int
    text: str
    family: str
    value: float | None
    factor: float | None
    unit: str
    percentile: str | None = None  # "p99" when the target names one ("p99 TTFT under …")
    concurrency: int | None = None  # the load it names ("at concurrency 64")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_BREAK.split(text or "") if s.strip()]


@dataclass(frozen=True)
class _TargetPattern:
    family: str
    kind: str
    needs_cue: bool
    regex: Gated


@lru_cache(maxsize=1)
def _target_patterns() -> tuple[Gated, tuple[_TargetPattern, ...]]:
    cfg = _targets()
    patterns = tuple(
        _TargetPattern(
            p["family"], p["kind"], bool(p["needs_cue"]), Gated.compile(p["regex"], re.I)
        )
        for p in cfg["patterns"]
    )
    return Gated.compile(cfg["cue"], re.I), patterns


_DIGIT = re.compile(r"\d")
ASCII_DIGITS = "0123456789"
# The same test as a DuckDB condition on ``{column}`` (a str.format template). Ten
# substring tests run at memory speed, 3x faster than regexp_matches(text, '\p{Nd}'); a
# text without an ASCII digit can only hold another decimal digit if it has non-ASCII
# characters (strlen counts bytes, length characters), and there RE2's class decides.
DIGIT_SQL = (
    "("
    + " OR ".join(f"contains({{column}}, '{d}')" for d in ASCII_DIGITS)
    + r" OR (strlen({column}) <> length({column}) AND regexp_matches({column}, '\p{{Nd}}')))"
)


def _factor_words() -> dict[str, float]:
    """Words that state a factor ("double the throughput"), from targets.json."""
    return {str(w): float(f) for w, f in _targets().get("factor_words", {}).items()}


@lru_cache(maxsize=1)
def _factor_stems() -> tuple[str, ...]:
    """The factor words without their first letter, so that substring tests find "Double"
    and "double" alike (the forms of :func:`number_filter` look for these)."""
    return tuple(sorted({w[1:] for w in _factor_words()}))


@lru_cache(maxsize=1)
def number_filter() -> tuple[str, re.Pattern[str]]:
    """Text that can state a target, as a DuckDB condition on ``{column}`` and as a
    Python regex. Every target pattern has a mandatory number (``value`` or ``factor``:
    a digit or a factor word such as "double"), so text without one states no target;
    testing that first skips most text cheaply (a factor word as ``_factor_stems``)."""
    stems = _factor_stems()
    words = "".join(f" OR contains({{column}}, '{s}')" for s in stems)
    sql = f"({DIGIT_SQL}{words})"
    return sql, re.compile("|".join([_DIGIT.pattern, *map(re.escape, stems)]))


# "p99 TTFT", "P95", "99th percentile": a latency target on a tail, not on the mean;
# "median" is the 50th percentile ("p50"); "mean"/"average" name the mean. Read next to
# the target only ("mean TTFT under 200 ms (p99 under 400)" is a target on the mean).
_STATISTIC = re.compile(
    r"\b(?:p(\d{2})|(\d{2})(?:th)?[ -]percentile|(median)|mean|average|avg)\b", re.I
)
_STATISTIC_REACH = 16
# The names a measured metric gives a percentile (``ttft_median`` is the p50 row).
_PERCENTILE_NAMES = {"p50": ("p50", "median")}


def _percentile(sentence: str, target: re.Match[str]) -> str | None:
    """The percentile a target names just before it or inside it ("p99" in "we need p99
    TTFT under 800 ms", "p50" for "median TTFT under 200 ms"), None for the mean or no
    statistic at all."""
    before = sentence[max(0, target.start() - _STATISTIC_REACH) : target.start()]
    found = list(_STATISTIC.finditer(before)) or list(_STATISTIC.finditer(target.group(0)))[:1]
    if not found:
        return None
    if found[-1].group(3):
        return "p50"
    digits = found[-1].group(1) or found[-1].group(2)
    return f"p{digits}" if digits else None


def _goal_in(sentence: str, msg_idx: int) -> Goal | None:
    if not number_filter()[1].search(sentence):
        return None
    cue, patterns = _target_patterns()
    families = _targets()["metric_families"]
    low = lowered(sentence)
    for pat in patterns:
        m = pat.regex.search(sentence, low)
        if not m or (pat.needs_cue and not cue.search(sentence, low)):
            continue
        family = families[pat.family]
        groups = m.groupdict()
        if pat.kind == "relative":
            word = (groups.get("word") or "").lower()
            factor = _factor_words()[word] if word else float(groups["factor"])
            if not 1.0 < factor <= 100:
                continue
            return Goal(msg_idx, sentence, pat.family, None, factor, family["unit"])
        if pat.needs_cue:
            m = _nearest_cue(pat.regex.regex, sentence, m)
            groups = m.groupdict()
        value = float(groups["value"].replace(",", ""))
        if groups.get("k"):
            value *= 1000
        if groups.get("unit") == "s" and family["unit"] == "ms":
            value *= 1000
        percentile = _percentile(sentence, m) if family["lower_is_better"] else None
        return Goal(msg_idx, sentence, pat.family, value, None, family["unit"], percentile)
    return None


def _nearest_cue(regex: re.Pattern[str], sentence: str, first: re.Match[str]) -> re.Match[str]:
    """Of the matches of ``regex`` in ``sentence`` (``first`` the first), the target: the
    one nearest a cue that names it ("above the 2000 tok/s target", "short of our goal of
    2000 tok/s"), else nearest any cue. A sentence reporting a result against its target
    holds both numbers, the result often first."""
    matches = list(regex.finditer(sentence))
    if len(matches) < 2:
        return first
    cues = list(named_cue().finditer(sentence)) or list(target_cue().finditer(sentence))
    if not cues:
        return first

    def distance(m: re.Match[str]) -> int:
        return min(max(c.start() - m.end(), m.start() - c.end(), 0) for c in cues)

    return min(matches, key=distance)  # (the first of equals: min keeps the earliest)


@lru_cache(maxsize=1)
def number_filter_re2() -> str:
    """``number_filter``'s regex for RE2 (Arrow's ``match_substring_regex``): the same
    texts, as far as the two engines' Unicode tables agree (a decimal digit is ``\\p{Nd}``
    there, as ``\\d`` is in Python's ``str`` regexes)."""
    return "|".join([r"\p{Nd}", *map(re.escape, _factor_stems())])


def may_state_goal(text: str) -> bool:
    """``number_filter``'s regex finds something in ``text``: in ASCII text (where ``\\d``
    is an ASCII digit) as substring tests of the digits and the factor stems, a tenth of
    the regex's time over prose, most of which holds none."""
    if text.isascii():
        return any(map(text.__contains__, ASCII_DIGITS)) or any(
            map(text.__contains__, _factor_stems())
        )
    return number_filter()[1].search(text) is not None


def find_goals(messages: pd.DataFrame) -> list[Goal]:
    """Every target statement by the user or the assistant, in message order."""
    if messages.empty:
        return []
    return goals_in(zip(
        messages["msg_idx"].tolist(),
        messages["role"].tolist(),
        messages["text"].tolist(),
        strict=True,
    ))


def goals_in(messages: Iterable[tuple[int, str, object]]) -> list[Goal]:
    """:func:`find_goals` of messages given as (msg_idx, role, text), in their order: a
    message states a goal or not whatever the messages around it say, so the goals of a
    session are those of its parts one after another."""
    goals: list[Goal] = []
    for msg_idx, role, value in messages:
        if role not in ("user", "assistant"):
            continue
        text = text_of(value)
        if not may_state_goal(text):
            continue
        for sentence in sentences(text):
            goal = _goal_in(sentence, int(msg_idx))
            if goal:
                goal.concurrency = stated_concurrency(sentence, text)
                goals.append(goal)
                break
    return goals


def choose_metric(family: str, measurements: pd.DataFrame, percentile: str | None = None) -> str:
    """The measured metric that best represents a goal's family: the goal's percentile
    (``ttft_p99`` for "p99 TTFT under 800 ms") when one is stated and measured."""
    spec = _targets()["metric_families"][family]
    if measurements.empty:
        return str(spec["preferred"][0])
    counts = Counter(str(m) for m in measurements["metric"])
    if percentile:
        match = re.compile(spec["match"], re.I)
        names = set(_PERCENTILE_NAMES.get(percentile, (percentile,)))
        tails = [
            (n, c) for n, c in counts.items() if match.search(n) and names & set(n.split("_"))
        ]
        if tails:
            return sorted(tails, key=lambda nc: (-nc[1], nc[0]))[0][0]
    for name in spec["preferred"]:
        if counts.get(name, 0) >= 1:
            return str(name)
    match, exclude = re.compile(spec["match"], re.I), re.compile(spec["exclude"], re.I)
    fitting = [(n, c) for n, c in counts.items() if match.search(n) and not exclude.search(n)]
    if fitting:
        return sorted(fitting, key=lambda nc: (-nc[1], nc[0]))[0][0]
    return str(spec["preferred"][0])


# --------------------------------------------------------------------------- labels


def label_keys(label: str | None) -> dict[str, str]:
    """``concurrency=64,request_rate=8`` as a dict (parts without ``=`` keep an empty value)."""
    out: dict[str, str] = {}
    for part in (label or "").split(","):
        key, _, value = part.strip().partition("=")
        if key:
            out[key] = value
    return out


def comparable_label(label: str | None) -> str | None:
    """The load conditions of a measurement label: the label without the keys that name
    the run (``launch_msg_idx``, ``run``, …; see ``label_ignore_keys`` in targets.json).
    Two measurements are comparable when their comparable labels are equal."""
    if label is None:
        return None
    ignore = set(_targets().get("label_ignore_keys", []))
    kept = [p.strip() for p in label.split(",") if p.strip().partition("=")[0] not in ignore]
    return ",".join(kept) or None


def load_name(label: str | None, goal_concurrency: int | None = None) -> str | None:
    """What a chart calls the series of a measurement: its load (``comparable_label``:
    runs of every launch at concurrency 64 are one series), marked as the goal's when it is
    at the concurrency the goal names (``stated_concurrency``), so that a run at another
    load above the target line is not read as the target met."""
    load = comparable_label(label)
    if load is not None and goal_concurrency is not None and (
        label_keys(load).get("concurrency") == str(goal_concurrency)
    ):
        return f"{load} (the goal's load)"
    return load


def _launch_of(label: str | None) -> int | None:
    """The launch a measurement was taken against, when its label names it."""
    value = label_keys(label).get("launch_msg_idx", "")
    return int(value) if value.isdigit() else None


# --------------------------------------------------------------------------- events


@dataclass(order=True)
class Event:
    msg_idx: int
    rank: int  # order of kinds inside one message: start < launch < fail < measure
    kind: str = field(compare=False)
    lever: str | None = field(default=None, compare=False)
    detail: str = field(default="", compare=False)
    changed: dict[str, Any] = field(default_factory=dict, compare=False)
    flags: dict[str, Any] = field(default_factory=dict, compare=False)
    value: float | None = field(default=None, compare=False)
    metric: str | None = field(default=None, compare=False)
    label: str | None = field(default=None, compare=False)  # comparable conditions only
    launch: int | None = field(default=None, compare=False)  # the launch measured, if known
    server: str = field(default="", compare=False)  # a launch's server (``server_of``)


def _text_events(messages: pd.DataFrame, vocab: Vocabulary) -> list[Event]:
    events: list[Event] = []
    for row in messages.itertuples(index=False):
        if row.role not in ("user", "assistant"):
            continue
        text = text_of(row.text)
        low = lowered(text)
        named = {s.name for s in vocab.levers if s.first_match(text, low) is not None}
        if len(named) >= vocab.recap_min_levers:
            continue  # a recap of levers already pulled, not a new one
        for sentence in sentences(text):
            events.extend(_sentence_events(int(row.msg_idx), str(row.role), sentence, vocab))
    return events


def _sentence_events(msg_idx: int, role: str, sentence: str, vocab: Vocabulary) -> list[Event]:
    low = lowered(sentence)
    hits = sorted(
        (pos, spec.name)
        for spec in vocab.levers
        if (pos := spec.first_match(sentence, low)) is not None
    )
    if role == "assistant" and vocab.revert_cues.search(sentence, low):
        return [Event(msg_idx, 4, "revert", detail=sentence)]
    if not hits:
        return []
    na = vocab.na_cues.search(sentence, low)
    if na and role == "assistant":
        before = [h for h in hits if h[0] <= na.start()] or hits
        return [Event(msg_idx, 0, "not_applicable", before[-1][1], detail=sentence)]
    out: list[Event] = []
    if role == "assistant" and _ASSISTANT_FAILURE.search(sentence, low):
        out.append(Event(msg_idx, 2, "fail_text", hits[0][1], detail=sentence))
    elif vocab.start_cues.search(sentence, low):
        out.append(Event(msg_idx, 0, "start", hits[0][1], detail=sentence))
    return out


_HOW_STARTED = frozenset({"systemd:unit"})
"""Launch keys that say how a server was started, not how it is configured: a unit that runs
the flags measured last (``systemctl enable --now vllm.service``) changes no setting."""


def _launch_events(launches: pd.DataFrame) -> list[Event]:
    events: list[Event] = []
    for row in launches.itertuples(index=False):
        changed = row.changed_flags if isinstance(row.changed_flags, dict) else {}
        changed = {f: c for f, c in changed.items() if f not in _HOW_STARTED}
        flags = row.flags if isinstance(row.flags, dict) else {}
        host = getattr(row, "host", None)  # (a frame built without it: one host)
        host = host if isinstance(host, str) else None
        events.append(
            Event(
                int(row.msg_idx), 1, "launch", changed=changed, flags=flags,
                detail=str(row.engine), server=server_of(str(row.engine), host, flags),
            )
        )
    return events


_ENV_ASSIGN = re.compile(r"(?:^|[\s;&(])(?:export\s+)?([A-Z][A-Z0-9_]{2,})=(\S*)")


def _command_events(tool_calls: pd.DataFrame, vocab: Vocabulary) -> list[Event]:
    """Env changes in shell commands (``export NCCL_PROTO=LL``) and failures in outputs."""
    events: list[Event] = []
    for row in tool_calls.itertuples(index=False):
        command = text_of(row.command)
        for name, value in _ENV_ASSIGN.findall(command):
            for spec in vocab.levers:
                if spec.matches_flag(f"env:{name}"):
                    events.append(
                        Event(int(row.msg_idx), 0, "start", spec.name, detail=f"{name}={value}")
                    )
        if _SEARCH_COMMAND.search(command):
            continue
        kind = failure_kind(command_output(text_of(row.output)).text)
        if kind:
            at = row.result_msg_idx if not _isna(row.result_msg_idx) else row.msg_idx
            events.append(Event(int(at), 2, "fail", detail=kind))
    return events


def _failure_events(frames: SessionFrames) -> list[Event]:
    events: list[Event] = []
    se = frames.select("server_events", ["msg_idx", "event"], {"event": ["oom", "crash"]})
    for msg_idx, event in zip(se["msg_idx"].tolist(), se["event"].tolist(), strict=True):
        events.append(Event(int(msg_idx), 2, "fail", detail="OOM" if event == "oom" else "crash"))
    tags = frames.select("tags", ["msg_idx", "evidence"], {"tag": ["error"]})
    for msg_idx, evidence in zip(tags["msg_idx"].tolist(), tags["evidence"].tolist(), strict=True):
        kind = failure_kind(text_of(evidence)) or "error"
        events.append(Event(int(msg_idx), 2, "fail", detail=kind))
    return events


def _measure_events(measurements: pd.DataFrame, metrics: list[str]) -> list[Event]:
    if measurements.empty:
        return []
    rows = measurements[measurements["metric"].isin(metrics)]
    events = []
    for r in rows.itertuples(index=False):
        label = None if _isna(r.label) else str(r.label)
        events.append(
            Event(
                int(r.msg_idx),
                3,
                "measure",
                value=float(r.value),
                metric=str(r.metric),
                label=comparable_label(label),
                launch=_launch_of(label),
            )
        )
    return events


# --------------------------------------------------------------------------- levers


@dataclass
class _Draft:
    name: str  # the vocabulary name (or, for a launch-diff lever, its flag changes)
    start: int
    end: int
    via: str
    notes: list[str] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)
    after: Event | None = None
    na_msg: int | None = None
    frozen: bool = False
    title: str | None = None  # what the reader sees, when not ``name``
    # A lever set by launch flags, announced before its launch: numbers measured before
    # that launch belong to the configuration in force, not to the lever.
    awaits_launch: bool = False
    launch_msg: int | None = None
    # A launch has run since the lever was announced: in a transcript whose messages hold
    # their tool calls and outputs (plain text), numbers in the announcing message that
    # follow such a launch are the lever's, not the configuration's before it.
    launched: bool = False
    # The flags the lever's launch set, each with (its value before, the lever's value):
    # after a failure, a launch without them gives the lever up rather than retries it.
    setting: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def awaits_result(self) -> bool:
        """Launched and in force, its number not measured yet (nor failed, nor moot)."""
        return (
            self.launch_msg is not None
            and not (self.frozen or self.awaits_launch or self.failures)
            and self.after is None
            and self.na_msg is None
        )

    def touch(self, msg_idx: int, note: str = "") -> None:
        self.end = max(self.end, msg_idx)
        if note and note not in self.notes:
            self.notes.append(note)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "unset" if value is None else str(value)


def describe_changes(changed: dict[str, Any]) -> str:
    """A launch's ``changed_flags`` as a reader writes them: ``--tp 4→8, --dp unset→2``."""
    parts = []
    for flag, change in sorted(changed.items()):
        if isinstance(change, list | tuple) and len(change) == 2:
            parts.append(f"{flag} {_fmt(change[0])}→{_fmt(change[1])}")
        else:
            parts.append(f"{flag} {_fmt(change)}")
    return ", ".join(parts)


def _new_value(change: Any) -> Any:
    return change[1] if isinstance(change, list | tuple) and len(change) == 2 else change


def _setting(changed: dict[str, Any], spec: LeverSpec | None) -> dict[str, tuple[Any, Any]]:
    """The flags a lever's launch set (``spec``'s own, else every one changed), each with
    its value before and after; flags it only removed are not its setting."""
    out: dict[str, tuple[Any, Any]] = {}
    for flag, change in changed.items():
        if spec is not None and not spec.matches_flag(flag):
            continue
        before = change[0] if isinstance(change, list | tuple) and len(change) == 2 else None
        value = _new_value(change)
        if value not in (None, False):
            out[flag] = (before, value)
    return out


def _levers_for_flags(changed: dict[str, Any], vocab: Vocabulary) -> list[LeverSpec]:
    """Levers touched by a launch, those whose flag was set/raised first."""

    def added(flag: str) -> bool:
        change = changed[flag]
        return not isinstance(change, list | tuple) or _new_value(change) not in (None, False)

    found: list[tuple[int, int, LeverSpec]] = []
    for flag in changed:
        for order, spec in enumerate(vocab.levers):
            if spec.matches_flag(flag):
                found.append((0 if added(flag) else 1, order, spec))
    seen: dict[str, LeverSpec] = {}
    for _, _, spec in sorted(found, key=lambda f: (f[0], f[1])):
        seen.setdefault(spec.name, spec)
    return list(seen.values())


_NAME_CHARS = 120


class _LeverWalk:
    """Walks the events of one campaign window and drafts its levers.

    Named techniques (``role: primary`` in levers.json) are one lever however many
    launches they take (a retry after an OOM included). Tuning parameters and flags
    the vocabulary does not know are swept: every launch that changes them after the
    previous setting was measured is a lever of its own, named by its flag changes.
    Before the metric was first measured they are not levers at all: a smaller
    ``--mem-fraction-static`` after the first launch ran out of memory gets the server
    up, and the configuration it sets is the one the baseline measures. A launch after a
    lever failed that drops the lever's setting gives it up (``failed``); what else that
    launch changes is the next lever."""

    def __init__(
        self,
        vocab: Vocabulary,
        source_id: Any,
        label: str | None = None,
        lower_better: bool = False,
        has_launches: bool = False,
    ) -> None:
        self.vocab = vocab
        self.label = label
        self.lower_better = lower_better
        self.ref = source_id
        self.has_launches = has_launches
        self.drafts: list[_Draft] = []
        self.current: _Draft | None = None
        self.concluded: set[str] = set()
        # Per server (``Event.server``) and flag: every value it had, in order, and the
        # launch of that server (0, 1, …) that first set it.
        self.seen_values: dict[tuple[str, str], list[Any]] = {}
        self.first_set: dict[tuple[str, str], int] = {}
        self.launches: Counter[str] = Counter()  # launches of each server so far
        self.baseline: dict[tuple[str, str | None], float] | None = None
        self.measured = False  # the metric was measured: a configuration to compare with
        self.last_launch = -1  # the message of the latest launch walked

    def _spec(self, name: str) -> LeverSpec | None:
        return next((s for s in self.vocab.levers if s.name == name), None)

    def _open(self, name: str, msg_idx: int, via: str, note: str) -> _Draft:
        self.current = _Draft(name=name, start=msg_idx, end=msg_idx, via=via, notes=[note])
        spec = self._spec(name)
        if via == "mention" and spec is not None and spec.flags and self.has_launches:
            self.current.awaits_launch = True
        self.drafts.append(self.current)
        self.concluded.add(name)
        return self.current

    def start(self, ev: Event) -> None:
        assert ev.lever
        cur = self.current
        if cur and cur.name == ev.lever and not cur.frozen:
            if cur.title is None or cur.after is None:  # a measured sweep step is done
                cur.touch(ev.msg_idx)
            return
        if ev.lever in self.concluded:
            return
        if cur and cur.awaits_result() and self._set_by_launch(ev.lever):
            # Named while the launched lever awaits its number ("torch.compile and CUDA
            # graph capture come next" as a server starts): the next number is that
            # lever's; a lever set by flags starts at its own launch.
            return
        note = f"{self.ref(ev.msg_idx)}: {ev.detail[:160]}"
        self._open(ev.lever, ev.msg_idx, "mention", note)

    def _set_by_launch(self, name: str) -> bool:
        spec = self._spec(name)
        return self.has_launches and spec is not None and bool(spec.flags)

    def launch(self, ev: Event) -> None:
        self.last_launch = ev.msg_idx
        back = self._reverted(ev)
        reverts = f" (reverts {', '.join(back)}, an earlier setting)" if back else ""
        cur = self.current
        if cur and (cur.after is not None or cur.na_msg is not None):
            cur.frozen = True  # later numbers belong to whatever comes next
        if cur and cur.after is not None and ev.changed and len(back) == len(ev.changed):
            return  # every change sets back an earlier setting: the lever is undone, no new one
        changes = describe_changes(ev.changed)
        note = f"launch at {self.ref(ev.msg_idx)}: {changes}" + reverts
        specs = _levers_for_flags(ev.changed, self.vocab)
        open_cur = cur if cur and not cur.frozen else None
        if open_cur and open_cur.failures and self._gives_up(open_cur, ev):
            open_cur.frozen = True  # failed, and its setting is gone: the rest is a new lever
            specs = [s for s in specs if s.name != open_cur.name]
            changes = describe_changes(
                {f: c for f, c in ev.changed.items() if f not in open_cur.setting}
            ) or changes
            note = f"launch at {self.ref(ev.msg_idx)}: {changes}" + reverts
            open_cur = None
        names = [s.name for s in specs]
        fresh = [s for s in specs if s.name not in self.concluded]
        if open_cur and open_cur.name in names:
            open_cur.launched = True
            open_cur.touch(ev.msg_idx, note)
            self._realise(open_cur, ev, changes)
            return
        primary = [s for s in fresh if s.role == "primary"]
        if primary:
            draft = self._open(primary[0].name, ev.msg_idx, "launch", note)
            draft.setting = _setting(ev.changed, primary[0])
            return
        if open_cur and open_cur.awaits_launch and ev.changed:
            open_cur.frozen = True  # announced, never launched: it stays pending
            open_cur = None
        if open_cur and open_cur.failures and not self._is_retry(open_cur, ev, specs):
            open_cur.frozen = True  # reverted after the failure: later numbers are not its
        elif open_cur and open_cur.awaits_launch:
            open_cur.touch(ev.msg_idx, f"launch at {self.ref(ev.msg_idx)}, its flags unchanged")
            return
        elif open_cur:
            open_cur.launched = True
            verb = "relaunched" if open_cur.failures else "launch"
            text = f"{verb} at {self.ref(ev.msg_idx)}" + (f" with {changes}" if changes else "")
            open_cur.touch(ev.msg_idx, text + reverts)
            return
        if ev.changed and self.measured and all(
            s.role != "primary" or s.name in self.concluded for s in specs
        ):  # tuning flags, or the parameters of a technique already tried
            self._open_sweep_step(ev, specs, changes, note)

    def _open_sweep_step(self, ev: Event, specs: list[LeverSpec], changes: str, note: str) -> None:
        """A launch that changes tuning (or unknown) flags: a lever named by its changes."""
        known = ", ".join(f"{s.name} ({s.role})" for s in specs)
        draft = self._open(changes[:_NAME_CHARS], ev.msg_idx, "launch", note)
        if known:
            draft.notes.insert(0, known)
        draft.launch_msg = ev.msg_idx
        draft.setting = _setting(ev.changed, None)
        self.concluded.update(s.name for s in specs)

    def _realise(self, draft: _Draft, ev: Event, changes: str) -> None:
        """The launch that puts an announced lever in force."""
        if not draft.awaits_launch:
            return
        spec = self._spec(draft.name)
        if spec and any(spec.matches_flag(f) for f in ev.changed):
            draft.awaits_launch = False
            draft.launch_msg = ev.msg_idx
            draft.setting = _setting(ev.changed, spec)
            if spec.role != "primary":  # a sweep step: it starts when its setting does
                draft.title = changes[:_NAME_CHARS]
                draft.notes.insert(0, f"{spec.name} ({spec.role})")
                draft.start = ev.msg_idx

    def _reverted(self, ev: Event) -> list[str]:
        """Flags of the launched server set back to a value they had earlier in the session
        (a revert), unset included: a flag a later launch added, removed again; each as
        ``flag back to value``. A value changed to is never the one in force, so any earlier
        one is a revert."""
        back = []
        for flag, change in sorted(ev.changed.items()):
            value = _new_value(change)
            history = self.seen_values.get((ev.server, flag), [])
            if value is not None and value in history:
                back.append(f"{flag} back to {_fmt(value)}")
            elif value is None and self.first_set.get((ev.server, flag), 0) > 0:
                back.append(f"{flag} back to unset")
        for flag, value in ev.flags.items():
            if value is not None:
                self.first_set.setdefault((ev.server, flag), self.launches[ev.server])
            history = self.seen_values.setdefault((ev.server, flag), [])
            if not history or history[-1] != value:
                history.append(value)
        self.launches[ev.server] += 1
        return back

    def _gives_up(self, cur: _Draft, ev: Event) -> bool:
        """After a failure: does this launch drop the lever's setting, each of its flags
        unset or back at its value before the lever ("--speculative-config" gone after the
        draft model ran out of memory, "--gpu-memory-utilization" from 0.97 back to 0.90)?
        A retry keeps the setting, or changes it to a value not tried before."""
        return bool(cur.setting) and all(
            ev.flags.get(f) in (None, False, before) for f, (before, _) in cur.setting.items()
        )

    def _is_retry(self, cur: _Draft, ev: Event, specs: list[LeverSpec]) -> bool:
        """After a failure: does this launch retry the lever (its own flags still set, or
        only tuning flags such as --mem-fraction-static changed) rather than revert it?
        A swept setting (a tuning or unknown flag, named by its value) set to yet another
        value is the next step of the sweep, not a retry: ``--max-num-seqs 512`` crashed,
        ``384`` is measured as itself."""
        spec = self._spec(cur.name)
        if (spec is None or spec.role != "primary") and self._resets(cur, ev):
            return False
        if spec and any(
            spec.matches_flag(f) and v not in (None, False) for f, v in ev.flags.items()
        ):
            return True
        return bool(specs) and all(s.role == "tuning" for s in specs)

    @staticmethod
    def _resets(cur: _Draft, ev: Event) -> bool:
        """Does this launch set one of ``cur``'s flags to a value other than the lever's
        own, the one before it, or unset?"""
        return any(
            ev.flags.get(f) not in (None, False, before, value)
            for f, (before, value) in cur.setting.items()
        )

    def fail(self, ev: Event) -> None:
        cur = self.current
        if ev.kind == "fail_text" and ev.lever and (cur is None or ev.lever != cur.name):
            if cur is not None and self._explains_failure(cur):
                # "OOM during CUDA graph capture": where the lever's failure happened
                cur.touch(ev.msg_idx, f"{self.ref(ev.msg_idx)}: {ev.detail[:160]}")
                return
            if ev.lever not in self.concluded and self._tried(ev.lever):
                # a lever tried without being announced, whose failure is then stated
                draft = self._open(
                    ev.lever, ev.msg_idx, "text", f"{self.ref(ev.msg_idx)}: {ev.detail[:160]}"
                )
                draft.failures.append((ev.msg_idx, "failure stated"))
            return
        if not cur or cur.frozen or cur.after is not None or cur.na_msg is not None:
            return
        if ev.msg_idx < cur.start:
            return
        if ev.kind == "fail" and cur.awaits_launch:
            return  # announced, not launched yet: an error now is not the lever's
        kind = ev.detail if ev.kind == "fail" else "failure stated"
        if any(m == ev.msg_idx for m, _ in cur.failures):
            return
        cur.failures.append((ev.msg_idx, kind))
        cur.touch(ev.msg_idx, f"{kind} at {self.ref(ev.msg_idx)}")

    def _explains_failure(self, cur: _Draft) -> bool:
        """Is a stated failure now about ``cur``'s own failure? It is when ``cur`` failed,
        unmeasured, and no server was launched since: the technique the sentence names
        (a start-up step such as CUDA graph capture or torch.compile) says where it
        failed, not what else was tried."""
        return (
            bool(cur.failures)
            and not cur.frozen
            and cur.after is None
            and cur.failures[-1][0] >= self.last_launch
        )

    def _tried(self, name: str) -> bool:
        """Can a stated failure naming lever ``name`` be that lever's? Not a tuning
        parameter's before anything was measured: the failure is the deployment's ("ran
        out of memory: mem-fraction-static 0.85 leaves too little"), and the relaunch
        that fixes it sets up the baseline's configuration."""
        spec = self._spec(name)
        return self.measured or spec is None or spec.role == "primary"

    def revert(self, ev: Event) -> None:
        """The assistant reverted the change: numbers after this are not the lever's."""
        cur = self.current
        if cur and (cur.after is not None or cur.failures):
            cur.frozen = True

    def not_applicable(self, ev: Event) -> None:
        assert ev.lever
        cur = self.current
        if cur and cur.name == ev.lever and cur.after is None:
            cur.na_msg = ev.msg_idx
            cur.touch(ev.msg_idx, f"{self.ref(ev.msg_idx)}: {ev.detail[:160]}")
            return
        if ev.lever in self.concluded:
            return
        draft = self._open(
            ev.lever, ev.msg_idx, "text", f"{self.ref(ev.msg_idx)}: {ev.detail[:160]}"
        )
        draft.na_msg = ev.msg_idx

    def _measures_prior_config(self, ev: Event, cur: _Draft) -> bool:
        """Taken before the lever was in force: before its launch (the label names an
        earlier launch), or before any launch of an announced launch-flag lever."""
        if cur.awaits_launch:
            return True
        return ev.launch is not None and cur.launch_msg is not None and ev.launch < cur.launch_msg

    def measure(self, ev: Event, reference: dict[tuple[str, str | None], float]) -> None:
        cur = self.current
        key = (str(ev.metric), ev.label)
        value = float(ev.value or 0.0)
        self.measured = True
        settled = cur is None or cur.frozen or cur.na_msg is not None
        early = (
            cur is not None
            and cur.via == "mention"
            and ev.msg_idx <= cur.start
            and not cur.launched
        )
        if settled or early or (cur is not None and self._measures_prior_config(ev, cur)):
            # Before any lever: the baseline (latest wins). Between levers: only fills a
            # condition not measured before; the kept configuration is set by levers.
            if self.baseline is None and len(self.drafts) <= 1 and not (settled and cur):
                reference[key] = value
            else:
                reference.setdefault(key, value)
            return
        assert cur is not None
        if self.baseline is None:
            self.baseline = dict(reference)  # the configuration before the first result
        if _prefer(ev, cur.after, reference, self.label, self.lower_better):
            cur.after = ev
        cur.touch(ev.msg_idx)


def _prefer(
    new: Event,
    old: Event | None,
    reference: dict[tuple[str, str | None], float],
    label: str | None,
    lower_better: bool,
) -> bool:
    """Which measurement is the lever's result: one at the campaign's main label beats
    others (the best of them: a lever's variants are judged by its best setting); then
    one with a comparable value before it; then the latest."""
    if old is None:
        return True
    new_main, old_main = new.label == label, old.label == label
    if new_main != old_main:
        return new_main
    if new_main:
        better = (
            (new.value or 0) < (old.value or 0)
            if lower_better
            else (new.value or 0) > (old.value or 0)
        )
        return better
    new_cmp = (str(new.metric), new.label) in reference
    old_cmp = (str(old.metric), old.label) in reference
    if new_cmp != old_cmp:
        return new_cmp
    return True


def _finish(
    draft: _Draft,
    reference: dict[tuple[str, str | None], float],
    lower_better: bool,
    seq: int,
    campaign_id: str,
    session_id: str,
    ref: Any,
) -> Lever:
    outcome: Outcome = "pending"
    before = after = delta = None
    metric = None
    evidence = None
    notes = list(draft.notes)
    if draft.na_msg is not None:
        outcome, evidence = "not_applicable", draft.na_msg
        notes.append("already enabled")
    elif draft.after is not None:
        metric, after, evidence = draft.after.metric, draft.after.value, draft.after.msg_idx
        before = reference.get((str(metric), draft.after.label))
        label = f" at {draft.after.label}" if draft.after.label else ""
        if before:
            delta = round((float(after or 0) - before) / before * 100, 2)
            outcome = classify_delta(delta, lower_better)
            notes.append(
                f"{metric}{label} {before:g} → {after:g} ({delta:+.1f}%) at {ref(evidence)}"
            )
            if outcome == "improved":  # a change without effect is usually reverted
                reference[(str(metric), draft.after.label)] = float(after or 0)
        else:
            notes.append(
                f"{metric}{label} = {after:g} at {ref(evidence)}, nothing comparable before"
            )
            # the first number of these conditions: what the next lever's change starts from
            reference.setdefault((str(metric), draft.after.label), float(after or 0))
    elif draft.failures:
        outcome = "failed"
        evidence = draft.failures[-1][0]
    return Lever(
        campaign_id=campaign_id,
        session_id=session_id,
        seq=seq,
        name=draft.title or draft.name,
        description="; ".join(notes),
        start_msg_idx=draft.start,
        end_msg_idx=draft.end,
        metric=metric,
        value_before=before,
        value_after=after,
        delta_pct=delta,
        outcome=outcome,
        evidence_msg_idx=evidence,
    )


# --------------------------------------------------------------------------- campaigns


def tool_measurements(measurements: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``measurements`` that a tool's output holds (no ``PROSE_SOURCES``): a
    campaign's baseline and levers are judged on tool measurements only (a figure quoted from
    memory or rounded in a summary would count a result twice, or a stale one)."""
    if measurements.empty or "source" not in measurements.columns:
        return measurements
    return measurements[~measurements["source"].isin(PROSE_SOURCES)]


def _window(df: pd.DataFrame, start: int, end: int | None) -> pd.DataFrame:
    if df.empty:
        return df
    mask = df["msg_idx"] >= start
    if end is not None:
        mask &= df["msg_idx"] < end
    return df[mask]


def _campaign_goals(goals: list[Goal]) -> list[tuple[Goal, int | None]]:
    """One goal per campaign (restatements of the same family are merged), with the
    message where the next campaign begins."""
    kept: list[Goal] = []
    for goal in goals:
        if kept and kept[-1].family == goal.family:
            continue
        if any(k.family == goal.family for k in kept) and goal.msg_idx == kept[-1].msg_idx:
            continue
        kept.append(goal)
    out: list[tuple[Goal, int | None]] = []
    for i, goal in enumerate(kept):
        later = [g.msg_idx for g in kept[i + 1 :] if g.msg_idx > goal.msg_idx]
        out.append((goal, later[0] if later else None))
    return out


def _primary_label(
    measurements: pd.DataFrame, metric: str, concurrency: int | None = None
) -> str | None:
    """The load a campaign is judged at: the most measured label of ``metric``, among
    those at the ``concurrency`` the goal names when any was measured there."""
    rows = (
        measurements[measurements["metric"] == metric] if not measurements.empty else measurements
    )
    if rows.empty:
        return None
    found = [comparable_label(None if _isna(v) else str(v)) or "" for v in rows["label"]]
    named = [lb for lb in found if label_keys(lb).get("concurrency") == str(concurrency)]
    labels = Counter(named or found)
    best = sorted(labels.items(), key=lambda kv: -kv[1])[0][0]
    return best or None


def stated_goals(frames: SessionFrames) -> list[Goal]:
    """:func:`find_goals` of the session's messages: what :func:`find_campaigns` reads of
    the messages alone, none of the analysis of them (tags, measurements)."""
    return find_goals(
        frames.select(
            "messages",
            ["msg_idx", "role", "text"],
            {"role": ["user", "assistant"]},
            matching={"text": number_filter()},
        )
    )


def find_campaigns(
    frames: SessionFrames, stated: list[Goal] | None = None
) -> tuple[list[Campaign], list[Lever]]:
    """Campaigns of the session and their levers, in order. ``stated``: the session's
    :func:`stated_goals`, when they were found already."""
    vocab = vocabulary()
    session_id = frames.session_id
    campaigns: list[Campaign] = []
    levers: list[Lever] = []
    goals = _campaign_goals(stated_goals(frames) if stated is None else stated)
    if not goals:
        return campaigns, levers
    shared = _SessionEvents(frames, goals[0][0].msg_idx)
    for n, (goal, end) in enumerate(goals, start=1):
        campaign, found = _campaign(frames, shared, goal, end, f"{session_id}#c{n}", vocab)
        campaigns.append(campaign)
        levers.extend(found)
    return campaigns, levers


class _SessionEvents:
    """Events every campaign of a session sees, built once. A campaign reads messages
    and tool calls from its goal on, so none before the first goal (``start``) are read:
    tool outputs are most of a session's bytes."""

    def __init__(self, frames: SessionFrames, start: int) -> None:
        self.frames = frames
        self.failures = _failure_events(frames)
        self.messages = frames.select(
            "messages", ["msg_idx", "role", "text"], {"role": ["user", "assistant"]},
            min_idx=start,
        )
        self.tool_calls = frames.select(
            "tool_calls", ["msg_idx", "result_msg_idx", "command", "output"], min_idx=start
        )
        self.measurements = tool_measurements(frames.measurements)
        self._measures: dict[str, list[Event]] = {}

    def measures(self, metric: str) -> list[Event]:
        if metric not in self._measures:
            self._measures[metric] = _measure_events(self.measurements, [metric])
        return self._measures[metric]


def _campaign(
    frames: SessionFrames,
    shared: _SessionEvents,
    goal: Goal,
    end: int | None,
    campaign_id: str,
    vocab: Vocabulary,
) -> tuple[Campaign, list[Lever]]:
    family = _targets()["metric_families"][goal.family]
    metric = choose_metric(goal.family, shared.measurements, goal.percentile)
    lower_better = bool(family["lower_is_better"])
    label = _primary_label(shared.measurements, metric, goal.concurrency)
    launches = _window(frames.launches, goal.msg_idx, end)
    events = sorted(
        _text_events(_window(shared.messages, goal.msg_idx, end), vocab)
        + _launch_events(launches)
        + _command_events(_window(shared.tool_calls, goal.msg_idx, end), vocab)
        + shared.failures
        + shared.measures(metric)
    )
    walk = _LeverWalk(vocab, frames.ref, label, lower_better, has_launches=not launches.empty)
    reference: dict[tuple[str, str | None], float] = {}
    baseline: float | None = None
    finished: list[Lever] = []
    for ev in events:
        if end is not None and ev.msg_idx >= end:
            break
        before_count = len(walk.drafts)
        if ev.kind == "measure":
            walk.measure(ev, reference)
        elif ev.msg_idx < goal.msg_idx:
            continue
        elif ev.kind == "start":
            walk.start(ev)
        elif ev.kind == "launch":
            walk.launch(ev)
        elif ev.kind in ("fail", "fail_text"):
            walk.fail(ev)
        elif ev.kind == "not_applicable":
            walk.not_applicable(ev)
        elif ev.kind == "revert":
            walk.revert(ev)
        if len(walk.drafts) > before_count:
            if before_count == 0:
                baseline = reference.get((metric, label))
            if before_count:
                prev = walk.drafts[before_count - 1]
                finished.append(
                    _finish(
                        prev,
                        reference,
                        lower_better,
                        len(finished) + 1,
                        campaign_id,
                        frames.session_id,
                        frames.ref,
                    )
                )
    if walk.drafts:
        finished.append(
            _finish(
                walk.drafts[-1],
                reference,
                lower_better,
                len(finished) + 1,
                campaign_id,
                frames.session_id,
                frames.ref,
            )
        )
    key = (metric, label)
    if walk.baseline is not None and key in walk.baseline:
        baseline = walk.baseline[key]  # the configuration in force before the first result
    elif baseline is None and all(lv.value_after is None for lv in finished):
        baseline = reference.get(key)  # measured only after the levers were announced
    return _summarise(
        frames, goal, end, campaign_id, metric, label, baseline, finished, lower_better
    ), finished


def _summarise(
    frames: SessionFrames,
    goal: Goal,
    end: int | None,
    campaign_id: str,
    metric: str,
    label: str | None,
    baseline: float | None,
    levers: list[Lever],
    lower_better: bool,
) -> Campaign:
    m = _window(tool_measurements(frames.measurements), 0, end)
    values = m[(m["metric"] == metric)] if not m.empty else m
    if label is not None and not values.empty:
        same = [comparable_label(None if _isna(v) else str(v)) == label for v in values["label"]]
        values = values[same]
    after_goal = values[values["msg_idx"] >= goal.msg_idx] if not values.empty else values
    pool = after_goal if not after_goal.empty else values
    best = None
    if not pool.empty:
        best = float(pool["value"].min() if lower_better else pool["value"].max())
    target = goal.value
    if target is None and goal.factor and baseline:
        target = round(baseline * goal.factor, 3)
    status = "in_progress"
    if (
        best is not None
        and target is not None
        and (best <= target if lower_better else best >= target)
    ):
        status = "met"
    elif levers and levers[-1].outcome != "pending":
        status = "not_met"
    last = [goal.msg_idx] + [lv.end_msg_idx for lv in levers if lv.end_msg_idx is not None]
    if not pool.empty:
        last.append(int(pool["msg_idx"].max()))
    return Campaign(
        campaign_id=campaign_id,
        session_id=frames.session_id,
        goal_text=goal.text[:300],
        target_metric=metric,
        target_value=target,
        unit=goal.unit,
        baseline_value=baseline,
        best_value=best,
        start_msg_idx=goal.msg_idx,
        end_msg_idx=max(last),
        status=status,
    )
