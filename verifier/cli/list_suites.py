"""`verifier list-suites`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("list-suites", help="list the available suites and where each comes from (builtin or the plugin distribution)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.catalog import get_suites, suite_origin

    rows = [(name, f"v{s.version}", suite_origin(name), s.description) for name, s in sorted(get_suites().items())]
    # columns as wide as their widest cell (a long suite name pushed its row's columns out of line)
    w = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    for name, version, origin, description in rows:
        print(f"{name:<{w[0]}}  {version:<{w[1]}}  {origin:<{w[2]}}  {description}")
    return 0
