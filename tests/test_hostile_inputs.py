"""Hostile inputs against every parser: nothing escapes ``parse`` and the ledger reconciles.

Property: parsing any bytes with a format's parser either raises a typed
``AnalyticsError`` for the whole file, or finishes with
``records_read == records_stored + records_quarantined``. Seed records and damages
come from scripts/fuzz_ingest.py (the same generators the fuzz run uses).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.errors import AnalyticsError
from analytics.models import Ledger, Quarantined

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fuzz_ingest", ROOT / "scripts" / "fuzz_ingest.py")
assert _spec and _spec.loader
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_ingest"] = fuzz  # dataclasses look their module up there
_spec.loader.exec_module(fuzz)

SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
JSONL_FORMATS = ("claude_code", "codex")


def parser(fmt: str) -> ModuleType:
    try:
        detect = importlib.import_module("analytics.sources.detect")
        return detect.get_module(fmt)
    except (ImportError, AnalyticsError) as exc:
        pytest.skip(f"parser {fmt} not importable yet: {exc}")


def parse_bytes(fmt: str, data: bytes, suffix: str | None = None) -> tuple[Ledger, list[Any]]:
    """Parse ``data`` written to a temp file; assert the contract; return ledger and items."""
    module = parser(fmt)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"session{fuzz.EXTENSIONS[fmt] if suffix is None else suffix}"
        path.write_bytes(data)
        ledger = Ledger()
        try:
            items = list(module.parse(path, ledger))
        except AnalyticsError:
            return ledger, []
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined, ledger
    quarantined = [i for i in items if isinstance(i, Quarantined)]
    assert len(quarantined) == ledger.records_quarantined
    assert all(q.error for q in quarantined), "every quarantined record says why"
    return ledger, items


def seed(fmt: str) -> bytes:
    return fuzz.seed_bytes(fmt, random.Random(0), 0)


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
def test_seed_files_parse_cleanly(fmt: str) -> None:
    ledger, items = parse_bytes(fmt, seed(fmt))
    assert items and ledger.records_stored > 0


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
@SETTINGS
@given(
    rnd=st.randoms(use_true_random=False),
    damage=st.sampled_from(fuzz.DAMAGES),
    mutations=st.integers(0, 5),
)
def test_damaged_files_never_crash(
    fmt: str, rnd: random.Random, damage: str, mutations: int
) -> None:
    data = fuzz.damage(fuzz.seed_bytes(fmt, rnd, mutations), rnd, damage)
    parse_bytes(fmt, data)


def _records(fmt: str) -> Any:
    return {
        "claude_code": fuzz.claude_code_records,
        "codex": fuzz.codex_records,
        "opencode": fuzz.opencode_document,
    }[fmt]()


def _encode(fmt: str, records: Any) -> bytes:
    if fmt == "opencode":
        return fuzz.dumps(records).encode("utf-8", "surrogatepass")
    return ("\n".join(fuzz.dumps(r) for r in records) + "\n").encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("fmt", ["claude_code", "codex", "opencode"])
def test_wrong_type_in_every_field(fmt: str) -> None:
    base = _records(fmt)
    values: list[Any] = [None, 7, 1.5, True, [], {}, "", [None], {"x": []}]
    rng = random.Random(1)
    for path in fuzz.paths(base):
        for value in rng.sample(values, 4):
            mutated = json.loads(json.dumps(base))
            fuzz.set_path(mutated, path, value)
            parse_bytes(fmt, _encode(fmt, mutated))


@pytest.mark.parametrize("fmt", JSONL_FORMATS)
@SETTINGS
@given(data=st.data())
def test_mutated_records_keep_the_ledger(fmt: str, data: st.DataObject) -> None:
    records = _records(fmt)
    i = data.draw(st.integers(0, len(records) - 1))
    rng = data.draw(st.randoms(use_true_random=False))
    records[i] = fuzz.mutate_record(records[i], rng, data.draw(st.integers(1, 4)))
    ledger, _ = parse_bytes(fmt, _encode(fmt, records))
    assert ledger.records_read >= len(records) - 1


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
@SETTINGS
@given(blob=st.binary(max_size=2048))
def test_binary_content(fmt: str, blob: bytes) -> None:
    parse_bytes(fmt, blob)


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
@SETTINGS
@given(text=st.text(max_size=500))
def test_arbitrary_text(fmt: str, text: str) -> None:
    parse_bytes(fmt, text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
@pytest.mark.parametrize(
    "data",
    [b"", b"\n\n\n", b"\x00" * 100, b"\xff\xfe\xfd"],
    ids=["empty", "blank", "nul", "bad-utf8"],
)
def test_degenerate_files(fmt: str, data: bytes) -> None:
    ledger, _ = parse_bytes(fmt, data)
    assert ledger.records_stored == 0 or fmt == "transcript_text"


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
def test_deeply_nested_json(fmt: str) -> None:
    deep = (fuzz.deep_json(100_000) + "\n").encode()
    parse_bytes(fmt, seed(fmt) + deep)
    parse_bytes(fmt, deep)


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
def test_nul_bytes_and_invalid_utf8_inside_records(fmt: str) -> None:
    data = seed(fmt)
    mid = len(data) // 2
    parse_bytes(fmt, data[:mid] + b"\x00\x00" + data[mid:])
    parse_bytes(fmt, data[:mid] + b"\xc3\x28\xed\xa0\x80" + data[mid:])


@pytest.mark.parametrize("fmt", JSONL_FORMATS)
def test_half_written_last_line(fmt: str) -> None:
    whole, _ = parse_bytes(fmt, seed(fmt))
    ledger, items = parse_bytes(fmt, fuzz.damage(seed(fmt), random.Random(0), "half_line"))
    assert ledger.records_quarantined >= 1
    assert ledger.records_read == whole.records_read
    assert ledger.end_offset < len(fuzz.damage(seed(fmt), random.Random(0), "half_line"))


@pytest.mark.parametrize("fmt", fuzz.FORMATS)
@pytest.mark.parametrize("suffix", [".txt", ".json", ".log", ""])
def test_wrong_extension(fmt: str, suffix: str) -> None:
    detect = pytest.importorskip("analytics.sources.detect")
    data = seed(fmt)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"renamed{suffix}"
        path.write_bytes(data)
        try:
            found = detect.detect_format(path)
        except AnalyticsError:
            found = None
    assert found in (fmt, None)
    parse_bytes(fmt, data, suffix)


def test_fifty_megabyte_field() -> None:
    records = fuzz.claude_code_records()
    records[1]["message"]["content"] = "y" * (50 * 1024 * 1024)
    ledger, items = parse_bytes("claude_code", _encode("claude_code", records))
    assert ledger.records_read == len(records)
