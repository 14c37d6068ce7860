"""`verifier list-suites`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list-suites", help="list the available suites")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from ..app import get_suites

    for name, s in sorted(get_suites().items()):
        print(f"{name:<14} v{s.version:<6} {s.description}")
    return 0
