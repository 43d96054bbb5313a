"""A session built message by message for the readiness job-claim tests: what the
assistant says, its claims, and the verdicts the session analysis gives them. The
format's own calls (Claude Code re-checks, Codex polls) are added by subclasses."""

from __future__ import annotations

import duckdb
from golden.case_studies import SessionBuilder

from analytics.analysis.session import analyse_session, load_session_frames
from analytics.models import ReadinessClaim
from analytics.store.migrations import migrate


class JobSession:
    """Messages one second apart in an in-memory database of session ``sid``."""

    def __init__(self, sid: str, source_format: str, idle: str = "Next.") -> None:
        self.sid, self.idle = sid, idle
        self.con = duckdb.connect(":memory:")
        migrate(self.con)
        self.b = SessionBuilder(self.con, sid, source_format)
        self.t = 0.0

    def say(self, text: str | None = None) -> int:
        self.t += 1
        return self.b.msg("assistant", self.idle if text is None else text, self.t)

    def claim(self, text: str) -> int:
        i = self.say(text)
        self.b.tag(i, "readiness_claim", text, 0)
        return i

    def verdicts(self) -> list[ReadinessClaim]:
        self.b.save("jobs", "m")
        return analyse_session(load_session_frames(self.con, self.sid)).claims
