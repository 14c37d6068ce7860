"""What "parse once" (issue 23) saves: the offline half of a gate on a big synthetic journal, with observations.jsonl
(scoring parsed each exchange once) and without it (a run scored before the file existed, or whose file was edited:
compare and the report score the run again, rebuilding the file; there is no other way to parse the journal).

    python bench/perf/parse_once.py [--samples 5000] [--logprobs 200] [--base DIR]

Builds the synthetic run of bench/perf/report_bench.py (chat records with ~2.2 KB of text and logprobs on their first
TOKENS tokens, 10% flips against a synthetic golden), scores it with `verifier score`, then times, in this process,
what a gate does after scoring: compare_run (which reads the run's observations) and the report (render_html), and
counts the calls to parse_exchange. `--base DIR` also times `verifier score` of a checkout without the file (e.g.
`git archive main | tar -x -C DIR`), since scoring now writes one more file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "perf"))

import report_bench  # noqa: E402
from verifier.app import report_files  # noqa: E402
from verifier.app.collect import score  # noqa: E402
from verifier.app.gate import compare_run  # noqa: E402
from verifier.app.spec import CompareSpec  # noqa: E402
from verifier.judge import parse  # noqa: E402
from verifier.execution import observations as observe  # noqa: E402

PARSERS = ["verifier.judge.parse", "verifier.execution.scoring", "verifier.execution.observations"]
CALLS = [0]
REAL = parse.parse_exchange


def counting(ex):  # type: ignore[no-untyped-def]
    CALLS[0] += 1
    return REAL(ex)


for name in PARSERS:
    setattr(importlib.import_module(name), "parse_exchange", counting)


def timed(label: str, fn) -> float:  # type: ignore[no-untyped-def]
    CALLS[0] = 0
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"  {label:<48} {dt:7.2f} s   parse_exchange calls: {CALLS[0]}")
    return dt


def gate_offline(run: Path, gdir: Path) -> None:
    doc = compare_run(run, CompareSpec(str(gdir), 0.02, write=False))
    report_files.render_html(run, gdir, doc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--logprobs", type=int, default=200)
    ap.add_argument("--base", help="a checkout without observations.jsonl: also time its `verifier score`")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        run, gdir = report_bench.build(Path(td), a.samples, logprob_tokens=a.logprobs)
        mb = (run / "responses.jsonl").stat().st_size / 2**20
        print(f"journal: {a.samples} records, {mb:.0f} MB, logprobs on {a.logprobs} tokens")
        if a.base:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "verifier", "score", str(run)], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(Path(a.base).resolve())}, cwd=a.base)
            print(f"  {'verifier score, base checkout (subprocess)':<48} {time.perf_counter() - t0:7.2f} s")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "verifier", "score", str(run)], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
            print(f"  {'verifier score, this checkout (subprocess)':<48} {time.perf_counter() - t0:7.2f} s")
        timed("score (writes observations.jsonl)", lambda: score(run))
        kb = (run / observe.OBSERVATIONS).stat().st_size / 2**20
        print(f"  observations.jsonl: {kb:.1f} MB")
        fresh = timed("compare + report, observations.jsonl fresh", lambda: gate_offline(run, gdir))
        (run / observe.OBSERVATIONS).unlink()
        old = timed("compare + report, without it (scored again)", lambda: gate_offline(run, gdir))
        print(f"  saved per gate after scoring: {old - fresh:.2f} s ({(old - fresh) / old:.0%})")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("parse_once"):  # the figures go to bench/results/parse_once.md
        main()
