"""bashlex's parse tables read from the machine's cache are the tables bashlex builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import bashlex.parser as bashlex_parser
import bashlex.yacc as yacc
import pytest

from analytics import parsetables, regexcache

COMMANDS = [
    "for i in $(seq 1 60); do sleep 5; curl -sf localhost:30000/health && break; done",
    "nohup python -m sglang.launch_server --model-path m --tp 8 > s.log 2>&1 &",
    "until grep -q 'fired up' s.log; do sleep 10; done; tail -5 s.log",
    "cat > run.sh <<'EOF'\nvllm serve m --port 8000\nEOF\nbash run.sh",
    "timeout 600 bash -c 'while ! curl -s :8000/v1/models; do sleep 5; done' || echo fail",
    "a=$((1+2)); echo ${a}",  # (bashlex refuses arithmetic: the same error both ways)
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(regexcache.CACHE_ENV, str(tmp_path))
    return tmp_path / "bashlex"


def _parser(monkeypatch: pytest.MonkeyPatch, table: type) -> Any:
    """bashlex's parser built again from its grammar, with ``table`` as yacc's LRTable."""
    monkeypatch.setattr(yacc, "LRTable", table)
    return yacc.yacc(module=bashlex_parser, debug=False, write_tables=False)


def test_the_tables_are_built_once_then_read_from_the_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = yacc.LRTable
    built = _parser(monkeypatch, plain)
    cached = parsetables.cached_tables(plain)
    first = _parser(monkeypatch, cached)
    assert len(list(cache.glob("*.marshal"))) == 1

    def no_build(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(plain, "lr_parse_table", no_build)
    second = _parser(monkeypatch, cached)
    for parser in (first, second):
        assert dict(parser.action) == dict(built.action)
        assert dict(parser.goto) == dict(built.goto)
        assert [p.name for p in parser.productions] == [p.name for p in built.productions]


def test_a_corrupt_cache_file_is_built_again_and_replaced(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = parsetables.cached_tables(yacc.LRTable)
    built = _parser(monkeypatch, cached)
    (path,) = cache.glob("*.marshal")
    path.write_bytes(b"not marshal data")
    again = _parser(monkeypatch, cached)
    assert dict(again.action) == dict(built.action)
    assert path.read_bytes() != b"not marshal data"


def _parses(env: dict[str, str]) -> str:
    """What a fresh process importing the shell parser makes of ``COMMANDS``."""
    code = (
        "import sys\n"
        "from analytics.analysis.tagging.shell import bashlex\n"
        "assert sys.modules['bashlex.yacc'].LRTable.__name__ == 'CachedLRTable'\n"
        f"for c in {COMMANDS!r}:\n"
        "    try:\n"
        "        print(''.join(t.dump() for t in bashlex.parse(c)))\n"
        "    except Exception as exc:\n"
        "        print('error', type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_process_parses_the_same_with_the_cache_as_without(tmp_path: Path) -> None:
    env = {**os.environ, regexcache.CACHE_ENV: str(tmp_path)}
    without = _parses({**env, regexcache.CACHE_ENV: "off"})
    assert _parses(env) == without  # (builds and writes the tables)
    (kept,) = (tmp_path / "bashlex").glob("*.marshal")
    written = kept.stat().st_ino
    assert _parses(env) == without  # (reads them: a build would have replaced the file)
    assert kept.stat().st_ino == written
    assert "word='sleep'" in without and "error" in without  # (parsed, and refused)
