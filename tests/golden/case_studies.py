"""Hand-built DuckDB rows modelled on the two case studies (shared/seeds).

They stand in for what parsers, tagging and tooling store, so the session-level
analysis and the report can be tested without the ingest pipeline.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import duckdb

from analytics.store.migrations import migrate

T0 = datetime(2025, 5, 1, 18, 0, 0)


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))


class SessionBuilder:
    def __init__(self, con: duckdb.DuckDBPyConnection, session_id: str, fmt: str) -> None:
        self.con, self.sid, self.fmt = con, session_id, fmt
        self.idx = 0
        self.messages: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.tags: list[dict[str, Any]] = []
        self.measurements: list[dict[str, Any]] = []
        self.launches: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.polling: list[dict[str, Any]] = []
        self.flags: dict[str, Any] = {}

    def msg(self, role: str, text: str, minutes: float, source_id: str | None = None) -> int:
        idx = self.idx
        self.idx += 1
        self.messages.append(
            dict(
                session_id=self.sid,
                msg_idx=idx,
                source_id=source_id or f"msg_{idx:04d}",
                role=role,
                ts=T0 + timedelta(minutes=minutes),
                text=text,
                n_chars=len(text),
                is_sidechain=False,
                is_compaction_summary=False,
            )
        )
        return idx

    def call(
        self,
        idx: int,
        command: str,
        output: str,
        minutes: float,
        duration_s: float = 5.0,
        status: str = "completed",
        exit_code: int | None = 0,
        tool: str = "bash",
    ) -> str:
        call_id = f"call_{idx}_{len(self.calls)}"
        start = T0 + timedelta(minutes=minutes)
        self.calls.append(
            dict(
                session_id=self.sid,
                msg_idx=idx,
                call_id=call_id,
                tool=tool,
                command=command or None,
                input=json.dumps({"command": command}),
                output=output,
                status=status,
                exit_code=exit_code,
                started_at=start,
                ended_at=start + timedelta(seconds=duration_s),
                duration_s=duration_s,
                result_msg_idx=idx,
            )
        )
        return call_id

    def rejected_call(self, idx: int, command: str, minutes: float, at: float) -> tuple[int, int]:
        """One interruption as Claude Code writes it: the call of message ``idx`` aborted,
        then at ``at`` minutes the rejected tool result and "[Request interrupted by user for
        tool use]", both tagged ``user_abort``; returns their msg_idx."""
        self.call(idx, command, "", minutes, duration_s=90, status="aborted")
        rejected = self.msg("tool", "The user doesn't want to proceed with this tool use.", at)
        self.tag(rejected, "user_abort", "doesn't want to proceed")
        marker = self.msg("user", "[Request interrupted by user for tool use]", at)
        self.tag(marker, "user_abort", "[Request interrupted by user for tool use]")
        return rejected, marker

    def tag(self, idx: int, tag: str, evidence: str = "", start_char: int | None = None) -> None:
        self.tags.append(
            dict(
                session_id=self.sid,
                msg_idx=idx,
                tag=tag,
                score=1.0,
                source="rules",
                evidence=evidence,
                start_char=start_char,
                end_char=None if start_char is None else start_char + len(evidence),
                tagger_version="test",
            )
        )

    def measure(self, idx: int, metric: str, value: float, label: str | None, unit: str) -> None:
        self.measurements.append(
            dict(
                session_id=self.sid,
                msg_idx=idx,
                metric=metric,
                value=value,
                unit=unit,
                label=label,
                source="bench_serving",
            )
        )

    def launch(self, idx: int, call_id: str, **changes: Any) -> None:
        before = dict(self.flags)
        for key, value in changes.items():
            flag = key if key.startswith("env:") else "--" + key.replace("_", "-")
            if value is None:
                self.flags.pop(flag, None)
            else:
                self.flags[flag] = value
        changed = {
            k: [before.get(k), self.flags.get(k)]
            for k in sorted(before.keys() | self.flags.keys())
            if before.get(k) != self.flags.get(k)
        }
        self.launches.append(
            dict(
                session_id=self.sid,
                msg_idx=idx,
                call_id=call_id,
                engine="sglang",
                model="deepseek-ai/DeepSeek-V4-Flash",
                host="gpu-host",
                flags=json.dumps(self.flags),
                changed_flags=json.dumps(changed) if before else None,
            )
        )

    def event(
        self, idx: int, event: str, detail: str = "", log_ts: str | None = None
    ) -> None:
        self.events.append(
            dict(
                session_id=self.sid, msg_idx=idx, engine="sglang", event=event, detail=detail,
                log_ts=log_ts,
            )
        )

    def save(self, title: str, model: str) -> None:
        times = [m["ts"] for m in self.messages]
        _insert(
            self.con,
            "sessions",
            [
                dict(
                    session_id=self.sid,
                    source_format=self.fmt,
                    native_id=self.sid.split(":", 1)[1],
                    source_path=f"/data/{self.sid.split(':', 1)[1]}",
                    title=title,
                    agent="opencode 1.14.46",
                    model=model,
                    started_at=min(times),
                    ended_at=max(times),
                    n_messages=len(self.messages),
                )
            ],
        )
        _insert(self.con, "messages", self.messages)
        _insert(self.con, "tool_calls", self.calls)
        _insert(self.con, "tags", self.tags)
        _insert(self.con, "measurements", self.measurements)
        _insert(self.con, "launches", self.launches)
        _insert(self.con, "server_events", self.events)
        _insert(self.con, "polling_loops", self.polling)


BENCH = """============ Serving Benchmark Result ============
Backend:                                 sglang
Max request concurrency:                 16
Successful requests:                     64
Output token throughput (tok/s):         {value}
=================================================="""

DSV4 = "opencode:ses_dsv4flash"


def build_dsv4(con: duckdb.DuckDBPyConnection) -> str:
    """Case study 000: the DeepSeek-V4-Flash throughput campaign on sm_120."""
    b = SessionBuilder(con, DSV4, "opencode")
    b.msg(
        "user",
        "Deploy DeepSeek-V4-Flash on the 8x RTX PRO 6000 box with PD disaggregation. "
        "We need ~1000 tok/s at concurrency 16.",
        0,
    )
    i = b.msg("assistant", "Launching the decode server with TP 4.", 2)
    c = b.call(i, "bash /root/launch_dsv4.sh", "server started, pid 4410", 2)
    b.launch(i, c, tp_size=4, mem_fraction_static=0.70, disaggregation_mode="decode")
    i = b.msg("assistant", "Baseline benchmark at concurrency 16.", 10)
    b.call(
        i, "python -m sglang.bench_serving --max-concurrency 16", BENCH.format(value=25.0), 10, 120
    )
    b.tag(i, "benchmark", "Serving Benchmark Result")
    b.measure(i, "output_token_throughput", 25.0, "concurrency=16", "tok/s")
    b.measure(i, "decode_gen_throughput", 10.1, "bs=1", "tok/s")

    i = b.msg("assistant", "Let me try FP8 block-GEMM autotuning for the sm_120 shapes.", 14)
    b.call(i, "python tuning_block_wise_kernel.py --tp 4", "wrote 5 tuned configs", 14, 1620)
    i = b.msg("assistant", "Restarting with the tuned kernels.", 42)
    c = b.call(i, "bash /root/launch_dsv4.sh", "server started, pid 4551", 42)
    b.launch(i, c)
    i = b.msg("assistant", "Benchmark after autotuning.", 50)
    b.call(
        i, "python -m sglang.bench_serving --max-concurrency 16", BENCH.format(value=26.5), 50, 120
    )
    b.tag(i, "benchmark", "Serving Benchmark Result")
    b.measure(i, "output_token_throughput", 26.5, "concurrency=16", "tok/s")

    i = b.msg("assistant", "Next lever: NCCL tuning with the LL protocol and Ring algorithm.", 55)
    c = b.call(i, "NCCL_PROTO=LL NCCL_ALGO=Ring bash /root/launch_dsv4.sh", "pid 4702", 55)
    b.launch(i, c, **{"env:NCCL_PROTO": "LL", "env:NCCL_ALGO": "Ring"})
    i = b.msg("assistant", "Benchmark with NCCL LL+Ring.", 62)
    b.call(
        i, "python -m sglang.bench_serving --max-concurrency 16", BENCH.format(value=26.7), 62, 120
    )
    b.tag(i, "benchmark", "Serving Benchmark Result")
    b.measure(i, "output_token_throughput", 26.7, "concurrency=16", "tok/s")

    b.msg(
        "assistant",
        "CUDA graphs are already enabled (cuda graph: True in the decode log), so nothing to gain.",
        64,
    )
    i = b.msg("assistant", "Let me try tilelang indexer fusion.", 66)
    b.call(
        i,
        "python /root/test_tilelang_indexer.py",
        "tilelang.engine: JIT compilation failed for target sm_120: no kernel image",
        66,
        exit_code=1,
        status="error",
    )
    b.tag(i, "error", "JIT compilation failed")
    b.msg("assistant", "Tilelang fails to JIT-compile on sm_120.", 70)

    i = b.msg("assistant", "Now try non-Marlin MoE backends.", 72)
    c = b.call(
        i,
        "bash /root/launch_dsv4.sh --moe-runner-backend triton",
        "ValueError: moe runner backend triton is invalid for FP4 experts",
        72,
    )
    b.launch(i, c, moe_runner_backend="triton")
    b.event(i, "crash", "ValueError: moe runner backend triton is invalid for FP4 experts")
    i = b.msg("assistant", "Same with cutlass.", 76)
    c = b.call(
        i,
        "bash /root/launch_dsv4.sh --moe-runner-backend cutlass",
        "ValueError: moe runner backend cutlass is invalid for FP4 experts",
        76,
    )
    b.launch(i, c, moe_runner_backend="cutlass")
    b.event(i, "crash", "ValueError: invalid for FP4 experts")

    i = b.msg("assistant", "Trying expert parallelism across the 4 decode GPUs.", 80)
    c = b.call(i, "bash /root/launch_dsv4.sh --ep-size 4", "pid 5120", 80)
    b.launch(i, c, moe_runner_backend=None, ep_size=4)
    i = b.msg("assistant", "Benchmark with EP.", 88)
    b.call(
        i, "python -m sglang.bench_serving --max-concurrency 16", BENCH.format(value=21.0), 88, 120
    )
    b.tag(i, "benchmark", "Serving Benchmark Result")
    b.measure(i, "output_token_throughput", 21.0, "concurrency=16", "tok/s")
    b.msg(
        "assistant",
        "EP is worse: PCIe all-to-all overhead. The profile shows 63% of decode time in "
        "_tiled_sparse_decode_kernel.",
        92,
    )
    b.tag(b.idx - 1, "diagnosis", "63% of decode time in _tiled_sparse_decode_kernel")

    i = b.msg("assistant", "Next lever: MTP speculative decoding with NEXTN.", 100)
    c = b.call(i, "bash /root/launch_dsv4_mtp.sh", "pid 5301", 100)
    b.launch(i, c, ep_size=None, speculative_algorithm="NEXTN", speculative_num_steps=3)
    i = b.msg("tool", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 106)
    b.call(i, "tail -5 /root/dsv4_mtp.log", "torch.OutOfMemoryError: CUDA out of memory.", 106)
    b.event(i, "oom", "CUDA out of memory during draft cuda graph capture")
    b.tag(i, "error", "CUDA out of memory")
    i = b.msg(
        "assistant",
        "The draft+verify graphs need ~20 GB extra; relaunching with --mem-fraction-static 0.60.",
        110,
    )
    b.tag(i, "diagnosis", "draft+verify graphs need ~20 GB extra")
    c = b.call(i, "bash /root/launch_dsv4_mtp.sh", "pid 5388", 110)
    b.launch(i, c, mem_fraction_static=0.60, cuda_graph_max_bs=16)
    poll = (
        "for i in $(seq 1 16); do sleep 25; r=$(tail -1 /root/dsv4_mtp.log); "
        'echo "$r" | grep -qiE "fired up|ready to roll" && break; done'
    )
    i = b.msg("assistant", "Waiting for the MTP server.", 112)
    call = b.call(
        i,
        poll,
        "[25s] Capturing batches (bs=10 avail_mem=20.1 GB): 25%\n"
        '[50s] "GET /health HTTP/1.1" 200 OK\nUser aborted the command',
        112,
        duration_s=60,
        status="aborted",
        exit_code=None,
    )
    b.event(i, "draft_cuda_graph_begin", "Capture draft cuda graph begin")
    b.event(i, "health_ok", '"GET /health HTTP/1.1" 200 OK')
    b.tag(i, "polling_loop", "for i in $(seq 1 16)")
    b.tag(i, "user_abort", "User aborted the command")
    b.polling.append(
        dict(
            session_id=DSV4,
            msg_idx=i,
            call_id=call,
            interval_s=25.0,
            max_iterations=16,
            max_wait_s=400.0,
            target="/root/dsv4_mtp.log",
            success_pattern="fired up|ready to roll",
            failure_pattern=None,
            outcome="aborted",
            waited_s=60.0,
        )
    )
    i = b.msg("user", "ok?", 115, source_id="12479")
    b.tag(i, "user_checkin", "ok?")
    i = b.msg("assistant", "Yes, the MTP server is up and healthy.", 116)
    b.tag(i, "readiness_claim", "the MTP server is up and healthy", 5)
    i = b.msg("assistant", "Benchmark with MTP.", 121)
    b.call(
        i, "python -m sglang.bench_serving --max-concurrency 16", BENCH.format(value=38.0), 121, 120
    )
    b.tag(i, "benchmark", "Serving Benchmark Result")
    b.measure(i, "output_token_throughput", 38.0, "concurrency=16", "tok/s")
    b.save("DeepSeek-V4-Flash PD disaggregation on sm_120", "deepseek-v4-flash")
    return DSV4


QWEN = "transcript_text:qwen36_kpro5_deploy"
SMOKE_OUT = json.dumps(
    {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "reasoning_content": "We are tasked with a simple arithmetic problem: 2 + 2 = ? "
                    "We are tasked with a simple arithmetic problem: 2 + 2 = "
                    + "2.2 + 2 = " * 12
                    + "2",
                    "content": None,
                }
            }
        ]
    }
)
SMOKE_CMD = (
    'curl -s localhost:30000/v1/chat/completions -d \'{"messages":[{"role":"user",'
    '"content":"What is 2+2?"}],"temperature":1.0,"top_p":0.95,"top_k":20}\''
)


def build_qwen(con: duckdb.DuckDBPyConnection) -> str:
    """Case study 001: Qwen3.6-27B with MTP on kpro5, "ready?" and a premature yes."""
    b = SessionBuilder(con, QWEN, "transcript_text")
    i = b.msg("assistant", "Smoke test of the MTP server.", 0, "6845")
    b.call(
        i,
        SMOKE_CMD.replace("1.0", "0.7"),
        json.dumps({"choices": [{"message": {"content": "The user's question is 2+2. " * 10}}]}),
        0,
    )
    b.tag(i, "smoke_test", "chat/completions")
    b.msg("assistant", "The repetition comes from temperature 0.7 with MTP drafts.", 3, "6848")
    launch_text = "Relaunching with setsid so the server survives the SSH session."
    i = b.msg("assistant", launch_text, 6, "6850")
    c = b.call(i, "setsid bash /root/serve_qwen.sh > /root/qwen.log 2>&1 &", "PID 5834", 6)
    b.launch(i, c, tp_size=1, speculative_algorithm="NEXTN", mamba_full_memory_ratio=0.5)
    b.tag(i, "launch", "setsid bash /root/serve_qwen.sh")
    i = b.msg("assistant", "Watching the log.", 8, "6851")
    b.call(
        i,
        "tail -3 /root/qwen.log",
        "Loading safetensors checkpoint shards: 80% Completed\nCapture draft cuda graph begin.",
        8,
    )
    b.event(i, "weights_loaded", "Loading safetensors checkpoint shards: 80%")
    b.event(i, "draft_cuda_graph_begin", "Capture draft cuda graph begin.")
    i = b.msg("user", "ready?", 12, "6852")
    b.tag(i, "user_checkin", "ready?")
    tail = "tail -1 /root/qwen.log"
    claim = "Yes, it's up! 'The server is fired up and ready to roll!'"
    text = (
        f"[bash] {tail}\nThe server is fired up and ready to roll!\n{claim} "
        "Let me do a proper smoke test with the recommended sampling params.\n"
        f"[bash] {SMOKE_CMD}\n{SMOKE_OUT}"
    )
    i = b.msg("assistant", text, 13, "6853")
    b.call(i, tail, "The server is fired up and ready to roll!", 13)
    b.event(i, "server_ready", "The server is fired up and ready to roll!")
    b.call(i, SMOKE_CMD, SMOKE_OUT, 13.5, duration_s=20)
    b.tag(i, "smoke_test", "chat/completions")
    b.tag(i, "readiness_claim", "Yes, it's up!", text.index(claim))
    b.save("Qwen3.6-27B on kpro5 with MTP", "qwen3.6-27b")
    return QWEN


def case_study_db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    migrate(con)
    build_dsv4(con)
    build_qwen(con)
    return con
