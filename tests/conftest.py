"""Fixtures shared by several test files (none is autouse: a test asks for what it needs)."""

from __future__ import annotations

import pytest

from analytics.analysis.tagging import worker as tag_worker


@pytest.fixture
def fork_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process may be larger than the limit a tagging worker is forked under
    (``MAX_PARENT_RSS_MIB``); the tests that want the worker lift it."""
    monkeypatch.setattr(tag_worker, "MAX_PARENT_RSS_MIB", 1 << 20)
