"""`verifier merge SHARD... --out RUN_DIR`: shard run directories -> one run directory, then scored."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("merge", help="merge shard run directories into one run directory, then score it")
    p.add_argument("shards", nargs="+", metavar="SHARD_RUN_DIR", help="run directories made by the shard jobs")
    p.add_argument("--out", required=True, help="merged run directory to create")
    p.add_argument("--allow-partial", action="store_true", help="merge an incomplete shard set (compare still reports what is missing)")
    p.add_argument("--force", action="store_true", help="write into --out even when it is a golden directory (replacing its samples.jsonl)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app import collect as app
    from verifier.execution import merge
    from verifier.cli.text import print_summary

    out = Path(a.out)
    hdr = merge.merge([Path(s) for s in a.shards], out, allow_partial=a.allow_partial, force=a.force)
    summary = app.score(out)
    if not a.quiet:
        print_summary(summary)
    n = sum(s["samples"] for s in hdr.suites.values())
    sset = hdr.shard_set or {}
    gap = f"; INCOMPLETE shard set, missing {', '.join(sset['missing'])}" if sset.get("missing") else ""
    print(f"merged {len(a.shards)} shards -> {out} ({n} samples){gap}")
    return 0
