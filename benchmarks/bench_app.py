"""First-render time of every explorer page on a large synthetic database.

Builds a database of --messages messages over --sessions sessions (default
100,000 / 200) from the real schema, starts the Streamlit app on it, and opens
each page in headless Chromium, timing from navigation to the page's own
element (and the end of the script run). Each page is opened twice: cold (first
render, empty query cache) and warm.

    python benchmarks/bench_app.py [--messages 100000] [--sessions 200] [--db FILE]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import duckdb

from analytics.explore import streamlit_command
from analytics.store.migrations import migrate

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

TEXTS = [
    "ok?",
    "ready?",
    "status?",
    "Let me check the server log.",
    "[bash] for i in $(seq 1 30); do sleep 10; curl -s localhost:30000/health && break; done",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "The bottleneck is the sparse decode kernel: 63% of decode time.",
    "The server is up and ready.",
    "Decode batch: 24.7 tok/s, accept len 2.1",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]

BUILD_SQL = [
    """INSERT INTO sessions
       SELECT 'bench:' || lpad(s::VARCHAR, 4, '0'), ['opencode','claude_code','codex'][s % 3 + 1],
              'n' || s, '/bench/' || s || '.jsonl', 'Synthetic session ' || s,
              ['opencode 1.14', 'claude-code 2.0', 'codex 0.144'][s % 3 + 1],
              ['claude-opus-4', 'gpt-5', 'qwen3'][s % 3 + 1], '/work',
              TIMESTAMP '2025-05-01' + INTERVAL (s) HOUR,
              TIMESTAMP '2025-05-01' + INTERVAL (s) HOUR + INTERVAL ($per * 20) SECOND,
              $per, NULL
       FROM range($sessions) t(s)""",
    """INSERT INTO messages
       SELECT 'bench:' || lpad((i // $per)::VARCHAR, 4, '0'), i % $per, 'm' || i, NULL,
              ['user','assistant','assistant','tool'][i % 4 + 1],
              TIMESTAMP '2025-05-01' + INTERVAL (i // $per) HOUR + INTERVAL (i % $per * 20) SECOND,
              'bench:' || lpad((i // $per)::VARCHAR, 4, '0') || ' message ' || (i % $per) || ': '
                  || $texts[i % 10 + 1] || repeat(' lorem ipsum', (i % 7) * 20),
              NULL, false, false, NULL, NULL, NULL, NULL
       FROM range($messages) t(i)""",
    "UPDATE messages SET n_chars = length(text)",
    """INSERT INTO tags
       SELECT session_id, msg_idx,
              CASE WHEN text LIKE '%: ok?%' OR text LIKE '%: ready?%' OR text LIKE '%: status?%'
                   THEN 'user_checkin'
                   WHEN text LIKE '%Error%' THEN 'error'
                   WHEN text LIKE '%seq 1 30%' THEN 'polling_loop'
                   WHEN text LIKE '%bottleneck%' THEN 'diagnosis'
                   ELSE 'readiness_claim' END,
              1.0, 'rules', NULL, 0, 10, 'bench'
       FROM messages
       WHERE text LIKE '%: ok?%' OR text LIKE '%: ready?%' OR text LIKE '%: status?%'
          OR text LIKE '%Error%' OR text LIKE '%seq 1 30%' OR text LIKE '%bottleneck%'
          OR text LIKE '%up and ready%'""",
    """INSERT INTO tags SELECT session_id, msg_idx, 'user_abort', 1.0, 'rules', NULL, 0, 1, 'bench'
       FROM messages WHERE msg_idx % 97 = 0""",
    """INSERT INTO tool_calls
       SELECT session_id, msg_idx, 'c' || source_id, 'bash',
              'curl -s localhost:30000/health', '{}', repeat('ok ', 50),
              CASE WHEN msg_idx % 97 = 96 THEN 'aborted' ELSE 'completed' END, 0,
              ts, ts + INTERVAL 5 SECOND, 5.0, msg_idx + 1
       FROM messages WHERE role = 'assistant'""",
    """INSERT INTO polling_loops
       SELECT session_id, msg_idx, 'c' || source_id, 10, 30, 300, 'localhost:30000/health',
              'ok', 'Traceback', ['ready','aborted','timeout','failed'][msg_idx % 4 + 1],
              (msg_idx % 30) * 10.0
       FROM messages WHERE text LIKE '%seq 1 30%'""",
    """INSERT INTO measurements
       SELECT session_id, msg_idx, 'decode_tok_s', 20 + msg_idx / 10.0, 'tok/s', 'bench', 'assistant'
       FROM messages WHERE text LIKE '%Decode batch%'""",
    """INSERT INTO campaigns
       SELECT 'camp-' || session_id, session_id, 'reach 1000 tok/s', 'decode_tok_s', 1000,
              'tok/s', 20, 70, 0, $per, 'open'
       FROM sessions WHERE native_id[2:]::INT % 10 = 0""",
    """INSERT INTO levers
       SELECT 'camp-' || s.session_id, s.session_id, k, 'lever_' || k, 'synthetic lever',
              k * 40, k * 40 + 20, 'decode_tok_s', 20 + k, 21 + k, 5.0,
              ['improved','no_effect','worse','failed'][k % 4 + 1], k * 40 + 20
       FROM sessions s, range(1, 11) r(k) WHERE s.native_id[2:]::INT % 10 = 0""",
    """INSERT INTO readiness_claims
       SELECT session_id, msg_idx, text, 'server',
              ['premature','supported','unverified'][msg_idx % 3 + 1], 'synthetic',
              to_json([msg_idx + 1, msg_idx + 2]), CASE WHEN msg_idx % 3 = 0 THEN msg_idx + 1 END
       FROM messages WHERE text LIKE '%up and ready%'""",
    """INSERT INTO annotations
       SELECT t.session_id, t.msg_idx, t.tag, (t.msg_idx % 5) <> 0, a.who, NULL,
              TIMESTAMP '2025-06-01'
       FROM (SELECT * FROM tags WHERE tag = 'user_checkin' LIMIT 300) t,
            (VALUES ('alice'), ('bob')) a(who)""",
]


def build_db(path: Path, messages: int, sessions: int) -> float:
    """Create the synthetic database; return seconds taken."""
    start = time.perf_counter()
    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    try:
        migrate(con)
        params = {
            "per": messages // sessions,
            "sessions": sessions,
            "messages": messages,
            "texts": TEXTS,
        }
        for sql in BUILD_SQL:
            used = {k: v for k, v in params.items() if f"${k}" in sql}
            con.execute(sql, used)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return time.perf_counter() - start


def pages(per: int) -> list[tuple[str, str, str]]:
    """(name, url path, locator of the page-specific element)."""
    target = per // 2
    return [
        ("Sessions", "", '[data-testid="stMetricLabel"]:has-text("Premature claims")'),
        (
            "Session",
            f"session?session={quote('bench:0007')}&msg={target}",
            f"text=bench:0007 message {target}:",
        ),
        (
            "Campaign",
            f"campaign?campaign={quote('camp-bench:0010')}",
            '[data-testid="stVegaLiteChart"]',
        ),
        ("Readiness", "readiness", 'h3:has-text("Evidence")'),
        ("Polling & aborts", "polling", 'h3:has-text("Check-in latency")'),
        ("Search", "search?q=" + quote("illegal memory"), "text=/hits \\(/"),
        ("SQL", "sql?sql=" + quote("SELECT count(*) AS n FROM messages"), "text=/1 rows/"),
        ("Annotate", "annotate", 'h3:has-text("Between annotators")'),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app(db: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        streamlit_command(port),
        env=os.environ | {"TRANSCRIPTS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"streamlit exited with {proc.returncode}") from None
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("streamlit did not start within 60 s")


def measure(base: str, per: int, shots: Path | None) -> list[tuple[str, float, float]]:
    from playwright.sync_api import expect, sync_playwright

    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(base)  # warm the browser and the streamlit bundle, not the queries
        page.wait_for_load_state("networkidle")
        timings: dict[str, list[float]] = {}
        for rnd in range(2):
            for name, path, selector in pages(per):
                start = time.perf_counter()
                page.goto(f"{base}/{path}")
                expect(page.locator(selector).first).to_be_visible(timeout=120_000)
                expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=120_000)
                timings.setdefault(name, []).append(time.perf_counter() - start)
                if shots is not None and rnd == 0:
                    page.screenshot(path=str(shots / f"{name.split()[0].lower()}.png"))
        browser.close()
    for name, (cold, warm) in timings.items():
        results.append((name, cold, warm))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--db", type=Path, help="where to build the database (default: a temp dir)")
    ap.add_argument("--screenshots", type=Path, help="save a screenshot of each page here")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory()
    db = args.db or Path(tmp.name) / "bench.duckdb"
    built = build_db(db, args.messages, args.sessions)
    con = duckdb.connect(str(db), read_only=True)
    counts = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
        for t in ("sessions", "messages", "tags", "tool_calls", "polling_loops")
    }
    con.close()
    print(
        f"database: {db} ({db.stat().st_size / 1e6:.1f} MB) built in {built:.1f} s; "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items())
    )

    port = free_port()
    app = start_app(db, port)
    try:
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
        rows = measure(f"http://127.0.0.1:{port}", args.messages // args.sessions, args.screenshots)
    finally:
        app.terminate()
        app.wait(timeout=20)
        tmp.cleanup()
    print(f"\n{'page':<18}{'first render (s)':>18}{'warm (s)':>10}")
    for name, cold, warm in rows:
        print(f"{name:<18}{cold:>18.2f}{warm:>10.2f}")


if __name__ == "__main__":
    main()
