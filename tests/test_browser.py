"""The explorer in a real headless Chromium: every page, its own content, screenshots."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest_app import S_CX, XSS_TEXT, build_app_db

from analytics.explore import streamlit_command

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium"),
]

# url, heading, a page-specific text that proves the data arrived
PAGES = [
    ("", "Sessions", "Premature claims"),
    (f"session?session={quote(S_CX)}", "Session", "Summarise this page for me."),
    ("campaign", "Campaign", '[data-testid="stVegaLiteChart"]'),
    ("readiness", "Readiness claims", "smoke test returned a correct completion"),
    ("polling", "Polling & aborts", "Check-in latency"),
    ("search?q=memory", "Search", "illegal memory access"),
    ("sql?sql=" + quote("SELECT count(*) AS n FROM messages"), "SQL console", "1 rows"),
    ("annotate", "Annotate", "Between annotators"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"streamlit did not answer at {url} within {deadline_s:g} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = build_app_db(tmp_path_factory.mktemp("browser") / "fixture.duckdb")
    port = free_port()
    proc = subprocess.Popen(
        streamlit_command(port),
        env=os.environ | {"TRANSCRIPTS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def wait_idle(page: object) -> None:
    """Wait until the script run has finished (the status widget's Stop is gone)."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=30_000)


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        yield context.new_page()
        browser.close()


@pytest.mark.parametrize(("path", "heading", "content"), PAGES, ids=[p[1] for p in PAGES])
def test_page_shows_its_content(
    page: object,
    server: str,
    path: str,
    heading: str,
    content: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(f"{server}/{path}")
    expect(page.locator("h1", has_text=heading).first).to_be_visible(timeout=30_000)
    found = page.locator(content) if content.startswith("[") else page.get_by_text(content)
    # (a table may hold the text in a cell it keeps hidden too: the first match may be that)
    expect(found.filter(visible=True).first).to_be_visible(timeout=30_000)
    wait_idle(page)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    shots = tmp_path_factory.getbasetemp() / "screenshots"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / f"{heading.split()[0].lower()}.png"), full_page=True)


def test_transcript_html_and_markdown_stay_inert(page: object, server: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(f"{server}/session?session={quote(S_CX)}")
    expect(page.get_by_text(XSS_TEXT, exact=True)).to_be_visible(timeout=30_000)
    expect(page.locator('img[src="http://x/y.png"]')).to_have_count(0)
    expect(page.locator('a[href^="javascript"]')).to_have_count(0)
    injected = page.evaluate(
        "() => [...document.scripts].some(s => s.textContent.includes(\"alert('xss')\"))"
    )
    assert injected is False


def test_table_link_opens_session_page(page: object, server: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(f"{server}/readiness")
    expect(page.locator("h1", has_text="Readiness claims")).to_be_visible(timeout=30_000)
    page.get_by_text("Open the claim in its session").first.click()
    expect(page.locator("h1", has_text="Session").first).to_be_visible(timeout=30_000)
    expect(
        page.get_by_text("Server is ready: the smoke test returned the right answer.")
    ).to_be_visible(timeout=30_000)
    assert "session=claude_code" in page.url


def test_app_command_stops_streamlit_when_it_is_terminated(tmp_path: Path) -> None:
    """A SIGTERM to ``transcripts app`` (a service manager stopping it, ``kill``) stops the
    streamlit it started: the port is not left held by an orphan."""
    import signal
    import sys

    db = build_app_db(tmp_path / "t.duckdb")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "analytics.cli", "app", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        time.sleep(1.0)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-f", f"server.port {port}"], check=False)  # (an orphan)
