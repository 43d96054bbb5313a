"""Makers for the tool output the samples show: SGLang/vLLM server logs, benchmark blocks,
nvidia-smi tables, torch OOM text. Strings follow /work/shared/reference/TOOLING.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# --------------------------------------------------------------------------- log timelines


@dataclass
class LogTimeline:
    """Lines a server wrote, each with the wall time it appeared; lets polls see a log 'so far'."""

    start: datetime
    lines: list[tuple[datetime, str]] = field(default_factory=list)
    t: float = 0.0  # seconds since start of the last line

    def add(self, after_s: float, line: str) -> datetime:
        self.t += after_s
        when = self.start + timedelta(seconds=self.t)
        for part in line.split("\n"):
            self.lines.append((when, part))
        return when

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    def upto(self, when: datetime) -> list[str]:
        return [line for t, line in self.lines if t <= when]

    def tail(self, n: int, when: datetime) -> str:
        return "\n".join(self.upto(when)[-n:])

    def end(self) -> datetime:
        return self.lines[-1][0] if self.lines else self.start

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def sg(t: datetime, rank: str | None = "TP0", ms: bool = False) -> str:
    """SGLang log prefix: `[2026-05-14 19:58:03 TP0] `."""
    stamp = t.strftime("%Y-%m-%d %H:%M:%S")
    if ms:
        stamp += f".{t.microsecond // 1000:03d}"
    return f"[{stamp} {rank}] " if rank else f"[{stamp}] "


class SGLangLog(LogTimeline):
    """An SGLang server log written line by line with correct prefixes."""

    def log(self, after_s: float, msg: str, rank: str | None = "TP0") -> datetime:
        when = self.start + timedelta(seconds=self.t + after_s)
        return self.add(after_s, sg(when, rank) + msg)

    def raw(self, after_s: float, line: str) -> datetime:
        return self.add(after_s, line)


@dataclass
class Boot:
    """Parameters of one SGLang server start."""

    model_path: str
    tp: int = 4
    port: int = 30000
    mem_frac: float = 0.80
    weights_gb: float = 36.6
    total_gb: float = 94.97
    shards: int = 46
    load_s: float = 112.0
    kv_dtype: str = "torch.bfloat16"
    mla: bool = True
    context_len: int = 163840
    max_bs: int = 32
    chunked: int = 8192
    max_running: int = 64
    spec: bool = False
    pid: int = 41822
    disagg: str | None = None  # prefill|decode
    ep: int = 1
    extra_args: str = ""
    graph_s: float = 41.0
    rng_seed: int = 0


def graph_bs_list(max_bs: int) -> list[int]:
    if max_bs <= 16:
        return [1, 2, 4] + list(range(6, max_bs + 1, 2))
    full = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160]
    return [b for b in full if b <= max_bs]


def sglang_boot(start: datetime, b: Boot, *, fail: str | None = None, ready: bool = True) -> SGLangLog:
    """A startup log up to `The server is fired up and ready to roll!` (or a failure).

    fail: None | "draft_oom" (OOM in draft CUDA graph capture) | "not_enough_memory".
    """
    rng = random.Random(b.rng_seed)
    L = SGLangLog(start)
    ranks = [f"TP{i}" for i in range(b.tp)] if b.tp > 1 else [None]
    if b.ep > 1:
        ranks = [f"TP{i} EP{i}" for i in range(b.tp)]
    r0 = ranks[0]
    L.log(0.0, (f"server_args=ServerArgs(model_path='{b.model_path}', tokenizer_path='{b.model_path}', "
                f"tokenizer_mode='auto', load_format='auto', trust_remote_code=True, dtype='auto', "
                f"kv_cache_dtype='auto', quantization=None, context_length=None, device='cuda', "
                f"served_model_name='{b.model_path}', chat_template=None, is_embedding=False, "
                f"host='0.0.0.0', port={b.port}, mem_fraction_static={b.mem_frac}, "
                f"max_running_requests={b.max_running}, max_total_tokens=None, "
                f"chunked_prefill_size={b.chunked}, max_prefill_tokens=16384, tp_size={b.tp}, "
                f"ep_size={b.ep}, random_seed={rng.randint(10**8, 10**9)}, "
                f"disaggregation_mode='{b.disagg or 'null'}', "
                f"speculative_algorithm={'NEXTN' if b.spec else None!r}, "
                f"cuda_graph_max_bs={b.max_bs}, disable_cuda_graph=False{b.extra_args})"), None)
    for r in ranks:
        L.log(rng.uniform(0.2, 1.5), "Init torch distributed begin.", r)
    for r in ranks:
        L.log(rng.uniform(0.5, 2.5), f"Init torch distributed ends. elapsed={rng.uniform(1.5, 4):.2f} s, mem usage={rng.uniform(0.5, 0.9):.2f} GB", r)
    avail0 = b.total_gb - 0.77
    for r in ranks:
        L.log(rng.uniform(0.3, 1.0), f"Load weight begin. avail mem={avail0 + rng.uniform(-0.05, 0.05):.2f} GB", r)
    for pct, k in ((0, 0), (24, b.shards * 24 // 100), (50, b.shards // 2), (78, b.shards * 78 // 100), (100, b.shards)):
        el = b.load_s * pct / 100
        L.raw(b.load_s * 0.25 if pct else 1.0,
              f"Loading safetensors checkpoint shards: {pct:>3}% Completed | {k}/{b.shards} "
              f"[{int(el) // 60:02d}:{int(el) % 60:02d}<{int(b.load_s - el) // 60:02d}:{int(b.load_s - el) % 60:02d}, "
              f"{b.load_s / b.shards:.2f}s/it]")
    L.raw(0.0, "")
    avail1 = avail0 - b.weights_gb
    for r in ranks:
        L.log(rng.uniform(0.5, 3.0), (f"Load weight end. elapsed={b.load_s + rng.uniform(0, 4):.2f} s, type=DeepseekV4ForCausalLM, "
                                      f"dtype=torch.bfloat16, avail mem={avail1 + rng.uniform(-0.1, 0.1):.2f} GB, "
                                      f"mem usage={b.weights_gb:.2f} GB.") if "DeepSeek" in b.model_path else
              f"Load weight end. type={b.model_path.rsplit('/', 1)[-1].split('-')[0]}ForCausalLM, dtype=torch.bfloat16, avail mem={avail1:.2f} GB, mem usage={b.weights_gb:.2f} GB.", r)
    if fail == "not_enough_memory":
        L.raw(1.2, f"{sg(L.at(L.t + 1.2), r0)}Scheduler hit an exception: Traceback (most recent call last):")
        L.raw(0.0, '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2874, in run_scheduler_process')
        L.raw(0.0, "    scheduler = Scheduler(")
        L.raw(0.0, '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 1712, in init_memory_pool')
        L.raw(0.0, '    raise RuntimeError(')
        L.raw(0.0, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
        L.raw(0.4, "")
        L.log(0.1, "Received sigquit from a child process. It usually means the child failed.", None)
        return L
    frac_pool = b.total_gb * b.mem_frac - b.weights_gb - (6.0 if b.spec else 0.0)
    kv_gb = max(frac_pool, 1.5)
    tokens = int(kv_gb * 1e9 / (70272 if b.mla else 131072)) // 64 * 64
    kv_text = f"KV size: {kv_gb:.2f} GB" if b.mla else f"K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB"
    for r in ranks:
        L.log(rng.uniform(0.2, 0.8), f"KV Cache is allocated. #tokens: {tokens}, {kv_text}", r)
    avail2 = avail1 - kv_gb - (b.weights_gb * 0.06 if b.spec else 0.0)
    L.log(0.3, f"Memory pool end. avail mem={avail2:.2f} GB", r0)
    _graph_capture(L, rng, "cuda", b.max_bs, avail2 - 0.6, b.graph_s, r0, ranks)
    avail3 = avail2 - 0.6 - 1.9
    if b.spec:
        L.log(1.1, f"Capture draft cuda graph begin. This can take up to several minutes. avail mem={avail3:.2f} GB", r0)
        if fail == "draft_oom":
            bs = graph_bs_list(b.max_bs)
            L.raw(2.5, f"Capturing batches (bs={bs[-1]} avail_mem={avail3 - 0.2:.2f} GB):   0%|          | 0/{len(bs)} [00:00<?, ?it/s]")
            L.raw(6.0, f"Capturing batches (bs={bs[-2]} avail_mem={avail3 - 1.4:.2f} GB):  12%|█▎        | 1/{len(bs)} [00:06<00:42,  6.03s/it]")
            _draft_oom(L, r0, avail3)
            return L
        _graph_capture(L, rng, "draft cuda", b.max_bs, avail3, b.graph_s * 0.7, r0, ranks, bar=True)
        avail3 -= 1.2
        L.log(0.8, f"Capture draft extend cuda graph begin. This can take up to several minutes. avail mem={avail3:.2f} GB", r0)
        L.log(b.graph_s * 0.4, f"Capture draft extend cuda graph end. Time elapsed: {b.graph_s * 0.4:.2f} s. mem usage=0.71 GB. avail mem={avail3 - 0.71:.2f} GB.", r0)
    L.log(0.6, (f"max_total_num_tokens={tokens}, chunked_prefill_size={b.chunked}, max_prefill_tokens=16384, "
                f"max_running_requests={b.max_running}, context_len={b.context_len}, available_gpu_mem={avail3:.2f} GB"), r0)
    L.log(1.8, f"INFO:     Started server process [{b.pid}]", None)
    L.log(0.0, "INFO:     Waiting for application startup.", None)
    L.log(0.0, "INFO:     Application startup complete.", None)
    L.log(0.0, f"INFO:     Uvicorn running on http://0.0.0.0:{b.port} (Press CTRL+C to quit)", None)
    if not ready:
        return L
    L.log(1.0, f'INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "GET /model_info HTTP/1.1" 200 OK', None)
    if b.disagg:
        L.log(0.1, "Start of pd disaggregation warmup ...", None)
    L.log(0.2, "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ", r0)
    if b.disagg == "prefill":
        L.log(2.4, 'End of prefill disaggregation mode warmup with status 200, resp: [{"text": "%", "output_ids": [4], "meta_info": {"id": "d41f0c2a", "finish_reason": {"type": "length", "length": 0}}}]', None)
    L.log(2.6, f'INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "POST /generate HTTP/1.1" 200 OK', None)
    L.log(0.0, "The server is fired up and ready to roll!", None)
    return L


def _graph_capture(L: SGLangLog, rng: random.Random, kind: str, max_bs: int, avail: float,
                   secs: float, r0: str | None, ranks: list, bar: bool = True) -> None:
    bs = graph_bs_list(max_bs)
    title = "Capture cuda graph" if kind == "cuda" else "Capture draft cuda graph"
    if kind == "cuda":
        L.log(1.0, f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", r0)
        L.log(0.1, f"Capture cuda graph bs {bs}", r0)
    n = len(bs)
    step = secs / n
    for i, b in enumerate(reversed(bs)):
        pct = int(100 * i / n)
        fill = "█" * (pct // 10) + (" " * (10 - pct // 10))
        el = int(step * i)
        L.raw(step if i else 1.5,
              f"Capturing batches (bs={b} avail_mem={avail - 0.05 * i:.2f} GB): {pct:>3}%|{fill}| {i}/{n} "
              f"[{el // 60:02d}:{el % 60:02d}<{int(step * (n - i)) // 60:02d}:{int(step * (n - i)) % 60:02d}, {step:.2f}s/it]")
    L.raw(step, f"Capturing batches (bs=1 avail_mem={avail - 0.05 * n:.2f} GB): 100%|██████████| {n}/{n} "
                f"[{int(secs) // 60:02d}:{int(secs) % 60:02d}<00:00, {step:.2f}s/it]")
    L.log(0.4, f"{title} end. Time elapsed: {secs + rng.uniform(0.5, 2):.2f} s. mem usage={1.9 if kind == 'cuda' else 1.2:.2f} GB. avail mem={avail - 1.9:.2f} GB.", r0)


def _draft_oom(L: SGLangLog, r0: str | None, avail: float) -> None:
    rank = "TP2"
    L.raw(3.9, sg(L.at(L.t + 3.9), rank) + "Scheduler hit an exception: Traceback (most recent call last):")
    for line in (
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py", line 117, in __init__',
        "    self.capture()",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 588, in capture',
        "    ) = self.capture_one_batch_size(bs, forward)",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186, in __exit__',
        "    self.cuda_graph.capture_end()",
        torch_oom("2.50 GiB", 2, 94.97, 1.07, 93.88),
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2874, in run_scheduler_process',
        "    scheduler = Scheduler(",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py", line 119, in __init__',
        "    raise Exception(",
        "Exception: Capture cuda graph failed: " + torch_oom("2.50 GiB", 2, 94.97, 1.07, 93.88).split(": ", 1)[1],
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
        "3. disable torch compile by not using --enable-torch-compile",
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
        "",
    ):
        L.raw(0.0, line)
    L.log(0.3, "Received sigquit from a child process. It usually means the child failed.", None)


def torch_oom(tried: str, gpu: int, total_gib: float, free_gib: float, in_use_gib: float) -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU {gpu} has a total "
            f"capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is free. Including non-PyTorch memory, "
            f"this process has {in_use_gib:.2f} GiB memory in use. Of the allocated memory "
            f"{in_use_gib - 5.3:.2f} GiB is allocated by PyTorch, and 3.05 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def decode_batch(t: datetime, *, running: int, tokens: int, usage: float, tput: float,
                 accept: float | None = None, queue: int = 0, rank: str | None = "TP0", draft: int = 3) -> str:
    spec = f"accept len: {accept:.2f}, accept rate: {accept / draft:.2f}, " if accept else ""
    return (f"{sg(t, rank)}Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
            f"{spec}cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: {queue}, ")


def access(t: datetime, path: str, port: int, method: str = "GET", code: str = "200 OK") -> str:
    return f'{sg(t, None)}INFO:     127.0.0.1:{port} - "{method} {path} HTTP/1.1" {code}'


# --------------------------------------------------------------------------- benchmarks


def _row(key: str, value: object) -> str:
    if isinstance(value, float):
        return f"{key:<40} {value:<10.2f}"
    return f"{key:<40} {value:<10}"


def _section(title: str) -> str:
    return "{s:{c}^{n}}".format(s=title, n=50, c="-")


@dataclass
class Bench:
    """Inputs of one serving benchmark run; the block's other numbers are derived."""

    concurrency: int
    num_prompts: int
    input_len: int
    output_len: int
    out_tput: float  # output token throughput (tok/s)
    ttft_ms: float
    backend: str = "sglang"
    accept_len: float | None = None
    seed: int = 0


def bench_serving_block(b: Bench, engine: str = "sglang") -> str:
    """The `============ Serving Benchmark Result ============` block (sglang or vllm flavour)."""
    rng = random.Random(b.seed)
    gen = b.num_prompts * b.output_len
    inp = b.num_prompts * b.input_len
    dur = gen / b.out_tput
    req_tput = b.num_prompts / dur
    in_tput = inp / dur
    tpot = 1000.0 * b.concurrency / b.out_tput
    e2e = b.ttft_ms + tpot * (b.output_len - 1)
    itl = tpot / (b.accept_len or 1.0) if b.accept_len else tpot
    rows = ["", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    if engine == "sglang":
        rows += [
            _row("Backend:", b.backend),
            _row("Traffic request rate:", "inf"),
            _row("Max request concurrency:", b.concurrency),
            _row("Successful requests:", b.num_prompts),
            _row("Benchmark duration (s):", dur),
            _row("Total input tokens:", inp),
            _row("Total input text tokens:", inp),
            _row("Total generated tokens:", gen),
            _row("Total generated tokens (retokenized):", gen - rng.randint(0, 9)),
            _row("Request throughput (req/s):", req_tput),
            _row("Input token throughput (tok/s):", in_tput),
            _row("Output token throughput (tok/s):", b.out_tput),
            _row("Peak output token throughput (tok/s):", b.out_tput * rng.uniform(1.12, 1.3)),
            _row("Peak concurrent requests:", b.concurrency),
            _row("Total token throughput (tok/s):", in_tput + b.out_tput),
            _row("Concurrency:", b.concurrency * rng.uniform(0.93, 0.995)),
        ]
        if b.accept_len:
            rows.append(_row("Accept length:", b.accept_len))
        rows += [
            _section("End-to-End Latency"),
            _row("Mean E2E Latency (ms):", e2e),
            _row("Median E2E Latency (ms):", e2e * rng.uniform(0.97, 1.0)),
            _row("P90 E2E Latency (ms):", e2e * rng.uniform(1.04, 1.1)),
            _row("P99 E2E Latency (ms):", e2e * rng.uniform(1.1, 1.2)),
        ]
    else:
        rows += [
            _row("Successful requests:", b.num_prompts),
            _row("Failed requests:", 0),
            _row("Maximum request concurrency:", b.concurrency),
            _row("Benchmark duration (s):", dur),
            _row("Total input tokens:", inp),
            _row("Total generated tokens:", gen),
            _row("Request throughput (req/s):", req_tput),
            _row("Output token throughput (tok/s):", b.out_tput),
            _row("Peak output token throughput (tok/s):", float(round(b.out_tput * rng.uniform(1.1, 1.25)))),
            _row("Peak concurrent requests:", float(b.concurrency)),
            _row("Total Token throughput (tok/s):", in_tput + b.out_tput),
        ]
    rows += [
        _section("Time to First Token"),
        _row("Mean TTFT (ms):", b.ttft_ms),
        _row("Median TTFT (ms):", b.ttft_ms * rng.uniform(0.9, 0.99)),
    ]
    if engine == "sglang":
        rows.append(_row("P90 TTFT (ms):", b.ttft_ms * rng.uniform(1.3, 1.6)))
    rows += [
        _row("P99 TTFT (ms):", b.ttft_ms * rng.uniform(1.8, 2.6)),
        _section("Time per Output Token (excl. 1st token)"),
        _row("Mean TPOT (ms):", tpot),
        _row("Median TPOT (ms):", tpot * rng.uniform(0.98, 1.0)),
    ]
    if engine == "sglang":
        rows.append(_row("P90 TPOT (ms):", tpot * rng.uniform(1.02, 1.06)))
    rows += [
        _row("P99 TPOT (ms):", tpot * rng.uniform(1.05, 1.15)),
        _section("Inter-Token Latency" if engine == "sglang" else "Inter-token Latency"),
        _row("Mean ITL (ms):", itl),
        _row("Median ITL (ms):", itl * rng.uniform(0.97, 1.0)),
    ]
    if engine == "sglang":
        rows.append(_row("P90 ITL (ms):", itl * rng.uniform(1.05, 1.2)))
    rows += [
        _row("P99 ITL (ms):", itl * rng.uniform(1.4, 2.2)),
    ]
    if engine == "sglang":
        rows.append(_row("Max ITL (ms):", itl * rng.uniform(3, 6)))
    rows.append("=" * 50)
    return "\n".join(rows)


def bench_serving_preamble(b: Bench, model: str, host: str, port: int) -> str:
    """What sglang.bench_serving prints before the block."""
    return "\n".join([
        f"Namespace(backend='{b.backend}', base_url=None, host='{host}', port={port}, dataset_name='random', "
        f"dataset_path='', model='{model}', tokenizer=None, num_prompts={b.num_prompts}, "
        f"random_input_len={b.input_len}, random_output_len={b.output_len}, random_range_ratio=1.0, "
        f"request_rate=inf, max_concurrency={b.concurrency}, seed=1, disable_tqdm=False, disable_stream=False, "
        "return_logprob=False, warmup_requests=1, output_file=None)",
        "",
        f"#Input tokens: {b.num_prompts * b.input_len}",
        f"#Output tokens: {b.num_prompts * b.output_len}",
        "Starting warmup with 1 sequences...",
        "Warmup completed with 1 sequences. Starting main benchmark run...",
        f"100%|██████████| {b.num_prompts}/{b.num_prompts} [{_mmss(b.num_prompts * b.output_len / b.out_tput)}<00:00, "
        f"{b.num_prompts / (b.num_prompts * b.output_len / b.out_tput):.2f}it/s]",
    ])


def _mmss(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60:02d}:{s % 60:02d}"


def bench_one_batch(batch: int, input_len: int, output_len: int, decode_tput: float, prefill_lat: float) -> str:
    lines = [f"Prefill. latency: {prefill_lat:.5f} s, throughput: {batch * input_len / prefill_lat:9.2f} token/s"]
    lat = batch / decode_tput
    for i in range(5):
        jitter = 1 + 0.004 * ((i * 7) % 5 - 2)
        lines.append(f"Decode {i}. Batch size: {batch}, latency: {lat * jitter:.5f} s, throughput: {decode_tput / jitter:9.2f} token/s")
    lines.append(f"Decode.  median latency: {lat:.5f} s, median throughput: {decode_tput:9.2f} token/s")
    total = prefill_lat + lat * output_len
    lines.append(f"Total. latency: {total:.3f} s, throughput: {batch * (input_len + output_len) / total:9.2f} token/s")
    return "\n".join(lines)


# --------------------------------------------------------------------------- nvidia-smi


def nvidia_smi(t: datetime, *, driver: str, cuda: str, gpus: list[tuple[int, int, int, int]],
               name: str = "NVIDIA RTX PRO 6000 Blac...", total_mib: int = 97887,
               procs: list[tuple[int, int, str, int]] | None = None) -> str:
    """gpus: (temp C, power W, used MiB, util %). procs: (gpu, pid, name, MiB)."""
    bar = "+-----------------------------------------+------------------------+----------------------+"
    out = [
        t.strftime("%a %b %d %H:%M:%S %Y").replace(" 0", "  ", 1) if t.day < 10 else t.strftime("%a %b %d %H:%M:%S %Y"),
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda:<9}|",
        bar,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    buses = ["01", "21", "41", "61", "81", "A1", "C1", "E1"]
    for i, (temp, pw, used, util) in enumerate(gpus):
        perf = "P1" if util > 5 else "P8"
        out.append(f"| {i:>3}  {name:<26}    On  |   00000000:{buses[i % 8]}:00.0 Off |                  Off |")
        out.append(f"| 30%   {temp:>2}C    {perf:<4}          {pw:>3}W /  600W |  {used:>6}MiB /  {total_mib}MiB |    {util:>3}%      Default |")
        out.append("|                                         |                        |                  N/A |")
        out.append(bar)
    out += [
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
    ]
    if not procs:
        out.append("|  No running processes found                                                             |")
    for gpu, pid, pname, mib in procs or []:
        out.append(f"|  {gpu:>3}   N/A  N/A          {pid:>7}      C   {pname:<35} {mib:>6}MiB |")
    out.append("+-----------------------------------------------------------------------------------------+")
    return "\n".join(out)


def smi_query(rows: list[tuple[int, int, int]], name: str = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
              total: int = 97887) -> str:
    out = ["index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]"]
    for i, (used, util, _t) in enumerate(rows):
        out.append(f"{i}, {name}, {used} MiB, {total} MiB, {util} %")
    return "\n".join(out)
