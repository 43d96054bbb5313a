"""Here-documents fed to an interpreter: their code is what the command runs.

``python - <<'EOF' … EOF`` is read as ``python -c '…'`` is, ``bash <<'EOF' … EOF`` as
``bash -c '…'``; a here-document written to a file (``cat > f.py <<'EOF'``) or given as
data to a script is never run, so it tags nothing.
"""

from __future__ import annotations

import pytest

from analytics.analysis.tagging import Tagger, parse_shell
from analytics.analysis.tagging.polling import loop_shape
from analytics.analysis.tagging.shell import stdin_program
from analytics.analysis.tooling.launches import parse_launches
from analytics.models import Message, MessageContext, ToolCall

OPENAI_PROBE = """from openai import OpenAI
c = OpenAI(base_url="http://localhost:8000/v1", api_key="EMPTY")
r = c.chat.completions.create(model="Qwen/Qwen3-32B-AWQ", messages=[{"role": "user", "content": "What is 17*23?"}], max_tokens=16)
print(r.choices[0].message.content)"""

SMOKES = [
    f"python - <<'EOF'\n{OPENAI_PROBE}\nEOF",
    'python3 <<EOF\nimport requests\nr = requests.post("http://localhost:30000/generate", '
    'json={"text": "The capital of France is", "sampling_params": {"max_new_tokens": 16}})\nprint(r.json())\nEOF',
    "bash <<'EOF'\ncurl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' "
    """-d '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'\nEOF""",
    f"cd /home/dev/serving && source .venv/bin/activate && python3 - <<'PY' && echo OK\n{OPENAI_PROBE}\nPY",
    f"ssh gpu-07 'cd /srv && python3 -' <<'PY'\n{OPENAI_PROBE}\nPY",
    "ssh h200-2 <<'EOF'\ncurl -s localhost:8001/v1/completions -d '{\"prompt\": \"Hi\", \"max_tokens\": 8}'\nEOF",
    f"docker exec -i sglang python3 - <<'EOF'\n{OPENAI_PROBE}\nEOF",
]
BENCHES = [
    "bash <<'EOF'\npython3 -m sglang.bench_serving --backend sglang --dataset-name random "
    "--random-input-len 1024 --random-output-len 256 --num-prompts 200 --max-concurrency 32\nEOF",
    "bash -s <<'SH'\nfor c in 1 8 32; do vllm bench serve --model m --max-concurrency $c --num-prompts 100; done\nSH",
    "python3 - <<'EOF'\nimport subprocess\nfor c in (8, 32):\n    subprocess.run(['python3', '-m', "
    "'sglang.bench_serving', '--backend', 'sglang', '--max-concurrency', str(c)], check=True)\nEOF",
]
WRITTEN_NOT_RUN = [
    f"cat > /tmp/probe.py <<'EOF'\n{OPENAI_PROBE}\nEOF",
    # from a real opencode session: the remote `cat` reads the here-document, nothing runs it
    "ssh bw8 \"cat > /root/launch_prefill.sh\" <<'EOF'\n#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\n"
    "numactl --cpunodebind=0 --membind=0 python3 -m sglang.launch_server --model-path /models/DeepSeek-V4-Flash "
    "--tp 4 --port 30000\nEOF",
    "cat > /tmp/bench.sh <<'EOF'\npython3 -m sglang.bench_serving --backend sglang --num-prompts 200\nEOF",
    "cat > /srv/start_server.sh <<'EOF'\n#!/bin/bash\nvllm serve Qwen/Qwen3-8B --port 8001\nEOF\nchmod +x /srv/start_server.sh",
    f"tee /tmp/probe.py > /dev/null <<'EOF'\n{OPENAI_PROBE}\nEOF",
    f"python3 /tmp/count_tokens.py <<'EOF'\n{OPENAI_PROBE}\nEOF",
    'python3 -m json.tool <<\'EOF\'\n{"url": "http://localhost:8000/v1/chat/completions", "model": "m"}\nEOF',
    f"bash -c 'wc -l' <<'EOF'\n{OPENAI_PROBE}\nEOF",
]


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger(diagnosis_model=None)


def _tags(tagger: Tagger, command: str) -> set[str]:
    call = ToolCall(session_id="s", msg_idx=0, call_id="c0", tool="Bash", command=command)
    msg = Message(session_id="s", msg_idx=0, source_id="0", role="assistant", text="")
    return {t.tag for t in tagger.tag([MessageContext(message=msg, calls=[call], results=[])])}


@pytest.mark.parametrize("command", SMOKES)
def test_generation_request_in_an_interpreter_heredoc_is_a_smoke_test(tagger: Tagger, command: str) -> None:
    assert _tags(tagger, command) == {"smoke_test"}


@pytest.mark.parametrize("command", BENCHES)
def test_benchmark_in_an_interpreter_heredoc_is_a_benchmark(tagger: Tagger, command: str) -> None:
    assert "benchmark" in _tags(tagger, command)


@pytest.mark.parametrize("command", WRITTEN_NOT_RUN)
def test_heredoc_written_to_a_file_or_read_as_data_tags_nothing(tagger: Tagger, command: str) -> None:
    assert _tags(tagger, command) == set()
    assert parse_launches(command) == []


@pytest.mark.parametrize(
    "body",
    [
        # defines a probe, calls nothing: the rules read the code as they read ``python -c``
        "def probe(client):\n    return client.chat.completions.create(model='m', messages=[])",
        "import openai\nprint(openai.__version__)",
        "from sglang.utils import wait_for_server\nhelp(wait_for_server)",
    ],
)
def test_heredoc_code_is_judged_as_a_dash_c_string(tagger: Tagger, body: str) -> None:
    heredoc = f"python3 - <<'EOF'\n{body}\nEOF"
    dash_c = f'python3 -c "{body}"'
    assert _tags(tagger, heredoc) == _tags(tagger, dash_c)


@pytest.mark.parametrize(
    "command,engine,host,port",
    [
        ("bash <<'EOF'\ncd /srv\nnohup python3 -m sglang.launch_server --model-path zai-org/GLM-4.6-FP8 "
         "--tp 8 --port 30000 > /srv/sglang.log 2>&1 &\nEOF", "sglang", None, 30000),
        ("ssh h200-2 <<'EOF'\nnohup vllm serve Qwen/Qwen3-8B --port 8001 > vllm.log 2>&1 &\nEOF",
         "vllm", "h200-2", 8001),
        ("bash -s -- --dry-run <<'SH'\nvllm serve Qwen/Qwen3-8B --port 8002\nSH", "vllm", None, 8002),
    ],
)
def test_launch_in_a_shell_heredoc_is_a_launch(
    tagger: Tagger, command: str, engine: str, host: str | None, port: int
) -> None:
    assert _tags(tagger, command) == {"launch"}
    [spec] = parse_launches(command)
    assert (spec.engine, spec.host, spec.flags["--port"]) == (engine, host, port)


def test_polling_loop_in_a_shell_heredoc_is_measured() -> None:
    command = (
        "ssh gpu-07 <<'EOF'\nfor i in $(seq 60); do curl -sf localhost:8000/health && break; "
        "sleep 5; done\nEOF"
    )
    shape = loop_shape(command)
    assert shape is not None
    assert (shape.interval_s, shape.max_iterations, shape.checks) == (5.0, 60, ("curl",))


def test_polling_loop_written_to_a_file_is_not_polling(tagger: Tagger) -> None:
    command = "cat > /tmp/wait.sh <<'EOF'\nuntil curl -sf localhost:8000/health; do sleep 5; done\nEOF"
    assert loop_shape(command) is None
    assert _tags(tagger, command) == set()


def test_python_polling_in_a_heredoc_is_a_polling_loop(tagger: Tagger) -> None:
    """A Python ``while`` loop that checks a server and sleeps waits as a shell loop does
    (read with Python's parser: ``codeloop``)."""
    command = (
        "python3 - <<'EOF'\nimport time, requests\nwhile True:\n"
        "    if requests.get('http://localhost:8000/health').ok:\n        break\n    time.sleep(5)\nEOF"
    )
    shape = loop_shape(command)
    assert shape is not None and (shape.kind, shape.interval_s) == ("code", 5.0)
    assert _tags(tagger, command) == {"polling_loop"}


@pytest.mark.parametrize(
    "command,owner,kind",
    [
        ("python - <<'EOF'\nprint(1)\nEOF", "python", "code"),
        ("python3 <<EOF\nprint(1)\nEOF", "python3", "code"),  # bashlex parses this one
        ("node <<'JS'\nconsole.log(1)\nJS", "node", "code"),
        ("bash -ex <<'EOF'\necho hi\nEOF", "bash", "shell"),
        ("sudo bash -o pipefail <<'EOF'\necho hi\nEOF", "sudo", "shell"),
        ("cat > f.py <<'EOF'\nprint(1)\nEOF", "cat", None),
        ("python run.py <<'EOF'\nprint(1)\nEOF", "python", None),
        ("python -m json.tool <<'EOF'\n{}\nEOF", "python", None),
    ],
)
def test_stdin_program(command: str, owner: str, kind: str | None) -> None:
    top = [c for c in parse_shell(command).commands if c.nested == 0]
    [cmd] = [c for c in top if c.words[0] == owner]
    body = command.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert cmd.heredocs == (body,)
    fed = stdin_program(cmd)
    assert (fed[0] if fed else None) == kind
    if fed:
        assert fed[1] == body


def test_heredoc_bodies_go_to_their_own_commands() -> None:
    command = "cat > a.py <<'A'\nprint('a')\nA\npython3 - <<'B' && echo done\nprint('b')\nB\necho end"
    by_name = {c.words[0]: c.heredocs for c in parse_shell(command).commands}
    assert by_name == {"cat": ("print('a')",), "python3": ("print('b')",), "echo": ()}


# --- other ways of putting a program on standard input ---------------------------------

CURL_CHAT = (
    "curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' "
    """-d '{"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}'"""
)
SGLANG_LAUNCH = (
    "nohup python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 4 --port 30000 "
    "> /srv/sglang.log 2>&1 &"
)
BENCH = (
    "python3 -m sglang.bench_serving --backend sglang --dataset-name random --random-input-len 1024 "
    "--random-output-len 256 --num-prompts 200 --max-concurrency 32"
)
CURL_IN_DQ = CURL_CHAT.replace('"', '\\"')
"""``CURL_CHAT`` inside double quotes (``echo "…"``, ``ssh host "…"``)."""
WAIT = "for i in $(seq 60); do curl -sf localhost:30000/health && break; sleep 5; done"


@pytest.mark.parametrize(
    "runner",
    [
        "python3 -",
        "uv run python -",
        "uv run --with openai python -",
        "uv run --python 3.12 --with openai,requests python3 -",
        "poetry run python -",
        "conda run -n sglang python -",
        "conda run --no-capture-output -p /opt/envs/sgl python3 -",
        "env OPENAI_API_KEY=EMPTY python -",
        "sudo -E python3 -",
        "sudo -E env PYTHONPATH=/srv uv run python -",
    ],
)
def test_interpreter_behind_a_runner_reads_its_heredoc(tagger: Tagger, runner: str) -> None:
    assert _tags(tagger, f"{runner} <<'EOF'\n{OPENAI_PROBE}\nEOF") == {"smoke_test"}


@pytest.mark.parametrize(
    "command",
    [
        f"cat <<'EOF' | python3\n{OPENAI_PROBE}\nEOF",
        f"cat <<EOF | uv run python -\n{OPENAI_PROBE}\nEOF",
        f"cat << 'EOF' | bash\n{CURL_CHAT}\nEOF",
        "echo 'import requests; print(requests.post(\"http://localhost:30000/generate\", "
        "json={\"text\": \"Hello\", \"sampling_params\": {\"max_new_tokens\": 8}}).json())' | python3",
        f'echo "{CURL_IN_DQ}" | bash',
        f"printf '%s\\n' \"{CURL_IN_DQ}\" | sh",
        f"python3 <<< '{OPENAI_PROBE}'",
        f'bash <<< "{CURL_IN_DQ}"',
        f"docker exec -i sglang python3 - <<'EOF'\n{OPENAI_PROBE}\nEOF",
        f"docker exec -it sglang bash <<'EOF'\n{CURL_CHAT}\nEOF",
        f"kubectl exec -i sglang-0 -- bash <<'EOF'\n{CURL_CHAT}\nEOF",
        f"kubectl exec --stdin sglang-0 -c server -- python3 - <<'EOF'\n{OPENAI_PROBE}\nEOF",
        f"ssh gpu-07 bash -s <<'EOF'\n{CURL_CHAT}\nEOF",
        f'ssh gpu-07 "{CURL_IN_DQ}"',
    ],
)
def test_program_piped_or_here_string_is_read(tagger: Tagger, command: str) -> None:
    assert _tags(tagger, command) == {"smoke_test"}


@pytest.mark.parametrize(
    "command",
    [
        f"cat <<'EOF' | bash\n{BENCH}\nEOF",
        f"bash <<< '{BENCH}'",
        f"echo '{BENCH}' | ssh gpu-07 bash -s",
        f"cat <<'EOF' | ssh gpu-07 bash -s\n{BENCH}\nEOF",
    ],
)
def test_piped_benchmark_is_a_benchmark(tagger: Tagger, command: str) -> None:
    assert "benchmark" in _tags(tagger, command)


@pytest.mark.parametrize(
    "command,host",
    [
        (f"cat <<'EOF' | bash\ncd /srv\n{SGLANG_LAUNCH}\nEOF", None),
        (f"echo '{SGLANG_LAUNCH}' | bash", None),
        (f"printf 'cd /srv\\n{SGLANG_LAUNCH}\\n' | sh", None),
        (f"bash <<< '{SGLANG_LAUNCH}'", None),
        (f"docker exec -i sglang bash <<'EOF'\n{SGLANG_LAUNCH}\nEOF", None),
        (f"docker exec -i -w /srv sglang bash -s <<'EOF'\n{SGLANG_LAUNCH}\nEOF", None),
        (f"kubectl exec -i sglang-0 -- bash <<'EOF'\n{SGLANG_LAUNCH}\nEOF", None),
        (f"ssh gpu-07 '{SGLANG_LAUNCH}'", "gpu-07"),
        (f"ssh gpu-07 bash -s <<'EOF'\n{SGLANG_LAUNCH}\nEOF", "gpu-07"),
        (f"cat <<'EOF' | ssh root@gpu-07 bash -s\n{SGLANG_LAUNCH}\nEOF", "gpu-07"),
    ],
)
def test_launch_piped_or_here_string_is_a_launch(tagger: Tagger, command: str, host: str | None) -> None:
    assert _tags(tagger, command) == {"launch"}
    [spec] = parse_launches(command)
    assert (spec.engine, spec.model, spec.host, spec.flags["--tp-size"], spec.flags["--port"]) == (
        "sglang", "Qwen/Qwen3-32B", host, 4, 30000,
    )


@pytest.mark.parametrize(
    "command",
    [
        # without -i docker / kubectl exec do not pass their standard input: bash reads nothing
        f"docker exec sglang bash <<'EOF'\n{SGLANG_LAUNCH}\nEOF",
        f"docker exec -u root sglang bash <<'EOF'\n{CURL_CHAT}\nEOF",
        f"podman exec -t sglang python3 - <<'EOF'\n{OPENAI_PROBE}\nEOF",
        f"kubectl exec sglang-0 -- bash <<'EOF'\n{SGLANG_LAUNCH}\nEOF",
        f"kubectl exec sglang-0 -c server -- bash <<'EOF'\n{CURL_CHAT}\nEOF",
        # ssh -n reads its standard input from /dev/null
        f"ssh -n gpu-07 bash -s <<'EOF'\n{SGLANG_LAUNCH}\nEOF",
        # written, not run
        f"cat <<'EOF' > /srv/run.sh\n{SGLANG_LAUNCH}\nEOF",
        f"cat <<'EOF' | tee /srv/probe.py\n{OPENAI_PROBE}\nEOF",
        f"echo '{SGLANG_LAUNCH}' >> /srv/history.txt",
        f"echo '{SGLANG_LAUNCH}' | grep -o 'port [0-9]*'",
    ],
)
def test_stdin_not_passed_or_not_run_tags_nothing(tagger: Tagger, command: str) -> None:
    assert _tags(tagger, command) == set()
    assert parse_launches(command) == []


@pytest.mark.parametrize(
    "command",
    [
        f"cat <<'EOF' | bash\n{WAIT}\nEOF",
        f"bash <<< '{WAIT}'",
        f"kubectl exec -i sglang-0 -- bash <<'EOF'\n{WAIT}\nEOF",
    ],
)
def test_piped_polling_loop_is_measured(command: str) -> None:
    shape = loop_shape(command)
    assert shape is not None
    assert (shape.interval_s, shape.max_iterations, shape.checks) == (5.0, 60, ("curl",))


def test_polling_loop_in_a_container_without_stdin_is_not_measured() -> None:
    assert loop_shape(f"docker exec sglang bash <<'EOF'\n{WAIT}\nEOF") is None


@pytest.mark.parametrize(
    "command",
    [
        f"cat <<'EOF' > /srv/run.sh && bash /srv/run.sh\n{SGLANG_LAUNCH}\nEOF",
        f"cat > /srv/run.sh <<'EOF'\ncd /srv\n{SGLANG_LAUNCH}\nEOF\nchmod +x /srv/run.sh && /srv/run.sh",
    ],
)
def test_script_written_then_run_in_one_command_is_read(tagger: Tagger, command: str) -> None:
    assert _tags(tagger, command) == {"launch"}
    [spec] = parse_launches(command)
    assert (spec.engine, spec.flags["--port"]) == ("sglang", 30000)


@pytest.mark.parametrize(
    "command",
    [
        "python3 <<< 'print(1)'\nnohup vllm serve Qwen/Qwen3-8B --port 8001 > vllm.log 2>&1 &",
        # ``case`` makes bashlex give up: the fallback tokenizer reads the here-string
        "case $MODE in a) ;; esac\nbash <<< 'echo ready'\nnohup vllm serve Qwen/Qwen3-8B --port 8001 &",
    ],
)
def test_here_string_is_not_a_here_document(tagger: Tagger, command: str) -> None:
    """``<<< word`` feeds one word: the lines after it are commands, not a document body."""
    assert [c.name for c in parse_shell(command).commands if c.nested == 0][-1] == "vllm"
    assert _tags(tagger, command) == {"launch"}
    [spec] = parse_launches(command)
    assert (spec.engine, spec.flags["--port"]) == ("vllm", 8001)


def test_printf_reuses_its_format_for_the_remaining_arguments() -> None:
    command = "printf '%s\\n' 'cd /srv' 'vllm serve Qwen/Qwen3-8B --port 8001' | bash"
    [spec] = parse_launches(command)
    assert (spec.engine, spec.flags["--port"]) == ("vllm", 8001)
    assert [c.words[0] for c in parse_shell(command).commands if c.nested == 1] == ["cd", "vllm"]


def test_script_echoed_to_a_file_then_run_is_read(tagger: Tagger) -> None:
    command = f"echo '{SGLANG_LAUNCH}' > /srv/run.sh && bash /srv/run.sh"
    assert _tags(tagger, command) == {"launch"}
    assert [s.engine for s in parse_launches(command)] == ["sglang"]
