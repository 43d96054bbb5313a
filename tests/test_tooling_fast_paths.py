"""The fast paths of the tooling extractor give what the slow ones give."""

from __future__ import annotations

from analytics.analysis.tooling import ScriptMemory, parse_launches, scan_log
from analytics.analysis.tooling.extractor import _measurement, _server_event
from analytics.analysis.tooling.launches import _may_matter
from analytics.models import Measurement, ServerEvent


def test_unvalidated_measurement_equals_validated() -> None:
    fields = dict(session_id="s", msg_idx=3, metric="m", value=1.5, unit=None, label="x=1")
    fast = _measurement(**fields, source="decode_log")
    slow = Measurement(**fields, source="decode_log")
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


def test_unvalidated_server_event_equals_validated() -> None:
    fields = dict(session_id="s", msg_idx=3, engine="sglang", event="oom", detail=None, log_ts="t")
    fast = _server_event(**fields)  # type: ignore[arg-type]
    slow = ServerEvent(**fields)  # type: ignore[arg-type]
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


def test_quoting_cannot_hide_a_launch_from_the_prefilter() -> None:
    assert parse_launches("python -m sgl'ang'.launch_server --tp 2")[0].engine == "sglang"
    assert parse_launches('v\\llm "serve" m')[0].model == "m"
    assert parse_launches("A=sgl; B=ang.launch_server; python -m $A$B")[0].engine == "sglang"
    assert not _may_matter("tail -n 50 /root/server.log", ScriptMemory())


def test_remembered_script_is_still_followed() -> None:
    scripts = ScriptMemory()
    scripts.remember("/x/it's.sh", "vllm serve m")
    assert _may_matter("tail log", scripts) is False
    assert [s.engine for s in parse_launches("bash \"/x/it's.sh\"", scripts)] == ["vllm"]


def test_engine_carries_over_skipped_lines_and_carriage_returns() -> None:
    text = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [a.py:1] x\n"
        "plain line\rLoading safetensors checkpoint shards: 100%\n"
        "\x1b[1m\n"
    )
    assert [(e.engine, e.event) for e in scan_log(text, "sglang").events] == [
        ("vllm", "loading_shards")
    ]
    assert [(e.engine, e.event) for e in scan_log(text[:-5], "sglang").events] == [
        ("vllm", "loading_shards")
    ]
