"""Readiness verdicts on claims about a job (a download, a build or install, a conversion,
an upload), judged on the looks at that job: a call whose output shows its state.

Found by the blind verdict check (README, readiness part): "the download is complete", "the
build is done" fell to the feature subject and stayed unverified although the agent had
just looked at the job (a log tail, a re-check of the background task). The sentences,
outputs and jobs here are written for these tests, not taken from that check.
"""

import json
from pathlib import Path

import duckdb
import pytest
from _job_sessions import JobSession
from _samples import claude_code_line

from analytics.analysis.jobs import (
    claim_kinds,
    claimed_looks,
    command_words,
    job_state,
)
from analytics.analysis.readiness import subject_of
from analytics.analysis.session import load_session_frames
from analytics.analysis.tagging.polling import input_job_id
from analytics.ingest import ingest

# --------------------------------------------------------------------------- state of a job

TQDM_DONE = "Fetching 8 files: 100%|██████████| 8/8 [00:41<00:00,  5.20s/it]\n/data/phi-3.5-mini"
TQDM_RUNNING = "Fetching 8 files:  38%|███▊      | 3/8 [00:12<00:20,  4.10s/it]"
NINJA_RUNNING = "[212/386] Building CUDA object csrc/CMakeFiles/_C.dir/flash_fwd_hdim128.cu.o"
NINJA_DONE = "[385/386] Building CXX object x.cpp.o\n[386/386] Linking CXX shared module _C.so"
NINJA_KILLED = (
    "[301/386] Building CUDA object csrc/CMakeFiles/_C.dir/flash_bwd_hdim256.cu.o\n"
    "c++: fatal error: Killed signal terminated program cc1plus\n"
    "compilation terminated.\n"
    "ninja: build stopped: subcommand failed."
)


@pytest.mark.parametrize(
    ("output", "state", "words"),
    [
        (TQDM_DONE, "done", "8/8"),
        (TQDM_RUNNING, "running", "3/8"),
        ("model.safetensors: 100%|██████████| 4.97G/4.97G [01:02<00:00, 80.1MB/s]", "done", "4.97G"),
        (NINJA_RUNNING, "running", "[212/386]"),
        (NINJA_DONE, "done", "[386/386]"),
        ("[ 67%] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o", "running", "67%"),
        ("[ 50%] Built target ggml", "running", "Built target ggml"),
        ("[ 98%] Linking CXX executable server\n[100%] Built target llama-server", "done", "100%"),
        ("Installing collected packages: xformers", "running", "Installing collected"),
        ("Successfully installed flash-attn-2.7.4.post1", "done", "flash-attn"),
        ("Resolved 41 packages in 312ms\nInstalled 12 packages in 1.31s", "done", "12 packages"),
        ("Downloading LFS objects:  33% (2/6), 4.2 GB | 47 MB/s", "running", "2/6"),
        ("Downloading LFS objects: 100% (6/6), 14 GB | 48 MB/s, done.", "done", "6/6"),
        ("  7,340,032,000  52%  110.21MB/s    0:01:03 (xfr#2, to-chk=3/6)", "running", "to-chk=3/6"),
        ("sent 14,001 bytes  received 35 bytes\ntotal size is 13,999,221  speedup is 1.00", "done",
         "speedup"),
        ("'phi3.gguf' saved [7643296256/7643296256]", "done", "saved"),
        ("    Finished `release` profile [optimized] target(s) in 2m 14s", "done", "target(s)"),
        ("bash: line 1: 48211 Killed                  python convert.py", "failed", "Killed"),
        ("OSError: [Errno 28] No space left on device: '/data/x.safetensors'", "failed", "No space"),
        ("urllib3.exceptions.ConnectTimeoutError: (<urllib3.connection...>, 'timed out')", "failed",
         "ConnectTimeoutError"),
        ("make: *** [Makefile:12: all] Error 2", "failed", "make: ***"),
        ("CMake Error at CMakeLists.txt:40 (find_package):", "failed", "CMake Error"),
        ("rsync error: some files could not be transferred (code 23)", "failed", "rsync error"),
        ("Traceback (most recent call last):\n  File \"q.py\", line 3\nKeyError: 'w'", "failed",
         "Traceback"),
        (NINJA_KILLED, "failed", "c++: fatal error: Killed"),
    ],
)
def test_each_marker_says_its_state(output: str, state: str, words: str) -> None:
    reading = job_state(output)
    assert reading is not None and reading.state == state, reading
    assert words in reading.words, reading


def test_the_last_marker_wins() -> None:
    # pip's resolver warning comes before the install it does not stop
    pip = (
        "ERROR: pip's dependency resolver does not currently take into account all the "
        "packages that are installed. This behaviour is the source of the following conflicts.\n"
        "torchaudio 2.5.1 requires torch==2.5.1, but you have torch 2.6.0 which is incompatible.\n"
        "Successfully installed torch-2.6.0 xformers-0.0.29.post2"
    )
    assert job_state(pip) == ("done", "Successfully installed torch-2.6.0 xformers-0.0.29.post2")
    # a failed attempt then a rerun that finished; a finished step then a failing one
    retried = "huggingface_hub.errors.HfHubHTTPError: 504 Server Error\n" + TQDM_DONE
    assert job_state(retried).state == "done"  # type: ignore[union-attr]
    assert job_state(TQDM_DONE + "\n" + NINJA_KILLED).state == "failed"  # type: ignore[union-attr]
    # a progress bar after a timeout: the bar is the last word
    assert job_state("ReadTimeoutError: timed out\n" + TQDM_RUNNING).state == "running"  # type: ignore[union-attr]


def test_a_background_task_status_decides() -> None:
    running = f"<status>running</status>\n\n<stdout>\n{NINJA_RUNNING}\n</stdout>"
    reading = job_state(running, recheck=True)
    assert reading is not None and reading.state == "running"
    assert reading.words.startswith("[212/386] Building CUDA object")
    done = (
        "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\n"
        "Successfully installed flash-attn-2.7.4.post1\n</stdout>"
    )
    assert job_state(done, True) == ("done", "Successfully installed flash-attn-2.7.4.post1")
    # the status says so even where no marker does, or where the last one says otherwise
    exited = "<status>completed</status>\n\n<exit_code>2</exit_code>\n\n<stdout>\n" + TQDM_DONE
    assert job_state(exited, True) == (
        "failed", "<status>completed</status> <exit_code>2</exit_code>"
    )
    killed = f"<status>killed</status>\n\n<stdout>\n{TQDM_RUNNING}\n</stdout>"
    assert job_state(killed, True) == ("failed", "<status>killed</status>")
    quiet = "<status>running</status>\n\n<stdout>\nloading\n</stdout>"
    assert job_state(quiet, True) == ("running", "<status>running</status>")
    # what another tool printed (a file holding such tags) has no such header
    assert job_state(exited) == ("done", " ".join(TQDM_DONE.splitlines()[0].split()))
    assert job_state(quiet) is None


@pytest.mark.parametrize(
    "output",
    ["config.json\ntokenizer.json\nmodel-00001-of-00002.safetensors", "17\n62G\t/data/x", "",
     "[2026-05-14 19:58:03 TP0] Decode batch, #running-req: 16, token usage: 0.04"],
)
def test_an_output_without_a_marker_shows_no_state(output: str) -> None:
    assert job_state(output) is None


def test_words_and_kinds() -> None:
    assert command_words(
        "hf download google/gemma-2-9b-it --local-dir=/data/gemma-2-9b-it 2>&1 | tail -1"
    ) == {"google", "gemma", "9b"}
    assert command_words("MAX_JOBS=8 pip install flash-attn --no-build-isolation") == {
        "flash", "attn"
    }
    assert command_words("ssh gpu3 'tail -c 400 /data/logs/dl_mixtral.log'") == {"mixtral"}
    assert claim_kinds("All 12 shards of the 8x7B are on disk.") == {"download"}
    assert claim_kinds("The flash-attn wheel is installed.") == {"build"}
    assert claim_kinds("The GGUF conversion finished.") == {"convert"}
    assert input_job_id('{"task_id": "t7", "block": false}') == "t7"
    assert input_job_id('{"bash_id": "b2"}') == "b2"


@pytest.mark.parametrize(
    ("claim", "subject"),
    [
        ("The wheel build completed and the import works.", "job"),
        ("The Mixtral download is done: 19 of 19 shards.", "job"),
        ("Quantization is complete, the AWQ checkpoint is written.", "job"),
        ("The upload to the hub finished.", "job"),
        ("The llama.cpp build is done and the server is up on 8080.", "server"),
        ("All 37 tests pass after the rebuild.", "test run"),
        ("The parser bug is fixed.", "feature"),
        ("Fixed the retry limit in the uploader.", "feature"),
    ],
)
def test_job_claims_have_their_subject(claim: str, subject: str) -> None:
    assert subject_of(claim) == subject


# --------------------------------------------------------------------------- verdicts


class _Session(JobSession):
    """A Claude Code session built message by message: calls, re-checks, claims."""

    def __init__(self) -> None:
        super().__init__("claude_code:jobs", "claude_code")

    def run(self, command: str, output: str) -> int:
        i = self.say()
        self.b.call(i, command, output, self.t)
        return i

    def start(self, command: str, job: str) -> int:
        return self.run(command, f"Command running in background with ID: {job}")

    def recheck(self, job: str, output: str, tool: str = "BashOutput") -> int:
        i = self.say()
        self.b.call(i, "", output, self.t, tool=tool)
        key = "bash_id" if tool == "BashOutput" else "task_id"
        self.b.calls[-1]["input"] = json.dumps({key: job})
        return i


def _status(state: str, stdout: str, code: int | None = None) -> str:
    exit_code = f"<exit_code>{code}</exit_code>\n\n" if code is not None else ""
    return f"<status>{state}</status>\n\n{exit_code}<stdout>\n{stdout}\n</stdout>"


HF_MIXTRAL = "hf download mistralai/Mixtral-8x7B-Instruct-v0.1 --local-dir /data/mixtral-8x7b"
HF_PHI = "hf download microsoft/Phi-3.5-mini-instruct --local-dir /data/phi-3.5-mini"


def test_a_download_seen_done_just_before_supports_the_claim() -> None:
    s = _Session()
    s.run(f"{HF_PHI} 2>&1 | tail -2", TQDM_RUNNING.replace("\n", ""))
    look = s.run(f"{HF_PHI} 2>&1 | tail -2", TQDM_DONE)
    s.claim("The Phi download is complete.")
    (claim,) = s.verdicts()
    assert (claim.subject, claim.verdict) == ("job", "supported"), claim.reason
    assert "showed it done" in claim.reason and "8/8" in claim.reason
    assert claim.evidence_msg_idx == [look]


def test_a_build_last_seen_running_is_premature() -> None:
    s = _Session()
    s.start("cd ~/src/flash-attention && MAX_JOBS=8 python setup.py install > ~/fa.log 2>&1", "f1")
    look = s.recheck("f1", _status("running", NINJA_RUNNING))
    s.claim("The flash-attention build is done.")
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason
    assert "still running: [212/386]" in claim.reason
    assert claim.evidence_msg_idx == [look] and claim.contradicted_by_msg_idx is None


def test_the_next_look_finding_the_job_failed_contradicts_the_claim() -> None:
    s = _Session()
    s.run("tail -2 ~/fa_build.log", NINJA_RUNNING)
    s.claim("The flash-attn build is done.")
    failed = s.run("tail -4 ~/fa_build.log", NINJA_KILLED)
    (claim,) = s.verdicts()
    assert claim.verdict == "premature", claim.reason
    assert claim.contradicted_by_msg_idx == failed
    assert "the next look after it showed it failed — c++: fatal error: Killed" in claim.reason


def test_a_later_look_showing_the_named_job_still_running_contradicts_the_claim() -> None:
    s = _Session()
    s.start(f"{HF_MIXTRAL} > /data/logs/dl_mixtral.log 2>&1", "d4")
    s.claim("The Mixtral download is done.")
    s.claim("The flash-attn build is done too.")  # (the next claim: another job)
    running = s.recheck("d4", _status("running", TQDM_RUNNING), tool="TaskOutput")
    mixtral, _ = s.verdicts()
    assert mixtral.verdict == "premature", mixtral.reason
    assert mixtral.contradicted_by_msg_idx == running
    assert "claimed on no look at the job (the looks naming mixtral)" in mixtral.reason


def test_no_look_before_the_claim_is_unverified_and_a_later_done_look_is_named() -> None:
    s = _Session()
    s.start(f"{HF_PHI} > /data/logs/dl_phi.log 2>&1", "d9")
    s.claim("The Phi-3.5 download is complete.")
    done = s.recheck("d9", _status("completed", TQDM_DONE, 0))
    (claim,) = s.verdicts()
    assert claim.verdict == "unverified", claim.reason
    assert claim.reason.startswith("no look at the job")
    assert "a later look showed it done: Fetching 8 files: 100%" in claim.reason
    assert f"(msg_{done:04d})" in claim.reason and claim.contradicted_by_msg_idx is None


def test_a_claim_about_one_of_two_jobs_is_judged_on_that_job_only() -> None:
    """A Mixtral and a Phi download run at once: each claim is judged on the re-checks of
    its own job, found through the command that started it."""
    s = _Session()
    s.start(f"{HF_MIXTRAL} > /data/logs/a.log 2>&1", "d1")
    s.start(f"{HF_PHI} > /data/logs/b.log 2>&1", "d2")
    s.recheck("d1", _status("running", TQDM_RUNNING))
    phi_done = s.recheck("d2", _status("completed", TQDM_DONE, 0))
    mixtral_running = s.recheck("d1", _status("running", TQDM_RUNNING))
    s.claim("The Phi 3.5 mini download is complete.")
    s.claim("The Mixtral 8x7B download is done as well.")
    phi, mixtral = s.verdicts()
    assert phi.verdict == "supported", phi.reason
    assert phi.evidence_msg_idx == [phi_done] and "naming mini, phi" in phi.reason
    assert "naming 8x7b, mixtral" in mixtral.reason
    assert mixtral.verdict == "premature", mixtral.reason
    assert mixtral.evidence_msg_idx == [mixtral_running]


def test_a_job_started_long_before_is_named_by_its_start_whatever_claims_are_judged() -> None:
    """A re-check far after the start of its job (more than LOOKBACK messages) still reads
    what the start named, whether the whole session or only its recent claims are judged
    (an append)."""
    from analytics.analysis.readiness import LOOKBACK, judge_claims

    s = _Session()
    s.start(f"{HF_MIXTRAL} > /data/logs/a.log 2>&1", "d1")
    s.start(f"{HF_PHI} > /data/logs/b.log 2>&1", "d2")
    for _ in range(LOOKBACK + 5):
        s.say("Waiting.")
    s.recheck("d2", _status("completed", TQDM_DONE, 0))
    running = s.recheck("d1", _status("running", TQDM_RUNNING))
    claim = s.claim("The Phi download is complete.")
    s.verdicts()
    frames = load_session_frames(s.con, "claude_code:jobs")
    whole = judge_claims(frames)
    recent = judge_claims(load_session_frames(s.con, "claude_code:jobs"), claim)
    assert whole == recent and len(whole) == 1
    assert whole[0].verdict == "supported", whole[0].reason
    assert whole[0].evidence_msg_idx == [running - 1]


def test_a_look_at_no_named_job_after_the_claim_contradicts_it_only_by_a_failure() -> None:
    for later, verdict in ((TQDM_RUNNING, "supported"), (NINJA_KILLED, "premature")):
        s = _Session()
        s.run("tail -1 ~/build.log", NINJA_DONE)
        s.claim("The build is done.")
        s.run("tail -4 ~/build.log", later)
        (claim,) = s.verdicts()
        assert claim.verdict == verdict, claim.reason


def test_a_look_at_no_named_job_after_the_next_claim_is_not_read() -> None:
    s = _Session()
    s.run("tail -1 ~/build.log", NINJA_DONE)
    s.claim("The build is done.")
    s.claim("The parser bug is fixed.")
    s.run("tail -4 ~/build.log", NINJA_KILLED)
    build, _ = s.verdicts()
    assert build.verdict == "supported", build.reason


def test_a_look_of_another_kind_is_no_look_at_the_claimed_job() -> None:
    s = _Session()
    s.run("tail -1 ~/dl.log", TQDM_DONE)
    s.run("tail -1 ~/build.log", NINJA_RUNNING)  # (a build, the last look before the claim)
    s.claim("The shard download is complete.")
    (claim,) = s.verdicts()
    assert claim.verdict == "supported", claim.reason
    assert "8/8" in claim.reason


def test_a_job_claim_without_any_look_is_judged_as_a_feature_claim() -> None:
    s = _Session()
    s.run("python -m pytest tests/test_kernels.py -q", "12 passed in 3.10s")
    s.claim("The wheel is installed.")
    (claim,) = s.verdicts()
    assert (claim.subject, claim.verdict) == ("job", "supported"), claim.reason
    assert "tests passed" in claim.reason


def test_a_quantisation_and_an_upload_are_jobs_too() -> None:
    s = _Session()
    s.run(
        "python quantize_awq.py --model /data/qwen3-14b --out /data/qwen3-14b-awq 2>&1 | tail -2",
        "AWQ: 100%|██████████| 40/40 [12:31<00:00, 18.80s/it]\nSaved to /data/qwen3-14b-awq",
    )
    s.claim("The AWQ quantization is done.")
    s.run(
        "hf upload my-org/qwen3-14b-awq /data/qwen3-14b-awq 2>&1 | tail -1",
        "Upload 5 LFS files:  60%|██████    | 3/5 [02:10<01:27, 43.50s/it]",
    )
    s.claim("The upload to the hub is complete.")
    quantised, uploaded = s.verdicts()
    assert (quantised.subject, quantised.verdict) == ("job", "supported"), quantised.reason
    assert (uploaded.subject, uploaded.verdict) == ("job", "premature"), uploaded.reason
    assert "still running: Upload 5 LFS files" in uploaded.reason


def test_claimed_looks_are_those_sharing_the_most_words() -> None:
    from analytics.analysis.jobs import Look, Reading

    def look(n: int, command: str) -> Look:
        return Look(n, n, command, Reading("done", ""), frozenset({"download"}),
                    command_words(command))

    qwen_7b = look(1, "ls /data/qwen2.5-7b-instruct")
    qwen_32b = look(2, "hf download Qwen/Qwen2.5-32B-Instruct --local-dir /data/qwen2.5-32b")
    other = look(3, "tail -1 /data/logs/dl.log")
    looks = [qwen_7b, qwen_32b, other]
    assert claimed_looks(looks, "The Qwen 32B download is done.") == ([qwen_32b], ["32b", "qwen"])
    assert claimed_looks(looks, "The Qwen download is done.") == ([qwen_7b, qwen_32b], ["qwen"])
    assert claimed_looks(looks, "The download is done.") == (looks, [])


# --------------------------------------------------------------------------- a stored session


def test_claims_about_background_jobs_of_a_claude_code_session(tmp_path: Path) -> None:
    """Through the parser and the tagger: a pip build and a download run in the background,
    re-checked with BashOutput and TaskOutput."""
    lines: list[str] = []

    def line(role: str, content: object) -> None:
        i = len(lines)
        lines.append(claude_code_line(i, "jobs", role, content))

    def call(call_id: str, tool: str, args: dict[str, object], result: str) -> None:
        line("assistant", [{"type": "tool_use", "id": call_id, "name": tool, "input": args}])
        line("user", [{"type": "tool_result", "tool_use_id": call_id, "content": result}])

    def say(text: str) -> None:
        line("assistant", [{"type": "text", "text": text}])

    line("user", "build xformers from source and fetch the mixtral weights")
    call("t1", "Bash", {"command": "cd ~/src/xformers && pip install -v -e . > ~/xf.log 2>&1",
                        "run_in_background": True}, "Command running in background with ID: x1")
    call("t2", "Bash", {"command": f"{HF_MIXTRAL} > ~/dl.log 2>&1", "run_in_background": True},
         "Command running in background with ID: m1")
    call("t3", "BashOutput", {"bash_id": "x1"}, _status("running", NINJA_RUNNING))
    say("The xformers build is complete.")
    call("t4", "TaskOutput", {"task_id": "m1", "block": False},
         _status("completed", "Fetching 19 files: 100%|██████████| 19/19 [09:12<00:00]", 0))
    say("The Mixtral download is complete: 19 of 19 files.")
    call("t5", "BashOutput", {"bash_id": "x1"}, _status("failed", NINJA_KILLED, 1))
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "jobs.jsonl").write_text("\n".join(lines) + "\n")
    db = tmp_path / "t.duckdb"
    assert not ingest([folder], db=db).errors
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT claim_text, subject, verdict, reason FROM readiness_claims ORDER BY msg_idx"
    ).fetchall()
    con.close()
    (xformers, *_, xf_reason), (mixtral, *_, mx_reason) = rows
    assert xformers.startswith("The xformers build") and rows[0][1:3] == ("job", "premature")
    assert "still running: [212/386]" in xf_reason and "fatal error" in xf_reason
    assert mixtral.startswith("The Mixtral download") and rows[1][1:3] == ("job", "supported")
    assert "19/19" in mx_reason
