"""`verifier matrix`: N candidate runs (one per provider) against one golden -> one HTML page + one Markdown table.

`finish` is also the back half of `verifier gate --config` with several [[endpoints]] (cli/gate.py gates each
concurrently into OUT/<name>, then calls it). Exit code: the worst of the providers' (0 only when all pass).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from verifier.attribution.document import Comparison
    from verifier.golden.model import GoldenHeader


from verifier.types import DEFAULT_INFRA_BUDGET

DEFAULT_OUT = "reports/matrix"
"""The design's reports/ folder, relative to the current directory: where a matrix goes when --out is not given."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("matrix", help="N candidate runs (one per provider) vs one golden -> matrix.html + matrix.md")
    p.add_argument("runs", nargs="+", metavar="[NAME=]RUN_DIR", help="candidate run directories; NAME= sets the provider name (default: the directory name)")
    p.add_argument("--golden", required=True, help="the golden every run is compared with")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"where matrix.html, matrix.md and matrix.json go (default {DEFAULT_OUT}, under the current directory)")
    p.add_argument("--infra-budget", type=float, default=None,
                   help=f"infra error rate above which a run is incomplete (default: the one its gate used, else {DEFAULT_INFRA_BUDGET})")
    p.add_argument("--allow-inconclusive", action="store_true", help="inconclusive providers count as passing for the exit code (regression_unattributed, 13, never does)")
    p.set_defaults(fn=handle)


MAX_NAME = 128


def provider_name_ok(name: str) -> bool:
    """Whether a provider name is one plain file name: the matrix writes OUT/comparisons/NAME.json, so a name with a
    separator or `..` would put it outside --out."""
    return (0 < len(name) <= MAX_NAME and name not in (".", "..") and "/" not in name and "\\" not in name
            and not any(ord(c) < 0x20 or ord(c) == 0x7f for c in name))


def parse_runs(items: list[str]) -> list[tuple[str, Path]]:
    from ..errors import UsageError

    out = []
    for item in items:
        name, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        name = name or Path(path).name
        if not provider_name_ok(name):
            raise UsageError(f"provider name {name[:80]!r} cannot name a file under --out: use 1-{MAX_NAME} characters, "
                             "no '/', '\\', control characters, '.' or '..' (name it NAME=RUN_DIR)")
        out.append((name, Path(path)))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise UsageError(f"provider names must be unique (name them NAME=RUN_DIR): {', '.join(names)}")
    return out


def handle(a: argparse.Namespace) -> int:
    """Reads only. A run already compared with this golden keeps its own comparison (the margins its gate used)
    once the run's own evidence, compared again in memory, gives the same status and exit code; otherwise (a
    comparison.json edited by hand, or made from other files) the matrix shows the comparison made now, saying so.
    A run never compared is compared in memory. Comparisons made here go into OUT/comparisons/, never into the run."""
    from verifier.app import gate as app_gate
    from verifier.app.runs import believed
    from verifier import safewrite
    from verifier.app.spec import CompareSpec

    loaded = app_gate.load_golden(a.golden)
    out = Path(a.out)
    docs: dict[str, tuple[Path, Comparison]] = {}
    links: dict[str, Path] = {}
    for name, run_dir in parse_runs(a.runs):
        recorded = existing_comparison(run_dir, loaded.header)
        if recorded is None:
            made = app_gate.compare_run(run_dir, CompareSpec(a.golden, a.infra_budget, write=False), loaded)
        else:
            made, why = believed(run_dir, a.golden, loaded, recorded)
            if why is None:
                docs[name] = (run_dir, recorded)
                continue
            print(f"verifier: matrix: {name}: {why}", file=sys.stderr)
        links[name] = out / "comparisons" / f"{name}.json"
        links[name].parent.mkdir(parents=True, exist_ok=True)
        safewrite.write_json(links[name], made.to_dict())
        docs[name] = (run_dir, made)
    return finish(docs, out, a.allow_inconclusive, links)


def existing_comparison(run_dir: Path, g: GoldenHeader) -> Comparison | None:
    """RUN_DIR/comparison.json when it was made against this golden (same name and source run), else None.
    A corrupt one is None (compared again); a planted special file is refused (exit 2)."""
    from verifier.attribution.document import Comparison
    from verifier.execution.layout import NotARunDir, RefusedFile
    from verifier.execution.rundir import RunDir

    try:
        doc = RunDir(run_dir).comparison()
    except RefusedFile:
        raise
    except NotARunDir:
        return None
    if doc is None:
        return None
    try:
        typed = Comparison.from_dict(doc)
    except (KeyError, TypeError, ValueError, AttributeError):  # not a comparison this verifier reads: compared again
        return None
    if not isinstance(typed.golden, Mapping):
        return None
    if typed.golden_name != g.name or typed.golden.get("source_run") != g.source.run_id:
        return None
    return typed


def finish(docs: Mapping[str, tuple[Path, Comparison]], out: Path, allow_inconclusive: bool,
           links: dict[str, Path] | None = None) -> int:
    """Write the matrix of compared runs; print the Markdown table; the worst exit code. `links`: where a
    provider's row points when its run holds no comparison of its own against this golden."""
    from verifier.app.report_files import matrix_entry
    from verifier.report import matrix
    from .args import exit_code

    entries = [matrix_entry(name, run_dir, doc, (links or {}).get(name)) for name, (run_dir, doc) in docs.items()]
    m = matrix.build(entries, out)
    paths = matrix.write(m, out)
    print(matrix.markdown(m))
    print(f"matrix: {paths['matrix.html']}  {paths['matrix.md']}", file=sys.stderr)
    return max(exit_code(doc, allow_inconclusive) for _, doc in docs.values())
