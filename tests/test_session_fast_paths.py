"""Fast paths of the session analysis return what the plain code does."""

from __future__ import annotations

import random
import re

import pandas as pd

from analytics.analysis.literals import Gated, lowered
from analytics.analysis.session import SessionFrames


def test_gated_search_matches_plain_search() -> None:
    rng = random.Random(3)
    words = ["tests", "passed", "ok", "failed", "error", "Ready", "api", "is up", "x", " ", "\n"]
    gated = Gated.compile(r"\b(?:tests? passed|is up|error: \w+)", re.I)
    assert gated.literals
    for _ in range(5000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 10)))
        found, plain = gated.search(text, lowered(text)), gated.regex.search(text)
        assert (found and found.span()) == (plain and plain.span()), text


def test_ref_is_memoised_without_changing_it() -> None:
    messages = pd.DataFrame(
        {"session_id": ["s"] * 3, "msg_idx": [0, 1, 2], "source_id": ["msg_a", "uuid-1", "7"]}
    )
    frames = SessionFrames(messages=messages)
    fresh = SessionFrames(messages=messages)
    for i in [2, 0, 1, 2, None, 5, 0]:
        assert frames.ref(i) == fresh._ref(i)
    assert frames.ref(0) == "msg_a" and frames.ref(1) == "msg uuid-1" and frames.ref(5) == "msg 5"
