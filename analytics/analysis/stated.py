"""Numbers stated in prose: performance figures and profile shares that users and assistants
write in their messages ("we're at ~800 tok/s", "TTFT is 2.4 s", "63% of decode time is in
fused_moe_kernel").

They are stored as measurements with source ``stated`` (a figure) or ``profile`` (a share of
time), so a researcher can plot what people said next to what the tools measured. Only the
prose of user and assistant messages is read, outside code blocks, quoted lines and pasted log
lines (numbers there come from tool output, where the tooling analyser reads them). A number
is kept only when it reports a fact: not in a question, and not after a target cue ("get above
1500 tok/s", the cues :mod:`campaigns` finds goals with) or a comparison ("under 200 ms").

Most messages hold no figure, so a message is read only if it has a digit and one of the unit
literals every pattern needs (``_NEEDS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from analytics.analysis.campaigns import ASCII_DIGITS, number_filter_re2, sentences, target_cue
from analytics.analysis.literals import AnyLiteral
from analytics.analysis.tooling.extractor import measurement
from analytics.models import PROFILE_SOURCE, STATED_SOURCE, Measurement, Message

_NEEDS = (
    "/s", "/S", "per sec", "ms", "TTFT", "ttft", "TPOT", "tpot", "ITL", "atency",
    "aster", "peed", "GB", "GiB", "ccept", "%",
)
"""Literals one of which every pattern's match holds (case variants written out)."""

_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`(?P<inline>[^`\n]*)`", re.S)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.:<>]*")
_QUOTED_LINE = re.compile(
    r"^(?:>|    |\t|\s*(?:\[\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d[ T]\d|(?:INFO|WARNING|ERROR|DEBUG)\b|"
    r"\$ |[A-Za-z /%()]+\([a-z/%]+\):\s*[\d.]+\s*$|.*\bDecode batch\b)).*$",
    re.M,
)
"""Quoted (``>``), indented (code) and pasted log or benchmark lines."""

_NUM = r"(?P<value>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_STAT = r"(?:(?P<stat>p\d{2}|mean|median|avg|average)\s+)?"
_LINK = r"(?:\s*(?:at\s+c\d+|is|was|are|were|of|at|now|around|about|roughly|approx\.?|went to|drops? to|" \
        r"dropped to|down to|up to|=|:|~|≈|\()){0,3}\s*~?\s*"
_AFTER_NUM = r"(?![\w/.]|\.\d)"

_THROUGHPUT = re.compile(
    _NUM + r"\s*(?P<k>k)?\s*(?:tok(?:en)?s?\s*/\s*s(?:ec)?|tokens?\s+per\s+sec(?:ond)?)(?![\w/])",
    re.I,
)
_REQUESTS = re.compile(
    _NUM + r"\s*(?:req(?:uest)?s?\s*/\s*s(?:ec)?|requests?\s+per\s+sec(?:ond)?)(?![\w/])", re.I
)
_LATENCY = re.compile(
    _STAT + r"(?P<name>ttft|time to first token|tpot|time per output token|itl|"
    r"inter[ -]token latency|e2e latency|end[ -]to[ -]end latency|latency)"
    r"(?:\s+(?P<stat2>p\d{2}|mean|median))?" + _LINK + _NUM + r"\s*(?P<unit>ms|s|sec|seconds?|"
    r"milliseconds?)(?![\w/])",
    re.I,
)
_SPEEDUP = re.compile(
    r"(?<![\w.])" + _NUM + r"\s*(?:x|×)\s+(?:faster|speed[ -]?up|higher throughput|more throughput)"
    r"\b|\bspeed[ -]?up\s+of\s+~?" + _NUM.replace("value", "value2") + r"\s*(?:x|×)(?!\w)",
    re.I,
)
_MEMORY = re.compile(
    r"\b(?:uses?|using|used|takes?|took|occup(?:y|ies|ied|ying)|consum(?:es?|ed|ing))\s+(?:about\s+|around\s+|roughly\s+|~\s*)?" + _NUM
    + r"\s*(?P<unit>GB|GiB)(?![\w/])",
    re.I,
)
_ACCEPT = re.compile(
    r"\baccept(?:ance)?[ _-]?len(?:gth)?" + _LINK + _NUM + _AFTER_NUM, re.I
)
_SHARE_OF_TIME = re.compile(
    r"(?<![\w.])" + _NUM + r"\s*%\s+of\s+(?:the\s+|every\s+|each\s+|all\s+)?"
    r"(?:(?P<phase>decode|prefill|gpu|cuda|kernel|total|forward)\s+)?"
    r"(?:(?:gpu|kernel|cuda|wall[ -]clock)\s+)?(?:time|runtime|step(?:\s+time)?)\b",
    re.I,
)
_SHARE_OF_PHASE = re.compile(
    r"(?P<subject>(?:[\w.<>-]+\s+){0,2}?[\w.<>-]+(?:::[\w.<>-]+)*)\s+(?:is|are|was|were|takes?|took|"
    r"accounts?\s+for|consumes?|consumed)\s+(?:only\s+|just\s+|about\s+|~\s*)?"
    + _NUM + r"\s*%\s+of\s+(?:the\s+|every\s+|each\s+)?(?:total\s+)?"
    r"(?P<phase>decode|prefill)(?:\s+(?:step|time|runtime))?\b",
    re.I,
)
_SHARE_KERNEL = re.compile(
    r"^[*\s]*(?:(?:is|was|are|goes|go|spent|consumed\s+by|taken\s+by|in|on|by|to)\b|[:,—\s-])*"
    r"(?:(?:one|a\s+single|a|the|single)\s+kernel,?\s*)?[*\s]*(?P<name>[A-Za-z_][\w.:<>]*)",
    re.I,
)
_KERNELISH = re.compile(r"_|[Kk]ernel|GEMM|[Gg]emm|NCCL|nccl|[Aa]ttn|[Aa]ttention|MoE|moe|[a-z][A-Z]")
_CONCURRENCY = re.compile(r"\b(?:c|concurrency\s*(?:=\s*)?|bs\s*=?\s*)(?P<n>\d{1,5})\b", re.I)
_COMPARATOR = re.compile(
    r"(?:\b(?:under|below|above|over|beyond|less than|more than|fewer than|at most|at least|"
    r"within|up to|away from|short of|gap to|expect(?:ed|s)?|could|would|might|may|should|if|hope|estimate[ds]?|"
    r"projected|theoretical(?:ly)?|maximum|max|limit|budget|ceiling|need(?:s|ed)?|want(?:s|ed)?|"
    r"vs\.?|versus|than)\b|[<>≤≥]|\d\s*[x×]\s+from\b)[^.;:,(]*$",
    re.I,
)
"""A comparison or hypothetical just before a number: the number is a bound, not a reading."""
_BOUND_AFTER = re.compile(r"[^.;:,(]{0,12}\b(?:limit|cap|target|goal|budget|ceiling|max(?:imum)?)\b", re.I)
"""Words just after a figure that make it a bound ("a 500 tok/s limit")."""
_SERVED = re.compile(
    r"\b(?:request throughput|throughput|handles?|handled|serves?|served|sustains?|sustained|"
    r"complet(?:es?|ed|ing))\b[^.;:,(]*$",
    re.I,
)
"""Words before a request rate that make it a rate served, not the rate of the load offered."""
_CUE_REACH = 40
_SUBJECT_STOP = frozenset({"the", "a", "an", "it", "this", "that", "which", "and", "only"})


@dataclass(frozen=True)
class StatedNumber:
    metric: str
    value: float
    unit: str | None
    label: str
    source: str


@lru_cache(maxsize=1)
def _gate() -> AnyLiteral:
    return AnyLiteral(_NEEDS)


def may_state(text: str) -> bool:
    """Whether ``text`` can hold a stated number at all: an ASCII digit (ten substring tests,
    four times faster than a regex over prose, most of which has none), then a unit literal."""
    return any(d in text for d in ASCII_DIGITS) and _gate().found_in(text)


def prose_of(text: str) -> str:
    """``text`` without code (fenced blocks, inline code) and quoted or pasted log lines."""
    text = _CODE.sub(_unquoted, text) if "`" in text or "~~~" in text else text
    return _QUOTED_LINE.sub("", text)


def _unquoted(m: re.Match[str]) -> str:
    """An inline identifier (`fused_moe_kernel`) stays, as the name a share of time goes to;
    other code (commands, blocks) goes."""
    inline = m.group("inline")
    return inline if inline and _IDENTIFIER.fullmatch(inline) else " "


_PROSE_ROLES = "^(?:user|assistant)$"
"""The roles of prose, as a regex over the role column: a ``value_set`` (``pa.array``) would
import pandas in the tagging worker, which reads prose rows too (``run.chunk_facts``)."""


def stated_measurements(msg: Message) -> list[Measurement]:
    """The measurements :func:`stated_numbers` finds in the message's prose."""
    return _measurements(msg.session_id, msg.msg_idx, msg.role, msg.text)


ProseRow = tuple[str, int, str, str | None]
"""(session_id, msg_idx, role, text) of a user or assistant message."""


def prose_rows(messages: pa.Table) -> list[ProseRow]:
    """The user and assistant messages of a table of stored messages (``load_tables``)
    that hold a number (a decimal digit, or a factor word: ``campaigns.number_filter``),
    which any stated number or goal needs: only those rows are read into Python, found by
    RE2 over the column; the tool outputs and the prose without numbers stay in Arrow."""
    if not messages.num_rows:
        return []
    prose = messages.filter(pc.and_(
        pc.match_substring_regex(messages["role"], _PROSE_ROLES),
        pc.match_substring_regex(messages["text"], number_filter_re2()),
    ))
    return list(zip(
        *(prose[c].to_pylist() for c in ("session_id", "msg_idx", "role", "text")), strict=True
    ))


def stated_in_rows(rows: list[ProseRow]) -> list[Measurement]:
    """:func:`stated_measurements` of the messages ``rows``."""
    out: list[Measurement] = []
    for session_id, msg_idx, role, text in rows:
        if text and may_state(text):
            out.extend(_measurements(session_id, msg_idx, role, text))
    return out


def _measurements(session_id: str, msg_idx: int, role: str, text: str) -> list[Measurement]:
    return [
        measurement(session_id, msg_idx, n.metric, n.value, n.unit, n.label, n.source)
        for n in stated_numbers(text, role)
    ]


def stated_numbers(text: str, role: str) -> list[StatedNumber]:
    """Performance figures and time shares stated in ``text`` by ``role`` (user or assistant)."""
    if role not in ("user", "assistant") or not may_state(text):
        return []
    out: list[StatedNumber] = []
    for sentence in sentences(prose_of(text)):
        if sentence.endswith("?") or not may_state(sentence):
            continue
        out.extend(_in_sentence(sentence, role))
    return out


def _in_sentence(sentence: str, role: str) -> list[StatedNumber]:
    found: list[tuple[int, StatedNumber]] = []
    taken: list[tuple[int, int]] = []

    def add(m: re.Match[str], metric: str, value: float, unit: str | None, label: str,
            source: str = STATED_SOURCE, group: str = "value") -> None:
        start = m.start(group)
        if any(a <= start < b for a, b in taken) or _is_bound(sentence, m.start(), start, m.end()):
            return
        taken.append((m.start(), m.end()))
        found.append((start, StatedNumber(metric, value, unit, label, source)))

    for m in _SHARE_OF_PHASE.finditer(sentence):
        subject = _subject(m.group("subject"))
        if subject:
            add(m, "time_share", _num(m), "%",
                _share_label(subject, m.group("phase").lower(), role), PROFILE_SOURCE)
    for m in _SHARE_OF_TIME.finditer(sentence):
        kernel = _kernel_after(sentence[m.end():])
        phase = (m.group("phase") or "").lower()
        add(m, "time_share", _num(m), "%", _share_label(kernel, phase, role), PROFILE_SOURCE)
    for m in _LATENCY.finditer(sentence):
        value = _num(m)
        if m.group("unit").lower().startswith("s"):
            value *= 1000
        add(m, _latency_metric(m), value, "ms", _label(sentence, m.start("value"), role))
    for m in _THROUGHPUT.finditer(sentence):
        value = _num(m) * (1000 if m.group("k") else 1)
        add(m, _throughput_metric(sentence, m), value, "tok/s", _label(sentence, m.start(), role))
    for m in _REQUESTS.finditer(sentence):
        if _SERVED.search(sentence[max(0, m.start() - _CUE_REACH) : m.start()]):
            add(m, "request_throughput", _num(m), "req/s", _label(sentence, m.start(), role))
    for m in _SPEEDUP.finditer(sentence):
        group = "value" if m.group("value") else "value2"
        add(m, "speedup", float(m.group(group)), "x", _label(sentence, m.start(), role),
            group=group)
    for m in _MEMORY.finditer(sentence):
        add(m, "memory_used", _num(m), m.group("unit"), _label(sentence, m.start("value"), role))
    for m in _ACCEPT.finditer(sentence):
        add(m, "accept_length", _num(m), None, _label(sentence, m.start("value"), role))
    return [n for _, n in sorted(found, key=lambda f: f[0])]


def _num(m: re.Match[str]) -> float:
    return float(m.group("value").replace(",", ""))


def _is_bound(sentence: str, match_start: int, number_start: int, match_end: int) -> bool:
    """A target, a bound or a hypothetical: a cue in the words of its clause just before the
    number, or a bound named right after it."""
    before = sentence[max(0, min(match_start, number_start - _CUE_REACH)) : number_start]
    before = re.split(r"[.;:,(]", before)[-1] if match_start >= number_start - 1 else before
    return bool(
        _COMPARATOR.search(before) or target_cue().search(before)
        or _BOUND_AFTER.match(sentence, match_end)
    )


def _label(sentence: str, at: int, role: str) -> str:
    """``role=…`` and the concurrency of the figure at ``at``, as measurement labels are
    written (``key=value`` pairs): the last one named before it ("c1 41.3, c64 2204.9 tok/s"),
    else the first after it ("29.4 tok/s at c16")."""
    found = list(_CONCURRENCY.finditer(sentence))
    before = [m for m in found if m.end() <= at]
    after = [m for m in found if m.start() >= at]
    m = before[-1] if before else after[0] if after else None
    return f"role={role}" + (f",concurrency={m.group('n')}" if m else "")


_STATS = {"mean": "mean", "avg": "mean", "average": "mean", "median": "median"}
_LATENCY_FAMILY = {"ttft": "ttft", "time to first token": "ttft", "tpot": "tpot",
                   "time per output token": "tpot", "itl": "itl"}


def _latency_metric(m: re.Match[str]) -> str:
    """The bench metric the wording names (``ttft_p99``, ``tpot_mean``), else the family."""
    name = re.sub(r"[ -]+", " ", m.group("name").lower())
    family = _LATENCY_FAMILY.get(name)
    if family is None:
        family = "itl" if "token" in name else "e2e_latency" if name != "latency" else "latency"
    stat = (m.group("stat") or m.group("stat2") or "").lower()
    stat = _STATS.get(stat, stat)
    return f"{family}_{stat}" if stat and family != "latency" else family


def _throughput_metric(sentence: str, m: re.Match[str]) -> str:
    """``output_token_throughput`` etc. when a word next to the figure says which."""
    near = (sentence[max(0, m.start() - 25) : m.start()] + " " + sentence[m.end() : m.end() + 20])
    near = near.lower()
    for word, metric in (("output", "output_token_throughput"), ("total", "total_token_throughput"),
                         ("input", "input_token_throughput"), ("prefill", "input_token_throughput")):
        if re.search(rf"\b{word}\b", near):
            return metric
    return "throughput"


def _kernel_after(rest: str) -> str | None:
    """The kernel or phase a share of time is attributed to ("… is one kernel, `x`")."""
    m = _SHARE_KERNEL.match(rest.replace("`", " "))
    if m and _KERNELISH.search(m.group("name")):
        return m.group("name")
    return None


def _subject(words: str) -> str | None:
    kept = [w for w in words.replace("`", "").split() if w.lower() not in _SUBJECT_STOP]
    return " ".join(kept) or None


def _share_label(what: str | None, phase: str, role: str) -> str:
    parts = [f"kernel={_clean(what)}"] if what else []
    if phase and phase not in ("total",):
        parts.append(f"phase={phase}")
    return ",".join([*parts, f"role={role}"])


def _clean(value: str) -> str:
    """A label value: no separators of ``key=value,…`` labels inside."""
    return re.sub(r"[,=]", " ", value).strip("*. ")
