"""spaCy components for prose tags, registered by name.

- ``tag_patterns``: Matcher/PhraseMatcher rules from JSONL -> candidate spans in
  ``doc.spans["tags"]`` (label = tag, ``span.id_`` = rule id).
- ``checkin_gate``: keeps a ``user_checkin`` span only when the rest of the
  message is filler, i.e. the message carries no new instruction.
- ``prose_filter``: drops ``diagnosis`` / ``readiness_claim`` spans that are
  quoted (backticks, quotes, code blocks, log lines), hedged, negated or asked.

Each component keeps ``match(doc)`` (what it found) apart from
``set_annotations(doc, result)`` (writing it). The message role travels in
``doc.user_data["role"]``; ``doc.user_data["quoted"]`` (quoted character ranges, when the
doc is a window of a longer text), ``doc.user_data["failure_context"]`` (the message
follows an error or opens with one: weak causal cues then count) and
``doc.user_data["text"]`` (the text the doc was made from, which ``doc.text`` joins again
from the tokens: a quarter of the prose filter's time) are optional.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from spacy.attrs import LOWER, ORTH
from spacy.language import Language
from spacy.matcher import Matcher, PhraseMatcher
from spacy.tokens import Doc, Span, Token

from analytics.analysis.tagging.triggers import Step, anchored, variants

PATTERNS_DIR = Path(__file__).with_name("patterns")
SPANS_KEY = "tags"
MATCHER_CACHE_SIZE = 2048
"""Distinct candidate-rule sets whose Matcher is kept."""
_REQUIRED_OPS = ("", "1", "+")
"""Quantifiers under which a token pattern must occur in every match."""


TYPO_MIN_CHARS = 4
"""Shorter words are not read as a misspelt check-in word ("dne" is too far from anything)."""


def one_edit_apart(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by exactly one substitution, insertion, deletion or swap of two
    neighbouring letters ("stauts" / "status", "redy" / "ready")."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):
        return a[i:] == b[i + 1 :]
    return a[i + 1 :] == b[i + 1 :] or (
        i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]
    )


@lru_cache(maxsize=4096)
def _misspelt_checkin_word(lower: str) -> bool:
    if len(lower) < TYPO_MIN_CHARS or not lower.isalpha():
        return False
    targets = _shipped_lexicon()["checkin_typo_target"]
    return lower not in targets and any(one_edit_apart(lower, t) for t in targets)


def _checkin_typo(token: Token) -> bool:
    return _misspelt_checkin_word(token.lower_)


if not Token.has_extension("checkin_typo"):
    Token.set_extension("checkin_typo", getter=_checkin_typo)
"""A check-in word typed with one slip (``{"_": {"checkin_typo": true}}`` in a rule)."""

CJK_ASK_MAX_CHARS = 8
"""Longer runs of Chinese text ending in a question particle are requests, not status asks."""
JA_ASK_MAX_CHARS = 12
"""The same for Japanese, whose kana make words longer (サーバー起動した "server started")."""


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


def _is_japanese(ch: str) -> bool:
    """Kanji, hiragana or katakana (with its long-vowel mark)."""
    return _is_cjk(ch) or "\u3040" <= ch <= "\u30ff"


@lru_cache(maxsize=4096)
def _cjk_status_ask(text: str) -> bool:
    """Chinese is not split into words, so a short ask such as 部署好了吗 ("deployed yet?") is
    one token: all Chinese, short, ending in an ask (``checkin_cjk_ask_ending``: a finished
    state 了吗, 了没, a status noun with 呢 进度呢), in a state asked as "A or not A" (好没好
    "done or not?", 起没起来, 跑没跑完: ``checkin_cjk_negator``) or in a yes/no particle (吗:
    ``checkin_cjk_particle``) after a state that goes on (还在跑吗 "still running?", 还活着吗:
    ``checkin_cjk_ongoing``); a softening particle may close it (好了没呀:
    ``checkin_cjk_softener``). A request ending in 吗 (能重启吗 "can you restart it?") is
    none, and neither is 好啊 ("OK!")."""
    if not text or len(text) > CJK_ASK_MAX_CHARS or not all(_is_cjk(ch) for ch in text):
        return False
    lex = _shipped_lexicon()
    if len(text) > 2 and text[-1] in lex["checkin_cjk_softener"]:
        text = text[:-1]
    if text.endswith(tuple(lex["checkin_cjk_ask_ending"])):
        return True
    if any(_a_not_a(text[: len(text) - cut], lex["checkin_cjk_negator"]) for cut in (0, 1)):
        return True
    return text.endswith(tuple(lex["checkin_cjk_particle"])) and any(
        w in text[:-1] for w in lex["checkin_cjk_ongoing"]
    )


def _a_not_a(text: str, negators: frozenset[str]) -> bool:
    """``text`` ends in a word, a negator and the word again (好没好, 起没起)."""
    return len(text) >= 3 and text[-2] in negators and text[-3] == text[-1]


@lru_cache(maxsize=4096)
def _ja_status_ask(text: str) -> bool:
    """Japanese is not split into words either: もう終わった ("finished already"), サーバー起動した
    are one token, all Japanese, short, ending in a status word (``checkin_ja_ask_ending``). It
    asks only before a question mark (the rule's), as "finished?" does."""
    if not text or len(text) > JA_ASK_MAX_CHARS or not all(_is_japanese(ch) for ch in text):
        return False
    return text.endswith(tuple(_shipped_lexicon()["checkin_ja_ask_ending"]))


def _checkin_cjk_ask(token: Token) -> bool:
    return _cjk_status_ask(token.text)


def _checkin_ja_ask(token: Token) -> bool:
    return _ja_status_ask(token.text)


if not Token.has_extension("checkin_cjk_ask"):
    Token.set_extension("checkin_cjk_ask", getter=_checkin_cjk_ask)
"""A short Chinese status ask (``{"_": {"checkin_cjk_ask": true}}`` in a rule, which names
its particles as ``anchors``: the prefilter cannot read a custom attribute)."""
if not Token.has_extension("checkin_ja_ask"):
    Token.set_extension("checkin_ja_ask", getter=_checkin_ja_ask)
"""A short Japanese status word (``{"_": {"checkin_ja_ask": true}}``, before a question mark,
which is what the prefilter finds)."""


class RuleError(ValueError):
    """A rules file line that does not fit the schema (names file, line, what to fix)."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL rules file, without the ``_meta`` header; blank lines and
    ``//`` comments skipped."""
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise RuleError(f"{path}:{n}: not valid JSON ({exc}); one object per line") from exc
        if not isinstance(row, dict):
            raise RuleError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        if "_meta" not in row:
            row["_where"] = f"{path.name}:{n}"
            rows.append(row)
    return rows


def lexicon(path: Path | None = None) -> dict[str, frozenset[str]]:
    rows = read_jsonl(path or PATTERNS_DIR / "lexicon.jsonl")
    return {r["list"]: frozenset(w.lower() for w in r["words"]) for r in rows if "list" in r}


@lru_cache(maxsize=1)
def _shipped_lexicon() -> dict[str, frozenset[str]]:
    """``lexicon()``, read once: the token attributes ask it for each new word."""
    return lexicon()


VALID_ROLES = ("user", "assistant", "system", "tool")


def validate_prose_rule(row: dict[str, Any]) -> None:
    where = row.get("_where", "?")
    if not isinstance(row.get("label"), str) or not row["label"]:
        raise RuleError(f"{where}: missing 'label' (the tag name to emit)")
    pat = row.get("pattern")
    if not (isinstance(pat, str) and pat.strip()) and not (isinstance(pat, list) and pat):
        raise RuleError(
            f"{where}: 'pattern' must be a phrase string or a non-empty list of token patterns"
        )
    roles = row.get("roles", ["user", "assistant"])
    bad = [r for r in roles if r not in VALID_ROLES]
    if bad:
        raise RuleError(f"{where}: unknown roles {bad}; valid roles: {', '.join(VALID_ROLES)}")
    anchors = row.get("anchors")
    if anchors is not None and (
        not isinstance(anchors, list) or not anchors or not all(isinstance(a, str) and a for a in anchors)
    ):
        raise RuleError(
            f"{where}: 'anchors' must be a non-empty list of strings, one of which every match contains"
        )


def prefilter_steps(row: dict[str, Any]) -> list[list[Step]] | None:
    """The prefilter sequences of a prose rule (``triggers``): its declared ``anchors``, else
    what its pattern translates into."""
    anchors = row.get("anchors")
    return anchored(anchors) if anchors else variants(row["pattern"])


class PatternTagger:
    """Finds candidate tag spans with token and phrase patterns."""

    def __init__(self, nlp: Language, name: str, paths: list[str], spans_key: str) -> None:
        self.name = name
        self.spans_key = spans_key
        self.vocab = nlp.vocab
        self.patterns: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {}
        """role -> (rule key, token pattern): a doc runs only the rules whose anchor word it
        contains (the Matcher tries every pattern at every token)."""
        self._matchers: dict[tuple[str, tuple[int, ...]], Matcher] = {}
        """A Matcher per (role, candidate rules), built on first use."""
        self.required: dict[str, list[list[frozenset[int]]]] = {}
        """role -> per rule, the LOWER/ORTH hashes of each required token (one of each must occur)."""
        self.anchored: dict[str, dict[int, list[int]]] = {}
        """role -> hash of a word of a rule's smallest required set -> indexes into ``patterns[role]``."""
        self.unanchored: dict[str, list[int]] = {}
        """role -> indexes of the rules without an anchor (run on every doc)."""
        self.by_substring: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        """role -> (index, declared ``anchors``) of the rules without a required word that
        name strings one of which every match contains (run on the docs that hold one)."""
        self.phrases: dict[str, PhraseMatcher] = {}
        self.rules: dict[str, dict[str, Any]] = {}
        self._key_ids: dict[str, list[int]] = {}
        """role -> the string-store id of each rule key of ``patterns[role]`` (a Matcher's match id)."""
        self.triggers: dict[str, dict[str, list[list[list[Step]] | None]]] = {}
        """role -> label -> the prefilter token sequences of each rule (None: cannot be prefiltered)."""
        for p in paths or [str(PATTERNS_DIR / "prose.jsonl")]:
            for row in read_jsonl(Path(p)):
                if "pattern" in row:
                    self.add(nlp, row)

    def add(self, nlp: Language, row: dict[str, Any]) -> None:
        validate_prose_rule(row)
        rule_id = str(row.get("id") or f"{row['label']}:{len(self.rules)}")
        key = f"{rule_id}#{len(self.rules)}"
        self.rules[key] = {
            "label": row["label"],
            "id": rule_id,
            "roles": frozenset(row.get("roles", ["user", "assistant"])),
        }
        pat = row["pattern"]
        trigger = prefilter_steps(row)
        anchors = tuple(a.lower() for a in row.get("anchors") or ())
        required = [] if isinstance(pat, str) else [
            frozenset(self.vocab.strings.add(w) for w in words) for words in required_words(pat)
        ]
        for role in self.rules[key]["roles"]:
            self.triggers.setdefault(role, {}).setdefault(row["label"], []).append(trigger)
            try:
                if isinstance(pat, str):
                    if role not in self.phrases:
                        self.phrases[role] = PhraseMatcher(self.vocab, attr="LOWER")
                    self.phrases[role].add(key, [nlp.make_doc(pat)])
                    continue
                Matcher(self.vocab, validate=True).add(key, [pat])
            except Exception as exc:  # spaCy's pattern validation errors
                raise RuleError(f"{row.get('_where', '?')}: invalid pattern: {exc}") from exc
            rules = self.patterns.setdefault(role, [])
            rules.append((key, pat))
            self._key_ids.setdefault(role, []).append(self.vocab.strings.add(key))
            self.required.setdefault(role, []).append(required)
            if not required and anchors:
                self.by_substring.setdefault(role, []).append((len(rules) - 1, anchors))
            elif not required:
                self.unanchored.setdefault(role, []).append(len(rules) - 1)
            else:
                index = self.anchored.setdefault(role, {})
                for h in min(required, key=len):
                    index.setdefault(h, []).append(len(rules) - 1)

    def match(self, doc: Doc) -> list[Span]:
        role = doc.user_data.get("role", "user")
        found: list[Span] = []
        hits: list[tuple[int, int, int, int]] = []
        candidates = self._candidates(doc, role)
        if candidates:
            key_ids = self._key_ids[role]
            order = {key_ids[i]: i for i in candidates}
            matcher = self._matcher(role, candidates)
            hits.extend((start, -end, order[m], m) for m, start, end in matcher(doc))
        if role in self.phrases:
            n = len(self.patterns.get(role, []))
            hits.extend((start, -end, n, m) for m, start, end in self.phrases[role](doc))
        for start, neg_end, _, match_id in sorted(hits):
            end = -neg_end
            rule = self.rules[doc.vocab.strings[match_id]]
            if role in rule["roles"]:
                found.append(Span(doc, start, end, label=rule["label"], span_id=rule["id"]))
        return found

    def _candidates(self, doc: Doc, role: str) -> tuple[int, ...]:
        """Indexes of the rules of ``role`` that can match in ``doc``, in rule order."""
        index = self.anchored.get(role, {})
        found = set(self.unanchored.get(role, ()))
        by_substring = self.by_substring.get(role)
        if by_substring:
            text = doc.user_data.get("text")
            lower = (text if text is not None else doc.text).lower()
            found.update(i for i, anchors in by_substring if any(map(lower.__contains__, anchors)))
        if index:
            words = set(doc.to_array([LOWER, ORTH]).ravel().tolist())  # Python ints
            required = self.required[role]
            for h in index.keys() & words:  # the doc's anchor words, in C
                for i in index[h]:
                    if i not in found and all(not s.isdisjoint(words) for s in required[i]):
                        found.add(i)
        return tuple(sorted(found))

    def _matcher(self, role: str, rules: tuple[int, ...]) -> Matcher:
        key = (role, rules)
        matcher = self._matchers.get(key)
        if matcher is None:
            if len(self._matchers) >= MATCHER_CACHE_SIZE:
                self._matchers.clear()
            matcher = Matcher(self.vocab)
            for i in rules:
                rule_key, pat = self.patterns[role][i]
                matcher.add(rule_key, [pat])
            self._matchers[key] = matcher
        return matcher

    def set_annotations(self, doc: Doc, spans: list[Span]) -> None:
        group = doc.spans.get(self.spans_key)
        existing = list(group) if group is not None else []
        doc.spans[self.spans_key] = existing + spans

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations(doc, self.match(doc))
        return doc


def required_words(pattern: list[dict[str, Any]]) -> list[frozenset[str]]:
    """For each token of ``pattern`` that every match contains and that names its words
    (LOWER / ORTH / TEXT, a string or an ``IN`` list): those exact values."""
    out: list[frozenset[str]] = []
    for spec in pattern:
        if str(spec.get("OP", "")) not in _REQUIRED_OPS:
            continue
        for key in ("LOWER", "ORTH", "TEXT"):
            value = spec.get(key)
            if isinstance(value, str):
                out.append(frozenset({value}))
            elif isinstance(value, dict) and set(value) == {"IN"}:
                out.append(frozenset(str(v) for v in value["IN"]))
    return out


@Language.factory(
    "tag_patterns",
    default_config={"paths": [], "spans_key": SPANS_KEY},
    assigns=["doc.spans"],
)
def make_tag_patterns(nlp: Language, name: str, paths: list[str], spans_key: str) -> PatternTagger:
    return PatternTagger(nlp, name, paths, spans_key)


ABOUT_WORDS = 4
"""How many words a check-in may name its subject with ("any news on the 405b download")."""
QUESTION_MARKS = ("?", "？")


class CheckinGate:
    """A check-in is a short status ask and nothing else: every token outside
    the matched phrases must be filler, and most phrases need a question mark, unless
    the message opens with a question word ("is it up", "hows it going"). After the first
    question mark only matched phrases (another ask, an impatient remark: "ready? it's been
    20 minutes") and a narrower filler may follow: "ready? then run the benchmark" asks for work."""

    def __init__(self, name: str, lexicon_path: str, spans_key: str, max_tokens: int) -> None:
        lex = lexicon(Path(lexicon_path) if lexicon_path else None)
        self.name = name
        self.filler = lex["checkin_filler"]
        self.needs_q = lex["checkin_needs_question"]
        self.openers = lex["question_opener"]
        self.about = lex["checkin_about"]
        self.status_noun = lex["checkin_status_noun"]
        self.tail_filler = lex["checkin_tail_filler"]
        self.spans_key = spans_key
        self.max_tokens = max_tokens

    def match(self, doc: Doc) -> list[Span]:
        spans = [s for s in doc.spans.get(self.spans_key, []) if s.label_ == "user_checkin"]
        if not spans:
            return []
        words = [t for t in doc if not t.is_space]
        if not words or len(words) > self.max_tokens:
            return []
        covered = {t.i for s in spans for t in s}
        extra = [t for t in words if t.i not in covered and t.lower_ not in self.filler and not t.is_punct]
        if extra and not self._about_what(words, spans, extra):
            return []
        if not self._only_remarks_after_ask(words, covered):
            return []
        has_q = any(t.text in QUESTION_MARKS for t in words)
        if not has_q and all(s.id_ in self.needs_q for s in spans) and not self._opens_question(words, spans):
            return []
        first = min(t.i for t in words)
        last = max(t.i for t in words)
        return [Span(doc, first, last + 1, label="user_checkin", span_id=spans[0].id_)]

    def _about_what(self, words: list[Token], spans: list[Span], extra: list[Token]) -> bool:
        """The words that are not filler (``extra``) only name what the ask is about, in a short
        phrase after it ("any news on the download", "where are we with the int4 export?"): a
        word of ``checkin_about`` after the phrases matched before them, at most ``ABOUT_WORDS`` words
        after it, no question mark between (what follows one is another sentence)."""
        end = max((s.end for s in spans if s.start < extra[0].i), default=len(words[0].doc))
        about = next((t for t in words if t.i >= end and self._introduces_subject(t)), None)
        if about is None or about.i > extra[0].i or extra[-1].i - about.i > ABOUT_WORDS:
            return False
        return not any(t.text in QUESTION_MARKS for t in words if about.i < t.i < extra[-1].i)

    def _only_remarks_after_ask(self, words: list[Token], covered: set[int]) -> bool:
        """Every word after the first question mark is matched by a check-in phrase (another
        ask, an impatient remark: "is it up? you've been waiting forever") or is of
        ``checkin_tail_filler`` (greetings, thanks, interjections): the general filler holds
        subjects and verbs ("the benchmark", "run") that after the ask make a new request."""
        q = next((t.i for t in words if t.text in QUESTION_MARKS), None)
        return q is None or all(
            t.i in covered or t.is_punct or t.lower_ in self.tail_filler for t in words if t.i > q
        )

    def _introduces_subject(self, t: Token) -> bool:
        """A word of ``checkin_about`` ("any news on …"), or a verb in -ing right after a
        status noun ("any luck reproducing it?")."""
        if t.lower_ in self.about:
            return True
        return t.i > 0 and t.lower_.endswith("ing") and t.nbor(-1).lower_ in self.status_noun

    def _opens_question(self, words: list[Token], spans: list[Span]) -> bool:
        """A phrase that starts the message (after filler) with a question word: "did it come
        up", "is it up now" ask without a question mark; "it's all done" does not."""
        start = min(s.start for s in spans)
        if any(t.i < start and t.lower_ not in self.filler and not t.is_punct for t in words):
            return False
        return words[0].doc[start].lower_ in self.openers

    def set_annotations(self, doc: Doc, keep: list[Span]) -> None:
        others = [s for s in doc.spans.get(self.spans_key, []) if s.label_ != "user_checkin"]
        doc.spans[self.spans_key] = others + keep

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations(doc, self.match(doc))
        return doc


@Language.factory(
    "checkin_gate",
    default_config={"lexicon_path": "", "spans_key": SPANS_KEY, "max_tokens": 12},
    assigns=["doc.spans"],
)
def make_checkin_gate(
    nlp: Language, name: str, lexicon_path: str, spans_key: str, max_tokens: int
) -> CheckinGate:
    return CheckinGate(name, lexicon_path, spans_key, max_tokens)


_QUOTE_MARKS = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*`|\"[^\"\n]{1,400}\"|“[^”\n]{1,400}”|'(?<![A-Za-z]')[^'\n]{2,200}'(?![A-Za-z])",
    re.S | re.M,
)
"""Code and quotations. Every alternative opens with its quote character (a letter before
``'`` is looked for after it), so the engine skips to the next quote character at C speed."""
_QUOTED_LINE_BODY = r"\s*(?:>|\[\d{4}-\d\d-\d\d|INFO|WARNING|ERROR|DEBUG|\d{4}-\d\d-\d\d[ T]\d\d:)[^\n]*"
_QUOTED_LINE = re.compile("^" + _QUOTED_LINE_BODY, re.S | re.M)
"""Block quotes and log lines."""
_QUOTED_FIRST_LINE = re.compile(_QUOTED_LINE_BODY, re.S | re.M)
_QUOTED_NEXT_LINE = re.compile("\n" + _QUOTED_LINE_BODY, re.S | re.M)
"""``_QUOTED_LINE`` found as it is read: ``^`` holds only at the start and after a newline,
but the engine would try the pattern at every character; led by the literal newline, it
skips to the next one at memory speed (see ``_quoted_line``)."""


def _quoted_line(text: str, pos: int) -> tuple[int, int] | None:
    """The span of ``_QUOTED_LINE.search(text, pos)``, or None. A line starting at or after
    ``pos`` is the start of ``text`` or follows a newline at or after ``pos - 1``; the
    pattern after ``^`` is the same, so the match from there is the same (it may run over
    newlines: ``\\s*``), and the first line start found is the first one that matches."""
    if pos == 0:
        m = _QUOTED_FIRST_LINE.match(text)
        if m is not None:
            return m.span()
    m = _QUOTED_NEXT_LINE.search(text, max(pos - 1, 0))
    return (m.start() + 1, m.end()) if m is not None else None


def quoted_regions(text: str) -> list[tuple[int, int]]:
    """Character ranges that quote something (code, log lines, quotations): the matches of
    ``_QUOTE_MARKS|_QUOTED_LINE`` one after another, as ``finditer`` of the two joined would
    give them (no position can start a match of both), three times as fast."""
    out: list[tuple[int, int]] = []
    mark = _QUOTE_MARKS.search(text) if _has_quote_char(text) else None
    line = _quoted_line(text, 0)
    while True:
        if mark is not None and (line is None or mark.start() < line[0]):
            span = mark.span()
        elif line is not None:
            span = line
        else:
            return out
        out.append(span)
        end = span[1]  # matches are never empty
        if mark is not None and mark.start() < end:
            mark = _QUOTE_MARKS.search(text, end)
        if line is not None and line[0] < end:
            line = _quoted_line(text, end)


def _has_quote_char(text: str) -> bool:
    """``text`` holds a character that opens a match of ``_QUOTE_MARKS``: else none can
    match. A substring test per character is a ``memchr``; the engine, which tests every
    character against the four, takes twenty times as long to find none in unquoted prose."""
    return "'" in text or '"' in text or "`" in text or "“" in text


CONSEQUENCE_RULES = frozenset({"diagnosis:so:weak", "diagnosis:which-means:weak", "diagnosis:means:weak"})
"""Weak rules that a failure context does not unlock: after an error, ", so …" mostly
introduces the next action, not a cause."""
OBSERVATION_RULES = frozenset({"diagnosis:log-shows:weak"})
"""Weak rules that report what a log says: a diagnosis only when the sentence names a
failure in the author's own words, not in the quoted log line, and never unlocked by a
failure context (after a failed poll, "the log shows `Capture cuda graph begin`, so it
needs another minute" is a status report)."""
PENDING = frozenset({"yet"})
"""A negation (of ``PENDING_NEGATIONS``) followed by one of these reports something not done
so far ("Not yet", "not up yet"): progress, not a failure."""
PENDING_NEGATIONS = frozenset({"not", "cannot", "can't", "couldn't", "won't", "doesn't", "didn't", "isn't", "wasn't"})
PENDING_WINDOW = 4
"""How many words after a negation ``PENDING`` is looked for."""
COMPLEMENT_RULES = frozenset({"diagnosis:the-issue-is", "diagnosis:the-reason", "diagnosis:bottleneck-is"})
"""Diagnosis rules that announce a cause ("the error is …"): the words after them must state it."""
NOT_A_CAUSE = frozenset({
    "back", "gone", "fixed", "resolved", "solved", "reproducible", "reproduced", "intermittent",
    "persistent", "unchanged", "different", "same", "identical", "new", "now", "still", "visible",
    "here", "below", "above", "this", "following", "as", "shown", "printed", "logged", "reported",
})
"""First words after "the error is" that report the symptom ("the OOM is back", "the error is
now in a different file", "the error is as follows"), not its cause."""
PLAN_AFTER = frozenset({"'ll", "will", "'d", "should", "must", "gon"})
"""After "I"/"we": the clause is the author's next action ("I'll relaunch", "we should …");
"need/want/have to" and "am going" count too (see ``_gives_reason_for_action``)."""
CAN_NOT_PLAN = frozenset({"only", "not", "never", "barely", "hardly", "fit", "hold", "handle", "afford", "no"})
""" "we can only fit 16 requests" states a limit, "we can clean up" plans a step."""
FAILURE_NAMES = frozenset({"error", "crash", "failure", "oom", "exception", "traceback"})
"""Nouns whose "is …" complement is often a quoted log line ("the error is `KeyError: …`")."""
INQUIRY = frozenset({
    "check", "see", "find", "investigate", "figure", "out", "identify", "determine", "confirm",
    "verify", "debug", "locate", "profile", "understand", "know", "tell",
})
"""Verbs of finding out: "let me find what is causing it" announces a search, not a cause."""
WH = frozenset({"what", "why", "where", "whether", "if", "which", "how", "who"})
NEGATORS = frozenset({"no", "without", "zero", "0", "not", "never"})
"""A failure word right after one of these is not a failure ("without errors")."""
BEFORE = 8
"""How many of the words before a span ``ProseFilter`` reads (hedges, "let me", "find out what")."""


class ProseFilter:
    """Keeps only diagnosis / readiness spans that assert something in the author's own voice."""

    LABELS = ("diagnosis", "readiness_claim")

    def __init__(self, name: str, lexicon_path: str, spans_key: str) -> None:
        lex = lexicon(Path(lexicon_path) if lexicon_path else None)
        self.name = name
        self.spans_key = spans_key
        self.hedge = lex["hedge"]
        self.negation = lex["negation"]
        self.continuing = lex["continuing_state"]
        self.phrasal_up = lex["phrasal_up"]
        self.speculation = lex["speculation"]
        self.failure = lex["failure_cue"]
        self.observed_failure = lex["failure_cue"] | lex["failure_opener"]
        self.since_anchor = lex["since_anchor"]

    def _sentence(self, span: Span) -> Span:
        try:
            return span.sent
        except ValueError:  # no sentence boundaries set
            return span.doc[:]

    def _keep(self, span: Span, regions: list[tuple[int, int]], text: str) -> bool:
        """``text``: the doc's text (``sent.text`` is sliced from it: spaCy joins a span's
        text from its tokens, each time)."""
        if any(a <= span.start_char and span.end_char <= b for a, b in regions):
            return False
        sent = self._sentence(span)
        tail = span.doc[span.end : min(sent.end, span.end + 3)]
        if text[sent.start_char : sent.end_char].rstrip().endswith("?") or any(
            t.text == "?" for t in tail
        ):
            return False
        before = [t.lower_ for t in span.doc[max(sent.start, span.start - BEFORE) : span.start]]
        inside = [t.lower_ for t in span]
        if span.label_ == "readiness_claim":
            window = before[-6:] + inside
            if any(w in self.hedge for w in before[-8:]):
                return False
            if self._negates(window) or any(t.lower_ in ("yet",) for t in tail):
                return False
            return not self._phrasal_up(span)
        # diagnosis
        if any(w in self.speculation for w in before[-6:]):
            return False
        if before[-2:] in (["let", "me"], ["let", "'s"]) or (
            before and before[-1] in ("check", "see", "find", "identify", "locate", "investigate", "profile")
        ) or self._asks_what(before):
            return False
        if span.id_ in COMPLEMENT_RULES and not self._states_something(span, sent, regions):
            return False
        if self._dates_from(span, sent):
            return False
        if span.id_.endswith(":weak"):
            if self._gives_reason_for_action(span, sent) or self._reports_symptom(span, regions):
                return False
            if span.id_ in OBSERVATION_RULES:
                return self._mentions_failure(sent, self.observed_failure, regions)
            if span.doc.user_data.get("failure_context") and span.id_ not in CONSEQUENCE_RULES:
                return True  # right after an error, or in a message that opens with one
            return self._mentions_failure(sent, self.failure)
        return True

    def _negates(self, words: list[str]) -> bool:
        """A negation among ``words``; "still" negates ("still loading", "still not up")
        except before a state that goes on ("the server is still up", "still healthy")."""
        return any(
            w in self.negation
            and not (w == "still" and i + 1 < len(words) and words[i + 1] in self.continuing)
            for i, w in enumerate(words)
        )

    def _phrasal_up(self, span: Span) -> bool:
        """The claim's "up" belongs to a verb before it ("it only showed up now", "turned up
        again"): it appeared, nothing came up."""
        first = span[0]
        return first.lower_ == "up" and first.i > 0 and first.nbor(-1).lower_ in self.phrasal_up

    # --- diagnosis helpers -------------------------------------------------
    @staticmethod
    def _asks_what(before: list[str]) -> bool:
        """ "find out what is causing …", "see why it fails": a search announced, not a cause."""
        for i in (1, 2):
            if len(before) > i and before[-i] in WH and before[-i - 1] in INQUIRY:
                return True
        return False

    @staticmethod
    def _states_something(span: Span, sent: Span, regions: list[tuple[int, int]]) -> bool:
        """The words after "the error is" say something: not a status word ("back", "now"),
        not only a quotation or a colon before a log ("the error is `KeyError: …`")."""
        rest = [t for t in span.doc[span.end : sent.end] if not t.is_space]
        if span[-1].lower_ in NOT_A_CAUSE or (rest and rest[0].lower_ in NOT_A_CAUSE):
            return False
        if not any(t.lower_ in FAILURE_NAMES for t in span):
            return True  # "the culprit is `fused_moe_kernel`" names the cause in code
        return any(t.is_alpha and not any(a <= t.idx < b for a, b in regions) for t in rest)

    def _dates_from(self, span: Span, sent: Span) -> bool:
        """ "since the restart", "since the last deploy": a point in time (an event of
        ``since_anchor``, maybe after "last"/"first", ending its phrase), not a cause as in
        "since the restart wiped the cache"."""
        since = [t.i for t in span if t.lower_ == "since"]
        if not since:
            return False
        k = since[0] + 1
        for skippable in (("the", "this", "that", "our", "its"), ("last", "first", "previous", "latest", "recent")):
            if k < sent.end and span.doc[k].lower_ in skippable:
                k += 1
        if k >= sent.end or span.doc[k].lower_ not in self.since_anchor:
            return False
        return k + 1 >= sent.end or span.doc[k + 1].is_punct or span.doc[k + 1].lower_ in ("and", "but", "so")

    @staticmethod
    def _gives_reason_for_action(span: Span, sent: Span) -> bool:
        """A weak cue that justifies the author's next step ("I'll use setsid because …",
        "Since the server is up, let's …", "…, so I'll relaunch") instead of explaining a failure."""
        words = [t.lower_ for t in sent]
        start, end = span.start - sent.start, span.end - sent.start

        def plans(ws: list[str]) -> bool:
            for i, w in enumerate(ws):
                nxt, nxt2 = (ws[i + 1 : i + 3] + ["", ""])[:2]
                if w in ("let", "lets") and nxt in ("me", "'s", "us", ""):
                    return True
                if w in ("i", "we") and (
                    nxt in PLAN_AFTER
                    or (nxt in ("need", "want", "have") and nxt2 == "to")
                    or (nxt == "can" and nxt2 not in CAN_NOT_PLAN)
                    or (nxt in ("'m", "am", "'re", "are") and nxt2 == "going")
                ):
                    return True
            return False

        if span.id_ in CONSEQUENCE_RULES:
            return plans(words[end - 1 : end + 4])
        if start <= 1:  # "Since …, I'll …": the cue opens the sentence, the action follows
            return plans(words[start:])
        return plans(words[:start])

    @staticmethod
    def _reports_symptom(span: Span, regions: list[tuple[int, int]]) -> bool:
        """ "failed with `503 …`" / "crashed with exit code 1": what it failed with, not why."""
        if span[-1].lower_ != "with" or span.end >= len(span.doc):
            return False
        nxt = span.doc[span.end]
        return (
            any(a <= nxt.idx < b for a, b in regions)
            or nxt.like_num
            or nxt.lower_ in ("exit", "code", "status", "error", "an", "oom", "signal", "return")
        )

    def _mentions_failure(
        self, sent: Span, words: frozenset[str], regions: list[tuple[int, int]] | None = None
    ) -> bool:
        """A failure word (of ``words``) in the sentence that is not negated ("no errors",
        "without error"), nor a negation of something pending ("Not yet", "not up yet");
        with ``regions``, outside the quoted parts."""
        prev = ""
        tokens = list(sent)
        for i, t in enumerate(tokens):
            w = t.lower_
            if (
                w in words
                and prev not in NEGATORS
                and not (regions and any(a <= t.idx < b for a, b in regions))
                and not (w in PENDING_NEGATIONS and self._pending(tokens[i + 1 : i + 1 + PENDING_WINDOW]))
            ):
                return True
            prev = w
        return False

    @staticmethod
    def _pending(after: list[Token]) -> bool:
        return any(t.lower_ in PENDING for t in after)

    def match(self, doc: Doc) -> list[Span]:
        spans = list(doc.spans.get(self.spans_key, []))
        if all(span.label_ not in self.LABELS for span in spans):
            return spans
        text = doc.user_data.get("text")
        if text is None:
            text = doc.text  # joined from the tokens: once per doc
        regions = doc.user_data.get("quoted")
        if regions is None:
            regions = quoted_regions(text)
        return [s for s in spans if s.label_ not in self.LABELS or self._keep(s, regions, text)]

    def set_annotations(self, doc: Doc, keep: list[Span]) -> None:
        doc.spans[self.spans_key] = keep

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations(doc, self.match(doc))
        return doc


@Language.factory(
    "prose_filter",
    default_config={"lexicon_path": "", "spans_key": SPANS_KEY},
    assigns=["doc.spans"],
)
def make_prose_filter(nlp: Language, name: str, lexicon_path: str, spans_key: str) -> ProseFilter:
    return ProseFilter(name, lexicon_path, spans_key)


def build_nlp(extra_rules: Iterable[Path] = ()) -> Language:
    """spacy.blank("en") + sentencizer + the three components above."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    paths = [str(PATTERNS_DIR / "prose.jsonl"), *(str(p) for p in extra_rules)]
    nlp.add_pipe("tag_patterns", config={"paths": paths})
    nlp.add_pipe("checkin_gate")
    nlp.add_pipe("prose_filter")
    return nlp
