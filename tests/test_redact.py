"""Secret redaction: every kind, the planted-secret corpus, and no false positives."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import orjson
import pytest

from analytics.redact import KINDS, PLACEHOLDER, Redactor, placeholder, redact_json_text

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "fixtures" / "secrets"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
CORPUS_FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in {".jsonl", ".json", ".txt"})
CORPUS_FILES = [p for p in CORPUS_FILES if p.name != "manifest.json"]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


# One example per kind: (kind, text, the secret that must disappear)
EXAMPLES = [
    (
        "openai_key",
        "export OPENAI_API_KEY=sk-Ab12Cd34Ef56Gh78Ij90T3BlbkFJKl12Mn34Op56Qr78",
        "sk-Ab12Cd34Ef56Gh78Ij90T3BlbkFJKl12Mn34Op56Qr78",
    ),
    (
        "openai_key",
        "key sk-proj-Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Jh1GfEdCbA0",
        "sk-proj-Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Jh1GfEdCbA0",
    ),
    (
        "anthropic_key",
        "sk-ant-api03-Qw3rTy7uIo9pAs1dFg5hJk8lZx2cVb4nM6-_xyzXYZ",
        "sk-ant-api03-Qw3rTy7uIo9pAs1dFg5hJk8lZx2cVb4nM6-_xyzXYZ",
    ),
    (
        "hf_token",
        "login with 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 now",
        "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",
    ),
    (
        "github_token",
        "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    ),
    (
        "github_token",
        "gho_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "gho_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    ),
    (
        "github_token",
        "ghs_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
        "ghs_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    ),
    (
        "github_token",
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefg",
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefg",
    ),
    ("aws_access_key", "aws_access_key_id=AKIAZ7Q2M4X9LPR3TB6W", "AKIAZ7Q2M4X9LPR3TB6W"),
    (
        "aws_secret_key",
        "aws_secret_access_key = q9Zr/4Lk2mXw8TfB+1nYc7Hd3Vp0Gs6Ja5Ue2Ro9",
        "q9Zr/4Lk2mXw8TfB+1nYc7Hd3Vp0Gs6Ja5Ue2Ro9",
    ),
    (
        "slack_token",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        "google_api_key",
        "?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    ),
    (
        "bearer_token",
        'curl -H "Authorization: Bearer tok.9f8e7d6c5b4a" http://h/v1',
        "tok.9f8e7d6c5b4a",
    ),
    (
        "api_key_flag",
        "python -m sglang.launch_server --model-path m --api-key s3cr3t-v4lue",
        "s3cr3t-v4lue",
    ),
    ("api_key_flag", "huggingface-cli login --token Qm7Zk2Lp9Xr4", "Qm7Zk2Lp9Xr4"),
    ("api_key_flag", "docker login --password=Tr0ub4dor&3 reg.io", "Tr0ub4dor&3"),
    ("url_password", "postgres://app:Pa55w0rd-x@db:5432/app", "Pa55w0rd-x"),
    (
        "private_key",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\n-----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw",
    ),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n(output truncated)",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    ("env_secret", "DB_PASSWORD=correct-horse-9", "correct-horse-9"),
    ("env_secret", '{"api_key": "a1b2c3d4e5f6"}', "a1b2c3d4e5f6"),
    ("env_secret", "client_secret: Xy7Qp2Lm9Rt4", "Xy7Qp2Lm9Rt4"),
    ("env_secret", "MY_SERVICE_TOKEN=Zq81Lm02Xp", "Zq81Lm02Xp"),
    ("sshpass", "sshpass -p 'hunter2' ssh root@10.0.0.1", "hunter2"),
]


@pytest.mark.parametrize(
    ("kind", "text", "secret"), EXAMPLES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(EXAMPLES)]
)
def test_each_kind_is_redacted(redactor: Redactor, kind: str, text: str, secret: str) -> None:
    out, counts = redactor.redact(text)
    assert secret not in out
    assert counts.get(kind, 0) >= 1, counts
    assert placeholder(kind, _found(redactor, text, kind)) in out


def _found(redactor: Redactor, text: str, kind: str) -> str:
    f = next(f for f in redactor.find(text) if f.kind == kind)
    return text[f.start : f.end]


def test_placeholder_format_and_hash() -> None:
    secret = "sk-Ab12Cd34Ef56Gh78Ij90T3BlbkFJ"
    digest = hashlib.sha256(secret.encode()).hexdigest()[:4]
    assert placeholder("openai_key", secret) == f"[REDACTED:openai_key:{digest}]"
    assert PLACEHOLDER.fullmatch(placeholder("openai_key", secret))


def test_equal_secrets_get_equal_placeholders(redactor: Redactor) -> None:
    key = "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"
    other = "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"
    out, counts = redactor.redact(f"first {key}, again {key}, then {other}")
    marks = re.findall(r"\[REDACTED:hf_token:[0-9a-f]{4}\]", out)
    assert counts == {"hf_token": 3}
    assert marks[0] == marks[1] != marks[2]


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    text = "OPENAI_API_KEY=sk-Ab12Cd34Ef56Gh78Ij90T3BlbkFJKl12 and postgres://u:Pw0rd1x@h/db"
    once, _ = redactor.redact(text)
    twice, counts = redactor.redact(once)
    assert twice == once and counts == {}


def test_all_kinds_are_declared(redactor: Redactor) -> None:
    kinds = {p.kind for p in redactor._ps.patterns}
    kinds |= {k for k, _, _ in redactor._plugins} | {redactor._he_kind}
    assert kinds <= set(KINDS)


# ---------------------------------------------------------------------------
# The planted corpus (tests/fixtures/secrets; regenerate with its _generate.py)
# ---------------------------------------------------------------------------


def test_corpus_has_at_least_50_secrets() -> None:
    assert len({item["secret"] for item in MANIFEST}) >= 50
    assert len(CORPUS_FILES) == 4


@pytest.mark.parametrize("item", MANIFEST, ids=[f"{i}-{m['kind']}" for i, m in enumerate(MANIFEST)])
def test_corpus_secret_redacted_with_its_kind(redactor: Redactor, item: dict[str, str]) -> None:
    out, counts = redactor.redact(item["context"])
    assert item["probe"] not in out
    assert item["kind"] in counts, (item["kind"], counts)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_file_raw_text_fully_redacted(redactor: Redactor, path: Path) -> None:
    raw = path.read_text()
    out, counts = redact_json_text(raw)
    survivors = [m["kind"] for m in MANIFEST if m["probe"] in out]
    assert survivors == []
    assert sum(counts.values()) >= len(MANIFEST)
    if path.suffix == ".jsonl":  # still valid JSON after redaction
        for line in out.splitlines():
            orjson.loads(line)
    elif path.suffix == ".json":
        orjson.loads(out)


def _parsed_texts(path: Path) -> list[str]:
    detect = pytest.importorskip("analytics.sources.detect")
    from analytics.models import Ledger, Message, ToolCall

    fmt = detect.detect_format(path)
    texts = []
    for item in detect.get_module(fmt).parse(path, Ledger()):
        if isinstance(item, Message):
            texts.append(item.text)
        elif isinstance(item, ToolCall):
            texts += [item.command or "", item.input or "", item.output or ""]
    return texts


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_parsed_fields_fully_redacted(redactor: Redactor, path: Path) -> None:
    texts = _parsed_texts(path)
    joined = "\n".join(texts)
    planted = [m for m in MANIFEST if m["probe"] in joined]
    assert planted, "the parser should surface the planted secrets"
    redacted = "\n".join(redactor.redact(t)[0] for t in texts)
    assert [m["kind"] for m in planted if m["probe"] in redacted] == []


# ---------------------------------------------------------------------------
# No redaction on ordinary text
# ---------------------------------------------------------------------------

ORDINARY = [
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 8 --port 30000",
    "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs 256 --gpu-memory-utilization 0.9",
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (HEAD -> main)",
    "request 123e4567-e89b-12d3-a456-426614174000 finished",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "/home/user/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/abc123/config.json",
    '{"max_tokens": 2048, "pad_token": "<pad>", "eos_token": "</s>", "token": "Hello"}',
    '{"usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7}}',
    "api_key = os.environ['OPENAI_API_KEY']",
    "password = getpass.getpass()",
    "token: str = Field(default=None)",
    "const STORAGE_KEY = 'vue-todo-list'",
    "export HF_TOKEN=$HF_TOKEN && huggingface-cli login --token $HF_TOKEN",
    'curl -H "Authorization: Bearer $TOKEN" http://localhost:30000/health',
    "ssh -p 2222 user@host",
    "Password: see the vault",
    "the bearer of bad news arrived",
    "sk-learn style estimators-are-nice",
    "ask-me-anything-about-the-weekend",
    "Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    "git clone git@github.com:acme/infra.git",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "--api-key-file /etc/keys/api.txt --token-budget 4096",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_untouched(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == (text, {})


def _tooling_lines() -> list[str]:
    ref = SHARED / "reference" / "TOOLING.md"
    if not ref.exists():
        pytest.skip("shared reference notes are absent")
    return ref.read_text().splitlines()


def test_tooling_log_lines_untouched(redactor: Redactor) -> None:
    hits = [line for line in _tooling_lines() if redactor.redact(line)[1]]
    assert hits == []


def _sample_files() -> list[Path]:
    roots = [ROOT / "analytics" / "samples", SHARED / "samples", SHARED / "seeds"]
    files = [p for r in roots if r.exists() for p in sorted(r.rglob("*")) if p.is_file()]
    return [p for p in files if p.suffix in {".jsonl", ".json", ".txt", ".traj", ".md", ".tsv"}]


def test_no_false_positives_on_sample_sessions(redactor: Redactor) -> None:
    files = _sample_files()
    if not files:
        pytest.skip("no sample sessions present")
    hits = []
    for path in files:
        text = path.read_text(errors="replace")
        hits += [(path.name, f.kind, text[f.start : f.end][:40]) for f in redactor.find(text)]
    assert hits == []


def test_fast_path_skips_text_without_triggers(redactor: Redactor) -> None:
    text = "Decode batch. #running-req: 1, #token: 108, gen throughput (token/s): 0.39\n" * 1000
    assert redactor.may_hold_secret("the server is fired up and ready to roll") is False
    assert redactor.may_hold_secret(text) is False  # "#token: 108" is no assignment to vet
    assert redactor.redact(text) == (text, {})


@pytest.mark.parametrize("sep", ["\n", " "])
def test_secrets_deep_in_a_long_text_are_found_in_their_windows(
    redactor: Redactor, sep: str
) -> None:
    # Texts longer than a window are scanned only around gate hits; placement must not matter.
    filler = sep.join(["token usage: 0.04, #token: 5123, gen throughput (token/s): 81.2"] * 4000)
    secrets = [text for _, text, _ in EXAMPLES]
    text = f"{sep}{filler}{sep}".join(secrets)
    want = [(f.kind, text[f.start : f.end]) for f in redactor.find(text)]
    alone = [(f.kind, s[f.start : f.end]) for s in secrets for f in redactor.find(s)]
    assert want == alone
    out, counts = redactor.redact(text)
    assert sum(counts.values()) == len(alone)
    assert not [secret for _, _, secret in EXAMPLES if secret in out]


def test_high_entropy_only_on_credential_assignments(redactor: Redactor) -> None:
    value = "Zk8sP2qLm9Xv4Rt7Yw1Bn6Cd3Fg5Hj0K"
    assert redactor.redact(f'config = {{"aws_secret": "{value}"}}')[1] == {"env_secret": 1}
    assert redactor.redact(f'cache = {{"tokenizer": "{value}"}}') == (
        f'cache = {{"tokenizer": "{value}"}}',
        {},
    )


def test_long_adversarial_inputs_finish(redactor: Redactor) -> None:
    # Linear-time patterns: long runs that almost match must not blow up.
    for text in (
        "sk-" * 200_000,
        "a" * 1_000_000 + "KEY=",
        "-----BEGIN RSA PRIVATE KEY-----" + "A" * 500_000,
        ("password=" + "x" * 600) * 500,
        "://" + "a:" * 300_000 + "@",
        "Authorization: Bearer " + "z" * 1_000_000,
    ):
        redactor.redact(text)
