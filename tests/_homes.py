"""Agents' home folders as they lie on users' disks, built in a test's tmp_path from the
fixtures: the sessions, and the agents' own files beside them (``sources/homes.py``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import zlib
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
STORAGE = FIXTURES / "opencode" / "data_home" / "storage"
CLAUDE_PROJECT = FIXTURES / "claude_code" / "proj"
SESSION = "5e55a000-0000-4000-8000-00000000aaaa"

CODEX_ROLLOUT = next((FIXTURES / "codex").glob("rollout-*.jsonl"))
TEXT = FIXTURES / "transcript_text" / "bracket_style.txt"
CLAUDE_HISTORY = {"display": "fix the tests", "pastedContents": {}, "timestamp": 1759312800000,
                  "project": "/home/u/proj", "sessionId": SESSION}
CODEX_HISTORY = {"session_id": "0199a000-0000-7000-8000-000000000001", "ts": 1759312800,
                 "text": "launch the sglang server"}


def put(path: Path, content: str | bytes | dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content) + "\n"
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, dst))


def git_dir(folder: Path) -> Path:
    """A git directory as ``git init --bare`` and ``git add`` leave it (opencode keeps one per
    project worktree under ``snapshot/``): HEAD, config, refs/ and zlib-compressed objects."""
    put(folder / "HEAD", "ref: refs/heads/main\n")
    put(folder / "config", "[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    (folder / "refs" / "heads").mkdir(parents=True)
    content = b"[msg 1] user: is it up?\n[msg 2] assistant: yes\n"  # (a snapshotted file)
    raw = b"blob %d\x00" % len(content) + content
    name = hashlib.sha1(raw).hexdigest()
    put(folder / "objects" / name[:2] / name[2:], zlib.compress(raw))
    return folder


def claude_home(home: Path) -> Path:
    """``~/.claude`` after some use: its sessions in ``projects/`` and its own files beside."""
    shutil.copytree(CLAUDE_PROJECT, home / "projects" / "-home-u-proj")
    put(home / "settings.json", {"permissions": {"allow": ["Bash(ls:*)"]}})
    put(home / "history.jsonl", CLAUDE_HISTORY)
    put(home / ".credentials.json", {"claudeAiOauth": {"accessToken": "sk-ant-oat01-x"}})
    put(home / "CLAUDE.md", "Be terse.\n")
    put(home / "todos" / f"{SESSION}-agent-{SESSION}.json", "[]")
    put(home / "shell-snapshots" / "snapshot-bash-1759312800000-abc.sh", "export A=1\n")
    put(home / "statsig" / "statsig.stable_id.2656274335", '"abc"')
    put(home / "debug" / f"{SESSION}.txt", "2025-10-01T10:00:00Z [DEBUG] started\n")
    # (a backup of a file Claude Code edited: here a transcript the user had it fix)
    copy(TEXT, home / "file-history" / SESSION / "3f2a9c@v1")
    put(home / "projects" / "-home-u-proj" / "memory" / "MEMORY.md", "# Memory\n")
    put(home / "projects" / "-home-u-proj" / "sessions-index.json", {"entries": []})
    return home


def codex_home(home: Path) -> Path:
    """``~/.codex``: rollouts in ``sessions/`` and ``archived_sessions/``, its own files beside."""
    copy(CODEX_ROLLOUT, home / "sessions" / "2025" / "10" / "01" / CODEX_ROLLOUT.name)
    archived = CODEX_ROLLOUT.read_text().replace("-000000000001", "-000000000002")
    put(home / "archived_sessions" / CODEX_ROLLOUT.name.replace("01.jsonl", "02.jsonl"),
         archived)
    put(home / "history.jsonl", CODEX_HISTORY)
    put(home / "auth.json", {"OPENAI_API_KEY": None, "tokens": {"id_token": "x"}})
    put(home / "config.toml", 'model = "gpt-5-codex"\n')
    put(home / "version.json", {"latest_version": "0.46.0"})
    put(home / "log" / "codex-tui.log", "\x1b[2m2025-10-01\x1b[0m INFO codex_tui: start\n")
    put(home / "shell_snapshots" / "0199a000.sh", "export A=1\n")
    state = sqlite3.connect(home / "state_5.sqlite")
    state.execute("CREATE TABLE threads (id TEXT)")
    state.close()
    return home


def opencode_home(data: Path) -> Path:
    """``~/.local/share/opencode``: its storage, and its own files, logs and git snapshots."""
    shutil.copytree(STORAGE, data / "storage")
    put(data / "auth.json", {"anthropic": {"type": "api", "key": "x"}})
    put(data / "log" / "2025-10-01T100000.log", "INFO 2025-10-01T10:00:00 service=default\n")
    put(data / "bin" / "rg", b"\x7fELF\x02\x01\x01" + bytes(64))
    git_dir(data / "snapshot" / "proj1" / "9f3c2a1b")
    put(data / "tool-output" / "tool_01", "[msg 1] user: a long output\n")  # (a tool's output)
    return data
