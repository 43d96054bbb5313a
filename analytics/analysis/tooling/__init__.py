"""Serving-tooling analysis: SGLang / vLLM launches, log milestones, failures and numbers.

Public surface::

    ToolingExtractor().extract(ctx) -> ToolingFacts(server_events, measurements, launches)
    diff_launches(launches) -> launches with changed_flags filled
    suggest_flag(engine, flag) -> canonical flag or None
    resolve_flag(engine, flag) -> FlagMatch(canonical, spec, negated, versions) over all tables
    ToolingExtractor.from_state(extractor.state()) -> continue a session after a restart
    find_failures(text) -> [(event, matched text, start, end)]
    parse_launches(command) -> [LaunchSpec]

Knowledge (log signatures, failure strings, flag tables, nvidia-smi fields) lives in
``data/*.json`` beside this package, each file naming its source.
"""

from .benchmarks import benchmark_numbers
from .extractor import ToolingExtractor, ToolingFacts
from .failures import find_failures
from .flags import canonical_flag, load_table, load_tables, resolve_flag, suggest_flag
from .launches import LaunchSpec, ScriptMemory, diff_launches, parse_launches
from .logs import parse_prefix, scan_log
from .nvidia_smi import gpu_numbers

__all__ = [
    "LaunchSpec",
    "ScriptMemory",
    "ToolingExtractor",
    "ToolingFacts",
    "benchmark_numbers",
    "canonical_flag",
    "diff_launches",
    "find_failures",
    "gpu_numbers",
    "load_table",
    "load_tables",
    "parse_launches",
    "parse_prefix",
    "resolve_flag",
    "scan_log",
    "suggest_flag",
]
