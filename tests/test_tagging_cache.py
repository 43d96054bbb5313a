"""The tagger's cache of spaCy results per prose piece: a full cache is emptied
without losing the pieces the current batch still reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.analysis.tagging import Tagger, pipeline
from analytics.models import Message, MessageContext


def _ctx(idx: int, role: str, text: str) -> MessageContext:
    return MessageContext(
        message=Message(session_id="s", msg_idx=idx, source_id=str(idx), role=role, text=text),
        calls=[], results=[],
    )


def test_a_full_cache_keeps_what_the_batch_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "PIECE_CACHE_SIZE", 3)
    tagger = Tagger()
    repeated = [_ctx(0, "user", "ok?"), _ctx(1, "assistant", "It's up! The server is ready.")]
    first = tagger.tag(repeated)
    fresh = [_ctx(2 + i, "assistant", f"The server on port {8000 + i} is ready now.") for i in range(5)]
    # The repeated pieces are cached; the fresh ones overflow the cache in the same batch.
    second = tagger.tag(fresh + [_ctx(7, "user", "ok?")])
    assert {(t.msg_idx, t.tag) for t in first} >= {(0, "user_checkin"), (1, "readiness_claim")}
    assert (7, "user_checkin") in {(t.msg_idx, t.tag) for t in second}


def test_a_full_diagnosis_cache_keeps_what_the_batch_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from analytics.analysis.tagging import diagnosis_model

    seen = "The server died because the port was still taken."
    texts = [f"It failed because of reason {i}." for i in range(4)] + [seen]
    expected = diagnosis_model.DiagnosisModel().raw_scores(texts)  # the default cache
    monkeypatch.setattr(diagnosis_model, "CACHE_SIZE", 2)
    model = diagnosis_model.DiagnosisModel()
    model.raw_scores([seen])
    assert model.raw_scores(texts) == expected
    assert model.raw_scores(texts[::-1]) == expected[::-1]  # (from the cache now)


def test_short_texts_remembered_or_not_give_the_same_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prose`` of user messages and ``_regions`` of short texts come from per-Tagger caches;
    a full cache is emptied. Tags are those of a fresh Tagger either way."""
    texts = ["ok?", "status?", "<system-reminder>x</system-reminder> ok?", "It's up! The server is ready."]
    batch = [_ctx(i, "assistant" if t.startswith("It") else "user", t) for i, t in enumerate(texts * 3)]
    expected = Tagger().tag(batch)
    assert {t.tag for t in expected} >= {"user_checkin", "readiness_claim"}
    monkeypatch.setattr(pipeline, "SHORT_CACHE_SIZE", 2)
    tagger = Tagger()
    assert tagger.tag(batch) == expected
    assert tagger.tag(batch) == expected  # (from the caches now)
    assert len(tagger._user_prose) <= 2 and len(tagger._short_regions) <= 2


def test_tags_are_the_records_validation_builds(tmp_path: Path) -> None:
    """The Tagger builds its tags without pydantic's validation (``models.trusted``): each is
    the record validation makes of the same values (types included: ``repr`` shows an int
    where a float belongs), over the bundled sessions, rule and model tags alike."""
    import duckdb

    from analytics.analysis.rows import load_contexts
    from analytics.ingest import ingest
    from analytics.models import Tag
    from analytics.samples_path import sample_inputs

    db = tmp_path / "samples.duckdb"
    assert not ingest(sample_inputs(), db=db, analyse=False, build_index=False).errors
    tagger, sources, n = Tagger(), set(), 0
    with duckdb.connect(str(db), read_only=True) as con:
        for (sid,) in con.execute("SELECT session_id FROM sessions ORDER BY 1").fetchall():
            for tag in tagger.tag(load_contexts(con, sid, 0, 1 << 30)):
                validated = Tag(**tag.model_dump())
                assert repr(tag) == repr(validated), tag
                assert tag.model_fields_set == validated.model_fields_set
                sources.add(tag.source)
                n += 1
    assert n > 100 and sources == {"rules", "model"}
