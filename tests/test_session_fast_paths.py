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


def test_select_lists_read_what_select_reads() -> None:
    from golden.case_studies import case_study_db

    from analytics.analysis.session import load_session_frames

    con = case_study_db()
    queries = [
        ("tags", ["msg_idx", "tag", "evidence", "start_char"], {"tag": ["readiness_claim"]}),
        ("server_events", ["msg_idx", "event", "detail"], None),
        ("launches", ["msg_idx"], None),
        ("messages", ["msg_idx", "source_id", "text"], {"msg_idx": [0, 2, 5, 6853]}),
    ]
    for (sid,) in con.execute("SELECT session_id FROM sessions").fetchall():
        bound, read = load_session_frames(con, sid), load_session_frames(con, sid)
        for table, columns, where in queries:
            read.table(table)
            df = bound.select(table, columns, where, min_idx=1)
            plain = [[None if pd.isna(v) else v for v in df[c].tolist()] for c in columns]
            assert bound.select_lists(table, columns, where, min_idx=1) == plain
            from_table = read.select_lists(table, columns, where, min_idx=1)
            assert [[None if pd.isna(v) else v for v in c] for c in from_table] == plain
