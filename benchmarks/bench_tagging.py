"""Throughput of the Tagger over a large generated batch of messages.

    python benchmarks/bench_tagging.py [--messages 20000] [--seed 0]

Reference measured in the same run: spaCy's blank English tokenizer alone over the
same prose (``nlp.make_doc``), i.e. the floor any spaCy-based prose tagger pays;
tool outputs are never tokenised by the Tagger, so the reference does not tokenise them either.
Prints messages/s and MB/s (all message text, commands and outputs counted).
"""

from __future__ import annotations

import argparse
import random
import time

import spacy

from analytics.analysis.tagging import Tagger
from analytics.models import Message, MessageContext, ToolCall

USER = ["ok?", "ready?", "status?", "ok, now run the benchmark at concurrency 16", "any luck?",
        "yes go ahead", "is it up?", "try MTP with 3 draft tokens and compare against the baseline"]
ASSISTANT = [
    "The root cause is the sparse decode kernel: it launches only 64 blocks on 188 SMs.",
    "Let me check if the server is up before running the benchmark.",
    "Yes, it's up! 'The server is fired up and ready to roll!' Running a smoke test now.",
    "63% of decode time is in _tiled_sparse_decode_kernel, so FP8 GEMM tuning can only give ~6%.",
    "Starting the decode server with --mem-fraction-static 0.60 and --cuda-graph-max-bs 16.",
]
COMMANDS = [
    "python -m sglang.launch_server --model-path /models/m --tp 4 --port 30000 > /tmp/s.log 2>&1 &",
    "for i in $(seq 1 16); do sleep 25; r=$(tail -1 /tmp/s.log); echo \"[$((i*25))s] $r\"; "
    "echo \"$r\" | grep -qiE 'fired up|ready' && { echo READY; break; }; done",
    "curl -s localhost:30000/v1/chat/completions -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'",
    "python -m sglang.bench_serving --backend sglang --num-prompts 64 --max-concurrency 16",
    "nvidia-smi --query-gpu=memory.used --format=csv", "tail -50 /tmp/s.log", "ls -la /models",
]
LOG_LINE = "[2026-05-13 13:45:29 TP0] Decode batch, #running-req: 16, #token: 19800, token usage: 0.05, cuda graph: True, gen throughput (token/s): 25.50, #queue-req: 0\n"


def generate(n: int, seed: int) -> list[MessageContext]:
    rnd = random.Random(seed)
    out: list[MessageContext] = []
    for i in range(n):
        kind = rnd.random()
        msg_kw = {"session_id": "bench", "msg_idx": i, "source_id": str(i)}
        if kind < 0.15:
            out.append(MessageContext(message=Message(role="user", text=rnd.choice(USER), **msg_kw)))
        elif kind < 0.55:
            text = " ".join(rnd.choice(ASSISTANT) for _ in range(rnd.randint(1, 12)))
            out.append(MessageContext(message=Message(role="assistant", text=text, **msg_kw)))
        else:
            output = LOG_LINE * rnd.randint(5, 400)
            if rnd.random() < 0.1:
                output += "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: CUDA out of memory\n"
            call = ToolCall(session_id="bench", msg_idx=i, call_id=f"c{i}", tool="bash",
                            command=rnd.choice(COMMANDS), output=output, status="completed",
                            exit_code=0, result_msg_idx=i)
            out.append(MessageContext(message=Message(role="assistant", **msg_kw), calls=[call], results=[call]))
    return out


def size_mb(batch: list[MessageContext]) -> float:
    n = 0
    for c in batch:
        n += len(c.message.text)
        for call in c.calls:
            n += len(call.command or "") + len(call.output or "")
    return n / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    batch = generate(args.messages, args.seed)
    mb = size_mb(batch)
    tagger = Tagger()
    tagger.tag(batch[:50])  # build the spaCy pipeline outside the timing

    t0 = time.perf_counter()
    tags = []
    for lo in range(0, len(batch), 5000):  # chunks, as the ingest pipeline calls it
        tags.extend(tagger.tag(batch[lo : lo + 5000]))
    t_tag = time.perf_counter() - t0

    nlp = spacy.blank("en")
    prose = [c.message.text[:4000] for c in batch if c.message.role in ("user", "assistant") and c.message.text]
    t0 = time.perf_counter()
    for _ in nlp.tokenizer.pipe(prose, batch_size=256):
        pass
    t_ref = time.perf_counter() - t0

    n = len(batch)
    print(f"messages: {n}  data: {mb:.1f} MB  prose docs: {len(prose)}  tags: {len(tags)}  version: {tagger.version}")
    print(f"{'':<28}{'seconds':>9}{'msgs/s':>11}{'MB/s':>9}")
    print(f"{'Tagger.tag':<28}{t_tag:>9.2f}{n / t_tag:>11.0f}{mb / t_tag:>9.1f}")
    print(f"{'reference: tokenizer only':<28}{t_ref:>9.2f}{n / t_ref:>11.0f}{mb / t_ref:>9.1f}")
    print(f"Tagger / reference time: {t_tag / t_ref:.1f}x")


if __name__ == "__main__":
    main()
