"""How many samples does the teacher-forced test need to decide a KV q4_0 cache, against today's drift-and-parting
rule, and what does the pass cost? (#46)

    python bench/release/teacher_forced.py [--suite smoke] [--limits 5,10,20] [--max-tokens 32] [--out DIR]
    python bench/release/teacher_forced.py --testbed [--limits 3,5,10,20]   # the scripted server, each method

A 1-slot llama-server (SmolLM2) is the reference: one run is blessed and calibrated with two reruns that make the
teacher-forcing pass (`calibrate --base-url`, prefill on llama.cpp). Then a 1-slot server with a q4_0 KV cache and a
healthy 1-slot rerun are gated with `--limit N` for each N: per gate, the status, the teacher-forced verdict and p,
whether drift and parting agreed (`numerics_changed`, today's rule), and the pass's cost (requests, wall time) beside
the samples' own collection time. Prints a Markdown table; asserts nothing. A few minutes on 2 cores.

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


def reference(out: Path, run: list[str]) -> Path:
    golden = out / "golden"
    if golden.exists():
        return golden
    with engines.Server("smollm2", slots=1, ctx=4096, threads=1, log_path=out / "ref.log") as srv:
        if verifier_main(["run", *run, "--base-url", srv.url, "--model", srv.name, "--out", str(out / "ref")]) != 0:
            raise SystemExit("reference run failed")
        if verifier_main(["bless", str(out / "ref"), "--to", str(golden)]) != 0:
            raise SystemExit("bless failed")
        t0 = time.perf_counter()
        if verifier_main(["calibrate", str(golden), "--base-url", srv.url, "--model", srv.name, "-k", "2", "--quiet",
                          "--concurrency", "1", "--out-prefix", str(out / "cal")]) != 0:
            raise SystemExit("calibrate failed")
        print(f"calibrated in {time.perf_counter() - t0:.1f} s", flush=True)
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
    return {"variant": name, "n": limit, "exit": code, "status": doc["status"], "tf_verdict": t.get("verdict"),
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
    ap.add_argument("--limits", default="5,10,20")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("runs") / f"teacher-forced-{dt.datetime.now():%Y%m%d-%H%M%S}")
    ap.add_argument("--testbed", action="store_true", help="the scripted server, each method, instead of llama-server")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.testbed:
        table(testbed(a.out, [int(x) for x in a.limits.split(",")]))
        return
    run = ["--suite", a.suite, "--mode", "chat", "--max-tokens", str(a.max_tokens), "--logprobs", "5", "--quiet",
           "--concurrency", "1"] + (["--smoke"] if a.suite != "smoke" else [])
    golden = reference(a.out, run)
    rows = []
    for name, kw in (("rerun", {}), ("kv-q4_0", {"kv_cache": "q4_0"})):
        with engines.Server("smollm2", slots=1, ctx=4096, threads=1, log_path=a.out / f"{name}.log", **kw) as srv:
            for limit in (int(x) for x in a.limits.split(",")):
                rows.append(gate_row(name, srv, golden, a.out, limit))
                print(json.dumps(rows[-1]), flush=True)
    table(rows)


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
