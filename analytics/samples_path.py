"""Where the bundled sample sessions live (package data, also reachable as data/samples)."""

from __future__ import annotations

from pathlib import Path


def samples_dir() -> Path:
    return Path(__file__).resolve().parent / "samples"


def sample_inputs() -> list[Path]:
    """The bundled transcripts (files and folders), without side files such as hints."""
    return sorted(
        p for p in samples_dir().iterdir()
        if not p.name.startswith(".") and p.suffix not in (".md", ".tsv")
    )
