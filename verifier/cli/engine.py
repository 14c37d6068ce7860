"""`verifier engine start|prepare|info`: llama.cpp's llama-server, or vLLM, with packaged models.

Its nested subcommands and choices come from the engines modules; they are parsed inside the handler,
so `verifier --help` does not import them. The handler builds a start config and the engines module serves it.
"""

from __future__ import annotations

import argparse
import sys
import time

ENGINES = ("llamacpp", "vllm")
# Flags that only one engine has: asking the other for them is refused rather than silently ignored.
LLAMA_ONLY = {"quant": "--quant", "kv_cache": "--kv-cache", "spec_type": "--spec-type"}
VLLM_ONLY = {"dtype": "--dtype", "kv_cache_dtype": "--kv-cache-dtype", "tool_call_parser": "--tool-call-parser",
             "enforce_eager": "--enforce-eager"}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("engine", help="serve packaged models with llama.cpp or vLLM (reference, requantized, KV-quantized, wrong-template variants)",
                       add_help=False, prefix_chars="\0")
    p.add_argument("args", nargs=argparse.REMAINDER, help="start|prepare|info ... (see verifier engine --help)")
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..testbed.engine_models import KV_CACHE_TYPES, MODELS, QUANTS, SPEC_TYPES
    from ..testbed.vllm_engine import DTYPES, KV_CACHE_DTYPES

    p.description = ("Serve packaged models with llama.cpp's llama-server (default) or vLLM (--engine vllm), including "
                     "requantized, KV-quantized, other-precision and wrong-template variants.")
    sub = p.add_subparsers(dest="engine_cmd", required=True)

    def model_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--engine", choices=ENGINES, default="llamacpp",
                       help="llamacpp (llama-server, the default) or vllm (vLLM's OpenAI server, from its own venv: docs/engines.md)")
        q.add_argument("--model", choices=sorted(MODELS), help="packaged model (default smollm2; qwen0.5b with --engine vllm)")
        q.add_argument("--quant", choices=QUANTS, help="llama.cpp: requantize with llama-quantize --allow-requantize (cached), e.g. Q2_K")
        q.add_argument("--models-dir", help="cache for assembled/requantized models (default $VERIFIER_MODELS_DIR or ./models)")

    q = sub.add_parser("start", help="start the engine in the foreground until Ctrl-C; prints the base URL")
    model_args(q)
    q.add_argument("--kv-cache", choices=KV_CACHE_TYPES, help="llama.cpp: quantize the KV cache (K and V), e.g. q4_0")
    q.add_argument("--dtype", choices=DTYPES, help="vLLM: weights and activations precision (default float32: the checkpoint's bf16 values, exactly; bf16 matmuls are 20-40x slower on CPUs without AVX512-BF16)")
    q.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, help="vLLM: KV cache precision, e.g. fp8")
    q.add_argument("--tool-call-parser", help="vLLM: tool-call parser (default hermes, the Qwen format; 'none' turns tool calling off)")
    q.add_argument("--enforce-eager", action="store_true", help="vLLM: no torch.compile (faster start, slower requests)")
    q.add_argument("--template", metavar="drop-system|drop-tools|FILE|NAME",
                   help="override the chat template: a bundled wrong one, a Jinja file, or (llama.cpp) a built-in name")
    q.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 picks a free one)")
    q.add_argument("--slots", type=int, help="parallel sequences: llama.cpp -np (default 2), vLLM --max-num-seqs (default vLLM's)")
    q.add_argument("--spec-type", choices=SPEC_TYPES, help="llama.cpp: speculative decoding without a draft model (lossless)")
    q.add_argument("--no-cache-prompt", action="store_true", help="turn the prompt (prefix) cache off (lossless)")
    q.add_argument("--ctx", type=int, default=4096, help="context: llama.cpp total, shared by the slots; vLLM --max-model-len (default 4096)")
    q.add_argument("--seed", type=int, default=1234, help="server sampling seed (default 1234)")
    q.add_argument("--threads", type=int, help="CPU threads (llama.cpp default: half of this machine's CPUs, at least 1; vLLM: its own choice)")
    q.add_argument("--log", help="server log file (default: a file in the temp dir, printed)")
    q.add_argument("extra", nargs="*", metavar="-- ENGINE_ARGS", help="further llama-server or vLLM flags after --")

    q = sub.add_parser("prepare", help="assemble/verify (and requantize, or convert for vLLM) a packaged model; print its path")
    model_args(q)

    sub.add_parser("info", help="engine binaries, build and packaged models")


def _refused(e: argparse.Namespace) -> str | None:
    """The first flag given that the chosen engine does not have."""
    other = LLAMA_ONLY if e.engine == "vllm" else VLLM_ONLY
    for attr, flag in other.items():
        if getattr(e, attr, None):
            return f"{flag} is not a {e.engine} flag (" + ("llama.cpp" if e.engine == "vllm" else "vLLM") + "'s; see verifier engine start --help)"
    return None


def handle(a: argparse.Namespace) -> int:
    from .parser import Parser, subparsers

    p = Parser(prog="verifier engine")
    add_arguments(p)
    e, extra = p.parse_known_args(a.args)
    if extra:  # by the subcommand's own parser, so "did you mean" knows its flags
        subparsers(p)[e.engine_cmd].error(f"unrecognized arguments: {' '.join(extra)}")
    from ..testbed import engine_models, engines, vllm_engine

    if e.engine_cmd != "info":
        refused = _refused(e)
        if refused:
            print(f"verifier: error: {refused}", file=sys.stderr)
            return 2
        e.model = e.model or ("qwen0.5b" if e.engine == "vllm" else "smollm2")
    try:
        if e.engine_cmd == "info":
            engine_models.print_info()
            vllm_engine.print_info()
            return 0
        if e.engine_cmd == "prepare":
            t0 = time.perf_counter()
            print(vllm_engine.checkpoint(e.model, e.models_dir) if e.engine == "vllm" else engine_models.prepare(e.model, e.quant, e.models_dir))
            print(f"ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            return 0
    except engine_models.EngineError as err:
        return engines.error_exit(err)
    engine_args = tuple(x for x in e.extra if x != "--")
    if e.engine == "vllm":
        return engines.start_foreground(vllm_engine.VllmStartConfig(
            e.model, e.dtype, e.kv_cache_dtype, e.template, e.tool_call_parser or vllm_engine.DEFAULT_TOOL_PARSER,
            port=e.port, max_model_len=e.ctx, max_num_seqs=e.slots, seed=e.seed, enforce_eager=e.enforce_eager,
            prefix_caching=not e.no_cache_prompt, threads=e.threads, log=e.log, models_dir=e.models_dir, extra=engine_args))
    threads = e.threads or engines.default_threads()
    if not e.threads:
        print(f"threads: {threads} (half of this machine's CPUs; on a shared machine fewer threads decode faster: "
              "--threads N to choose)", file=sys.stderr)
    return engines.start_foreground(engines.StartConfig(
        e.model, e.quant, e.kv_cache, e.template, port=e.port, slots=e.slots or 2, ctx=e.ctx, seed=e.seed, threads=threads,
        log=e.log, models_dir=e.models_dir, extra=engine_args, spec=e.spec_type, cache_prompt=not e.no_cache_prompt))
