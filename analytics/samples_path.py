"""Where the bundled sample sessions live (package data, also reachable as data/samples)."""

from __future__ import annotations

from pathlib import Path


def samples_dir() -> Path:
    return Path(__file__).resolve().parent / "samples"
