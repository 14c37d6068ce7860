"""Where the client's CPU goes per request: `verifier run` (scored as it goes) against bench/perf/lean_server.py.

    python bench/perf/profile_client.py [--runs gsm8k,bfcl,structured] [--latency 0.02] [--concurrency 32]
                                   [--limit 1319] [--out bench/results/profile_client.md] [--no-cprofile]

Each run is a `verifier run` in a fresh child process (this file with --child), against bench/perf/lean_server.py in
another process (a server outside the package: `fixed` answers for gsm8k, `tool` calls for bfcl, `json`
instances for structured; bfcl and structured with `--logprobs 5`, the server sending 5 alternatives per token):
- gsm8k: the full test split (1,319 rows, `--data GSM8K`), concurrency 32;
- bfcl, structured: `--limit N --sample-seed 1` of the shared data, `--logprobs 5`.
The child measures its own CPU (user + system of the whole process, every thread, from getrusage) at four marks:
process start, the first request (runner.execute entered), the last answer (execute returned) and the end; and
per-phase CPU with timers (time.thread_time: the calling thread's CPU) around the functions each phase runs,
exclusive of the phases nested in them. HTTP + event loop is the request phase's CPU that no timer claims.
A second child runs the same under cProfile for the top functions (cProfile slows Python code about 2x: its
figures are shares, the timers' are the milliseconds). A third run with `--limit 1` gives the start-up alone, so
the marginal CPU per request (full run - one-request run) / (N - 1) is printed beside the whole process's.

The machine's load (os.getloadavg) is printed with every figure: on a shared machine, CPU time per request is
the robust figure, wall time is not.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import functools
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

GSM8K = os.environ.get("VERIFIER_GSM8K") or os.path.join(os.environ.get("VERIFIER_SHARED_DATA", ""), "gsm8k", "test.jsonl")
SHARED = os.environ.get("VERIFIER_SHARED_DATA", "")
API_KEY = "lean-bench-key-0123456789"

RUNS: dict[str, dict[str, Any]] = {
    "gsm8k": {"reply": "fixed", "logprobs": 0, "args": ["--suite", "gsm8k", "--data", GSM8K]},
    "bfcl": {"reply": "tool", "logprobs": 5,
             "args": ["--suite", "bfcl", "--data", os.path.join(SHARED, "bfcl"), "--sample-seed", "1", "--logprobs", "5"]},
    "structured": {"reply": "json", "logprobs": 5,
                   "args": ["--suite", "structured", "--data", os.path.join(SHARED, "jsonschemabench"), "--sample-seed", "1",
                            "--logprobs", "5"]},
}

# Phase -> the functions it runs, as (module, attribute path). A name missing in the checkout measured is skipped,
# so the same table times the code before and after a change. Exclusive: a phase nested in another is its own.
PHASES: list[tuple[str, list[tuple[str, str]]]] = [
    ("journal encode + write", [("verifier.execution.journal", "Journal.append"), ("verifier.execution.journal", "Journal.append_line")]),
    ("journal read-back (live)", [("verifier.execution.live", "Follower._fill"), ("verifier.execution.journal", "decode_line"),
                                  ("verifier.types", "Exchange.from_json")]),
    ("parse", [("verifier.judge.parse", "parse_exchange")]),
    ("contract checks", [("verifier.judge.contract", "check"), ("verifier.judge.contract_surfaces", "error_findings")]),
    ("lm-eval filter pipeline", [("suites.lm_eval_adapter", "lm_eval_judge"), ("suites.lm_eval_adapter", "Judge.__call__"),
                                 ("suites.lm_eval_compiled", "CompiledTask.judge")]),
    ("scoring (suite + verdict)", [("verifier.execution.scoring", "judge")]),
    ("observations", [("verifier.execution.observations", "Collector.add")]),
    ("live scorer loop", [("verifier.execution.live", "Follower.step"), ("verifier.execution.scoring", "Scorer.add")]),
    ("aggregation + files", [("verifier.execution.scoring", "Scorer.result"), ("verifier.execution.scoring", "write_scores")]),
    ("request bodies (plan)", [("verifier.execution.runner", "plan")]),
    ("samples.jsonl", [("verifier.execution.journal", "write_samples")]),
]


class Timers:
    """Exclusive CPU per phase: a phase's time excludes the phases called inside it (one stack per thread)."""

    def __init__(self) -> None:
        import threading

        self.total: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        timers = self

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            stack = getattr(timers._local, "stack", None)
            if stack is None:
                stack = timers._local.stack = []
            t0 = time.thread_time()
            stack.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                dt_ = time.thread_time() - t0
                inner = stack.pop()
                timers.total[phase] = timers.total.get(phase, 0.0) + dt_ - inner
                timers.calls[phase] = timers.calls.get(phase, 0) + 1
                if stack:
                    stack[-1] += dt_

        return timed


def install(timers: Timers) -> None:
    import importlib
    import importlib.util

    for name in ("verifier.app.collect", "verifier.execution.live", "verifier.execution.scoring", "verifier.execution.runner", "suites",
                 "suites.gsm8k", "suites.bfcl", "suites.structured", "suites.lm_eval_adapter", "verifier.wire.endpoint"):
        importlib.import_module(name)
    if importlib.util.find_spec("suites.lm_eval_compiled") is not None:  # a checkout before it has none
        importlib.import_module("suites.lm_eval_compiled")
    for phase, targets in PHASES:
        for mod_name, attr in targets:
            mod = sys.modules.get(mod_name)
            owner: Any = mod
            parts = attr.split(".")
            for p in parts[:-1]:
                owner = getattr(owner, p, None)
            original = getattr(owner, parts[-1], None) if owner is not None else None
            if original is None:
                continue
            wrapped = timers.wrap(phase, original)
            setattr(owner, parts[-1], wrapped)
            if len(parts) == 1:  # `from module import fn` copies elsewhere
                for m in list(sys.modules.values()):
                    if m is not None and getattr(m, "__name__", "").startswith(("verifier", "suites")) and getattr(m, parts[-1], None) is original:
                        setattr(m, parts[-1], wrapped)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(a: argparse.Namespace) -> None:
    """One `verifier run` in this process, measured; the figures as JSON in a.result."""
    sys.path.insert(0, str(Path(a.root).resolve()))
    marks: dict[str, float] = {"start": cpu()}
    walls: dict[str, float] = {"start": time.perf_counter()}
    timers = Timers()
    from verifier.execution import runner

    install(timers)
    at: dict[str, dict[str, float]] = {}
    real_execute = runner.execute

    async def execute(*args: Any, **kw: Any) -> Any:
        marks["first request"], walls["first request"] = cpu(), time.perf_counter()
        at["first request"] = dict(timers.total)
        try:
            return await real_execute(*args, **kw)
        finally:
            marks["last answer"], walls["last answer"] = cpu(), time.perf_counter()
            at["last answer"] = dict(timers.total)

    runner.execute = execute
    from verifier.cli import main

    prof = cProfile.Profile() if a.cprofile else None
    if prof:
        prof.enable()
    rc = main(a.verifier_args)
    if prof:
        prof.disable()
    marks["end"], walls["end"] = cpu(), time.perf_counter()
    top = ""
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        top = buf.getvalue()
    Path(a.result).write_text(json.dumps({"rc": rc, "marks": marks, "walls": walls, "timers": timers.total,
                                          "calls": timers.calls, "at": at, "top": top}))


def run_child(root: Path, verifier_args: list[str], cprofile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "r.json"
        out = Path(d) / "run"
        cmd = [sys.executable, __file__, "--child", "--root", str(root), "--result", str(res),
               "--cprofile" if cprofile else "--no-cprofile", "--", "run", *verifier_args, "--out", str(out), "--quiet"]
        # A key, as every real endpoint (and bench/perf/vs_lmeval.py) has one: the journal writer then redacts each record.
        env = {**os.environ, "PYTHONPATH": str(root), "OPENAI_API_KEY": API_KEY}
        r = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
        if r.returncode != 0 or not res.exists():
            sys.exit(f"child failed ({r.returncode}): {r.stderr[-3000:]}")
        doc = json.loads(res.read_text())
        if doc.get("rc") not in (0, None):  # the run itself failed: its figures would time an error path
            sys.exit(f"verifier run failed ({doc['rc']}): {r.stderr[-3000:]}")
        doc["requests"] = sum(1 for line in (out / "responses.jsonl").read_bytes().splitlines() if line.strip())
        return doc


def figures(name: str, full: dict[str, Any], one: dict[str, Any], load: tuple[float, float]) -> list[str]:
    n = full["requests"]
    m, w = full["marks"], full["walls"]
    whole = m["end"] - m["start"]
    req = m["last answer"] - m["first request"]
    after = m["end"] - m["last answer"]
    marginal = (whole - (one["marks"]["end"] - one["marks"]["start"])) / max(1, n - 1)
    lines = [f"### {name}: {n} requests",
             "",
             f"- load average before / after: {load[0]:.2f} / {load[1]:.2f}",
             f"- wall: whole process {w['end'] - w['start']:.2f} s; start-up {w['first request'] - w['start']:.2f} s, "
             f"requests {w['last answer'] - w['first request']:.2f} s, after the last answer {w['end'] - w['last answer']:.2f} s",
             f"- client CPU (user+sys, every thread): whole process {whole:.2f} s = **{1000 * whole / n:.2f} ms/request**; "
             f"start-up {m['first request'] - m['start']:.2f} s; requests + live scoring {req:.2f} s and after the last answer "
             f"{after:.2f} s = **{1000 * (req + after) / n:.2f} ms/request**; marginal (whole - a 1-request run) "
             f"**{1000 * marginal:.2f} ms/request**",
             "",
             "| phase | CPU ms/request (during requests + after) | calls |",
             "|---|---:|---:|"]
    t0, t1, tend = full["at"].get("first request", {}), full["at"].get("last answer", {}), full["timers"]
    claimed = 0.0
    for phase, _ in PHASES:
        during = tend.get(phase, 0.0) - t0.get(phase, 0.0)
        if phase in tend and during > 0:
            claimed += t1.get(phase, 0.0) - t0.get(phase, 0.0)
            lines.append(f"| {phase} | {1000 * during / n:.3f} | {full['calls'].get(phase, 0)} |")
    lines.append(f"| HTTP + event loop + journal-free rest of the request phase (unclaimed) | {1000 * (req - claimed) / n:.3f} | |")
    startup = {p: t0.get(p, 0.0) for p, _ in PHASES if t0.get(p, 0.0) > 0.0005}
    if startup:
        lines += ["", "Start-up phases (before the first request): " +
                  ", ".join(f"{p} {1000 * v:.0f} ms" for p, v in startup.items())]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--root", default=str(ROOT), help="the verifier checkout measured (default: this one)")
    ap.add_argument("--cprofile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--runs", default="gsm8k,bfcl,structured")
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--limit", type=int, default=1319, help="bfcl and structured: samples (gsm8k: the whole file)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "profile_client.md"))
    ap.add_argument("verifier_args", nargs="*")
    a = ap.parse_args()
    if a.child:
        return child(a)
    # Here, not at the top: benchlib imports this checkout's verifier, which a child measuring `--root` must not have
    # loaded before it puts that checkout first (it then timed this checkout whatever `--root` said).
    from benchlib import free_port, machine, wait_http

    root = Path(a.root).resolve()
    lines = [f"# Client CPU per request, by phase ({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)", "",
             f"machine: {machine()}", f"checkout: {'this one' if root == ROOT else root.name}",
             f"command: python bench/perf/profile_client.py --runs {a.runs} --latency {a.latency} --concurrency {a.concurrency} "
             f"--limit {a.limit}", "",
             f"Server: bench/perf/lean_server.py, {a.latency * 1000:.0f} ms latency, its own process; client: `verifier run "
             f"... --concurrency {a.concurrency} --quiet` in a fresh process (live scoring on), OPENAI_API_KEY set (redaction on).", ""]
    for name in a.runs.split(","):
        cfg = RUNS[name]
        port = free_port()
        srv = subprocess.Popen([sys.executable, str(ROOT / "bench" / "perf" / "lean_server.py"), str(port), str(a.latency),
                                "--reply", cfg["reply"], "--logprobs", str(cfg["logprobs"])])
        try:
            url = f"http://127.0.0.1:{port}/v1"
            wait_http(url + "/models", srv)
            base = [*cfg["args"], "--base-url", url, "--model", "lean", "--concurrency", str(a.concurrency)]
            full_args = base + (["--limit", str(a.limit)] if name != "gsm8k" else [])
            run_child(root, base + ["--limit", "8"], False)  # warm the page cache and .pyc files
            load0 = os.getloadavg()[0]
            one = run_child(root, base + ["--limit", "1"], False)
            full = run_child(root, full_args, False)
            load1 = os.getloadavg()[0]
            label = " ".join([*cfg["args"], *full_args[len(base):]]).replace(SHARED, "$DATA")
            lines += figures(f"{name} (`verifier run {label} --concurrency {a.concurrency}`)", full, one, (load0, load1))
            if a.cprofile:
                prof = run_child(root, full_args, True)
                lines += ["", "<details><summary>cProfile, top 25 by own time (cProfile roughly doubles Python's time)</summary>",
                          "", "```", prof["top"].strip()[-6000:].replace(str(root), "<checkout>").replace(sys.prefix, "<python>"),
                          "```", "</details>", ""]
        finally:
            srv.terminate()
            srv.wait()
        print("\n".join(lines[-40:]), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
