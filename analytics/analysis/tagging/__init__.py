"""Message tagging: the Tagger (spaCy rules for prose, shell parsing for tool calls, and a
small learned classifier for ``diagnosis`` stated without cue words).

Public surface::

    Tagger(extra_rules: Path | None = None, diagnosis_model=<shipped>).tag(batch) -> list[Tag]
    analyse_polling(ctx) -> list[PollingLoop]
    parse_shell(command) -> ShellScript
"""

from analytics.analysis.tagging.components import RuleError
from analytics.analysis.tagging.pipeline import MAX_PROSE_CHARS, RULES_VERSION, Tagger
from analytics.analysis.tagging.polling import analyse_polling, background_rechecks, loop_shape
from analytics.analysis.tagging.shell import ShellScript, SimpleCommand, parse_shell

__all__ = [
    "MAX_PROSE_CHARS",
    "RULES_VERSION",
    "RuleError",
    "ShellScript",
    "SimpleCommand",
    "Tagger",
    "analyse_polling",
    "background_rechecks",
    "loop_shape",
    "parse_shell",
]
