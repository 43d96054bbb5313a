"""Tagging speed, two ways, each against a reference measured in the same run.

    python benchmarks/bench_tagging.py [--records 100000] [--messages 20000] [--seed 0] [--rounds 3]

1. Ingest with tagging (issue 3's goal: <= 4x DuckDB's own ``read_json`` of the same file).
   A seeded 100k-record Claude-Code-shaped session (``_corpus.py``, as bench_ingest.py uses)
   is ingested in a fresh process with tagging and every other analysis on, redaction on,
   no BM25 index (a separate cost, timed by bench_ingest.py); ``read_json`` of the file into
   a table is the reference. Both run ``--rounds`` times, alternated, each into a fresh
   database; the goal's ratio is the best ingest against the best reference (each at this
   machine's best moment), and every round's own ratio is printed with their median. An
   ingest without analysis shows what tagging and analysis add; the stage split
   (``TRANSCRIPTS_TIMING``) of the fastest tagged ingest is printed too. The package is
   byte-compiled first (``byte_compile_package``), as an installed copy is.
2. The Tagger alone over a generated batch of messages, against spaCy's blank English
   tokenizer over the same prose (``nlp.make_doc``): the floor any spaCy-based prose tagger
   pays. Tool outputs are never tokenised by the Tagger, so the reference does not tokenise
   them either. Every generated text is unique, so neither side is measuring a cache.
   Prints messages/s and MB/s (all message text, commands and outputs counted).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy

from analytics.analysis.tagging import Tagger
from analytics.models import Message, MessageContext, ToolCall

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _compiled import byte_compile_package  # noqa: E402
from _corpus import write_corpus  # noqa: E402

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
        # Every message and sentence is made unique (a number in it): the Tagger caches what
        # it read, and a batch of repeated texts would measure its cache, not its work.
        if kind < 0.15:
            text = f"{rnd.choice(USER)} ({i})"
            out.append(MessageContext(message=Message(role="user", text=text, **msg_kw)))
        elif kind < 0.55:
            n = rnd.randint(1, 12)
            text = " ".join(f"{rnd.choice(ASSISTANT)} See step {i}.{k}." for k in range(n))
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


def ingest_with_tagging(records: int, rounds_wanted: int = 3) -> None:
    """Part 1: fresh-process ingests with tagging against ``read_json``, same file, same run,
    ``rounds_wanted`` alternated rounds of each."""
    work = Path(tempfile.mkdtemp(prefix="bench_tagging_"))
    try:
        src = work / "session.jsonl"
        write_corpus(src, records)
        print(f"corpus: {records} records, {src.stat().st_size / 2**20:.1f} MB")
        def ref_code(db: str) -> str:
            return (
                f"import duckdb; c = duckdb.connect(r'{work / db}'); "
                f"c.execute(\"CREATE TABLE t AS SELECT * FROM read_json('{src}', "
                "format='newline_delimited', maximum_object_size=104857600)\")"
            )

        def ingest_code(db: str, options: str = "") -> str:
            return (
                "from analytics.ingest import ingest; "
                f"s = ingest([r'{src}'], db=r'{work / db}', build_index=False, exclusive=True{options}); "
                "from analytics.machine import exit_now; exit_now(1 if s.errors else 0)"
            )

        def timed_run(code: str, what: str) -> float:
            t0 = time.perf_counter()
            if subprocess.run([sys.executable, "-c", code]).returncode:
                raise SystemExit(f"{what} step failed")
            return time.perf_counter() - t0

        os.sync()  # the corpus just written is not flushed to disk during the timed steps
        env = {**os.environ, "TRANSCRIPTS_TIMING": "1"}
        # Alternated rounds of the reference and the tagged ingest, each into a fresh
        # database: the goal compares each at its best (this machine's speed drifts by a
        # tenth between minutes); every round's own ratio is printed too.
        rounds: list[tuple[float, float]] = []
        stages = ""
        for n in range(max(1, rounds_wanted)):
            ref_n = timed_run(ref_code(f"ref{n}.duckdb"), "read_json")
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", ingest_code(f"tagged{n}.duckdb")],
                                  env=env, capture_output=True, text=True)
            tagged_n = time.perf_counter() - t0
            if done.returncode:
                raise SystemExit(f"ingest step failed: {done.stderr[-2000:]}")
            if not stages or tagged_n <= min(t for _, t in rounds):
                stages = done.stderr  # the stage split of the fastest tagged ingest
            rounds.append((ref_n, tagged_n))
            for db in (f"ref{n}.duckdb", f"tagged{n}.duckdb"):
                (work / db).unlink(missing_ok=True)
        lite = timed_run(ingest_code("lite.duckdb", ", analyse=False"), "parse+store")
        ref, tagged = min(r for r, _ in rounds), min(t for _, t in rounds)
        ratios = sorted(t / r for r, t in rounds)
        print(f"{'duckdb read_json (reference), best':<44}{ref:>8.2f} s")
        print(f"{'ingest, parse+store+redaction only':<44}{lite:>8.2f} s   {lite / ref:.2f}x")
        print(f"{'ingest with tagging and analysis, no index':<44}{tagged:>8.2f} s"
              f"   {tagged / ref:.2f}x   (goal <= 4x; best against best)")
        print(f"{'  of which tagging and analysis':<44}{tagged - lite:>8.2f} s"
              f"   {(tagged - lite) / ref:.2f}x")
        print("rounds (read_json s, tagged ingest s, ratio): " + "; ".join(
            f"{r:.2f}, {t:.2f}, {t / r:.2f}x" for r, t in rounds)
            + f"; median ratio {ratios[len(ratios) // 2]:.2f}x")
        done_stderr = stages
        print("where the ingest spent its time (stages overlap when a worker tags):")
        for line in done_stderr.splitlines():
            if line.startswith("timing "):
                print("  " + line[len("timing "):])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tagger_alone(messages: int, seed: int) -> None:
    """Part 2: the Tagger over generated messages against the bare tokenizer."""
    batch = generate(messages, seed)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000, help="records of the ingest corpus")
    ap.add_argument("--messages", type=int, default=20000, help="messages for the Tagger alone")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds of part 1")
    args = ap.parse_args()
    byte_compile_package()
    ingest_with_tagging(args.records, args.rounds)
    print()
    tagger_alone(args.messages, args.seed)


if __name__ == "__main__":
    main()
