"""Starting the Streamlit explorer (the CLI's ``transcripts app`` calls these)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from analytics.errors import AnalyticsError


def app_path() -> Path:
    """The explorer's entry script, ``app/streamlit_app.py`` in the project."""
    path = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
    if not path.exists():
        raise AnalyticsError(
            f"{path}: explorer app not found; install the project from its source folder "
            "with `pip install -e .`"
        )
    return path


def streamlit_command(port: int, headless: bool = True) -> list[str]:
    """The ``streamlit run`` command line for the explorer."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.headless",
        "true" if headless else "false",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
    ]


STOP_WAIT_S = 10.0
"""How long streamlit is given to stop after Ctrl-C or a terminate."""


def run_app(db: str, port: int, headless: bool = True) -> int:
    """Run the explorer on ``db`` until interrupted; return streamlit's exit code.

    Streamlit runs as a child process: a SIGTERM or SIGHUP sent to this one (a service
    manager stopping it, a closed terminal) is passed on to it, so the port is not left
    held by an orphan. Ctrl-C reaches both from the terminal; this one then waits for
    streamlit to finish."""
    env = os.environ | {"TRANSCRIPTS_DB": str(Path(db).resolve())}
    proc = subprocess.Popen(streamlit_command(port, headless), env=env)

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    passed_on = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, forward) for signum in passed_on}
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.terminate()
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()

