"""How many samples does the teacher-forced test need to decide a KV q4_0 cache, against today's drift-and-parting
rule, and what does the pass cost? (#46)

    python bench/release/teacher_forced.py [--model qwen0.5b] [--variants rerun,kv-q4_0,chatml,Q2_K]
                                           [--limits 2,3,5,8] [--max-tokens 32] [--threads 1] [--out DIR]
    python bench/release/teacher_forced.py --testbed [--limits 3,5,10,20]   # the scripted server, each method

A 1-slot llama-server of the packaged model (default Qwen2.5-Coder-0.5B Q4_K_M) is the reference: one run of the
suite's first max(limits) samples is blessed and calibrated with two reruns that make the teacher-forcing pass
(`calibrate --base-url`, prefill on llama.cpp). Then each variant, one 1-slot server at a time, is gated with
`--limit N` for each N: rerun (a fresh server of the reference: must pass), kv-q4_0 (`--kv-cache q4_0`: numerics),
chatml (llama.cpp's built-in ChatML template instead of Qwen's: frontend, numerics not fail), Q2_K (requantized with
llama-quantize: numerics). Per gate: the status and exit, the frontend and numerics verdicts, the teacher-forced
verdict, p and figures, whether drift and parting agreed (`numerics_changed`, today's rule), and the pass's cost
(requests, wall time) beside the gate's wall time. Then, per variant, the smallest N at which each rule decided.
Prints Markdown; asserts nothing. About 10 minutes on 2 cores with the defaults.

With --testbed the same is measured on the scripted server (testbed/teacher.py), once per method (prompt_logprobs,
echo, prefill), the numerics knob (1.0) standing in for the KV cache: seconds, no engine needed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from verifier.cli import main as _verifier_main  # noqa: E402


def verifier_main(argv: list[str]) -> int:
    """The command, its own printing kept out of the figures (the rows below say what each gate gave)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return _verifier_main(argv)

from verifier.testbed import engines  # noqa: E402


VARIANTS: dict[str, dict[str, str]] = {"rerun": {}, "kv-q4_0": {"kv_cache": "q4_0"}, "chatml": {"template": "chatml"},
                                       "Q2_K": {"quant": "Q2_K"}}
"""What each variant changes on the reference's server (engines.Server keywords)."""


def reference(out: Path, run: list[str], model: str, threads: int) -> Path:
    golden = out / "golden"
    if golden.exists():
        return golden
    with engines.Server(model, slots=1, ctx=4096, threads=threads, log_path=out / "ref.log") as srv:
        t0 = time.perf_counter()
        if verifier_main(["run", *run, "--base-url", srv.url, "--model", srv.name, "--out", str(out / "ref")]) != 0:
            raise SystemExit("reference run failed")
        print(f"reference run in {time.perf_counter() - t0:.1f} s", flush=True)
        if verifier_main(["bless", str(out / "ref"), "--to", str(golden)]) != 0:
            raise SystemExit("bless failed")
        t0 = time.perf_counter()
        if verifier_main(["calibrate", str(golden), "--base-url", srv.url, "--model", srv.name, "-k", "2", "--quiet",
                          "--concurrency", "1", "--out-prefix", str(out / "cal")]) != 0:
            raise SystemExit("calibrate failed")
        print(f"calibrated in {time.perf_counter() - t0:.1f} s", flush=True)
    margins = json.loads((golden / "golden.json").read_text())["margins"]
    for key, m in sorted(margins.items()):
        if "teacher_forced" in key:
            print(f"margin {key}: {m['value']} ({len(m.get('reference_per_sample') or [])} per-sample values, "
                  f"runs {m.get('teacher_forced_runs')})", flush=True)
    return golden


def gate_row(name: str, srv: engines.Server, golden: Path, out: Path, limit: int) -> dict[str, object]:
    run = out / f"{name}-{limit}"
    t0 = time.perf_counter()
    code = verifier_main(["gate", "--golden", str(golden), "--base-url", srv.url, "--model", srv.name, "--out", str(run),
                          "--quiet", "--concurrency", "1", "--limit", str(limit)])
    wall = time.perf_counter() - t0
    doc = json.loads((run / "comparison.json").read_text())
    hdr = json.loads((run / "run.json").read_text())
    forced = hdr.get("teacher_forcing") or {}
    suite = next(iter(doc["suites"].values()))
    t = suite.get("teacher_forced") or {}
    return {"variant": name, "n": limit, "exit": code, "status": doc["status"],
            "frontend": doc["frontend"]["verdict"], "numerics": doc["quantization"]["verdict"],
            "tf_state": t.get("state"), "tf_verdict": t.get("verdict"), "tf_samples": t.get("samples"),
            "tf_positions": t.get("positions"),
            "tf_p": t.get("p_value"), "kl_mean": t.get("kl_mean"), "kl_p99": t.get("kl_p99"), "top1": t.get("top1_agreement"),
            "drift_and_parting": bool(suite["drift"].get("numerics_changed")), "drift": suite["drift"].get("state"),
            "parting": (suite.get("divergence") or {}).get("verdict"), "method": forced.get("method"),
            "pass_requests": forced.get("requests"), "pass_s": forced.get("wall_s"), "gate_s": round(wall, 1)}


def testbed(out: Path, limits: list[int]) -> list[dict[str, object]]:
    import re

    from verifier.testbed.server import Reply, Script, TestServer, last_user_text
    from verifier.testbed.teacher import Teacher

    def answer(req: dict) -> Reply:
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
        return Reply(content=f"The answer is {int(m.group(1)) + int(m.group(2))}" if m else "I don't know")

    run = ["--suite", "smoke", "--mode", "chat", "--logprobs", "5", "--quiet", "--max-retries", "0"]
    rows = []
    for method in ("prompt_logprobs", "echo", "prefill"):
        base = out / method
        with TestServer(Script(answer, teacher=Teacher(methods=(method,)))) as srv:
            assert verifier_main(["run", *run, "--model", "m", "--base-url", srv.url, "--out", str(base / "ref")]) == 0
            assert verifier_main(["bless", str(base / "ref"), "--to", str(base / "golden")]) == 0
            assert verifier_main(["calibrate", str(base / "golden"), "--base-url", srv.url, "--model", "m", "-k", "2", "--quiet",
                                  "--out-prefix", str(base / "cal")]) == 0
        for name, numerics in (("rerun", 0.0), ("numerics-1.0", 1.0)):
            with TestServer(Script(answer, teacher=Teacher(methods=(method,), numerics=numerics))) as srv:
                srv.name = "m"  # type: ignore[attr-defined]
                for limit in limits:
                    rows.append(gate_row(f"{method}/{name}", srv, base / "golden", base, limit))  # type: ignore[arg-type]
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="smoke")
    ap.add_argument("--limits", default="2,3,5,8")
    ap.add_argument("--model", default="qwen0.5b", choices=sorted(engines.MODELS))
    ap.add_argument("--variants", default="rerun,kv-q4_0,chatml", help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--threads", type=int, default=1, help="llama-server threads (1: the machine is shared)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("runs") / f"teacher-forced-{dt.datetime.now():%Y%m%d-%H%M%S}")
    ap.add_argument("--testbed", action="store_true", help="the scripted server, each method, instead of llama-server")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.testbed:
        table(testbed(a.out, [int(x) for x in a.limits.split(",")]))
        return
    limits = [int(x) for x in a.limits.split(",")]
    run = ["--suite", a.suite, "--mode", "chat", "--max-tokens", str(a.max_tokens), "--logprobs", "5", "--quiet",
           "--concurrency", "1", "--limit", str(max(limits))] + (["--smoke"] if a.suite != "smoke" else [])
    golden = reference(a.out, run, a.model, a.threads)
    rows = []
    for name in a.variants.split(","):
        with engines.Server(a.model, slots=1, ctx=4096, threads=a.threads, log_path=a.out / f"{name}.log",
                            **VARIANTS[name]) as srv:  # type: ignore[arg-type]
            for limit in limits:
                rows.append(gate_row(name, srv, golden, a.out, limit))
                print(json.dumps(rows[-1]), flush=True)
    table(rows)
    decided(rows)


def decided(rows: list[dict[str, object]]) -> None:
    """Per variant, the smallest N at which each rule called the numerics changed (or `-` if none did)."""
    print("\n| variant | teacher-forced test fails from N | drift-and-parting fires from N |\n|---|---|---|")
    for name in dict.fromkeys(str(r["variant"]) for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        tf = min((int(str(r["n"])) for r in mine if r["tf_verdict"] == "fail"), default=None)
        dp = min((int(str(r["n"])) for r in mine if r["drift_and_parting"]), default=None)
        print(f"| {name} | {tf if tf is not None else '-'} | {dp if dp is not None else '-'} |")


def table(rows: list[dict[str, object]]) -> None:
    cols = list(rows[0])
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record
    from record import recorded  # noqa: E402

    with recorded("teacher_forced"):  # the figures go to bench/results/teacher_forced.md
        main()
