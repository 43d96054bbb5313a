"""Pausing Python's cyclic garbage collector around allocation-heavy work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc(freeze: bool = False) -> Iterator[None]:
    """Parsing, tagging and compiling patterns allocate many short-lived objects without
    reference cycles (records, matches, spans, trie nodes); the cyclic collector would only
    walk them, and the caller's heap, again and again (~30% of a parse). Reference counting
    still frees everything; the collector is switched back on after, if it was on.

    ``freeze``: the objects alive at the end are then left out of the collector's passes
    (``gc.freeze``) until :func:`thaw`. After a large file's parse a few million objects
    are alive (the rows kept for the analysis, caches): the first collection after it (the
    youngest generation holds them all) and the full one that follows walked them all to
    find nothing, a tenth of a second or two. They are still freed when no longer
    referenced; a cycle among them is collected after :func:`thaw`."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def thaw() -> None:
    """Objects frozen by ``no_cyclic_gc(freeze=True)`` back into the collector's passes
    (in its oldest generation)."""
    gc.unfreeze()
