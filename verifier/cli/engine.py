"""`verifier engine start|prepare|info`: llama.cpp's llama-server with packaged models.

Its nested subcommands and choices come from the engines module; they are parsed inside the handler,
so `verifier --help` does not import it. The handler builds a StartConfig and the engines module serves it.
"""

from __future__ import annotations

import argparse
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("engine", help="serve packaged models with llama.cpp (reference, requantized, KV-quantized, wrong-template variants)",
                       add_help=False, prefix_chars="\0")
    p.add_argument("args", nargs=argparse.REMAINDER, help="start|prepare|info ... (see verifier engine --help)")
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..testbed.engine_models import KV_CACHE_TYPES, MODELS, QUANTS, SPEC_TYPES

    p.description = "Serve packaged models with llama.cpp's llama-server, including requantized, KV-quantized and wrong-template variants."
    sub = p.add_subparsers(dest="engine_cmd", required=True)

    def model_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model", default="smollm2", choices=sorted(MODELS), help="packaged model (default smollm2)")
        q.add_argument("--quant", choices=QUANTS, help="requantize with llama-quantize --allow-requantize (cached), e.g. Q2_K or Q3_K_M")
        q.add_argument("--models-dir", help="cache for assembled/requantized models (default $VERIFIER_MODELS_DIR or ./models)")

    q = sub.add_parser("start", help="start llama-server in the foreground until Ctrl-C; prints the base URL")
    model_args(q)
    q.add_argument("--kv-cache", choices=KV_CACHE_TYPES, help="quantize the KV cache (K and V), e.g. q4_0")
    q.add_argument("--template", metavar="drop-system|drop-tools|FILE|NAME",
                   help="override the chat template: a bundled wrong one, a Jinja file, or a llama.cpp built-in name")
    q.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 picks a free one)")
    q.add_argument("--slots", type=int, default=2, help="parallel slots, -np (default 2)")
    q.add_argument("--spec-type", choices=SPEC_TYPES, help="speculative decoding without a draft model (lossless)")
    q.add_argument("--no-cache-prompt", action="store_true", help="turn the prompt (prefix) cache off (lossless)")
    q.add_argument("--ctx", type=int, default=4096, help="total context, shared by the slots (default 4096)")
    q.add_argument("--seed", type=int, default=1234, help="server sampling seed (default 1234)")
    q.add_argument("--threads", type=int, help="CPU threads (default: llama.cpp's choice)")
    q.add_argument("--log", help="llama-server log file (default: a file in the temp dir, printed)")
    q.add_argument("extra", nargs="*", metavar="-- LLAMA_SERVER_ARGS", help="further llama-server flags after --")

    q = sub.add_parser("prepare", help="assemble/verify (and requantize) a packaged model; print its path")
    model_args(q)

    sub.add_parser("info", help="engine binaries, build and packaged models")


def handle(a: argparse.Namespace) -> int:
    from .parser import Parser, subparsers

    p = Parser(prog="verifier engine")
    add_arguments(p)
    e, extra = p.parse_known_args(a.args)
    if extra:  # by the subcommand's own parser, so "did you mean" knows its flags
        subparsers(p)[e.engine_cmd].error(f"unrecognized arguments: {' '.join(extra)}")
    from ..testbed import engines

    try:
        if e.engine_cmd == "info":
            return engines.print_info()
        if e.engine_cmd == "prepare":
            t0 = time.perf_counter()
            print(engines.prepare(e.model, e.quant, e.models_dir))
            print(f"ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            return 0
    except engines.EngineError as err:
        return engines.error_exit(err)
    return engines.start_foreground(engines.StartConfig(
        e.model, e.quant, e.kv_cache, e.template, port=e.port, slots=e.slots, ctx=e.ctx, seed=e.seed, threads=e.threads,
        log=e.log, models_dir=e.models_dir, extra=tuple(x for x in e.extra if x != "--"), spec=e.spec_type,
        cache_prompt=not e.no_cache_prompt))
