"""Pausing Python's cyclic garbage collector around allocation-heavy work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Parsing, tagging and compiling patterns allocate many short-lived objects without
    reference cycles (records, matches, spans, trie nodes); the cyclic collector would only
    walk them, and the caller's heap, again and again (~30% of a parse). Reference counting
    still frees everything; the collector is switched back on after, if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
