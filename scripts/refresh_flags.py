"""Regenerate the CLI flag tables of SGLang and vLLM from their published wheels.

    python scripts/refresh_flags.py --sglang 0.4.6.post5 0.5.2 0.5.9 0.5.23 --vllm 0.11.0 0.33.0

Each wheel is fetched with ``pip download --no-deps`` and read as a zip file; the argument
definitions are extracted statically with ``ast`` (nothing is imported or installed, so torch is
never needed). Output: ``analytics/analysis/tooling/data/flags_<engine>_<version>.json``.

What is read:
- sglang <= 0.5.9: ``sglang/srt/server_args.py`` -- every ``parser.add_argument("--x", ...)`` call
  and the ``ServerArgs`` dataclass defaults that ``default=ServerArgs.x`` points at.
- sglang 0.5.23+: msgspec Structs in ``sglang/srt/arg_groups/fields/*.py``: ``A[T, Arg(...)]``
  and ``A[T, "help"]`` fields become ``--field-name`` (or ``cli_name``, with ``aliases``), as
  ``arg_groups/arg_utils.add_cli_args_from_dataclass`` registers them, plus the literal
  ``add_argument`` calls left in server_args.py.
- vllm: ``vllm/engine/arg_utils.py`` (``add_argument("--x", **group_kwargs["field"])`` where
  ``group_kwargs = get_kwargs(SomeConfig)``; the field's annotation and default are read from the
  config class in ``vllm/config/*.py``), ``vllm/entrypoints/{openai,common}/cli_args.py``
  (``FrontendArgs``/``BaseFrontendArgs`` dataclass fields and literal calls) and
  ``vllm/entrypoints/cli/serve.py``.
Gaps (recorded in the file's ``gaps``): defaults computed at runtime, types built by helper
functions, flags registered in loops over runtime data.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parents[1] / "analytics" / "analysis" / "tooling" / "data"

FlagTable = dict[str, dict[str, Any]]


# --------------------------------------------------------------------------- wheels


def download_wheel(package: str, version: str, dest: Path) -> Path:
    found = sorted(dest.glob(f"{package}-{version}-*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                f"{package}=={version}",
                "-d",
                str(dest),
            ],
            check=True,
        )
        found = sorted(dest.glob(f"{package}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for {package}=={version} in {dest}; check the version exists")
    return found[0]


def read_sources(wheel: Path, pattern: str) -> dict[str, str]:
    rx = re.compile(pattern)
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n).decode("utf-8") for n in zf.namelist() if rx.fullmatch(n)}


# --------------------------------------------------------------------------- ast helpers


def literal(node: ast.AST | None) -> tuple[bool, Any]:
    if node is None:
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False, None
    return True, value


def class_fields(tree: ast.AST) -> dict[str, dict[str, tuple[str, ast.AST | None]]]:
    """class name -> field name -> (annotation source, default node) for annotated fields."""
    out: dict[str, dict[str, tuple[str, ast.AST | None]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, tuple[str, ast.AST | None]] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                fields[stmt.target.id] = (ast.unparse(stmt.annotation), stmt.value)
        out[node.name] = fields
    return out


def kind_from_annotation(annotation: str) -> str:
    a = annotation.replace(" ", "")
    if re.search(r"\bbool\b", a):
        return "bool"
    if re.search(r"(^|\W)(list|List|tuple|Tuple)\[", a):
        return "list"
    if re.search(r"(^|\W)(dict|Dict)\[", a):
        return "json"
    if re.search(r"Config\b", a):
        return "json"
    if "Literal[" in a:
        return "str"
    if re.search(r"\bint\b", a):
        return "int"
    if re.search(r"\bfloat\b", a):
        return "float"
    return "str"


def choices_from_annotation(annotation: str) -> list[str] | None:
    m = re.search(r"Literal\[(.*?)\]", annotation)
    if not m:
        return None
    ok, value = literal(ast.parse(f"({m.group(1)},)", mode="eval").body)
    return [str(v) for v in value] if ok else None


def resolve_default(
    node: ast.AST | None, classes: dict[str, dict[str, tuple[str, ast.AST | None]]], depth: int = 0
) -> dict[str, Any]:
    """Literal default, following ``Cls.attr`` references and ``field(default=...)``."""
    if node is None:
        return {"default": None}
    ok, value = literal(node)
    if ok:
        return {"default": value}
    if depth < 4 and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        target = classes.get(node.value.id, {}).get(node.attr)
        if target is not None:
            return resolve_default(target[1], classes, depth + 1)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "field":
        for kw in node.keywords:
            if kw.arg == "default":
                return resolve_default(kw.value, classes, depth + 1)
            if kw.arg == "default_factory":
                inner = kw.value.body if isinstance(kw.value, ast.Lambda) else None
                ok, value = literal(inner)
                if ok:
                    return {"default": value}
                name = getattr(kw.value, "id", "")
                if name in ("list", "dict"):
                    return {"default": [] if name == "list" else {}}
    return {"default": None, "default_expr": ast.unparse(node)[:200]}


def _names(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def entry_from_call(
    call: ast.Call,
    classes: dict[str, dict[str, tuple[str, ast.AST | None]]],
    dest_class: str | None,
    group_classes: dict[str, str],
) -> dict[str, Any] | None:
    names = _names(call)
    longs = [n for n in names if n.startswith("--")]
    if not longs and not names:
        return None
    entry: dict[str, Any] = {"aliases": [n for n in names if n != (longs or names)[0]]}
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    expansions = [k.value for k in call.keywords if k.arg is None]
    for node in list(expansions):
        if isinstance(node, ast.Dict):  # **{**group_kwargs["x"], "default": None} (vllm 0.33)
            expansions.remove(node)
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    expansions.append(value)
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    kw[key.value] = value
    action_node = kw.get("action")
    if isinstance(action_node, ast.Constant):
        entry["action"] = action_node.value
    elif action_node is not None:
        entry["action"] = _action_name(action_node)
    type_node = kw.get("type")
    type_name = ast.unparse(type_node) if type_node is not None else None
    ok, nargs = literal(kw.get("nargs"))
    if ok and nargs is not None:
        entry["nargs"] = nargs
    ok, choices = literal(kw.get("choices"))
    if ok and isinstance(choices, list | tuple):
        entry["choices"] = [str(c) for c in choices]
    # ** expansions: group_kwargs["field"] from get_kwargs(SomeConfig)
    for expansion in expansions:
        if isinstance(expansion, ast.Subscript):
            var = getattr(expansion.value, "id", "")
            ok, field_name = literal(expansion.slice)
            cls = group_classes.get(var)
            if ok and cls and field_name in classes.get(cls, {}):
                annotation, default = classes[cls][field_name]
                entry["kind"] = kind_from_annotation(annotation)
                entry["annotation"] = annotation[:200]
                if entry["kind"] == "bool":
                    entry["action"] = "BooleanOptionalAction"
                elif entry["kind"] == "list":
                    entry["nargs"] = "+"
                ch = choices_from_annotation(annotation)
                if ch:
                    entry["choices"] = ch
                entry.update(resolve_default(default, classes))
            elif ok:
                entry["kind"] = "str"
                entry["gap"] = f"kwargs from {var}[{field_name!r}] not resolved"
    if "kind" not in entry:
        entry["kind"] = _kind(entry.get("action"), type_name, entry.get("nargs"))
    if type_name and type_name not in ("int", "float", "str"):
        entry["type"] = type_name[:80]
    if "default" in kw:
        entry.update(resolve_default(kw["default"], classes))
    elif "default" not in entry:
        action = entry.get("action")
        entry["default"] = (
            False if action == "store_true" else True if action == "store_false" else None
        )
        if dest_class and longs:
            field = classes.get(dest_class, {}).get(longs[0][2:].replace("-", "_"))
            if field is not None and action not in ("store_true", "store_false"):
                entry.update(resolve_default(field[1], classes))
    name = (longs or names)[0]
    dest_node = kw.get("dest")
    default_node = kw.get("default")
    target = (
        dest_node.value
        if isinstance(dest_node, ast.Constant)
        else default_node.attr
        if isinstance(default_node, ast.Attribute)
        else None
    )
    if isinstance(target, str) and "--" + target.replace("_", "-") in longs:
        # argparse stores into the dataclass field: name the flag after it (--tp-size, not
        # --tensor-parallel-size); the other spellings stay aliases.
        name = "--" + target.replace("_", "-")
    entry["aliases"] = [n for n in names if n != name]
    return {"name": name, **entry}


def _kind(action: Any, type_name: str | None, nargs: Any) -> str:
    if action in (
        "store_true",
        "store_false",
        "BooleanOptionalAction",
        "argparse.BooleanOptionalAction",
    ):
        return "bool"
    if nargs in ("+", "*") or isinstance(nargs, int) and nargs > 1:
        return "list"
    if type_name in ("int", "float"):
        return type_name
    if type_name and ("json" in type_name.lower()):
        return "json"
    return "str"


def collect(sources: dict[str, str], dest_class: str | None) -> FlagTable:
    trees = {name: ast.parse(src) for name, src in sources.items()}
    classes: dict[str, dict[str, tuple[str, ast.AST | None]]] = {}
    for tree in trees.values():
        classes.update(class_fields(tree))
    flags: FlagTable = {}
    for tree in trees.values():
        group_classes = {
            t.id: getattr(node.value.args[0], "id", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "get_kwargs"
            and node.value.args
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
            ):
                entry = entry_from_call(node, classes, dest_class, group_classes)
                if entry:
                    flags.setdefault(entry.pop("name"), entry)
    return flags


def fields_as_flags(sources: dict[str, str], class_filter: re.Pattern[str]) -> FlagTable:
    """Dataclass / msgspec Struct fields -> ``--field-name`` entries."""
    flags: FlagTable = {}
    classes: dict[str, dict[str, tuple[str, ast.AST | None]]] = {}
    for src in sources.values():
        classes.update(class_fields(ast.parse(src)))
    for cls, fields in classes.items():
        if not class_filter.search(cls):
            continue
        for name, (annotation, default) in fields.items():
            if name.startswith("_"):
                continue
            kind = kind_from_annotation(annotation)
            entry: dict[str, Any] = {"aliases": [], "kind": kind, "annotation": annotation[:200]}
            if kind == "bool":
                entry["action"] = "BooleanOptionalAction"
            if kind == "list":
                entry["nargs"] = "+"
            ch = choices_from_annotation(annotation)
            if ch:
                entry["choices"] = ch
            entry.update(resolve_default(default, classes))
            flags.setdefault("--" + name.replace("_", "-"), entry)
    return flags


def _annotated_parts(annotation: ast.AST) -> tuple[ast.AST, ast.Call | None, bool] | None:
    """``A[T, "help"]`` / ``A[T, Arg(...)]`` -> (T, the Arg call or None, has CLI metadata)."""
    if not (
        isinstance(annotation, ast.Subscript)
        and getattr(annotation.value, "id", getattr(annotation.value, "attr", ""))
        in ("A", "Annotated")
        and isinstance(annotation.slice, ast.Tuple)
        and annotation.slice.elts
    ):
        return None
    inner, *meta = annotation.slice.elts
    for node in meta:
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Arg":
            return inner, node, True
        if isinstance(node, ast.Constant | ast.JoinedStr) and (
            not isinstance(node, ast.Constant) or isinstance(node.value, str)
        ):
            return inner, None, True
    return inner, None, False


def _strip_optional(type_src: str) -> str:
    m = re.fullmatch(r"Optional\[(.*)\]", type_src)
    if m:
        return m.group(1)
    parts = [p.strip() for p in type_src.split("|")]
    return " | ".join(p for p in parts if p != "None") if "None" in parts else type_src


_TYPE_PARSER_KINDS = {
    "json.loads": "json",
    "json_list_type": "json",
    "human_readable_int": "int",
    "int": "int",
    "float": "float",
}


def _action_name(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    name = ast.unparse(node).rpartition(".")[2]
    return _DEPRECATED_ACTIONS.get(name, name)


_DEPRECATED_ACTIONS = {
    "DeprecatedStoreTrueAction": "store_true",
    "DeprecatedStoreConstAction": "store_const",
}


def msgspec_fields_as_flags(sources: dict[str, str]) -> FlagTable:
    """sglang 0.5.23+: ``A[T, Arg(...)]`` fields of the namespace Structs, as
    ``add_cli_args_from_dataclass`` registers them (``arg_groups/arg_utils.py``): fields without
    an ``Arg``/help string, ``Derived`` entries and ``no_cli=True`` are not CLI flags; ``bool`` is
    ``store_true``; ``list[X]`` takes ``nargs="+"``; ``Literal`` gives choices."""
    trees = [ast.parse(src) for src in sources.values()]
    classes: dict[str, dict[str, tuple[str, ast.AST | None]]] = {}
    for tree in trees:
        classes.update(class_fields(tree))
    flags: FlagTable = {}
    for tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                entry = _msgspec_entry(stmt.target.id, stmt.annotation, stmt.value, classes)
                if entry is not None:
                    flags.setdefault(entry.pop("name"), entry)
    return flags


def _msgspec_entry(
    field_name: str,
    annotation: ast.AST,
    default: ast.AST | None,
    classes: dict[str, dict[str, tuple[str, ast.AST | None]]],
) -> dict[str, Any] | None:
    parts = _annotated_parts(annotation)
    if parts is None or not parts[2] or field_name.startswith("_"):
        return None
    inner, arg, _ = parts
    kw = {k.arg: k.value for k in arg.keywords if k.arg} if arg else {}
    if literal(kw.get("no_cli"))[1] is True:
        return None
    ok, cli_name = literal(kw.get("cli_name"))
    name = cli_name if ok and isinstance(cli_name, str) else "--" + field_name.replace("_", "-")
    ok, aliases = literal(kw.get("aliases"))
    type_src = _strip_optional(ast.unparse(inner))
    entry: dict[str, Any] = {
        "aliases": [a for a in aliases if a != name] if ok and aliases else [],
        "kind": kind_from_annotation(type_src),
        "annotation": ast.unparse(inner)[:200],
    }
    parser = ast.unparse(kw["type_parser"]) if "type_parser" in kw else None
    if "action" in kw:
        entry["action"] = _action_name(kw["action"])
        if entry["action"] in ("BooleanOptionalAction", "store_true"):
            entry["kind"] = "bool"
    elif type_src == "bool":
        entry["action"] = "store_true"
    elif entry["kind"] == "list" and parser is None:
        ok, nargs = literal(kw.get("nargs"))
        entry["nargs"] = nargs if ok and nargs else "+"
    if parser is not None:
        entry["kind"] = _TYPE_PARSER_KINDS.get(
            parser, "str" if entry["kind"] == "list" else entry["kind"]
        )
        entry["type"] = parser[:80]
    if "nargs" in kw and "nargs" not in entry:
        ok, nargs = literal(kw["nargs"])
        if ok and nargs:
            entry["nargs"] = nargs
    ok, choices = literal(kw.get("choices"))
    if ok and isinstance(choices, list | tuple):
        entry["choices"] = [str(c) for c in choices]
    elif (ch := choices_from_annotation(type_src)) is not None:
        entry["choices"] = ch
    entry.update(resolve_default(default, classes))
    return {"name": name, **entry}


# --------------------------------------------------------------------------- engines


def sglang_table(wheel: Path) -> tuple[FlagTable, list[str], list[str]]:
    gaps: list[str] = []
    server_args = read_sources(wheel, r"sglang/srt/server_args\.py")
    flags = collect(server_args, dest_class="ServerArgs")
    fields = read_sources(wheel, r"sglang/srt/arg_groups/fields/.*\.py")
    if fields:
        for name, entry in msgspec_fields_as_flags(fields).items():
            flags.setdefault(name, entry)
        gaps.append(
            "0.5.23+ msgspec fields: Arg(action=custom) kinds and type_parser results approximated"
        )
    gaps.append(
        "defaults computed in __post_init__ (e.g. mem_fraction_static) are recorded as None"
    )
    return flags, sorted(server_args) + sorted(fields), gaps


def vllm_table(wheel: Path) -> tuple[FlagTable, list[str], list[str]]:
    gaps = [
        "defaults computed at runtime are recorded as None with default_expr",
        "flags registered from runtime data (e.g. VllmConfig loops) may be missing",
    ]
    config = read_sources(wheel, r"vllm/config/.*\.py|vllm/config\.py")
    arg_utils = read_sources(wheel, r"vllm/engine/arg_utils\.py")
    cli = read_sources(
        wheel,
        r"vllm/entrypoints/(openai|common)/cli_args\.py|vllm/entrypoints/cli/serve\.py",
    )
    flags = collect({**config, **arg_utils, **cli}, dest_class="EngineArgs")
    # FrontendArgs moved to entrypoints/common/ and split into BaseFrontendArgs by 0.33.
    for name, entry in fields_as_flags(cli, re.compile(r"^(Base)?FrontendArgs$")).items():
        flags.setdefault(name, entry)
    return flags, sorted(arg_utils) + sorted(cli), gaps


def write_table(engine: str, version: str, wheel: Path) -> Path:
    flags, files, gaps = (sglang_table if engine == "sglang" else vllm_table)(wheel)
    out = {
        "engine": engine,
        "version": version,
        "source": f"PyPI wheel {wheel.name}: " + ", ".join(files),
        "extracted_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "extractor": "scripts/refresh_flags.py (static ast, no import)",
        "gaps": gaps,
        "flags": dict(sorted(flags.items())),
    }
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"flags_{engine}_{version}.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", nargs="*", default=["0.5.9"], help="sglang versions")
    parser.add_argument("--vllm", nargs="*", default=["0.11.0"], help="vllm versions")
    parser.add_argument("--wheels", type=Path, default=None, help="wheel cache folder")
    args = parser.parse_args(argv)
    dest = args.wheels or Path(tempfile.gettempdir()) / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    for engine, versions in (("sglang", args.sglang), ("vllm", args.vllm)):
        for version in versions:
            path = write_table(engine, version, download_wheel(engine, version, dest))
            n = len(json.loads(path.read_text())["flags"])
            print(f"{path}: {n} flags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
