"""Shell parsing edge cases and polling-loop measurements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.analysis.tagging import analyse_polling, loop_shape, parse_shell
from analytics.analysis.tagging.polling import _TIMEOUT, _says_timeout, exit_patterns, seconds
from analytics.models import Message, MessageContext, PollingLoop, ToolCall

SEED = """for i in $(seq 1 16); do
  sleep 25
  r=$(timeout 10 ssh host 'tail -1 /root/dsv4_mtp.log' 2>/dev/null)
  echo "[$((i*25))s] ${r: -85}"
  echo "$r" | grep -qiE "fired up|ready to roll" && { echo READY; break; }
  echo "$r" | grep -qiE "Traceback|out of memory|Killed|kill_process_tree" && { echo ERR; break; }
done"""


def run(command: str, output: str = "", status: str = "completed", **kw: object):
    call = ToolCall(session_id="s", msg_idx=0, call_id="c", tool="bash", command=command,
                    output=output, status=status, **kw)  # type: ignore[arg-type]
    ctx = MessageContext(message=Message(session_id="s", msg_idx=0, source_id="0", role="assistant"),
                         calls=[call], results=[call])
    loops = analyse_polling(ctx)
    return loops[0] if loops else None


# --- shell parsing -----------------------------------------------------------


def test_seed_needs_fallback_and_sees_nested_commands() -> None:
    script = parse_shell(SEED)
    assert script.parser == "fallback"  # bashlex rejects $((…))
    names = [c.name for c in script.commands]
    assert {"sleep", "ssh", "tail", "grep", "seq"} <= set(names)
    tail = next(c for c in script.commands if c.name == "tail")
    assert tail.loops == (0,) and tail.nested >= 1


@pytest.mark.parametrize(
    "command,names",
    [
        ("a && b || c; d | e &", ["a", "b", "c", "d", "e"]),
        ("echo 'x; y' && ls", ["echo", "ls"]),
        ('echo "$(date; hostname)"', ["echo", "date", "hostname"]),
        ("FOO=1 BAR=2 timeout 5 python x.py", ["python"]),
        ("sudo -E nohup ./serve.sh > log 2>&1 &", ["serve.sh"]),
        ("bash -c 'until curl -s x; do sleep 1; done'", ["bash", "curl", "sleep"]),
        ("cat <<EOF > f\nsleep 5; tail x\nEOF\nls", ["cat", "ls"]),
        ("# comment only\nls -la", ["ls"]),
        ("echo `whoami`", ["echo", "whoami"]),
        ("docker exec -it ctr nvidia-smi", ["docker", "nvidia-smi"]),
        ("kubectl exec pod -- tail -f /x.log", ["kubectl", "tail"]),
        ('for ((i=0;i<3;i++)); do echo $i; done', ["echo"]),
        ("echo unterminated 'quote", ["echo"]),
        ("", []),
    ],
)
def test_parse_shell_names(command: str, names: list[str]) -> None:
    got = [c.name for c in parse_shell(command).commands]
    assert sorted(got) == sorted(names)


def test_background_operator() -> None:
    cmds = parse_shell("nohup python -m x > log 2>&1 & sleep 1").commands
    assert cmds[0].background and not cmds[1].background


@given(st.text(max_size=200))
@settings(max_examples=150, deadline=None)
def test_parse_shell_never_raises(text: str) -> None:
    parse_shell(text)
    loop_shape(text)
    exit_patterns(text)


# --- recognising loops -------------------------------------------------------


@pytest.mark.parametrize(
    "command,kind",
    [
        (SEED, "loop"),
        ("until curl -sf localhost:30000/health; do sleep 5; done", "loop"),
        ("while ! grep -q ready /tmp/s.log; do sleep 10; done", "loop"),
        ("timeout 600 bash -c 'until grep -q \"fired up\" /tmp/x.log; do sleep 10; done'", "loop"),
        ("watch -n 5 nvidia-smi", "watch"),
        ("sleep 60 && tail -5 /tmp/server.log", "sleep_check"),
        ("sleep 30; curl -s localhost:8000/health", "sleep_check"),
        ("for i in {1..30}; do if curl -s http://x:1/health; then echo OK; break; fi; sleep 10; done", "loop"),
        ("ssh h 'for i in {1..10}; do sleep 3; tail -2 /x.log; done'", "loop"),
        ("while true; do nvidia-smi --query-gpu=memory.used --format=csv; sleep 2; done", "loop"),
    ],
)
def test_polling_shapes(command: str, kind: str) -> None:
    shape = loop_shape(command)
    assert shape is not None and shape.kind == kind


@pytest.mark.parametrize(
    "command",
    [
        "sleep 2",
        "for f in a b c; do cat $f; done",
        "for f in *.py; do ruff check $f; done",
        "python -m sglang.launch_server --model-path m",
        "tail -f /tmp/log",
        "grep -c sleep script.sh",
        "while read line; do echo $line; done < file",
    ],
)
def test_not_polling(command: str) -> None:
    assert loop_shape(command) is None


# --- measurements --------------------------------------------------------------


@pytest.mark.parametrize(
    "command,interval,iters",
    [
        (SEED, 25.0, 16),
        ("for i in {1..30}; do sleep 2; curl -s x/health && break; done", 2.0, 30),
        ("for i in $(seq 5 10); do sleep 1m; tail -1 l.log; done", 60.0, 6),
        ("for i in `seq 20`; do sleep 3; ls /tmp/done; done", 3.0, 20),
        ("i=0; while [ $i -lt 40 ]; do sleep 15; tail -1 x.log; i=$((i+1)); done", 15.0, None),
        ("n=0; until grep -q ready l.log; do sleep 5; n=$((n+1)); [ $n -ge 24 ] && break; done", 5.0, 24),
        ("for i in 1 2 3 4; do sleep 10; cat /tmp/s; done", 10.0, 4),
    ],
)
def test_interval_and_iterations(command: str, interval: float, iters: int | None) -> None:
    loop = run(command)
    assert loop is not None
    assert loop.interval_s == interval
    if iters is not None:
        assert loop.max_iterations == iters
        assert loop.max_wait_s == interval * iters


def test_seed_patterns_and_target() -> None:
    loop = run(SEED)
    assert loop is not None
    assert loop.success_pattern == "fired up|ready to roll"
    assert loop.failure_pattern == "Traceback|out of memory|Killed|kill_process_tree"
    assert loop.target == "/root/dsv4_mtp.log"
    assert loop.max_wait_s == 400.0


def test_seed_aborted_waited_from_output() -> None:
    out = "[25s] Capturing batches (bs=10) 25%\n[50s] GET /health 200\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"
    loop = run(SEED, out, status="error")
    assert loop is not None and loop.outcome == "aborted" and loop.waited_s == 50.0


def test_seed_ready_and_failed() -> None:
    ready = run(SEED, "[25s] loading\n[50s] The server is fired up and ready to roll!\nREADY\n")
    assert ready is not None and ready.outcome == "ready"
    failed = run(SEED, "[25s] loading\n[50s] torch.OutOfMemoryError: CUDA out of memory\nERR\n")
    assert failed is not None and failed.outcome == "failed"


def test_timeout_when_iterations_run_out() -> None:
    cmd = "for i in $(seq 1 3); do sleep 5; tail -1 /x.log | grep -q ready && break; done"
    loop = run(cmd, "still loading\nstill loading\nstill loading\n")
    assert loop is not None and loop.outcome == "timeout"
    loop124 = run("timeout 60 bash -c 'until curl -sf x/health; do sleep 5; done'", "", exit_code=124)
    assert loop124 is not None and loop124.outcome == "timeout" and loop124.max_wait_s == 60.0


def test_waited_from_timestamps_and_unknown() -> None:
    t0 = datetime(2026, 4, 8, 10, 0, tzinfo=UTC)
    loop = run("until curl -sf localhost:30000/health; do sleep 5; done", "",
               started_at=t0, ended_at=t0 + timedelta(seconds=95))
    assert loop is not None and loop.waited_s == 95.0 and loop.outcome == "unknown"
    assert loop.target == "localhost:30000/health"


def test_waited_from_line_count() -> None:
    cmd = "for i in {1..10}; do sleep 6; tail -1 /srv/app.log; done"
    loop = run(cmd, "a\nb\nc\n")
    assert loop is not None and loop.waited_s == 18.0


def test_url_and_process_targets() -> None:
    loop = run("while ! curl -s http://10.0.0.5:8000/v1/models; do sleep 3; done")
    assert loop is not None and loop.target == "http://10.0.0.5:8000/v1/models"
    proc = run("while pgrep -f bench_serving; do sleep 30; done")
    assert proc is not None and proc.target == "bench_serving"


@pytest.mark.parametrize("word,expected", [("25", 25.0), ("1.5", 1.5), ("2m", 120.0), ("1h", 3600.0), ("x", None)])
def test_seconds(word: str, expected: float | None) -> None:
    assert seconds(word) == expected


def test_non_shell_tools_are_ignored() -> None:
    call = ToolCall(session_id="s", msg_idx=0, call_id="c", tool="Read", command=SEED)
    ctx = MessageContext(message=Message(session_id="s", msg_idx=0, source_id="0", role="assistant"), calls=[call])
    assert analyse_polling(ctx) == []


@pytest.mark.parametrize("out", [
    "", "ok", "Timed out", "TIMEOUT waiting", "connection timed out\n", "time out", "timeouts",
    "estimated time: 3s", "tim", "Tim Out", "\u0130MEOUT", "t\u0130meout", "t\u0131med out",
    "caf\u00e9 timed out", "caf\u00e9 TIMEOUT", "caf\u00e9 TIMeout", "\u212a timeout",
])
def test_says_timeout_is_the_regex(out: str) -> None:
    assert _says_timeout(out) == bool(_TIMEOUT.search(out))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("tTiImMeEoOuUdD \n\u0130\u0131xé"), max_size=24))
def test_says_timeout_is_the_regex_on_any_text(out: str) -> None:
    assert _says_timeout(out) == bool(_TIMEOUT.search(out))


@pytest.mark.parametrize("command", [
    SEED, "watch -n 5 nvidia-smi", "sleep 30 && curl -s localhost:8000/health",
    "timeout 600 bash -c 'until curl -s localhost:8000/health; do sleep 5; done'",
])
def test_loops_are_the_records_validation_builds(command: str) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    loop = run(command, "[25s] booting\nREADY", started_at=start,
               ended_at=start + timedelta(seconds=75))
    assert loop is not None
    validated = PollingLoop(**loop.model_dump())
    assert loop == validated and repr(loop) == repr(validated)
    assert loop.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)


# --- exits of loops whose check is not grep, and timeouts told by an echoed status --------


@pytest.mark.parametrize(
    "command, output, outcome",
    [
        (
            "for i in $(seq 1 60); do curl -sf http://localhost:30000/health_generate >/dev/null"
            ' && echo READY && break; echo "waiting $i"; sleep 10; done',
            "waiting 1\nwaiting 2\nREADY",
            "ready",
        ),
        (
            "for i in $(seq 1 60); do curl -sf http://localhost:30000/health_generate >/dev/null"
            ' && echo READY && break; echo "waiting $i"; sleep 10; done',
            "waiting 1\nwaiting 2\nwaiting 3",
            "unknown",
        ),
        (
            "for i in {1..30}; do if curl -s http://x:1/health; then echo OK; break; fi; sleep 10; done",
            "curl: (7) Failed to connect\nOK",
            "ready",
        ),
        (
            'until curl -sf localhost:8000/health; do if ! kill -0 $PID; then echo "server died"; exit 1; fi;'
            " sleep 5; done",
            "server died",
            "failed",
        ),
    ],
)
def test_exit_markers_of_non_grep_checks(command: str, output: str, outcome: str) -> None:
    loop = run(command, output)
    assert loop is not None and loop.outcome == outcome


def test_while_not_grep_with_failure_branch_in_then_block() -> None:
    command = (
        'while ! grep -q "Application startup complete" vllm.log; do\n'
        '  if grep -qE "Error|Traceback" vllm.log; then echo "SERVER FAILED"; tail -n 3 vllm.log; exit 1; fi\n'
        "  sleep 20\n"
        "done; echo up"
    )
    assert exit_patterns(command) == (
        "Application startup complete", "Error|Traceback", None, "SERVER FAILED"
    )
    loop = run(command, "SERVER FAILED\nValueError: No available memory for the cache blocks.",
               status="error", exit_code=1)
    assert loop is not None and (loop.interval_s, loop.outcome) == (20.0, "failed")


def test_a_timeout_message_in_an_exit_branch_is_not_a_failure_marker() -> None:
    command = (
        "for i in $(seq 1 40); do curl -sf localhost:8000/health && break; "
        'if [ $i -eq 40 ]; then echo "timed out"; exit 1; fi; sleep 15; done'
    )
    loop = run(command, "timed out", status="error", exit_code=1)
    assert loop is not None and loop.outcome == "timeout"


@pytest.mark.parametrize("output, timed_out", [("exit=124", True), ("exit=0", False), ("rc: 1124", False)])
def test_status_of_outer_timeout_echoed(output: str, timed_out: bool) -> None:
    command = "timeout 600 bash -c 'until grep -q \"fired up\" s.log; do sleep 15; done'; echo exit=$?"
    loop = run(command, output)
    assert loop is not None and loop.max_wait_s == 600.0
    assert (loop.outcome == "timeout") is timed_out


SGLANG_READY = (
    "[2026-05-13 13:45:01] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16\n"
    "[2026-05-13 13:45:29] The server is fired up and ready to roll!\n"
)
SGLANG_OOM = (
    "[2026-05-13 13:44:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)
LOADING = "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10,  5.01s/it]\n"


@pytest.mark.parametrize(
    ("output", "outcome"),
    [
        (LOADING + SGLANG_READY, "ready"),
        (LOADING + SGLANG_OOM, "failed"),
        (SGLANG_READY + SGLANG_OOM, "failed"),  # the last milestone is the state it ended in
        (SGLANG_OOM + LOADING + SGLANG_READY, "ready"),  # restarted since
        (LOADING, "unknown"),  # still loading
        (SGLANG_READY + LOADING, "unknown"),  # restarting since
        (SGLANG_READY + 'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK\n', "ready"),
        ("curl: (7) Failed to connect to localhost port 30000: Connection refused\n", "unknown"),
    ],
)
def test_a_poll_without_patterns_ends_as_its_server_log_says(output: str, outcome: str) -> None:
    """``sleep N; tail log`` names no pattern: the server's own milestones in what it read
    tell whether the wait ended with the server ready or failed (a refused connection is a
    server not up yet, not a failure)."""
    loop = run("sleep 30; ssh gpu1 'tail -5 /root/sglang.log'", output)
    assert loop is not None and loop.outcome == outcome


BENCH_RESULT = (
    "100%|██████████| 64/64 [01:52<00:00,  1.76s/it]\n"
    "============ Serving Benchmark Result ============\n"
    "Backend:                                 vllm\n"
    "Successful requests:                     64\n"
    "Benchmark duration (s):                  112.40\n"
    "Output token throughput (tok/s):         311.52\n"
    "Mean TTFT (ms):                          402.17\n"
    "==================================================\n"
)
BENCH_PROGRESS = " 40%|████      | 26/64 [00:44<01:03,  1.67s/it]\n"


@pytest.mark.parametrize(
    ("output", "outcome"),
    [
        (BENCH_RESULT, "ready"),  # the benchmark waited for is done: its results are there
        (BENCH_PROGRESS, "unknown"),  # still running
        (BENCH_RESULT + SGLANG_OOM, "failed"),  # a server milestone says more
    ],
    ids=["results", "progress", "crash after"],
)
def test_a_poll_of_a_benchmark_log_ends_when_its_results_are_there(
    output: str, outcome: str
) -> None:
    """``sleep 60; tail -40 bench.log`` waits for a benchmark run in the background: the
    poll that reads its result block is the one that found the job done."""
    loop = run("sleep 60; ssh gpu1 'tail -40 /root/bench_c16.log'", output)
    assert loop is not None and loop.outcome == outcome


def test_a_poll_with_its_own_patterns_or_aborted_keeps_its_outcome() -> None:
    """The implied outcome only stands in for patterns the loop does not name."""
    own = run("for i in $(seq 1 3); do sleep 5; tail -1 /x.log | grep -q 'Uvicorn running' && break; done",
              SGLANG_READY)
    assert own is not None and own.outcome == "unknown"
    aborted = run("sleep 30; tail -5 /root/sglang.log", SGLANG_READY, status="aborted")
    assert aborted is not None and aborted.outcome == "aborted"


def test_a_health_poll_is_not_read_as_a_log() -> None:
    """A poll that prints a check's answer (a health endpoint's body) names no milestone,
    even when that body quotes one: only the lines of a log it reads are."""
    loop = run("sleep 20; curl -s localhost:30000/health", SGLANG_READY)
    assert loop is not None and loop.outcome == "unknown"
    logs = run("sleep 20; docker logs --tail 5 sglang", SGLANG_READY)
    assert logs is not None and logs.outcome == "ready"


# --- polling loops written in Python ------------------------------------------

PY_HEREDOC = """python3 - <<'EOF'
import time, requests
for i in range(60):
    try:
        r = requests.get('http://localhost:8000/health', timeout=2)
        if r.ok:
            print('UP'); break
    except Exception:
        pass
    time.sleep(5)
EOF"""

PY_WRITTEN = """cat > /tmp/poll.py <<'EOF'
import sys, time
from pathlib import Path
LOG = '/tmp/vllm.log'
while True:
    text = Path(LOG).read_text()
    if 'Application startup complete' in text:
        print('READY'); break
    if 'Traceback' in text:
        print('FAILED'); sys.exit(1)
    time.sleep(15)
EOF
python /tmp/poll.py"""


def test_python_heredoc_loop_is_a_polling_loop() -> None:
    loop = run(PY_HEREDOC, output="UP\n")
    assert loop is not None
    assert (loop.interval_s, loop.max_iterations, loop.max_wait_s) == (5.0, 60, 300.0)
    assert loop.target == "http://localhost:8000/health"
    assert loop.outcome == "ready"
    shape = loop_shape(PY_HEREDOC)
    assert shape is not None and shape.kind == "code"


def test_python_c_loop_with_try_break() -> None:
    command = ('python -c "import time,urllib.request as u\nfor i in range(120):\n  try:\n'
               "    u.urlopen('http://localhost:30000/health'); print('ready'); break\n"
               '  except Exception: time.sleep(10)"')
    loop = run(command, output="ready\n")
    assert loop is not None and (loop.interval_s, loop.max_iterations) == (10.0, 120)
    assert loop.outcome == "ready"


def test_python_script_written_then_run_reads_its_patterns() -> None:
    loop = run(PY_WRITTEN, output="FAILED\n")
    assert loop is not None
    assert loop.target == "/tmp/vllm.log"  # a module-level constant, resolved
    assert (loop.success_pattern, loop.failure_pattern) == ("Application startup complete", "Traceback")
    assert loop.outcome == "failed"
    ready = run(PY_WRITTEN, output="READY\n")
    assert ready is not None and ready.outcome == "ready"


@pytest.mark.parametrize(
    "command",
    [
        # a sweep: runs a benchmark and pauses, never leaves on what it saw
        "python - <<'EOF'\nimport subprocess, time\nfor c in [1, 4, 16]:\n"
        "    subprocess.run(['python', '-m', 'sglang.bench_serving', '--max-concurrency', str(c)])\n"
        "    time.sleep(5)\nEOF",
        # load: posts with pauses until a deadline
        "python3 -c \"import requests,time\nend=time.time()+60\nwhile time.time()<end:\n"
        "  requests.post('http://localhost:8000/v1/completions', json={})\n  time.sleep(0.1)\"",
        # waits without checking anything
        "python - <<'EOF'\nimport time\nfor i in range(3):\n    time.sleep(1)\n    print(i)\nEOF",
        "python -c 'this is not python'",
        # the here-document is data for a script, not the program
        "python run.py <<'EOF'\nfor i in range(9):\n    requests.get('http://x:1/h'); time.sleep(1); break\nEOF",
    ],
)
def test_python_code_that_does_not_poll(command: str) -> None:
    assert loop_shape(command) is None


def test_nc_port_knock_names_its_target() -> None:
    loop = run("while ! nc -z localhost 8000; do sleep 2; done; echo open", output="open\n")
    assert loop is not None and loop.target == "localhost:8000"
    timed = run("until nc -z -w 1 10.0.0.5 30000; do sleep 5; done")
    assert timed is not None and timed.target == "10.0.0.5:30000"  # past -w's value


PY_WAIT = """python3 - <<'EOF'
import time, requests
for attempt in range(90):
    try:
        if requests.get("http://localhost:30000/health", timeout=2).ok:
            break
    except requests.ConnectionError:
        pass
    time.sleep(4)
EOF"""


@pytest.mark.parametrize(
    "command,interval,iters",
    [
        (PY_WAIT, 4.0, 90),
        ("python -c \"import os,time\nwhile not os.path.exists('/tmp/ready'):\n    time.sleep(2)\nprint('ok'); exit(0)\"", 2.0, None),
    ],
)
def test_python_wait_loop(command: str, interval: float, iters: int | None) -> None:
    """A wait written in Python (a loop, a sleep, a look outside, a way out) polls as the
    shell forms do."""
    shape = loop_shape(command)
    assert shape is not None and shape.kind == "code"
    assert shape.interval_s == interval and shape.max_iterations == iters


@pytest.mark.parametrize(
    "command",
    [
        "python - <<'EOF'\nimport time, requests\nfor p in prompts:\n    requests.post('http://x/v1/completions', json={'prompt': p})\n    time.sleep(0.5)\nEOF",
        "cat > wait.py <<'EOF'\nimport time, requests\nwhile True:\n    if requests.get('http://x/health').ok:\n        break\n    time.sleep(5)\nEOF",
        "python wait_ready.py --sleep 5",
    ],
)
def test_python_not_a_wait_loop(command: str) -> None:
    """A paced load generator has no way out on a condition; a script written to a file
    does not run; a script file's code is not on the command line."""
    assert loop_shape(command) is None


VLLM_UP = "(APIServer pid=1234) INFO 05-13 13:45:29 [api_server.py:1000] Application startup complete.\n"


def test_a_loop_with_only_a_failure_pattern_reads_the_log_it_prints() -> None:
    """Its failure pattern not seen, the server milestone the loop's own ``tail`` printed
    tells the outcome, as for a loop naming no pattern."""
    cmd = ("until curl -sf localhost:8000/health; do grep -q Traceback /tmp/v.log && exit 1; "
           "sleep 5; done; tail -1 /tmp/v.log")
    loop = run(cmd, output=VLLM_UP)
    assert loop is not None and loop.failure_pattern == "Traceback" and loop.outcome == "ready"
    failed = run(cmd, output="Traceback (most recent call last):\n")
    assert failed is not None and failed.outcome == "failed"


@pytest.mark.parametrize(
    "command,exit_code,outcome",
    [
        ("until curl -sf localhost:8000/health >/dev/null; do sleep 5; done; echo UP", 0, "ready"),
        ("while ! nc -z localhost 8000; do sleep 2; done", 0, "ready"),
        ("while pgrep -f vllm.entrypoints >/dev/null; do sleep 3; done", 0, "ready"),
        ("until curl -sf localhost:8000/health >/dev/null; do sleep 5; done", 1, "unknown"),
        ("until curl -sf localhost:8000/health >/dev/null; do sleep 5; done", None, "unknown"),
        # the exit status of a for loop or of `while true` says nothing about the check
        ("for i in $(seq 10); do curl -sf localhost:8000/health && break; sleep 5; done", 0, "unknown"),
        ("while true; do curl -sf localhost:8000/health && break; sleep 5; done", 0, "unknown"),
    ],
)
def test_a_loop_on_its_condition_that_exits_0_saw_it_hold(
    command: str, exit_code: int | None, outcome: str
) -> None:
    loop = run(command, output="", exit_code=exit_code)
    assert loop is not None and loop.outcome == outcome


@pytest.mark.parametrize(
    "command",
    [
        "pkill -f sglang.launch_server; sleep 3; nohup python -m sglang.launch_server "
        "--model-path m --port 30000 > /root/x.log 2>&1 &\necho started",
        "ssh gpu1 'kill 5834; sleep 8; setsid nohup python3 -m sglang.launch_server "
        "--model-path /m > /root/q.log 2>&1 < /dev/null &'",
        "pkill -f sglang.launch_server; sleep 5; systemctl enable --now sglang.service "
        "&& systemctl is-active sglang.service",
        "sleep 2; python3 poll_queue.py &",
    ],
)
def test_a_sleep_before_a_launch_or_a_background_job_is_no_poll(command: str) -> None:
    """Waiting for the old server to exit and then starting one reads nothing: no poll."""
    assert loop_shape(command) is None


def test_a_sleep_then_a_check_is_still_a_poll() -> None:
    shape = loop_shape("pkill -f sglang.launch_server; sleep 5; nvidia-smi --query-gpu=memory.used")
    assert shape is not None and (shape.kind, shape.interval_s) == ("sleep_check", 5.0)


def test_a_timed_out_loop_without_a_clock_waited_its_limit() -> None:
    """A plain-text transcript has no times: a loop that timed out (exit code 124 echoed)
    waited as long as its ``timeout``, not one interval per line it printed."""
    loop = run(
        "timeout 120 bash -c 'until grep -q \"fired up\" /root/s.log; do sleep 5; done'; "
        'echo "exit code $?"',
        "exit code 124",
        exit_code=124,
    )
    assert loop is not None and (loop.outcome, loop.max_wait_s, loop.waited_s) == (
        "timeout", 120.0, 120.0
    )


def test_a_duration_in_a_log_line_read_is_not_the_loops_elapsed_time() -> None:
    """``sleep 30; tail -2 log`` printed a log line that says "Time elapsed: 32.11 s": the
    poll waited its 30 s, not the graph capture's time."""
    loop = run(
        "sleep 30; tail -2 /root/s.log",
        "[2026-04-02 14:10:48] Capture cuda graph end. Time elapsed: 32.11 s. mem usage=1.02 GB.\n"
        "[2026-04-02 14:10:49] Capture draft cuda graph begin. avail mem=11.80 GB",
    )
    assert loop is not None and loop.waited_s == 30.0


def test_a_loop_on_its_condition_that_reached_its_closing_echo_is_ready() -> None:
    """No exit code (a plain-text transcript): the ``echo OK`` after ``until curl …; done``
    only runs once the condition held."""
    cmd = "ssh h100 \"until curl -sf localhost:30000/health_generate >/dev/null; do sleep 10; done; echo OK\""
    loop = run(cmd, "OK")
    assert loop is not None and loop.outcome == "ready"
    aborted = run(cmd, "User aborted the command", status="aborted")
    assert aborted is not None and aborted.outcome == "aborted"
    nothing = run(cmd, "")
    assert nothing is not None and nothing.outcome == "unknown"


# --- fields checked blind (two hand-written sessions, see docs/labelling.md) --------


@pytest.mark.parametrize(
    "command,target",
    [
        ("watch -n 2 'nvidia-smi --query-gpu=utilization.gpu --format=csv'", "nvidia-smi"),
        ('watch -n 10 "tail -2 /var/log/vllm.out"', "/var/log/vllm.out"),
        ("watch -d df -h /mnt/models", "df"),
    ],
)
def test_a_watch_names_what_it_watches(command: str, target: str) -> None:
    loop = run(command, "", status="aborted")
    assert loop is not None and (loop.target, loop.outcome) == (target, "aborted")


NESTED = """while true; do
  if grep -qiE "Uvicorn running|exception" /tmp/vllm_qwen.out; then
    grep -qi exception /tmp/vllm_qwen.out && { echo BROKEN; exit 2; }
    echo SERVING; break
  fi
  sleep 4
done"""


def test_a_grep_in_the_block_of_another_grep_has_its_own_exit() -> None:
    """The outer grep waits for either line; the grep inside its block tells a crash apart:
    the outer one's pattern is the success pattern, the inner one's the failure pattern."""
    assert exit_patterns(NESTED) == ("Uvicorn running|exception", "exception", "SERVING", "BROKEN")
    broken = run(NESTED, "BROKEN", exit_code=2)
    serving = run(NESTED, "SERVING", exit_code=0)
    assert broken is not None and broken.outcome == "failed"
    assert serving is not None and serving.outcome == "ready"


T0 = datetime(2026, 5, 2, 8, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "command,ran_s,exit_code,outcome",
    [
        ("for n in {1..20}; do nc -z 10.1.2.3 8080 && break; sleep 6; done", 40.0, 0, "ready"),
        ("for n in {1..20}; do nc -z 10.1.2.3 8080 && break; sleep 6; done", 121.0, 0, "timeout"),
        # it may have left in its last round or run out: the clock cannot tell
        ("for n in {1..20}; do nc -z 10.1.2.3 8080 && break; sleep 6; done", 117.0, 0, "unknown"),
        ("for i in $(seq 1 12); do if curl -sf http://10.1.2.3:9000/ping; then echo ALIVE; break; fi; "
         "sleep 5; done", 61.0, 0, "timeout"),
        ("for i in $(seq 1 12); do if curl -sf http://10.1.2.3:9000/ping; then echo ALIVE; break; fi; "
         "sleep 5; done", 61.0, None, "timeout"),
        # a loop that also leaves when something failed: leaving early says nothing
        ("for i in $(seq 1 20); do grep -q Traceback w.log && exit 1; curl -sf localhost:9000/ping "
         "&& break; sleep 6; done", 10.0, 0, "unknown"),
    ],
)
def test_a_counted_loop_that_leaves_when_its_check_passes_ended_as_its_clock_says(
    command: str, ran_s: float, exit_code: int | None, outcome: str
) -> None:
    loop = run(command, "", exit_code=exit_code, started_at=T0, ended_at=T0 + timedelta(seconds=ran_s))
    assert loop is not None and loop.outcome == outcome


@pytest.mark.parametrize(
    "printing,output",
    [
        ('print("port open after", attempt, "tries")', "port open after 7 tries"),
        ('print(f"port open in {attempt * 2}s")', "port open in 14s"),
    ],
)
def test_a_python_loop_that_prints_its_marker_with_values_is_ready(printing: str, output: str) -> None:
    command = (
        "python3 - <<'EOF'\nimport socket, time\nfor attempt in range(30):\n"
        "    s = socket.socket()\n    if s.connect_ex((\"127.0.0.1\", 7000)) == 0:\n"
        f"        {printing}\n        break\n    time.sleep(2)\nEOF"
    )
    loop = run(command, output)
    assert loop is not None and (loop.interval_s, loop.max_iterations, loop.outcome) == (2.0, 30, "ready")
    assert run(command, "porting done").outcome == "unknown"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("command", "outcome"),
    [
        ("until curl -sf localhost:8000/health; do sleep 5; done", "ready"),
        # only the condition ends it: whatever follows ran after it held
        ("until curl -sf localhost:8000/health; do sleep 5; done | tee wait.log", "ready"),
        ("timeout 300 bash -c 'until curl -sf localhost:8000/health; do sleep 5; done'", "ready"),
        ("timeout 300 bash -c 'until curl -sf localhost:8000/health; do sleep 5; done' && "
         "curl -s localhost:8000/v1/models | jq -r '.data[0].id'", "ready"),
        # the timeout may have ended it: the exit status is jq's or echo's either way
        ("timeout 300 bash -c 'until curl -sf localhost:8000/health; do sleep 5; done'; "
         "curl -s localhost:8000/v1/models | jq -r '.data[0].id'", "unknown"),
        ("timeout 300 bash -c 'until curl -sf localhost:8000/health; do sleep 5; done' || "
         "echo gave up", "unknown"),
        # its counter may have ended it
        ("n=0; until curl -sf localhost:8000/health; do sleep 5; n=$((n+1)); "
         "[ $n -ge 24 ] && break; done; echo waited", "unknown"),
    ],
)
def test_an_exit_of_0_is_the_condition_met_only_when_it_is_the_loops(
    command: str, outcome: str
) -> None:
    loop = run(command, "", exit_code=0)
    assert loop is not None and loop.outcome == outcome
