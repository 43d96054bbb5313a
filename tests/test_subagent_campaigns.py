"""A campaign whose lever a subagent measured: the Task that ran the benchmark is the caller's."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from analytics.ingest import ingest

SID = "5ab1e000-0000-4000-8000-00000000c0de"
BENCH = "vllm bench serve --model m --port 8000 --max-concurrency 16 --num-prompts 320"


def _result(p99: float) -> str:
    return (
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     320\n"
        "Maximum request concurrency:             16\n"
        "Benchmark duration (s):                  60.00\n"
        "Output token throughput (tok/s):         1500.00\n"
        "---------------Time to First Token----------------\n"
        f"Mean TTFT (ms):                          {p99 / 2:.2f}\n"
        f"Median TTFT (ms):                        {p99 / 2.2:.2f}\n"
        f"P99 TTFT (ms):                           {p99:.2f}\n"
        "==================================================\n"
    )


class _Lines:
    def __init__(self, sidechain: bool = False) -> None:
        self.rows: list[dict[str, object]] = []
        self.sidechain = sidechain

    def add(self, role: str, content: object, minute: int) -> None:
        i = len(self.rows)
        tag = "s" if self.sidechain else "m"
        self.rows.append({
            "type": role, "uuid": f"{tag}{i}", "parentUuid": f"{tag}{i - 1}" if i else None,
            "sessionId": SID, "isSidechain": self.sidechain,
            "timestamp": f"2026-03-10T09:{minute:02d}:{i % 60:02d}Z",
            "message": {"role": role, "content": content},
        })

    def call(self, tool: str, args: dict[str, object], result: str, start: int, end: int) -> None:
        cid = f"toolu_{len(self.rows)}_{int(self.sidechain)}"
        self.add("assistant", [{"type": "tool_use", "id": cid, "name": tool, "input": args}], start)
        self.add("user", [{"type": "tool_result", "tool_use_id": cid, "content": result}], end)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        return path


def _session(root: Path) -> tuple[Path, Path]:
    """The caller: a target, a baseline, a relaunch with TP=4, a Task whose subagent ran
    the benchmark (at 09:31, while the Task ran from 09:30 to 09:33)."""
    main = _Lines()
    main.add("user", "Get p99 TTFT under 300 ms at concurrency 16.", 0)
    main.call("Bash", {"command": "vllm serve m --port 8000 --tensor-parallel-size 2 &"}, "", 1, 1)
    main.call("Bash", {"command": BENCH}, _result(612.4), 5, 6)
    main.add("assistant", [{"type": "text", "text": "Next lever: tensor parallelism 4."}], 10)
    main.call("Bash", {"command": "vllm serve m --port 8000 --tensor-parallel-size 4 &"}, "", 11, 11)
    main.call("Task", {"description": "bench", "prompt": "run the benchmark"},
              "P99 TTFT 243.8 ms", 30, 33)
    sub = _Lines(sidechain=True)
    sub.add("user", "run the benchmark", 30)
    sub.call("Bash", {"command": BENCH}, _result(243.8), 31, 31)
    return main.write(root / f"{SID}.jsonl"), sub.write(root / SID / "subagents" / "agent-b1.jsonl")


def _campaign(db: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT c.baseline_value, c.best_value, c.status, l.value_after, l.outcome "
            "FROM campaigns c JOIN levers l USING (campaign_id, session_id) ORDER BY l.seq"
        ).fetchall()


@pytest.mark.parametrize("order", ["together", "subagent first", "caller first"])
def test_a_subagents_benchmark_measures_the_callers_lever(tmp_path: Path, order: str) -> None:
    main, sub = _session(tmp_path / "p")
    db = tmp_path / "t.duckdb"
    steps = {"together": [[tmp_path / "p"]], "subagent first": [[sub], [main]],
             "caller first": [[main], [sub]]}[order]
    for paths in steps:
        assert not ingest(paths, db=db, build_index=False).errors
    assert _campaign(db) == [(612.4, 243.8, "met", 243.8, "improved")]
