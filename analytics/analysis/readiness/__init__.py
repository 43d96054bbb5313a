"""Verdicts on readiness claims ("it's up", "tests pass", "fixed").

For each ``readiness_claim`` tag the evidence in the session is weighed:

- *premature*: before the claim there was only liveness (process alive,
  ``Uvicorn running on``, a /health or /v1/models 200, CUDA graph capture still
  running, a log tail stopping before the ready line) — or the next functional
  check after it failed (error, OOM, crash, degenerate output);
- *supported*: a functional check before it passed (a sane generation, tests
  passing, a benchmark completing): a server that answered with a sane generation
  is serving, whether or not its ready line was read (for a server, a check before
  its ready line counts only when no ready line was seen);
- *unverified*: neither.

A server or deployment claim is judged from its server's last (re)start; a claim naming one
launched server (its port, a word of its model or served name) only on the checks addressed
to it, so a second server on the host neither supports nor contradicts it. A feature or fix
claim is judged from the last file change before it. A claim about a job (a download, a
build or install, a conversion, an upload) is judged on the looks at that job (``jobs``):
the last one before it, and the first after it.

Liveness vs. function follows shared/reference/TOOLING.md §1 (endpoint table)
and §4; the strings live in ``data/readiness.json``.
"""

from analytics.analysis.readiness.checks import generation_text, judge_check
from analytics.analysis.readiness.config import LOOKBACK, config, subject_of
from analytics.analysis.readiness.servers import claimed_port, command_ports
from analytics.analysis.readiness.verdicts import (
    claims_affected_from,
    judge_claims,
    judge_settled_claims,
)

__all__ = [
    "LOOKBACK",
    "claimed_port",
    "claims_affected_from",
    "command_ports",
    "config",
    "generation_text",
    "judge_check",
    "judge_claims",
    "judge_settled_claims",
    "subject_of",
]
