"""Acceptance on vLLM: goldens from vLLM serving Qwen2.5-Coder-0.5B (float32 of the bf16 checkpoint of the packaged Q4_K_M), then every
vLLM variant gated against them, and the llama.cpp goldens gated against vLLM (the cross-engine case).

    python bench/release/acceptance_vllm.py [--stages goldens,reruns,variants,cross] [--rows NAME,...] [--work runs/acceptance-vllm]
    python bench/release/acceptance_vllm.py --table-only

Stages (each needs the goldens stage first, made once into --goldens, default goldens/):
    goldens   goldens/qwen0.5b-vllm-<suite> for smoke, bfcl, structured (3 runs: bless + calibrate) and
              qwen0.5b-vllm-bfcl-required (bfcl with tool_choice "required": real parsed tool calls)
    reruns    the reference server gated N times on smoke (false-alarm rate)
    variants  one vLLM server per row of VARIANTS (frontend, numerics, lossless), gated on the row's suites
    cross     the llama.cpp goldens (goldens/qwen0.5b-smoke, -structured) against the vLLM reference

Needs vLLM's venv and the model packages (docs/engines.md, "vLLM"); llama.cpp's server is not needed (the cross stage gates
vLLM against recorded llama.cpp goldens). Appends one line per gate to <work>/results.jsonl, prints the table.
CPU-heavy: a vLLM start-up is minutes on 2 cores, every variant row is one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))

from acceptance_rows import Row, gate, table, verifier  # noqa: E402

from verifier.testbed.engine_models import EngineError  # noqa: E402
from verifier.testbed.vllm_engine import VllmServer  # noqa: E402

MODEL = "qwen0.5b"
STAGES = ("goldens", "reruns", "variants", "cross")
SUITES = {"smoke": ["--mode", "chat,chat-stream"], "bfcl": ["--mode", "chat,chat-stream"],
          "structured": ["--mode", "chat,chat-stream"]}
REQUIRED = "bfcl-required"
"""bfcl behind the serving adapter tool-choice-required (--serving-adapter): vLLM's grammar forces a call, its Hermes parser parses it."""
SERVER = {"max_model_len": 4096, "kv_cache_space_gib": 1}
"""The reference and every variant: the same context and KV-cache budget unless the row changes them."""
# name -> (kind, VllmServer kwargs, suites). Suites name a golden qwen0.5b-vllm-<suite> (bfcl-required: through the proxy).
VARIANTS: dict[str, tuple[str, dict, list[str]]] = {
    "tool parser llama3_json (reference hermes)": ("frontend", {"tool_call_parser": "llama3_json"}, [REQUIRED, "bfcl"]),
    "tool parser qwen3_coder (reference hermes)": ("frontend", {"tool_call_parser": "qwen3_coder"}, [REQUIRED, "bfcl"]),
    "no tool parser": ("frontend", {"tool_call_parser": None}, ["bfcl"]),
    "reasoning parser deepseek_r1 on a non-reasoning model": ("frontend", {"extra_args": ["--reasoning-parser", "deepseek_r1"]}, ["smoke", "bfcl"]),
    "chat template without tools": ("frontend", {"template": "drop-tools"}, ["bfcl"]),
    "structured outputs backend guidance (reference auto)": ("frontend", {"extra_args": ["--structured-outputs-config", '{"backend": "guidance"}']}, ["structured"]),
    "structured outputs backend outlines (reference auto)": ("frontend", {"extra_args": ["--structured-outputs-config", '{"backend": "outlines"}']}, ["structured"]),
    "--dtype bfloat16 (reference float32)": ("numerics", {"dtype": "bfloat16"}, ["smoke"]),
    "--kv-cache-dtype fp8": ("numerics", {"kv_cache_dtype": "fp8"}, ["smoke", "structured", "bfcl"]),
    "prefix caching off": ("lossless", {"extra_args": ["--no-enable-prefix-caching"]}, ["smoke", "structured"]),
    "chunked prefill off": ("lossless", {"extra_args": ["--no-enable-chunked-prefill"]}, ["smoke", "structured"]),
    "--max-num-seqs 1": ("lossless", {"max_num_seqs": 1}, ["smoke", "structured"]),
}
CROSS = ("smoke", "structured")


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a, self.work, self.goldens = a, Path(a.work), Path(a.goldens)
        self.results = self.work / "results.jsonl"

    def server(self, label: str, **kw) -> VllmServer:
        return VllmServer(MODEL, log_path=self.work / f"{label.replace(' ', '_').replace('/', '_')}.log",
                          enforce_eager=self.a.enforce_eager, **{**SERVER, **kw})

    def limit(self) -> list[str]:
        return ["--limit", str(self.a.limit)] if self.a.limit else []

    def make_golden(self, url: str, model: str, suite: str, name: str, extra: tuple[str, ...] = ()) -> None:
        runs = []
        for i in range(3):
            out = self.work / f"golden-{name}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            # Probes are judged against the blessed run's only: the calibration reruns need none.
            probes = ["--probes"] if i == 0 else []
            rc = verifier("run", "--suite", suite, "--smoke", "--base-url", url, "--model", model, *probes, "--logprobs", "1",
                          "--concurrency", str(self.a.concurrency), "--out", str(out), "--quiet", *SUITES[suite], *self.limit(), *extra)
            assert rc == 0, f"run {name} failed"
            runs.append(out)
        g = self.goldens / name
        shutil.rmtree(g, ignore_errors=True)
        assert verifier("bless", str(runs[0]), "--to", str(g)) == 0
        assert verifier("calibrate", str(g), "--runs", *map(str, runs[1:])) == 0

    def gate(self, label: str, suite: str, url: str, model: str, golden: str | None = None, note: str = "") -> None:
        golden = golden or f"{MODEL}-vllm-{suite}"
        shown = "bfcl (tool_choice required)" if suite == REQUIRED else ""
        limit = (("--limit", str(self.a.gate_limit)) if self.a.gate_limit else ()) + (("--no-probes",) if self.a.no_probes else ())
        adapter = ("--serving-adapter", "tool-choice-required") if suite == REQUIRED else ()
        gate(self.work, Row(label, suite.removesuffix("-required"), str(self.goldens / golden), model, shown, note, limit + adapter),
             url, self.results, self.a.concurrency)

    def gate_suite(self, label: str, suite: str, srv: VllmServer) -> None:
        self.gate(label, suite, srv.url, srv.name)


def reference_stages(b: Bench, stages: list[str]) -> None:
    with b.server("vllm-ref") as srv:
        print(f"vLLM reference ready in {srv.startup_s} s", flush=True)
        if "goldens" in stages:
            for suite in SUITES:
                b.make_golden(srv.url, srv.name, suite, f"{MODEL}-vllm-{suite}")
            # tool_choice "required" as the serving adapter (recorded in the golden; gates apply it with the flag)
            b.make_golden(srv.url, srv.name, "bfcl", f"{MODEL}-vllm-{REQUIRED}", ("--serving-adapter", "tool-choice-required"))
        for i in range(b.a.reruns if "reruns" in stages else 0):
            b.gate(f"rerun {i + 1}", "smoke", srv.url, srv.name)
        if "cross" in stages:
            for suite in CROSS:
                b.gate("vLLM against the llama.cpp golden", suite, srv.url, srv.name, golden=f"{MODEL}-{suite}")


def variant_stage(b: Bench) -> None:
    rows = b.a.rows.split(",") if b.a.rows else list(VARIANTS)
    for label in rows:
        kind, kw, suites = VARIANTS[label]
        try:
            with b.server(label, **kw) as srv:
                print(f"[{label}] ready in {srv.startup_s} s", flush=True)
                for suite in suites:
                    b.gate_suite(label, suite, srv)
        except EngineError as e:  # a misconfiguration vLLM refuses at start-up is a row too: it cannot ship
            print(f"[{label}] did not start: {e}", flush=True)
            with b.results.open("a") as f:
                f.write(json.dumps({"candidate": label, "suite": ", ".join(suites), "exit": None, "status": "refused to start",
                                    "frontend": None, "quantization": None, "samples": 0,
                                    "evidence": [str(e)[:300]], "kind": kind}) + "\n")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--rows", help=f"variants stage: only these rows (comma-separated) of: {'; '.join(VARIANTS)}")
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--work", default="runs/acceptance-vllm")
    ap.add_argument("--goldens", default="goldens")
    ap.add_argument("--limit", type=int, help="dev: N-sample goldens (needs --goldens elsewhere)")
    ap.add_argument("--enforce-eager", action="store_true", help="every server with --enforce-eager (no torch.compile)")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight while recording goldens (default 4)")
    ap.add_argument("--gate-limit", type=int, help="gate each row on the golden's first N samples per suite (gate --limit)")
    ap.add_argument("--no-probes", action="store_true", help="gate each row without the golden's probes (gate --no-probes)")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args(argv)
    unknown = set(a.stages.split(",")) - set(STAGES)
    if unknown:
        ap.exit(2, f"acceptance_vllm: unknown stage(s) {', '.join(sorted(unknown))}; known: {', '.join(STAGES)}\n")
    if a.rows and set(a.rows.split(",")) - set(VARIANTS):
        ap.exit(2, f"acceptance_vllm: unknown row(s) {', '.join(sorted(set(a.rows.split(',')) - set(VARIANTS)))}\n")
    if a.limit and Path(a.goldens).resolve() == Path("goldens").resolve():
        ap.exit(2, "acceptance_vllm: --limit makes partial goldens: give --goldens DIR outside goldens/\n")
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind the `with` blocks: no orphaned vLLM
    b = Bench(a)
    b.work.mkdir(parents=True, exist_ok=True)
    if not a.table_only:
        stages = a.stages.split(",")
        if {"goldens", "reruns", "cross"} & set(stages):
            reference_stages(b, stages)
        if "variants" in stages:
            variant_stage(b)
    print(table(b.results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("acceptance_vllm"):  # the figures go to bench/results/acceptance_vllm.md
        main()
