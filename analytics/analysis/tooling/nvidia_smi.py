"""nvidia-smi outputs -> per-GPU numbers (label ``gpu=N``, source ``nvidia_smi``).

Two shapes: the default table (memory ``4MiB / 81559MiB``, utilisation, temperature, power)
and ``--query-gpu=… --format=csv[,noheader][,nounits]`` (columns from the header, or from the
command's ``--query-gpu`` list when there is no header). Field names: ``data/nvidia_smi_v1.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .gates import CSV_MEMORY, CSV_UTILIZATION, SMI_TABLE, Holds
from .logs import iter_lines

MAX_GPUS_ROWS = 4096

_GPU_ROW = re.compile(r"\|\s+(\d+)\s+\S[^|]*\|[^|]*\|[^|]*\|")
_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_UTIL = re.compile(r"\|\s*(\d+)%\s+\w")
_TEMP = re.compile(r"\|\s*(?:\d+%|N/A)\s+(\d+)C\s")
_POWER = re.compile(r"(\d+(?:\.\d+)?)W\s*/\s*(\d+(?:\.\d+)?)W")
_QUERY = re.compile(r"--query-gpu[= ]+([\w.,]+)")
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass
class GpuNumber:
    metric: str
    value: float
    unit: str | None
    label: str


@cache
def _fields() -> dict[str, list[str]]:
    path = resources.files(__package__).joinpath("data", "nvidia_smi_v1.json")
    fields: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))["csv_fields"]
    return fields


def table_numbers(text: str) -> list[GpuNumber]:
    """Numbers from the default ``nvidia-smi`` table (every snapshot in the text)."""
    if SMI_TABLE not in text:
        return []
    out: list[GpuNumber] = []
    gpu: str | None = None
    in_gpus = False
    for line in iter_lines(text):
        if "NVIDIA-SMI " in line:
            in_gpus, gpu = True, None
            continue
        if not in_gpus or not line.startswith("|"):
            continue
        if "Processes:" in line:
            in_gpus = False
            continue
        m = _GPU_ROW.match(line)
        if m and "MiB" not in line:
            gpu = m.group(1)
            continue
        mem = _MEM.search(line) if gpu is not None else None
        if mem and gpu is not None:
            label = f"gpu={gpu}"
            out += [
                GpuNumber("gpu_mem_used", float(mem.group(1)), "MiB", label),
                GpuNumber("gpu_mem_total", float(mem.group(2)), "MiB", label),
            ]
            for rx, metric, unit in ((_UTIL, "gpu_util", "%"), (_TEMP, "gpu_temp", "C")):
                hit = rx.search(line[mem.end() :] if metric == "gpu_util" else line)
                if hit:
                    out.append(GpuNumber(metric, float(hit.group(1)), unit, label))
            power = _POWER.search(line)
            if power:
                out.append(GpuNumber("gpu_power", float(power.group(1)), "W", label))
            gpu = None
            if len(out) > MAX_GPUS_ROWS:
                break
    return out


def csv_numbers(
    text: str, command: str | None = None, holds: Holds | None = None
) -> list[GpuNumber]:
    """Numbers from ``--format=csv`` output; needs a header line or ``--query-gpu`` in the command.
    ``holds``: see ``gpu_numbers``."""
    columns: list[str] | None = None
    query = _QUERY.search(command) if command and "noheader" in command else None
    if query:
        columns = [c.strip() for c in query.group(1).split(",")]
    holds = holds or text.__contains__
    if columns is None and not holds(CSV_MEMORY) and not holds(CSV_UTILIZATION):
        return []
    out: list[GpuNumber] = []
    row_no = 0
    for line in iter_lines(text):
        cells = [c.strip() for c in line.split(",")]
        if any(c.startswith(("memory.", "utilization.", "index")) for c in cells):
            columns = [re.sub(r"\s*\[.*\]$", "", c) for c in cells]
            row_no = 0
            continue
        if columns is None or len(cells) != len(columns):
            continue
        row = _csv_row(columns, cells, row_no)
        if not row and not any(_NOT_AVAILABLE.fullmatch(c) for c in cells):
            continue  # another command's line ("alive" before a one-column query): no GPU row
        out += row
        row_no += 1
        if len(out) > MAX_GPUS_ROWS:
            break
    return out


_NOT_AVAILABLE = re.compile(r"\[?N/A\]?|\[Not Supported\]", re.I)
"""What nvidia-smi prints for a value a GPU does not report."""


def _csv_row(columns: list[str], cells: list[str], row_no: int) -> list[GpuNumber]:
    values = dict(zip(columns, cells, strict=True))
    gpu = values.get("index", str(row_no))
    if not gpu.isdigit():
        return []
    out: list[GpuNumber] = []
    for column, raw in values.items():
        spec = _fields().get(column)
        num = _NUM.match(raw)
        if spec and num:
            out.append(GpuNumber(spec[0], float(num.group()), spec[1], f"gpu={gpu}"))
    return out


def gpu_numbers(
    text: str, command: str | None = None, holds: Holds | None = None
) -> list[GpuNumber]:
    """Table and csv numbers. ``holds`` tells whether the output holds a ``gates`` literal
    (by default the output is searched): a parser runs only when it holds its own."""
    holds = holds or text.__contains__
    table = table_numbers(text) if holds(SMI_TABLE) else []
    return table + csv_numbers(text, command, holds)
