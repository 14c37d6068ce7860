"""`verifier compare RUN_DIR --golden G`: paired diff, statistics, attribution; comparison.json; exit code."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verifier.types import DEFAULT_INFRA_BUDGET

from .types import fraction

if TYPE_CHECKING:
    from verifier.app.spec import CompareSpec


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("compare", help="paired diff of a run against a golden; writes comparison.json; exit code")
    p.add_argument("run_dir")
    p.add_argument("--golden", required=True)
    p.add_argument("--out", help="where to write comparison.json (default RUN_DIR/comparison.json; a gate's own comparison.json "
                                 "is kept: give --out, or --force to replace it); with --out and without --ci-outputs nothing is written into RUN_DIR "
                                 "(a run you cannot write is compared this way)")
    p.add_argument("--force", action="store_true", help="replace the comparison.json (and, with --ci-outputs, the report files) a gate wrote into RUN_DIR")
    p.add_argument("--infra-budget", type=fraction, default=None,
                   help=f"infra error rate above which the run is incomplete (default: the gate's, for a gate's run directory; else {DEFAULT_INFRA_BUDGET})")
    p.add_argument("--allow-inconclusive", action="store_true", help="exit 0 instead of 20 when inconclusive (never for 13, a significant quality drop of unattributed cause)")
    p.add_argument("--ci-outputs", action="store_true",
                   help="also write what gate writes into RUN_DIR: report.html, junit.xml, summary.md (+ $GITHUB_STEP_SUMMARY), samples.csv")
    p.add_argument("--allow-subset", action="store_true",
                   help="judge a --limit/--sample-seed subset of the golden: samples never run are not counted missing (reported as a subset)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import compare_run, load_golden
    from verifier.cli.text import print_comparison
    from .args import exit_code
    from .gate import print_limited

    keep_gate_comparison(Path(a.run_dir), bool(a.out) and not a.ci_outputs, a.force)
    golden = load_golden(a.golden)  # once: the comparison and the report read the same value
    doc = compare_run(Path(a.run_dir), spec_from_flags(a), golden)
    print_limited(doc)
    print_comparison(doc)
    if a.ci_outputs:
        from .gate import print_outputs, write_ci_outputs

        print_outputs(Path(a.run_dir), write_ci_outputs(Path(a.run_dir), doc, None, None, None, golden))
    else:
        from verifier.execution.rundir import RunDir

        print(f"comparison: {Path(a.out) if a.out else RunDir(Path(a.run_dir)).comparison_path()}")
    return exit_code(doc, a.allow_inconclusive)


def spec_from_flags(a: argparse.Namespace) -> "CompareSpec":
    """The flags' door to CompareSpec: what they said, the spec's defaults for the rest."""
    from verifier.app.spec import CompareSpec

    return CompareSpec(a.golden, a.infra_budget, allow_subset=a.allow_subset, out=Path(a.out) if a.out else None)


def keep_gate_comparison(run_dir: Path, elsewhere: bool, force: bool) -> None:
    """A gate's comparison.json is its verdict of record (CI read it, the report links it): compare writes over it
    only when told (--force); --out writes elsewhere. A run never compared, or compared by `compare`, is written
    as before; so is an interrupted gate's directory, which has no comparison yet."""
    from verifier.app.gate import holds_gate_comparison
    from verifier.errors import UsageError

    if elsewhere or force or not holds_gate_comparison(run_dir):
        return
    raise UsageError(f"{run_dir} holds the comparison its gate wrote; compare keeps it: give --out FILE to write "
                     "this one elsewhere, or --force to replace the gate's")
