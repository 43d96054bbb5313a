"""A small, forgiving, linear-time shell lexer: enough of bash to find the commands in a line.

It splits on ``; & && || | newline ( )``, removes quotes, joins ``\\``-continued lines, records
redirections and here-document bodies. It never expands anything (``$(...)`` and ``$VAR``
stay as text) and never raises: unterminated quotes simply run to the end of the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_COMMAND_CHARS = 1_000_000
"""Longer commands are cut here: launches and scripts are far shorter."""

_PLAIN = re.compile(r"[^\s'\"\\;&|<>()#`$]+")
_REDIRECT = re.compile(r"(\d*)(>>|>\||>&|>|<<<|<<-|<<|<>|<&|<)|(&>>|&>)")
_OPERATOR = re.compile(r"&&|\|\||\|&|;;|[;&|()\n]")
_KEYWORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "{", "}", "time"})


@dataclass
class SimpleCommand:
    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    """(operator, target): ``('>', 'log')``, ``('2>&', '1')``, ``('<<', 'EOF')``."""
    heredocs: list[str] = field(default_factory=list)
    """Here-document bodies and here-strings (``<<< word``): texts on its standard input."""
    background: bool = False
    piped: bool = False
    """Its standard output goes to the next command (``|``)."""
    start: int = 0
    end: int = 0

    @property
    def text_targets(self) -> list[str]:
        """Files this command writes with ``>``/``>>``/``>|``/``&>``."""
        return [
            t
            for op, t in self.redirects
            if op.lstrip("0123456789") in (">", ">>", ">|", "&>", "&>>") and not op.startswith("2")
        ]


def _read_quoted(text: str, i: int, buf: list[str]) -> int:
    """Append the content of the quoted string starting at text[i]; return the index after it."""
    quote = text[i]
    if quote == "'":
        end = text.find("'", i + 1)
        end = len(text) if end < 0 else end
        buf.append(text[i + 1 : end])
        return end + 1
    j = i + 1
    n = len(text)
    while j < n:
        k = j
        while k < n and text[k] not in '"\\':
            k += 1
        buf.append(text[j:k])
        if k >= n:
            return n
        if text[k] == '"':
            return k + 1
        nxt = text[k + 1 : k + 2]
        if nxt == "\n":
            j = k + 2
        elif nxt in ('"', "\\", "$", "`"):
            buf.append(nxt)
            j = k + 2
        else:
            buf.append("\\")
            j = k + 1
    return n


def _read_dollar(text: str, i: int, buf: list[str]) -> int:
    """Copy ``$(...)``, ``${...}`` or a backtick span verbatim (balanced, quote-aware enough)."""
    if text[i] == "`":
        end = text.find("`", i + 1)
        end = len(text) if end < 0 else end + 1
        buf.append(text[i:end])
        return end
    if text[i + 1 : i + 2] not in ("(", "{"):
        buf.append("$")
        return i + 1
    opener = text[i + 1]
    closer = ")" if opener == "(" else "}"
    depth = 0
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                buf.append(text[i : j + 1])
                return j + 1
        elif c in "'\"":
            sub: list[str] = []
            j = _read_quoted(text, j, sub)
            continue
        j += 1
    buf.append(text[i:])
    return n


def _read_word(text: str, i: int) -> tuple[str, int]:
    buf: list[str] = []
    n = len(text)
    while i < n:
        m = _PLAIN.match(text, i)
        if m:
            buf.append(m.group())
            i = m.end()
            continue
        c = text[i]
        if c in "'\"":
            i = _read_quoted(text, i, buf)
        elif c == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt != "\n":
                buf.append(nxt)
            i += 2
        elif c in "$`":
            i = _read_dollar(text, i, buf)
        elif c == "#":
            buf.append(c)
            i += 1
        else:
            break
    return "".join(buf), i


def _read_heredoc(text: str, i: int, delimiter: str, strip_tabs: bool) -> tuple[str, int]:
    """Body lines from text[i] (start of a line) to the delimiter line; index after it."""
    lines: list[str] = []
    n = len(text)
    while i < n:
        end = text.find("\n", i)
        end = n if end < 0 else end
        line = text[i:end]
        check = line.lstrip("\t") if strip_tabs else line
        if check.rstrip("\r") == delimiter or check.strip() == delimiter:
            return "\n".join(lines) + "\n", end + 1
        lines.append(check)
        i = end + 1
    return "\n".join(lines), n


def split_commands(text: str) -> list[SimpleCommand]:
    """Simple commands of a shell snippet, in order; never raises."""
    text = text[:MAX_COMMAND_CHARS]
    out: list[SimpleCommand] = []
    cur = SimpleCommand()
    pending: list[tuple[SimpleCommand, str, bool]] = []
    i, n = 0, len(text)

    def finish(op: str | None = None) -> None:
        nonlocal cur
        cur.end = i
        cur.background = op == "&"
        cur.piped = op in ("|", "|&")
        while cur.words and cur.words[0] in _KEYWORDS:
            cur.words.pop(0)
        if cur.words or cur.heredocs or cur.redirects:
            out.append(cur)
        cur = SimpleCommand(start=i)

    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and text[i + 1 : i + 2] == "\n":
            i += 2
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        m = _REDIRECT.match(text, i)
        if m and (m.group(1) is not None or m.group(3)):
            op = m.group(3) or (m.group(1) + m.group(2))
            i = m.end()
            while i < n and text[i] in " \t":
                i += 1
            target, i = _read_word(text, i)
            cur.redirects.append((op, target))
            if op.endswith("<<<"):
                cur.heredocs.append(target)
            elif op.endswith("<<") or op.endswith("<<-"):
                pending.append((cur, target, op.endswith("-")))
            continue
        m = _OPERATOR.match(text, i)
        if m:
            op = m.group()
            i = m.end()
            finish(op)
            if op == "\n" and pending:
                for cmd, delimiter, strip_tabs in pending:
                    body, i = _read_heredoc(text, i, delimiter, strip_tabs)
                    cmd.heredocs.append(body)
                pending.clear()
            continue
        start = i
        word, i = _read_word(text, i)
        if i == start:  # a lone character no rule consumes; skip it
            i += 1
            continue
        if not cur.words:
            cur.start = start
        cur.words.append(word)
    finish()
    return out


def short_flags(options: list[str], with_value: str) -> set[str]:
    """Letters set by the short-option clusters among ``options`` (``-it`` -> i, t); a letter
    in ``with_value`` takes the rest of its word as value (``-p22``, ``-ePATH=/bin``)."""
    letters: set[str] = set()
    for option in options:
        if option.startswith("--") or not option.startswith("-"):
            continue
        for letter in option[1:]:
            letters.add(letter)
            if letter in with_value:
                break
    return letters


_PRINTF_DIRECTIVE = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?[sbdiqcfxXo])")


def printed_text(words: list[str]) -> str | None:
    """What ``echo …`` or ``printf FORMAT ARG…`` print (``words`` start with the program),
    to read a program piped into a shell (``echo '…' | bash``); None for other programs."""
    if not words:
        return None
    prog, args = words[0].rpartition("/")[2], words[1:]
    if prog == "echo":
        k = 0
        while k < len(args) and re.fullmatch(r"-[neE]+", args[k]):
            k += 1
        text = " ".join(args[k:])
        return _unescape(text) if any("e" in a for a in args[:k]) else text
    if prog == "printf" and args:
        return _printf(args[0], args[1:])
    return None


def _printf(fmt: str, args: list[str]) -> str:
    """Backslash escapes decoded, directives (``%s`` …) filled with the arguments in turn, the
    format reused while arguments remain, as bash's printf does."""
    fmt = _unescape(fmt)
    out: list[str] = []
    while True:
        used = last = 0
        for m in _PRINTF_DIRECTIVE.finditer(fmt):
            out.append(fmt[last : m.start()])
            if m.group() == "%%":
                out.append("%")
            else:
                out.append(args[used] if used < len(args) else "")
                used += 1
            last = m.end()
        out.append(fmt[last:])
        args = args[used:]
        if not args or used == 0:
            return "".join(out)


def _unescape(text: str) -> str:
    """``\\n``, ``\\t`` and ``\\\\`` as echo -e and printf read them."""
    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), "\\"), text)
