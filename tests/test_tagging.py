"""Tagger: positives and hard negatives per tag, structure, markers of every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.analysis.tagging import RuleError, Tagger
from analytics.models import Message, MessageContext, ToolCall

SID = "test:s1"


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger()


def msg(role: str, text: str = "", idx: int = 0, **kw: object) -> Message:
    return Message(session_id=SID, msg_idx=idx, source_id=str(idx), role=role, text=text, **kw)  # type: ignore[arg-type]


def ctx(role: str, text: str = "", idx: int = 0, calls=(), results=(), **kw: object) -> MessageContext:
    return MessageContext(message=msg(role, text, idx, **kw), calls=list(calls), results=list(results))


def call(command: str | None = None, tool: str = "bash", idx: int = 0, **kw: object) -> ToolCall:
    return ToolCall(session_id=SID, msg_idx=idx, call_id=f"c{idx}", tool=tool, command=command, **kw)  # type: ignore[arg-type]


def tags_of(tagger: Tagger, *contexts: MessageContext) -> set[tuple[int, str]]:
    return {(t.msg_idx, t.tag) for t in tagger.tag(list(contexts))}


def has(tagger: Tagger, c: MessageContext, tag: str) -> bool:
    return (c.message.msg_idx, tag) in tags_of(tagger, c)


def cases(tag: str, positives: list[str], negatives: list[str]) -> list[object]:
    """(tag, text, expected) params: each positive must get ``tag``, each hard negative must not."""
    return [pytest.param(tag, t, True, id=f"{tag}+{i}") for i, t in enumerate(positives)] + [
        pytest.param(tag, t, False, id=f"{tag}-{i}") for i, t in enumerate(negatives)
    ]


CHECKINS = [
    "ok?", "ready?", "status?", "done?", "is it up?", "any luck?", "well?", "?", "??",
    "how's it going?", "still running?", "update?", "status", "ok??", "Ready?", "is it up yet?",
    "so?", "are we good?", "did it work?", "how long?", "any news?", "is the server up?",
    "  ready?  ", "ok? ", "and now?", "hey, status?", "where are we?", "what's the status?",
    "numbers?", "it's been six minutes, what's happening?", "been 20 min, status?",
    "any numbers yet?", "any figures on the c32 run?",
]
NOT_CHECKINS = [
    "ok, now run the benchmark at concurrency 16", "yes go ahead", "ok", "okay", "yes",
    "ok, fine, let's do vite", "ready? if so run the benchmark at bs 16",
    "can you please replace them with a single link?", "Do we even need that function then?",
    "is it up? then restart it with --tp 8", "ok now let's try mtp", "go", "continue",
    "Why is the throughput so low compared to the baseline we measured yesterday?",
    "please check the status of the server and fix any errors",
    "it's been six minutes, restart it", "the numbers look wrong, rerun the c64 bench",
]


@pytest.mark.parametrize("role", ["assistant", "tool", "system"])
def test_checkin_only_for_user(tagger: Tagger, role: str) -> None:
    assert not has(tagger, ctx(role, "ok?"), "user_checkin")


@pytest.mark.parametrize(
    "text",
    [
        "<ide_selection>The user selected lines 1 to 2 from a.py: ok?</ide_selection>",
        "<command-name>/status</command-name>\n<command-message>status?</command-message>",
        "<system-reminder>ready?</system-reminder>",
        "<ide_opened_file>The user opened the file x.md in the IDE.</ide_opened_file>",
    ],
)
def test_context_wrappers_are_not_checkins(tagger: Tagger, text: str) -> None:
    assert not has(tagger, ctx("user", text), "user_checkin")


def test_checkin_after_ide_context(tagger: Tagger) -> None:
    text = "<ide_opened_file>The user opened the file a.log in the IDE.</ide_opened_file>\nready?"
    tags = tagger.tag([ctx("user", text)])
    checkin = [t for t in tags if t.tag == "user_checkin"]
    assert checkin and text[checkin[0].start_char : checkin[0].end_char] == "ready?"


def test_compaction_and_sidechain_are_not_checkins(tagger: Tagger) -> None:
    assert not has(tagger, ctx("user", "ok?", is_compaction_summary=True), "user_checkin")
    assert not has(tagger, ctx("user", "ok?", is_sidechain=True), "user_checkin")


DIAGNOSES = [
    "The root cause is the sparse decode kernel launching only 64 blocks.",
    "63% of decode time is in _tiled_sparse_decode_kernel.",
    "It OOMs because the draft and verify CUDA graphs need 20 GB more.",
    "The issue is that nohup does not detach from the SSH session's process group.",
    "The sparse MLA kernel is the bottleneck here.",
    "This happens when temperature is 0.7 with MTP enabled.",
    "The crash was caused by a stale log from the previous run.",
    "That's why the server died after the SSH session closed.",
    "The server crashed because --mem-fraction-static 0.85 leaves no room for the KV pool.",
    "Turns out the port was still held by the old process.",
]
NOT_DIAGNOSES = [
    "Let me check the logs.",
    "The log says `RuntimeError: Not enough memory because of fragmentation`.",
    "I'll use setsid because it's cleaner.",
    "The issue might be the cache, let me check.",
    "Is it because of the memory fraction?",
    "> the root cause is unknown",
    "Now let me run the benchmark at concurrency 16.",
    "That's strange. Let me search for it.",
]


def test_diagnosis_not_for_user(tagger: Tagger) -> None:
    assert not has(tagger, ctx("user", "the root cause is the kernel"), "diagnosis")


CLAIMS = [
    "Yes, it's up! Let me do a proper smoke test.",
    "The server is ready.",
    "Deployment is complete.",
    "All tests pass.",
    "Fixed! The import path was wrong.",
    "The server is up and running on port 30000.",
    "Great! The tests are passing.",
    "Perfect! The dev server is running on http://localhost:5173/.",
    "The AudioWorklet migration is complete.",
    "It works now.",
    "Service is back and verified: the smoke test answered correctly.",
    "It survived the reboot: the service came back by itself.",
]
NOT_CLAIMS = [
    "Let me check if it's up.",
    "Once it's ready I'll run the benchmark.",
    "The log says `The server is fired up and ready to roll!`",
    "The server is not ready yet.",
    "Is the server up?",
    "I'll wait until the server is ready.",
    "Let me run the tests to make sure everything still works.",
    'The last line reads "The server is fired up and ready to roll!"',
    "The dev server is starting. Let me check its output.",
    "The OOM is back: the server died again during graph capture.",
    "Once the service is back I'll rerun the benchmark.",
]


@pytest.mark.parametrize(
    "tag,text,expected",
    cases("user_checkin", CHECKINS, NOT_CHECKINS)
    + cases("diagnosis", DIAGNOSES, NOT_DIAGNOSES)
    + cases("readiness_claim", CLAIMS, NOT_CLAIMS),
)
def test_prose_tag(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    role = "user" if tag == "user_checkin" else "assistant"
    assert has(tagger, ctx(role, text), tag) is expected


def test_readiness_evidence_offsets(tagger: Tagger) -> None:
    text = "Yes, it's up! 'The server is fired up and ready to roll!'"
    tag = next(t for t in tagger.tag([ctx("assistant", text)]) if t.tag == "readiness_claim")
    assert text[tag.start_char : tag.end_char] == tag.evidence == "it's up"
    assert tag.source == "rules" and tag.score == 1.0 and tag.tagger_version == tagger.version


LAUNCHES = [
    "python -m sglang.launch_server --model-path /models/q --tp 8 --port 30000",
    "nohup python3 -m sglang.launch_server --model-path x > /tmp/s.log 2>&1 &",
    "setsid nohup bash /root/launch_mtp.sh > /root/mtp.log 2>&1 < /dev/null &",
    "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2",
    "python -m vllm.entrypoints.openai.api_server --model m",
    "docker run --gpus all -p 8000:8000 vllm/vllm-openai",
    "docker compose up -d",
    "sudo systemctl restart sglang",
    "tmux new -d -s srv 'sglang serve --model-path m'",
    "ssh kpro5 'cd /root && nohup python -m sglang.launch_server --model-path m > log 2>&1 &'",
    "bash launch.sh",
    "pkill -f sglang; sleep 3; python -m sglang.launch_server --model-path m &",
]
NOT_LAUNCHES = [
    "ps aux | grep sglang.launch_server",
    "pkill -f launch_server",
    "cat /root/launch_mtp.sh",
    "tail -50 /tmp/sglang.log",
    "grep -n 'vllm serve' README.md",
    "cat > launch.sh <<'EOF'\npython -m sglang.launch_server --model-path m\nEOF",
    "pytest -q",
    "uv run pytest test/test_x.py -v",
]


def test_launch_run_in_background(tagger: Tagger) -> None:
    c = call("pnpm dev", tool="Bash", input=json.dumps({"command": "pnpm dev", "run_in_background": True}))
    assert has(tagger, ctx("assistant", calls=[c]), "launch")
    assert not has(tagger, ctx("assistant", calls=[call("pnpm dev", tool="Bash")]), "launch")


SMOKES = [
    """curl -s localhost:30000/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"m","messages":[{"role":"user","content":"2+2?"}]}'""",
    "curl http://127.0.0.1:8000/v1/completions -d '{\"prompt\": \"hi\", \"max_tokens\": 8}'",
    "curl -s localhost:30000/generate -d '{\"text\": \"Hello\", \"sampling_params\": {\"max_new_tokens\": 16}}'",
    "python -c \"from openai import OpenAI; c=OpenAI(base_url='http://x/v1'); print(c.chat.completions.create(model='m', messages=[]))\"",
    "ssh kpro5 'curl -s localhost:30000/v1/chat/completions -d @/tmp/req.json'",
]
NOT_SMOKES = [
    "curl -s localhost:30000/health",
    "curl -sf http://localhost:8000/v1/models",
    "curl -s localhost:30000/health_generate -o /dev/null -w '%{http_code}'",
    "grep -n chat/completions server.py",
    "pytest tests/",
]


BENCHES = [
    "python -m sglang.bench_serving --backend sglang --num-prompts 64 --max-concurrency 16",
    "vllm bench serve --model m --num-prompts 100",
    "python3 -m sglang.bench_one_batch --model-path m --batch-size 1 --input-len 128",
    "genai-perf profile -m m --concurrency 8",
    "ab -n 1000 -c 10 http://localhost:8080/",
    "wrk -t4 -c64 -d30s http://localhost:8080/",
    "hyperfine 'python a.py'",
    "pytest tests/ --benchmark-only",
    "python benchmarks/bench_tagging.py",
]
NOT_BENCHES = ["pytest -q", "curl -s localhost:30000/health", "ls benchmarks/", "cat bench_results.txt"]


@pytest.mark.parametrize(
    "tag,text,expected",
    cases("launch", LAUNCHES, NOT_LAUNCHES)
    + cases("smoke_test", SMOKES, NOT_SMOKES)
    + cases("benchmark", BENCHES, NOT_BENCHES),
)
def test_command_tag(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    assert has(tagger, ctx("assistant", calls=[call(text)]), tag) is expected


def test_benchmark_result_message(tagger: Tagger) -> None:
    out = "============ Serving Benchmark Result ============\nSuccessful requests:   64\nOutput token throughput (tok/s):   1234.5\n"
    bench = call("python -m sglang.bench_serving --num-prompts 64", idx=0, output=out, status="completed", result_msg_idx=1)
    tags = tags_of(tagger, ctx("assistant", idx=0, calls=[bench]), ctx("tool", out, idx=1, results=[bench]))
    assert (0, "benchmark") in tags and (1, "benchmark") in tags


ERRORS = [
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "Segmentation fault (core dumped)",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode",
    "bash: vllm: command not found",
    "[2026-04-08 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    "Received sigquit from a child process. It usually means the child failed.",
    "Nov 03 08:12:39 gpu-07 python[41122]: launch_server.py: error: ambiguous option: --cuda-graph-max-bs",
    "Nov 03 08:12:39 gpu-07 python[41122]: launch_server.py: error: unrecognized arguments: --tp-szie 8",
    "     Active: failed (Result: exit-code) since Mon 2025-11-03 08:12:40 UTC; 2h ago",
    "   Main PID: 41122 (code=exited, status=1/FAILURE)",
    '{"object":"error","message":"Service Unavailable","type":"ServiceUnavailableError","code":503}',
]
NOT_ERRORS = [
    "     Active: active (running) since Mon 2025-11-03 12:01:10 UTC; 2min ago",
    "   Main PID: 41122 (code=exited, status=0/SUCCESS)",
    "INFO:     Application startup complete.",
    "The server is fired up and ready to roll!",
    "1 file left unchanged",
    "All checks passed!",
    "KV cache pool is full. Retract requests. #retracted_reqs: 1",
]


@pytest.mark.parametrize("tag,text,expected", cases("error", ERRORS, NOT_ERRORS))
def test_error_in_output(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """Exit code 0 throughout: the output alone decides."""
    c = call("python serve.py", output=text, status="completed", exit_code=0, result_msg_idx=0)
    assert has(tagger, ctx("assistant", calls=[c], results=[c]), tag) is expected


def test_error_exit_code_and_status(tagger: Tagger) -> None:
    c = call("make", output="", status="completed", exit_code=2)
    assert has(tagger, ctx("tool", results=[c]), "error")
    e = call(None, tool="Edit", output="String to replace not found in file.", status="error")
    assert has(tagger, ctx("tool", results=[e]), "error")


def test_error_message_level(tagger: Tagger) -> None:
    assert has(tagger, ctx("assistant", error="APIError: overloaded"), "error")
    assert not has(tagger, ctx("assistant", error="MessageAbortedError: Aborted"), "error")


# --- user_abort: the markers of every format --------------------------------


def test_abort_opencode_message_error(tagger: Tagger) -> None:
    assert has(tagger, ctx("assistant", "partial", error="MessageAbortedError: Aborted"), "user_abort")


@pytest.mark.parametrize(
    "output",
    ["Tool execution aborted", "partial\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"],
)
def test_abort_opencode_tool(tagger: Tagger, output: str) -> None:
    c = call("sleep 100", output=output, status="error", result_msg_idx=3, idx=3)
    tags = tags_of(tagger, ctx("assistant", idx=3, calls=[c], results=[c]))
    assert (3, "user_abort") in tags and (3, "error") not in tags


def test_abort_status_aborted_tags_result_message(tagger: Tagger) -> None:
    c = call("npm install", idx=1, status="aborted", output="", result_msg_idx=2)
    tags = tags_of(tagger, ctx("assistant", idx=1, calls=[c]), ctx("tool", idx=2, results=[c]))
    assert (2, "user_abort") in tags and (1, "user_abort") not in tags


@pytest.mark.parametrize(
    "role,text",
    [
        ("user", "[Request interrupted by user]"),
        ("user", "[Request interrupted by user for tool use]"),
        ("tool", "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file)."),
        ("system", "<turn_aborted>\nThe previous turn was interrupted on purpose.\n</turn_aborted>"),
        ("user", "The user interrupted the previous turn on purpose. Any running unified exec processes may still be running."),
    ],
)
def test_abort_text_markers(tagger: Tagger, role: str, text: str) -> None:
    assert has(tagger, ctx(role, text), "user_abort")


def test_abort_cc_rejection_result(tagger: Tagger) -> None:
    c = call("rm -rf build", tool="Bash", status="error", output="The user doesn't want to proceed with this tool use. The tool use was rejected", result_msg_idx=0)
    assert has(tagger, ctx("tool", results=[c]), "user_abort")


@pytest.mark.parametrize("output", ["aborted by user after 77.1s", "aborted"])
def test_abort_codex_tool_output(tagger: Tagger, output: str) -> None:
    c = call("sleep 999", tool="exec_command", output=output, status="completed", result_msg_idx=0)
    assert has(tagger, ctx("tool", results=[c]), "user_abort")


def test_abort_codex_turn_aborted_event(tagger: Tagger) -> None:
    assert has(tagger, ctx("system", "", error="turn_aborted: interrupted"), "user_abort")


def test_abort_not_in_assistant_prose(tagger: Tagger) -> None:
    assert not has(tagger, ctx("assistant", "You pressed ESC: [Request interrupted by user]"), "user_abort")


def test_no_abort_on_plain_messages(tagger: Tagger) -> None:
    assert not has(tagger, ctx("user", "please abort the benchmark"), "user_abort")


# --- polling through the Tagger ---------------------------------------------

SEED_LOOP = """for i in $(seq 1 16); do
  sleep 25
  r=$(timeout 10 ssh host 'tail -1 /root/dsv4_mtp.log' 2>/dev/null)
  echo "[$((i*25))s] ${r: -85}"
  echo "$r" | grep -qiE "fired up|ready to roll" && { echo READY; break; }
  echo "$r" | grep -qiE "Traceback|out of memory|Killed|kill_process_tree" && { echo ERR; break; }
done"""


def test_polling_seed_loop_and_abort(tagger: Tagger) -> None:
    c = call(SEED_LOOP, idx=5, status="error", output="[25s] x\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>", result_msg_idx=5)
    tags = tags_of(tagger, ctx("assistant", idx=5, calls=[c], results=[c]), ctx("user", "ok?", idx=6))
    assert {(5, "polling_loop"), (5, "user_abort"), (6, "user_checkin")} <= tags
    assert (5, "error") not in tags


def test_background_rechecks(tagger: Tagger) -> None:
    def check(i: int) -> MessageContext:
        c = call(None, tool="BashOutput", idx=i, input=json.dumps({"bash_id": "dce0af"}))
        return ctx("assistant", idx=i, calls=[c])

    single = tags_of(tagger, check(0))
    assert (0, "polling_loop") not in single
    sleep = ctx("assistant", idx=1, calls=[call("sleep 5", idx=1)])
    both = tags_of(tagger, check(0), sleep, check(2))
    assert (0, "polling_loop") in both and (2, "polling_loop") in both


def test_monitor_tool_is_polling(tagger: Tagger) -> None:
    c = call(None, tool="Monitor", input=json.dumps({"shell_id": "a1"}))
    assert has(tagger, ctx("assistant", calls=[c]), "polling_loop")


def test_tool_output_is_never_prose(tagger: Tagger) -> None:
    c = call("cat notes.txt", output="ok?\nThe root cause is the kernel. The server is ready.", status="completed", result_msg_idx=0)
    tags = tags_of(tagger, ctx("tool", "ok?\nThe root cause is the kernel. The server is ready.", results=[c]))
    assert not tags & {(0, "user_checkin"), (0, "diagnosis"), (0, "readiness_claim")}


def test_long_prose_is_truncated(tagger: Tagger) -> None:
    text = "x " * 5000 + "The root cause is the kernel."
    assert not has(tagger, ctx("assistant", text), "diagnosis")


def test_version_and_lazy_nlp() -> None:
    t = Tagger()
    assert t.version.startswith("rules-") and "+patterns-" in t.version
    assert t._nlp is None
    t.tag([ctx("assistant", calls=[call("ls")])])
    assert t._nlp is None  # no prose, no spaCy pipeline
    t.tag([ctx("user", "ok?")])
    assert t._nlp is not None
    names = t.nlp.pipe_names
    assert names == ["sentencizer", "tag_patterns", "checkin_gate", "prose_filter"]


# --- custom taxonomies ------------------------------------------------------


def test_extra_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.jsonl"
    rules.write_text(
        "\n".join(
            [
                json.dumps({"label": "cost_concern", "pattern": [{"LOWER": "too"}, {"LOWER": "expensive"}], "roles": ["user"]}),
                json.dumps({"label": "gpu_mention", "pattern": "H100", "roles": ["user", "assistant"]}),
                json.dumps({"label": "profiling", "regex": r"\bnsys\s+profile\b", "on": "command"}),
            ]
        )
    )
    t = Tagger(extra_rules=rules)
    assert t.version != Tagger().version
    tags = tags_of(
        t,
        ctx("user", "this is too expensive", idx=0),
        ctx("assistant", "We have 8 h100 GPUs.", idx=1),
        ctx("assistant", idx=2, calls=[call("nsys profile -o out python run.py", idx=2)]),
    )
    assert {(0, "cost_concern"), (1, "gpu_mention"), (2, "profiling")} <= tags


def test_example_rules_file_loads() -> None:
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "my_rules.jsonl"
    t = Tagger(extra_rules=example)
    assert t.tag([ctx("user", "ok?")])


@pytest.mark.parametrize(
    "line,needle",
    [
        ('{"pattern": "x"}', "label"),
        ('{"label": "a"}', "pattern"),
        ('{"label": "a", "pattern": "x", "roles": ["human"]}', "roles"),
        ("not json", "JSON"),
        ('{"label": "a", "regex": "(", "on": "command"}', "regex"),
    ],
)
def test_bad_rules_name_the_problem(tmp_path: Path, line: str, needle: str) -> None:
    rules = tmp_path / "bad.jsonl"
    rules.write_text(line + "\n")
    with pytest.raises(RuleError, match=needle):
        Tagger(extra_rules=rules).tag([ctx("user", "hi")])


# --- prefilter: trigger regexes and windows ------------------------------------


def test_windowed_prose_keeps_offsets(tagger: Tagger) -> None:
    filler = "The decode step runs with the usual batch settings here. " * 40
    text = filler + "The root cause is the sparse decode kernel. " + filler
    tags = [t for t in tagger.tag([ctx("assistant", text)]) if t.tag == "diagnosis"]
    assert tags and text[tags[0].start_char : tags[0].end_char] == tags[0].evidence
    assert tags[0].evidence.lower().startswith("root cause")


def test_no_trigger_no_spacy() -> None:
    t = Tagger()
    t.tag([ctx("assistant", "Running the sweep at concurrency 16 next, with chunked prefill 2048.")])
    assert not t._piece_cache


def test_triggers_cover_every_shipped_pattern() -> None:
    """Every shipped prose rule translates into at least one trigger regex (none is "always run")."""
    from analytics.analysis.tagging.components import PATTERNS_DIR, prefilter_steps, read_jsonl
    from analytics.analysis.tagging.triggers import compile_triggers, variants

    for row in read_jsonl(PATTERNS_DIR / "prose.jsonl"):
        seqs = prefilter_steps(row)
        assert seqs is not None, row["id"]
        found = compile_triggers(seqs)
        assert found, row["id"]
        assert not any(t.search("lorem ipsum dolor") for t in found), row["id"]  # not "any word"
    # untranslatable attributes mean "always a candidate", never a silent miss
    assert variants([{"POS": "VERB"}, {"LOWER": "because"}]) is None


def test_failure_context_unlocks_weak_cause() -> None:
    tagger = Tagger(diagnosis_model=None)  # the rule's gate, without the learned classifier
    text = "The model is a hybrid: besides the KV cache it needs a state pool per running request."
    assert not has(tagger, ctx("assistant", text), "diagnosis")
    err = call("python -m sglang.launch_server --model m", idx=0, output="RuntimeError: Not enough memory. Please try to increase --mem-fraction-static", status="completed", exit_code=1, result_msg_idx=1)
    found = tags_of(tagger, ctx("assistant", "Launching.", 0, calls=[err]), ctx("tool", "", 1, results=[err]), ctx("assistant", text, 2))
    assert (1, "error") in found and (2, "diagnosis") in found


@pytest.mark.parametrize(
    "role,text",
    [
        ("assistant", "The root cause is the sparse decode kernel, so 63% of decode time is in it. Fixed!"),
        ("assistant", "Since the server is up and running, all 12 tests pass now; this is why it works."),
        ("assistant", "Deployment is now complete. It's not supported on sm90 because the kernel is too slow."),
        ("user", "are you still there? is the server up yet ??"),
        ("user", "how's it going, any luck?"),
        ("user", "部署好了吗"),
    ],
)
def test_rule_selection_matches_full_matcher(tagger: Tagger, role: str, text: str) -> None:
    """Running only the rules whose required words occur finds what one Matcher with every rule finds."""
    from spacy.matcher import Matcher

    nlp = tagger.nlp
    pt = nlp.get_pipe("tag_patterns")
    doc = nlp.make_doc(text)
    doc.user_data["role"] = role
    doc = nlp.get_pipe("sentencizer")(doc)
    full = Matcher(nlp.vocab)
    for key, pat in pt.patterns[role]:  # type: ignore[attr-defined]
        full.add(key, [pat])
    expected = {(nlp.vocab.strings[m], s, e) for m, s, e in full(doc)}
    got = {(s.label_, s.id_, s.start, s.end) for s in pt.match(doc)}  # type: ignore[attr-defined]
    assert expected, text
    assert got == {(pt.rules[k]["label"], pt.rules[k]["id"], s, e) for k, s, e in expected}  # type: ignore[attr-defined]


# --- diagnosis: the learned classifier -------------------------------------------

def test_model_tags_cause_without_cue_words(tagger: Tagger) -> None:
    text = "EP8 is slower: every MoE layer now does an all-to-all over PCIe, and there is no NVLink."
    [tag] = [t for t in tagger.tag([ctx("assistant", text)]) if t.tag == "diagnosis"]
    assert tag.source == "model" and tagger.diagnosis is not None
    assert tagger.diagnosis.settings.threshold <= tag.score <= 1.0
    assert tag.evidence and tag.evidence in text and "+diagnosis-" in tag.tagger_version


@pytest.mark.parametrize(
    "role,text",
    [
        ("assistant", "Next point: chunked-prefill-size 2048, max-running-requests 64."),
        ("assistant", "Let me check the GPUs and the vLLM install first."),
        ("user", "EP8 is slower: every MoE layer now does an all-to-all over PCIe."),
    ],
)
def test_model_leaves_plans_and_users_alone(tagger: Tagger, role: str, text: str) -> None:
    assert not has(tagger, ctx(role, text), "diagnosis")


def test_rules_win_over_model(tagger: Tagger) -> None:
    text = "The root cause is the sparse decode kernel: it launches only 64 blocks on 188 SMs."
    [tag] = [t for t in tagger.tag([ctx("assistant", text)]) if t.tag == "diagnosis"]
    assert tag.source == "rules"


def test_missing_model_says_how_to_train(tmp_path: Path) -> None:
    from analytics.analysis.tagging import RuleError

    with pytest.raises(RuleError, match="train_diagnosis"):
        Tagger(diagnosis_model=tmp_path / "nowhere")


def test_bench_one_batch_server_result(tagger: Tagger) -> None:
    out = "batch size: 1\nlatency: 3.02 s\noutput throughput: 86.31 token/s\n(input + output) throughput: 254.93 token/s\n"
    c = call("python3 -m sglang.bench_one_batch_server --batch-size 1", idx=0, output=out, result_msg_idx=1)
    assert (1, "benchmark") in tags_of(tagger, ctx("tool", out, idx=1, results=[c]))


@pytest.mark.parametrize("tool,field,path", [
    ("Read", "file_path", "/home/ana/serve/start_vllm.sh"),
    ("Edit", "file_path", "/root/launch_mtp.sh"),
    ("Write", "file_path", "/opt/bench/run_benchmark.sh"),
])
def test_file_tools_do_not_run_what_they_name(tagger: Tagger, tool: str, field: str, path: str) -> None:
    """Reading or editing a launch (or benchmark) script is not running it."""
    c = call(tool=tool, input=json.dumps({field: path, "content": "vllm serve Qwen/Qwen3-8B"}))
    tags = tags_of(tagger, ctx("assistant", calls=[c]))
    assert not {t for _, t in tags} & {"launch", "benchmark", "smoke_test"}


@pytest.mark.parametrize("tag,text,expected", cases(
    "readiness_claim",
    ["GLM-4.6 is serving again on :30000.", "No errors in the log, which means the fix works.",
     "All smoke prompts returned sensible answers, so the deployment works."],
    ["Still not ready, the KV cache allocation hasn't finished.", "Still, the server is up?",
     "The old server is still loading the weights.", "Let me check whether the fix works.",
     "It's still running, let me wait another minute."],
))
def test_readiness_again_and_works(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    assert has(tagger, ctx("assistant", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin", ["k. is it still up?", "any luck", "any news"], ["k. now run the bench", "any luck with c64? then run c128"],
))
def test_checkin_without_question_mark_or_after_k(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    assert has(tagger, ctx("user", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin",
    ["listo?", "¿listo?", "¿y?", "fertig?", "und?", "c'est bon ?", "alors ?", "готово?", "ну?",
     "好了吗？", "好了沒?", "怎么样了?", "できた？", "終わった?", "됐어?", "pronto?", "klaar?"],
    ["listo, ahora corre el benchmark?", "fertig? dann starte den Server neu", "готово, теперь запусти тест",
     "pronto", "好了吗？然后跑一下基准测试"],
))
def test_checkins_in_other_languages(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """"ready?" as people type it in their own language, short and with nothing else to do;
    a check-in followed by an instruction is an instruction."""
    assert has(tagger, ctx("user", text), tag) is expected


# --- phrasings found missing by a fresh hand-written session (docs/labelling.md, "Fresh session") ---


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin",
    ["¿cómo va?", "¿ya terminó?", "läuft es?", "wie weit bist du?", "klappt es?", "ça tourne ?",
     "进度如何", "搞定没", "どうなった？", "まだ？", "어때?", "이제 됐어?"],
    ["¿cómo va el benchmark? si terminó, corre c=128", "wie weit bist du? dann bitte neu starten",
     "ça tourne ? relance avec --tp 4", "进度如何？然后重启服务器", "まだ？ならベンチマークを止めて"],
))
def test_checkin_phrases_in_other_languages(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """Status asks of more than one word ("how is it going", "is it running") and the
    Chinese ones that ask without a question mark; with an instruction they are instructions."""
    assert has(tagger, ctx("user", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin",
    ["staus?", "reddy?", "updte?", "progres?", "finsihed?"],
    ["staus", "reddy? then run c=64", "node?", "dune?"],
))
def test_checkin_word_typed_with_one_slip(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """One letter swapped, missing, doubled or wrong still asks "status?"; it still needs
    the question mark and nothing else to do."""
    assert has(tagger, ctx("user", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin",
    ["is it running now", "did it finish", "how's it looking", "hows it looking", "ok is the server up",
     "it's done?"],
    ["it's all done", "that's done", "is it possible to use fp8 here", "did it fail because of the flag",
     "the server is up"],
))
def test_checkin_question_without_question_mark(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """A message that opens with a question word asks without "?"; a statement with the
    same words does not."""
    assert has(tagger, ctx("user", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "readiness_claim",
    ["Now it really is ready: the health check returns 200.", "It finally is serving requests.",
     "The server actually is up now."],
    ["It really is not ready yet.", "Is it really ready?", "It really is slow."],
))
def test_readiness_with_an_adverb_before_the_verb(
    tagger: Tagger, tag: str, text: str, expected: bool
) -> None:
    """"it really is ready": an adverb between the subject and its verb."""
    assert has(tagger, ctx("assistant", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "readiness_claim",
    ["Good news: the router is back online.", "The endpoint has been up for an hour without a restart.",
     "Mixtral-8x7B is serving on :8001.", "The benchmark is complete, numbers below.",
     "The server is up and responding."],
    ["Once it's back up I'll rerun the sweep.", "Is Mixtral-8x7B serving yet?",
     "The benchmark is not complete yet.", "Let me check whether the endpoint is healthy."],
))
def test_readiness_other_subjects(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    assert has(tagger, ctx("assistant", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "readiness_claim",
    ["The router node drain is done; the server is still up.", "Qwen is still serving on :8100, untouched.",
     "The replica is still healthy, so the 502s come from the proxy."],
    ["The gateway is still loading shards.", "It is still not up.", "Is the replica still healthy?",
     "The sweep is still running."],
))
def test_readiness_of_a_state_that_goes_on(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """"still up" asserts the server is up; "still" before anything else reads as pending."""
    assert has(tagger, ctx("assistant", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "user_checkin",
    ["any luck tracking down the hang?", "any progress with the AWQ build?", "status of the rsync?",
     "any news from the download?"],
    ["any luck? switch to fp8 instead", "any luck with the fix? if not revert the config",
     "any luck with the download, then switch to the int4 weights",
     "progress bar looks stuck, restart the job"],
))
def test_checkin_asking_about_a_topic(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """A status noun may name what it asks about in a few words ("with …", a verb in -ing);
    words after the question mark, or a longer tail, are another request."""
    assert has(tagger, ctx("user", text), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "readiness_claim",
    ["Listo: el servidor está funcionando en el puerto 8000.", "Der Server ist jetzt online.",
     "C'est bon, le serveur est prêt.", "Funktioniert wieder.", "서버가 정상적으로 동작하고 있습니다."],
    ["El servidor todavía no está listo.", "Cuando esté listo, lanzo el benchmark.",
     "Der Server ist noch nicht bereit.", "Le serveur n'est pas prêt.", "¿Está listo el servidor?"],
))
def test_readiness_claims_in_other_languages(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """The assistant answers in the user's language; negations, "when it is ready" and
    questions are not claims there either."""
    assert has(tagger, ctx("assistant", text), tag) is expected


GENAI_PERF = """                     NVIDIA GenAI-Perf | LLM Metrics
│          Time To First Token (ms) │   312.40 │    80.11 │ 1,201.90 │ 1,100.42 │
│ Output Token Throughput (per sec) │ 1,840.11 │      N/A │      N/A │      N/A │"""


@pytest.mark.parametrize("tag,text,expected", cases(
    "benchmark",
    [GENAI_PERF, "done: 500 requests\noutput tok/s: 912.4\np99 ttft ms: 801", "total_tokens_per_sec = 4410.2"],
    ["(APIServer pid=1) INFO [loggers.py:127] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
     "Avg generation throughput: 212.4 tokens/s, Running: 8 reqs", "wrote 3 rows to results.csv"],
))
def test_benchmark_result_lines(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """genai-perf's table and a hand-written load generator's summary are results; the
    server's own throughput log line is not a benchmark."""
    c = call("python load.py", output=text, status="completed", exit_code=0, result_msg_idx=0)
    assert has(tagger, ctx("tool", results=[c]), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "error",
    ["     Active: activating (auto-restart) (Result: exit-code) since Tue 2026-03-10 07:02:15 UTC; 3s ago",
     "    Process: 2291 ExecStart=/opt/serve/launch.sh (code=exited, status=203)",
     "Mar 10 07:02:15 gpu-07 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE",
     "Mar 10 07:02:25 gpu-07 systemd[1]: sglang.service: Scheduled restart job, restart counter is at 4.",
     "(VllmWorker rank=1 pid=77) ERROR 03-10 07:02:14 [core.py:708] ValueError: No available memory"],
    ["Mar 10 07:01:02 gpu-07 systemd[1]: vllm.service: Main process exited, code=killed, status=15/TERM",
     "(APIServer pid=1) WARNING 03-10 07:02:14 [api_server.py:11] ignoring ValueError: empty prompt",
     "     Active: active (running) since Tue 2026-03-10 07:05:15 UTC; 1min ago"],
))
def test_error_service_failures(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """systemd's crash-loop and exit-status forms, and an exception on a logger's ERROR
    line; a service stopped on purpose (TERM) and a warning are not failures."""
    c = call("systemctl status vllm", output=text, status="completed", exit_code=0, result_msg_idx=0)
    assert has(tagger, ctx("assistant", calls=[c], results=[c]), tag) is expected


@pytest.mark.parametrize("tag,text,expected", cases(
    "launch", ["sudo systemctl enable --now sglang", "systemctl --user enable sglang --now"],
    ["sudo systemctl enable sglang", "sudo install -m 0755 serve/launch.sh /opt/serve/launch.sh",
     "vllm serve --help | grep tensor"],
) + cases("benchmark", [], ["vllm bench serve --help", "python -m sglang.bench_serving --help | head"]))
def test_launch_enable_now_and_help(tagger: Tagger, tag: str, text: str, expected: bool) -> None:
    """``enable --now`` starts the unit; ``install`` copies a script; ``--help`` runs nothing."""
    assert has(tagger, ctx("assistant", calls=[call(text)]), tag) is expected
