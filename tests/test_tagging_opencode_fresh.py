"""Families a blind check on a hand-written opencode session found missing or over-read.

Every case is written for the family, not copied from that session: check-ins with slang,
a named subject, an acknowledgement before them or Chinese without spaces (with its
question mark); readiness
claims about replicas, containers and units, "came up", "survived a reboot", "todo
listo"; a phrasal "up" ("showed up"); docker's restart loops, HTTP 5xx, curl's
connection errors, C++ aborts and NCCL watchdogs; a grep that found nothing and an ssh
session a reboot closed; a sleep before a loop that looks, and waits for a host to answer.
"""

from __future__ import annotations

import pytest
from _tagging import bash_call, context, tag_names

from analytics.analysis.tagging import Tagger, loop_shape


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


# --- check-ins ------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("ready yet", True),
    ("working yet", True),
    ("nothing yet?", True),
    ("still nothing??", True),
    ("hw's it goin", True),
    ("hows the tuning lookin", False),  # names a subject the pattern does not know
    ("já terminou?", True),
    ("¿ya arrancó?", True),
    ("is node2 healthy now", True),
    ("did the pod recover", True),
    ("btw has the export finished", True),
    ("thx. is b up again", True),
    ("服务跑起来了吗？", True),
    ("训练结束了没？", True),
    ("训练结束了没", True),  # the particle asks: no question mark needed
    ("not ready yet", False),
    ("did you restart the pod and rerun the eval", False),
    ("is the p99 better at c32", False),
    ("你能把日志发给我吗？", False),
    ("thanks, now restart it", False),
    ("great. deploy it to staging", False),
])
def test_checkin_phrasings(tagger: Tagger, text: str, expected: bool) -> None:
    assert ("user_checkin" in tag_names(tagger, context("user", text))) is expected


# --- readiness --------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("All four replicas are up.", True),
    ("The pods are healthy now.", True),
    ("Worker 3 came up after the driver reload.", True),
    ("The unit is active and enabled.", True),
    ("The stack survived a restart without losing its cache.", True),
    ("Tutto pronto: il server risponde su :8080.", True),
    ("A new warning turned up again in the log.", False),
    ("Once the replicas are up I'll run the sweep.", False),
])
def test_readiness_phrasings(tagger: Tagger, text: str, expected: bool) -> None:
    assert ("readiness_claim" in tag_names(tagger, context("assistant", text))) is expected


# --- errors -----------------------------------------------------------------------


@pytest.mark.parametrize("command, output, exit_code, expected", [
    ("docker ps -a", "api-1   Restarting (1) 3 seconds ago", 0, True),
    ("docker ps -a", "worker-2   Exited (1) About a minute ago", 0, True),
    ("docker ps -a", "worker-2   Exited (0) 2 hours ago", 0, False),
    ("docker ps -a", "worker-2   Exited (143) 10 minutes ago", 0, False),
    ("curl -si localhost:9000/generate", "HTTP/2 502\nserver: envoy\n", 0, True),
    ("curl -s localhost:9000/generate", "<html><head><title>504 Gateway Time-out</title></head></html>", 0, True),
    ("curl -si localhost:9000/health", "HTTP/1.1 200 OK\ncontent-length: 0\n", 0, False),
    ("curl -si localhost:9000/v1/models", "HTTP/1.0 503 Service Unavailable\n", 0, True),
    ("tail -3 server.log", 'INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK\n', 0, False),
    ("curl -s localhost:9000/generate", "curl: (28) Operation timed out after 5001 milliseconds", 0, True),
    ("tail -3 worker.log", "terminate called after throwing an instance of 'std::runtime_error'\n  what():  boom", 0, True),
    ("tail -3 worker.log", "[rank1]:[E0301] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)", 0, True),
    ("grep -q 'ERROR' /var/log/app.log", "", 1, False),
    ("ssh gpu1 'journalctl -u api | grep -c OOM'", "0", 1, False),
    ("grep -c OOM app.log && echo found", "0", 1, True),  # the exit is grep's, the last command echo's
    ("grep -rn foo src/", "grep: src/: No such file or directory", 2, True),
    ("ssh gpu1 'sudo reboot'", "Connection to gpu1 closed by remote host.", 255, False),
    ("ssh gpu1 'uptime'", "ssh: connect to host gpu1 port 22: Connection refused", 255, True),
])
def test_error_families(tagger: Tagger, command: str, output: str, exit_code: int, expected: bool) -> None:
    c = bash_call(command, output, exit_code)
    assert ("error" in tag_names(tagger, context("assistant", calls=(c,)))) is expected


# --- polling ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    "sleep 30; for port in 9000 9001; do curl -sf localhost:$port/health; done",
    "sleep 45 && ssh node2 'for f in /var/log/a.log /var/log/b.log; do tail -2 $f; done'",
    "for i in {1..20}; do ping -c1 -W1 10.0.0.5 && break; sleep 5; done",
    "until ssh -o BatchMode=yes node2 exit; do sleep 15; done",
    "for i in $(seq 1 12); do ssh -p 2222 -o ConnectTimeout=3 node2 true && break; sleep 20; done",
])
def test_waits_that_look(command: str) -> None:
    assert loop_shape(command) is not None


@pytest.mark.parametrize("command", [
    "for h in n1 n2 n3; do ssh $h true; done",
    "sleep 10; ssh node2 'for c in 1 8; do python bench.py -c $c | grep tok/s; done'",
    "sleep 5; ssh node2 'sudo systemctl restart api'",
    "ssh node2 uptime",
])
def test_not_a_wait(command: str) -> None:
    assert loop_shape(command) is None
