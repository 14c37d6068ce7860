"""`verifier list-goldens [DIR]`: the goldens installed with verifier (usable as `--golden NAME` from anywhere)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list-goldens", help="list the packaged goldens (or those in DIR): name, suites, model, modes, samples")
    p.add_argument("dir", nargs="?", help="a directory of goldens (default: the ones installed with verifier)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import describe_goldens

    rows = describe_goldens(Path(a.dir) if a.dir else None)
    print(f"{'name':<22} {'suites':<16} {'model':<14} {'modes':<18} {'samples':>7}  extras")
    for r in rows:
        extras = ", ".join(x for x, on in (("probes", r["probes"]), ("context probe", r["context_probe"]),
                                             ("margins", r["margins"])) if on)
        print(f"{r['name']:<22} {','.join(r['suites']):<16} {str(r['model']):<14} {','.join(r['modes']):<18} "
              f"{r['samples']:>7}  {extras}" + (f"  ({r['problem']})" if r.get("problem") else ""))
    return 0
