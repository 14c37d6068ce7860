"""`verifier engine start|prepare|info`: llama.cpp's llama-server with packaged models.

Its nested subcommands and choices live with the engines module; they are parsed inside the handler,
so `verifier --help` does not import it.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("engine", help="serve packaged models with llama.cpp (reference, requantized, KV-quantized, wrong-template variants)",
                       add_help=False, prefix_chars="\0")
    p.add_argument("args", nargs=argparse.REMAINDER, help="start|prepare|info ... (see verifier engine --help)")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from ..testbed import engines

    p = argparse.ArgumentParser(prog="verifier engine")
    engines.add_arguments(p)
    return engines.run(p.parse_args(a.args))
