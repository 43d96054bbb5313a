"""What a check's output says: a generation's text, and whether a smoke test, a test run or
a benchmark passed."""

from __future__ import annotations

import json
from typing import Any

from analytics.analysis.degenerate import is_degenerate
from analytics.analysis.literals import lowered
from analytics.analysis.readiness.config import config
from analytics.command_output import command_output

# --------------------------------------------------------------------------- generations


def _strings(node: Any, keys: tuple[str, ...], out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                out.append(value)
            else:
                _strings(value, keys, out)
    elif isinstance(node, list):
        for item in node:
            _strings(item, keys, out)


def generation_text(output: str) -> str:
    """The generated text inside a smoke test's output (JSON fields such as
    ``content``/``reasoning_content``), else the output itself."""
    keys = config().generation_keys
    found: list[str] = []
    candidates = [output] + [line for line in output.splitlines() if line.strip()[:1] in "{["]
    for chunk in candidates:
        try:
            _strings(json.loads(chunk), keys, found)
        except ValueError:
            continue
        if found:
            break
    return "\n".join(found) if found else output


# --------------------------------------------------------------------------- checks


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def judge_check(command: str, output: str, kind: str) -> tuple[bool | None, str]:
    """Did a functional check pass? (None: cannot tell) and why, in words."""
    cfg = config().text
    output = command_output(output).text  # (a header is no answer: "Chunk ID: … Output:" alone)
    low = lowered(output)
    if kind == "tests":
        if failed := cfg["tests_failed"].search(output, low):
            return False, f"tests failed ({_short(failed.group(0))})"
        if passed := cfg["tests_passed"].search(output, low):
            return True, f"tests passed ({_short(passed.group(0))})"
        return None, "test run without a verdict"
    if cfg["usage_error"].search(output, low):
        return None, "its command line was refused (usage error): it never ran"
    failure = cfg["failure"].search(output, low)
    if failure:
        return (
            False,
            f"error in its output: {_short(output[failure.start() : failure.start() + 80])!r}",
        )
    if kind == "benchmark":
        if cfg["benchmark_done"].search(output, low):
            return True, "benchmark completed"
        return None, "benchmark without results"
    text = generation_text(output)
    if not text.strip():
        return None, "no output"
    verdict = is_degenerate(text)
    if verdict.flag:
        return False, f"degenerate output: {verdict.reason}"
    return True, f"sane generation: {_short(text, 60)!r}"

