"""Launch commands -> typed flags; scripts resolved later; diff_launches; flag suggestions."""

from __future__ import annotations

import json

import pytest

from analytics.analysis.tooling import (
    ScriptMemory,
    ToolingExtractor,
    diff_launches,
    load_table,
    parse_launches,
    suggest_flag,
)
from analytics.models import Launch, Message, MessageContext, ToolCall

SID = "opencode:ses_test"


def ctx(
    idx: int,
    command: str | None = None,
    output: str | None = None,
    tool: str = "bash",
    tool_input: str | None = None,
) -> MessageContext:
    call = ToolCall(
        session_id=SID,
        msg_idx=idx,
        call_id=f"c{idx}",
        tool=tool,
        command=command,
        input=tool_input,
        output=output,
        status="completed",
    )
    msg = Message(session_id=SID, msg_idx=idx, source_id=str(idx), role="assistant")
    return MessageContext(message=msg, calls=[call], results=[call] if output else [])


def one(command: str, scripts: ScriptMemory | None = None):  # noqa: ANN201
    found = parse_launches(command, scripts)
    assert len(found) == 1, found
    return found[0]


def test_flag_tables_present_with_source() -> None:
    for engine in ("sglang", "vllm"):
        table = load_table(engine)
        assert table is not None and table.source.startswith("PyPI wheel")
        assert len(table.flags) > 100


def test_sglang_env_prefix_continuation_background_redirect() -> None:
    spec = one(
        "pkill -f sglang.launch_server; sleep 2; NCCL_PROTO=LL CUDA_VISIBLE_DEVICES=0,1 "
        "nohup python3 -m sglang.launch_server --model /models/q \\\n  --tp 2 "
        "--mem-fraction-static 0.7 --disable-cuda-graph --cuda-graph-bs 1 2 4 "
        "--api-key sk-secret > /root/log 2>&1 &"
    )
    assert spec.engine == "sglang" and spec.model == "/models/q" and spec.host is None
    assert spec.flags["--model-path"] == "/models/q"
    assert spec.flags["--tp-size"] == 2
    assert spec.flags["--mem-fraction-static"] == 0.7
    assert spec.flags["--disable-cuda-graph"] is True
    assert spec.flags["--cuda-graph-bs"] == [1, 2, 4]
    assert spec.flags["--api-key"] == "<redacted>"
    assert spec.env == {"NCCL_PROTO": "LL", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert spec.flags["env:NCCL_PROTO"] == "LL"
    assert spec.unknown_flags == {}


def test_pgrep_of_launch_string_is_not_a_launch() -> None:
    assert parse_launches("pgrep -f 'python -m sglang.launch_server' || echo down") == []
    assert parse_launches("echo vllm serve Qwen/Qwen3-8B") == []


@pytest.mark.parametrize("quote", ["'", '"'])
def test_ssh_wrapped_launch_records_host(quote: str) -> None:
    spec = one(
        f"ssh -p 2222 root@kpro5 {quote}cd /root && NCCL_ALGO=Ring setsid python -m "
        f"sglang.launch_server --model-path /m --port 30001 > s.log 2>&1 &{quote}"
    )
    assert spec.host == "kpro5"
    assert spec.flags["--port"] == 30001 and spec.env == {"NCCL_ALGO": "Ring"}


def test_sglang_serve_docker_exec_env_and_unknown_flag() -> None:
    spec = one(
        "docker exec -e HF_TOKEN=hf_x -it sgl sglang serve --model-path m "
        "--mem-fration-static 0.6 --speculative-algo EAGLE3"
    )
    assert spec.engine == "sglang"
    assert spec.env["HF_TOKEN"] == "<redacted>"
    assert spec.unknown_flags == {"--mem-fration-static": "--mem-fraction-static"}
    assert spec.flags["--mem-fration-static"] == 0.6
    assert spec.flags["--speculative-algorithm"] == "EAGLE3"  # unique prefix


def test_vllm_serve_positional_model_aliases_and_no_flags() -> None:
    spec = one(
        "env VLLM_USE_V1=1 vllm serve Qwen/Qwen3-8B -tp 2 --gpu-memory-utilization=0.85 "
        "--no-enable-prefix-caching --max_model_len 32768 --enforce-eager"
    )
    assert spec.engine == "vllm" and spec.model == "Qwen/Qwen3-8B"
    assert spec.flags["--tensor-parallel-size"] == 2
    assert spec.flags["--gpu-memory-utilization"] == 0.85
    assert spec.flags["--enable-prefix-caching"] is False
    assert spec.flags["--max-model-len"] == 32768
    assert spec.flags["--enforce-eager"] is True
    assert spec.env == {"VLLM_USE_V1": "1"}


def test_vllm_module_entry() -> None:
    spec = one(
        "timeout 600 python -u -m vllm.entrypoints.openai.api_server --model m "
        "--tensor-parallel-size 4"
    )
    assert spec.engine == "vllm" and spec.model == "m" and spec.flags["--tensor-parallel-size"] == 4


def test_heredoc_script_resolved_when_run_later_over_ssh() -> None:
    scripts = ScriptMemory()
    write = (
        'ssh kpro5 \'cat > /root/run_mtp.sh <<"EOF"\n#!/bin/bash\nexport NCCL_P2P_LEVEL=NVL\n'
        "MODEL=/models/dsv4\npython3 -m sglang.launch_server --model-path $MODEL \\\n"
        "  --tp 8 --speculative-algorithm NEXTN --mem-fraction-static 0.60 --cuda-graph-max-bs 16\n"
        "EOF\nchmod +x /root/run_mtp.sh'"
    )
    assert parse_launches(write, scripts) == []
    spec = one(
        "ssh kpro5 'setsid bash /root/run_mtp.sh > /root/dsv4_mtp.log 2>&1 < /dev/null &'", scripts
    )
    assert spec.host == "kpro5" and spec.model == "/models/dsv4"
    assert spec.flags["--tp-size"] == 8 and spec.flags["--cuda-graph-max-bs"] == 16
    assert spec.env == {"NCCL_P2P_LEVEL": "NVL"}


@pytest.mark.parametrize("write", [
    # the local here-document is the remote cat's standard input
    "ssh gpu7 \"cat > /opt/serve.sh\" <<'EOF'\n{body}EOF",
    "ssh gpu7 'tee /opt/serve.sh >/dev/null' <<'EOF'\n{body}EOF",
    "cat <<'EOF' | ssh gpu7 'cat - > /opt/serve.sh'\n{body}EOF",
])
def test_script_written_through_ssh_standard_input_is_resolved_later(write: str) -> None:
    """``ssh host "cat > f" <<EOF`` writes the remote file from the local here-document;
    running it later over ssh is the launch inside."""
    body = "#!/bin/bash\nvllm serve /m/llama --port 8000 --max-num-seqs 64\n"
    scripts = ScriptMemory()
    assert parse_launches(write.format(body=body), scripts) == []
    spec = one("ssh gpu7 'setsid nohup bash /opt/serve.sh > /dev/null 2>&1 &'", scripts)
    assert spec.engine == "vllm" and spec.host == "gpu7" and spec.flags["--max-num-seqs"] == 64
    other = ScriptMemory()
    parse_launches("ssh gpu7 'cat /etc/hosts > /opt/serve.sh' <<'EOF'\n" + body + "EOF", other)
    assert parse_launches("ssh gpu7 'bash /opt/serve.sh'", other) == []  # cat read a file


def test_config_yaml_written_earlier_gives_flags_and_model() -> None:
    scripts = ScriptMemory()
    write = (
        "cat > /srv/qwen.yaml <<'EOF'\n"
        "model: Qwen/Qwen3-32B\n"
        "tensor-parallel-size: 4\n"
        "gpu_memory_utilization: 0.9   # leave room\n"
        "max-model-len: 32768\n"
        "enable-prefix-caching: true\n"
        'served-model-name: "qwen"\n'
        "api-key: sk-live-123\n"
        "compilation-config:\n"
        "  level: 3\n"
        "EOF"
    )
    assert parse_launches(write, scripts) == []
    spec = one("vllm serve --config /srv/qwen.yaml --port 8000 --max-model-len 16384", scripts)
    assert spec.model == "Qwen/Qwen3-32B"
    assert spec.flags == {
        "--config": "/srv/qwen.yaml",
        "--port": 8000,
        "--max-model-len": 16384,
        "--model": "Qwen/Qwen3-32B",
        "--tensor-parallel-size": 4,
        "--gpu-memory-utilization": 0.9,
        "--enable-prefix-caching": True,
        "--served-model-name": "qwen",
        "--api-key": "<redacted>",
    }


def test_config_file_never_written_leaves_the_command_flags() -> None:
    spec = one("python -m sglang.launch_server --config cfg.yaml --tp 2")
    assert spec.model is None and spec.flags == {"--config": "cfg.yaml", "--tp-size": 2}


@pytest.mark.parametrize(
    "command, flags",
    [
        (
            "vllm serve m -tp=2 -pp=1 --max-num-seqs=64",
            {"--tensor-parallel-size": 2, "--pipeline-parallel-size": 1, "--max-num-seqs": 64},
        ),
        ("vllm serve m -x=1", {"-x=1": True}),
    ],
)
def test_short_option_with_equals(command: str, flags: dict[str, object]) -> None:
    assert one(command).flags == flags


def test_tee_heredoc_and_relative_script_path() -> None:
    scripts = ScriptMemory()
    parse_launches("cat <<'EOF' | tee launch.sh\nvllm serve m --port 8001\nEOF", scripts)
    spec = one("cd /srv && ./launch.sh", scripts)
    assert spec.engine == "vllm" and spec.flags["--port"] == 8001


def test_extractor_remembers_write_tool_and_fills_changed_flags() -> None:
    ex = ToolingExtractor()
    body = "python -m sglang.launch_server --model-path m --mem-fraction-static 0.7\n"
    assert (
        ex.extract(
            ctx(0, tool="write", tool_input=json.dumps({"filePath": "/root/s.sh", "content": body}))
        ).launches
        == []
    )
    first = ex.extract(ctx(1, "nohup bash /root/s.sh > log 2>&1 &")).launches
    assert len(first) == 1 and first[0].changed_flags is None and first[0].call_id == "c1"
    second = ex.extract(
        ctx(
            2,
            "python -m sglang.launch_server --model-path m "
            "--mem-fraction-static 0.6 --cuda-graph-max-bs 16",
        )
    ).launches
    assert second[0].changed_flags == {
        "--cuda-graph-max-bs": [None, 16],
        "--mem-fraction-static": [0.7, 0.6],
    }


def test_diff_launches_per_engine() -> None:
    def launch(idx: int, engine: str, **flags: object) -> Launch:
        return Launch(session_id=SID, msg_idx=idx, engine=engine, model="m", flags=dict(flags))

    got = diff_launches(
        [
            launch(1, "sglang", **{"--tp-size": 8}),
            launch(2, "vllm", **{"--tensor-parallel-size": 2}),
            launch(3, "sglang", **{"--tp-size": 4, "env:NCCL_PROTO": "LL"}),
            launch(4, "sglang", **{"--tp-size": 4, "env:NCCL_PROTO": "LL"}),
        ]
    )
    assert [g.changed_flags for g in got] == [
        None,
        None,
        {"--tp-size": [8, 4], "env:NCCL_PROTO": [None, "LL"]},
        {},
    ]


@pytest.mark.parametrize(
    "engine, flag, expected",
    [
        ("sglang", "--mem-fration-static", "--mem-fraction-static"),
        ("sglang", "--tp", "--tp-size"),
        ("sglang", "--model", "--model-path"),
        ("sglang", "--tensor-parallel-size", "--tp-size"),
        ("sglang", "--cuda-graph-max-bss", "--cuda-graph-max-bs"),
        ("vllm", "--tensor-paralel-size", "--tensor-parallel-size"),
        ("vllm", "--gpu_memory_utilization", "--gpu-memory-utilization"),
        ("sglang", "--completely-unrelated-thing", None),
        ("nosuchengine", "--tp", None),
    ],
)
def test_suggest_flag(engine: str, flag: str, expected: str | None) -> None:
    assert suggest_flag(engine, flag) == expected


def test_servers_side_by_side_are_diffed_apart() -> None:
    """The prefill and decode servers of a PD deployment run side by side: each relaunch is
    compared with the last server of its role. A whole server is compared with the last
    launch of its engine on its host, on its port if there is one (a port dropped by
    mistake is a change), and a server's first PD launch with the last whole server."""
    def launch(n: int, args: str, host: str | None = "gpu7") -> Launch:
        (spec,) = parse_launches("python -m sglang.launch_server --model-path m " + args)
        return spec.to_launch("s", n, f"c{n}").model_copy(update={"host": host})

    rows = diff_launches([
        launch(0, "--port 30000 --disaggregation-mode prefill --mem-fraction-static 0.8"),
        launch(1, "--port 30001 --disaggregation-mode decode --mem-fraction-static 0.7"),
        launch(2, "--port 30001 --disaggregation-mode decode --mem-fraction-static 0.6"),
        launch(3, "--port 30000 --tp 8"),
        launch(4, "--port 30000 --disaggregation-mode prefill --mem-fraction-static 0.8"),
        launch(5, "--mem-fraction-static 0.8", host=None),
        launch(6, "--port 8100 --mem-fraction-static 0.9", host=None),
    ])
    assert [r.changed_flags for r in rows] == [
        None, None, {"--mem-fraction-static": [0.7, 0.6]},
        {"--disaggregation-mode": ["prefill", None], "--mem-fraction-static": [0.8, None],
         "--tp-size": [None, 8]},
        {},
        None, {"--mem-fraction-static": [0.8, 0.9], "--port": [None, 8100]},
    ]


@pytest.mark.parametrize(
    "command",
    [
        "python -m sglang.launch_server --help | grep -A1 speculative",
        "vllm serve --help=all",
        "vllm serve -h",
        "python3 -m vllm.entrypoints.openai.api_server --version",
    ],
)
def test_help_or_version_is_no_launch(command: str) -> None:
    # the CLI prints its usage or version and exits: no server starts
    assert parse_launches(command) == []


def test_model_given_positionally_or_by_flag_is_one_setting() -> None:
    """``vllm serve M`` and ``--model M`` (the API server module, a container's arguments)
    name the same model: only the flag that really changed is a change."""
    ex = ToolingExtractor()
    ex.extract(ctx(0, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 8192"))
    second = ex.extract(
        ctx(
            1,
            "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct "
            "--max-num-batched-tokens 16384",
        )
    ).launches
    assert second[0].changed_flags == {"--max-num-batched-tokens": [8192, 16384]}
    third = ex.extract(
        ctx(2, "vllm serve mistralai/Mistral-7B-Instruct-v0.3 --max-num-batched-tokens 16384")
    ).launches
    assert third[0].changed_flags == {
        "model": ["meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3"]
    }
