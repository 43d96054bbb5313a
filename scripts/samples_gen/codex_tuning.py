"""Sample 4: a Codex rollout tuning SGLang --chunked-prefill-size / --max-running-requests for TTFT."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

from .common import Clock, Hint, Ids, Result, dumps_line, iso_z, utc
from .logs import Bench, Boot, bench_serving_block, sglang_boot

DIR = "codex_sglang_tuning"
CWD = "/home/dev/ttft-tuning"
MODEL = "Qwen/Qwen3-30B-A3B"
CLI = "0.144.1"
AGENT_MODEL = "gpt-5.2-codex"
ABORT_NOTE = ("<turn_aborted>\nThe previous turn was interrupted on purpose. Any running unified exec processes may still be running in the "
              "background. If any tools/commands were aborted, they may have partially executed.\n</turn_aborted>")


class Rollout:
    def __init__(self, rng: random.Random, clock: Clock) -> None:
        self.rng, self.clock, self.ids = rng, clock, Ids(rng)
        self.lines: list[dict[str, Any]] = []
        self.hints: list[Hint] = []
        self.sid = self.ids.uuid7(clock.t)
        self.rel = f"{DIR}/rollout-{clock.t.strftime('%Y-%m-%dT%H-%M-%S')}-{self.sid}.jsonl"
        self.turn = ""
        self.total = 0
        self.turn_start = clock.t
        self.chunk = 0

    def add(self, kind: str, payload: dict[str, Any], gap: float = 0.05, tags: tuple[str, ...] = ()) -> None:
        self.clock.advance(gap)
        self.lines.append({"timestamp": iso_z(self.clock.t), "type": kind, "payload": payload})
        for t in tags:
            self.hints.append(Hint(self.rel, f"L{len(self.lines)}", t))

    def meta(self) -> None:
        self.add("session_meta", {"id": self.sid, "timestamp": iso_z(self.clock.t), "cwd": CWD, "originator": "codex_cli_rs",
                                  "cli_version": CLI, "source": "cli", "model_provider": "openai",
                                  "base_instructions": {"text": "You are Codex, a coding agent based on GPT-5. You and the user share the same workspace..."},
                                  "git": {"commit_hash": self.ids.hexs(40), "branch": "main", "repository_url": "git@github.com:example-org/ttft-tuning.git"}}, gap=0)

    def user_turn(self, text: str, gap: float, tags: tuple[str, ...] = ()) -> None:
        self.turn = self.ids.uuid7(self.clock.t + timedelta(seconds=gap))
        self.add("turn_context", {"turn_id": self.turn, "cwd": CWD, "approval_policy": "on-request",
                                  "sandbox_policy": {"type": "workspace-write", "network_access": True, "exclude_tmpdir_env_var": False,
                                                     "exclude_slash_tmp": False},
                                  "model": AGENT_MODEL, "effort": "medium", "summary": "auto"}, gap=gap)
        self.turn_start = self.clock.t
        self.add("event_msg", {"type": "task_started", "turn_id": self.turn, "model_context_window": 272000})
        self.add("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}, tags=tags)
        self.add("event_msg", {"type": "user_message", "message": text, "images": []})

    def reason(self, text: str) -> None:
        self.add("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}], "content": None,
                                   "encrypted_content": "gAAAAB" + self.ids.b62(120)}, gap=self.rng.uniform(2, 6))

    def exec(self, cmd: str, out: str, wall: float, code: int = 0, *, tags_call: tuple[str, ...] = (),
             tags_out: tuple[str, ...] = (), aborted: bool = False) -> None:
        call = f"call_{self.ids.b62(24)}"
        args = {"cmd": cmd, "workdir": CWD, "yield_time_ms": 10000 if wall < 10 else 600000}
        self.add("response_item", {"type": "function_call", "name": "exec_command", "arguments": json.dumps(args), "call_id": call},
                 gap=self.rng.uniform(1, 3), tags=tags_call)
        if aborted:
            body = f"aborted by user after {wall:.1f}s"
        else:
            self.chunk += 1
            body = (f"Chunk ID: {self.ids.hexs(6)}\nWall time: {wall:.4f} seconds\nProcess exited with code {code}\n"
                    f"Original token count: {max(1, len(out) // 4)}\nOutput:\n{out}")
        self.add("response_item", {"type": "function_call_output", "call_id": call, "output": body}, gap=wall, tags=tags_out)
        if not aborted:
            self.tokens()

    def tokens(self) -> None:
        last = self.rng.randint(900, 4000)
        self.total += last
        usage = lambda n: {"input_tokens": n, "cached_input_tokens": int(n * 0.85), "output_tokens": n // 20,  # noqa: E731
                           "reasoning_output_tokens": n // 40, "total_tokens": n + n // 20}
        self.add("event_msg", {"type": "token_count", "info": {"total_token_usage": usage(self.total + 12000),
                                                                "last_token_usage": usage(last), "model_context_window": 272000},
                               "rate_limits": {"primary": {"used_percent": 7.0, "window_minutes": 300, "resets_in_seconds": 9000},
                                               "secondary": None}})

    def say(self, text: str, tags: tuple[str, ...] = (), end_turn: bool = True) -> None:
        self.add("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
                 gap=self.rng.uniform(2, 5), tags=tags)
        self.add("event_msg", {"type": "agent_message", "message": text})
        if end_turn:
            self.add("event_msg", {"type": "task_complete", "turn_id": self.turn, "last_agent_message": text,
                                   "duration_ms": int((self.clock.t - self.turn_start).total_seconds() * 1000)})

    def abort(self) -> None:
        self.add("response_item", {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": ABORT_NOTE}]},
                 gap=0.2)
        self.add("event_msg", {"type": "turn_aborted", "turn_id": self.turn, "reason": "interrupted", "completed_at": iso_z(self.clock.t),
                               "duration_ms": int((self.clock.t - self.turn_start).total_seconds() * 1000)}, gap=0.01,
                 tags=("user_abort",))


def _launch(chunk: int, mrr: int, log: str) -> str:
    return (f"nohup python -m sglang.launch_server --model-path {MODEL} --tp 2 --port 30000 --mem-fraction-static 0.85 "
            f"--chunked-prefill-size {chunk} --max-running-requests {mrr} --enable-metrics > {log} 2>&1 &\necho $!")


def _bench(conc: int, rate: str = "8") -> str:
    return (f"python -m sglang.bench_serving --backend sglang --port 30000 --dataset-name random --random-input-len 3072 "
            f"--random-output-len 256 --random-range-ratio 0.5 --num-prompts 300 --request-rate {rate} --max-concurrency {conc} 2>&1 | tail -42")


def build() -> Result:
    rng = random.Random(4000)
    clock = Clock(utc(2026, 4, 8, 10, 12, 33))
    r = Rollout(rng, clock)
    r.meta()
    r.user_turn("Our chat product needs mean TTFT under 200 ms (p99 under 400) on the Qwen3-30B-A3B SGLang server (2xH100). Tune "
                "--chunked-prefill-size and --max-running-requests. Load: ~8 req/s, 3k-token prompts, 256 output. Scripts go in ./runs.", gap=0)
    r.reason("Start with the current defaults as a baseline, then sweep chunked prefill size down; long prefills block decode batches and inflate TTFT.")
    r.exec("nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader; python -c 'import sglang; print(sglang.__version__)'",
           "0, NVIDIA H100 80GB HBM3, 3 MiB\n1, NVIDIA H100 80GB HBM3, 3 MiB\n0.5.9", 1.9)
    r.exec("mkdir -p runs && ls runs", "", 0.04)
    configs = [(8192, 128, 471.0, 38.2), (4096, 128, 318.0, 38.9), (2048, 128, 236.0, 39.4), (2048, 64, 181.0, 40.1), (1024, 64, 204.0, 36.8),
               (2048, 48, 152.0, 40.3)]
    pid = 90210
    best = None
    for k, (chunk, mrr, ttft, _tpot) in enumerate(configs):
        log = f"runs/server_c{chunk}_m{mrr}.log"
        if k:
            r.reason(f"Next point: chunked-prefill-size {chunk}, max-running-requests {mrr}.")
            r.exec("pkill -f sglang.launch_server; sleep 5; nvidia-smi --query-gpu=memory.used --format=csv,noheader", "3 MiB\n3 MiB", 6.1)
        pid += rng.randint(200, 900)
        r.exec(_launch(chunk, mrr, log), str(pid), 0.1, tags_call=("launch",))
        boot = Boot(MODEL, tp=2, port=30000, mem_frac=0.85, weights_gb=28.4, total_gb=79.1, shards=16, load_s=38, mla=False,
                    context_len=40960, max_bs=mrr, chunked=chunk, max_running=mrr, pid=pid, rng_seed=4000 + k, graph_s=22)
        L = sglang_boot(clock.t, boot)
        L.lines = [(t, x.replace("DeepseekV4", "Qwen3Moe")) for t, x in L.lines]
        wait = (L.end() - clock.t).total_seconds() + 4
        r.exec(f"timeout 600 bash -c 'until grep -qE \"ready to roll|Traceback\" {log}; do sleep 5; done'; tail -3 {log}",
               L.tail(3, L.end()), wait, tags_call=("polling_loop",))
        b = Bench(64, 300, 3072, 256, 1510.0 + 40 * k, ttft, seed=4100 + k)
        if k == 2:
            # the user interrupts a long sweep mid-run
            r.reason("Sweep request rates 4..16 at this config to see where TTFT breaks.")
            sweep = _bench(64, "$rate").replace(" | tail -42", ' | grep -E "Mean TTFT|P99 TTFT"')
            r.exec(f"for rate in 4 8 12 16; do {sweep}; done", "", 41.3,
                   tags_call=("benchmark",), tags_out=("user_abort",), aborted=True)
            r.abort()
            r.user_turn("don't sweep rates, we only care about 8 req/s. just run the single benchmark per config", gap=22)
        out = bench_serving_block(b)
        out = out.replace("Traffic request rate:                    inf       ", "Traffic request rate:                    8.0       ")
        r.exec(_bench(64), out, 300 * 3.2 / 8 + 18, tags_call=("benchmark",), tags_out=("benchmark",))
        p99 = [b for b in out.splitlines() if b.startswith("P99 TTFT")][0].split()[-1]
        r.exec(f"grep -E 'Prefill batch' {log} | tail -2",
               "\n".join(f"{L.lines[-1][1][:21]}TP0] Prefill batch, #new-seq: {1 + i}, #new-token: {chunk}, #cached-token: 0, token usage: 0.{21 + i}, "
                         f"#running-req: {mrr // 2 + i}, #queue-req: {2 - i}, input throughput (token/s): {21000 + 900 * i:.2f}, " for i in range(2)),
               0.05)
        r.exec(f"echo 'chunk={chunk} mrr={mrr} mean_ttft={ttft} p99_ttft={p99}' >> runs/results.txt; cat runs/results.txt",
               "\n".join(f"chunk={c} mrr={m} mean_ttft={t}" for c, m, t, _ in configs[: k + 1]), 0.03)
        if k == 3:
            r.say(f"chunk 2048 / mrr 64 gets mean TTFT to {ttft:.0f} ms, but p99 is {p99} ms. Trying 1024 and a lower running cap next.",
                  end_turn=True)
            r.user_turn("well?", gap=540, tags=("user_checkin",))
            r.reason("User checking in; continue the plan and report.")
        if ttft < 200 and (best is None or ttft < best[2]):
            best = (chunk, mrr, ttft, p99)
    r.reason("1024 is worse: more prefill chunks per prompt add scheduling overhead. 2048/48 is the best point and meets both targets.")
    r.exec("curl -s localhost:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\":\"" + MODEL +
           "\",\"messages\":[{\"role\":\"user\",\"content\":\"ping\"}],\"max_tokens\":8}' | jq -r .choices[0].message.content",
           "<think>\n\n</think>\n\nPong!", 0.6, tags_call=("smoke_test",))
    assert best is not None
    r.say(f"Done. Best setting: `--chunked-prefill-size {best[0]} --max-running-requests {best[1]}` → mean TTFT {best[2]:.0f} ms, "
          f"p99 {best[3]} ms at 8 req/s, output throughput ~1.7k tok/s (−4% vs defaults). The server is running with it now; results are "
          "in runs/results.txt.", tags=("readiness_claim",))
    res = Result()
    res.files[r.rel] = "".join(dumps_line(x) + "\n" for x in r.lines)
    res.hints = r.hints
    res.counts = {r.rel: len(r.lines)}
    return res
