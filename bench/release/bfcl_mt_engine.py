"""bfcl-multi-turn on the real engine: Qwen2.5-Coder-0.5B on llama-server behind the turn-opening tool-call prefill,
or on vLLM (`--engine vllm`) behind the turn-opening tool_choice "required".

    python bench/release/bfcl_mt_engine.py --data BFCL_DIR [--stages measure,golden,rerun,faults] [--limit 20]
                                   [--work runs/bfcl-mt] [--goldens verifier/goldens] [--modes chat] [--engine vllm]

Stages (each after the ones before it, which it reads from --work / --goldens):
    measure  one entry, one run: time per request and per entry, prompt tokens, calls parsed (sizes the rest)
    golden   goldens/qwen0.5b-bfcl-mt: --limit multi_turn_base entries, 3 runs (the first blessed, two calibrate)
    rerun    the same engine gated against that golden (the false-alarm check)
    faults   every multi-turn history fault (verifier/testbed/history_faults.py) in a proxy in front of it
    surfaces the same conversations on the other surfaces (--surface-modes, default Responses and Messages, streamed
             and not) for --surface-limit entries: per mode, entry and turn accuracy, requests, parsed calls, infra

Why a prefill: on its own the 0.5B model writes calls as ```json text, which llama-server does not parse, so no tool
would ever run (docs/engines.md). verifier/testbed/engine_tools.TURN_CALL_PREFILL opens a Hermes `<tool_call>` as
an assistant prefill on the first request of every user turn; llama-server parses prefill + continuation into
`tool_calls`; after the tool results the model answers freely, so a turn can end. The prefill proxy sits in front
of the engine for the golden and every candidate alike; a fault proxy sits behind it, between the test bed and the engine.

On vLLM a prefill is not parsed (its Hermes parser reads only generated text), so TURN_CALL_REQUIRED forces a call
by grammar on the same first request of each user turn instead, and leaves the follow-ups on "auto".

Run it under the engine lock (one engine at a time on the machine). Appends one line per gate to
<work>/results.jsonl (acceptance_rows' format) and writes <work>/figures.json (entry and turn accuracy, time per
entry and per request, from the golden's runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))  # acceptance_rows, when run as a script

from acceptance_rows import Row, gate, verifier  # noqa: E402

from verifier.execution import journal  # noqa: E402
from verifier.types import Exchange, Parsed  # noqa: E402
from verifier.judge.parse import MalformedBody, parse_exchange  # noqa: E402
from verifier.testbed.engine_tools import TURN_CALL_PREFILL, TURN_CALL_REQUIRED  # noqa: E402
from verifier.testbed.engines import Server  # noqa: E402
from verifier.testbed.history_faults import HISTORY_FAULTS  # noqa: E402
from verifier.testbed.proxy import Proxy  # noqa: E402
from verifier.testbed.vllm_engine import VllmServer  # noqa: E402

MODEL, SUITE = "qwen0.5b", "bfcl-multi-turn"
GOLDENS = {"llama": "qwen0.5b-bfcl-mt", "vllm": "qwen0.5b-vllm-bfcl-mt"}
ADAPTERS = {"llama": TURN_CALL_PREFILL, "vllm": TURN_CALL_REQUIRED}
"""The test bed's proxy form of each engine's turn rule: the surfaces stage only (it translates Responses and Messages
requests; --serving-adapter rewrites chat-completions requests only)."""
SERVING_ADAPTERS = {"llama": "turn-call-prefill", "vllm": "turn-call-required"}
"""The same rules as serving adapters (--serving-adapter): applied by the client and recorded in the golden."""
STAGES = ("measure", "golden", "rerun", "faults", "surfaces")
CATEGORY_FILE = "BFCL_v4_multi_turn_base.json"


def parsed_or_none(ex: Exchange) -> Parsed | None:
    """The parsed answer of a journaled exchange; None for an error, a non-200 or a malformed body."""
    try:
        return parse_exchange(ex) if ex.error is None and ex.status == 200 else None
    except MalformedBody:
        return None


def call_count(p: Parsed | None) -> int:
    return len(p.tool_calls) if p is not None and isinstance(p.tool_calls, list) else 0


def run_figures(run: Path) -> dict:
    """Entry and turn accuracy, requests, seconds per request, prompt tokens and parsed calls, from a run directory."""
    summary = json.loads((run / "summary.json").read_text())["suites"][SUITE]
    exs = list(journal.read_exchanges(run).values())
    parsed = [parsed_or_none(ex) for ex in exs]
    prompt = [p.prompt_tokens for p in parsed if p is not None and p.prompt_tokens]
    metrics = {k: v.get("value") for k, v in (summary.get("metrics") or {}).items() if isinstance(v, dict)}
    return {"run": run.name, "entries": len({ex.sample_id.split("/t")[0] for ex in exs}), "requests": len(exs),
            "requests_with_tool_calls": sum(1 for p in parsed if p is not None and p.tool_calls),
            "tool_calls": sum(map(call_count, parsed)),
            "infra_errors": sum(1 for ex in exs if ex.error is not None),
            "seconds_per_request": round(sum(ex.latency_ms for ex in exs) / 1000 / len(exs), 2) if exs else None,
            "prompt_tokens_first": min(prompt) if prompt else None, "prompt_tokens_max": max(prompt) if prompt else None,
            "entry_accuracy": metrics.get("entry_accuracy"), "turn_accuracy": metrics.get("turn_accuracy")}


def per_mode(run: Path) -> dict[str, dict]:
    """Per wire mode of a run: turns, entry and turn accuracy, requests, parsed tool calls, infra errors."""
    out: dict[str, dict] = {}
    for v in map(json.loads, (run / "verdicts.jsonl").read_text().splitlines()):
        m = out.setdefault(v["mode"], {"turns": 0, "turns_correct": 0, "entries": 0, "entries_correct": 0, "infra": 0,
                                       "requests": 0, "tool_calls": 0})
        m["turns"] += 1
        m["turns_correct"] += v.get("reason") == "correct"
        m["infra"] += v["outcome"] == "infra"
        if "entry_accuracy" in (v.get("metrics") or {}):
            m["entries"] += 1
            m["entries_correct"] += v["metrics"]["entry_accuracy"] == 1.0
    for ex in journal.read_exchanges(run).values():
        m = out[ex.mode]
        m["requests"] += 1
        m["tool_calls"] += call_count(parsed_or_none(ex))
    return out


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a, self.work, self.goldens = a, Path(a.work), Path(a.goldens)
        self.work.mkdir(parents=True, exist_ok=True)
        self.results = self.work / "results.jsonl"
        self.data = str(Path(a.data) / CATEGORY_FILE)
        self.model = MODEL  # the name the server lists (its alias), set once it runs

    def server(self) -> Server | VllmServer:
        # The 32 function docs alone are ~4.4K prompt tokens, and a conversation grows: 16K of context either way.
        if self.a.engine == "vllm":  # float32 and eager as the shipped vLLM goldens (docs/engines.md, "vLLM"); 2 GiB of KV cache
            return VllmServer(MODEL, max_model_len=16384, kv_cache_space_gib=2, enforce_eager=True,
                              log_path=self.work / "vllm.log")
        # 2 slots of 8192 tokens
        return Server(MODEL, slots=2, ctx=16384, threads=self.a.threads, log_path=self.work / "llama-server.log")

    def run(self, url: str, out: Path, limit: int, concurrency: int, modes: str | None = None, suite: str = SUITE) -> float:
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.time()
        rc = verifier("run", "--suite", suite, "--data", self.data, "--base-url", url, "--model", self.model,
                      "--mode", modes or self.a.modes, "--limit", str(limit), "--concurrency", str(concurrency),
                      "--out", str(out), "--quiet", *self.adapter(modes or self.a.modes))
        assert rc == 0, f"run {out} exited {rc}"
        return time.time() - t0

    def adapter(self, modes: str) -> tuple[str, ...]:
        """--serving-adapter for chat-completions runs (the surfaces stage goes through the proxy's turn rule)."""
        on_chat = all(m.startswith("chat") for m in modes.split(","))
        return ("--serving-adapter", SERVING_ADAPTERS[self.a.engine]) if on_chat else ()

    def measure(self, url: str) -> None:
        out = self.work / "measure"
        secs = self.run(url, out, 1, 1)
        fig = {**run_figures(out), "wall_seconds": round(secs, 1)}
        (self.work / "measure.json").write_text(json.dumps(fig, indent=1) + "\n")
        print(json.dumps(fig, indent=1))

    def golden(self, url: str) -> None:
        runs, figs = [], []
        for i in range(self.a.runs):
            out = self.work / f"golden-{i}"
            secs = self.run(url, out, self.a.limit, self.a.concurrency)
            figs.append({**run_figures(out), "wall_seconds": round(secs, 1),
                         "seconds_per_entry": round(secs / self.a.limit, 1)})
            runs.append(out)
            print(json.dumps(figs[-1]), flush=True)
        g = self.goldens / GOLDENS[self.a.engine]
        shutil.rmtree(g, ignore_errors=True)
        assert verifier("bless", str(runs[0]), "--to", str(g)) == 0
        if runs[1:]:
            assert verifier("calibrate", str(g), "--runs", *map(str, runs[1:])) == 0
        (self.work / "figures.json").write_text(json.dumps({"golden_runs": figs}, indent=1) + "\n")

    def surfaces(self, url: str) -> None:
        out = self.work / "surfaces"
        secs = self.run(url, out, self.a.surface_limit, self.a.concurrency, modes=self.a.surface_modes)
        fig = {"wall_seconds": round(secs, 1), "entries": self.a.surface_limit, "modes": per_mode(out)}
        if "responses" in self.a.surface_modes.split(","):  # Responses follow-ups chained by previous_response_id
            chained = self.work / "surfaces-chained"
            secs = self.run(url, chained, self.a.surface_limit, self.a.concurrency, modes="responses", suite=f"{SUITE}-chained")
            fig["chained"] = {"wall_seconds": round(secs, 1), "modes": per_mode(chained)}
        (self.work / "surfaces.json").write_text(json.dumps(fig, indent=1) + "\n")
        print(json.dumps(fig, indent=1), flush=True)

    def gate(self, label: str, url: str, proxy: Proxy | None = None, sequential: bool = False) -> dict:
        # A fault gate may stop at the first look that decides it (--sequential): the rerun always runs every entry,
        # since a pass is only decided by all of them.
        row = Row(label, SUITE, str(self.goldens / GOLDENS[self.a.engine]), self.model,
                  f"bfcl-multi-turn ({SERVING_ADAPTERS[self.a.engine]})",
                  gate_args=("--serving-adapter", SERVING_ADAPTERS[self.a.engine], *(("--sequential",) if sequential else ())))
        rec = gate(self.work, row, url, self.results, self.a.concurrency, proxy)
        print(json.dumps(rec), flush=True)
        return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="BFCL v4 data dir (holds BFCL_v4_multi_turn_base.json, possible_answer/...)")
    p.add_argument("--stages", default=",".join(STAGES))
    p.add_argument("--limit", type=int, default=20, help="entries in the golden (default 20)")
    p.add_argument("--runs", type=int, default=3, help="golden runs: the first blessed, the rest calibrate (default 3)")
    p.add_argument("--modes", default="chat", help="wire modes (default chat)")
    p.add_argument("--faults", default="", help="comma-separated history faults (default: all)")
    p.add_argument("--surface-modes", default="responses,responses-stream,messages,messages-stream")
    p.add_argument("--surface-limit", type=int, default=2, help="entries for the surfaces stage (default 2)")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--sequential", action="store_true", help="fault gates stop at the first look that decides them")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--engine", choices=sorted(GOLDENS), default="llama", help="llama (default) or vllm (needs $VERIFIER_VLLM_PYTHON)")
    p.add_argument("--work", default="runs/bfcl-mt")
    p.add_argument("--goldens", default="verifier/goldens")
    a = p.parse_args(argv)
    stages = a.stages.split(",")
    bad = [s for s in stages if s not in STAGES]
    if bad:
        print(f"unknown stage {bad[0]!r}; known: {', '.join(STAGES)}", file=sys.stderr)
        return 2
    b = Bench(a)
    with b.server() as srv, Proxy(srv.url, [(ADAPTERS[a.engine], 1.0)]) as pre:
        b.model = srv.name
        # The turn rule is the serving adapter (--serving-adapter, recorded in the golden) on chat runs; the proxy
        # (`pre`) only for the surfaces stage, whose Responses and Messages requests it translates.
        if "measure" in stages:
            b.measure(srv.url)
        if "golden" in stages:
            b.golden(srv.url)
        if "rerun" in stages:
            b.gate("same engine rerun", srv.url)
        if "faults" in stages:
            # The fault sits between the turn rule and the engine, where a serving frontend's bug would be: the turn
            # rule (the client's serving adapter) reads the client's request (a tool result is still a tool result
            # there), not the faulted one. In the other order tool_result_wrong_role's user-role results made every
            # follow-up "required", and each turn called until the step bound.
            for name in a.faults.split(",") if a.faults else HISTORY_FAULTS:
                with Proxy(srv.url, [name], seed=0) as px:
                    b.gate(f"proxy {name.replace('_', ' ')}", px.url, proxy=px, sequential=a.sequential)
        if "surfaces" in stages:
            b.surfaces(pre.url)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("bfcl_mt_engine"):  # the figures go to bench/results/bfcl_mt_engine.md
        sys.exit(main())
