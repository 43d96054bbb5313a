"""Generate hostile transcript files and check that parsing (and ingest) never crashes.

    python scripts/fuzz_ingest.py --cases 2000 [--seed 7] [--no-ingest] [--keep DIR]

Each case is one file built from a real-shaped record set of a format, then damaged:
wrong types in a field, truncation, invalid UTF-8, NUL bytes, deep nesting, a
half-written last line, a wrong extension, or replaced by empty/binary content.
Every file is parsed with its intended format's parser (as ``--format X`` would):
an exception other than :class:`analytics.errors.AnalyticsError` is a crash, and so
is a ledger where records_read != records_stored + records_quarantined. When
``analytics.ingest.ingest`` exists, all cases are then ingested into a temporary
DuckDB and every ``ingest_files`` row is checked the same way.

Exit status: 0 when crashes == 0, else 1. The generators are importable (the
hypothesis tests in tests/test_hostile_inputs.py reuse the seed records).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import random
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FORMATS = ("claude_code", "codex", "opencode", "transcript_text")
EXTENSIONS = {
    "claude_code": ".jsonl",
    "codex": ".jsonl",
    "opencode": ".json",
    "transcript_text": ".txt",
}

# ---------------------------------------------------------------------------
# Real-shaped seed records (field names from shared/reference/FORMATS.md)
# ---------------------------------------------------------------------------


def claude_code_records() -> list[dict[str, Any]]:
    env = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/srv/app",
        "sessionId": "9a1b2c3d-0000-4000-8000-000000000001",
        "version": "2.0.42",
        "gitBranch": "main",
        "timestamp": "2025-06-01T10:00:00.000Z",
    }
    return [
        {"type": "summary", "summary": "Launch server", "leafUuid": "u3"},
        {
            **env,
            "uuid": "u1",
            "type": "user",
            "message": {"role": "user", "content": "start the server"},
        },
        {
            **env,
            "uuid": "u2",
            "parentUuid": "u1",
            "type": "assistant",
            "requestId": "req_1",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [
                    {"type": "text", "text": "Launching."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {
                            "command": "python -m sglang.launch_server --tp 8",
                            "run_in_background": True,
                        },
                    },
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 4},
            },
        },
        {
            **env,
            "uuid": "u3",
            "parentUuid": "u2",
            "type": "user",
            "toolUseResult": {
                "stdout": "Command running in background with ID: dce0af",
                "stderr": "",
                "interrupted": False,
            },
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "ok",
                        "is_error": False,
                    }
                ],
            },
        },
        {
            **env,
            "uuid": "u4",
            "parentUuid": None,
            "logicalParentUuid": "u3",
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "auto", "preTokens": 1000},
        },
        {
            **env,
            "uuid": "u5",
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "[Request interrupted by user]"}],
            },
        },
        {
            "type": "file-history-snapshot",
            "messageId": "m1",
            "snapshot": {},
            "isSnapshotUpdate": False,
        },
    ]


def codex_records() -> list[dict[str, Any]]:
    ts = "2025-06-02T08:00:00.000Z"
    return [
        {
            "timestamp": ts,
            "type": "session_meta",
            "payload": {
                "id": "7f1e2d3c-4b5a-4697-8a1b-2c3d4e5f6a7b",
                "timestamp": ts,
                "cwd": "/srv",
                "originator": "codex_cli_rs",
                "cli_version": "0.144.1",
            },
        },
        {
            "timestamp": ts,
            "type": "turn_context",
            "payload": {"cwd": "/srv", "model": "gpt-5", "approval_policy": "never"},
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "ok?"}],
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "nvidia-smi"}),
                "call_id": "call_1",
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": "Chunk ID: x\nProcess exited with code 0\nOutput:\nok",
            },
        },
        {
            "timestamp": ts,
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": "Ready."},
        },
        {
            "timestamp": ts,
            "type": "event_msg",
            "payload": {"type": "turn_aborted", "turn_id": "t1", "reason": "interrupted"},
        },
        {"timestamp": ts, "type": "compacted", "payload": {"message": "summary"}},
    ]


def opencode_document() -> dict[str, Any]:
    sid = "ses_fuzz0001"
    user = {
        "info": {
            "id": "msg_u1",
            "sessionID": sid,
            "role": "user",
            "time": {"created": 1748764800000},
            "agent": "build",
        },
        "parts": [
            {
                "id": "prt_1",
                "sessionID": sid,
                "messageID": "msg_u1",
                "type": "text",
                "text": "ready?",
            }
        ],
    }
    state = {
        "status": "completed",
        "input": {"command": "curl localhost:30000/health"},
        "output": "ok",
        "title": "health",
        "metadata": {},
        "time": {"start": 1748764800100, "end": 1748764800200},
    }
    assistant = {
        "info": {
            "id": "msg_a1",
            "sessionID": sid,
            "role": "assistant",
            "time": {"created": 1748764800050, "completed": 1748764800300},
            "parentID": "msg_u1",
            "modelID": "claude-sonnet-4",
            "providerID": "anthropic",
            "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}},
        },
        "parts": [
            {"id": "prt_2", "sessionID": sid, "messageID": "msg_a1", "type": "step-start"},
            {
                "id": "prt_3",
                "sessionID": sid,
                "messageID": "msg_a1",
                "type": "tool",
                "callID": "c1",
                "tool": "bash",
                "state": state,
            },
            {
                "id": "prt_4",
                "sessionID": sid,
                "messageID": "msg_a1",
                "type": "text",
                "text": "It is up.",
            },
        ],
    }
    info = {
        "id": sid,
        "projectID": "p",
        "directory": "/srv",
        "title": "fuzz",
        "version": "1.14.46",
        "time": {"created": 1748764800000, "updated": 1748764800300},
    }
    return {"info": info, "messages": [user, assistant]}


TEXT_LINES = [
    "[msg 1] user: start sglang please",
    "[msg 2] assistant: launching",
    "[bash] python -m sglang.launch_server --model-path X --tp 8",
    "[2025-10-22 10:27:57 TP0] Load weight begin. avail mem=70.1 GB",
    "exit code: 0",
    "<msg id=3> user: ok?",
    "[msg 4] tool: The server is fired up and ready to roll!",
]

# ---------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------

WRONG_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: None,
    lambda r: r.randint(-(2**70), 2**70),
    lambda r: r.random() * 1e308,
    lambda r: r.choice([True, False]),
    lambda r: [],
    lambda r: {},
    lambda r: [1, "x", None],
    lambda r: {"type": 3},
    lambda r: "",
    lambda r: "\x00\ud7ff\ufffe" * r.randint(1, 3),
    lambda r: "x" * r.randint(1000, 100_000),
    lambda r: "2025-13-45T99:99:99Z",
]


def paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path inside ``obj``."""
    out: list[tuple[Any, ...]] = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    )
    for k, v in items:
        out.append((*prefix, k))
        out.extend(paths(v, (*prefix, k)))
    return out


def set_path(obj: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if delete and isinstance(obj, dict):
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


def mutate_record(rec: Any, rng: random.Random, n: int = 1) -> Any:
    """A deep copy of ``rec`` with ``n`` fields set to wrong types (or deleted)."""
    rec = copy.deepcopy(rec)
    for _ in range(n):
        ps = paths(rec)
        if not ps:
            return rng.choice(WRONG_VALUES)(rng)
        p = rng.choice(ps)
        set_path(rec, p, rng.choice(WRONG_VALUES)(rng), delete=rng.random() < 0.15)
    return rec


def deep_json(depth: int) -> str:
    return '{"type": "user", "message": ' + "[" * depth + "]" * depth + "}"


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def seed_bytes(fmt: str, rng: random.Random, mutations: int) -> bytes:
    """A real-shaped file of ``fmt`` whose records carry ``mutations`` wrong-typed fields."""
    if fmt == "opencode":
        doc = opencode_document()
        return dumps(mutate_record(doc, rng, mutations) if mutations else doc).encode(
            "utf-8", "surrogatepass"
        )
    if fmt == "transcript_text":
        lines = [rng.choice(TEXT_LINES) for _ in range(rng.randint(1, 20))]
        return ("\n".join(lines) + "\n").encode()
    recs = claude_code_records() if fmt == "claude_code" else codex_records()
    out = []
    for rec in recs:
        out.append(
            mutate_record(rec, rng, 1) if rng.random() < mutations / max(1, len(recs)) else rec
        )
    return ("\n".join(dumps(r) for r in out) + "\n").encode("utf-8", "surrogatepass")


def damage(data: bytes, rng: random.Random, kind: str) -> bytes:
    """Apply one file-level damage ``kind`` to ``data``."""
    if kind == "truncate":
        return data[: rng.randint(0, len(data))]
    if kind == "half_line":  # a JSONL whose last line is still being written
        cut = data.rstrip(b"\n")
        last = cut.rfind(b"\n") + 1
        return cut[: last + max(1, (len(cut) - last) // 2)]
    if kind == "invalid_utf8":
        pos = rng.randint(0, len(data))
        return (
            data[:pos]
            + rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"])
            + data[pos:]
        )
    if kind == "nul":
        pos = rng.randint(0, len(data))
        return data[:pos] + b"\x00" * rng.randint(1, 64) + data[pos:]
    if kind == "empty":
        return b""
    if kind == "binary":
        return rng.randbytes(rng.randint(1, 4096))
    if kind == "deep":
        return data + (deep_json(rng.choice([100, 1000, 100_000])) + "\n").encode()
    if kind == "deep_first":
        return (deep_json(rng.choice([1000, 100_000])) + "\n").encode() + data
    if kind == "whitespace":
        return b"\n \r\n\t\n" * rng.randint(1, 5)
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    return data


DAMAGES = (
    "none",
    "truncate",
    "half_line",
    "invalid_utf8",
    "nul",
    "empty",
    "binary",
    "deep",
    "deep_first",
    "whitespace",
    "crlf",
    "bom",
)


@dataclass
class Case:
    path: Path
    fmt: str
    what: str


def make_case(root: Path, i: int, rng: random.Random) -> Case:
    fmt = rng.choice(FORMATS)
    kind = rng.choice(DAMAGES)
    mutations = rng.choice([0, 0, 1, 2, 5])
    data = damage(seed_bytes(fmt, rng, mutations), rng, kind)
    ext = (
        EXTENSIONS[fmt]
        if rng.random() > 0.1
        else rng.choice([".txt", ".json", ".jsonl", ".md", ""])
    )
    path = root / f"case{i:05d}_{fmt}_{kind}{ext}"
    path.write_bytes(data)
    return Case(path, fmt, f"{kind}, {mutations} wrong-typed fields, ext {ext or 'none'}")


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    rejected: int = 0
    """Whole files refused with a typed AnalyticsError (e.g. unreadable)."""
    records: int = 0
    stored: int = 0
    quarantined: int = 0
    crashes: list[str] = field(default_factory=list)
    by_damage: Counter[str] = field(default_factory=Counter)


def parse_case(case: Case, tally: Tally) -> None:
    from analytics.errors import AnalyticsError
    from analytics.models import Ledger
    from analytics.sources.detect import get_module

    module = get_module(case.fmt)
    ledger = Ledger()
    tally.cases += 1
    try:
        for _ in module.parse(case.path, ledger):
            pass
    except AnalyticsError:
        tally.rejected += 1
        return
    except Exception:  # noqa: BLE001 - a crash is what we are counting
        tb = traceback.format_exc(limit=3).strip().splitlines()
        tally.crashes.append(f"{case.path} ({case.fmt}; {case.what}): {tb[-1]}")
        return
    tally.records += ledger.records_read
    tally.stored += ledger.records_stored
    tally.quarantined += ledger.records_quarantined
    if ledger.records_read != ledger.records_stored + ledger.records_quarantined:
        tally.crashes.append(
            f"{case.path} ({case.fmt}): ledger {ledger.records_read} read != "
            f"{ledger.records_stored} stored + {ledger.records_quarantined} quarantined"
        )


def ingest_cases(root: Path, tally: Tally) -> str:
    try:
        ingest_mod = importlib.import_module("analytics.ingest")
    except ImportError:
        return "ingest: analytics.ingest not importable, skipped"
    import duckdb

    db = root / "fuzz.duckdb"
    try:
        summary = ingest_mod.ingest([root / "cases"], db=db, analyse=False, build_index=False)
    except Exception as exc:  # noqa: BLE001
        tally.crashes.append(f"ingest of {root / 'cases'} raised {type(exc).__name__}: {exc}")
        return "ingest: crashed"
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT path, records_read, records_stored, records_quarantined FROM ingest_files"
    ).fetchall()
    con.close()
    for path, read, stored, quarantined in rows:
        if read != stored + quarantined:
            tally.crashes.append(f"{path}: ingest_files {read} read != {stored} + {quarantined}")
    errors = len(summary.errors)
    return f"ingest: {len(rows)} ingest_files rows reconciled, {errors} files refused with a clear error"


def run(cases: int, seed: int, ingest: bool, keep: Path | None) -> Tally:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="fuzz_ingest_") as tmp:
        root = keep or Path(tmp)
        (root / "cases").mkdir(parents=True, exist_ok=True)
        tally = Tally()
        for i in range(cases):
            case = make_case(root / "cases", i, rng)
            tally.by_damage[case.path.stem.split("_", 2)[-1]] += 1
            parse_case(case, tally)
        note = ingest_cases(root, tally) if ingest else "ingest: skipped (--no-ingest)"
    print(
        f"cases={tally.cases} records={tally.records} stored={tally.stored} "
        f"quarantined={tally.quarantined} rejected_files={tally.rejected} crashes={len(tally.crashes)}"
    )
    print(note)
    for crash in tally.crashes[:50]:
        print("CRASH", crash)
    return tally


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000, help="number of hostile files to generate")
    ap.add_argument("--seed", type=int, default=0, help="random seed (same seed, same files)")
    ap.add_argument("--no-ingest", action="store_true", help="parse only; skip the DuckDB ingest")
    ap.add_argument("--keep", type=Path, help="write the cases here instead of a temp dir")
    args = ap.parse_args(argv)
    tally = run(args.cases, args.seed, not args.no_ingest, args.keep)
    return 1 if tally.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
