"""Shell command structure, cheap enough to run on every tool call.

``parse_shell`` turns a command string into a flat list of simple commands, each
knowing the loops that enclose it and the operator that follows it. bashlex is
tried first; it rejects a lot of real agent commands (arithmetic ``$((…))``,
``${x: -5}``, heredocs …), so a small quote-aware tokenizer takes over then.
Commands hidden inside ``$(…)``, ``bash -c '…'``, ``ssh host '…'``,
``docker exec ctr …`` and ``timeout N …`` are expanded recursively, and so is a
program fed to a shell on its standard input (``bash <<'EOF' … EOF``); one fed to another
interpreter (``python - <<'EOF'``) is kept with its command (``stdin_program``), as a ``-c``
string is. Standard input is a here-document, a here-string (``bash <<< '…'``) or the literal
text piped in by ``cat <<EOF |``, ``echo '…' |`` or ``printf '…' |``; ``docker exec`` and
``kubectl exec`` pass it on only with ``-i``, ``ssh -n`` not at all. A script written by
``cat > run.sh <<EOF`` and run later in the same command (``bash run.sh``) is read as run.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache

from analytics.analysis.tooling.shell import printed_text, short_flags
from analytics.parsetables import import_bashlex

bashlex = import_bashlex()  # (its parse tables from the machine's cache: see parsetables)

LOOP_KEYWORDS = ("for", "while", "until")
_OPENERS = {"do", "then", "else", "{", "!", "(", "elif", "if"}
_CLOSERS = {"done", "fi", "}", ")", "esac"}
_WRAPPERS = {"sudo", "nohup", "setsid", "time", "exec", "nice", "env", "command", "stdbuf"}
_SHELLS = {"bash", "sh", "zsh", "dash"}
_INTERPRETER = re.compile(r"(?:python|pypy)[\d.]*|node(?:js)?|ruby|perl|php")
"""Programs other than shells that run the code given on their standard input."""
_CODE_FLAGS = frozenset({"-c", "-m", "-e", "-E", "-p", "-r", "--eval", "--print"})
"""Options after which an interpreter runs code or a module named on its command line: its
standard input is data."""
_VALUE_FLAGS = frozenset({"-W", "-X", "-o", "+o", "-O"})
"""Options that take the next word as their value (``python -W ignore``, ``bash -o pipefail``)."""
_REDIRECT = re.compile(r"^\d*(?:>>?|<<?|&>|>&)")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MAX_DEPTH = 4
_RUNNERS: dict[str, frozenset[str]] = {
    "uv": frozenset(
        {"--with", "-w", "--with-requirements", "--with-editable", "--python", "-p", "--project",
         "--directory", "--env-file", "--package", "--extra", "--group", "--index",
         "--default-index", "--index-url", "--extra-index-url"}
    ),
    "poetry": frozenset({"-C", "--directory", "-P", "--project"}),
    "pipenv": frozenset(),
    "pdm": frozenset({"-p", "--project"}),
    "conda": frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
    "mamba": frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
    "micromamba": frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
    "pixi": frozenset({"-e", "--environment", "--manifest-path"}),
}
"""``X run [options] PROGRAM …`` runners (with their options that take a value): PROGRAM
gets the runner's standard input."""
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})


@dataclass
class Loop:
    """A for/while/until loop: ``header`` is the for-list or the condition text."""

    kind: str
    header: str
    id: int


@dataclass
class SimpleCommand:
    words: list[str]
    """Words with quotes removed; wrappers (sudo, nohup, timeout N …) kept."""
    loops: tuple[int, ...] = ()
    """Ids of the enclosing loops, outermost first."""
    next_op: str | None = None
    """The operator after the command: ``;``, ``&&``, ``||``, ``|``, ``&``, newline or None."""
    in_condition: bool = False
    """Part of a while/until condition."""
    nested: int = 0
    """0 at top level; >0 when found inside ``$(…)``, ``bash -c``, ``ssh`` …"""
    heredocs: tuple[str, ...] = ()
    """Texts on its standard input, in order: here-document bodies (``<<EOF``), here-strings
    (``<<< '…'``), or the literal text a ``cat <<EOF``/``echo``/``printf`` pipes into it."""
    writes: tuple[str, ...] = ()
    """Files its standard output is redirected to (``> f``, ``>> f``, ``&> f``)."""

    @property
    def name(self) -> str:
        """The program run, past env assignments and wrappers (``timeout 10 ssh`` -> ``ssh``)."""
        core = core_words(self.words)
        return core[0].rsplit("/", 1)[-1] if core else ""

    @property
    def background(self) -> bool:
        return self.next_op == "&"


@dataclass
class ShellScript:
    source: str
    commands: list[SimpleCommand] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    parser: str = "bashlex"
    """``bashlex`` or ``fallback`` (which parser produced the top level)."""

    def in_loop(self, loop_id: int) -> list[SimpleCommand]:
        return [c for c in self.commands if loop_id in c.loops]

    def names(self) -> set[str]:
        return {c.name for c in self.commands}


def core_words(words: list[str]) -> list[str]:
    """Drop env assignments, redirections and wrapper programs from the front."""
    out = [w for w in words if not _REDIRECT.match(w)]
    i = 0
    after_wrapper = False
    while i < len(out):
        w = out[i]
        if _ASSIGN.match(w) or w in _WRAPPERS:
            after_wrapper = w in _WRAPPERS
            i += 1
        elif after_wrapper and w.startswith("-"):
            i += 1
        elif w == "timeout":
            i += 1
            while i < len(out) and (out[i].startswith("-") or _is_duration(out[i])):
                i += 1
                if not _is_duration(out[i - 1]) and i < len(out) and out[i - 1] in ("-s", "-k"):
                    i += 1
        elif w.startswith("-") and i > 0 and out[i - 1] in ("stdbuf", "nice", "env"):
            i += 1
        else:
            break
    return out[i:]


def _is_duration(word: str) -> bool:
    return re.fullmatch(r"\d+(?:\.\d+)?[smhd]?", word) is not None


def stdin_program(cmd: SimpleCommand) -> tuple[str, str] | None:
    """``("shell" | "code", body)`` when ``cmd`` runs the program written in its first
    here-document: ``bash <<EOF``, ``bash -s -- arg <<EOF``, ``ssh host <<EOF``,
    ``python - <<EOF``, ``node <<EOF``. None when the here-document is only data for it
    (``cat > f.py <<EOF``, ``python run.py <<EOF``, ``bash -c '…' <<EOF``)."""
    if not cmd.heredocs:
        return None
    core = program_words(cmd.words)
    if not core:
        return None
    prog = core[0].rsplit("/", 1)[-1]
    body = cmd.heredocs[0]
    if prog == "ssh":
        return ("shell", body) if inner_command(cmd.words) is None else None
    if prog in _SHELLS:
        kind = "shell"
    elif _INTERPRETER.fullmatch(prog):
        kind = "code"
    else:
        return None
    return (kind, body) if _program_from_stdin(core[1:], kind == "shell") else None


_PYTHON = re.compile(r"(?:python|pypy)[\d.]*")


def python_programs(script: ShellScript) -> list[str]:
    """The Python code the commands of ``script`` run: a ``python -c '…'`` string, a
    ``python - <<'EOF'`` here-document, or a ``.py`` file an earlier command of the same
    snippet wrote (``cat > poll.py <<'EOF' … EOF; python poll.py``)."""
    written: dict[str, str] = {}
    found: list[str] = []
    for cmd in script.commands:
        _remember_written(cmd, written)
        core = program_words(cmd.words)
        if not core or not _PYTHON.fullmatch(core[0].rsplit("/", 1)[-1]):
            continue
        args = core[1:]
        if "-c" in args[:-1]:
            found.append(args[args.index("-c") + 1])
            continue
        fed = stdin_program(cmd)
        if fed is not None:
            found.append(fed[1])
            continue
        path = next((a for a in args if not a.startswith("-")), None)
        text = _written_text(path, written) if path and path.endswith(".py") else None
        if text is not None:
            found.append(text)
    return found


def program_words(words: list[str]) -> list[str]:
    """``core_words`` past a leading ``uv run --with x``, ``conda run -n env``, ``poetry run`` …
    (``_RUNNERS``): the program those run, with the same arguments and standard input.
    ``uv pip install`` and ``conda install`` keep their runner first."""
    return _past_runner(core_words(words))


def _past_runner(core: list[str]) -> list[str]:
    takes_value = _RUNNERS.get(core[0].rsplit("/", 1)[-1]) if core else None
    if takes_value is None or core[1:2] != ["run"]:
        return core
    i = 2
    while i < len(core) and core[i].startswith("-"):
        if core[i] == "--":
            i += 1
            break
        i += 2 if core[i] in takes_value else 1
    return core_words(core[i:])


def _program_from_stdin(args: list[str], shell: bool) -> bool:
    """No script file, ``-c`` string or ``-m`` module among ``args``: the program is read
    from standard input (``-`` and ``-s`` say so, and end the interpreter's options)."""
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in ("-", "-s", "--"):
            return True
        elif a in _CODE_FLAGS or (shell and re.fullmatch(r"-[a-z]*c[a-z]*", a)):
            return False
        elif a in _VALUE_FLAGS:
            skip = True
        elif not a.startswith(("-", "+")):
            return False
    return True


@lru_cache(maxsize=4096)
def parse_shell(command: str) -> ShellScript:
    """Parse ``command`` into simple commands; never raises. Cached: treat the result as read-only."""
    return _parse(command, depth=0)


# --- bashlex ---------------------------------------------------------------


def _from_bashlex(command: str, script: ShellScript) -> None:
    for tree in bashlex.parse(command):
        _walk(tree, script, (), False, 0)


def _walk(node: object, script: ShellScript, loops: tuple[int, ...], cond: bool, nested: int) -> None:
    kind = getattr(node, "kind", "")
    if kind == "command":
        words: list[str] = []
        heredocs: list[str] = []
        writes: list[str] = []
        for part in node.parts:  # type: ignore[attr-defined]
            if part.kind == "word":
                words.append(part.word)
                for sub in getattr(part, "parts", []):
                    _walk(sub, script, loops, cond, nested + 1)
            elif part.kind == "redirect" and getattr(part, "heredoc", None) is not None:
                heredocs.append(_heredoc_body(part))
            elif part.kind == "redirect":
                target = getattr(part.output, "word", None)
                if target is None:
                    continue
                if part.type == "<<<":
                    heredocs.append(target)
                elif part.type in _WRITE_OPS and getattr(part, "input", None) in (None, 1):
                    writes.append(target)
        if words:
            script.commands.append(
                SimpleCommand(words, loops, None, cond, nested, tuple(heredocs), tuple(writes))
            )
        return
    if kind in ("commandsubstitution", "processsubstitution"):
        _walk(node.command, script, loops, cond, nested)  # type: ignore[attr-defined]
        return
    if kind in ("for", "while", "until"):
        loop = Loop(kind, "", len(script.loops))
        script.loops.append(loop)
        inner = (*loops, loop.id)
        parts = node.parts  # type: ignore[attr-defined]
        seen_do = False
        header: list[str] = []
        for part in parts:
            if part.kind == "reservedword" and part.word == "do":
                seen_do = True
                continue
            if part.kind == "reservedword":
                continue
            if not seen_do:
                if part.kind == "word":
                    header.append(part.word)
                    for sub in getattr(part, "parts", []):
                        _walk(sub, script, inner, True, nested + 1)
                else:
                    start = len(script.commands)
                    _walk(part, script, inner, True, nested)
                    header.extend(" ".join(c.words) for c in script.commands[start:])
            else:
                _walk(part, script, inner, False, nested)
        loop.header = " ".join(header)
        return
    parts = getattr(node, "parts", None) or getattr(node, "list", None) or []
    last: SimpleCommand | None = None
    for part in parts:
        if getattr(part, "kind", "") in ("operator", "pipe"):
            if last is not None:
                last.next_op = part.op if part.kind == "operator" else "|"
            continue
        before = len(script.commands)
        _walk(part, script, loops, cond, nested)
        if len(script.commands) > before:
            last = script.commands[-1]


def _heredoc_body(redirect: object) -> str:
    """The body of a bashlex here-document redirect: bashlex keeps the closing delimiter line."""
    value: str = redirect.heredoc.value  # type: ignore[attr-defined]
    delimiter = getattr(getattr(redirect, "output", None), "word", None)
    head, _, last = value.rpartition("\n")
    return head if delimiter is not None and last.strip() == delimiter else value


# --- fallback tokenizer ----------------------------------------------------


class _Tokenizer:
    """Quote-aware splitter into simple commands with loop tracking."""

    def __init__(self, text: str, script: ShellScript, loops: tuple[int, ...], nested: int) -> None:
        self.text = text
        self.script = script
        self.stack: list[int] = list(loops)
        self.base = len(loops)
        self.nested = nested
        self.words: list[str] = []
        self.word: list[str] = []
        self.has_word = False
        self.cond = False
        self.heredocs: list[tuple[str, SimpleCommand | None]] = []
        """(delimiter, the command it feeds) of the here-documents whose bodies come next."""
        self.unowned: list[str] = []
        """Delimiters met in the command being read (it owns them once it ends)."""

    def run(self) -> None:
        t, i, n = self.text, 0, len(self.text)
        while i < n:
            ch = t[i]
            if ch in " \t":
                self._end_word()
                i += 1
            elif ch == "\\" and i + 1 < n:
                if t[i + 1] != "\n":
                    self._add(t[i + 1])
                i += 2
            elif ch == "'":
                j = t.find("'", i + 1)
                j = n if j < 0 else j
                self._add(t[i + 1 : j])
                i = j + 1
            elif ch == '"':
                j = _skip_double(t, i + 1)
                self._add(t[i + 1 : j])
                i = j + 1
            elif ch == "$" and t.startswith("$(", i):
                j = _skip_parens(t, i + 1)
                self._add(t[i : j + 1])
                i = j + 1
            elif ch == "$" and t.startswith("${", i):
                j = t.find("}", i)
                j = n - 1 if j < 0 else j
                self._add(t[i : j + 1])
                i = j + 1
            elif ch == "`":
                j = t.find("`", i + 1)
                j = n - 1 if j < 0 else j
                self._add(t[i : j + 1])
                i = j + 1
            elif ch == "#" and not self.has_word:
                j = t.find("\n", i)
                i = n if j < 0 else j
            elif ch == "\n":
                self._end_command("\n")
                i = self._skip_heredocs(i + 1)
            elif ch in ";|&":
                two = t[i : i + 2]
                if ch == "&" and self.word and self.word[-1].endswith(">"):
                    self._add("&")
                    i += 1
                    continue
                if two in ("&&", "||", ";;"):
                    self._end_command(two)
                    i += 2
                else:
                    self._end_command(ch)
                    i += 1
            elif t.startswith("<<<", i):  # a here-string: its word follows (``_redirect_words``)
                self._add("<<<")
                i += 3
            elif ch == "<" and t.startswith("<<", i):
                m = re.match(r"<<-?\s*['\"]?(\w+)['\"]?", t[i:])
                if m:
                    self.unowned.append(m.group(1))
                    i += m.end()
                else:
                    self._add(ch)
                    i += 1
            elif ch == "(" and t.startswith("((", i) and not self.has_word:
                j = t.find("))", i)
                j = n - 2 if j < 0 else j
                self._add(t[i : j + 2])
                i = j + 2
            elif ch in "()" and not self.has_word:
                self._end_command(None)
                i += 1
            else:
                self._add(ch)
                i += 1
        self._end_command(None)

    def _skip_heredocs(self, i: int) -> int:
        """Read the pending here-document bodies from ``i`` on, handing each to its command."""
        self._own(None)
        while self.heredocs:
            delim, owner = self.heredocs.pop(0)
            m = re.compile(rf"^\s*{re.escape(delim)}\s*$", re.M).search(self.text, i)
            end = m.start() if m else len(self.text)
            if owner is not None:
                owner.heredocs = (*owner.heredocs, self.text[i:end].rstrip("\n"))
            i = m.end() if m else len(self.text)
        return i

    def _own(self, cmd: SimpleCommand | None) -> None:
        self.heredocs.extend((delim, cmd) for delim in self.unowned)
        self.unowned = []

    def _add(self, s: str) -> None:
        self.word.append(s)
        self.has_word = True

    def _end_word(self) -> None:
        if self.has_word:
            self.words.append("".join(self.word))
        self.word, self.has_word = [], False

    def _end_command(self, op: str | None) -> None:
        self._end_word()
        words, self.words = self.words, []
        while words and words[0] in _CLOSERS:
            if words[0] == "done" and len(self.stack) > self.base:
                self.stack.pop()
                self.cond = False
            words = words[1:]
        while words and words[0] in _OPENERS:
            if words[0] == "do":
                self.cond = False
            words = words[1:]
        if words and words[0] in LOOP_KEYWORDS:
            loop = Loop(words[0], "", len(self.script.loops))
            self.script.loops.append(loop)
            self.stack.append(loop.id)
            rest = words[1:]
            if loop.kind == "for":
                loop.header = " ".join(rest)
                for w in rest:
                    _substitutions(w, self.script, tuple(self.stack), self.nested + 1)
                return
            self.cond = True
            loop.header = " ".join(rest)
            words = rest
        if words and words[-1] in ("done",) and len(self.stack) > self.base:
            words = words[:-1]
            self.stack.pop()
        if not words:
            if op and self.script.commands and self.script.commands[-1].next_op is None:
                self.script.commands[-1].next_op = op
            return
        strings, writes = _redirect_words(words)
        cmd = SimpleCommand(words, tuple(self.stack), op, self.cond, self.nested, strings, writes)
        self.script.commands.append(cmd)
        self._own(cmd)
        for w in words:
            _substitutions(w, self.script, cmd.loops, self.nested + 1)


def _redirect_words(words: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(here-strings, files written) among the words the tokenizer split: ``<<<`` and
    ``>``/``>>``/``1>``/``&>`` followed by their word, or glued to it (``>log``)."""
    strings: list[str] = []
    writes: list[str] = []
    for k, w in enumerate(words):
        m = re.fullmatch(r"(<<<|1?>>?\|?|&>>?)(.*)", w, re.S)
        if not m:
            continue
        target = m.group(2) or (words[k + 1] if k + 1 < len(words) else "")
        if target and not target.startswith("&"):  # ``>&2`` duplicates a descriptor
            (strings if m.group(1) == "<<<" else writes).append(target)
    return tuple(strings), tuple(writes)


def _skip_double(t: str, i: int) -> int:
    n = len(t)
    while i < n and t[i] != '"':
        if t[i] == "\\":
            i += 2
            continue
        if t.startswith("$(", i):
            i = _skip_parens(t, i + 1) + 1
            continue
        i += 1
    return min(i, n)


def _skip_parens(t: str, i: int) -> int:
    """``t[i]`` is '('; return the index of the matching ')'."""
    depth, n = 0, len(t)
    while i < n:
        ch = t[i]
        if ch == "'":
            j = t.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if ch == '"':
            i = _skip_double(t, i + 1) + 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n - 1


def _substitutions(word: str, script: ShellScript, loops: tuple[int, ...], nested: int) -> None:
    """Parse the commands inside ``$(…)`` / backticks of a fallback-tokenized word."""
    if nested > _MAX_DEPTH:
        return
    i = 0
    while True:
        i = word.find("$(", i)
        if i < 0:
            break
        j = _skip_parens(word, i + 1)
        inner = word[i + 2 : j]
        if not inner.startswith("("):  # $(( arithmetic ))
            _Tokenizer(inner, script, loops, nested).run()
        i = j + 1
    for inner in re.findall(r"`([^`]*)`", word):
        _Tokenizer(inner, script, loops, nested).run()


# --- recursive expansion of wrapped commands --------------------------------


def inner_command(words: list[str]) -> str | None:
    """The command string run by ``bash -c``, ``ssh host``, ``docker exec``, ``kubectl exec``."""
    wrapped = _wrapped(words)
    return wrapped[2] if wrapped else None


def _wrapped(words: list[str]) -> tuple[str, list[str], str] | None:
    """(program, its option words, the command string it runs) for ``inner_command``."""
    core = core_words(words)
    if not core:
        return None
    prog = core[0].rsplit("/", 1)[-1]
    args = core[1:]
    if prog in _SHELLS:
        for k, a in enumerate(args):
            if re.fullmatch(r"-[a-z]*c", a) and k + 1 < len(args):
                return prog, args[:k], args[k + 1]
        return None
    if prog == "ssh":
        k = 0
        while k < len(args) and args[k].startswith("-"):
            k += 2 if re.fullmatch(r"-[bcDEeFIiJLlmOoPpQRSWw]", args[k]) else 1
        rest = args[k + 1 :]
        return (prog, _option_words(args[:k]), " ".join(rest)) if rest else None
    if prog in ("docker", "podman") and args[:1] == ["exec"]:
        k = 1
        while k < len(args) and args[k].startswith("-"):
            k += 2 if args[k] in ("-e", "-u", "-w", "--env", "--user", "--workdir") else 1
        rest = args[k + 1 :]
        return (prog, _option_words(args[1:k]), " ".join(rest)) if rest else None
    if prog == "kubectl" and "--" in args:
        end = args.index("--")
        return prog, _option_words(args[:end]), " ".join(args[end + 1 :])
    return None


def _option_words(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("-")]


def _passes_stdin(words: list[str]) -> bool:
    """Whether the command ``inner_command`` finds in ``words`` reads their standard input:
    ``docker exec`` and ``kubectl exec`` attach it only with ``-i`` (``--interactive``,
    ``--stdin``); ``ssh -n`` and ``ssh -f`` read /dev/null instead."""
    wrapped = _wrapped(words)
    if wrapped is None:
        return False
    prog, options, _ = wrapped
    if prog in ("docker", "podman"):
        long_stdin = any(o.startswith("--interactive") for o in options)
        return long_stdin or "i" in short_flags(options, "euw")
    if prog == "kubectl":
        long_stdin = any(o in ("--stdin", "--stdin=true") for o in options)
        return long_stdin or "i" in short_flags(options, "cfn")
    if prog == "ssh":
        return not short_flags(options, "bcDEeFIiJLlmOopQRSWw") & {"n", "f"}
    return True


def _piped_text(cmd: SimpleCommand) -> str | None:
    """The text ``cmd`` writes to a pipe when it prints only literal text: a ``cat <<EOF``
    here-document, the words of ``echo``, what ``printf FORMAT ARG…`` prints."""
    core = core_words(cmd.words)
    if not core or cmd.writes:
        return None
    prog, args = core[0].rsplit("/", 1)[-1], core[1:]
    if prog == "cat":
        return cmd.heredocs[0] if cmd.heredocs and all(a == "-" for a in args) else None
    return printed_text(core)


def _feed_pipes(commands: list[SimpleCommand]) -> None:
    """Give the literal text a command pipes (``_piped_text``) to the command after the
    ``|`` as its standard input, unless a here-document of its own replaces it."""
    for k, cmd in enumerate(commands):
        if cmd.next_op != "|":
            continue
        text = _piped_text(cmd)
        if text is None:
            continue
        reader = next((c for c in commands[k + 1 :] if c.nested == cmd.nested), None)
        if reader is not None and not reader.heredocs:
            reader.heredocs = (text,)


def _script_run(cmd: SimpleCommand, written: dict[str, str]) -> str | None:
    """The text of the shell script ``cmd`` runs (``bash run.sh``, ``./run.sh``) when an
    earlier command of the same snippet wrote it (``written``: path -> text)."""
    core = core_words(cmd.words)
    if not core:
        return None
    if core[0].rsplit("/", 1)[-1] in _SHELLS:
        path = next((a for a in core[1:] if not a.startswith(("-", "+"))), None)
    else:
        path = core[0] if "/" in core[0] else None
    return _written_text(path, written) if path is not None else None


def _written_text(path: str, written: dict[str, str]) -> str | None:
    """The text an earlier command of the snippet wrote to ``path`` (``written``: path ->
    text), else to the last file of the same name (``cd`` moves are not followed)."""
    norm = posixpath.normpath(path)
    if norm in written:
        return written[norm]
    name = posixpath.basename(norm)
    same_name = [text for p, text in written.items() if posixpath.basename(p) == name]
    return same_name[-1] if same_name else None


def _remember_written(cmd: SimpleCommand, written: dict[str, str]) -> None:
    """Record the files ``cat > f <<EOF``, ``tee f <<EOF`` (or ``… | tee f``) and
    ``echo '…' > f`` write."""
    core = core_words(cmd.words)
    if not core:
        return
    prog = core[0].rsplit("/", 1)[-1]
    targets = list(cmd.writes)
    text = cmd.heredocs[0] if cmd.heredocs else None
    if prog == "tee":
        targets += [a for a in core[1:] if not a.startswith("-")]
    elif prog in ("echo", "printf") and targets:
        text = printed_text(core)
    elif prog != "cat":
        return
    if text is None:
        return
    for path in targets:
        written[posixpath.normpath(path)] = text


def _expand(script: ShellScript, depth: int = 0) -> None:
    """Add the commands run by each command: its ``inner_command`` (which reads the
    command's standard input when it is passed on, as ``ssh host python3 - <<EOF`` does),
    the shell script on its standard input, or the script file written earlier in the
    snippet that it runs."""
    if depth > _MAX_DEPTH:
        return
    written: dict[str, str] = {}
    for cmd in list(script.commands):
        _remember_written(cmd, written)
        inner = inner_command(cmd.words)
        stdin = cmd.heredocs if inner is not None and _passes_stdin(cmd.words) else ()
        if inner is None:
            fed = stdin_program(cmd)
            if fed is not None and fed[0] == "shell":
                inner = fed[1]
            elif written:
                inner = _script_run(cmd, written)
        if not inner:
            continue
        sub = _parse(inner, depth + 1, stdin)
        offset = len(script.loops)
        for loop in sub.loops:
            script.loops.append(Loop(loop.kind, loop.header, loop.id + offset))
        for c in sub.commands:
            c.loops = cmd.loops + tuple(lid + offset for lid in c.loops)
            c.nested = cmd.nested + 1 + c.nested
            script.commands.append(c)


def _parse(command: str, depth: int, stdin: tuple[str, ...] = ()) -> ShellScript:
    """bashlex, else the fallback tokenizer; then wrapped commands expanded up to ``_MAX_DEPTH``.
    ``stdin``: here-documents fed to the command that runs ``command`` (``ssh host '…' <<EOF``):
    its top-level commands without one of their own read them."""
    script = ShellScript(source=command)
    try:
        _from_bashlex(command, script)
    except Exception:  # bashlex raises many types (NotImplementedError, ParsingError …)
        script.commands.clear()
        script.loops.clear()
        script.parser = "fallback"
        _Tokenizer(command, script, loops=(), nested=0).run()
    _feed_pipes(script.commands)
    if stdin:
        for c in script.commands:
            if c.nested == 0 and not c.heredocs:
                c.heredocs = stdin
    _expand(script, depth)
    return script
