"""`verifier run`: collect responses from an endpoint into a run directory, then score it."""

from __future__ import annotations

import argparse

from .args import add_endpoint_args, add_selection_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="collect responses from an endpoint into a run directory, then score it")
    add_selection_args(p)
    add_endpoint_args(p, required=False)
    p.add_argument("--out", help="run directory to create (default runs/<timestamp>-<suites>)")
    p.add_argument("--force", action="store_true", help="write the run into --out even when it is a golden directory")
    p.add_argument("--resume", metavar="RUN_DIR", help="re-send only what is missing or ended in an infra error")
    p.add_argument("--requests", metavar="FILE.jsonl", help="replay raw chat-completions request bodies as-is (K2-Vendor-Verifier format); same as --suite replay --data FILE")
    p.add_argument("--quiet", action="store_true", help="no progress bar (for CI)")
    p.add_argument("--probes", action="store_true", help="also run the parameter-contract probes (probes.json)")
    p.add_argument("--context-probe", action="store_true",
                   help="also run the context-truncation probe: one long prompt at growing lengths (context.json)")
    p.set_defaults(fn=handle, check=check)


def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if not a.resume and (not a.base_url or not a.model):
        ap.error("run needs --base-url and --model (or --resume)")


def handle(a: argparse.Namespace) -> int:
    from verifier.app import collect as app
    from verifier.cli.text import print_summary
    from .args import run_spec_from_args

    print_summary(app.collect(run_spec_from_args(a)).summary)
    return 0
