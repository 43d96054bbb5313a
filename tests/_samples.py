"""Helpers shared by the parser tests (imported as ``from _samples import ...``)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from analytics.models import Ledger, ParsedItem, Resume

SHARED_SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"
"""The public sample files shared between projects (absent on some machines)."""


def run(
    module: ModuleType, path: Path, resume: Resume | None = None
) -> tuple[list[ParsedItem], Ledger]:
    """Every item ``module.parse`` yields for ``path``, and its ledger, which must balance."""
    ledger = Ledger()
    items = list(module.parse(path, ledger, resume))
    assert ledger.records_read == ledger.records_stored + ledger.records_quarantined
    return items, ledger


def of(items: list[ParsedItem], kind: type) -> list:
    return [i for i in items if isinstance(i, kind)]


def non_blank_lines(path: Path) -> int:
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
