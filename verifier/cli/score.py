"""`verifier score RUN_DIR`: offline, pure: verdicts.jsonl + observations.jsonl + summary.json."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("score", help="score a run directory offline: verdicts.jsonl + observations.jsonl + summary.json")
    p.add_argument("run_dir")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app import collect as app
    from verifier.cli.text import print_summary

    print_summary(app.score(Path(a.run_dir)))
    return 0
