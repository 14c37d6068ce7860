"""`verifier list-suites`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list-suites", help="list the available suites and where each comes from (builtin or the plugin distribution)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.collect import get_suites, suite_origin

    for name, s in sorted(get_suites().items()):
        print(f"{name:<14} v{s.version:<6} {suite_origin(name):<16} {s.description}")
    return 0
