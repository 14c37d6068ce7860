"""`verifier bless RUN_DIR --to goldens/NAME`: a reference run becomes a golden."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("bless", help="turn a scored reference run into a golden")
    p.add_argument("run_dir")
    p.add_argument("--to", required=True, help="golden directory, e.g. goldens/<name>")
    p.add_argument("--force", action="store_true", help="replace an existing golden")
    p.add_argument("--epochs-as-reruns", action="store_true", help="calibrate margins from the run's epochs (needs >= 3)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import bless_run, floor_warnings

    run_dir, to = Path(a.run_dir), Path(a.to)
    g = bless_run(run_dir, to, force=a.force, epochs_as_reruns=a.epochs_as_reruns)
    for line in floor_warnings(g.summary):
        print(f"verifier: warning: {line}", file=sys.stderr)
    n = sum(s.samples or 0 for s in g.suites.values())
    print(f"blessed {run_dir} -> {to} ({n} samples)" + ("" if g.margins else "; next: verifier calibrate"))
    return 0
