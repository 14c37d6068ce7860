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
    p.add_argument("--ci-outputs-dir", metavar="DIR",
                   help="write those CI outputs, and comparison.json unless --out says elsewhere, into DIR instead "
                        "(implies --ci-outputs): RUN_DIR is read, never written (a run you cannot write)")
    p.add_argument("--allow-subset", action="store_true",
                   help="judge a --limit/--sample-seed subset of the golden: samples never run are not counted missing (reported as a subset)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import compare_run, load_golden
    from verifier.cli.text import print_comparison
    from .args import exit_code
    from .gate import print_limited

    run_dir = Path(a.run_dir)
    ci_paths = ci_outputs_elsewhere(run_dir, a)
    keep_gate_comparison(run_dir, bool(a.out) and (ci_paths is not None or not a.ci_outputs), a.force)
    golden = load_golden(a.golden)  # once: the comparison and the report read the same value
    doc = compare_run(run_dir, spec_from_flags(a), golden)
    print_limited(doc)
    print_comparison(doc)
    if ci_paths is not None:
        from .gate import print_outputs, write_ci_outputs

        written = write_ci_outputs(run_dir, doc, ci_paths["html"], ci_paths["junit"], ci_paths["markdown"], golden,
                                   csv=ci_paths["csv"], write_run=False)
        print_outputs(run_dir, written, Path(a.out))
    elif a.ci_outputs:
        from .gate import print_outputs, write_ci_outputs

        print_outputs(run_dir, write_ci_outputs(run_dir, doc, None, None, None, golden))
    else:
        from verifier.execution.rundir import RunDir

        print(f"comparison: {Path(a.out) if a.out else RunDir(Path(a.run_dir)).comparison_path()}")
    return exit_code(doc, a.allow_inconclusive)


def ci_outputs_elsewhere(run_dir: Path, a: argparse.Namespace) -> dict[str, Path] | None:
    """Where `--ci-outputs-dir DIR` puts the CI outputs (None without it), each checked writable before anything is
    scored; `a.out` defaults to DIR/comparison.json. `--ci-outputs` alone writes into RUN_DIR: a run this user cannot
    write is refused first, in one line naming the way out (before, the comparison was made and the report files
    then failed to write into the run)."""
    from verifier.errors import UsageError
    from verifier.execution import layout
    from verifier.execution.rundir import RunDir
    from verifier.safewrite import check_writable

    if a.ci_outputs_dir is None:
        if a.ci_outputs and RunDir(run_dir).is_run() and not RunDir(run_dir).writable():
            raise UsageError(f"{run_dir} cannot be written (--ci-outputs puts report.html, junit.xml, summary.md and "
                             "samples.csv there): give --ci-outputs-dir DIR to write them, and comparison.json, there; "
                             "the run is then read, never written")
        return None
    where = Path(a.ci_outputs_dir)
    if where.resolve() == run_dir.resolve():
        raise UsageError(f"--ci-outputs-dir {where} is the run directory: use --ci-outputs to write into the run")
    check_writable(where, directory=True)
    a.ci_outputs = True
    a.out = a.out or str(where / layout.COMPARISON)
    paths = {"html": where / layout.REPORT_HTML, "junit": where / layout.JUNIT, "markdown": where / layout.SUMMARY_MD,
             "csv": where / layout.SAMPLES_CSV}
    for path in [*paths.values(), Path(a.out)]:
        check_writable(path)
    return paths


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
