"""Message tagging: the Tagger (spaCy rules for prose, shell parsing for tool calls, and a
small learned classifier for ``diagnosis`` stated without cue words).

Public surface::

    Tagger(extra_rules: Path | None = None, diagnosis_model=<shipped>).tag(batch) -> list[Tag]
    analyse_polling(ctx) -> list[PollingLoop]
    parse_shell(command) -> ShellScript
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analytics.analysis.tagging.components import RuleError
    from analytics.analysis.tagging.pipeline import MAX_PROSE_CHARS, RULES_VERSION, Tagger
    from analytics.analysis.tagging.polling import analyse_polling, background_rechecks, loop_shape
    from analytics.analysis.tagging.shell import ShellScript, SimpleCommand, parse_shell

# Names are imported on first use: spaCy (behind Tagger and RuleError) takes most of a second
# to import, and a process that only analyses polling loops, or hands the tagging to a worker
# process, never needs it.
_HOMES = {
    "RuleError": "components",
    "MAX_PROSE_CHARS": "pipeline",
    "RULES_VERSION": "pipeline",
    "Tagger": "pipeline",
    "analyse_polling": "polling",
    "background_rechecks": "polling",
    "loop_shape": "polling",
    "ShellScript": "shell",
    "SimpleCommand": "shell",
    "parse_shell": "shell",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)


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
