"""Sample 3: a Claude Code project folder (2.0.42 line shapes) deploying a model with vLLM."""

from __future__ import annotations

import random
from typing import Any

from .common import Clock, Hint, Ids, Result, dumps_line, iso_z, utc
from .logs import Bench, bench_serving_block

DIR = "claude_code_vllm_session"
CWD = "/home/sam/serving/qwen3-vllm"
MODEL_ID = "claude-sonnet-4-5-20250929"
VERSION = "2.0.42"
SERVED = "Qwen/Qwen3-32B"
REJECT = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the "
          "new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.")


class CC:
    """Writes Claude Code JSONL lines with a correct parentUuid chain."""

    def __init__(self, rng: random.Random, clock: Clock, session_id: str, rel: str, sidechain: bool = False,
                 agent_id: str | None = None) -> None:
        self.rng, self.clock, self.ids = rng, clock, Ids(rng)
        self.session_id, self.rel, self.sidechain, self.agent_id = session_id, rel, sidechain, agent_id
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.hints: list[Hint] = []
        self.cache = 14000

    def _env(self, kind: str) -> dict[str, Any]:
        d: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": self.sidechain, "userType": "external", "cwd": CWD,
                             "sessionId": self.session_id, "version": VERSION, "gitBranch": "main"}
        if self.agent_id:
            d["agentId"] = self.agent_id
        d["type"] = kind
        return d

    def _push(self, d: dict[str, Any], tags: tuple[str, ...] = ()) -> str:
        u = self.ids.uuid4()
        d["uuid"] = u
        d["timestamp"] = iso_z(self.clock.t)
        self.lines.append(d)
        self.parent = u
        for t in tags:
            self.hints.append(Hint(self.rel, u, t))
        return u

    def user(self, content: Any, gap: float = 30.0, tags: tuple[str, ...] = (), **extra: Any) -> str:
        self.clock.advance(gap)
        d = self._env("user")
        d["message"] = {"role": "user", "content": content}
        d.update(extra)
        u = self._push(d, tags)
        if isinstance(content, str) and not extra and not self.sidechain:
            self.snapshot(u)
        return u

    def assistant(self, blocks: list[dict[str, Any]], stop: str | None = None, tags: dict[int, tuple[str, ...]] | None = None) -> list[str]:
        """One API message streamed as one line per content block, all sharing message.id / requestId."""
        mid, req = self.ids.anthropic("msg"), f"req_011C{self.ids.b62(20)}"
        out_tokens = sum(len(str(b)) // 4 for b in blocks)
        uuids = []
        for i, b in enumerate(blocks):
            self.clock.advance(self.rng.uniform(1.0, 4.0) if i == 0 else self.rng.uniform(0.3, 1.5))
            last = i == len(blocks) - 1
            d = self._env("assistant")
            d.pop("type")
            d["message"] = {"model": MODEL_ID, "id": mid, "type": "message", "role": "assistant", "content": [b],
                            "stop_reason": (stop or ("tool_use" if b["type"] == "tool_use" else "end_turn")) if last else None,
                            "stop_sequence": None,
                            "usage": {"input_tokens": self.rng.randint(3, 9), "cache_creation_input_tokens": self.rng.randint(200, 2500),
                                      "cache_read_input_tokens": self.cache,
                                      "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                                      "output_tokens": out_tokens if last else 1, "service_tier": "standard"}}
            d["requestId"] = req
            d["type"] = "assistant"
            uuids.append(self._push(d, (tags or {}).get(i, ())))
        self.cache += out_tokens + 900
        return uuids

    def think(self, text: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "signature": "Eq" + self.ids.b62(180)}

    @staticmethod
    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "text": t}

    def tool(self, name: str, inp: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_01{self.ids.b62(22)}", "name": name, "input": inp}

    def result(self, tu: dict[str, Any], content: str, tur: Any, gap: float = 1.0, is_error: bool = False,
               tags: tuple[str, ...] = ()) -> str:
        c: dict[str, Any] = {"tool_use_id": tu["id"], "type": "tool_result", "content": content}
        if is_error or tu["name"] == "Bash":
            c["is_error"] = is_error
        return self.user([c], gap=gap, tags=tags, toolUseResult=tur)

    def bash(self, pre: list[dict[str, Any]], cmd: str, desc: str, out: str, *, dur: float = 2.0, exit_code: int = 0,
             tags_call: tuple[str, ...] = (), tags_result: tuple[str, ...] = (), **inp: Any) -> dict[str, Any]:
        tu = self.tool("Bash", {"command": cmd, "description": desc, **inp})
        self.assistant(pre + [tu], tags={len(pre): tags_call})
        content = out if exit_code == 0 else f"Exit code {exit_code}\n{out}"
        self.result(tu, content, {"stdout": out, "stderr": "", "interrupted": False, "isImage": False}, gap=dur,
                    is_error=exit_code != 0, tags=tags_result)
        return tu

    def snapshot(self, message_uuid: str) -> None:
        self.lines.append({"type": "file-history-snapshot", "messageId": message_uuid,
                           "snapshot": {"messageId": message_uuid, "trackedFileBackups": {}, "timestamp": iso_z(self.clock.t)},
                           "isSnapshotUpdate": False})

    def jsonl(self) -> str:
        return "".join(dumps_line(x) + "\n" for x in self.lines)


def _vllm_log(fail: bool, util: float) -> list[str]:
    p = "(APIServer pid=48211) "
    e = "(EngineCore_DP0 pid=48390) "
    lines = [
        f"{p}INFO 11-21 10:14:02 [api_server.py:1885] vLLM API server version 0.11.0",
        f"{p}INFO 11-21 10:14:02 [utils.py:233] non-default args: {{'model_tag': '{SERVED}', 'model': '{SERVED}', 'max_model_len': 32768, "
        f"'tensor_parallel_size': 2, 'gpu_memory_utilization': {util}}}",
        f"{p}INFO 11-21 10:14:09 [model.py:547] Resolved architecture: Qwen3ForCausalLM",
        f"{p}INFO 11-21 10:14:09 [model.py:1510] Using max model len 32768",
        f"{e}INFO 11-21 10:14:15 [core.py:644] Waiting for init message from front-end.",
        f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:14:24 [gpu_model_runner.py:2602] Starting to load model {SERVED}...",
        f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:15:31 [default_loader.py:267] Loading weights took 64.12 seconds",
        f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:15:32 [gpu_model_runner.py:2653] Model loading took 30.5855 GiB and 66.870316 seconds",
        f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:15:58 [backends.py:548] Dynamo bytecode transform time: 14.07 s",
        f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:16:19 [monitor.py:34] torch.compile takes 21.32 s in total",
    ]
    if fail:
        lines += [
            f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:16:22 [gpu_worker.py:298] Available KV cache memory: -3.41 GiB",
            f"{e}ERROR 11-21 10:16:22 [core.py:708] EngineCore failed to start.",
            f"{e}ERROR 11-21 10:16:22 [core.py:708] Traceback (most recent call last):",
            f'{e}ERROR 11-21 10:16:22 [core.py:708]   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 686, in check_enough_kv_cache_memory',
            f"{e}ERROR 11-21 10:16:22 [core.py:708]     raise ValueError(\"No available memory for the cache blocks. \"",
            f"{e}ERROR 11-21 10:16:22 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            f"{p}RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
        ]
    else:
        lines += [
            f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:31:40 [gpu_worker.py:298] Available KV cache memory: 36.27 GiB",
            f"{e}INFO 11-21 10:31:41 [kv_cache_utils.py:1087] GPU KV cache size: 297,168 tokens",
            f"{e}INFO 11-21 10:31:41 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 9.07x",
            f"{e}(Worker_TP0 pid=48512) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:11<00:00,  5.94it/s]",
            f"{e}(Worker_TP0 pid=48512) INFO 11-21 10:31:56 [gpu_model_runner.py:3480] Graph capturing finished in 14 secs, took 1.12 GiB",
            f"{e}INFO 11-21 10:31:57 [core.py:210] init engine (profile, create kv cache, warmup model) took 52.66 seconds",
            f"{p}INFO 11-21 10:31:59 [api_server.py:1634] Supported_tasks: ['generate']",
            f"{p}INFO 11-21 10:31:59 [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000",
            f"{p}INFO 11-21 10:31:59 [launcher.py:34] Available routes are:",
            f"{p}INFO 11-21 10:31:59 [launcher.py:42] Route: /health, Methods: GET",
            f"{p}INFO 11-21 10:31:59 [launcher.py:42] Route: /v1/chat/completions, Methods: POST",
            f"{p}INFO:     Started server process [48211]",
            f"{p}INFO:     Waiting for application startup.",
            f"{p}INFO:     Application startup complete.",
        ]
    return lines


def build() -> Result:
    rng = random.Random(3000)
    clock = Clock(utc(2025, 11, 21, 10, 2, 11))
    ids = Ids(rng)
    sid = ids.uuid4()
    rel = f"{DIR}/{sid}.jsonl"
    c = CC(rng, clock, sid, rel)
    c.lines.append({"type": "summary", "summary": "Deploy Qwen3-32B on vLLM with TP=2 and benchmark", "leafUuid": ids.uuid4()})
    c.user(f"Deploy {SERVED} with vLLM on this box (2x L40S), tensor parallel 2, gpu mem util 0.90, port 8000. Then smoke test and benchmark it.", gap=0)
    c.bash([c.think("Check GPUs and whether anything is already holding memory."), c.text("Let me check the GPUs and the vLLM install first.")],
           "nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv && vllm --version", "Check GPUs and vLLM version",
           "index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n0, NVIDIA L40S, 9214 MiB, 46068 MiB, 0 %\n"
           "1, NVIDIA L40S, 9214 MiB, 46068 MiB, 0 %\n0.11.0")
    for pre_cmd, desc, out in (
        ("df -h /home ~/.cache/huggingface | tail -2", "Check disk space", "/dev/nvme0n1p2  1.8T  612G  1.1T  36% /home\n/dev/nvme0n1p2  1.8T  612G  1.1T  36% /home"),
        ("ls ~/.cache/huggingface/hub | grep -i qwen3", "Check the HF cache", "models--Qwen--Qwen3-0.6B\nmodels--Qwen--Qwen3-32B"),
        ("du -sh ~/.cache/huggingface/hub/models--Qwen--Qwen3-32B", "Size of cached weights", "62G\t/home/sam/.cache/huggingface/hub/models--Qwen--Qwen3-32B"),
        ("python -c 'import torch; print(torch.__version__, torch.cuda.device_count())'", "Check torch", "2.8.0+cu128 2"),
        ("ss -ltnp | grep -E ':8000|:8011' || true", "Check ports in use", 'LISTEN 0      2048         0.0.0.0:8011      0.0.0.0:*    users:(("python3",pid=31877,fd=22))'),
    ):
        c.bash([c.text(f"{desc}.")], pre_cmd, desc, out)
    cmd = f"vllm serve {SERVED} --tensor-parallel-size 2 --gpu-memory-utilization 0.90 --max-model-len 32768 --port 8000"
    launch_tu = c.tool("Bash", {"command": cmd, "description": "Start vLLM server (TP=2)", "run_in_background": True})
    c.assistant([c.text("Both GPUs visible, vLLM 0.11.0. Starting the server in the background."), launch_tu], tags={1: ("launch",)})
    c.result(launch_tu, "Command running in background with ID: 5b21e0",
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "backgroundTaskId": "5b21e0"}, gap=1.2)
    fail_log = _vllm_log(True, 0.9)

    def poll(shell: str, log: list[str], n: int, status: str = "running", exit_code: int | None = None, tags_call: tuple[str, ...] = (),
             tags_result: tuple[str, ...] = (), pre: list[dict[str, Any]] | None = None) -> None:
        sl = c.tool("Bash", {"command": "sleep 30", "description": "Wait for model load"})
        c.assistant((pre or []) + [sl])
        c.result(sl, "", {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}, gap=30.2)
        bo = c.tool("BashOutput", {"bash_id": shell})
        c.assistant([bo], tags={0: tags_call})
        shown = "\n".join(log[:n])
        ts = iso_z(clock.t)
        c.result(bo, f"<status>{status}</status>\n\n" + (f"<exit_code>{exit_code}</exit_code>\n\n" if exit_code is not None else "")
                 + f"<stdout>\n{shown}\n</stdout>\n\n<timestamp>{ts}</timestamp>",
                 {"shellId": shell, "command": cmd, "status": status, "exitCode": exit_code, "stdout": shown, "stderr": "",
                  "stdoutLines": n, "stderrLines": 1, "timestamp": ts}, gap=0.3, tags=tags_result)

    for n in (2, 3, 4, 6):
        poll("5b21e0", fail_log, n, tags_call=("polling_loop",))
    poll("5b21e0", fail_log, 7, tags_call=("polling_loop",))
    c.user("done?", gap=41, tags=("user_checkin",))
    poll("5b21e0", fail_log, len(fail_log), status="failed", exit_code=1, tags_call=("polling_loop",), tags_result=("error",),
         pre=[c.text("Not yet — weights are loaded and torch.compile is running. Checking again.")])
    c.assistant([c.think("Available KV cache memory: -3.41 GiB. 9.2 GB per GPU was already used before we started — something else holds memory."),
                 c.text("Startup failed: `No available memory for the cache blocks`. vLLM reports **-3.41 GiB** available for KV cache. The cause is "
                        "memory that was already in use before launch: `nvidia-smi` showed 9.2 GiB used on each GPU, and vLLM budgets 0.90 of the "
                        "*total* memory including what other processes hold. Let me find that process.")],
                tags={1: ("diagnosis",)})
    c.bash([], "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv", "List GPU processes",
           "pid, process_name, used_memory [MiB]\n31877, /opt/venv/bin/python3, 9196 MiB\n31877, /opt/venv/bin/python3, 9196 MiB")
    c.bash([], "ps -o pid,etime,cmd -p 31877 | cut -c1-120", "Inspect the stale process",
           "  PID     ELAPSED CMD\n31877  2-03:11:52 python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-0.6B --port 8011 --gpu-memory-utilization 0.2")
    # user rejects a kill, then interrupt marker
    kill = c.tool("Bash", {"command": "kill 31877", "description": "Kill the stale vLLM server"})
    c.assistant([c.text("A two-day-old Qwen3-0.6B server on port 8011 holds 9 GiB per GPU. Killing it."), kill])
    c.result(kill, REJECT, "Error: " + REJECT, gap=12, is_error=True, tags=("user_abort",))
    c.user([{"type": "text", "text": "[Request interrupted by user for tool use]"}], gap=0.02, tags=("user_abort",))
    c.user("no, leave that one, Priya's evals use it. just lower the utilization so both fit", gap=25)
    c.assistant([c.think("Total 45 GiB; the other server takes ~9 GiB. 0.70 * 45 = 31.5 GiB... weights 15.3 GiB per GPU with TP2 plus activations. "
                         "0.75 leaves ~34.5, minus 9 already used elsewhere — vLLM checks free memory against util*total. 0.78 would need 35.9 GiB free; 36.8 free. OK."),
                 c.text("Understood. With 9 GiB taken by the other server, 36.8 GiB is free per GPU. `--gpu-memory-utilization 0.78` asks for "
                        "35.9 GiB, which fits, and leaves ~20 GiB for KV cache after the 15.3 GiB weight shard.")])
    cmd = cmd.replace("0.90", "0.78")
    launch2 = c.tool("Bash", {"command": cmd, "description": "Restart vLLM with lower utilization", "run_in_background": True})
    c.assistant([launch2], tags={0: ("launch",)})
    c.result(launch2, "Command running in background with ID: 9c07d4",
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "backgroundTaskId": "9c07d4"}, gap=1.1)
    ok_log = _vllm_log(False, 0.78)
    for n in (3, 5, 6, 7, 8, 9, 10):
        poll("9c07d4", ok_log, n, tags_call=("polling_loop",))
    c.user("is it up?", gap=70, tags=("user_checkin",))
    poll("9c07d4", ok_log, 12, tags_call=("polling_loop",), pre=[c.text("Still initializing (torch.compile). Checking.")])
    poll("9c07d4", ok_log, len(ok_log), tags_call=("polling_loop",))
    c.assistant([c.text("`Application startup complete.` — the server is up on :8000 with 297k tokens of KV cache. Running a smoke test.")],
                tags={0: ("readiness_claim",)})
    c.bash([], f"curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{{\"model\":\"{SERVED}\",\"messages\":[{{\"role\":\"user\",\"content\":\"Name the largest planet. /no_think\"}}],\"max_tokens\":32}}' | jq -r '.choices[0].message.content'",
           "Smoke test chat completion", "<think>\n\n</think>\n\nJupiter.", tags_call=("smoke_test",))
    b = Bench(16, 200, 1024, 256, 1187.4, 212.0, seed=3001)
    long_cmd = (f"vllm bench serve --model {SERVED} --dataset-name random --random-input-len 1024 --random-output-len 256 "
                "--num-prompts 200 --max-concurrency 16 --port 8000 2>&1 | tail -30")
    c.bash([c.text("Smoke test passes. Benchmarking at concurrency 16.")], long_cmd, "Benchmark vLLM server",
           bench_serving_block(b, engine="vllm"), dur=47.0, tags_call=("benchmark",), tags_result=("benchmark",))
    c.assistant([c.text("At concurrency 16 (1024 in / 256 out): **1187 tok/s** output, mean TTFT 212 ms. Want a concurrency sweep?")])
    c.user("yes sweep 1,4,32,64", gap=60)
    sweep = c.tool("Bash", {"command": "for c in 1 4 32 64; do vllm bench serve --model Qwen/Qwen3-32B --dataset-name random --random-input-len 1024 "
                                       "--random-output-len 256 --num-prompts 200 --max-concurrency $c --port 8000 2>&1 | grep -E 'Maximum request|Output token'; done",
                            "description": "Concurrency sweep"})
    c.assistant([sweep], tags={0: ("benchmark",)})
    c.result(sweep, "[Request interrupted by user for tool use]",
             {"stdout": "Maximum request concurrency:             1         \nOutput token throughput (tok/s):         41.27     ",
              "stderr": "", "interrupted": True, "isImage": False}, gap=95, is_error=True, tags=("user_abort",))
    c.user([{"type": "text", "text": "[Request interrupted by user for tool use]"}], gap=0.02)
    c.user("c=1 takes forever at 200 prompts, use 40 prompts for the small ones", gap=14)
    for conc, tput, ttft, n in ((1, 41.3, 95.0, 40), (4, 158.2, 118.0, 40), (32, 1790.6, 388.0, 200), (64, 2204.9, 901.0, 200)):
        c.bash([], long_cmd.replace("--num-prompts 200", f"--num-prompts {n}").replace("--max-concurrency 16", f"--max-concurrency {conc}"),
               f"Benchmark concurrency {conc}", bench_serving_block(Bench(conc, n, 1024, 256, tput, ttft, seed=3100 + conc), engine="vllm"),
               dur=n * 256 / tput + 8, tags_call=("benchmark",))
    c.assistant([c.text("Sweep (output tok/s): c1 41.3, c4 158.2, c16 1187.4, c32 1790.6, c64 2204.9. TTFT stays under 400 ms up to c32 and "
                        "jumps to ~900 ms at c64, so ~32 is the knee. I can also write this up as a markdown report with a chart")])
    c.user([{"type": "text", "text": "[Request interrupted by user]"}], gap=4, tags=("user_abort",))
    c.user("no report. have a subagent check the server logs for any warnings during the benchmarks", gap=20)
    agent_id = ids.hexs(8)
    task = c.tool("Task", {"description": "Scan vLLM logs for warnings", "subagent_type": "general-purpose",
                           "prompt": "Read the output of background shell 9c07d4 (the vLLM server) and list every WARNING or ERROR line "
                                     "logged during the benchmark runs, grouped by message. Report counts and whether any indicate preemption."})
    c.assistant([task])
    # subagent in 2.1.x layout
    sub = CC(rng, clock, sid, f"{DIR}/{sid}/subagents/agent-{agent_id}.jsonl", sidechain=True, agent_id=agent_id)
    sub.user(task["input"]["prompt"], gap=1)
    bo = sub.tool("BashOutput", {"bash_id": "9c07d4", "filter": "WARNING|ERROR"})
    sub.assistant([sub.text("I'll read the server output filtered to warnings."), bo])
    warn = ("(EngineCore_DP0 pid=48390) WARNING 11-21 10:49:12 [scheduler.py:1221] Sequence group 188 is preempted by PreemptionMode.RECOMPUTE mode "
            "because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
            "tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1\n"
            "(EngineCore_DP0 pid=48390) WARNING 11-21 10:49:40 [scheduler.py:1221] Sequence group 201 is preempted by PreemptionMode.RECOMPUTE mode "
            "because there is not enough KV cache space. total_num_cumulative_preemption=51")
    ts = iso_z(clock.t)
    sub.result(bo, f"<status>running</status>\n\n<stdout>\n{warn}\n</stdout>\n\n<timestamp>{ts}</timestamp>",
               {"shellId": "9c07d4", "command": cmd, "status": "running", "exitCode": None, "stdout": warn, "stderr": "",
                "stdoutLines": 2, "stderrLines": 0, "timestamp": ts}, gap=0.4)
    sub.bash([], "grep -c . /dev/null; echo 'Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 2191.4 tokens/s, Running: 64 reqs, Waiting: 0 reqs, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%' | awk -F'GPU KV cache usage: ' '{print $2}'",
             "Extract KV usage", "0\n99.1%, Prefix cache hit rate: 0.0%")
    summary = ("Found 2 distinct warnings, both preemption (RECOMPUTE) during the c64 run: 51 preemptions in total, KV cache usage at 99.1%. "
               "No errors. c64 exceeds the KV capacity at 0.78 utilization; c32 ran without preemption.")
    sub.assistant([sub.text(summary)])
    c.result(task, summary, {"status": "completed", "prompt": task["input"]["prompt"], "agentId": agent_id,
                             "content": [{"type": "text", "text": summary}], "totalDurationMs": 21450, "totalTokens": 18233,
                             "totalToolUseCount": 2}, gap=2)
    c.assistant([c.text("The subagent found only preemption warnings, all at c64 (51 preemptions, KV usage 99%). That explains the c64 TTFT jump: "
                        "the KV cache is full at 0.78 utilization. Recommend capping `--max-num-seqs 32`.")], tags={0: ("diagnosis",)})
    # compaction
    prev = c.parent
    clock.advance(400)
    d = c._env("system")
    d["parentUuid"] = None
    d.update({"logicalParentUuid": prev, "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False, "level": "info",
              "compactMetadata": {"trigger": "manual", "preTokens": 61877}})
    c._push(d)
    c.user("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n"
           "Analysis:\nThe user asked to deploy Qwen/Qwen3-32B with vLLM (TP=2) on 2x L40S. The first launch at --gpu-memory-utilization 0.90 failed with "
           "'No available memory for the cache blocks' because a separate Qwen3-0.6B server (PID 31877, port 8011) holds 9 GiB per GPU; the user "
           "asked to keep it. Relaunched at 0.78 (shell 9c07d4); Application startup complete; smoke test OK. Benchmarks: c1 41.3, c4 158.2, c16 "
           "1187.4, c32 1790.6, c64 2204.9 tok/s; preemptions at c64.\n\nPending: cap --max-num-seqs 32 if the user agrees.",
           gap=1, isCompactSummary=True, isVisibleInTranscriptOnly=True)
    c.user("yes cap it at 32 and restart", gap=50)
    c.bash([c.text("Restarting with `--max-num-seqs 32`.")], "kill %1 2>/dev/null; pkill -f 'vllm serve Qwen/Qwen3-32B'; sleep 5; nvidia-smi --query-gpu=memory.used --format=csv,noheader",
           "Stop the server", "9214 MiB\n9214 MiB")
    launch3 = c.tool("Bash", {"command": cmd + " --max-num-seqs 32", "description": "Restart vLLM with max-num-seqs 32", "run_in_background": True})
    c.assistant([launch3], tags={0: ("launch",)})
    c.result(launch3, "Command running in background with ID: e41a9f",
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "backgroundTaskId": "e41a9f"}, gap=1.0)
    wait = c.tool("Bash", {"command": "timeout 300 bash -c 'until curl -sf localhost:8000/health >/dev/null; do sleep 5; done'; curl -s localhost:8000/v1/models | jq -r '.data[0].id'",
                           "description": "Wait until /health answers"})
    c.assistant([wait], tags={0: ("polling_loop",)})
    c.result(wait, SERVED, {"stdout": SERVED, "stderr": "", "interrupted": False, "isImage": False}, gap=118)
    c.bash([], long_cmd.replace("--max-concurrency 16", "--max-concurrency 64"), "Re-run c64 benchmark",
           bench_serving_block(Bench(64, 200, 1024, 256, 1802.2, 640.0, seed=3200), engine="vllm"), dur=40, tags_call=("benchmark",))
    c.assistant([c.text("Done. vLLM serves Qwen3-32B on :8000 (TP=2, util 0.78, max-num-seqs 32) next to the 0.6B eval server. At c64 requests now "
                        "queue instead of being preempted: 1802 tok/s, TTFT 640 ms (was 901 ms).")], tags={0: ("readiness_claim",)})
    for i in range(3):
        c.user(["ok thanks", "one more: what's the p99 TTFT at c32?", "thanks"][i], gap=[30, 40, 20][i])
        c.assistant([c.text(["You're welcome.", "P99 TTFT at c32 was 901.3 ms in the sweep run (mean 388 ms).", "👍"][i])])
    res = Result()
    res.files[rel] = c.jsonl()
    res.files[sub.rel] = sub.jsonl()
    res.files[f"{DIR}/{sid}/subagents/agent-{agent_id}.meta.json"] = dumps_line(
        {"agentType": "general-purpose", "description": "Scan vLLM logs for warnings"}) + "\n"
    res.hints = c.hints + sub.hints
    res.counts = {rel: len(c.lines), sub.rel: len(sub.lines)}
    return res
