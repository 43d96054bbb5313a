"""Starting the Streamlit explorer (the CLI's ``transcripts app`` calls these)."""

from __future__ import annotations

import os
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


def run_app(db: str, port: int, headless: bool = True) -> int:
    """Run the explorer on ``db`` until interrupted; return streamlit's exit code."""
    env = os.environ | {"TRANSCRIPTS_DB": str(Path(db).resolve())}
    try:
        return subprocess.call(streamlit_command(port, headless), env=env)
    except KeyboardInterrupt:
        return 0
