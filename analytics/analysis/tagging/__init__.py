"""Message tagging: the Tagger (spaCy rules for prose, shell parsing for tool calls, and a
small learned classifier for ``diagnosis`` stated without cue words).

Public surface::

    Tagger(extra_rules: Path | None = None, diagnosis_model=<shipped>).tag(batch) -> list[Tag]
    analyse_polling(ctx) -> list[PollingLoop]
    parse_shell(command) -> ShellScript
"""

from typing import TYPE_CHECKING, Any

from analytics.analysis.tagging.polling import (
    analyse_polling,
    background_rechecks,
    exec_session_loops,
    loop_shape,
)
from analytics.analysis.tagging.shell import ShellScript, SimpleCommand, parse_shell

if TYPE_CHECKING:
    from analytics.analysis.tagging.components import RuleError
    from analytics.analysis.tagging.pipeline import MAX_PROSE_CHARS, RULES_VERSION, Tagger

# spaCy (behind these names) takes most of a second to import, and a process that only
# analyses polling loops, or hands the tagging to a worker process, never needs it: they
# are imported on first use.
_LAZY = {
    "RuleError": "components",
    "MAX_PROSE_CHARS": "pipeline",
    "RULES_VERSION": "pipeline",
    "Tagger": "pipeline",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "MAX_PROSE_CHARS",
    "RULES_VERSION",
    "RuleError",
    "ShellScript",
    "SimpleCommand",
    "analyse_polling",
    "background_rechecks",
    "exec_session_loops",
    "loop_shape",
    "Tagger",
    "parse_shell",
]
