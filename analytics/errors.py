"""One base exception, typed subclasses that carry the failing object.

Every message says what failed, where, and what to do next; the CLI prints
``Error: <message>`` on one line and exits 1 (2 for usage errors).
"""

from __future__ import annotations


class AnalyticsError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code = 1


class UsageError(AnalyticsError):
    """The command line asked for something impossible."""

    exit_code = 2


class UnknownFormatError(AnalyticsError):
    """A file is in none of the supported transcript formats."""

    def __init__(self, path: str, formats: list[str], detail: str = "") -> None:
        self.path = path
        self.formats = formats
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"{path}: not a recognised transcript{extra}; supported formats: "
            f"{', '.join(formats)} (pass --format to force one)"
        )


class SourceError(AnalyticsError):
    """A file of a known format could not be read at all (not one bad record)."""

    def __init__(self, path: str, message: str, location: str | None = None) -> None:
        self.path = path
        self.location = location
        where = f"{path}:{location}" if location else path
        super().__init__(f"{where}: {message}")


class DatabaseLockedError(AnalyticsError):
    """Another process holds the DuckDB write lock."""

    def __init__(self, db: str) -> None:
        self.db = db
        super().__init__(
            f"{db}: the database is being written by another process "
            "(an ingest is running); wait for it to finish and retry"
        )


class DatabaseError(AnalyticsError):
    """The database file is missing, unreadable or from an unknown schema."""


class SessionNotFoundError(AnalyticsError):
    def __init__(self, session: str, db: str) -> None:
        super().__init__(
            f"{db}: no session matches {session!r}; list them with `transcripts sessions`"
        )


def is_interrupt(exc: BaseException) -> bool:
    """``exc`` stands for a Ctrl-C: DuckDB turns a SIGINT that arrives during a query (where
    an ingest spends much of its time) into ``RuntimeError('Query interrupted')`` caused by
    the ``KeyboardInterrupt``, and a ROLLBACK after it may fail in turn (context chain)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
