"""Numbers stated in prose (source ``stated``) and shares of time (source ``profile``)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from golden.case_studies import DSV4, build_dsv4

from analytics.analysis.session import analyse_session, load_session_frames
from analytics.analysis.stated import stated_numbers
from analytics.ingest import ingest
from analytics.store.migrations import migrate


def found(text: str, role: str = "assistant") -> list[tuple[str, float, str | None, str, str]]:
    return [(n.metric, n.value, n.unit, n.label, n.source) for n in stated_numbers(text, role)]


@pytest.mark.parametrize(
    ("text", "role", "expected"),
    [
        ("we're at ~800 tok/s right now, which is too slow.", "user",
         [("throughput", 800.0, "tok/s", "role=user", "stated")]),
        ("Throughput is 1.2k tokens/s at concurrency 32.", "assistant",
         [("throughput", 1200.0, "tok/s", "role=assistant,concurrency=32", "stated")]),
        ("The server handles 3.5 req/s before queueing.", "assistant",
         [("request_throughput", 3.5, "req/s", "role=assistant", "stated")]),
        ("TTFT is 2.4 s on long prompts.", "user",
         [("ttft", 2400.0, "ms", "role=user", "stated")]),
        ("p99 ITL 45ms, TPOT around 30 ms.", "assistant",
         [("itl_p99", 45.0, "ms", "role=assistant", "stated"),
          ("tpot", 30.0, "ms", "role=assistant", "stated")]),
        ("P99 TTFT at c32 was 901.3 ms in the sweep run.", "assistant",
         [("ttft_p99", 901.3, "ms", "role=assistant,concurrency=32", "stated")]),
        ("With CUDA graphs decode is 1.8x faster.", "assistant",
         [("speedup", 1.8, "x", "role=assistant", "stated")]),
        ("The model uses 71 GB per GPU.", "assistant",
         [("memory_used", 71.0, "GB", "role=assistant", "stated")]),
        ("At concurrency 16 (1024 in / 256 out): **1187 tok/s** output, mean TTFT 212 ms.",
         "assistant",
         [("output_token_throughput", 1187.0, "tok/s", "role=assistant,concurrency=16", "stated"),
          ("ttft_mean", 212.0, "ms", "role=assistant,concurrency=16", "stated")]),
        ("MTP at c16: 29.4 tok/s with accept length 1.81 (c1: 16.4 tok/s).", "assistant",
         [("throughput", 29.4, "tok/s", "role=assistant,concurrency=16", "stated"),
          ("accept_length", 1.81, None, "role=assistant,concurrency=16", "stated"),
          ("throughput", 16.4, "tok/s", "role=assistant,concurrency=1", "stated")]),
        ("Benchmarks: c1 41.3, c4 158.2, c64 2204.9 tok/s; preemptions at c64.", "user",
         [("throughput", 2204.9, "tok/s", "role=user,concurrency=64", "stated")]),
    ],
)
def test_stated_figures(text: str, role: str, expected: list) -> None:
    assert found(text, role) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Root cause found. **63% of decode time is one kernel, `_tiled_sparse_decode_kernel`** "
         "— the Triton fallback.",
         [("time_share", 63.0, "%", "kernel=_tiled_sparse_decode_kernel,phase=decode,"
           "role=assistant", "profile")]),
        ("That explains the levers so far: FP8 GEMMs are 6% of decode (hence +6%).",
         [("time_share", 6.0, "%", "kernel=FP8 GEMMs,phase=decode,role=assistant", "profile")]),
        ("`fused_moe_kernel` takes 41.5% of decode time; attention 30% of GPU time.",
         [("time_share", 41.5, "%", "kernel=fused_moe_kernel,phase=decode,role=assistant",
           "profile"),
          ("time_share", 30.0, "%", "phase=gpu,role=assistant", "profile")]),
        ("The profile says why: 63% of every decode step is `fused_moe_kernel`.",
         [("time_share", 63.0, "%", "kernel=fused_moe_kernel,phase=decode,role=assistant",
           "profile")]),
    ],
)
def test_profile_shares(text: str, expected: list) -> None:
    assert found(text) == expected


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("Target is ~1000 tok/s output throughput for the agent fleet.", "user"),  # goal
        ("get above 1500 tok/s please", "user"),
        ("Our chat product needs mean TTFT under 200 ms (p99 under 400).", "user"),
        ("We should get 2x faster with speculative decoding.", "assistant"),
        ("It would reach 1200 tok/s if the KV cache fit.", "assistant"),
        ("We are still ~34x from 1000 tok/s.", "assistant"),
        ("Run it with a 500 tok/s limit.", "assistant"),
        ("can we reach 900 tok/s?", "user"),  # questions
        ("what's the TTFT at 800 tok/s?", "user"),
        ("Here is the log:\n```\n[2026-01-02 10:11:12 TP0] Decode batch, gen throughput "
         "(token/s): 812.33 tok/s\n```", "assistant"),  # code block
        ("Run `bench --rate 3 --expect 900 tok/s` next", "assistant"),  # inline code
        ("[2026-01-02 10:11:12 TP0] Decode batch, gen throughput (token/s): 700.1 tok/s", "user"),
        ("> earlier you said we are at 500 tok/s", "user"),  # quoted
        ("    throughput: 812 tok/s", "assistant"),  # indented code
        ("Upgraded to sglang v0.4.3 on 2026-01-02, server on :30000 with 8xH100 (80 GB each).",
         "assistant"),  # versions, dates, ports, GPU counts, capacity
        ("GPU0 moves ~12 GB/s each way over PCIe.", "assistant"),  # bandwidth, not memory
        ("CUDA OOM (TP2: tried to allocate 2.50 GiB, 1.07 GiB free).", "assistant"),
        ("don't sweep rates, we only care about 8 req/s.", "user"),  # offered load
        ("Tuning is about 47% through: 2 of 5 GEMM shapes finished", "assistant"),
        ("KV cache usage at 99.1% during the c64 run.", "assistant"),  # not a share of time
        ("we're at ~800 tok/s", "tool"),  # tool output is the tooling analyser's
    ],
)
def test_not_a_stated_figure(text: str, role: str) -> None:
    assert found(text, role) == []


def _line(i: int, role: str, text: str) -> dict:
    session = "11111111-2222-3333-4444-555555555555"
    msg: dict = {"role": role, "content": text}
    if role == "assistant":
        msg = {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
    return {
        "parentUuid": f"u{i - 1}" if i else None, "isSidechain": False, "userType": "external",
        "cwd": "/w", "sessionId": session, "version": "2.0.42", "type": role, "message": msg,
        "uuid": f"u{i}", "timestamp": f"2026-01-01T00:00:{i:02d}.000Z",
    }


def test_ingest_stores_stated_rows(tmp_path: Path) -> None:
    texts = [
        ("user", "Target is 1000 tok/s. Right now we're at ~800 tok/s."),
        ("assistant", "Profiled: 40% of decode time is in `fused_moe_kernel`. TTFT is 2.4 s."),
        ("user", "ok, is it above 900 tok/s now?"),
    ]
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps(_line(i, r, t)) + "\n" for i, (r, t) in enumerate(texts)))
    db = tmp_path / "t.duckdb"
    ingest([src], db=db, workers=1)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT msg_idx, metric, value, unit, label, source FROM measurements ORDER BY ALL"
    ).fetchall()
    assert rows == [
        (0, "throughput", 800.0, "tok/s", "role=user", "stated"),
        (1, "time_share", 40.0, "%", "kernel=fused_moe_kernel,phase=decode,role=assistant",
         "profile"),
        (1, "ttft", 2400.0, "ms", "role=assistant", "stated"),
    ]


def test_campaigns_ignore_stated_and_profile_rows() -> None:
    con = duckdb.connect(":memory:")
    migrate(con)
    build_dsv4(con)
    before = analyse_session(load_session_frames(con, DSV4))
    metric = before.campaigns[0].target_metric
    # every measured value of the campaign's metric said again, ten times higher, at the same
    # message and label: were they read, the baseline and every lever's numbers would change
    for source in ("stated", "profile"):
        con.execute(
            "INSERT INTO measurements SELECT session_id, msg_idx, metric, value * 10, unit, "
            "label, ? FROM measurements WHERE session_id = ? AND metric = ? "
            "AND source NOT IN ('stated', 'profile')",
            [source, DSV4, metric],
        )
    after = analyse_session(load_session_frames(con, DSV4))
    assert after.campaigns == before.campaigns
    assert after.levers == before.levers


NUMBER_TEXTS = [
    "ok?", "now run the benchmark at concurrency 16", "double the throughput", "Double it",
    "twice as fast", "quadruple", "triple-check", "é5", "é", "x٣ faster", "", "x² and ① and ½",
    "we need 2000 tok/s", "no numbers here at all",
]


def test_the_number_gate_for_arrow_selects_what_the_python_regex_does() -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from analytics.analysis.campaigns import may_state_goal, number_filter, number_filter_re2

    regex = number_filter()[1]
    expected = [regex.search(t) is not None for t in NUMBER_TEXTS]
    assert any(expected) and not all(expected)
    found = pc.match_substring_regex(pa.array(NUMBER_TEXTS), number_filter_re2()).to_pylist()
    assert found == expected
    assert [may_state_goal(t) for t in NUMBER_TEXTS] == expected


def test_prose_rows_are_the_user_and_assistant_messages_holding_a_number() -> None:
    from analytics.analysis.campaigns import number_filter
    from analytics.analysis.stated import prose_rows
    from analytics.models import Message
    from analytics.store.writer import to_arrow

    roles = ["user", "assistant", "tool", "system"]
    messages = [
        Message(session_id="s", msg_idx=i, source_id=str(i), role=roles[i % 4], text=t)
        for i, t in enumerate(NUMBER_TEXTS)
    ]
    rows = prose_rows(to_arrow("messages", messages))
    assert [r[1] for r in rows] == [
        m.msg_idx for m in messages
        if m.role in ("user", "assistant") and number_filter()[1].search(m.text)
    ]
    assert rows and all(r[0] == "s" and r[3] == NUMBER_TEXTS[r[1]] for r in rows)
