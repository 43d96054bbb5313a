"""Server launch commands -> typed launch specs; scripts written earlier resolved when run later.

Recognised entries: ``python[3] -m sglang.launch_server``, ``sglang serve``,
``python -m sglang_router.launch_server``, ``vllm serve MODEL``,
``python -m vllm.entrypoints.openai.api_server``. Wrappers peeled off: ``VAR=value`` prefixes,
``env``, ``nohup``, ``setsid``, ``sudo``, ``timeout``, ``nice``, ``exec``, ``time``, ``stdbuf``,
``taskset``, ``numactl``; ``ssh host '…'`` (host recorded), ``bash -c '…'``, ``docker exec …``.
``export`` and plain assignments earlier in the same snippet feed ``env`` and ``$VAR`` values.
A shell that reads its script from standard input (``bash``, ``bash -s``, ``ssh host``) runs
the here-document, the here-string or the literal text ``cat <<EOF``, ``echo`` or ``printf``
pipe into it; ``docker|podman|kubectl exec`` pass standard input on only with ``-i``, and
``ssh -n`` not at all.

Containers and services:
- ``docker|podman run [opts] IMAGE [cmd…]``: ``-e K=V`` feeds ``env``; the image is recorded as
  the flag ``docker:image`` (an image upgrade is a change worth diffing). A launch command after
  the image is parsed as usual; with a vLLM image (``vllm/vllm-openai``), whose entrypoint is the
  API server, the words after the image are its arguments.
- ``systemctl start|restart UNIT…`` (``enable --now`` starts them too): one launch per unit,
  flag ``systemd:unit``; the engine is sglang / vllm when the unit name says so, else ``other``.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from analytics.models import Launch

from .flags import (
    FlagSpec,
    available_tables,
    guess_value,
    is_switch,
    resolve_flag,
    suggest_flag,
    takes_list,
    typed_value,
)
from .shell import SimpleCommand, printed_text, short_flags, split_commands

MAX_DEPTH = 4
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--admin-api-key"})
_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY|APIKEY", re.I)
REDACTED = "<redacted>"

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_NUMBER = re.compile(r"-\d+(\.\d+)?")
_VAR_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_QUOTING = str.maketrans("", "", "\\'\"\n")
"""Characters the lexer can remove from between the letters of one word."""
_ASSIGN_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
MAX_NAMES_CHECKED = 256
_SSH_OPTS_WITH_ARG = frozenset("bcDEeFIiJLlmOopQRSWw")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SEARCH_LAUNCHERS = frozenset(
    {
        "docker",
        "podman",
        "uv",
        "conda",
        "mamba",
        "micromamba",
        "srun",
        "mpirun",
        "nsys",
        "ncu",
        "apptainer",
        "singularity",
        "pixi",
        "poetry",
        "torchrun",
        "enroot",
    }
)
_MODULES = {
    "sglang.launch_server": "sglang",
    "sglang_router.launch_server": "sglang",
    "vllm.entrypoints.openai.api_server": "vllm",
}


@dataclass
class LaunchSpec:
    """A launch found in a command, before it is tied to a session message."""

    engine: str
    model: str | None = None
    host: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    unknown_flags: dict[str, str | None] = field(default_factory=dict)
    command: str = ""
    flag_tables: list[str] = field(default_factory=list)
    """Flag-table versions (oldest first) in which every known flag of this launch resolves to
    the same name; empty when no single table knows them all (a mix of old and new flags).
    Not carried into ``Launch`` -- its flags stay canonical names only."""

    def to_launch(self, session_id: str, msg_idx: int, call_id: str | None) -> Launch:
        return Launch(
            session_id=session_id,
            msg_idx=msg_idx,
            call_id=call_id,
            engine=self.engine,
            model=self.model,
            host=self.host,
            flags=dict(self.flags),
            env=dict(self.env),
            unknown_flags=dict(self.unknown_flags),
        )


class ScriptMemory:
    """Files written during a session (heredocs, ``tee``, ``echo >``, write tools), by path."""

    def __init__(self) -> None:
        self._files: dict[tuple[str | None, str], str] = {}
        self._by_name: dict[str, list[tuple[str | None, str]]] = {}
        self._unquoted_names: set[str] = set()

    def remember(self, path: str, body: str, host: str | None = None) -> None:
        key = (host, posixpath.normpath(path))
        self._files[key] = body
        name = posixpath.basename(key[1])
        names = self._by_name.setdefault(name, [])
        if key not in names:
            names.append(key)
        self._unquoted_names.add(name.translate(_QUOTING))

    def lookup(self, path: str, host: str | None = None) -> str | None:
        norm = posixpath.normpath(path)
        for key in ((host, norm), (None, norm)):
            if key in self._files:
                return self._files[key]
        same_name = self._by_name.get(posixpath.basename(norm), [])
        if same_name:
            return self._files[same_name[-1]]
        return None

    def __len__(self) -> int:
        return len(self._files)

    def state(self) -> list[list[str | None]]:
        """``[host, path, body]`` per file, in the order first written (JSON-serialisable);
        ``ScriptMemory.from_state`` rebuilds an equal memory, same-name lookups included."""
        return [[host, path, body] for (host, path), body in self._files.items()]

    @classmethod
    def from_state(cls, rows: list[list[str | None]]) -> ScriptMemory:
        memory = cls()
        for host, path, body in rows:
            if not isinstance(path, str) or not isinstance(body, str):
                raise ValueError(f"script memory row needs a path and a body, got {path!r}")
            memory.remember(path, body, host)
        return memory

    def may_be_named_in(self, unquoted: str) -> bool:
        """False only if no remembered file can be looked up from a command whose text, with
        ``_QUOTING`` characters removed, is ``unquoted`` (a lookup needs the file's base name)."""
        names = self._unquoted_names
        if not names:
            return False
        if len(names) > MAX_NAMES_CHECKED or not names.isdisjoint(("", ".", "..")):
            return True
        return any(name in unquoted for name in names)


# --------------------------------------------------------------------------- public API


_INFO_SWITCHES = frozenset({"--help", "-h", "--version"})


def parse_launches(
    command: str, scripts: ScriptMemory | None = None, host: str | None = None
) -> list[LaunchSpec]:
    """Every server launch in a shell snippet (scripts in ``scripts`` are followed)."""
    scripts = scripts if scripts is not None else ScriptMemory()
    if not _may_matter(command, scripts):
        return []
    walker = _Walker(scripts)
    walker.walk(command, host, {}, 0)
    return walker.found


WHOLE_FILE_TOOLS = frozenset({"write", "create", "write_file", "str_replace_based_edit_tool"})
"""Editor tools (lower-cased names) whose JSON input can hold a whole file's text."""


def remember_written_file(scripts: ScriptMemory, tool: str | None, tool_input: str | None) -> None:
    """Record a file written by an editor tool (``Write``/``write``/``create``) from its JSON input."""
    if not tool_input or not tool or tool.lower() not in WHOLE_FILE_TOOLS:
        return
    try:
        data = json.loads(tool_input)
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    path = data.get("file_path") or data.get("filePath") or data.get("path")
    body = data.get("content") or data.get("file_text")
    if isinstance(path, str) and isinstance(body, str):
        scripts.remember(path, body)


def disaggregation_role(flags: dict[str, Any]) -> str | None:
    """The part a server plays in a prefill/decode disaggregated deployment: SGLang's
    ``--disaggregation-mode`` (prefill | decode), vLLM's ``kv_role`` in
    ``--kv-transfer-config`` (kv_producer | kv_consumer | kv_both); None for a whole server."""
    mode = flags.get("--disaggregation-mode")
    if isinstance(mode, str) and mode != "null":
        return mode
    config = flags.get("--kv-transfer-config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    role = config.get("kv_role") if isinstance(config, dict) else None
    return role if isinstance(role, str) else None


def server_of(engine: str, host: str | None, flags: dict[str, Any]) -> str:
    """Which server a launch (re)starts, as ``LaunchHistory`` tells them apart: its engine,
    host and disaggregation role."""
    return f"{engine}@{host or ''}/{disaggregation_role(flags) or ''}"


class LaunchHistory:
    """The launches of a session so far, to find the one a new launch changes: the last
    launch of the same engine on the same host (on the same ``--port`` if there is one),
    except that the servers of a disaggregated deployment (``disaggregation_role``) run
    side by side: a prefill server is compared with the last prefill server (else the last
    whole server), never with the decode server started a moment before."""

    def __init__(self) -> None:
        self.last: dict[str, Launch] = {}
        """The last launch of each server (``server_of``) and ``--port``, by ``_key``."""

    @staticmethod
    def _key(launch: Launch) -> str:
        return f"{server_of(launch.engine, launch.host, launch.flags)}:{launch.flags.get('--port', '')}"

    def previous(self, launch: Launch) -> Launch | None:
        server = server_of(launch.engine, launch.host, launch.flags)
        whole = server_of(launch.engine, launch.host, {})  # (a whole server's: no role)
        servers = [(server_of(v.engine, v.host, v.flags), v) for v in self.last.values()]
        same = [v for s, v in servers if s == server]
        # no earlier launch of its role: a whole server follows any launch of its engine and
        # host, a prefill or decode server only a whole one
        others = same or [v for s, v in servers if s == whole or (server == whole and s.startswith(whole))]
        port = launch.flags.get("--port")
        on_port = [v for v in others if v.flags.get("--port") == port]
        return max(on_port or others, key=lambda v: v.msg_idx, default=None)

    def add(self, launch: Launch) -> None:
        self.last[self._key(launch)] = launch


def diff_launches(launches: list[Launch]) -> list[Launch]:
    """Fill ``changed_flags`` ({flag: [before, after]}) against the launch it changes in the
    same session (``LaunchHistory``); a session's first launch of a server gets None.
    Returns the list."""
    histories: dict[str, LaunchHistory] = {}
    for launch in launches:
        history = histories.setdefault(launch.session_id, LaunchHistory())
        before = history.previous(launch)
        launch.changed_flags = None if before is None else flag_changes(before, launch)
        history.add(launch)
    return launches


def model_flag(engine: str) -> str:
    """The flag that names an engine's model (``vllm serve`` also takes it as its first
    argument)."""
    return "--model-path" if engine == "sglang" else "--model"


def flag_changes(before: Launch, after: Launch) -> dict[str, object]:
    """{setting: [before, after]} of the settings that differ. The model is one setting,
    ``model``, however it was given (``vllm serve M`` or ``--model M``)."""
    old, new = _settings(before), _settings(after)
    return {
        k: [old.get(k), new.get(k)]
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k)
    }


def _settings(launch: Launch) -> dict[str, object]:
    """A launch's flags with its model under ``model`` instead of the engine's model flag."""
    if not launch.model:
        return dict(launch.flags)
    named_by = model_flag(launch.engine)
    settings = {k: v for k, v in launch.flags.items() if k != named_by}
    settings["model"] = launch.model
    return settings


def _may_matter(command: str, scripts: ScriptMemory) -> bool:
    """False only when walking ``command`` can neither find a launch nor write or run a script,
    decided without lexing: most commands (``tail``, ``curl``, ``grep``) are skipped here."""
    if _may_launch(command):
        return True
    return len(scripts) > 0 and scripts.may_be_named_in(_unquoted(command))


@lru_cache(maxsize=4096)
def _may_launch(command: str) -> bool:
    """What ``_may_matter`` says before looking at the scripts remembered: it depends on the
    text alone, and agents rerun the same commands (cached).

    Checked on the text without quotes, backslashes and newlines, so quoting cannot split a
    word; ``$VAR`` expansion can build words, so a snippet that assigns and expands is walked.
    """
    s = _unquoted(command)
    if "launch_server" in s or "api_server" in s:
        return True
    if "serve" in s and ("sglang" in s or "vllm" in s):
        return True
    if "systemctl" in s or (" run" in s and ("sglang" in s or "vllm" in s)):
        return True
    if "<<" in s or (">" in s and ("echo" in s or "printf" in s)):
        return True
    if "$" in s and "=" in s and _ASSIGN_LIKE.search(s):  # `in` first: the search is slower
        return True
    return False


def _unquoted(command: str) -> str:
    """``command`` without ``_QUOTING`` characters; most commands hold none, and four
    ``in`` tests cost a small part of a ``translate``."""
    if "'" in command or '"' in command or "\\" in command or "\n" in command:
        return command.translate(_QUOTING)
    return command


# --------------------------------------------------------------------------- walking commands


class _Walker:
    def __init__(self, scripts: ScriptMemory) -> None:
        self.scripts = scripts
        self.found: list[LaunchSpec] = []

    def walk(
        self, text: str, host: str | None, env: dict[str, str], depth: int, stdin: str | None = None
    ) -> None:
        """Walk the commands of ``text``; ``stdin``: what the command running ``text`` reads
        (``ssh host 'bash -s' <<EOF``), read by those of its commands given no other input."""
        if depth > MAX_DEPTH:
            return
        local_env = dict(env)
        variables: dict[str, str] = {}
        commands = split_commands(text)
        for n, cmd in enumerate(commands):
            prev = commands[n - 1] if n else None
            fed = _stdin_text(cmd, prev)
            reads = stdin if fed is None else fed
            self._remember_files(cmd, prev, host, reads)
            self._command(cmd, host, local_env, variables, depth, reads)

    def _remember_files(
        self, cmd: SimpleCommand, prev: SimpleCommand | None, host: str | None, stdin: str | None
    ) -> None:
        """Files ``cmd`` writes: ``cat``/``tee`` of a here-document or of the text on their
        standard input (``stdin``: ``ssh host "cat > run.sh" <<'EOF'`` writes the remote
        file), ``echo``/``printf`` redirected."""
        if not cmd.words:
            return
        head = posixpath.basename(cmd.words[0])
        body: str | None = None
        targets = cmd.text_targets
        if cmd.heredocs and head in ("cat", "tee"):
            body = cmd.heredocs[0]
        elif head == "tee" and prev is not None and prev.heredocs and not prev.text_targets:
            body = prev.heredocs[0]
        elif stdin is not None and (
            head == "tee" or (head == "cat" and all(w.startswith("-") for w in cmd.words[1:]))
        ):
            body = stdin
        elif head in ("echo", "printf") and targets:
            body = " ".join(cmd.words[1:])
            if head == "printf":
                body = body.replace("\\n", "\n")
        if body is None:
            return
        if head == "tee":
            targets = targets + [w for w in cmd.words[1:] if not w.startswith("-")]
        for target in targets:
            self.scripts.remember(target, body, host)

    def _command(
        self,
        cmd: SimpleCommand,
        host: str | None,
        env: dict[str, str],
        variables: dict[str, str],
        depth: int,
        stdin: str | None = None,
    ) -> None:
        """Record the launches ``cmd`` makes; ``stdin``: the text on its standard input."""
        words = [_expand(w, variables) for w in cmd.words]
        if not words:
            return
        if words[0] == "export" or all(_ASSIGN.fullmatch(w) for w in words):
            for w in words[1:] if words[0] == "export" else words:
                m = _ASSIGN.fullmatch(w)
                if m:
                    variables[m.group(1)] = m.group(2)
                    if words[0] == "export":
                        env[m.group(1)] = m.group(2)
            return
        prefix_env, rest = _unwrap(words)
        cmd_env = {**env, **prefix_env}
        if not rest:
            return
        head = posixpath.basename(rest[0])
        if head == "ssh":
            target, remote = _ssh(rest)
            stdin = stdin if _ssh_passes_stdin(rest) else None
            if remote:
                self.walk(remote, target or host, cmd_env, depth + 1, stdin)
            elif stdin:  # ssh host <<EOF: the remote shell runs the here-document
                self.walk(stdin, target or host, cmd_env, depth + 1)
            return
        inner, interactive = _exec_inner(rest)
        if inner and posixpath.basename(inner[0]) in _SHELLS:  # docker exec -i ctr bash <<EOF
            if interactive and stdin and _script_from_stdin(inner[1:]):
                self.walk(stdin, host, cmd_env, depth + 1)
            return
        if head in ("docker", "podman") and len(rest) > 1 and rest[1] == "run":
            self._container(rest, host, cmd_env, " ".join(words), depth)
            return
        if head in _SHELLS | {"su"} and "-c" in rest:
            i = rest.index("-c")
            if i + 1 < len(rest):
                self.walk(rest[i + 1], host, cmd_env, depth + 1)
            return
        if head in _SHELLS and stdin and _script_from_stdin(rest[1:]):
            self.walk(stdin, host, cmd_env, depth + 1)
            return
        if head in _SEARCH_LAUNCHERS and "-c" in rest[1:]:
            i = rest.index("-c")
            if i + 1 < len(rest) and posixpath.basename(rest[i - 1]) in _SHELLS:
                self.walk(rest[i + 1], host, cmd_env, depth + 1)
                return
        if head == "systemctl":
            for spec in _systemctl(rest, host, cmd_env, " ".join(words)):
                self.found.append(self._unit_launch(spec, host, cmd_env, depth))
            return
        entry = _find_entry(rest, search=head in _SEARCH_LAUNCHERS)
        if entry and _prints_and_exits(rest[entry[2] :]):
            return
        if entry:
            engine, start, args_at = entry
            for w in rest[:start]:
                m = _ASSIGN.fullmatch(w)
                if m:
                    cmd_env[m.group(1)] = m.group(2)
            self._add(_spec(engine, rest[args_at:], host, cmd_env, " ".join(words)), host)
            return
        script = _script_path(rest)
        if script:
            body = self.scripts.lookup(script, host)
            if body is not None:
                self.walk(body, host, cmd_env, depth + 1)

    def _unit_launch(
        self, spec: LaunchSpec, host: str | None, env: dict[str, str], depth: int
    ) -> LaunchSpec:
        """The server a unit started, with the flags of its ``ExecStart=`` when the session
        wrote the unit file (``/etc/systemd/system/vllm.service``); else ``spec`` as it is."""
        unit = str(spec.flags["systemd:unit"])
        names = [unit] if "." in unit else [unit, f"{unit}.service"]
        body = next((b for n in names if (b := self.scripts.lookup(n, host)) is not None), None)
        command = _exec_start(body) if body is not None else None
        if command is None:
            return spec
        inner = _Walker(self.scripts)
        inner.walk(command, host, env, depth + 1)
        served = [s for s in inner.found if s.engine != "other"]
        if len(served) != 1:
            return spec
        served[0].flags["systemd:unit"] = unit
        served[0].command = spec.command
        return served[0]

    def _add(self, spec: LaunchSpec, host: str | None) -> None:
        """Record ``spec`` with the flags of its ``--config`` file, when the session wrote it."""
        path = spec.flags.get("--config")
        body = self.scripts.lookup(path, host) if isinstance(path, str) else None
        if body is not None:
            _merge_config(spec, body)
        self.found.append(spec)

    def _container(
        self, words: list[str], host: str | None, env: dict[str, str], command: str, depth: int
    ) -> None:
        parsed = _docker_run(words)
        if parsed is None:
            return
        image, inner, docker_env = parsed
        env = {**env, **docker_env}
        before = len(self.found)
        entry = _find_entry(inner, search=True)
        if entry:
            engine, _, args_at = entry
            self._add(_spec(engine, inner[args_at:], host, env, command), host)
        elif inner and posixpath.basename(inner[0]) in _SHELLS and "-c" in inner:
            i = inner.index("-c")
            if i + 1 < len(inner):
                self.walk(inner[i + 1], host, env, depth + 1)
        elif _image_engine(image) == "vllm" and not (inner and _is_shell_or_python(inner[0])):
            self._add(_spec("vllm", inner, host, env, command), host)
        for spec in self.found[before:]:
            spec.flags["docker:image"] = image


_DOCKER_SWITCHES = frozenset(
    {
        "--rm",
        "--privileged",
        "--init",
        "--detach",
        "--interactive",
        "--tty",
        "--read-only",
        "--publish-all",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--sig-proxy",
        "--quiet",
    }
)
_DOCKER_SHORT_SWITCHES = frozenset("ditPq")


def _docker_run(words: list[str]) -> tuple[str, list[str], dict[str, str]] | None:
    """``docker run [opts] IMAGE [cmd…]`` -> (image, command words, ``-e K=V`` env); an
    ``--entrypoint`` is put in front of the command words."""
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    i, n = 2, len(words)
    while i < n and words[i].startswith("-"):
        opt, eq, inline = words[i].partition("=")
        takes_value = not eq and not (
            opt in _DOCKER_SWITCHES
            or (not opt.startswith("--") and set(opt[1:]) <= _DOCKER_SHORT_SWITCHES)
        )
        value = words[i + 1] if takes_value and i + 1 < n else inline
        if opt in ("-e", "--env") and (m := _ASSIGN.fullmatch(value)):
            env[m.group(1)] = m.group(2)
        elif opt == "--entrypoint" and value:
            entrypoint = value.split()
        i += 2 if takes_value else 1
    if i >= n:
        return None
    return words[i], entrypoint + words[i + 1 :], env


def _image_engine(image: str) -> str | None:
    name = image.rpartition("/")[2].partition(":")[0].partition("@")[0].lower()
    repo = image.lower()
    for engine in ("sglang", "vllm"):
        if engine in name or engine in repo.partition(":")[0]:
            return engine
    return None


def _stdin_text(cmd: SimpleCommand, prev: SimpleCommand | None) -> str | None:
    """What ``cmd`` reads on its standard input when the snippet spells it out: its
    here-document or here-string, or the literal text the command before pipes into it
    (``cat <<EOF |``, ``echo '…' |``, ``printf '…' |``)."""
    if cmd.heredocs:
        return cmd.heredocs[0]
    if prev is None or not prev.piped or prev.text_targets or not prev.words:
        return None
    if posixpath.basename(prev.words[0]) == "cat":
        plain = all(w == "-" for w in prev.words[1:])
        return prev.heredocs[0] if prev.heredocs and plain else None
    return printed_text(prev.words)


def _ssh_passes_stdin(words: list[str]) -> bool:
    """``ssh -n`` (and ``-f``, which implies it) reads /dev/null, not the caller's input."""
    i, options = 1, []
    while i < len(words) and words[i].startswith("-"):
        options.append(words[i])
        i += 2 if len(words[i]) == 2 and words[i][1] in _SSH_OPTS_WITH_ARG else 1
    return not short_flags(options, "".join(_SSH_OPTS_WITH_ARG)) & {"n", "f"}


_DOCKER_EXEC_VALUES = frozenset(
    {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys"}
)


def _exec_inner(words: list[str]) -> tuple[list[str], bool]:
    """``docker|podman exec [opts] CTR CMD…`` and ``kubectl exec [opts] POD -- CMD…`` ->
    (CMD words, whether CMD gets the caller's standard input: only with ``-i``,
    ``--interactive``, ``--stdin``); ``([], False)`` for any other command."""
    head = posixpath.basename(words[0])
    if words[1:2] != ["exec"]:
        return [], False
    if head in ("docker", "podman"):
        i, options, with_value = 2, [], "euw"
        while i < len(words) and words[i].startswith("-"):
            options.append(words[i])
            i += 2 if words[i] in _DOCKER_EXEC_VALUES else 1
        inner = words[i + 1 :]
    elif head == "kubectl" and "--" in words:
        end = words.index("--")
        options, inner, with_value = words[2:end], words[end + 1 :], "cfn"
    else:
        return [], False
    long_stdin = [o for o in options if o.startswith(("--interactive", "--stdin"))]
    stdin = any(not o.endswith("=false") for o in long_stdin)
    return inner, stdin or "i" in short_flags(options, with_value)


def _script_from_stdin(args: list[str]) -> bool:
    """A shell given these ``args`` reads its script from standard input (``bash``,
    ``bash -ex``, ``bash -s -- arg``), not from a file named among them."""
    for a in args:
        if a in ("-s", "--"):
            return True
        if not a.startswith("-"):
            return False
    return True


def _is_shell_or_python(word: str) -> bool:
    head = posixpath.basename(word)
    return head in _SHELLS or bool(_PYTHON.fullmatch(head))


def _systemctl(
    words: list[str], host: str | None, env: dict[str, str], command: str
) -> list[LaunchSpec]:
    """``systemctl [opts] start|restart UNIT…`` (or ``enable --now UNIT…``, which starts
    them too) -> one launch per unit."""
    rest = [w for w in words[1:] if not w.startswith("-")]
    starts = ("start", "restart", "try-restart", "reload-or-restart")
    enables_now = bool(rest) and rest[0] in ("enable", "reenable") and "--now" in words
    if not rest or not (rest[0] in starts or enables_now):
        return []
    out = []
    for unit in rest[1:]:
        lowered = unit.lower()
        engine = "sglang" if "sglang" in lowered else "vllm" if "vllm" in lowered else "other"
        spec = _spec(engine, [], host, env, command)
        spec.flags["systemd:unit"] = unit
        out.append(spec)
    return out


_EXEC_START = re.compile(r"^\s*ExecStart\s*=\s*[-@:+!]*(.*\S)\s*$", re.M)


def _exec_start(unit_file: str) -> str | None:
    """The command of a unit file's last non-empty ``ExecStart=`` (systemd.service(5): the
    ``-@:+!`` prefixes are not part of it; a line ending in ``\\`` continues)."""
    text = unit_file.replace("\\\n", " ")
    found = [m.group(1) for m in _EXEC_START.finditer(text)]
    return found[-1] if found else None


def _expand(word: str, variables: dict[str, str]) -> str:
    if "$" not in word or not variables:
        return word
    return _VAR_REF.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def _unwrap(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Peel ``VAR=x``, env, nohup, setsid, sudo, timeout … off the front of a command."""
    env: dict[str, str] = {}
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        m = _ASSIGN.fullmatch(w)
        if m:
            env[m.group(1)] = m.group(2)
            i += 1
            continue
        head = posixpath.basename(w)
        if head in ("nohup", "exec", "time", "command", "builtin"):
            i += 1
        elif head in ("env", "setsid", "stdbuf", "sudo", "nice", "ionice", "chrt"):
            i += 1
            while i < n and words[i].startswith("-"):
                takes_arg = words[i] in ("-u", "-n", "-g", "-c", "-p") and head in (
                    "env",
                    "sudo",
                    "nice",
                    "ionice",
                )
                i += 2 if takes_arg else 1
        elif head in ("timeout", "taskset"):
            i += 1
            while i < n and words[i].startswith("-"):
                i += 2 if words[i] in ("-s", "-k", "--signal", "--kill-after") else 1
            i += 1  # the duration / cpu list
        elif head == "numactl":
            i += 1
            while i < n and words[i].startswith("-"):
                i += 1 if "=" in words[i] or words[i].startswith("--") else 2
        else:
            break
    return env, words[i:]


def _ssh(words: list[str]) -> tuple[str | None, str]:
    i, n = 1, len(words)
    while i < n and words[i].startswith("-"):
        opt = words[i]
        i += 2 if len(opt) == 2 and opt[1] in _SSH_OPTS_WITH_ARG else 1
    if i >= n:
        return None, ""
    target = words[i].rpartition("@")[2] or None
    return target, " ".join(words[i + 1 :])


def _find_entry(words: list[str], search: bool) -> tuple[str, int, int] | None:
    """(engine, index where the interpreter/CLI starts, index where its arguments start)."""
    starts = range(len(words)) if search else range(min(1, len(words)))
    for i in starts:
        head = posixpath.basename(words[i])
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if head in ("sglang", "vllm") and nxt == "serve":
            return head, i, i + 2
        if _PYTHON.fullmatch(head):
            j = i + 1
            while j < len(words) and words[j].startswith("-") and words[j] != "-m":
                j += 1
            if j + 1 < len(words) and words[j] == "-m" and words[j + 1] in _MODULES:
                return _MODULES[words[j + 1]], i, j + 2
            if j < len(words) and words[j].endswith("sglang/launch_server.py"):
                return "sglang", i, j + 1
    return None


def _prints_and_exits(args: list[str]) -> bool:
    """An argparse CLI given ``--help`` (vLLM: ``--help=GROUP``), ``-h`` or ``--version`` prints
    and exits: no server starts."""
    return any(w in _INFO_SWITCHES or w.startswith("--help=") for w in args)


def _script_path(words: list[str]) -> str | None:
    head = posixpath.basename(words[0])
    if head in _SHELLS or head in ("source", "."):
        for w in words[1:]:
            if not w.startswith("-"):
                return w
        return None
    if "/" in words[0] or words[0].endswith(".sh"):
        return words[0]
    return None


# --------------------------------------------------------------------------- flags


def _spec(
    engine: str, args: list[str], host: str | None, env: dict[str, str], command: str
) -> LaunchSpec:
    spec = LaunchSpec(engine=engine, host=host, command=command)
    versions = set(available_tables(engine))
    for var, text in env.items():
        safe = REDACTED if _SECRET_ENV.search(var) else text
        spec.env[var] = safe
        spec.flags[f"env:{var}"] = safe
    positionals: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word == "-" or _NUMBER.fullmatch(word):
            positionals.append(word)
            continue
        name, eq, inline = _split_inline(engine, word)
        match = resolve_flag(engine, name)
        flag_spec, negated = (match.spec, match.negated) if match else (None, False)
        if match is None:
            spec.unknown_flags[name] = suggest_flag(engine, name)
            canon = name
        else:
            canon = match.canonical
            versions.intersection_update(match.versions)
        if eq:
            value: Any = (
                [typed_value(flag_spec, v) for v in inline.split(",")]
                if takes_list(flag_spec) and "," in inline
                else typed_value(flag_spec, inline)
            )
        elif negated or _is_bool_switch(flag_spec):
            value = not negated and not (flag_spec and flag_spec.action == "store_false")
        elif takes_list(flag_spec):
            values: list[Any] = []
            while i < len(args) and not _is_flag(args[i]):
                values.append(typed_value(flag_spec, args[i]))
                i += 1
            value = values
        elif i < len(args) and not (
            _is_flag(args[i]) and (flag_spec is not None or args[i].startswith("--"))
        ):
            value = typed_value(flag_spec, args[i]) if flag_spec else guess_value(args[i])
            i += 1
        else:
            value = True
        spec.flags[canon] = REDACTED if canon in SECRET_FLAGS else value
    model = spec.flags.get(model_flag(engine))
    if model is None and engine == "vllm" and positionals:
        model = positionals[0]
    spec.model = str(model) if model is not None else None
    spec.flag_tables = [v for v in available_tables(engine) if v in versions]
    return spec


def _merge_config(spec: LaunchSpec, body: str) -> None:
    """Add the flags set in a YAML ``--config`` file (``tensor-parallel-size: 4``), which
    ``vllm serve`` and SGLang read as if given on the command line. A flag given on the
    command line wins, as in both tools; nested blocks and lists are left out."""
    for m in _CONFIG_ITEM.finditer(body):
        key, text = m.group(1), _unquote_scalar(m.group(2))
        match = resolve_flag(spec.engine, "--" + key.replace("_", "-"))
        canon = match.canonical if match else "--" + key.replace("_", "-")
        if canon in spec.flags:
            continue
        if match is None:
            spec.unknown_flags[canon] = suggest_flag(spec.engine, canon)
        value = typed_value(match.spec, text) if match else guess_value(text)
        spec.flags[canon] = REDACTED if canon in SECRET_FLAGS else value
    if spec.model is None:
        model = spec.flags.get(model_flag(spec.engine))
        spec.model = str(model) if model is not None else None


_CONFIG_ITEM = re.compile(r"^([A-Za-z][\w-]*):[ \t]+([^\s#\[{|>&*!][^#\n]*?)[ \t]*(?:#.*)?$", re.M)
"""A top-level ``key: scalar`` line of a YAML file."""


def _unquote_scalar(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _split_inline(engine: str, word: str) -> tuple[str, str, str]:
    """``--flag=value`` and ``-tp=2`` as (name, "=", value); argparse takes ``=`` after a
    short option too. A single-dash word whose part before ``=`` is no known flag stays whole."""
    name, eq, inline = word.partition("=")
    if eq and (word.startswith("--") or resolve_flag(engine, name) is not None):
        return name, eq, inline
    return word, "", ""


def _is_flag(word: str) -> bool:
    return word.startswith("-") and word != "-" and not _NUMBER.fullmatch(word)


def _is_bool_switch(flag_spec: FlagSpec | None) -> bool:
    return is_switch(flag_spec) or (
        flag_spec is not None and flag_spec.action == "BooleanOptionalAction"
    )
