"""A builder that records an opencode session and renders it as `opencode export` JSON."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .common import Clock, Hint, Ids, dumps_pretty, epoch_ms

AGENT_PROVIDER = "anthropic"
AGENT_MODEL = "claude-opus-4-5"


@dataclass
class Tool:
    """One bash tool call inside an assistant step."""

    command: str
    output: str
    description: str
    dur: float = 2.0
    exit: int = 0
    aborted: bool = False


@dataclass
class _Msg:
    info: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)


class OpencodeSession:
    def __init__(self, *, rng: random.Random, clock: Clock, title: str, directory: str,
                 file_name: str, version: str = "1.14.46") -> None:
        self.rng = rng
        self.clock = clock
        self.ids = Ids(rng)
        self.file_name = file_name
        self.directory = directory
        self.version = version
        self.created = clock.ms()
        self.session_id = self.ids.opencode("ses", clock.t, descending=True)
        self.title = title
        self.messages: list[_Msg] = []
        self.hints: list[Hint] = []
        self.last_user: str = ""
        self.tokens_in = 18000
        self.cost = 0.0
        self.additions = 0

    # ------------------------------------------------------------------ recording
    def hint(self, msg_id: str, *tags: str, note: str = "") -> None:
        for tag in tags:
            self.hints.append(Hint(self.file_name, msg_id, tag, note))

    def user(self, text: str, gap: float = 40.0) -> str:
        self.clock.advance(gap)
        t = self.clock.t
        mid = self.ids.opencode("msg", t)
        info = {
            "id": mid, "sessionID": self.session_id, "role": "user",
            "time": {"created": epoch_ms(t)},
            "summary": {"diffs": []},
            "agent": "build",
            "model": {"providerID": AGENT_PROVIDER, "modelID": AGENT_MODEL},
        }
        msg = _Msg(info)
        msg.parts.append({"id": self.ids.opencode("prt", t), "sessionID": self.session_id,
                          "messageID": mid, "type": "text", "text": text})
        self.messages.append(msg)
        self.last_user = mid
        return mid

    def step(self, think: str | None = None, text: str | None = None, tools: list[Tool] | None = None,
             gap: float | None = None) -> str:
        """One assistant message = one model step: step-start, reasoning, text, tool parts, step-finish."""
        self.clock.advance(gap if gap is not None else self.rng.uniform(2.5, 9.0))
        t0 = self.clock.t
        mid = self.ids.opencode("msg", t0)
        parts: list[dict[str, Any]] = []
        base = {"sessionID": self.session_id, "messageID": mid}
        snap = self.ids.hexs(40)
        parts.append({"id": self.ids.opencode("prt", t0), **base, "type": "step-start", "snapshot": snap})
        out_tokens = 0
        reasoning_tokens = 0
        if think:
            s = self.clock.ms()
            self.clock.advance(len(think) / 220.0 + 0.4)
            parts.append({"id": self.ids.opencode("prt", self.clock.t), **base, "type": "reasoning",
                          "text": think, "time": {"start": s, "end": self.clock.ms()}})
            reasoning_tokens = len(think) // 4
        if text:
            s = self.clock.ms()
            self.clock.advance(len(text) / 260.0 + 0.2)
            parts.append({"id": self.ids.opencode("prt", self.clock.t), **base, "type": "text",
                          "text": text, "time": {"start": s, "end": self.clock.ms()}})
            out_tokens += len(text) // 4
        aborted = False
        for tool in tools or []:
            s = self.clock.ms()
            self.clock.advance(tool.dur)
            e = self.clock.ms()
            inp = {"command": tool.command, "description": tool.description}
            out_tokens += len(tool.command) // 4 + 12
            if tool.aborted:
                aborted = True
                state: dict[str, Any] = {
                    "status": "error", "input": inp, "error": "Tool execution aborted",
                    "metadata": {"interrupted": True, "description": tool.description,
                                 "output": tool.output + "\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"},
                    "time": {"start": s, "end": e},
                }
            else:
                state = {
                    "status": "completed", "input": inp, "output": tool.output,
                    "title": tool.description,
                    "metadata": {"output": tool.output, "exit": tool.exit, "description": tool.description,
                                 "truncated": False},
                    "time": {"start": s, "end": e},
                }
            parts.append({"id": self.ids.opencode("prt", self.clock.t), **base, "type": "tool",
                          "callID": f"toolu_01{self.ids.b62(22)}", "tool": "bash", "state": state})
        self.tokens_in += out_tokens + sum(len(x.output) // 4 for x in tools or []) + 60
        cost = round(self.tokens_in * 0.0000005 + (out_tokens + reasoning_tokens) * 0.000025, 6)
        self.cost += cost
        finish = "tool-calls" if tools else "stop"
        tokens = {"input": self.rng.randint(2, 12), "output": out_tokens + 8, "reasoning": reasoning_tokens,
                  "cache": {"read": self.tokens_in, "write": self.rng.randint(300, 4000)}}
        if not aborted:
            parts.append({"id": self.ids.opencode("prt", self.clock.t), **base, "type": "step-finish",
                          "reason": finish, "snapshot": self.ids.hexs(40), "cost": cost, "tokens": tokens})
        info: dict[str, Any] = {
            "id": mid, "sessionID": self.session_id, "role": "assistant",
            "time": {"created": epoch_ms(t0), "completed": self.clock.ms()},
            "parentID": self.last_user, "modelID": AGENT_MODEL, "providerID": AGENT_PROVIDER,
            "mode": "build", "agent": "build",
            "path": {"cwd": self.directory, "root": self.directory},
            "cost": cost, "tokens": tokens,
        }
        if aborted:
            info["error"] = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
        else:
            info["finish"] = finish
        self.messages.append(_Msg(info, parts))
        return mid

    def bash(self, command: str, output: str, description: str, *, think: str | None = None,
             text: str | None = None, dur: float = 2.0, exit: int = 0, gap: float | None = None,
             aborted: bool = False) -> str:
        return self.step(think, text, [Tool(command, output, description, dur, exit, aborted)], gap)

    def say(self, text: str, think: str | None = None, gap: float | None = None) -> str:
        return self.step(think, text, None, gap)

    # ------------------------------------------------------------------ rendering
    def export(self) -> str:
        info = {
            "id": self.session_id,
            "slug": "dsv4-flash-pd-throughput",
            "projectID": self.ids.hexs(40),
            "directory": self.directory,
            "title": self.title,
            "version": self.version,
            "summary": {"additions": 0, "deletions": 0, "files": 0},
            "time": {"created": self.created, "updated": self.clock.ms()},
        }
        doc = {"info": info, "messages": [{"info": m.info, "parts": m.parts} for m in self.messages]}
        return dumps_pretty(doc)
