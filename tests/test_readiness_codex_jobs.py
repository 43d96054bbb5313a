"""Readiness verdicts on claims about a job that a Codex session runs with ``exec_command``
and polls with ``write_stdin``: the command returns while its process runs on (``Process
running with session ID N`` in its output header), and each poll of that session returns
the header again (running, or ``Process exited with code C``) and what the process printed
since. A poll is a re-check of the job its session id names: of the kind of the command that
left the session running, named by that command's words, and its header decides (as a
Claude Code re-check's ``<status>``/``<exit_code>``: tests/test_readiness_jobs.py).

The commands, outputs and claims are written for these tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from _codex_rollouts import exec_header, ingest_rollout
from _job_sessions import JobSession

from analytics.analysis.jobs import job_state
from analytics.command_output import command_output

DOWNLOAD = (
    "huggingface-cli download Qwen/Qwen2.5-72B-Instruct --local-dir /data/qwen2.5-72b-instruct"
)
BUILD = "cd ~/src/vllm && MAX_JOBS=6 pip install -e . --no-build-isolation"
CONVERT = "python convert.py --model /data/qwen2.5-72b-instruct --outfile /data/q72b.gguf"

FETCHING = "Fetching 37 files:  38%|███▊      | 14/37 [03:12<05:16, 13.76s/it]"
ONE_FILE_DONE = "model-00014-of-00037.safetensors: 100%|██████████| 3.86G/3.86G [01:41<00:00, 38.0MB/s]"
FETCHED = "Fetching 37 files: 100%|██████████| 37/37 [14:02<00:00, 22.77s/it]"
# cmake's FetchContent, in a vLLM build from source: a running build whose line reads like a
# download
CMAKE_FETCH = "[ 11%] Performing download step (git clone) for 'cutlass-populate'"


def running(text: str = "", session: int = 7) -> str:
    return exec_header("30.0021", session=session) + text


def exited(code: int, text: str = "") -> str:
    return exec_header("12.5003", exit_code=code) + text


# --------------------------------------------------------------------------- state of a poll


@pytest.mark.parametrize(
    ("output", "state", "words"),
    [
        (exited(0, "/data/qwen2.5-72b-instruct\n"), "done", "Process exited with code 0"),
        (exited(0, FETCHED), "done", "37/37"),
        (exited(1, "Repository Not Found for url: https://huggingface.co/api/models/x\n"),
         "failed", "Process exited with code 1"),
        # (the exit decides, whatever was printed last)
        (exited(1, FETCHED), "failed", "Process exited with code 1"),
        (running(), "running", "Process running with session ID 7"),
        (running(FETCHING), "running", "14/37"),
        # a file's bar at 100% while the process runs on: the other files are still to come
        (running(ONE_FILE_DONE), "running", "Process running with session ID 7"),
        # a failure printed while the process runs on (``ninja`` before it exits): failed
        (running("[301/386] Building CUDA object a.cu.o\nc++: fatal error: Killed signal "
                 "terminated program cc1plus\n"), "failed", "c++: fatal error: Killed"),
    ],
)
def test_the_header_of_a_poll_decides(output: str, state: str, words: str) -> None:
    reading = job_state(command_output(output), recheck=True)
    assert reading is not None and reading.state == state, reading
    assert words in reading.words, reading


def test_the_header_of_a_command_that_is_no_poll_does_not_decide() -> None:
    """An ``exec_command``'s own exit says how the command ended, not a job's state: ``grep
    -c safetensors dl.log`` exits 0 whatever the download does. What it printed decides."""
    assert job_state(command_output(exited(0, "12\n"))) is None
    assert job_state(command_output(running(FETCHING))) == ("running", " ".join(FETCHING.split()))
    assert job_state(command_output(exited(1, FETCHED))).state == "done"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- verdicts


class _Codex(JobSession):
    """A Codex session built message by message: exec_command calls, write_stdin polls,
    claims."""

    SID = "codex:jobs"

    def __init__(self) -> None:
        super().__init__(self.SID, "codex", idle="Checking.")

    def exec(self, command: str, output: str) -> int:
        i = self.say()
        self.b.call(i, command, output, self.t, tool="exec_command")
        self.b.calls[-1]["input"] = json.dumps({"cmd": command, "yield_time_ms": 30000})
        return i

    def poll(self, output: str, session: int = 7, chars: str = "") -> int:
        i = self.say()
        self.b.call(i, "", output, self.t, tool="write_stdin")
        self.b.calls[-1]["input"] = json.dumps(
            {"session_id": session, "chars": chars, "yield_time_ms": 30000}
        )
        return i


def _download_polled(*polls: str) -> _Codex:
    s = _Codex()
    s.exec(DOWNLOAD, running())
    s.poll(running(FETCHING))
    for output in polls:
        s.poll(output)
    return s


def test_a_last_poll_that_saw_the_download_exit_0_supports_the_claim() -> None:
    s = _download_polled(exited(0, "/data/qwen2.5-72b-instruct\n"))
    look = s.b.idx - 1
    s.claim("The Qwen2.5-72B download is complete.")
    (claim,) = s.verdicts()
    assert (claim.subject, claim.verdict) == ("job", "supported"), claim.reason
    assert claim.evidence_msg_idx == [look]
    assert "naming 72b, qwen" in claim.reason
    assert "showed it done: Process exited with code 0" in claim.reason


def test_a_last_poll_that_saw_the_process_running_is_premature() -> None:
    s = _Codex()
    s.exec(DOWNLOAD, running())
    look = s.poll(running(""))  # (nothing printed: no marker at all)
    s.claim("The Qwen2.5-72B download is complete.")
    (claim,) = s.verdicts()
    assert (claim.subject, claim.verdict) == ("job", "premature"), claim.reason
    assert claim.evidence_msg_idx == [look]
    assert "still running: Process running with session ID 7" in claim.reason


def test_a_finished_file_while_the_process_runs_on_is_no_finished_download() -> None:
    s = _download_polled(running(ONE_FILE_DONE))
    s.claim("The Qwen2.5-72B download is complete.")
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason


def test_a_last_poll_that_saw_the_process_exit_1_is_premature() -> None:
    s = _download_polled(
        running(ONE_FILE_DONE),
        exited(1, "Repository Not Found for url: https://huggingface.co/api/models/x\n"),
    )
    s.claim("The Qwen2.5-72B download is complete.")
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason
    assert "showed it failed: Process exited with code 1" in claim.reason


def test_the_first_poll_after_the_claim_still_running_contradicts_it() -> None:
    s = _Codex()
    s.exec(DOWNLOAD, running())
    s.claim("The Qwen2.5-72B download is complete.")
    later = s.poll(running())
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason
    assert claim.contradicted_by_msg_idx == later
    assert "the next look after it showed it still running" in claim.reason


def test_a_claim_about_the_download_is_not_judged_on_the_polls_of_a_build() -> None:
    """A download in session 7 and a vLLM build in session 9: the build's poll, whose line
    reads like a download (cmake fetching a dependency), is a look at a build."""
    s = _Codex()
    s.exec(DOWNLOAD, running())
    s.exec(BUILD, running(session=9))
    s.poll(running(FETCHING))
    done = s.poll(exited(0, "/data/qwen2.5-72b-instruct\n"))
    s.poll(running(CMAKE_FETCH, session=9), session=9)
    s.claim("The Qwen2.5-72B download is complete.")
    (claim,) = s.verdicts()
    assert claim.verdict == "supported", claim.reason
    assert claim.evidence_msg_idx == [done]


def test_a_poll_is_of_the_last_command_that_left_its_session_running() -> None:
    """Session 7 ran a download that exited; a conversion then runs in session 7 (an id
    used again): its polls are looks at the conversion, not at the download."""
    s = _Codex()
    s.exec(DOWNLOAD, running())
    done = s.poll(exited(0, FETCHED))
    s.exec(CONVERT, running())
    converting = s.poll(running("Writing q72b.gguf: 40%|████      | 32/80 [02:11<03:17]"))
    s.claim("The Qwen2.5-72B download is complete.")
    s.claim("The GGUF conversion of Qwen 72B is done.")
    download, conversion = s.verdicts()
    assert download.verdict == "supported", download.reason
    assert download.evidence_msg_idx == [done]
    assert conversion.verdict == "premature", conversion.reason
    assert conversion.evidence_msg_idx == [converting]


def test_input_written_to_the_process_is_a_look_but_no_poll() -> None:
    """``write_stdin`` with ``chars`` (here Ctrl-C) writes to the process: no poll, but what
    it returns is the header of the same process, a look at the job: one that ends the
    download shows it failed."""
    s = _Codex()
    s.exec(DOWNLOAD, running())
    s.poll(running(FETCHING))
    s.claim("The Qwen2.5-72B download is complete.")
    stopped = s.poll(exited(130, "^C\n"), chars="\u0003")
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason
    assert claim.contradicted_by_msg_idx == stopped
    assert "showed it failed — Process exited with code 130" in claim.reason


def test_a_crash_a_poll_shows_is_of_the_server_its_session_launched() -> None:
    """Two servers launched with ``exec_command`` and left running: what a poll of one's
    session printed (an out-of-memory crash) is read from that server, as a Claude Code
    re-check's is (tests/test_readiness_servers.py), so it says nothing of the other."""
    s = _Codex()
    for port, session in ((31000, 11), (31002, 12)):
        command = (
            f"python3 -m sglang.launch_server --model-path /m/m{port} --port {port} "
            f"--served-model-name m{port}"
        )
        i = s.exec(command, running(session=session))
        s.b.launch(i, s.b.calls[-1]["call_id"], port=port, served_model_name=f"m{port}")
        s.b.tag(i, "launch", "sglang.launch_server")
    for port in (31000, 31002):
        i = s.exec(
            f"curl -s http://10.0.0.5:{port}/v1/chat/completions -d '{{\"messages\": []}}'",
            exited(0, '{"choices": [{"message": {"content": "The answer is 42."}}]}'),
        )
        s.b.tag(i, "smoke_test", "chat/completions")
        s.claim(f"The server on {port} is serving fine.")
        oom = s.poll(running("torch.OutOfMemoryError: CUDA out of memory.\n", session=12), 12)
        s.b.event(oom, "oom")
    first, second = s.verdicts()
    assert first.verdict == "supported", first.reason
    assert second.verdict == "premature", second.reason
    assert second.contradicted_by_msg_idx == oom


# --------------------------------------------------------------------------- a stored rollout


def _exec(call_id: str, cmd: str) -> dict[str, object]:
    return {"type": "function_call", "name": "exec_command", "call_id": call_id,
            "arguments": json.dumps({"cmd": cmd, "yield_time_ms": 10000})}


def _stdin(call_id: str, session: int, chars: str = "") -> dict[str, object]:
    return {"type": "function_call", "name": "write_stdin", "call_id": call_id,
            "arguments": json.dumps({"session_id": session, "chars": chars,
                                     "yield_time_ms": 30000})}


def _out(call_id: str, text: str) -> dict[str, object]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _says(text: str) -> dict[str, object]:
    return {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}


def test_claims_about_polled_jobs_of_a_codex_rollout(tmp_path: Path) -> None:
    """Through the parser and the tagger: a download and a build left running, polled, and
    a claim about each; the input typed into the build is no poll (no polling loop)."""
    items: list[tuple[int, dict[str, object]]] = [
        (1, {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "fetch qwen 72b and build vllm"}]}),
        (2, _exec("c1", DOWNLOAD)),
        (12, _out("c1", running())),
        (13, _exec("c2", BUILD)),
        (23, _out("c2", running(session=9))),
        (24, _stdin("c3", 7)),
        (54, _out("c3", running(FETCHING))),
        (55, _stdin("c4", 9)),
        (85, _out("c4", running(CMAKE_FETCH, session=9))),
        (86, _stdin("c5", 7)),
        (99, _out("c5", exited(0, "/data/qwen2.5-72b-instruct\n"))),
        (100, _says("The Qwen2.5-72B download is complete.")),
        (101, _stdin("c6", 9, chars="y\n")),
        (131, _out("c6", running(CMAKE_FETCH, session=9))),
        (132, _says("The vLLM build is done.")),
    ]
    db = ingest_rollout(tmp_path, "2026-03-02", items)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT claim_text, subject, verdict, reason FROM readiness_claims ORDER BY msg_idx"
        ).fetchall()
        loops = con.execute("SELECT call_id, target FROM polling_loops ORDER BY msg_idx").fetchall()
    (download, *d), (build, *b) = rows
    assert download.startswith("The Qwen2.5-72B download") and d[:2] == ["job", "supported"]
    assert "Process exited with code 0" in d[2]
    assert build.startswith("The vLLM build") and b[:2] == ["job", "premature"]
    assert "still running: [ 11%] Performing download step" in b[2]
    assert "c6" not in {call_id for call_id, _ in loops}
