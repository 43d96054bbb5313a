"""A small, realistic explorer database built from the real schema.

Imported by the app tests (``from conftest_app import build_app_db``); not a
pytest conftest so it never interferes with other engineers' fixtures.
Three sessions modelled on the case studies: an opencode optimisation campaign
with an aborted polling loop and an "ok?" check-in, a Claude Code deployment
with a "ready?" check-in, and a Codex session whose text tries to inject HTML.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from analytics.store.migrations import migrate

XSS_TEXT = (
    "<script>alert('xss')</script> look: ![img](http://x/y.png) "
    "and [link](javascript:alert(1)) **bold**"
)

T0 = datetime(2025, 5, 1, 19, 0, 0)

S_OC = "opencode:ses_dsv4"
S_CC = "claude_code:9f1c-qwen"
S_CX = "codex:0199-xss"

POLL_CMD = (
    "for i in $(seq 1 16); do sleep 25; r=$(tail -1 /root/dsv4_mtp.log); "
    'echo "$r" | grep -qiE "fired up" && { echo READY; break; }; done'
)

# (session, source_id, role, seconds after T0, text)
MESSAGES: list[tuple[str, str, str, int, str]] = [
    (
        S_OC,
        "12470",
        "user",
        0,
        "Get DeepSeek-V4-Flash to ~1000 tok/s decode on the 8x RTX PRO 6000 box.",
    ),
    (
        S_OC,
        "12471",
        "assistant",
        30,
        "Baseline measured: 10.2 tok/s at bs=1, 25 tok/s at concurrency 16.",
    ),
    (S_OC, "12472", "assistant", 60, "[bash] python tune_fp8_gemm.py --all-gpus"),
    (S_OC, "12473", "assistant", 1700, "FP8 autotune done: 26.6 tok/s at c16 (+6%)."),
    (S_OC, "12474", "assistant", 1800, "NCCL LL+Ring tuning: 26.5 tok/s, no effect."),
    (
        S_OC,
        "12475",
        "assistant",
        1900,
        "The bottleneck is _tiled_sparse_decode_kernel: 63% of decode time, only 64 blocks on 170 SMs.",
    ),
    (
        S_OC,
        "12476",
        "assistant",
        2000,
        "[bash] sglang.launch_server --speculative-algorithm NEXTN --mem-fraction-static 0.70",
    ),
    (
        S_OC,
        "12477",
        "tool",
        2100,
        "torch.OutOfMemoryError: CUDA out of memory during cuda graph capture",
    ),
    (S_OC, "12478", "assistant", 2200, "[bash] " + POLL_CMD),
    (S_OC, "12479", "user", 2420, "ok?"),
    (S_OC, "12480", "assistant", 2440, "The MTP server is up and ready to serve."),
    (
        S_OC,
        "12481",
        "tool",
        2500,
        "Traceback: RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
    (S_OC, "12482", "assistant", 2600, "MTP run: 31.0 tok/s at c16."),
    (S_CC, "a1", "user", 10000, "Move Qwen3.6-27B to kpro5 with MTP enabled."),
    (
        S_CC,
        "a2",
        "assistant",
        10060,
        "[bash] setsid python -m sglang.launch_server --model Qwen3.6-27B --port 30000 &",
    ),
    (
        S_CC,
        "a3",
        "assistant",
        10120,
        "[bash] until curl -s localhost:30000/health; do sleep 5; done",
    ),
    (S_CC, "a4", "user", 10400, "ready?"),
    (
        S_CC,
        "a5",
        "assistant",
        10420,
        '[bash] curl localhost:30000/v1/completions -d \'{"prompt": "2+2="}\'',
    ),
    (S_CC, "a6", "tool", 10425, '{"choices": [{"text": "4"}]}'),
    (S_CC, "a7", "assistant", 10430, "Server is ready: the smoke test returned the right answer."),
    (S_CX, "L3", "user", 20000, "Summarise this page for me."),
    (S_CX, "L4", "assistant", 20010, XSS_TEXT),
    (S_CX, "L5", "user", 20020, "stop"),
]

# (session, source_id, tag, evidence)
TAGS: list[tuple[str, str, str, str]] = [
    (S_OC, "12472", "benchmark", "tune_fp8_gemm"),
    (S_OC, "12475", "diagnosis", "The bottleneck is"),
    (S_OC, "12476", "launch", "launch_server"),
    (S_OC, "12477", "error", "OutOfMemoryError"),
    (S_OC, "12478", "polling_loop", "for i in $(seq"),
    (S_OC, "12479", "user_abort", "User aborted the command"),
    (S_OC, "12479", "user_checkin", "ok?"),
    (S_OC, "12480", "readiness_claim", "up and ready"),
    (S_OC, "12481", "error", "Traceback"),
    (S_CC, "a2", "launch", "launch_server"),
    (S_CC, "a3", "polling_loop", "until curl"),
    (S_CC, "a4", "user_checkin", "ready?"),
    (S_CC, "a5", "smoke_test", "v1/completions"),
    (S_CC, "a7", "readiness_claim", "Server is ready"),
    (S_CX, "L5", "user_abort", "stop"),
]


def _idx(session: str, source_id: str) -> int:
    rows = [m for m in MESSAGES if m[0] == session]
    return next(i for i, m in enumerate(rows) if m[1] == source_id)


def _insert_sessions(con: duckdb.DuckDBPyConnection) -> None:
    meta = [
        (
            S_OC,
            "opencode",
            "ses_dsv4",
            "/data/dsv4.json",
            "DeepSeek V4 decode campaign",
            "opencode 1.14.46",
            "claude-opus-4",
        ),
        (
            S_CC,
            "claude_code",
            "9f1c-qwen",
            "/data/9f1c.jsonl",
            "Qwen3.6 on kpro5",
            "claude-code 2.0.42",
            "claude-sonnet-4",
        ),
        (
            S_CX,
            "codex",
            "0199-xss",
            "/data/rollout.jsonl",
            "Page summary",
            "codex_cli_rs 0.144.1",
            "gpt-5",
        ),
    ]
    for sid, fmt, native, path, title, agent, model in meta:
        rows = [m for m in MESSAGES if m[0] == sid]
        con.execute(
            "INSERT INTO sessions (session_id, source_format, native_id, source_path, title, agent,"
            " model, started_at, ended_at, n_messages) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                sid,
                fmt,
                native,
                path,
                title,
                agent,
                model,
                T0 + timedelta(seconds=rows[0][3]),
                T0 + timedelta(seconds=rows[-1][3]),
                len(rows),
            ],
        )


def _insert_messages(con: duckdb.DuckDBPyConnection) -> None:
    for sid, source_id, role, secs, text in MESSAGES:
        con.execute(
            "INSERT INTO messages (session_id, msg_idx, source_id, role, ts, text, n_chars,"
            " is_sidechain, is_compaction_summary, error) VALUES (?,?,?,?,?,?,?,false,false,?)",
            [
                sid,
                _idx(sid, source_id),
                source_id,
                role,
                T0 + timedelta(seconds=secs),
                text,
                len(text),
                "aborted" if text == "ok?" else None,
            ],
        )
    for sid, source_id, tag, evidence in TAGS:
        con.execute(
            "INSERT INTO tags VALUES (?,?,?,1.0,'rules',?,0,?,'rules-0.1')",
            [sid, _idx(sid, source_id), tag, evidence, len(evidence)],
        )


def _insert_tools(con: duckdb.DuckDBPyConnection) -> None:
    calls = [
        (
            S_OC,
            "12472",
            "c1",
            "bash",
            "python tune_fp8_gemm.py --all-gpus",
            "5 configs tuned",
            "completed",
            0,
            1620.0,
            "12473",
        ),
        (
            S_OC,
            "12476",
            "c2",
            "bash",
            "sglang.launch_server --speculative-algorithm NEXTN",
            "OOM",
            "error",
            1,
            100.0,
            "12477",
        ),
        (
            S_OC,
            "12478",
            "c3",
            "bash",
            POLL_CMD,
            "[25s] Capture cuda graph bs 10 (25%)\n[50s] health ok",
            "aborted",
            None,
            220.0,
            None,
        ),
        (
            S_CC,
            "a2",
            "c4",
            "Bash",
            "setsid python -m sglang.launch_server --model Qwen3.6-27B",
            "",
            "completed",
            0,
            1.0,
            None,
        ),
        (
            S_CC,
            "a3",
            "c5",
            "Bash",
            "until curl -s localhost:30000/health; do sleep 5; done",
            "ok",
            "completed",
            0,
            280.0,
            None,
        ),
        (
            S_CC,
            "a5",
            "c6",
            "Bash",
            "curl localhost:30000/v1/completions",
            '{"text": "4"}',
            "completed",
            0,
            5.0,
            "a6",
        ),
        (
            S_CX,
            "L4",
            "c7",
            "shell",
            "curl http://example.com",
            "<html><script>x()</script></html>",
            "aborted",
            None,
            10.0,
            None,
        ),
    ]
    for sid, src, call_id, tool, cmd, out, status, code, dur, result_src in calls:
        start = T0 + timedelta(seconds=next(m[3] for m in MESSAGES if m[1] == src))
        con.execute(
            "INSERT INTO tool_calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                sid,
                _idx(sid, src),
                call_id,
                tool,
                cmd,
                json.dumps({"command": cmd}),
                out,
                status,
                code,
                start,
                start + timedelta(seconds=dur),
                dur,
                _idx(sid, result_src) if result_src else None,
            ],
        )
    con.execute(
        "INSERT INTO polling_loops VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            S_OC,
            _idx(S_OC, "12478"),
            "c3",
            25.0,
            16,
            400.0,
            "/root/dsv4_mtp.log",
            "fired up|ready to roll",
            "Traceback|out of memory",
            "aborted",
            220.0,
        ],
    )
    con.execute(
        "INSERT INTO polling_loops VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            S_CC,
            _idx(S_CC, "a3"),
            "c5",
            5.0,
            None,
            None,
            "localhost:30000/health",
            "",
            None,
            "ready",
            280.0,
        ],
    )
    launches: list[tuple[str, str, str, dict[str, str], dict[str, str]]] = [
        (
            S_OC,
            "12476",
            "c2",
            {"mem-fraction-static": "0.70", "speculative-algorithm": "NEXTN"},
            {},
        ),
        (S_CC, "a2", "c4", {"port": "30000"}, {}),
    ]
    for sid, src, call_id, flags, changed in launches:
        con.execute(
            "INSERT INTO launches (session_id, msg_idx, call_id, engine, model, host, flags, changed_flags)"
            " VALUES (?,?,?,'sglang','m','localhost',?,?)",
            [sid, _idx(sid, src), call_id, json.dumps(flags), json.dumps(changed)],
        )


def _insert_campaign(con: duckdb.DuckDBPyConnection) -> None:
    for src, value, label in [
        ("12471", 25.0, "baseline c16"),
        ("12473", 26.6, "fp8 autotune"),
        ("12474", 26.5, "nccl"),
        ("12482", 31.0, "mtp"),
    ]:
        con.execute(
            "INSERT INTO measurements VALUES (?,?,'decode_tok_s',?,'tok/s',?,'assistant')",
            [S_OC, _idx(S_OC, src), value, label],
        )
    con.execute(
        "INSERT INTO campaigns VALUES ('dsv4-decode',?,?,'decode_tok_s',1000,'tok/s',25,31,0,?,'abandoned')",
        [S_OC, "~1000 tok/s decode", _idx(S_OC, "12482")],
    )
    levers = [
        (1, "fp8_autotune", "12472", "12473", 25.0, 26.6, "improved"),
        (2, "nccl_ll_ring", "12474", "12474", 26.6, 26.5, "no_effect"),
        (3, "mtp", "12476", "12482", 26.5, 31.0, "improved"),
        (4, "expert_parallel", "12475", "12475", 26.5, 20.0, "worse"),
    ]
    for seq, name, a, b, before, after, outcome in levers:
        con.execute(
            "INSERT INTO levers VALUES ('dsv4-decode',?,?,?,?,?,?,'decode_tok_s',?,?,?,?,?)",
            [
                S_OC,
                seq,
                name,
                f"lever {name}",
                _idx(S_OC, a),
                _idx(S_OC, b),
                before,
                after,
                round((after - before) / before * 100, 1),
                outcome,
                _idx(S_OC, b),
            ],
        )


def _insert_claims_and_annotations(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO readiness_claims VALUES (?,?,?,?,?,?,?,?)",
        [
            S_OC,
            _idx(S_OC, "12480"),
            "The MTP server is up and ready to serve.",
            "MTP server",
            "premature",
            "a crash follows before any successful request",
            json.dumps([_idx(S_OC, "12481")]),
            _idx(S_OC, "12481"),
        ],
    )
    con.execute(
        "INSERT INTO readiness_claims VALUES (?,?,?,?,?,?,?,NULL)",
        [
            S_CC,
            _idx(S_CC, "a7"),
            "Server is ready",
            "sglang server",
            "supported",
            "smoke test returned a correct completion",
            json.dumps([_idx(S_CC, "a5"), _idx(S_CC, "a6")]),
        ],
    )
    labels = [
        ("alice", S_OC, "12479", "user_checkin", True),
        ("alice", S_CC, "a4", "user_checkin", True),
        ("alice", S_OC, "12471", "user_checkin", False),
        ("alice", S_CX, "L5", "user_abort", True),
        ("bob", S_OC, "12479", "user_checkin", True),
        ("bob", S_CC, "a4", "user_checkin", False),
        ("bob", S_OC, "12471", "user_checkin", False),
        ("bob", S_CX, "L5", "user_abort", True),
    ]
    for who, sid, src, tag, value in labels:
        con.execute(
            "INSERT INTO annotations VALUES (?,?,?,?,?,NULL,?)",
            [sid, _idx(sid, src), tag, value, who, T0 + timedelta(days=1)],
        )


def build_app_db(path: Path) -> Path:
    """Create the fixture database at ``path`` and return it."""
    con = duckdb.connect(str(path))
    try:
        migrate(con)
        _insert_sessions(con)
        _insert_messages(con)
        _insert_tools(con)
        _insert_campaign(con)
        _insert_claims_and_annotations(con)
    finally:
        con.close()
    return path


def msg_idx(session: str, source_id: str) -> int:
    """The msg_idx the fixture gave a message (for assertions)."""
    return _idx(session, source_id)
