"""The gate's fast paths change no hit: the keyword guard (_OP_NEXT) is implied by what
follows it, so the gate regexes with and without it hit at the same places."""

from __future__ import annotations

import random
import re

from analytics.redact import _SHORT_CLEAN_MAX, Redactor
from analytics.redact.patterns import _OP_NEXT, Gate, ascii_lower, load_patterns

_PIECES = (
    "key", "KEY", "Key", "token", "TOKEN", "_token", "-token", "api_key", "API_KEY", "apikey",
    "access_key", "secret", "_secret", "password", "PASSWORD", "passwd", "_pwd", "-pass",
    "sshpass", "authtoken", "x-auth-token", "private key", "accesskey", "tokens", "keyboard",
    "=", ":", ":=", "==", "=/", " ", "  ", "\t", "\n", '"', "'", "`", "\\", "\\\\", "]", ",",
    ";", "-p", "abc", "Zq9xY7wV3u", "hunter2", "s3cr3tValue99", "1234", "\u00a0", "\u2003",
    "é", "#", "-----", "sk-", "ghp_", "Bearer ",
)


def _unguarded(gate: Gate) -> Gate:
    def strip(pivoted: tuple[tuple[str, re.Pattern[str]], ...]) -> tuple:
        return tuple((p, re.compile(rx.pattern.replace(_OP_NEXT, ""))) for p, rx in pivoted)

    return Gate(strip(gate.on_low), strip(gate.on_text))


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14))) for _ in range(n)]


def test_guard_is_in_the_credential_name_gates() -> None:
    gate = load_patterns().gate
    assert any(_OP_NEXT in rx.pattern for _, rx in gate.on_low)


def test_guarded_gate_hits_where_the_unguarded_one_does() -> None:
    gate = load_patterns().gate
    plain = _unguarded(gate)
    hits = 0
    for text in _texts(20000, seed=7):
        low = ascii_lower(text)
        new = [(m.span(), m.lastgroup) for m in gate.hits(text, low)]
        old = [(m.span(), m.lastgroup) for m in plain.hits(text, low)]
        assert new == old, text
        assert (gate.any_hit(text) is None) == (plain.any_hit(text) is None), text
        hits += bool(old)
    assert hits > 1000  # the texts do exercise the gates


def test_guard_keeps_every_redaction_of_the_fixture_texts() -> None:
    redactor = Redactor()
    for text in [
        'export OPENAI_API_KEY="sk-proj-abcdefghijklmnopqrstuvwxyz012345"',
        "password: hunter2!",
        'token = "Zq9xY7wV3uT5sR1q"',
        'curl -H "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123"',
    ]:
        assert redactor.find(text), text


def test_a_text_seen_again_is_redacted_as_before() -> None:
    redactor = Redactor()
    clean = "server log without anything to hide\n" * 10
    leaky = 'export OPENAI_API_KEY="sk-proj-abcdefghijklmnopqrstuvwxyz012345"\n' + clean
    for _ in range(3):
        assert redactor.redact(clean) == (clean, {})
        assert redactor.redact("".join(list(clean))) == (clean, {})
        new, counts = redactor.redact(leaky)
        assert counts == {"openai_key": 1} and "sk-proj-" not in new


def test_a_short_text_seen_again_is_redacted_as_before() -> None:
    redactor = Redactor()
    leaky = "password: hunter2!"
    for i in range(3 * _SHORT_CLEAN_MAX // 2):
        clean = f"ok? {i}"
        assert redactor.redact(clean) == (clean, {})
        if i % 1000 == 0:
            new, counts = redactor.redact(leaky)
            assert counts == {"env_secret": 1} and "hunter2" not in new
    assert len(redactor._short_clean) <= _SHORT_CLEAN_MAX
    scans = []
    real = redactor.find
    redactor.find = lambda text: scans.append(text) or real(text)  # type: ignore[method-assign]
    for _ in range(3):  # scanned once, then found clean by the lookup; the leaky one each time
        assert redactor.redact("ready?") == ("ready?", {})
        assert redactor.redact(leaky)[1] == {"env_secret": 1}
    assert scans == ["ready?", leaky, leaky, leaky]
