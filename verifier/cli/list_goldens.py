"""`verifier list-goldens [DIR]`: the goldens installed with verifier (usable as `--golden NAME` from anywhere)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("list-goldens", help="list the packaged goldens (or those in DIR): name, suites, model, modes, samples, serving adapter")
    p.add_argument("dir", nargs="?", help="a directory of goldens (default: the ones installed with verifier)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import describe_goldens

    rows = describe_goldens(Path(a.dir) if a.dir else None)
    # the serving adapter the reference was recorded behind: gate it with --serving-adapter NAME ("-": none)
    table = [[r.name, ",".join(r.suites), str(r.model), ",".join(r.modes), str(r.samples), r.serving_adapter or "-",
              ", ".join(x for x, on in (("probes", r.probes), ("context probe", r.context_probe), ("margins", r.margins)) if on)
              + (f"  ({r.problem})" if r.problem else "")] for r in rows]
    for line in aligned(["name", "suites", "model", "modes", "samples", "serving adapter", "extras"], table, right={4}):
        print(line)
    return 0


def aligned(header: list[str], rows: list[list[str]], right: frozenset[int] | set[int] = frozenset()) -> list[str]:
    """Columns as wide as their widest cell (a long golden name pushes its column, never the next one), two spaces apart."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    out = []
    for row in [header, *rows]:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return out
