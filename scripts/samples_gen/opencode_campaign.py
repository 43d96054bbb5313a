"""Sample 1: opencode export of a DeepSeek-V4-Flash throughput campaign (case study 000)."""

from __future__ import annotations

import random

from .common import Clock, Result, utc
from .logs import (
    Bench,
    Boot,
    access,
    bench_serving_block,
    bench_serving_preamble,
    decode_batch,
    nvidia_smi,
    sglang_boot,
    smi_query,
)
from .opencode_writer import OpencodeSession

FILE = "opencode_deepseek_v4_campaign.json"
MODEL = "/models/DeepSeek-V4-Flash"
HOST = "bw8"
SEED = 1000


def _launch_script(role: str, *, gpus: str, numa: int, port: int, mem: float, log: str,
                   env: str = "", extra: str = "") -> str:
    lines = ["#!/bin/bash", f"export CUDA_VISIBLE_DEVICES={gpus}"]
    if env:
        lines.append(env)
    lines += [
        f"numactl --cpunodebind={numa} --membind={numa} python3 -m sglang.launch_server \\",
        f"  --model-path {MODEL} --trust-remote-code \\",
        f"  --tp 4 --disaggregation-mode {role} --disaggregation-transfer-backend mooncake \\",
        f"  --disaggregation-ib-device mlx5_{numa} --mem-fraction-static {mem:.2f} \\",
    ]
    if extra:
        lines.append(f"  {extra} \\")
    lines.append(f"  --host 0.0.0.0 --port {port} > {log} 2>&1")
    return "\n".join(lines)


def _bench_cmd(conc: int, prompts: int, port: int = 8000) -> str:
    return (f"ssh {HOST} 'cd /root && python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 "
            f"--port {port} --dataset-name random --random-input-len 1024 --random-output-len 256 "
            f"--random-range-ratio 1.0 --num-prompts {prompts} --max-concurrency {conc} 2>&1 | tail -48'")


class Campaign:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.clock = Clock(utc(2026, 5, 13, 13, 41, 7))
        self.s = OpencodeSession(rng=self.rng, clock=self.clock,
                                 title="DeepSeek-V4-Flash PD disaggregation on 8x RTX PRO 6000 — throughput",
                                 directory="/home/mira/work/bw8-serving", file_name=FILE)
        self.pid = 38110
        self.bench_seed = 0
        self.results: list[tuple[str, int, float]] = []

    # ------------------------------------------------------------------ reusable sequences
    def next_pid(self) -> int:
        self.pid += self.rng.randint(300, 2900)
        return self.pid

    def boot_and_wait(self, role: str, log: str, boot: Boot, *, checks: int = 16, fail: str | None = None,
                      interval: int = 20, say_ready: bool = False) -> str | None:
        """Launch command already issued; poll the log with sleep+tail steps until ready or an error."""
        from datetime import timedelta
        s = self.s
        L = sglang_boot(self.clock.t, boot, fail=fail)
        self.last_log = L
        last = None
        thinks = [
            f"Weights are large ({boot.weights_gb:.0f} GB per rank); loading takes a couple of minutes. Check the {role} log.",
            "Still loading shards.", "Check again.", "Loading is slow from this disk; keep waiting.",
            "Should be past weight loading soon.", "Look at the log tail.", "KV cache allocation next, then graphs.",
            "Graph capture in progress?", "Keep polling.", "Almost there, probably warmup.", "Check for the ready line.",
            "Still not ready; look again.",
        ]
        schedule = [interval, interval, interval + 5, interval + 10] + [interval + 10] * 20
        for i in range(checks):
            wait = schedule[i]
            cmd = f"sleep {wait}; ssh {HOST} 'tail -{3 if i % 3 else 5} {log}'"
            out = L.tail(3 if i % 3 else 5, self.clock.t + timedelta(seconds=wait + 3))
            last = s.bash(cmd, out, f"Wait and check {role} server log", think=thinks[i % len(thinks)], dur=wait + 1.2)
            if "ready to roll" in out or "Traceback" in out or "Received sigquit" in out:
                break
        if "ready to roll" in (out or ""):
            self.s.bash(f"ssh {HOST} 'nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv'",
                        smi_query([(int(1000 * (boot.total_gb * boot.mem_frac + 3.1)) if (role != "prefill" and i >= 4) or (role == "prefill" and i < 4) or boot.tp == 8 else 79112, 0, 0) for i in range(8)]),
                        "GPU memory after startup", think="Memory per GPU now that it is up.")
        return last

    def record(self, label: str, conc: int, tput: float) -> str:
        self.results.append((label, conc, tput))
        rows = "\n".join(f"{a:<22} {c:>4} {t:>8.1f}" for a, c, t in self.results)
        return self.s.bash(f"ssh {HOST} 'echo \"{label},{conc},{tput:.1f}\" >> /root/results.csv; column -s, -t /root/results.csv'",
                           f"{'label':<22} {'conc':>4} {'tok_s':>8}\n" + rows, "Record result",
                           think="Append to the results table.", dur=0.6)

    def bench(self, conc: int, prompts: int, tput: float, ttft: float, *, think: str, text: str | None = None,
              accept: float | None = None, port: int = 8000) -> str:
        """Run bench_serving in the background, poll its progress bar, then read the result block."""
        self.bench_seed += 1
        b = Bench(conc, prompts, 1024, 256, tput, ttft, accept_len=accept, seed=SEED + self.bench_seed)
        log = f"/root/bench_{self.bench_seed:02d}_c{conc}.log"
        total = prompts * 256 / tput + 14
        cmd = _bench_cmd(conc, prompts, port).replace(" 2>&1 | tail -48'", f" > {log} 2>&1 &' ; echo started {log}")
        self.s.bash(cmd, f"started {log}", f"Start bench_serving concurrency {conc}", think=think, text=text, dur=0.9)
        done = 0.0
        n = 0
        while done + 75 < total:
            wait = 60 if n % 3 else 75
            done += wait + 1.5
            k = min(prompts - 1, int(prompts * done / total))
            el = int(done)
            self.s.bash(f"sleep {wait}; ssh {HOST} 'tail -c 200 {log}'",
                        f"{int(100 * k / prompts):>3}%|{'█' * (10 * k // prompts):<10}| {k}/{prompts} [{el // 60:02d}:{el % 60:02d}<{int(total - done) // 60:02d}:{int(total - done) % 60:02d}, {done / max(k, 1):.2f}s/it]",
                        "Benchmark progress", think=["Benchmark still running.", "Check progress.", "Wait for the benchmark."][n % 3], dur=wait + 1.5)
            n += 1
        remaining = max(5.0, total - done)
        out = bench_serving_preamble(b, MODEL, "127.0.0.1", port) + "\n" + bench_serving_block(b)
        mid = self.s.bash(f"sleep {int(remaining) + 3}; ssh {HOST} 'tail -48 {log}'", out, f"bench_serving result c{conc}",
                          think="Should be finished; read the result block.", dur=remaining + 4)
        self.s.hint(mid, "benchmark")
        return mid

    def stop_servers(self, which: str = "all") -> str:
        pat = {"all": "sglang", "decode": "port 30001", "prefill": "port 30000"}[which]
        out = "" if which == "all" else ""
        return self.s.bash(f"ssh {HOST} 'pkill -f \"{pat}\"; sleep 8; nvidia-smi --query-gpu=index,memory.used --format=csv,noheader'",
                           out + "\n".join(f"{i}, {0 if which == 'all' or (which == 'decode' and i >= 4) or (which == 'prefill' and i < 4) else 79112} MiB" for i in range(8)),
                           f"Stop {which} server(s)", think=f"Stop the {which} server(s) before relaunching.", dur=10.5)

    def launch(self, script: str, role: str, think: str, text: str | None = None) -> str:
        pid = self.next_pid()
        mid = self.s.bash(f"ssh {HOST} 'setsid nohup bash {script} > /dev/null 2>&1 < /dev/null & echo $!'",
                          str(pid), f"Launch {role} server", think=think, text=text, dur=1.1)
        self.s.hint(mid, "launch")
        return mid

    def write_script(self, path: str, body: str, think: str, text: str | None = None) -> str:
        return self.s.bash(f"ssh {HOST} \"cat > {path}\" <<'EOF'\n{body}\nEOF\nssh {HOST} 'chmod +x {path}; cat {path} | tail -3'",
                           "\n".join(body.splitlines()[-3:]), f"Write {path}", think=think, text=text, dur=1.4)

    # ------------------------------------------------------------------ phases
    def run(self) -> Result:
        self.setup()
        self.baseline()
        self.fp8_tuning()
        self.nccl()
        self.cuda_graphs()
        self.overnight()
        self.tilelang()
        self.moe_backends()
        self.expert_parallel()
        self.profile()
        self.mtp()
        res = Result()
        res.files[FILE] = self.s.export()
        res.hints = self.s.hints
        res.counts[FILE] = len(self.s.messages)
        return res

    def setup(self) -> None:
        s = self.s
        s.user("We have bw8 up now (8x RTX PRO 6000 Blackwell). I want DeepSeek-V4-Flash served with SGLang using "
               "prefill/decode disaggregation — prefill on GPUs 0-3 (NUMA 0), decode on 4-7 (NUMA 1), router in front. "
               "Target is ~1000 tok/s output throughput for the agent fleet. Weights are already in /models. "
               "ssh bw8 works from here.", gap=0)
        s.bash(f"ssh {HOST} 'hostname; nvidia-smi'",
               "bw8\n" + nvidia_smi(self.clock.t, driver="580.82.07", cuda="13.0", gpus=[(31 + i % 3, 21 + i % 4, 0, 0) for i in range(8)]),
               "Inspect GPUs on bw8", think="Start by looking at the box: GPUs, driver, free memory.", dur=2.3)
        s.bash(f"ssh {HOST} 'nvidia-smi topo -m | head -12; numactl -H | head -4'",
               "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
               + "\n".join(f"GPU{i}\t" + "\t".join("X" if j == i else ("NODE" if (i < 4) == (j < 4) else "SYS") for j in range(8))
                           + ("\tNODE\tSYS\t0-47\t0" if i < 4 else "\tSYS\tNODE\t48-95\t1") for i in range(8))
               + "\n\navailable: 2 nodes (0-1)\nnode 0 cpus: 0-47 96-143\nnode 0 size: 772011 MB\nnode 1 cpus: 48-95 144-191",
               "GPU topology and NUMA layout",
               think="No NVLink on these cards, so everything crosses PCIe. Check topology: which GPUs hang off which socket.")
        s.bash(f"ssh {HOST} 'ls /models/DeepSeek-V4-Flash | head; du -sh /models/DeepSeek-V4-Flash; python3 -c \"import sglang, torch; print(sglang.__version__, torch.__version__, torch.cuda.get_device_capability())\"'",
               "config.json\nconfiguration_deepseek.py\ngeneration_config.json\nmodel-00001-of-00046.safetensors\nmodel-00002-of-00046.safetensors\n"
               "model-00003-of-00046.safetensors\nmodel-00004-of-00046.safetensors\nmodel-00005-of-00046.safetensors\nmodel-00006-of-00046.safetensors\n"
               "model-00007-of-00046.safetensors\n146G\t/models/DeepSeek-V4-Flash\n0.5.11 2.9.1+cu130 (12, 0)",
               "Check weights and sglang version",
               think="146 GB checkpoint, FP8 attention/dense with FP4 experts. sm_120. Check sglang version supports V4.")
        s.bash(f"ssh {HOST} 'python3 -c \"import json;c=json.load(open(\\\"/models/DeepSeek-V4-Flash/config.json\\\"));print({{k:c[k] for k in [\\\"num_hidden_layers\\\",\\\"n_routed_experts\\\",\\\"num_experts_per_tok\\\",\\\"index_topk\\\",\\\"num_nextn_predict_layers\\\"]}}, c[\\\"quantization_config\\\"][\\\"quant_method\\\"])\"'",
               "{'num_hidden_layers': 43, 'n_routed_experts': 256, 'num_experts_per_tok': 8, 'index_topk': 512, 'num_nextn_predict_layers': 1} fp8",
               "Read model config", think="Sparse attention with top-k 512 indexer, one NextN layer available for MTP later.")
        pre = _launch_script("prefill", gpus="0,1,2,3", numa=0, port=30000, mem=0.80, log="/root/dsv4_prefill.log")
        dec = _launch_script("decode", gpus="4,5,6,7", numa=1, port=30001, mem=0.70, log="/root/dsv4_decode.log")
        self.write_script("/root/launch_prefill.sh", pre, "Write the prefill launch script: TP4 on GPUs 0-3 pinned to NUMA 0, mooncake transfer.",
                          text="Plan: prefill TP4 on GPUs 0-3 (NUMA 0), decode TP4 on GPUs 4-7 (NUMA 1), mooncake KV transfer, sglang_router in PD mode on :8000.")
        self.write_script("/root/launch_decode.sh", dec, "Decode side mirrors it on GPUs 4-7, NUMA 1, port 30001. Leave more headroom on decode (0.70).")
        self.write_script("/root/launch_router.sh",
                          "#!/bin/bash\npython3 -m sglang_router.launch_router --pd-disaggregation \\\n  --prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001 \\\n  --host 0.0.0.0 --port 8000 > /root/router.log 2>&1",
                          "And the router.")
        self.launch("/root/launch_prefill.sh", "prefill", "Launch prefill first.")
        self.launch("/root/launch_decode.sh", "decode", "Launch decode right away; they load in parallel on different GPUs.")
        self.boot_and_wait("prefill", "/root/dsv4_prefill.log",
                           Boot(MODEL, port=30000, mem_frac=0.80, disagg="prefill", pid=self.pid - 700, rng_seed=11), checks=16, interval=15)
        # premature readiness claim: /v1/models answers before decode warmup ends
        s.bash(f"ssh {HOST} 'for p in 30000 30001; do curl -s -o /dev/null -w \"$p %{{http_code}}\\n\" localhost:$p/v1/models; done'",
               "30000 200\n30001 200", "Probe both servers",
               think="Prefill log looks done. Check both endpoints respond.")
        mid = s.bash(f"ssh {HOST} 'setsid nohup bash /root/launch_router.sh > /dev/null 2>&1 < /dev/null & sleep 5; tail -3 /root/router.log'",
                     "2026-05-13T14:02:51.118Z  INFO sglang_router_rs::server: Starting router on 0.0.0.0:8000 | mode: PrefillDecode | policy: RoundRobin\n"
                     "2026-05-13T14:02:51.120Z  INFO sglang_router_rs::routers::pd_router: PD router ready: 1 prefill, 1 decode\n"
                     "2026-05-13T14:02:51.121Z  INFO sglang_router_rs::server: Router listening on 0.0.0.0:8000",
                     "Launch PD router", text="Both servers answer on /v1/models and are up and ready. Starting the router and then the baseline benchmark.",
                     think="Both 200. Start the router.")
        s.hint(mid, "readiness_claim", "launch", note="premature: /v1/models is 200 before decode warmup/graph capture ends")
        mid = s.bash(f"ssh {HOST} 'curl -s -m 60 localhost:8000/v1/chat/completions -H \"Content-Type: application/json\" -d \"{{\\\"model\\\":\\\"{MODEL}\\\",\\\"messages\\\":[{{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"Say hi\\\"}}],\\\"max_tokens\\\":16}}\"'",
                     '{"error":{"message":"Failed to connect to decode server http://127.0.0.1:30001: Connection refused (os error 111)","type":"service_unavailable","code":503}}',
                     "Smoke test via router", think="Quick generation through the router before benchmarking.", dur=0.8, exit=0)
        s.hint(mid, "smoke_test", "error")
        s.bash(f"ssh {HOST} 'tail -3 /root/dsv4_decode.log'",
               "Capturing batches (bs=16 avail_mem=25.11 GB):  37%|███▋      | 3/8 [00:14<00:24,  4.88s/it]\n"
               "Capturing batches (bs=12 avail_mem=25.06 GB):  50%|█████     | 4/8 [00:19<00:19,  4.88s/it]\n"
               "Capturing batches (bs=8 avail_mem=25.01 GB):  62%|██████▎   | 5/8 [00:24<00:14,  4.88s/it]",
               "Decode log tail", think="Connection refused on the decode side. Look at its log.")
        mid = s.say("I was wrong a moment ago: the decode server is not ready. `/v1/models` returns 200 from the HTTP layer "
                    "as soon as the tokenizer manager is up, but the decode scheduler is still capturing CUDA graphs "
                    "(bs=8 of 8 sizes), so the router gets connection refused on the generate path. I'll wait for "
                    "`The server is fired up and ready to roll!` in the decode log instead of trusting `/v1/models`.",
                    think="/v1/models is static and answered before warmup. Only the 'fired up' line means ready.")
        s.hint(mid, "diagnosis")
        self.boot_and_wait("decode", "/root/dsv4_decode.log",
                           Boot(MODEL, port=30001, mem_frac=0.70, disagg="decode", pid=self.pid, rng_seed=12), checks=16, interval=15)
        mid = s.bash(f"ssh {HOST} 'curl -s -m 120 localhost:8000/v1/chat/completions -H \"Content-Type: application/json\" -d \"{{\\\"model\\\":\\\"{MODEL}\\\",\\\"messages\\\":[{{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"What is the capital of Portugal? One word.\\\"}}],\\\"max_tokens\\\":16}}\" | python3 -m json.tool | head -20'",
                     '{\n    "id": "6f2c09d1b6e44c58a7d1e1f0c4b1c2aa",\n    "object": "chat.completion",\n    "created": 1778681141,\n    "model": "/models/DeepSeek-V4-Flash",\n'
                     '    "choices": [\n        {\n            "index": 0,\n            "message": {\n                "role": "assistant",\n                "content": "Lisbon",\n'
                     '                "reasoning_content": null,\n                "tool_calls": null\n            },\n            "logprobs": null,\n            "finish_reason": "stop",\n'
                     '            "matched_stop": 1\n        }\n    ],',
                     "Smoke test via router", think="Decode is fired up now. Retry the smoke test.", dur=3.6)
        s.hint(mid, "smoke_test")
        mid = s.say("PD disaggregation works end to end now: prefill (GPUs 0-3) → mooncake → decode (GPUs 4-7) → router on :8000 answered \"Lisbon\". Running the baseline benchmark next.")
        s.hint(mid, "readiness_claim", note="supported by the smoke test just before")

    def baseline(self) -> None:
        s = self.s
        self.bench(1, 8, 10.2, 410.0, think="Baseline at concurrency 1 first: single-stream decode speed.")
        self.record("baseline", 1, 10.2)
        s.say("Baseline at concurrency 1: **10.2 tok/s** output (TPOT ~98 ms). That is far from the target. "
                    "Want me to run concurrency 16 as well before touching anything?",
                    think="10 tok/s at bs=1. Very slow. Ask before spending 5 minutes on c16.")
        s.user("ok, now run the benchmark at concurrency 16", gap=95)
        self.bench(16, 32, 25.3, 1840.0, think="User wants c16. Same input/output lengths, 32 prompts.")
        self.record("baseline", 16, 25.3)
        s.user("before tuning anything, sweep concurrency 2/4/8/32 so we see the scaling curve", gap=130)
        for conc, tput, ttft in ((2, 13.1, 520.0), (4, 16.9, 700.0), (8, 21.4, 1100.0), (32, 27.9, 3900.0)):
            self.bench(conc, max(8, conc * 2), tput, ttft, think=f"Sweep point concurrency {conc}.")
            self.record("baseline", conc, tput)
        s.bash(f"ssh {HOST} 'grep \"Decode batch\" /root/dsv4_decode.log | tail -3'",
               "\n".join(decode_batch(self.clock.t, running=16, tokens=19000 + 400 * i, usage=0.05, tput=24.9 + 0.3 * i) for i in range(3)),
               "Decode throughput from server log", think="Cross-check with the server-side decode throughput.")
        s.say("Baseline (random 1024 in / 256 out):\n\n| concurrency | output tok/s | TPOT ms |\n|---|---|---|\n| 1 | 10.2 | 98 |\n| 16 | 25.3 | 632 |\n\n"
                    "We're ~40x below the 1000 tok/s target. Scaling from 1 → 16 streams only gives 2.5x, so decode is compute-bound in "
                    "some kernel rather than latency-bound. I'll go through the usual levers one at a time, measuring c16 output "
                    "throughput after each: FP8 block-GEMM tuning, NCCL settings, CUDA graphs, indexer fusion, MoE backend, expert parallelism.",
                    think="Plan the levers. Measure each at c16 against 25.3.")

    def fp8_tuning(self) -> None:
        s = self.s
        s.bash(f"ssh {HOST} 'grep -h \"Using default W8A8 Block FP8 kernel config\" /root/dsv4_decode.log | sort | uniq -c | head'",
               "      4 [2026-05-13 14:03:12 TP0] Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file not found at "
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/quantization/configs/N=4096,K=7168,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition,dtype=fp8_w8a8,block_shape=[128, 128].json\n"
               "      4 [2026-05-13 14:03:12 TP0] Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file not found at "
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/quantization/configs/N=7168,K=2048,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition,dtype=fp8_w8a8,block_shape=[128, 128].json",
               "Look for untuned FP8 kernel warnings", think="First lever: the FP8 block GEMMs run with default configs on this device name. Check the warnings.")
        s.bash(f"ssh {HOST} 'ls /root/sglang/benchmark/kernels/quantization/'",
               "README.md\nbench_fp4_quant.py\nbench_int8_quant.py\ntuning_block_wise_kernel.py",
               "Find tuning script", think="Use sglang's block-wise tuning script.")
        s.bash(f"ssh {HOST} 'cd /root/sglang && nohup python3 benchmark/kernels/quantization/tuning_block_wise_kernel.py --tp-size 4 --input-type fp8 --out-dtype bfloat16 --block-n 128 --block-k 128 > /root/fp8_tune.log 2>&1 & echo started'",
                     "started", "Start FP8 block GEMM tuning",
                     think="Tune all N,K shapes across all 8 GPUs. This takes a while.",
                     text="No tuned W8A8 block-FP8 configs exist for the RTX PRO 6000, so every FP8 GEMM uses the default tile config. Starting the block-wise tuner on all 8 GPUs (servers stopped during tuning).")
        shapes = ["N=4096,K=7168", "N=7168,K=2048", "N=1536,K=7168", "N=7168,K=1024", "N=2112,K=7168"]
        done = 0
        for i in range(34):
            if i == 16:
                s.user("status?", gap=170)
                s.hint(s.messages[-1].info["id"], "user_checkin")
            done = min(5, (i + 1) * 5 // 34)
            lines = [f"Start tuning over {len(shapes) * 18} configs per shape on 8 GPUs"]
            for k in range(done):
                lines.append(f"[{k % 8}] Finished tuning {shapes[k]}: best config BLOCK_SIZE_M=16, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4, num_stages={3 + k % 2}")
            pct = (i + 1) * 100 // 36
            lines.append(f" {pct}%|{'█' * (pct // 10)}{' ' * (10 - pct // 10)}| {(i + 1) * 12}/324 [{(i + 1) * 3 // 4:02d}:{(i + 1) * 45 % 60:02d}<{(35 - i) * 3 // 4:02d}:00]")
            text = None
            if i == 16:
                text = f"Tuning is about {pct}% through: {done} of 5 GEMM shapes finished, ~14 min to go. Nothing else to test while the GPUs are busy."
            s.bash(f"sleep 45; ssh {HOST} 'tail -{done + 2} /root/fp8_tune.log'", "\n".join(lines[-(done + 2):]),
                   "Check tuning progress", think=["Poll the tuner.", "Still tuning.", "Check progress.", "Next shape?"][i % 4] if i != 16 else "User asks for status. Check the tuner and report.",
                   text=text, dur=46.0)
        s.bash(f"ssh {HOST} 'tail -2 /root/fp8_tune.log; ls /root/sglang/python/sglang/srt/layers/quantization/configs/ | grep RTX_PRO_6000 | wc -l'",
               "Tuning finished in 1622.4 s (27.0 min); wrote 5 config files\n" + " 100%|██████████| 324/324 [27:02<00:00,  5.01s/it]\n5",
               "Tuning done?", think="Should be done now.", dur=2.0, gap=60)
        self.stop_servers("all")
        self.launch("/root/launch_prefill.sh", "prefill", "Relaunch both with the tuned configs picked up automatically.")
        self.launch("/root/launch_decode.sh", "decode", "Decode too.")
        self.boot_and_wait("decode", "/root/dsv4_decode.log", Boot(MODEL, port=30001, mem_frac=0.70, disagg="decode", pid=self.pid, rng_seed=13), checks=16, interval=15)
        s.bash(f"ssh {HOST} 'grep -c \"Using default W8A8 Block FP8\" /root/dsv4_decode.log /root/dsv4_prefill.log'",
               "/root/dsv4_decode.log:0\n/root/dsv4_prefill.log:0", "Confirm tuned configs are used", think="No more default-config warnings?")
        self.bench(16, 32, 26.8, 1790.0, think="Measure c16 with tuned FP8 GEMMs.")
        self.record("fp8_tuned", 16, 26.8)
        self.bench(1, 8, 10.8, 402.0, think="And c1 for completeness.")
        self.record("fp8_tuned", 1, 10.8)
        s.say("FP8 block-GEMM tuning: 25.3 → **26.8 tok/s** at c16 (+5.9%). 27 minutes of tuning for 6% — consistent with the FP8 GEMMs being "
              "a small share of decode time. Keeping it. Next: NCCL protocol/algorithm.",
              think="Small gain. Keep configs.")

    def nccl(self) -> None:
        s = self.s
        s.bash(f"ssh {HOST} 'grep -n NCCL /root/launch_decode.sh /root/launch_prefill.sh; echo; env | grep ^NCCL'", "", "Existing NCCL env",
               think="All-reduce over PCIe on TP4. Try NCCL_PROTO=LL with Ring; small messages at decode should like LL.", exit=1)
        for role, gpus, numa, port, mem in (("prefill", "0,1,2,3", 0, 30000, 0.80), ("decode", "4,5,6,7", 1, 30001, 0.70)):
            self.write_script(f"/root/launch_{role}.sh",
                              _launch_script(role, gpus=gpus, numa=numa, port=port, mem=mem, log=f"/root/dsv4_{role}.log",
                                             env="export NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_DEBUG=INFO"),
                              f"Add NCCL_PROTO=LL NCCL_ALGO=Ring to the {role} script.")
        self.stop_servers("all")
        self.launch("/root/launch_prefill.sh", "prefill", "Relaunch with NCCL env.")
        self.launch("/root/launch_decode.sh", "decode", "Decode.")
        self.boot_and_wait("decode", "/root/dsv4_decode.log", Boot(MODEL, port=30001, mem_frac=0.70, disagg="decode", pid=self.pid, rng_seed=14), checks=16, interval=15)
        s.bash(f"ssh {HOST} 'grep -m2 \"NCCL INFO\" /root/dsv4_decode.log | grep -E \"Algo|Proto\"'",
               "bw8:52211:52211 [0] NCCL INFO NCCL_PROTO set by environment to LL\nbw8:52211:52211 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
               "Verify NCCL env applied", think="Make sure NCCL actually picked them up.")
        self.bench(16, 32, 26.6, 1805.0, think="Bench c16 with LL+Ring.")
        self.record("nccl_ll_ring", 16, 26.6)
        self.bench(1, 8, 10.7, 405.0, think="c1 with LL+Ring; small messages are where LL should matter most.")
        self.record("nccl_ll_ring", 1, 10.7)
        s.say("NCCL LL + Ring: **26.6 tok/s** vs 26.8 — within noise (−0.7%). All-reduce is not where decode time goes. "
              "Reverting to NCCL defaults to keep the config simple.", think="No effect.")
        for role, gpus, numa, port, mem in (("prefill", "0,1,2,3", 0, 30000, 0.80), ("decode", "4,5,6,7", 1, 30001, 0.70)):
            self.write_script(f"/root/launch_{role}.sh",
                              _launch_script(role, gpus=gpus, numa=numa, port=port, mem=mem, log=f"/root/dsv4_{role}.log"),
                              f"Revert the NCCL env in {role}.")

    def cuda_graphs(self) -> None:
        s = self.s
        s.user("what about cuda graphs? I remember those made a big difference on the K2.6 box", gap=240)
        s.bash(f"ssh {HOST} 'grep \"Decode batch\" /root/dsv4_decode.log | tail -2; grep -c \"Capture cuda graph end\" /root/dsv4_decode.log'",
               "\n".join(decode_batch(self.clock.t, running=16, tokens=20011 + 512 * i, usage=0.05, tput=26.4 + 0.2 * i) for i in range(2)) + "\n4",
               "Check CUDA graph status", think="Check whether decode already runs with graphs.")
        s.say("CUDA graphs are already on: the decode log reports `cuda graph: True` on every Decode batch line and all 4 ranks logged "
              "`Capture cuda graph end`. So that lever is not applicable here — launch overhead is already removed. "
              "Next on the list is the tilelang fused indexer.",
              think="Already enabled. Not applicable.")
        s.user("ok. I'm heading out, pick it up tomorrow. leave the servers running", gap=300)
        s.say("Will do. Servers stay up (FP8-tuned configs, default NCCL). Current best: 26.8 tok/s at c16.")

    def overnight(self) -> None:
        # next day resume, ~17.5 hours later
        s = self.s
        s.user("morning — back. let's continue with the indexer fusion thing", gap=17.4 * 3600)
        s.bash(f"ssh {HOST} 'uptime; pgrep -fa sglang.launch_server | cut -c1-120'",
               " 07:31:20 up 6 days, 19:02,  2 users,  load average: 3.10, 3.05, 3.01\n"
               f"{self.pid - 911} python3 -m sglang.launch_server --model-path {MODEL} --trust-remote-code --tp 4 --disaggregation-mode prefill\n"
               f"{self.pid} python3 -m sglang.launch_server --model-path {MODEL} --trust-remote-code --tp 4 --disaggregation-mode decode",
               "Check servers survived the night", think="Resume: confirm both servers are alive.")

    def tilelang(self) -> None:
        s = self.s
        s.bash(f"ssh {HOST} 'grep -rn \"SGLANG_NSA_FUSE_TOPK\\|tilelang\" /usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/*.py | head -8'",
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/nsa_indexer.py:31:from sglang.srt.layers.attention.nsa.tilelang_kernel import act_quant, fp8_index\n"
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/nsa_indexer.py:58:_FUSE_TOPK = get_bool_env_var(\"SGLANG_NSA_FUSE_TOPK\", \"false\")\n"
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/nsa_indexer.py:402:        if _FUSE_TOPK and self.use_tilelang:\n"
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/tilelang_kernel.py:1:import tilelang\n"
               "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/tilelang_kernel.py:12:tilelang.set_log_level(\"WARNING\")",
               "Find indexer fusion switch", think="The fused indexer path is gated by an env var and uses tilelang kernels.")
        s.bash(f"ssh {HOST} \"sed -i 's/^export CUDA_VISIBLE_DEVICES=4,5,6,7$/export CUDA_VISIBLE_DEVICES=4,5,6,7\\nexport SGLANG_NSA_FUSE_TOPK=1/' /root/launch_decode.sh; grep -n export /root/launch_decode.sh\"",
               "2:export CUDA_VISIBLE_DEVICES=4,5,6,7\n3:export SGLANG_NSA_FUSE_TOPK=1", "Enable fused indexer on decode",
               think="Enable on decode only; that's where the time is.")
        self.stop_servers("decode")
        self.launch("/root/launch_decode.sh", "decode", "Relaunch decode with the fused indexer.")
        s.bash(f"sleep 150; ssh {HOST} 'grep -A14 Traceback /root/dsv4_decode.log | head -24'",
               "[2026-05-14 07:38:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
               '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/tilelang_kernel.py", line 188, in fp8_index\n'
               "    kernel = fp8_index_kernel(q.shape[2], q.shape[3])\n"
               '  File "/usr/local/lib/python3.12/dist-packages/tilelang/jit/__init__.py", line 201, in __call__\n'
               "    kernel = self.compile(*args, **kwargs)\n"
               '  File "/usr/local/lib/python3.12/dist-packages/tilelang/jit/adapter/libgen.py", line 130, in compile_lib\n'
               "    raise RuntimeError(f\"Compilation Failed! {command}\\n {source}\")\n"
               "RuntimeError: Compilation Failed! ['nvcc', '-std=c++17', '-O3', '--use_fast_math', '-arch=sm_120a', ...]\n"
               "/tmp/tmpk2v0r7ql/kernel.cu(84): error: Feature 'wgmma.mma_async' requires .target sm_90a\n"
               "ptxas fatal   : Ptx assembly aborted due to errors\n"
               "\n[2026-05-14 07:38:02] Received sigquit from a child process. It usually means the child failed.",
               "Check decode startup", think="Wait for decode to load and see if the tilelang kernels JIT.", dur=151)
        s.hint(s.messages[-1].info["id"], "error")
        s.bash(f"ssh {HOST} 'python3 -c \"import tilelang; print(tilelang.__version__)\"; pip show tilelang 2>/dev/null | grep -i version'",
               "0.1.6.post1\nVersion: 0.1.6.post1", "tilelang version", think="Is there a newer tilelang with sm_120 support?")
        s.bash(f"ssh {HOST} 'pip download tilelang==0.1.7 --no-deps -d /tmp/tl 2>&1 | tail -2'",
               "ERROR: Could not find a version that satisfies the requirement tilelang==0.1.7 (from versions: 0.1.0, 0.1.1, 0.1.2, 0.1.3, 0.1.4, 0.1.5, 0.1.6, 0.1.6.post1)\n"
               "ERROR: No matching distribution found for tilelang==0.1.7", "Look for newer tilelang", exit=1,
               think="Try a newer wheel.")
        s.user("any luck?", gap=420)
        s.hint(s.messages[-1].info["id"], "user_checkin")
        mid = s.say("No. The fused indexer fails to JIT-compile on this GPU: the tilelang `fp8_index` kernel is written with Hopper "
                    "`wgmma.mma_async` instructions, and nvcc rejects them for `sm_120a` (\"requires .target sm_90a\"). There is no "
                    "newer tilelang release with an sm_120 path. So indexer fusion is **failed / not available on sm_120**. "
                    "Reverting decode to the unfused indexer.",
                    think="wgmma is sm_90a only; consumer Blackwell has no wgmma. Cannot fix by flags.")
        s.hint(mid, "diagnosis")
        s.bash(f"ssh {HOST} \"sed -i '/SGLANG_NSA_FUSE_TOPK/d' /root/launch_decode.sh; grep -c FUSE /root/launch_decode.sh\"", "0",
               "Revert fused indexer", exit=1, think="Remove the env line.")

    def moe_backends(self) -> None:
        s = self.s
        s.bash(f"ssh {HOST} 'grep -m3 -i \"moe\" /root/dsv4_decode.log | cut -c1-200'",
               "[2026-05-14 07:36:40 TP0] Using MoE runner backend: marlin (MXFP4 experts, sm_120)\n"
               "[2026-05-14 07:36:40 TP0] MoE A2A backend: none",
               "Which MoE backend is used", think="Experts are FP4 and run through Marlin. Check alternatives: triton, flashinfer_cutlass.")
        for backend, err in (
            ("triton", "ValueError: moe_runner_backend='triton' does not support MXFP4 weights on sm_120; supported: ['marlin']"),
            ("flashinfer_cutlass", "AssertionError: flashinfer_cutlass MoE with FP4 weights requires SM100 (got compute capability 12.0)"),
        ):
            s.bash(f"ssh {HOST} \"sed -i 's/--mem-fraction-static 0.70 \\\\\\\\/--mem-fraction-static 0.70 --moe-runner-backend {backend} \\\\\\\\/' /root/launch_decode.sh; grep -n moe-runner /root/launch_decode.sh\"",
                   f"7:  --disaggregation-ib-device mlx5_1 --mem-fraction-static 0.70 --moe-runner-backend {backend} \\",
                   f"Set MoE backend {backend}", think=f"Try --moe-runner-backend {backend}.")
            self.stop_servers("decode")
            self.launch("/root/launch_decode.sh", "decode", f"Relaunch decode with {backend}.")
            mid = s.bash(f"sleep 40; ssh {HOST} 'grep -B3 -A1 Error /root/dsv4_decode.log | tail -5'",
                         f'  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/quantization/mxfp4.py", line 311, in create_moe_runner\n'
                         f"    self.runner = MoeRunner(self.moe_runner_config, backend)\n{err}\n"
                         f"[2026-05-14 08:0{2 if backend == 'triton' else 6}:31] Received sigquit from a child process. It usually means the child failed.",
                         "Check decode startup", think="Did it come up?", dur=41)
            s.hint(mid, "error")
        s.bash(f"ssh {HOST} \"sed -i 's/ --moe-runner-backend flashinfer_cutlass//' /root/launch_decode.sh\"", "", "Revert MoE backend flag",
               think="Revert.")
        s.say("Non-Marlin MoE backends are out: `triton` rejects MXFP4 weights on sm_120 and `flashinfer_cutlass` FP4 MoE needs SM100. "
              "Both fail at startup, so Marlin is the only valid FP4-expert path here. **Failed** lever, reverted.")

    def expert_parallel(self) -> None:
        s = self.s
        s.say("Next: expert parallelism. EP needs the experts spread over all 8 GPUs, so for this test I'll stop the PD pair and run a "
              "single TP8/EP8 server on :30000, benchmark c16 directly against it, and compare with the 26.8 tok/s PD number.",
              think="EP8 means a single 8-GPU server. All-to-all over PCIe might hurt.")
        self.stop_servers("all")
        self.write_script("/root/launch_ep8.sh",
                          "#!/bin/bash\npython3 -m sglang.launch_server --model-path /models/DeepSeek-V4-Flash --trust-remote-code \\\n"
                          "  --tp 8 --ep-size 8 --mem-fraction-static 0.80 --host 0.0.0.0 --port 30000 > /root/dsv4_ep8.log 2>&1",
                          "Single server with --tp 8 --ep-size 8.")
        self.launch("/root/launch_ep8.sh", "ep8", "Launch EP8.")
        self.boot_and_wait("ep8", "/root/dsv4_ep8.log", Boot(MODEL, tp=8, ep=8, port=30000, weights_gb=18.7, mem_frac=0.80, pid=self.pid, rng_seed=15), checks=16, interval=15)
        self.bench(16, 32, 17.6, 2210.0, think="Bench EP8 at c16 directly on :30000.", port=30000)
        self.record("ep8", 16, 17.6)
        self.bench(1, 8, 7.9, 520.0, think="c1 on EP8 too.", port=30000)
        self.record("ep8", 1, 7.9)
        s.bash(f"ssh {HOST} 'nvidia-smi dmon -s t -c 3 -i 0'",
               "# gpu   rxpci   txpci \n# Idx    MB/s    MB/s \n    0   11842   12019 \n    0   11907   11988 \n    0   11861   12034 ",
               "PCIe traffic during EP8", think="Check PCIe traffic on GPU0 during the run.")
        mid = s.say("EP8 is **worse**: 17.6 tok/s vs 26.8 (−34%). GPU0 moves ~12 GB/s each way over PCIe during decode; without NVLink the "
                    "dispatch/combine all-to-all for every MoE layer costs more than the smaller per-GPU expert GEMMs save. Reverting to the PD "
                    "pair (TP4 + TP4).", think="PCIe all-to-all dominates.")
        s.hint(mid, "diagnosis")
        s.bash(f"ssh {HOST} 'pkill -f launch_ep8; sleep 10; setsid nohup bash /root/launch_prefill.sh >/dev/null 2>&1 < /dev/null & setsid nohup bash /root/launch_decode.sh >/dev/null 2>&1 < /dev/null & echo ok'",
               "ok", "Restore PD servers", think="Back to PD.", dur=11)
        s.hint(s.messages[-1].info["id"], "launch")
        self.boot_and_wait("decode", "/root/dsv4_decode.log", Boot(MODEL, port=30001, mem_frac=0.70, disagg="decode", pid=self.pid + 40, rng_seed=16), checks=16, interval=15)
        self.bench(16, 32, 26.7, 1795.0, think="Sanity check that the restored PD pair is back at ~26.8.")
        self.record("restored_pd", 16, 26.7)

    def profile(self) -> None:
        s = self.s
        s.user("everything so far is a few percent. where does the decode time actually go? profile it", gap=600)
        s.bash(f"ssh {HOST} 'curl -s -X POST localhost:30001/start_profile -H \"Content-Type: application/json\" -d \"{{\\\"output_dir\\\":\\\"/root/prof\\\",\\\"num_steps\\\":30,\\\"activities\\\":[\\\"GPU\\\"]}}\"'",
               "Start profiling.", "Start torch profiler on decode", think="Profile 30 decode steps at c16 on the decode server.")
        self.bench(16, 16, 26.5, 1800.0, think="Drive load while the profiler records.")
        s.bash(f"ssh {HOST} 'ls -la /root/prof | tail -4'",
               "-rw-r--r-- 1 root root 418233112 May 14 15:12 1778771543.1904-TP-0.trace.json.gz\n"
               "-rw-r--r-- 1 root root 417901220 May 14 15:12 1778771543.1904-TP-1.trace.json.gz\n"
               "-rw-r--r-- 1 root root 418106873 May 14 15:12 1778771543.1905-TP-2.trace.json.gz\n"
               "-rw-r--r-- 1 root root 418000554 May 14 15:12 1778771543.1905-TP-3.trace.json.gz",
               "List traces", think="Traces written.")
        table = ("kernel                                                   share   total_ms    calls\n"
                 "_tiled_sparse_decode_kernel                              63.1%   11873.4     1290\n"
                 "fused_moe_marlin_mxfp4_kernel                            14.8%    2784.9     2580\n"
                 "_w8a8_block_fp8_matmul                                    6.0%    1129.0     5160\n"
                 "nsa_indexer_topk_kernel                                   5.2%     978.4     1290\n"
                 "ncclDevKernel_AllReduce_Sum_bf16_RING_LL                  2.1%     395.1     2580\n"
                 "rmsnorm / rope / act (elementwise)                        4.9%     922.0    18060\n"
                 "other                                                     3.9%     733.8        -")
        s.bash("ssh bw8 'python3 /root/tools/trace_summary.py /root/prof/*TP-0.trace.json.gz --top 7'", table, "Summarize kernel time",
               think="Summarize GPU kernel time by name for rank 0.", dur=48)
        s.bash(f"ssh {HOST} 'grep -n \"def _tiled_sparse_decode_kernel\" -A12 /usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/nsa/triton_sparse_decode.py | head -16'",
               "41:def _tiled_sparse_decode_kernel(\n42-    Q, KV, TopkIdx, Out, sm_scale,\n43-    stride_qb, stride_qh, stride_kvt,\n44-    TOPK: tl.constexpr, BLOCK_T: tl.constexpr, HEAD_DIM: tl.constexpr,\n"
               "45-):\n46-    bid = tl.program_id(0)  # batch\n47-    hid = tl.program_id(1)  # head\n48-    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)\n"
               "49-    for t0 in range(0, TOPK, BLOCK_T):  # serial over all top-k tokens\n50-        idx = tl.load(TopkIdx + bid * TOPK + t0 + tl.arange(0, BLOCK_T))\n"
               "51-        kv = tl.load(KV + idx[:, None] * stride_kvt + tl.arange(0, HEAD_DIM)[None, :])",
               "Read the sparse decode kernel", think="63% in one Triton kernel. Read its grid.")
        mid = s.say("Root cause found. **63% of decode time is one kernel, `_tiled_sparse_decode_kernel`** — the Triton fallback for sparse "
                    "MLA attention that sglang uses on sm_120. Its grid is (batch × heads): at bs=1 that is 64 programs on ~188 SMs, and each "
                    "program walks all 512 top-k tokens serially. It leaves most of the GPU idle, and that is why concurrency 1 → 16 only gave "
                    "2.5x. The fast fused DSA path (FlashMLA sparse / DeepGEMM / trtllm-gen) is gated to SM90/SM100 and does not run on "
                    "consumer Blackwell.\n\nThat explains the levers so far: FP8 GEMMs are 6% of decode (hence +6%), NCCL is 2% (hence no effect). "
                    "The real fix is a split-K / flash-decoding version of that kernel. Before writing kernels, the cheapest lever that attacks "
                    "per-token cost is MTP: the checkpoint ships a NextN layer, so each verify step amortizes the sparse attention over ~2 tokens.",
                    think="The kernel launches batch*heads programs, serial over top-k. Low occupancy on sm_120. Same pathology as the K2.6 verify kernel.")
        s.hint(mid, "diagnosis")
        s.user("makes sense. try MTP", gap=180)

    def mtp(self) -> None:
        s = self.s
        # afternoon gap on day 2 (user away) then MTP attempt around 19:50
        s.bash(f"ssh {HOST} 'grep -n speculative /usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py | grep -i nextn | head -4'",
               '1841:        if self.speculative_algorithm == "NEXTN":\n1842:            self.speculative_algorithm = "EAGLE"\n'
               '1857:                "NEXTN requires --speculative-draft-model-path or a checkpoint with num_nextn_predict_layers > 0"\n'
               "1902:            choices=[\"EAGLE\", \"EAGLE3\", \"NEXTN\", \"STANDALONE\", \"NGRAM\"],",
               "Check NEXTN handling", think="NEXTN maps to EAGLE with the built-in MTP layer.")
        spec = "--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3"
        body = _launch_script("decode", gpus="4,5,6,7", numa=1, port=30001, mem=0.70, log="/root/dsv4_mtp.log", extra=spec)
        self.write_script("/root/launch_mtp.sh", body, "Decode with NEXTN: 2 steps, topk 1, 3 draft tokens. Keep 0.70 for now.")
        self.stop_servers("decode")
        self.clock.advance(3 * 3600 + 1500 + 22914)  # user away in the afternoon; this relaunch happens in the evening
        self.launch("/root/launch_mtp.sh", "decode (MTP)", "Launch MTP decode.", text="Launching the decode server with MTP (NEXTN).")
        self.boot_and_wait("decode", "/root/dsv4_mtp.log",
                           Boot(MODEL, port=30001, mem_frac=0.70, disagg="decode", spec=True, pid=self.pid, rng_seed=17),
                           checks=3, interval=90, fail="draft_oom")
        s.hint(s.messages[-1].info["id"], "error")
        s.bash(f"ssh {HOST} 'grep -E \"KV Cache is allocated|Memory pool end|Capture cuda graph end|Capture draft cuda graph begin\" /root/dsv4_mtp.log | grep TP0'",
               "\n".join(x for x in self.last_log.text().splitlines() if "TP0]" in x and any(
                   k in x for k in ("KV Cache is allocated", "Memory pool end", "Capture cuda graph end", "Capture draft cuda graph begin"))),
               "Memory budget before the OOM", think="Compute the memory budget.")
        mid = s.say("MTP crashed with CUDA OOM while capturing the **draft** CUDA graphs (TP2: tried to allocate 2.50 GiB, 1.07 GiB free). "
                    "With speculative decoding the graph runner captures draft and verify graphs, each with (1 + draft tokens) × bs rows, "
                    "so the graph pools roughly double; at `--mem-fraction-static 0.70` the KV pool took what they needed.\n\n"
                    "Budget per GPU (95 GB): weights ~36.6 GB; at 0.60 the static pool is ~57 GB, leaving ~21 GB of KV — plenty for 1k/256 "
                    "benchmarks — and ~38 GB outside the pool for draft+verify graphs (~20 GB) and activations. Capping `--cuda-graph-max-bs 16` "
                    "(we bench at c16) halves the number of graphs. Rewriting the launch script with both.",
                    think="The NEXTN layer loaded successfully, but the CUDA graph capture for the speculative decoding path is hitting memory limits "
                          "because it needs to capture graphs for both draft and verify steps with the extended sequence length from the draft tokens, "
                          "effectively doubling the memory requirements. At 0.60, the KV pool shrinks but that's acceptable for short context windows. "
                          "The weights are around 36GB, so with 0.60 memory fraction I'd have roughly 21GB for the KV pool plus the 20GB needed for "
                          "CUDA graphs, which should fit within the 95GB limit.")
        s.hint(mid, "diagnosis")
        body = _launch_script("decode", gpus="4,5,6,7", numa=1, port=30001, mem=0.60, log="/root/dsv4_mtp.log",
                              extra=spec + " --cuda-graph-max-bs 16")
        s.bash(f"ssh {HOST} 'pkill -f launch_mtp; sleep 5'; ssh {HOST} \"cat > /root/launch_mtp.sh\" <<'EOF'\n{body}\nEOF\n"
               f"ssh {HOST} 'setsid nohup bash /root/launch_mtp.sh > /dev/null 2>&1 < /dev/null & echo $!'",
               str(self.next_pid()), "Rewrite MTP launch script and relaunch",
               think="Rewrite with 0.60 and max bs 16, relaunch.", dur=6.3)
        s.hint(s.messages[-1].info["id"], "launch")
        # The polling loop of the case study; the user aborts it.
        start = self.clock.t
        from datetime import timedelta
        L = sglang_boot(start + timedelta(seconds=3), Boot(MODEL, port=30001, mem_frac=0.60, max_bs=16, disagg="decode", spec=True,
                                                           pid=self.pid, rng_seed=18))
        t = L.end()
        for k in range(40):
            t = L.add(5.0, access(t + timedelta(seconds=5), "/health", 40312 + k))
        loop = (f"for i in $(seq 1 16); do\n  sleep 25\n  r=$(timeout 10 ssh {HOST} 'tail -1 /root/dsv4_mtp.log' 2>/dev/null)\n"
                "  echo \"[$((i*25))s] ${r: -85}\"\n  echo \"$r\" | grep -qiE \"fired up|ready to roll\" && { echo READY; break; }\n"
                "  echo \"$r\" | grep -qiE \"Traceback|out of memory|Killed|kill_process_tree\" && { echo ERR; break; }\ndone")
        lines = []
        for i in range(1, 14):
            r = L.tail(1, start + timedelta(seconds=6.3 + 25 * i + 0.4 * i))
            lines.append(f"[{i * 25}s] {r[-85:]}")
        mid = s.bash(loop, "\n".join(lines), "Poll MTP server startup", think="Poll the log every 25 s until ready or an error signature.",
                     dur=25 * 13 + 9.5, aborted=True)
        s.hint(mid, "polling_loop", "user_abort", note="aborted tool part: status error / Tool execution aborted / metadata.interrupted")
        s.user("ok?", gap=6)
        s.hint(s.messages[-1].info["id"], "user_checkin")
        out = "\n".join(line for line in L.upto(self.clock.t)
                        if any(k in line for k in ("Capture draft cuda graph", "Capture cuda graph end", "fired up", "KV Cache is allocated")) and "TP0" in line or "fired up" in line)
        s.bash(f"ssh {HOST} 'grep -E \"KV Cache is allocated|Capture cuda graph end|Capture draft cuda graph|fired up\" /root/dsv4_mtp.log | grep -v \"TP[123]\"; "
               "curl -s -o /dev/null -w \"health_generate %{http_code}\\n\" -m 30 localhost:30001/health_generate'",
               out + "\nhealth_generate 200", "Verify MTP server state",
               think="The tail -1 only ever showed health-check lines at the end, so the loop could not see the ready line. Check the log properly.")
        mid = s.say("Yes — the MTP decode server is up. The log has `Capture draft cuda graph end` and `The server is fired up and ready to roll!`, "
                    "and `/health_generate` returns 200 (a real 1-token generation). My loop missed it because `tail -1` only showed the "
                    "router's `/health` probes once the server was up. Benchmarking MTP at c16 now.",
                    think="Ready. The polling loop was broken by the health-check spam.")
        s.hint(mid, "readiness_claim", note="supported: ready line + health_generate 200")
        s.bash(f"ssh {HOST} 'curl -s -m 60 localhost:8000/v1/chat/completions -H \"Content-Type: application/json\" -d \"{{\\\"model\\\":\\\"{MODEL}\\\",\\\"messages\\\":[{{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"List three prime numbers.\\\"}}],\\\"max_tokens\\\":32}}\" | python3 -c \"import json,sys; print(json.load(sys.stdin)[\\\"choices\\\"][0][\\\"message\\\"][\\\"content\\\"])\"'",
               "2, 3, and 5.", "Smoke test MTP via router", think="Quick sanity generation through the router before the benchmark.", dur=2.4)
        s.hint(s.messages[-1].info["id"], "smoke_test")
        self.bench(16, 32, 29.4, 1710.0, accept=1.81, think="c16 with MTP.")
        self.record("mtp_nextn", 16, 29.4)
        self.bench(1, 8, 16.4, 395.0, accept=1.84, think="MTP at c1: speculative decoding helps most at low batch.")
        self.record("mtp_nextn", 1, 16.4)
        s.bash(f"ssh {HOST} 'grep \"Decode batch\" /root/dsv4_mtp.log | tail -3'",
               "\n".join(decode_batch(self.clock.t, running=16, tokens=21040 + 600 * i, usage=0.09, tput=29.1 + 0.3 * i, accept=1.78 + 0.03 * i) for i in range(3)),
               "MTP decode stats", think="Server-side accept length.")
        s.say("MTP at c16: 29.4 tok/s with accept length 1.81 (c1: 16.4 tok/s). Trying the draft depth next.")
        s.user("try deeper drafts too — 3 steps / 4 draft tokens, and the shallow 1/2 one", gap=210)
        for steps, drafts, tput, acc, seed in ((3, 4, 28.7, 2.05, 19), (1, 2, 27.9, 1.55, 20)):
            spec_v = f"--speculative-algorithm NEXTN --speculative-num-steps {steps} --speculative-eagle-topk 1 --speculative-num-draft-tokens {drafts}"
            body_v = _launch_script("decode", gpus="4,5,6,7", numa=1, port=30001, mem=0.60, log="/root/dsv4_mtp.log",
                                    extra=spec_v + " --cuda-graph-max-bs 16")
            self.write_script("/root/launch_mtp.sh", body_v, f"MTP variant: {steps} steps, {drafts} draft tokens.")
            self.stop_servers("decode")
            self.launch("/root/launch_mtp.sh", "decode (MTP)", f"Relaunch MTP {steps}/{drafts}.")
            self.boot_and_wait("decode", "/root/dsv4_mtp.log",
                               Boot(MODEL, port=30001, mem_frac=0.60, max_bs=16, disagg="decode", spec=True, pid=self.pid, rng_seed=seed))
            self.bench(16, 32, tput, 1720.0, accept=acc, think=f"c16 with {steps}/{drafts}.")
            self.record(f"mtp_{steps}_{drafts}", 16, tput)
        s.say("Deeper drafts (3/4): accept 2.05 but 28.7 tok/s — each verify pass is a bigger sparse-attention step. Shallow (1/2): accept 1.55, "
              "27.9 tok/s. The 2/3 setting stays best; switching back to it.", think="2/3 is the sweet spot.")
        body_b = _launch_script("decode", gpus="4,5,6,7", numa=1, port=30001, mem=0.60, log="/root/dsv4_mtp.log",
                                extra=spec + " --cuda-graph-max-bs 16")
        self.write_script("/root/launch_mtp.sh", body_b, "Back to 2/3.")
        self.stop_servers("decode")
        self.launch("/root/launch_mtp.sh", "decode (MTP)", "Relaunch best MTP config.")
        self.boot_and_wait("decode", "/root/dsv4_mtp.log",
                           Boot(MODEL, port=30001, mem_frac=0.60, max_bs=16, disagg="decode", spec=True, pid=self.pid, rng_seed=21))
        for conc, tput in ((4, 21.2), (8, 26.0)):
            self.bench(conc, conc * 4, tput, 900.0, accept=1.8, think=f"Fill in the MTP curve at concurrency {conc}.")
            self.record("mtp_nextn", conc, tput)
        s.say("MTP result at c16: **29.4 tok/s** (accept length 1.81) vs 26.8 → +9.7% (+16% over the original 25.3 baseline).\n\n"
              "Campaign so far (c16 output tok/s):\n\n| lever | result | outcome |\n|---|---|---|\n"
              "| baseline | 25.3 | — |\n| FP8 block-GEMM tuning (27 min) | 26.8 | +5.9% improved |\n| NCCL LL+Ring | 26.6 | no effect |\n"
              "| CUDA graphs | already on | not applicable |\n| tilelang indexer fusion | JIT fails on sm_120 | failed |\n"
              "| non-Marlin MoE backends | invalid for FP4 experts | failed |\n| EP8 | 17.6 | worse |\n| MTP (NEXTN) | 29.4 | +9.7% improved |\n\n"
              "We are still ~34x from 1000 tok/s. The profile says why: 63% of every decode step is `_tiled_sparse_decode_kernel`, the sm_120 "
              "Triton fallback. No flag moves that; the next step is a split-K sparse decode kernel (or hardware where the SM100 DSA path runs).",
              think="Summarize the campaign honestly.")
        s.user("great, thanks. put the table in /root/RESULTS.md and leave the MTP decode server running", gap=300)
        s.bash(f"ssh {HOST} 'column -s, -t /root/results.csv > /root/RESULTS.md; echo >> /root/RESULTS.md; "
               "echo \"profile: _tiled_sparse_decode_kernel 63.1% of decode (sm_120 Triton fallback)\" >> /root/RESULTS.md; wc -l /root/RESULTS.md'",
               "27 /root/RESULTS.md", "Write RESULTS.md", think="Write the table and the profile finding.")
        s.bash(f"ssh {HOST} 'pgrep -fa \"launch_mtp|disaggregation-mode prefill|sglang_router\" | cut -c1-90'",
               f"{self.pid - 3} bash /root/launch_mtp.sh\n{self.pid} python3 -m sglang.launch_server --model-path /models/DeepSeek-V4-Flash --trust-remote-code\n"
               f"{self.pid - 9120} python3 -m sglang.launch_server --model-path /models/DeepSeek-V4-Flash --trust-remote-code\n{self.pid - 9050} python3 -m sglang_router.launch_router --pd-disaggregation",
               "Confirm servers left running", think="Confirm what stays up.")
        s.say("Done: /root/RESULTS.md has the full table. Left running: prefill (GPUs 0-3), MTP decode 2/3 (GPUs 4-7, mem 0.60, max bs 16), router on :8000.")



def build() -> Result:
    return Campaign().run()
