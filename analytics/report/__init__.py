"""Deterministic postmortems of a session (Markdown + PNG charts)."""

from analytics.report.postmortem import write_report

__all__ = ["write_report"]
