"""Does batching on llama-server ever fail the frontend? A lossless variant must never be blamed on the frontend.

    python bench/release/batching_noise.py [--limit 16] [--gates 6] [--slots 4] [--out DIR] [--reuse]

A 1-slot reference runs gsm8k (--smoke, chain of thought cut at 96 tokens, chat and chat-stream, logprobs 1) three
times, is blessed and calibrated; then a server with --slots N, driven at concurrency N (greedy outputs part with
batch shape), is gated `--gates` times against it. It prints each gate's exit code and any frontend evidence that did
not pass, then every ordered pair of the runs (references and batched runs alike, one taken as the golden) and the
frontend signals that fired on each: with batching on both sides, the noise a frontend signal must stand. Asserts
nothing; a frontend event here is a false alarm, since nothing but batch shape differs. Several minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from verifier.attribution import compare, signals  # noqa: E402
from verifier.cli import main as verifier_main  # noqa: E402
from verifier.app.scored import observed as observations  # noqa: E402
from verifier.testbed import engines  # noqa: E402

RUN = ["--suite", "gsm8k", "--smoke", "--mode", "chat,chat-stream", "--max-tokens", "96", "--logprobs", "1", "--quiet"]


def reference(out: Path, limit: int) -> Path:
    golden = out / "golden"
    if golden.exists():
        return golden
    with engines.Server("smollm2", slots=1, ctx=2048, threads=1, log_path=out / "ref.log") as srv:
        for i in range(3):
            code = verifier_main(["run", *RUN, "--limit", str(limit), "--base-url", srv.url, "--model", "smollm2",
                                  "--out", str(out / f"ref{i}"), "--concurrency", "1"])
            if code != 0:
                raise SystemExit(f"reference run {i} exited {code}")
    if verifier_main(["bless", str(out / "ref0"), "--to", str(golden)]) != 0:
        raise SystemExit("bless failed")
    if verifier_main(["calibrate", str(golden), "--runs", str(out / "ref1"), str(out / "ref2")]) != 0:
        raise SystemExit("calibrate failed")
    return golden


def gates(out: Path, golden: Path, n: int, slots: int) -> list[str]:
    names = []
    with engines.Server("smollm2", slots=slots, ctx=2048 * slots, threads=1, log_path=out / "batched.log") as srv:
        for k in range(n):
            run = out / f"batched{k}"
            code = verifier_main(["gate", "--golden", str(golden), "--base-url", srv.url, "--model", srv.name,
                                  "--out", str(run), "--quiet", "--concurrency", str(slots)])
            doc = json.loads((run / "comparison.json").read_text())
            bad = [f"{e['signal']} {e['summary']}" for e in doc["frontend"]["evidence"] if e["verdict"] != "pass"]
            print(f"gate {k}: exit {code}, {doc['status']}, frontend {doc['frontend']['verdict']}"
                  + "".join(f"\n    {b}" for b in bad), flush=True)
            names.append(run.name)
    return names


def cross(out: Path, runs: list[str]) -> None:
    rows = {r: observations(out / r) for r in runs}
    frontend = set(signals.names("frontend"))
    fired: Counter[str] = Counter()
    pairs = samples = 0
    for a, b in itertools.permutations(runs, 2):
        suite = compare.paired_signals(rows[a], rows[b]).get("gsm8k")
        if suite is None:
            continue
        pairs += 1
        samples += suite.paired
        for name, ids in suite.events.items():
            if ids and name in frontend:
                fired[name] += len(ids)
                print(f"  {a} as golden, {b}: {name} on {', '.join(ids)}")
    print(f"\n{pairs} ordered pairs, {samples} paired samples: frontend events "
          + (", ".join(f"{k} {v}" for k, v in sorted(fired.items())) or "none"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=16, help="gsm8k smoke samples per run")
    ap.add_argument("--gates", type=int, default=6)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--out", help="directory for the runs (default runs/bench-batching-<stamp>)")
    ap.add_argument("--reuse", action="store_true", help="only the pairwise table, over the runs already in --out")
    a = ap.parse_args()
    out = Path(a.out or f"runs/bench-batching-{dt.datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    if a.reuse:
        names = sorted(p.name for p in out.iterdir() if (p / "run.json").exists() and p.name != "golden")
    else:
        golden = reference(out, a.limit)
        names = ["ref0", "ref1", "ref2", *gates(out, golden, a.gates, a.slots)]
    print(f"\nevery ordered pair of {len(names)} runs ({', '.join(names)}):")
    cross(out, names)
    print(f"\nruns and server logs in {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record
    from record import recorded  # noqa: E402

    with recorded("batching_noise"):  # the figures go to bench/results/batching_noise.md
        main()
