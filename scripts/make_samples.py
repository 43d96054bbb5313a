#!/usr/bin/env python3
"""Regenerate the project's own sample sessions in analytics/samples/ (deterministic).

    python scripts/make_samples.py            # write the files
    python scripts/make_samples.py --check    # fail if the committed files differ

Each sample is built by one module in scripts/samples_gen/; the shared makers for SGLang/vLLM
log lines, benchmark blocks and nvidia-smi tables live in samples_gen/logs.py. Fixed seeds and
fixed base timestamps make two runs byte-identical.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from samples_gen import claude_vllm, codex_tuning, opencode_campaign, text_deploy  # noqa: E402
from samples_gen.common import Result, write_tree  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "analytics" / "samples"
GENERATORS = [opencode_campaign.build, text_deploy.build, claude_vllm.build, codex_tuning.build]


def validate(rel: str, content: str) -> int:
    """Parse what we wrote; return the record count."""
    if rel.endswith(".jsonl"):
        lines = content.splitlines()
        for line in lines:
            json.loads(line)  # raises with the line number in the traceback context
        return len(lines)
    if rel.endswith(".json"):
        doc = json.loads(content)
        return len(doc["messages"]) if isinstance(doc, dict) and "messages" in doc else 1
    if rel.endswith(".txt"):
        return content.count("<msg id=")
    return content.count("\n") - 1  # tsv rows without the header


HINTS = Path(__file__).resolve().parents[1] / "data" / "gold" / "sample_hints.tsv"


def hints_tsv(results: list[Result]) -> str:
    rows = ["file\tsource_id\ttag\tnote"]
    for res in results:
        for h in res.hints:
            rows.append(f"{h.file}\t{h.source_id}\t{h.tag}\t{h.note}")
    return "\n".join(rows) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the files on disk instead of writing")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    results = [gen() for gen in GENERATORS]
    files: dict[str, str] = {}
    for res in results:
        files.update(res.files)
    for rel, content in sorted(files.items()):
        n = validate(rel, content)
        print(f"{rel:<90} {n:>6} records  {len(content.encode()):>9} bytes")
    if args.check:
        bad = [rel for rel, c in files.items() if not (args.out / rel).exists()
               or (args.out / rel).read_text(encoding="utf-8") != c]
        for rel in bad:
            print(f"Error: {rel} differs from the generator output; run python scripts/make_samples.py", file=sys.stderr)
        hints_ok = HINTS.exists() and HINTS.read_text(encoding="utf-8") == hints_tsv(results)
        if not hints_ok:
            print(f"Error: {HINTS} differs from the generator output", file=sys.stderr)
        return 1 if bad or not hints_ok else 0
    write_tree(args.out, files)
    HINTS.write_text(hints_tsv(results), encoding="utf-8")
    print(f"hints: {sum(len(r.hints) for r in results)}  ->  {HINTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
