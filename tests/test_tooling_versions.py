"""Several flag tables per engine; container / service launches; extractor state round trip."""

from __future__ import annotations

import json

import pytest

from analytics.analysis.tooling import ToolingExtractor, parse_launches
from analytics.analysis.tooling.extractor import ToolingStateError
from analytics.analysis.tooling.flags import (
    available_tables,
    canonical_flag,
    resolve_flag,
    suggest_flag,
)
from analytics.analysis.tooling.launches import ScriptMemory
from analytics.models import Message, MessageContext, ToolCall

SID = "opencode:ses_versions"


def ctx(idx: int, command: str | None = None, output: str | None = None) -> MessageContext:
    call = ToolCall(
        session_id=SID, msg_idx=idx, call_id=f"c{idx}", tool="bash", command=command, output=output
    )
    msg = Message(session_id=SID, msg_idx=idx, source_id=str(idx), role="assistant")
    return MessageContext(message=msg, calls=[call], results=[call] if output else [])


def test_tables_cover_old_and_new_releases() -> None:
    assert {"0.4.6.post5", "0.5.2", "0.5.9", "0.5.23"} <= set(available_tables("sglang"))
    assert {"0.11.0", "0.33.0"} <= set(available_tables("vllm"))
    assert available_tables("sglang")[-1] == "0.5.23"  # 0.5.23 sorts after 0.5.9


@pytest.mark.parametrize(
    ("flag", "canonical", "newest"),
    [
        ("--tp", "--tp-size", "0.5.23"),
        ("--dp", "--dp-size", "0.5.23"),
        ("--cuda-graph-max-bs", "--cuda-graph-max-bs", "0.5.9"),  # ambiguous prefix in 0.5.23
        ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-decode", "0.5.23"),
        ("--tensor-parallel-size", "--tp-size", "0.5.23"),
    ],
)
def test_sglang_resolution_across_versions(flag: str, canonical: str, newest: str) -> None:
    match = resolve_flag("sglang", flag)
    assert match is not None and match.canonical == canonical
    assert match.versions[0] == newest


def test_cuda_graph_max_bs_is_not_in_0_5_23() -> None:
    match = resolve_flag("sglang", "--cuda-graph-max-bs")
    assert match is not None and "0.5.23" not in match.versions


def test_unknown_only_when_no_table_knows_and_suggestion_kept() -> None:
    assert canonical_flag("sglang", "--mem-fration-static") is None
    assert suggest_flag("sglang", "--mem-fration-static") == "--mem-fraction-static"
    spec = parse_launches(
        "python -m sglang.launch_server --model-path m --cuda-graph-max-bs 8 --mem-fration-static 0.8"
    )[0]
    assert spec.flags["--cuda-graph-max-bs"] == 8
    assert spec.unknown_flags == {"--mem-fration-static": "--mem-fraction-static"}


def test_vllm_spellings_in_old_and_new_tables() -> None:
    assert canonical_flag("vllm", "--gpu_memory_utilization") == "--gpu-memory-utilization"
    assert canonical_flag("vllm", "-tp") == "--tensor-parallel-size"
    match = resolve_flag("vllm", "--no-enable-prefix-caching")
    assert match is not None and match.negated and set(match.versions) == {"0.11.0", "0.33.0"}


def test_flag_tables_of_a_launch() -> None:
    old = parse_launches("python -m sglang.launch_server --model-path m --cuda-graph-max-bs 8")[0]
    assert "0.5.9" in old.flag_tables and "0.5.23" not in old.flag_tables
    new = parse_launches("sglang serve --model-path m --cuda-graph-max-bs-decode 8")[0]
    assert new.flag_tables == ["0.5.23"]
    mixed = parse_launches(
        "sglang serve --model-path m --cuda-graph-max-bs 8 --cuda-graph-max-bs-decode 8"
    )[0]
    assert mixed.flag_tables == [] and mixed.unknown_flags == {}


# --------------------------------------------------------------------------- containers, services


def test_docker_run_sglang_image_with_command() -> None:
    spec = parse_launches(
        "docker run --gpus all --shm-size 32g -p 30000:30000 -v /m:/m -e HF_TOKEN=abc "
        "--ipc=host -it --rm lmsysorg/sglang:latest python3 -m sglang.launch_server "
        "--model-path /m/llama --tp 2"
    )[0]
    assert spec.engine == "sglang" and spec.model == "/m/llama"
    assert spec.flags["--tp-size"] == 2
    assert spec.flags["docker:image"] == "lmsysorg/sglang:latest"
    assert spec.env == {"HF_TOKEN": "<redacted>"}


def test_docker_run_vllm_image_args_follow_image() -> None:
    spec = parse_launches(
        "sudo docker run --runtime nvidia --gpus all -p 8000:8000 --ipc=host "
        "vllm/vllm-openai:v0.11.0 --model mistralai/Mistral-7B-v0.1 --gpu-memory-utilization 0.85"
    )[0]
    assert spec.engine == "vllm" and spec.model == "mistralai/Mistral-7B-v0.1"
    assert spec.flags["--gpu-memory-utilization"] == 0.85
    positional = parse_launches("docker run -d vllm/vllm-openai Qwen/Qwen3-8B -tp 2")[0]
    assert positional.model == "Qwen/Qwen3-8B" and positional.flags["--tensor-parallel-size"] == 2


def test_docker_run_shell_inside_image() -> None:
    spec = parse_launches(
        "docker run --rm lmsysorg/sglang bash -c 'python3 -m sglang.launch_server --model-path m'"
    )[0]
    assert spec.engine == "sglang" and spec.flags["docker:image"] == "lmsysorg/sglang"


@pytest.mark.parametrize(
    "command",
    ["docker run ubuntu echo hi", "docker run -it lmsysorg/sglang bash", "docker ps"],
)
def test_docker_without_launch(command: str) -> None:
    assert parse_launches(command) == []


def test_systemctl_units() -> None:
    specs = parse_launches("sudo systemctl restart sglang-qwen.service && systemctl status x")
    assert [(s.engine, s.flags["systemd:unit"]) for s in specs] == [
        ("sglang", "sglang-qwen.service")
    ]
    specs = parse_launches("systemctl --user start vllm@llama nginx")
    assert [(s.engine, s.flags["systemd:unit"]) for s in specs] == [
        ("vllm", "vllm@llama"),
        ("other", "nginx"),
    ]
    assert parse_launches("systemctl daemon-reload; systemctl stop vllm") == []


def test_systemctl_enable_now_starts_its_units() -> None:
    """``enable --now`` starts the units as well (systemctl(1)); ``enable`` alone does not."""
    specs = parse_launches("systemctl daemon-reload && systemctl enable --now vllm-qwen.service")
    assert [(s.engine, s.flags["systemd:unit"]) for s in specs] == [("vllm", "vllm-qwen.service")]
    specs = parse_launches("sudo systemctl --now reenable sglang.service")
    assert [s.engine for s in specs] == ["sglang"]
    assert parse_launches("systemctl enable vllm-qwen.service") == []


def test_a_unit_file_written_in_the_session_gives_its_launch_flags() -> None:
    """A unit the session wrote runs its ``ExecStart=`` (systemd.service(5)): its launch has
    that command's flags, not only the unit's name."""
    memory = ScriptMemory()
    memory.remember(
        "/etc/systemd/system/vllm-q.service",
        "[Service]\nExecStart=-/usr/local/bin/vllm serve /m --port 8000 \\\n"
        "  --tensor-parallel-size 2 --data-parallel-size 4\nRestart=on-failure\n",
    )
    (spec,) = parse_launches("systemctl daemon-reload && systemctl restart vllm-q", memory)
    assert (spec.engine, spec.model) == ("vllm", "/m")
    assert spec.flags == {
        "--port": 8000, "--tensor-parallel-size": 2, "--data-parallel-size": 4,
        "systemd:unit": "vllm-q",
    }
    (other,) = parse_launches("systemctl restart vllm-other", memory)
    assert other.flags == {"systemd:unit": "vllm-other"}


def test_other_unit_does_not_become_the_server_in_force() -> None:
    ex = ToolingExtractor()
    ex.extract(ctx(0, "vllm serve m"))
    ex.extract(ctx(1, "systemctl restart nginx"))
    assert ex.current is not None and ex.current.engine == "vllm"


# --------------------------------------------------------------------------- state


def test_state_round_trip_continues_the_session() -> None:
    live = ToolingExtractor()
    live.extract(
        ctx(0, "cat > /w/run.sh <<'EOF'\npython -m sglang.launch_server --model-path m --tp 2\nEOF")
    )
    first = live.extract(ctx(1, "bash /w/run.sh")).launches
    assert first and first[0].changed_flags is None

    saved = json.loads(json.dumps(live.state()))
    restored = ToolingExtractor.from_state(saved)
    assert restored.state() == saved
    assert restored.current is restored.launches.last["sglang@/:"]

    edit = "sed -i s/x/y/ /w/run.sh; bash /w/run.sh; python -m sglang.launch_server --model-path m --tp 4"
    again = [restored.extract(ctx(2, c)).launches for c in ("bash run.sh", edit)]
    fresh = [live.extract(ctx(2, c)).launches for c in ("bash run.sh", edit)]
    assert [[lc.model_dump() for lc in b] for b in again] == [
        [lc.model_dump() for lc in b] for b in fresh
    ]
    assert again[0][0].changed_flags == {}
    assert again[1][-1].changed_flags == {"--tp-size": [2, 4]}


def test_state_keeps_the_log_lines_counted_already() -> None:
    """A poll after a restart re-reads the log: its numbers were measured before the restart."""
    log = "[2025-11-03 09:01:38 TP0] KV Cache is allocated. #tokens: 1032146, K size: 25.21 GB, V size: 25.21 GB"
    live = ToolingExtractor()
    live.extract(ctx(0, "python -m sglang.launch_server --model-path m"))
    first = live.extract(ctx(1, "tail server.log", log)).measurements
    assert [(m.metric, m.value) for m in first] == [("kv_cache_tokens", 1032146)]

    restored = ToolingExtractor.from_state(json.loads(json.dumps(live.state())))
    assert restored.extract(ctx(2, "tail server.log", log)).measurements == []
    assert live.extract(ctx(2, "tail server.log", log)).measurements == []


def test_empty_state_round_trip() -> None:
    state = ToolingExtractor().state()
    assert ToolingExtractor.from_state(state).state() == state


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"version": 99},
        {"version": 1, "scripts": [[None, 3, "x"]]},
        {"version": 1, "current": {}},
        {"version": 1, "counted_lines": "a line"},
    ],
)
def test_bad_state_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ToolingStateError):
        ToolingExtractor.from_state(bad)
