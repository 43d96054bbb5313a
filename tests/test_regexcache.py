"""The on-disk cache of compiled large patterns gives what re.compile gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analytics import regexcache
from analytics.analysis.tagging.triggers import compile_triggers, variants

WORDS = [f"w{i:04d}ord" for i in range(1500)]
PATTERN = r"\b(?:" + "|".join(WORDS) + r")\s+(?P<next>\w+)"
TEXTS = ["a w0042ord follows here", "nothing to see", "W1499ORD then", "x w0999ord"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(regexcache.CACHE_ENV, str(tmp_path))
    return tmp_path / "regex"


def _same(a: re.Pattern[str], b: re.Pattern[str]) -> None:
    assert (a.pattern, a.flags, a.groups, a.groupindex) == (b.pattern, b.flags, b.groups, b.groupindex)
    for text in TEXTS:
        found = [(m.span(), m.groupdict()) for m in a.finditer(text)]
        assert found == [(m.span(), m.groupdict()) for m in b.finditer(text)]


def test_a_large_pattern_is_compiled_once_then_read_from_the_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = regexcache.compiled(PATTERN, re.I)
    _same(first, re.compile(PATTERN, re.I))
    assert len(list(cache.glob("*.marshal"))) == 1

    def no_assembly(*_: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(regexcache, "_assemble", no_assembly)
    _same(regexcache.compiled(PATTERN, re.I), re.compile(PATTERN, re.I))


def test_flags_are_part_of_the_key(cache: Path) -> None:
    regexcache.compiled(PATTERN)
    regexcache.compiled(PATTERN, re.I)
    assert len(list(cache.glob("*.marshal"))) == 2
    assert regexcache.compiled(PATTERN).search("W0001ORD x") is None
    assert regexcache.compiled(PATTERN, re.I).search("W0001ORD x") is not None


def test_a_corrupt_cache_file_is_compiled_again_and_replaced(cache: Path) -> None:
    regexcache.compiled(PATTERN)
    (path,) = cache.glob("*.marshal")
    path.write_bytes(b"not marshal data")
    _same(regexcache.compiled(PATTERN), re.compile(PATTERN))
    _same(regexcache.compiled(PATTERN), re.compile(PATTERN))
    assert path.read_bytes() != b"not marshal data"


def test_switched_off_or_small_patterns_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(regexcache.CACHE_ENV, "off")
    _same(regexcache.compiled(PATTERN), re.compile(PATTERN))
    monkeypatch.setenv(regexcache.CACHE_ENV, str(tmp_path))
    regexcache.compiled(r"\bsmall\b")
    assert not list(tmp_path.rglob("*.marshal"))


def test_an_unwritable_cache_folder_still_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv(regexcache.CACHE_ENV, str(blocker))
    _same(regexcache.compiled(PATTERN), re.compile(PATTERN))
    assert not list(tmp_path.glob("*.tmp"))


def test_prose_prefilters_from_the_cache_find_what_they_found(cache: Path) -> None:
    seqs = [v for p in (
        [{"LOWER": {"IN": WORDS[:400]}}, {"LOWER": "is", "OP": "?"}, {"LOWER": "ready"}],
        [{"LOWER": "root"}, {"LOWER": "cause"}],
    ) for v in variants(p) or []]
    texts = ["w0003ord is ready now", "the root cause was", "w0003ord ready", "nothing"]
    fresh = [[t.spans(x) for x in texts] for t in compile_triggers(seqs)]
    assert list(cache.glob("*.marshal"))
    again = [[t.spans(x) for x in texts] for t in compile_triggers(seqs)]
    assert again == fresh and fresh[0] == [[(0, 18)], [(4, 15)], [(0, 14)], []]


def test_a_derived_text_is_made_once_then_read_from_the_cache(cache: Path) -> None:
    made: list[str] = []

    def make() -> str:
        made.append("x")
        return "derived ü \ud800"  # (any text, a lone surrogate too)

    assert regexcache.remembered("kind", PATTERN, 0, make) == "derived ü \ud800"
    assert regexcache.remembered("kind", PATTERN, 0, make) == "derived ü \ud800"
    assert made == ["x"]
    assert regexcache.remembered("other kind", PATTERN, 0, make) == "derived ü \ud800"
    assert made == ["x", "x"]  # the kind is part of the key


def test_none_is_remembered_and_a_corrupt_file_made_again(cache: Path) -> None:
    calls: list[int] = []

    def nothing() -> None:
        calls.append(1)

    assert regexcache.remembered("kind", PATTERN, 0, nothing) is None
    assert regexcache.remembered("kind", PATTERN, 0, nothing) is None
    assert calls == [1]
    (path,) = cache.glob("*.txt")
    path.write_bytes(b"\xff\xfe not a kept text")
    assert regexcache.remembered("kind", PATTERN, 0, lambda: "again") == "again"
    assert regexcache.remembered("kind", PATTERN, 0, nothing) == "again"


def test_small_patterns_are_not_remembered(cache: Path) -> None:
    assert regexcache.remembered("kind", "small", 0, lambda: "made") == "made"
    assert not cache.exists() or not list(cache.glob("*.txt"))
