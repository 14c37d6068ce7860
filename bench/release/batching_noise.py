"""Does batching on llama-server ever raise a false alarm? A lossless variant must never be blamed on the frontend,
on the numerics, or on engine state.

    python bench/release/batching_noise.py [--limit 16] [--gates 6] [--slots 4] [--logprobs 5] [--out DIR] [--reuse]

A 1-slot reference runs gsm8k (--smoke, chain of thought cut at 96 tokens, chat and chat-stream, top logprobs, the
parameter-contract probes with the engine-state and cached-token probes) once, is blessed, and is calibrated with two
reruns on the same server that make the teacher-forcing pass (`calibrate --base-url -k 2`: prefill on llama.cpp),
so the golden holds the teacher-forced margin beside the others. Then a server with --slots N, driven at
concurrency N (greedy outputs part with batch shape; the forced prefills share batches too), is gated `--gates`
times against it. Per gate it prints the exit code, the frontend and numerics verdicts, the teacher-forced verdict
and figures (method, KL mean/p99, top-1 agreement, the margin, p), the engine-state evidence (`repeats_disagree`,
the `state_repeat_after_shared_prefix` probe), the usage-accounting evidence, and any frontend or numerics evidence
that did not pass. Then every ordered pair of the runs (references and batched runs alike, one taken as the
golden) and the frontend signals that fired on each: with batching on both sides, the noise a frontend signal must
stand. Asserts nothing; any failure here is a false alarm, since nothing but batch shape differs. Drift and parting
that fired where the teacher-forced distance passed are printed as `outweighed` (corroboration that did not hold).
--reuse prints the same over the runs already in --out; with --recompare it first compares each gate's run again with
this checkout (`verifier compare --force`), so a change of the decision is measured on the same runs. Tens of minutes
on 2 cores.
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

RUN = ["--suite", "gsm8k", "--smoke", "--mode", "chat,chat-stream", "--max-tokens", "96", "--quiet"]
ENGINE_STATE = "engine state"
USAGE = "response formatting & usage"


def reference(out: Path, limit: int, logprobs: int) -> Path:
    """ref0 on a 1-slot server, blessed, then calibrated with two reruns on that server that make the forced pass."""
    golden = out / "golden"
    if golden.exists():
        return golden
    with engines.Server("smollm2", slots=1, ctx=2048, threads=1, log_path=out / "ref.log") as srv:
        code = verifier_main(["run", *RUN, "--logprobs", str(logprobs), "--limit", str(limit), "--probes",
                              "--base-url", srv.url, "--model", srv.name, "--out", str(out / "ref0"), "--concurrency", "1"])
        if code != 0:
            raise SystemExit(f"reference run exited {code}")
        if verifier_main(["bless", str(out / "ref0"), "--to", str(golden)]) != 0:
            raise SystemExit("bless failed")
        if verifier_main(["calibrate", str(golden), "--base-url", srv.url, "--model", srv.name, "-k", "2", "--quiet",
                          "--concurrency", "1", "--out-prefix", str(out / "ref")]) != 0:
            raise SystemExit("calibrate failed")
    margins = json.loads((golden / "golden.json").read_text())["margins"]
    for key, m in sorted(margins.items()):
        if "teacher_forced" in key:
            print(f"margin {key}: {m['value']} ({len(m.get('reference_per_sample') or [])} per-sample values, "
                  f"runs {m.get('teacher_forced_runs')})", flush=True)
    return golden


def gate_lines(run: Path, code: int | None = None) -> str:
    """What one gate gave: exit, verdicts, the teacher-forced block, engine-state and usage evidence, and every
    evidence that did not pass (a false alarm here, since only batch shape differs)."""
    doc = json.loads((run / "comparison.json").read_text())
    forced = json.loads((run / "run.json").read_text()).get("teacher_forcing") or {}
    exit_code = code if code is not None else doc.get("exit_code")
    lines = [f"{run.name}: exit {exit_code}, {doc['status']}, frontend {doc['frontend']['verdict']}, "
             f"numerics {doc['quantization']['verdict']}"]
    for suite, block in sorted(doc["suites"].items()):
        t = block.get("teacher_forced")
        if not t:
            lines.append(f"  {suite}: teacher-forced: no pass ({forced.get('state')}: {forced.get('reason')})")
            continue
        lines.append(f"  {suite}: teacher-forced {t.get('state')} by {t.get('method')}: verdict {t.get('verdict')}, "
                     f"kl_mean {t.get('kl_mean')}, kl_p99 {t.get('kl_p99')}, top1 {t.get('top1_agreement')} over "
                     f"{t.get('positions')} positions of {t.get('samples')} samples; margin {t.get('margin')}, reruns' "
                     f"mean {t.get('reference_kl_mean')}, p {t.get('p_value')}; pass {forced.get('requests')} requests "
                     f"in {forced.get('wall_s')} s")
    evidence = [*doc["frontend"]["evidence"], *doc["quantization"]["evidence"]]
    declared = signals.by_name()  # a signal's evidence names no component: its declaration does (repeats_disagree)
    for side, component in (("engine state", ENGINE_STATE), ("usage", USAGE)):
        mine = [e for e in evidence if (e.get("component") or getattr(declared.get(e["signal"]), "component", None)) == component]
        lines.append(f"  {side}: " + ("; ".join(f"{e['signal']} {e['verdict']}" + (f" ({e['summary'].split(': ', 1)[1].split(' (')[0]})"
                                                                                    if e["signal"] in declared else "")
                                                for e in mine) or "no evidence"))
    lines += [f"  not pass: {e['signal']} ({e['suite']}): {e['verdict']}: {e.get('summary')}"
              for e in evidence if e["verdict"] != "pass"]
    lines += [f"  outweighed: {e['signal']} ({e['suite']}): {e.get('summary')}" for e in evidence if e.get("qualifier") == "outweighed"]
    return "\n".join(lines)


def gates(out: Path, golden: Path, n: int, slots: int) -> list[str]:
    names = []
    with engines.Server("smollm2", slots=slots, ctx=2048 * slots, threads=1, log_path=out / "batched.log") as srv:
        for k in range(n):
            run = out / f"batched{k}"
            code = verifier_main(["gate", "--golden", str(golden), "--base-url", srv.url, "--model", srv.name,
                                  "--out", str(run), "--quiet", "--concurrency", str(slots)])
            print(gate_lines(run, code), flush=True)
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
    ap.add_argument("--logprobs", type=int, default=5, help="top logprobs per token in the reference (the KL's support)")
    ap.add_argument("--out", help="directory for the runs (default runs/bench-batching-<stamp>)")
    ap.add_argument("--reuse", action="store_true", help="only the pairwise table, over the runs already in --out")
    ap.add_argument("--recompare", action="store_true", help="with --reuse: compare each gate's run again with this checkout first")
    a = ap.parse_args()
    out = Path(a.out or f"runs/bench-batching-{dt.datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    if a.reuse:
        names = sorted(p.name for p in out.iterdir() if (p / "run.json").exists() and p.name != "golden")
        for name in names:
            if a.recompare and (out / name / "comparison.json").exists():  # a gate's run (a rerun has none)
                code = verifier_main(["compare", str(out / name), "--golden", str(out / "golden"), "--force"])
                print(gate_lines(out / name, code), flush=True)
            elif (out / name / "comparison.json").exists():
                print(gate_lines(out / name), flush=True)
    else:
        golden = reference(out, a.limit, a.logprobs)
        names = ["ref0", "ref-1", "ref-2", *gates(out, golden, a.gates, a.slots)]
    print(f"\nevery ordered pair of {len(names)} runs ({', '.join(names)}):")
    cross(out, names)
    print(f"\nruns and server logs in {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record
    from record import recorded  # noqa: E402

    with recorded("batching_noise"):  # the figures go to bench/results/batching_noise.md
        main()
