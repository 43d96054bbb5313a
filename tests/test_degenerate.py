import json

import pytest

from analytics.analysis.degenerate import is_degenerate

LOOPS = {
    "arithmetic loop": "We are tasked with a simple arithmetic problem: 2 + 2 = ? "
    "We are tasked with a simple arithmetic problem: 2 + 2 = " + "2.2 + 2 = " * 10 + "2",
    "repeated sentence": "The user's question is 2+2. " * 12,
    "sentence loop after a sane start": "Okay, let me think about this carefully. "
    + "The user's question is 2+2. " * 6,
    "single token stutter": "the answer is " + "4 " * 40,
}

SANE = {
    "short answer": "2 + 2 = 4.",
    "prose": (
        "The server uses SGLang with tensor parallelism across eight GPUs. Each decode step "
        "launches a sparse attention kernel whose occupancy is limited by the number of heads; "
        "on sm_120 the fallback Triton kernel iterates over all top-k tokens serially, which "
        "explains why the profile attributes 63% of decode time to it. Raising the batch size "
        "helps only until memory runs out, and speculative decoding trades memory for fewer "
        "steps. Overall the ceiling is architectural rather than a configuration issue."
    ),
    "code": "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    a, b = 0, 1\n"
    "    for _ in range(n - 1):\n        a, b = b, a + b\n    return b\n\n"
    "def test_fib():\n    assert fib(0) == 0\n    assert fib(1) == 1\n    assert fib(2) == 1\n"
    "    assert fib(3) == 2\n    assert fib(10) == 55\n",
    "json records": json.dumps(
        [{"id": i, "name": f"user{i}", "active": i % 2 == 0, "score": i * 1.5} for i in range(30)],
        indent=2,
    ),
    "numbered list": "\n".join(
        f"{i}. Run the benchmark with concurrency {2**i} and record the output throughput"
        for i in range(1, 12)
    ),
    "markdown table": "| conc | tok/s | ttft |\n|---|---|---|\n"
    + "\n".join(f"| {c} | {c * 1.7:.1f} | {100 + c} |" for c in [1, 2, 4, 8, 16, 32, 64]),
    "server log": "\n".join(
        f"[2025-05-01 20:0{i}:1{i} TP0] Decode batch, #running-req: 16, #token: {1000 + i * 40}, "
        f"token usage: 0.0{i}, cuda graph: True, gen throughput (token/s): {25 + i * 0.3:.2f}"
        for i in range(8)
    ),
    "empty": "",
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loops_flag(name: str) -> None:
    result = is_degenerate(LOOPS[name])
    assert result.flag, name
    assert result.score >= 0.5
    assert "repeat" in result.reason or "occurs" in result.reason


@pytest.mark.parametrize("name", sorted(SANE))
def test_sane_outputs_do_not_flag(name: str) -> None:
    result = is_degenerate(SANE[name])
    assert not result.flag, (name, result)
    assert result.reason == ""
    assert not result


def test_reason_names_the_repeated_phrase() -> None:
    result = is_degenerate(LOOPS["arithmetic loop"])
    assert "2 + 2 = 2" in result.reason


def test_score_grows_with_repetition() -> None:
    light = is_degenerate("Intro sentence about the task at hand. " + "The answer is four. " * 3)
    heavy = is_degenerate("The answer is four. " * 30)
    assert heavy.score > light.score
