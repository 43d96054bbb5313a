"""A seeded, Claude-Code-shaped JSONL corpus for the benchmarks (not a test fixture)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

WORDS = (
    "server launch decode prefill throughput latency batch kernel graph cuda memory fraction "
    "tokens request benchmark profile attention expert tensor parallel config flag retry log "
    "the a to of and is it we now check wait ready error fixed build test run model weights"
).split()
LOG_LINES = [
    "[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, #token: 5123, token usage: 0.04, "
    "cuda graph: True, gen throughput (token/s): 25.31, #queue-req: 0, ",
    "[2026-05-14 19:58:04 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
    "token usage: 0.01, #running-req: 0, #queue-req: 0, ",
    'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK',
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10,  5.01s/it]",
]
COMMANDS = [
    "tail -n 50 /root/server.log",
    "for i in $(seq 1 20); do sleep 10; curl -s localhost:30000/health && break; done",
    "python -m sglang.bench_serving --backend sglang --num-prompts 64 --max-concurrency 16",
    "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv",
    "grep -n 'Traceback' /root/server.log | tail",
]


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def records(n: int, seed: int = 7, session: str = "bench-0000-0000-0000-000000000000"):
    rng = random.Random(seed)
    t0 = datetime(2026, 5, 14, 12, 0, 0)
    parent = None
    pending: str | None = None
    for i in range(n):
        ts = (t0 + timedelta(seconds=3 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        uuid = f"{seed:04x}{i:012x}-bench"
        env = {
            "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/root/work",
            "sessionId": session, "version": "2.0.42", "gitBranch": "main", "uuid": uuid,
            "timestamp": ts,
        }
        kind = i % 4
        if pending is not None:
            out = "\n".join(rng.choice(LOG_LINES) for _ in range(rng.randint(5, 25)))
            env.update(type="user", message={"role": "user", "content": [
                {"tool_use_id": pending, "type": "tool_result", "content": out, "is_error": False}]},
                toolUseResult={"stdout": out, "stderr": "", "interrupted": False, "isImage": False})
            pending = None
        elif kind == 0:
            text = rng.choice(["ok?", "status?", "now run the benchmark at concurrency 16",
                               _prose(rng, rng.randint(5, 60))])
            env.update(type="user", message={"role": "user", "content": text})
        elif kind in (1, 2):
            call = f"toolu_{seed:02x}{i:010x}"
            env.update(type="assistant", message={
                "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "text", "text": _prose(rng, rng.randint(20, 120))},
                    {"type": "tool_use", "id": call, "name": "Bash",
                     "input": {"command": rng.choice(COMMANDS), "description": "check"}},
                ], "stop_reason": "tool_use",
                "usage": {"input_tokens": 100, "output_tokens": 50}})
            pending = call
        else:
            env.update(type="assistant", message={
                "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": _prose(rng, rng.randint(40, 300))}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 100, "output_tokens": 50}})
        parent = uuid
        yield env


def write_corpus(
    path: Path, n: int, seed: int = 7, start: int = 0,
    session: str = "bench-0000-0000-0000-000000000000",
) -> int:
    mode = "a" if start else "w"
    count = 0
    with path.open(mode) as f:
        for i, rec in enumerate(records(n + start, seed, session)):
            if i < start:
                continue
            f.write(json.dumps(rec) + "\n")
            count += 1
    return count
