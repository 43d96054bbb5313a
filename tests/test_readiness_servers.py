"""Readiness verdicts with more than one server on a host, and claims about a change.

Found by a blind verdict check (README, readiness part): claims about one server were
judged on the checks of another, a file edit naming an endpoint read as a smoke test, and
a feature claim was "supported" by checks made before the change it claimed. Then the
server log lines: a crash read in one server's log made a claim about the other premature.
"""

import json

import duckdb
import pytest
from golden.case_studies import SessionBuilder

from analytics.analysis.readiness import claimed_port, command_ports, subject_of
from analytics.analysis.readiness.servers import _launched_server, _Server
from analytics.analysis.session import analyse_session, load_session_frames
from analytics.store.migrations import migrate

SANE = '{"choices": [{"message": {"content": "The answer is 42."}}]}'
REFUSED = "curl: (7) Failed to connect to 10.0.0.5 port 31002 after 0 ms: Couldn't connect"


def _chat(port: int) -> str:
    return (
        f"curl -s http://10.0.0.5:{port}/v1/chat/completions -H 'Content-Type: application/json' "
        """-d '{"messages": [{"role": "user", "content": "What is 6 times 7?"}]}'"""
    )


class _Two:
    """A session on one host: an assistant model on port 31000 and a reranker on 31002."""

    def __init__(self) -> None:
        self.con = duckdb.connect(":memory:")
        migrate(self.con)
        self.b = SessionBuilder(self.con, "claude_code:two", "claude_code")
        self.t = 0.0

    @classmethod
    def launched(cls) -> "_Two":
        """The session once both servers were launched (the assistant model first)."""
        s = cls()
        s.launch(31000, "assistant-model")
        s.launch(31002, "reranker")
        return s

    def launch(self, port: int, name: str, log: str = "", job: str = "") -> None:
        """Launch ``name`` on ``port``: its output to ``log`` when given, in the background
        (Claude Code's ``run_in_background``) as ``job`` when given."""
        i = self.say(f"Launching {name}.")
        command = (
            f"python3 -m sglang.launch_server --model-path /m/{name} --port {port} "
            f"--served-model-name {name}"
        )
        if log:
            command = f"ssh gpu7 'nohup {command} > /root/{log} 2>&1 &'"
        output = f"Command running in background with ID: {job}" if job else ""
        call = self.b.call(i, command, output, self.t)
        self.b.launch(i, call, port=port, served_model_name=name)
        self.b.tag(i, "launch", "sglang.launch_server")

    def read(self, command: str, event: str, tool: str = "bash", job: str = "") -> None:
        """A look at a server's output (a log, a re-check of its job) that shows ``event``."""
        i = self.say("Checking the log.")
        self.b.call(i, command, f"[2026-05-14 19:58:03] {event}", self.t, tool=tool)
        if job:
            self.b.calls[-1]["input"] = json.dumps({"bash_id": job})
        self.b.event(i, event)

    def check(self, port: int, output: str) -> None:
        i = self.say("Smoke test.")
        self.b.call(i, _chat(port), output, self.t)
        self.b.tag(i, "smoke_test", "chat/completions")

    def run(self, command: str, output: str = "", tool: str = "bash") -> None:
        self.b.call(self.say("Next."), command, output, self.t, tool=tool)

    def say(self, text: str) -> int:
        self.t += 1
        return self.b.msg("assistant", text, self.t)

    def claim(self, text: str) -> None:
        self.b.tag(self.say(text), "readiness_claim", text, 0)

    def verdicts(self) -> list[tuple[str, str]]:
        self.b.save("two", "m")
        claims = analyse_session(load_session_frames(self.con, "claude_code:two")).claims
        return [(c.verdict, c.reason) for c in claims]


def test_a_check_of_another_port_neither_supports_nor_contradicts_a_claim() -> None:
    s = _Two.launched()
    s.check(31000, SANE)
    s.claim("The reranker on port 31002 is ready.")
    s.check(31000, SANE)
    s.check(31002, REFUSED)
    s.claim("The assistant model on 31000 is serving fine.")
    (reranker, why), (assistant, _) = s.verdicts()
    assert reranker == "premature", why
    assert "31002" in why  # contradicted by the check of its own port
    assert assistant == "supported"


def test_a_claim_names_its_server_by_its_model_or_served_name() -> None:
    s = _Two.launched()
    s.check(31000, SANE)
    s.claim("The reranker is up and answering.")
    ((verdict, why),) = s.verdicts()
    assert verdict == "unverified", why


def test_a_relaunch_restarts_the_evidence_of_its_own_server_only() -> None:
    s = _Two.launched()
    s.check(31002, SANE)
    s.check(31000, SANE)
    s.launch(31002, "reranker")  # (a relaunch of the reranker says nothing of 31000)
    s.claim("The assistant model on 31000 is still serving.")
    s.launch(31000, "assistant-model")
    s.check(31002, SANE)  # (only the reranker was checked since 31000 was relaunched)
    s.claim("The assistant model is back up on 31000.")
    (kept, why), (relaunched, why_relaunched) = s.verdicts()
    assert kept == "supported", why
    assert relaunched == "unverified", why_relaunched


def test_a_claim_about_both_servers_is_judged_on_the_checks_of_either() -> None:
    s = _Two.launched()
    s.check(31000, SANE)
    s.check(31002, SANE)
    s.claim("Both servers are up: 31000 and 31002 answer.")
    ((verdict, why),) = s.verdicts()
    assert verdict == "supported", why


def test_an_edit_naming_an_endpoint_is_no_smoke_test() -> None:
    s = _Two()
    s.launch(31000, "assistant-model")
    s.run(
        "sed -i 's#/generate#/v1/completions#' client/app.py && grep -n completions client/app.py",
        "27:    resp = session.post(BASE + '/v1/completions', json=body)",
    )
    s.claim("The server answers the client now.")
    ((verdict, why),) = s.verdicts()
    assert verdict == "unverified", why


@pytest.mark.parametrize(
    ("command", "tool"),
    [
        ("sed -i 's/retries=3/retries=5/' uploader/config.py", "bash"),
        ("cat > uploader/retry.py <<'EOF'\nRETRIES = 5\nEOF", "bash"),
        ("", "Edit"),
    ],
)
def test_checks_before_the_last_change_do_not_support_a_fix(command: str, tool: str) -> None:
    for test_after in (False, True):
        s = _Two()
        s.run("python -m pytest tests/test_uploader.py -q", "14 passed in 2.31s")
        s.run(command, "", tool=tool)
        if test_after:
            s.run("python -m pytest tests/test_uploader.py -q", "14 passed in 2.40s")
        s.claim("Fixed the retry limit in the uploader.")
        ((verdict, why),) = s.verdicts()
        assert verdict == ("supported" if test_after else "unverified"), why


@pytest.mark.parametrize(
    "record",
    ["echo 'c32,1318.2' >> results.csv", "nvidia-smi | tee gpu_after_bench.txt"],
)
def test_recording_a_result_is_no_change(record: str) -> None:
    s = _Two()
    s.launch(31000, "assistant-model")
    i = s.say("Benchmark.")
    s.b.call(i, "python3 -m sglang.bench_serving --port 31000", "Output token throughput (tok/s): 1318.2", s.t)
    s.b.tag(i, "benchmark", "sglang.bench_serving")
    s.run(record)
    s.claim("The benchmark run is complete: 1318 tok/s.")
    ((verdict, why),) = s.verdicts()
    assert verdict == "supported", why


def test_ports_of_commands_and_claims() -> None:
    assert command_ports(_chat(31002)) == {31002}
    assert command_ports("python3 -m sglang.bench_serving --port 31000 --num-prompts 8") == {31000}
    assert command_ports("curl -s http://gpu7/v1/models") == frozenset()
    servers = [_Server(31000, frozenset({"llama", "70b"})), _Server(31002, frozenset({"reranker"}))]
    assert claimed_port("The 70B is back", servers) == 31000
    assert claimed_port("port 31002 answers", servers) == 31002
    assert claimed_port("Both are up: the 70B and the reranker", servers) is None
    assert claimed_port("1,310 tok/s at 31000", servers) == 31000


@pytest.mark.parametrize(
    "claim",
    [
        "Both inference servers are back after the reboot.",
        "vLLM is back up.",
        "The endpoints answer again.",
    ],
)
def test_servers_coming_back_are_server_claims(claim: str) -> None:
    assert subject_of(claim) == "server"


@pytest.mark.parametrize(
    "flags", ['{"--port": 31002, "--served-model-name": "reranker"}',
              {"--port": 31002, "--served-model-name": "reranker"}],
    ids=["stored JSON", "read into a dict"],
)
def test_a_launch_names_its_server_whichever_way_its_flags_were_read(flags: object) -> None:
    """A ``launches`` row's flags are JSON text in the database and a dict in a frame read
    whole (``SessionFrames``): the server is the same."""
    server = _launched_server("sglang", "/m/bge-reranker", flags)
    assert server is not None and server.port == 31002
    assert {"reranker", "bge"} <= server.names


@pytest.mark.parametrize(
    "look",
    [
        ("ssh gpu7 'tail -n 40 /root/reranker.log'", "bash", ""),  # the log its launch writes
        ("", "BashOutput", "b2"),  # a re-check of the job that launched it
        ("curl -s http://10.0.0.5:31002/health", "bash", ""),  # its address
    ],
)
def test_a_crash_read_from_another_server_says_nothing_of_a_claim(look: tuple[str, str, str]) -> None:
    """The reranker runs out of memory after "the assistant model on 31000 is serving":
    that claim stands (supported by its smoke test); a claim about the reranker, or one
    naming no server, is contradicted by it."""
    command, tool, job = look
    s = _Two()
    s.launch(31000, "assistant-model", log="assistant.log", job="b1")
    s.launch(31002, "reranker", log="reranker.log", job="b2")
    s.check(31000, SANE)
    s.claim("The assistant model on 31000 is serving fine.")
    s.read(command, "oom", tool=tool, job=job)
    s.check(31002, SANE)
    s.claim("The reranker on 31002 is up.")
    s.read(command, "oom", tool=tool, job=job)
    s.check(31000, SANE)
    s.claim("Everything is up.")
    s.read(command, "oom", tool=tool, job=job)
    (assistant, why), (reranker, why_reranker), (both, why_both) = s.verdicts()
    assert assistant == "supported", why
    assert reranker == "premature", why_reranker
    assert both == "premature", why_both


def test_a_log_several_servers_write_to_names_none_of_them() -> None:
    """Both servers write to one log: a crash read there may be either's, and counts."""
    s = _Two()
    s.launch(31000, "assistant-model", log="serve.log")
    s.launch(31002, "reranker", log="serve.log")
    s.check(31000, SANE)
    s.claim("The assistant model on 31000 is serving fine.")
    s.read("ssh gpu7 'tail -n 40 /root/serve.log'", "oom")
    ((verdict, why),) = s.verdicts()
    assert verdict == "premature", why


SMOKE_PY = """from openai import OpenAI
client = OpenAI(base_url="http://10.0.0.5:31000/v1", api_key="none")
reply = client.chat.completions.create(
    model="assistant-model", messages=[{"role": "user", "content": "Capital of France?"}]
)
print(reply.choices[0].message.content)
"""


def _write_script(s: _Two, how: str, path: str, body: str) -> None:
    if how == "heredoc":
        s.run(f"ssh gpu7 \"cat > {path}\" <<'EOF'\n{body}EOF")
    else:
        s.run("", "File created successfully", tool="Write")
        s.b.calls[-1]["input"] = json.dumps({"file_path": path, "content": body})


@pytest.mark.parametrize("how", ["heredoc", "Write"])
def test_a_script_the_session_wrote_that_calls_the_model_is_a_smoke_test(how: str) -> None:
    """The agent writes a smoke script, runs it by name, then claims: the run is the check
    (before, only a command naming the endpoint was one); after a second claim the same
    script fails."""
    s = _Two.launched()
    _write_script(s, how, "/root/smoke.py", SMOKE_PY)
    s.run("ssh gpu7 'python3 /root/smoke.py'", "The capital of France is Paris.")
    s.claim("The assistant model is up and answering.")
    s.run("ssh gpu7 'cd /root && ./restart.sh'")
    s.claim("Restarted, it's serving again.")
    s.run(
        "ssh gpu7 'python3 /root/smoke.py'",
        "Traceback (most recent call last):\nopenai.APIConnectionError: Connection error.",
    )
    (first, why), (second, why_second) = s.verdicts()
    assert first == "supported", why
    assert "Paris" in why
    assert second == "premature", why_second


def test_a_script_that_calls_no_model_is_no_smoke_test() -> None:
    s = _Two.launched()
    _write_script(s, "heredoc", "/root/gpus.sh", "nvidia-smi --query-gpu=memory.used --format=csv\n")
    s.run("ssh gpu7 'bash /root/gpus.sh'", "memory.used [MiB]\n71234 MiB")
    s.claim("The assistant model is up and answering.")
    ((verdict, why),) = s.verdicts()
    assert verdict == "unverified", why


def test_a_script_run_before_it_was_written_is_no_smoke_test() -> None:
    """The session ran a script of that name before writing its own: what ran then is
    unknown."""
    s = _Two.launched()
    s.run("python3 smoke.py", "ok")
    s.claim("The assistant model is up and answering.")
    _write_script(s, "heredoc", "smoke.py", SMOKE_PY)
    ((verdict, why),) = s.verdicts()
    assert verdict == "unverified", why


def test_a_check_script_is_a_check_of_the_server_it_addresses() -> None:
    """The script calls the assistant model on 31000: it supports a claim about that
    server, and neither supports nor contradicts one about the reranker on 31002."""
    s = _Two.launched()
    _write_script(s, "heredoc", "/root/smoke.py", SMOKE_PY)
    s.run("ssh gpu7 'python3 /root/smoke.py'", "The capital of France is Paris.")
    s.claim("The reranker on 31002 is up and answering.")
    s.run("ssh gpu7 'python3 /root/smoke.py'", "The capital of France is Paris.")
    s.claim("The assistant model on 31000 is up and answering.")
    (reranker, why), (assistant, why_assistant) = s.verdicts()
    assert reranker == "unverified", why
    assert assistant == "supported", why_assistant


def _port_wait(s: _Two, port: int, outcome: str) -> None:
    """A wait on a port (``until nc -z``) that ended ``outcome``."""
    i = s.say("Waiting for the port.")
    command = f"until nc -z 10.0.0.5 {port}; do sleep 10; done; echo open"
    s.b.call(i, command, "open" if outcome == "ready" else "", s.t)
    s.b.tag(i, "polling_loop", "until nc -z")
    s.b.polling.append(dict(
        session_id=s.b.sid, msg_idx=i, call_id=s.b.calls[-1]["call_id"], interval_s=10.0,
        target=f"10.0.0.5:{port}", outcome=outcome, waited_s=40.0,
    ))


def test_a_port_seen_open_is_liveness_only() -> None:
    """A wait on a port that ended with it open (found by a blind check: "It's up! Port
    30000 is open" while the server was dying in its warmup) shows the server accepting
    connections, not generating: a claim on it alone is premature, and one whose next
    check failed names the open port as what it was claimed on. A wait that timed out,
    or one on another server's port, shows nothing of the claim's server."""
    s = _Two.launched()
    _port_wait(s, 31000, "ready")
    s.claim("The assistant model on 31000 is up.")
    ((verdict, reason),) = s.verdicts()
    assert verdict == "premature" and "port open: 10.0.0.5:31000" in reason

    s = _Two.launched()
    _port_wait(s, 31002, "ready")
    _port_wait(s, 31000, "timeout")
    s.claim("The assistant model on 31000 is up.")
    ((verdict, reason),) = s.verdicts()
    assert verdict == "unverified" and "port open" not in reason

    s = _Two.launched()
    _port_wait(s, 31000, "ready")
    s.claim("The assistant model on 31000 is up.")
    s.check(31000, REFUSED)
    ((verdict, reason),) = s.verdicts()
    assert verdict == "premature"
    assert reason.startswith("claimed on port open: 10.0.0.5:31000") and "curl: (7)" in reason
