"""batchgate: the RE2 pattern written for a Python pattern matches wherever it does.

The one property that matters: a text the Python pattern matches in is never skipped
(``may_match_many`` says True for it). Checked on hand-picked constructs, on generated
texts built from each pattern's own pieces, and on the redaction gates."""

from __future__ import annotations

import re
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from analytics.analysis.tagging.tools import ToolRules
from analytics.batchgate import may_match_many, superset_source
from analytics.redact import Redactor
from analytics.redact.patterns import ascii_lower, load_patterns

CASES = [
    # (pattern, texts it matches in, texts the superset rules out)
    (r"A[KS]IA[0-9A-Z]{16}", ["x AKIA0123456789ABCDEF"], ["AKIA", "akia0123456789abcdef"]),
    (r"(?<=x)y(?!z)\b", ["xy"], ["y", "yx"]),
    (r"ab(?<=xab)c", ["xabc"], ["abc"]),
    (r"ab(?<=zz)c", [], ["zzabc", "abc"]),
    (r"ken(?<=[-_]token)\s", ["my_token x", "a-token\t"], ["token usage"]),
    (r"a(?:b(?=cd)|e)", ["abcd", "ae"], ["abc"]),
    (r"k(?:e(?:y=(?<=akey=)\d|n(?<=token)=))", ["akey=1", "token="], ["key=1", "ken="]),
    (r"(?i)foo\s+bar", ["FOO \x1c Bar", "foo\x0bbar"], ["foobar"]),
    (r"(?i:ſ)x", ["sx", "Sx"], []),
    (r"[^ſa]", ["b"], ["aaa"]),
    (r"(?i)[^k]x", ["ax"], ["kx", "Kx"]),
    (r"(?s)a.b", ["a\nb"], []),
    (r"a.b", ["a b"], ["a\nb"]),
    (r"(a)\1", ["aa"], ["b"]),
    (r"(?P<x>a)?(?(x)b|c)", ["ab", "c"], ["d"]),
    (r"a{100,}", ["a" * 100], ["a" * 10]),
    (r"\w+@\d", ["x_1@2"], ["@2"]),
    (r"\W\D\S", ["-x!"], []),
    (r"(?>ab|a)c", ["abc", "ac"], ["bc"]),
    (r"x*+y", ["xxy", "y"], ["x"]),
    (r"(?=ab)a", ["ab"], []),
    (r"^start$", ["start"], []),
    (r"(?-i:A)b", ["Ab"], ["ab"]),
    (r"(?i)a(?-i:B)", ["aB", "AB"], ["ab"]),
]


@pytest.mark.parametrize("pattern,hits,misses", CASES)
def test_superset_on_constructs(pattern: str, hits: list[str], misses: list[str]) -> None:
    rx = re.compile(pattern)
    source = superset_source(rx)
    assert source is not None
    for text in hits:
        assert rx.search(text), (pattern, text)
    for text in misses:
        assert not rx.search(text), (pattern, text)
    assert may_match_many(source, hits) == [True] * len(hits)
    assert may_match_many(source, misses) == [False] * len(misses)


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_superset_on_generated_texts(data: st.DataObject) -> None:
    """Texts made of a pattern's own characters (and case changes, spaces, control
    characters): whatever the Python pattern matches in, the superset does."""
    pattern, hits, misses = data.draw(st.sampled_from(CASES))
    pieces = [*hits, *misses, *set(pattern), " ", "\x1c", "\x0b", "\n", "A", "k", "K"]
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=12)))
    rx = re.compile(pattern)
    if text.isascii() and rx.search(text):
        assert may_match_many(superset_source(rx), [text]) == [True]


def test_non_ascii_and_unknown_are_always_maybe() -> None:
    """Non-ASCII texts are left to the Python pattern (its classes read them differently)."""
    source = superset_source(re.compile(r"(?i)straße"))
    assert may_match_many(source, ["STRASSE", "nothing é"]) == [False, True]
    assert may_match_many(None, ["a", "b"]) == [True, True]
    assert superset_source(re.compile(rb"x")) is None  # type: ignore[arg-type]


# --- the redaction gates --------------------------------------------------------------

_GATE_PIECES = [
    "token", "_token", "-token", "access_token", "key", "api_key", "apikey", "accountkey=",
    "private key", " block", "-----", "password", "passwd", "secret", "-secret", "_pwd",
    "authorization", "bearer ", "Bearer ", "Token", "basic ", "aiza", "AIza", "eyJ", "eyj",
    "sk-", "sk-ant-", "rk_live_", "ghp_", "github_pat_", "hf_", "xoxb-", "glpat-", "sg.",
    "mysql", "mariadb", " -p", "curl", " -u ", "https://", "user:pw@", "AKIA", "ASIA",
    "=", ":", ": ", ":=", "\"", "'", "`", "]", "\\", " ", "\t", "\x1c", "\n", ",", ";",
    "0123456789abcdef", "ABCDEFGHIJKLMNOP", "Zx9_Qw8-", "aB3dE5fG7hJ9kL1m", "usage",
]


@given(st.lists(st.sampled_from(_GATE_PIECES), max_size=10))
@settings(max_examples=1500, deadline=None)
def test_redaction_gate_superset(pieces: list[str]) -> None:
    """A text any redaction gate hits is never skipped by the batch gate."""
    gate = load_patterns().gate
    text = "".join(pieces)
    if gate.any_hit(text) is not None:
        assert _may_hit(gate, [text]) == [True], text


def _may_hit(gate: Any, texts: list[str]) -> list[bool]:
    return gate.may_hit_column(pa.array(texts))  # type: ignore[no-any-return]


def test_redaction_gates_all_translate() -> None:
    """Every gate has a superset (else every text would go to the Python gates)."""
    gate = load_patterns().gate
    for _, rx in (*gate.on_text, *gate.on_low):
        assert superset_source(rx) is not None, rx.pattern


def test_no_sample_text_with_a_secret_is_skipped(sample_texts: list[str]) -> None:
    """Every text of the samples in which redaction finds something may hold a secret."""
    texts = [*sample_texts, "export HF_TOKEN=hf_" + "a1B2" * 8, "plain words"]
    redactor = Redactor()
    maybe = redactor.may_hold_secrets(pa.array(texts))
    found = [bool(redactor.redact(t)[1]) for t in texts]
    assert all(m for m, f in zip(maybe, found, strict=True) if f)
    assert found[-2] and not maybe[-1]


@pytest.fixture(scope="module")
def sample_texts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every message text, command, input and output of the bundled samples, unredacted."""
    import duckdb

    from analytics.ingest import ingest
    from analytics.samples_path import sample_inputs

    db = tmp_path_factory.mktemp("gate") / "s.duckdb"
    ingest(sample_inputs(), db=db, redact=False, analyse=False, build_index=False)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT text FROM messages UNION ALL SELECT command FROM tool_calls "
            "UNION ALL SELECT input FROM tool_calls UNION ALL SELECT output FROM tool_calls"
        ).fetchall()
    texts = [r[0] for r in rows if r[0]]
    assert len(texts) > 500
    return texts


def test_lowered_side_matches_as_python_lowers() -> None:
    """The gates searched in the lowered text are matched in the lowered text."""
    gate = load_patterns().gate
    text = "EXPORT ACCESS_TOKEN=Zx9_Qw8-aB3dE5fG"
    assert gate.any_hit(text) == ascii_lower(text)
    assert _may_hit(gate, [text]) == [True]


def test_the_lowered_side_ignoring_case_lets_through_what_the_lowered_text_does(
    sample_texts: list[str],
) -> None:
    """Matched ignoring case (``(?i:…)``, as ``patterns._batch_source`` writes them) rather
    than in the lowered texts, the gates searched in the lowered text let through the same
    sample texts (no more: as selective), and every text their match in the lowered text
    lets through (the superset, by construction)."""
    import pyarrow.compute as pc

    from analytics.batchgate import may_match_column
    from analytics.redact.patterns import _batch_sources

    _, on_low = _batch_sources(load_patterns().gate)
    texts = [t for t in sample_texts if t.isascii()]
    texts += ["EXPORT ACCESS_TOKEN=Zx9_Qw8-aB3dE5fG", "Private Key-----", "nothing here"]
    column = pa.array(texts)
    in_lowered = pc.match_substring_regex(pc.ascii_lower(column), pattern=on_low).to_pylist()
    assert may_match_column(f"(?i:{on_low})", column) == in_lowered
    assert sum(in_lowered) >= 3  # (the samples' secrets and the two planted here)


def test_planted_secrets_are_never_skipped() -> None:
    """Every planted secret's context (tests/fixtures/secrets) may hold a secret, as an
    ASCII text and as one made non-ASCII."""
    import json
    from pathlib import Path

    manifest = json.loads(
        (Path(__file__).resolve().parent / "fixtures" / "secrets" / "manifest.json").read_text()
    )
    contexts = [m["context"] for m in manifest]
    contexts += [c + " café" for c in contexts]
    assert all(Redactor().may_hold_secrets(pa.array(contexts)))


# --- the tagger's tool rules ----------------------------------------------------------


@pytest.fixture(scope="module")
def tool_rules() -> ToolRules:
    return ToolRules()


def test_every_tool_rule_and_marker_translates(tool_rules: ToolRules) -> None:
    """Each place's rules and markers have one RE2 superset (else nothing is silent)."""
    assert all(source is not None for source in tool_rules._sources.values())


def _rule_pieces() -> list[str]:
    rules = ToolRules()
    words = {n for r in rules.rules for n in r.needs}
    words |= {n for marks in rules._markers_at.values() for _, needs in marks for n in needs}
    glue = ["\n", " ", ": ", "(", ")", "1", "500", "Error", "error", "OK", "Decode batch", "\t"]
    return sorted(words) + glue


@given(st.lists(st.sampled_from(_rule_pieces()), max_size=8))
@settings(max_examples=1500, deadline=None)
def test_silent_texts_have_no_hits(pieces: list[str]) -> None:
    """A text found silent for a place gives no abort marker and no rule hit there: what
    ``abort`` and ``text_hits`` find on it without the note."""
    rules = ToolRules()
    text = "".join(pieces)
    plain = {
        "abort": [rules.abort(w, text) for w in ("output", "text")],
        "hits": [rules.text_hits(on, text) for on in ("output", "text")],
    }
    rules.note_silent([text], [text])
    noted = {
        "abort": [rules.abort(w, text) for w in ("output", "text")],
        "hits": [rules.text_hits(on, text) for on in ("output", "text")],
    }
    assert noted == plain


def test_log_outputs_are_silent(tool_rules: ToolRules) -> None:
    """The common case the note is for: a server's log lines match no output rule."""
    log = "[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, #token: 5123, gen throughput (token/s): 25.31\n" * 5
    tool_rules.note_silent([log], [log])
    assert log in tool_rules._silent["output"] and log in tool_rules._silent["text"]
    tool_rules.note_silent(["Traceback (most recent call last):\nRuntimeError: CUDA out of memory"], [])
    assert not tool_rules._silent["output"]


# --- the job markers readiness reads ---------------------------------------------------


def _marker_pieces() -> list[str]:
    from analytics.analysis import jobs

    cfg = jobs.config()
    words = {w for _, g in (*cfg.markers, *cfg.rare_markers) for w in (g.literals or ())}
    words |= {w.upper() for w in words}
    glue = ["\n", "\r", " ", ": ", "100%", "50%", "|", "[3/10]", "1.2G", "Killed", "error", "\t"]
    return sorted(words) + glue


@given(st.lists(st.sampled_from(_marker_pieces()), max_size=8))
@settings(max_examples=1500, deadline=None)
def test_unmarked_outputs_show_no_job_state(pieces: list[str]) -> None:
    """An output found unmarked has no job state (other than a re-check's header)."""
    from analytics.analysis import jobs

    text = "".join(pieces)
    if jobs.unmarked([text]) == [True]:
        assert jobs.job_state(text) is None, text


def test_job_markers_translate_and_log_lines_are_unmarked() -> None:
    from analytics.analysis import jobs

    log = "[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, token usage: 0.04\n" * 3
    done = "Downloading model-00001-of-00004.safetensors: 100%|██████████| 4.98G/4.98G"
    assert jobs.unmarked([log, "Building wheel for flash-attn (setup.py) ... done"]) == [True, False]
    assert jobs.unmarked([done]) == [False]  # (non-ASCII: left to the markers)


# --- the prose prefilter's text gate ----------------------------------------------------

@pytest.fixture(scope="module")
def word_triggers() -> list[Any]:
    from analytics.analysis.tagging.pipeline import Tagger
    from analytics.analysis.tagging.triggers import WordTrigger

    tagger = Tagger()
    found = [
        t for role in ("assistant", "user") for _, group in tagger._triggers(role) if group
        for t in group if isinstance(t, WordTrigger)
    ]
    assert found and all(t.finder is not None for t in found)
    return found


def _trigger_pieces() -> list[str]:
    """Words of the prose rules, and phrases that follow their token patterns (each token
    written as its first word), with glue."""
    from analytics.analysis.tagging.components import PATTERNS_DIR, read_jsonl
    from analytics.analysis.tagging.triggers import variants

    words: set[str] = set()
    phrases: set[str] = set()
    for row in read_jsonl(PATTERNS_DIR / "prose.jsonl"):
        for seq in variants(row.get("pattern") or []) or []:
            said = [{"*": "it", "\\d": "42"}.get(tok[0], tok[0]) for tok, _ in seq]
            phrases.add(" ".join(said))
            words.update(w for tok, _ in seq for w in tok if w not in ("*", "\\d"))
    glue = [" ", " ", "  ", "\n", ", ", ". ", "'s", "n't", "7", "3.5", "!", "x"]
    return sorted(phrases) + sorted(words) + glue


def _finds(trigger: Any, padded: str) -> bool:
    return trigger.finder(padded.encode("ascii"), 0) >= 0


def test_rule_phrases_mostly_match_and_are_found(word_triggers: list[Any]) -> None:
    """The phrases the generated texts are made of do reach the prefilters (the finder's
    tests are not idle), and the finder finds a place in them."""
    phrases = [p for p in _trigger_pieces() if " " in p.strip() and p.isascii()]
    found = [p for p in phrases if any(t.regex.search(" " + p) for t in word_triggers)]
    assert len(found) > len(phrases) // 2
    assert all(any(_finds(t, " " + p) for t in word_triggers) for p in found)


def test_text_finder_on_the_samples_and_plain_prose(
    word_triggers: list[Any], sample_texts: list[str]
) -> None:
    """In every ASCII sample text a prefilter matches in, the finder finds a place at or
    before the first match; ordinary prose that holds no trigger, and log lines, have none."""
    matched = 0
    for trigger in word_triggers:
        for text in sample_texts:
            padded = " " + text.lower()
            if padded.isascii() and (m := trigger.regex.search(padded)):
                matched += 1
                assert 0 <= trigger.finder(padded.encode("ascii"), 0) <= m.start(), text[:200]
    assert matched > 100
    for trigger in word_triggers:
        assert not _finds(trigger, " the weather was pleasant, and we walked home.")
        assert not _finds(trigger, " [2026-05-14 19:58:03 tp0] decode batch, #running-req: 16")


def test_text_finder_without_re2_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from analytics.batchgate import text_finder

    pattern = re.compile(r"\bready\b")
    assert text_finder(pattern) is not None
    monkeypatch.setitem(sys.modules, "re2", None)  # (import re2 raises ImportError)
    assert text_finder(pattern) is None
    assert text_finder(re.compile(br"(?L)x")) is None  # type: ignore[arg-type]


def test_word_trigger_makes_its_finder_after_some_texts(word_triggers: list[Any]) -> None:
    """A WordTrigger searches its first ``FINDER_AFTER`` texts without the finder (a small
    ingest does not pay for making it), then with it: the same matches either way."""
    from analytics.analysis.tagging.triggers import FINDER_AFTER, WordTrigger

    trigger = WordTrigger(word_triggers[0].body)
    texts = ["it's up and ready now", "the weather was pleasant", "the root cause is the cache"] * 4
    before = [trigger.spans(t) for t in texts]
    assert "finder" not in vars(trigger) and trigger._before_finder == FINDER_AFTER - len(texts)
    trigger._before_finder = 0
    after = [trigger.spans(t) for t in texts]
    assert vars(trigger)["finder"] is not None and after == before and any(before)


@given(st.lists(st.sampled_from(_trigger_pieces()), max_size=10), st.integers(0, 60))
@settings(max_examples=1500, deadline=None)
def test_text_finder_never_skips_a_prose_match(
    word_triggers: list[Any], pieces: list[str], pos: int
) -> None:
    """The finder's position is at or before the next match of a prose prefilter, and the
    prefilter searched from there finds that match."""
    text = " " + "".join(pieces).lower()
    assume(text.isascii())  # (the finder is for ASCII texts)
    pos = min(pos, len(text))
    for trigger in word_triggers:
        found = trigger.finder(text.encode("ascii"), pos)
        first = trigger.regex.search(text, pos)
        if first is None:
            assert found == -1 or trigger.regex.search(text, found) is None
        else:
            assert pos <= found <= first.start()
            assert trigger.regex.search(text, found).span() == first.span()


def test_word_trigger_spans_with_the_finder_on_the_samples(
    word_triggers: list[Any], sample_texts: list[str]
) -> None:
    """A WordTrigger finds the same spans in every sample text (ASCII or not) with its
    finder as the regex alone does, and many are found."""
    from analytics.analysis.tagging.triggers import WordTrigger

    found = 0
    for body in {t.body for t in word_triggers}:
        plain, fast = WordTrigger(body), WordTrigger(body)
        fast._before_finder = 0
        for text in sample_texts:
            lower = text.lower()
            plain._before_finder = 1  # (never its finder)
            spans = plain.spans(lower)
            assert fast.spans(lower) == spans, text[:200]
            found += len(spans)
    assert found > 100


def test_the_engine_finder_and_the_module_finder_agree() -> None:
    """The finder calls RE2's engine directly where the module allows it, and falls back
    to the module's search (same answers) where it does not."""
    import re2

    from analytics import batchgate

    pattern = re.compile(r"\b(?:ready|serving)\b")
    source = batchgate.superset_source(pattern)
    regex = re2.compile(source)
    engine = batchgate._engine_finder(re2, regex)
    module = batchgate._module_finder(regex)
    assert engine is not None
    for data, pos in ((b"it is ready now", 0), (b"it is ready now", 7), (b"serving", 0), (b"", 0)):
        assert engine(data, pos) == module(data, pos)
    assert engine(b"it is ready now", 0) == 6 and engine(b"it is ready now", 7) == -1

    class Wrapped:  # a module whose compiled pattern has no engine object to call
        search = regex.search

    assert batchgate._engine_finder(re2, Wrapped()) is None


# --- columns searched where Arrow keeps their characters ------------------------------


def _per_text(source: str, column: Any) -> list[bool]:
    """Arrow's own answer, text by text (a NULL: False)."""
    import pyarrow.compute as pc

    found = pc.match_substring_regex(column, pattern=source)
    return [hit is True for hit in found.to_pylist()]


def test_a_match_running_into_the_next_text_is_looked_for_within_its_own() -> None:
    """Searched in the texts one after another, a match running from one text into the
    next is looked for again within the text it starts in, and the search goes on from
    the next text's start: the answers are Arrow's, text by text."""
    from analytics.batchgate import _buffer_hits

    column = pa.array(["xa", "b", "ab", None, "", "a", "b", "aab", "a"])
    expected = [False, False, True, False, False, False, False, True, False]
    assert _per_text("ab", column) == expected
    assert _buffer_hits("ab", column) == expected
    assert _buffer_hits("(?i:AB)", column) == expected
    assert _buffer_hits("a+b?", column) == _per_text("a+b?", column)  # (a longer one)
    sliced = column.slice(2)  # (an offset into the buffers)
    assert _buffer_hits("ab", sliced) == expected[2:]
    chunked = pa.chunked_array([column.slice(0, 3), column.slice(3)])
    assert _buffer_hits("ab", chunked) == expected


def test_no_finder_for_a_pattern_matching_the_empty_text() -> None:
    """A match of nothing starts in no text: such a pattern is left to Arrow."""
    from analytics.batchgate import _buffer_finder, may_match_column

    assert _buffer_finder("a*") is None
    assert may_match_column("a*", pa.array(["", "b", None])) == [True, True, False]


@pytest.mark.parametrize("ignore_case", [False, True])
def test_column_gates_let_through_every_sample_text_arrow_does(
    sample_texts: list[str], ignore_case: bool,
) -> None:
    """For the redaction gates (as one and apart) and the tagger's, as they are and
    ignoring case, over the samples' texts (ASCII or not, in chunks, sliced): the texts let
    through are those Arrow's per-text search matches, and the non-ASCII ones."""
    from analytics.batchgate import may_match_column
    from analytics.redact.patterns import _batch_source, _batch_sources

    gate, tools = load_patterns().gate, ToolRules()
    sources = [
        f"(?i:{s})" if ignore_case else s
        for s in (_batch_source(gate), *_batch_sources(gate), *tools._sources.values()) if s
    ]
    assert len(sources) >= 3
    texts: list[str | None] = [*sample_texts, None, ""]
    column = pa.chunked_array([pa.array(texts[:300]), pa.array(texts[300:]).slice(1)])
    matched = 0
    for source in sources:
        ours = may_match_column(source, column)
        arrow = _per_text(source, column)
        kept = [*texts[:300], *texts[301:]]
        plain = [t is None or t.isascii() for t in kept]  # (a NULL: never let through)
        assert ours == [a or not p for a, p in zip(arrow, plain, strict=True)], source[:80]
        matched += sum(arrow)
    assert matched  # (gates that let some through)


def test_without_the_re2_module_arrow_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``re2`` module (or a pattern it refuses): Arrow's kernel answers, the same."""
    from analytics import batchgate

    column = pa.array(["xa", "b", "ab", None, "café ab", "AB"])
    source = "a(?:b)"  # (not asked for before: ``_buffer_finder`` remembers its answers)
    monkeypatch.setattr(batchgate, "_re2", lambda source: None)
    assert batchgate._buffer_finder(f"(?i:{source})") is None
    assert batchgate.may_match_column(f"(?i:{source})", column) == [
        False, False, True, False, True, True]
    monkeypatch.undo()
    assert batchgate._buffer_finder(source) is not None
    assert batchgate.may_match_column(source, column) == [False, False, True, False, True, False]
