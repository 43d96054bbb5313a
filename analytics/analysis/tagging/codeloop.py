"""Polling loops written in Python: ``python - <<'EOF'`` and ``python -c '…'`` snippets that
wait on a server, a file or a process (``for _ in range(60): … requests.get(url) … time.sleep(5)``).

The code is read with Python's own parser (``ast``), never run. A loop polls when its body
(not a function defined inside it) sleeps for a known time, makes a check (an HTTP request, a
socket connect, a file read or existence test, a check program run through ``subprocess``) and
can leave on what it saw (``break``, ``return``, ``sys.exit``), or is a ``while`` loop on a
condition: a sweep that runs a benchmark and sleeps between runs never leaves early, and is
not a poll.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

HTTP_CALLS = frozenset({"get", "head", "request", "urlopen"})
"""Last part of a call's name that reads a URL (``requests.get``, ``urllib.request.urlopen``);
not ``post``: a loop posting with pauses drives load or generates, it does not wait."""
HTTP_OWNERS = frozenset({"requests", "httpx", "urllib", "urllib3", "request", "session", "client", "http"})
"""First part of such a name when no argument spells the URL (``requests.get(url)``)."""
RUNNERS = frozenset({"run", "check_output", "call", "check_call", "Popen", "getoutput",
                     "getstatusoutput", "system", "popen"})
"""``subprocess.*`` / ``os.*`` calls that run a command line."""
FILE_CHECKS = frozenset({"exists", "isfile", "getsize", "stat", "read_text", "read_bytes"})
SOCKET_CHECKS = frozenset({"create_connection", "connect_ex", "connect", "pid_exists"})
SLEEPS = frozenset({"sleep"})
EXITS = frozenset({"exit", "_exit"})
_URLISH = re.compile(r"https?://|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d+")
_FAIL_WORDS = re.compile(r"err|fail|traceback|exception|out of memory|oom|killed|crash|fatal", re.I)


@dataclass(frozen=True)
class CodeLoop:
    """What a Python polling loop's code says."""

    interval_s: float
    max_iterations: int | None
    checks: tuple[str, ...]
    success: str | None
    """A text the loop leaves on when it is in what it read (``if "ready" in r.text: break``)."""
    failure: str | None
    """A text it gives up on (``if "Traceback" in log: sys.exit(1)``)."""
    success_marker: str | None
    """What it prints as it leaves on success (``print("UP"); break``)."""
    failure_marker: str | None
    target: str | None
    """The URL, file or program the checks look at."""


def parse_code(code: str) -> ast.Module | None:
    """The module ``code`` is, or None when it is not Python (or not all of it)."""
    for text in (code, textwrap.dedent(code)):
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError):
            continue
    return None


def code_loop(code: str, programs: frozenset[str]) -> CodeLoop | None:
    """The first polling loop in the Python ``code``, or None. ``programs``: the programs
    that check something when run through ``subprocess`` (``polling.CHECK_PROGRAMS``)."""
    tree = parse_code(code)
    if tree is None:
        return None
    constants = _constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            found = _loop(node, constants, programs)
            if found is not None:
                return found
    return None


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level ``NAME = <number or text>``: what a sleep or a URL may be spelled by."""
    out: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt.value.value
    return out


def _body_nodes(loop: ast.For | ast.AsyncFor | ast.While) -> list[ast.AST]:
    """Every node of the loop's body and ``else``, not those of functions or classes defined
    there (their code runs only when called)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [*loop.body, *loop.orelse]
    if isinstance(loop, ast.While):
        todo.append(loop.test)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _loop(
    loop: ast.For | ast.AsyncFor | ast.While, constants: dict[str, object], programs: frozenset[str]
) -> CodeLoop | None:
    nodes = _body_nodes(loop)
    calls = [n for n in nodes if isinstance(n, ast.Call)]
    interval = next((s for c in calls if (s := _sleep_seconds(c, constants)) is not None), None)
    checked = [(k, c) for c in calls if (k := _check(c, constants, programs)) is not None]
    checks = tuple(dict.fromkeys(k for k, _ in checked))
    if interval is None or not checks:
        return None
    leaves = any(isinstance(n, ast.Break | ast.Return) or _is_exit(n) for n in nodes)
    conditional = isinstance(loop, ast.While) and not _always_true(loop.test)
    if not (leaves or conditional):
        return None
    success = failure = s_mark = f_mark = None
    for node in nodes:
        # (an ``if`` on what was read, or a ``try`` whose request raises until it succeeds)
        if isinstance(node, ast.If):
            text = _tested_text(node.test, constants)
        elif isinstance(node, ast.Try):
            text = None
        else:
            continue
        exit_kind = _exit_kind(node.body)
        if exit_kind is None:
            continue
        marker = _printed(node.body)
        failing = exit_kind == "fail" or bool(text and _FAIL_WORDS.search(text))
        if failing and failure is None and f_mark is None:
            failure, f_mark = text, marker
        elif not failing and success is None and s_mark is None:
            success, s_mark = text, marker
    target = next((t for _, c in checked if (t := _target(c, constants)) is not None), None)
    return CodeLoop(
        interval, _iterations(loop, constants), checks, success, failure, s_mark, f_mark, target
    )


def _target(call: ast.Call, constants: dict[str, object]) -> str | None:
    """The first text a check call is given: its URL, path or command line."""
    for arg in call.args or [k.value for k in call.keywords]:
        texts = _texts(arg, constants)
        if texts:
            return " ".join(texts) if isinstance(arg, ast.List | ast.Tuple) else texts[0]
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
        return _target(call.func.value, constants)  # Path("server.log").exists()
    return None


def _name(node: ast.AST) -> list[str]:
    """A call's function as its dotted parts (``requests.get`` -> [requests, get];
    ``Path(p).exists`` -> [Path, exists]); [] for anything else."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [*_name(node.value), node.attr]
    if isinstance(node, ast.Call):
        return _name(node.func)
    return []


def _value(node: ast.AST, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand, constants)
        return -inner if isinstance(inner, int | float) and not isinstance(inner, bool) else None
    return None


def _texts(node: ast.AST, constants: dict[str, object]) -> list[str]:
    """The literal texts a call's argument spells (an f-string's literal parts too)."""
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.List | ast.Tuple):
        return [t for elt in node.elts for t in _texts(elt, constants)]
    value = _value(node, constants)
    return [value] if isinstance(value, str) else []


def _sleep_seconds(call: ast.Call, constants: dict[str, object]) -> float | None:
    name = _name(call.func)
    if not name or name[-1] not in SLEEPS or not call.args:
        return None
    value = _value(call.args[0], constants)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _check(call: ast.Call, constants: dict[str, object], programs: frozenset[str]) -> str | None:
    """What the call looks at (``http``, ``socket``, ``file``, a check program's name), or None."""
    name = _name(call.func)
    if not name:
        return None
    last, first = name[-1], name[0]
    args = [t for a in [*call.args, *(k.value for k in call.keywords)] for t in _texts(a, constants)]
    if last in HTTP_CALLS and (first in HTTP_OWNERS or any(_URLISH.search(t) for t in args)):
        return "http"
    if last in SOCKET_CHECKS:
        return "socket"
    if last in FILE_CHECKS or (last == "open" and len(name) == 1):
        return "file"
    if last in RUNNERS and first in ("subprocess", "os", "sp") and args:
        program = args[0].split()[0].rsplit("/", 1)[-1] if args[0].split() else ""
        return program if program in programs else None
    return None


def _is_exit(node: ast.AST) -> bool:
    """``sys.exit(…)``, ``exit(…)``, ``os._exit(…)`` or ``raise SystemExit``."""
    if isinstance(node, ast.Call):
        name = _name(node.func)
        return bool(name) and name[-1] in EXITS
    if isinstance(node, ast.Raise) and node.exc is not None:
        return _name(node.exc)[-1:] == ["SystemExit"]
    return False


def _exit_kind(body: list[ast.stmt]) -> str | None:
    """``ok`` when ``body`` leaves the loop on success (``break``, ``return``, ``exit(0)``),
    ``fail`` when it leaves failing (``exit(1)``, ``raise``), None when it does not leave."""
    for stmt in body:
        if isinstance(stmt, ast.Break | ast.Return):
            return "ok"
        if isinstance(stmt, ast.Raise):
            return "fail"
        if isinstance(stmt, ast.Expr) and _is_exit(stmt.value):
            call = stmt.value
            assert isinstance(call, ast.Call)
            code = _value(call.args[0], {}) if call.args else 0
            return "ok" if code in (0, None) else "fail"
    return None


def _tested_text(test: ast.expr, constants: dict[str, object]) -> str | None:
    """The text an ``if`` looks for: ``"ready" in r.text``, ``line.startswith("OK")``."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
            texts = _texts(node.left, constants)
            if texts:
                return texts[0]
        if isinstance(node, ast.Call) and _name(node.func)[-1:] in (["startswith"], ["endswith"]):
            texts = [t for a in node.args for t in _texts(a, constants)]
            if texts:
                return texts[0]
    return None


def _printed(body: list[ast.stmt]) -> str | None:
    """The literal text a block prints at the start of a line before it leaves
    (``print("UP")``, ``print("up after", i * 5, "s")``, ``print(f"ready in {t:.0f}s")``)."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            if _name(stmt.value.func) == ["print"] and stmt.value.args:
                text = _leading_text(stmt.value.args[0])
                if text and text.strip():
                    return text.strip()
    return None


def _leading_text(node: ast.expr) -> str | None:
    """The literal text an argument of ``print`` opens with (an f-string's first part when
    it is literal)."""
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    value = _value(node, {})
    return value if isinstance(value, str) else None


def _iterations(loop: ast.For | ast.AsyncFor | ast.While, constants: dict[str, object]) -> int | None:
    """``for _ in range(N)`` (or ``range(a, b[, step])``) with numbers: how many rounds."""
    if not isinstance(loop, ast.For | ast.AsyncFor) or not isinstance(loop.iter, ast.Call):
        return None
    if _name(loop.iter.func) != ["range"]:
        return None
    values = [_value(a, constants) for a in loop.iter.args]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    bounds = [int(v) for v in values if isinstance(v, int)]
    return len(range(*bounds))


def _always_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)
