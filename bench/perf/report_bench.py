"""How long does the HTML report take for a 10,000-sample run against a 10,000-sample golden?

Builds a synthetic run directory and golden in a temp dir (no server: the journal,
verdicts and golden are written directly in their on-disk shapes), computes the
comparison, then times `verifier.app.report_files.render_html` and prints the figure and the
HTML size.  The issue's budget: under 5 s.

    python bench/perf/report_bench.py [--samples 10000] [--logprobs 60] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from verifier.attribution import compare, signals  # noqa: E402
from verifier.golden import store as golden  # noqa: E402
from verifier import safewrite  # noqa: E402
from verifier.golden.model import GoldenHeader  # noqa: E402
from verifier.types import Observation  # noqa: E402
from verifier.execution import journal, scoring  # noqa: E402
from verifier.app import collect, report_files, scored  # noqa: E402
from verifier.types import Exchange, Finding, Verdict  # noqa: E402

SUITE, VERSION = "smoke", "1"  # a suite this harness knows, so every command accepts the synthetic dirs




def body(content: str, pt: int, ct: int, finish: str, logprobs: list[list] | None = None) -> str:
    lp = {"logprobs": {"content": [{"token": t, "logprob": x, "top_logprobs": []} for t, x in logprobs]}} if logprobs else {}
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish, **lp}],
                       "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}})


def build(root: Path, n: int, seed: int = 0, logprob_tokens: int = 0) -> tuple[Path, Path]:
    """With logprob_tokens, both sides carry logprobs on their first tokens (a third drift above the floor, flipped
    samples part early): the drift plot, the per-sample drift in comparison.json and the token diffs have work to do."""
    rnd = random.Random(seed)
    run, gdir = root / "run", root / "golden"
    run.mkdir(parents=True)
    gobs, exchanges, verdicts, samples = [], [], [], []
    filler = "The quick brown fox reasons step by step about the sum. " * 40  # ~2.2 KB of chain of thought
    for i in range(n):
        sid = f"syn-{i:05d}"
        target = rnd.randint(0, 999)
        ok_g = rnd.random() < 0.8
        ok_c = ok_g if rnd.random() < 0.9 else not ok_g  # ~10% flips, both ways
        pt = 40 + i % 60
        ans_g = target if ok_g else target + 1
        ans_c = target if ok_c else target + 2
        long = i % 500 == 0  # a few very long raw bodies: the report must truncate them
        content_c = (filler * (20 if long else 1)) + f" Answer: {ans_c}"
        finish = "length" if i % 97 == 0 else "stop"
        words = filler.split(" ")[:logprob_tokens]
        g_lp = [[(" " if k else "") + w, round(-0.01 * (k % 7), 6)] for k, w in enumerate(words)] or None
        c_lp = [[t, round(x - (0.03 if i % 3 == 0 else 0.0), 6)] for t, x in g_lp] if g_lp else None
        if c_lp and ok_c != ok_g:  # flipped samples part from the golden somewhere in the first tokens
            c_lp[(5 + i % 50) % len(c_lp)][0] = " X"
        req = {"model": "m", "messages": [{"role": "user", "content": f"What is {target - 1} + 1? Reply with just the number."}], "temperature": 0.0}
        samples.append({"suite": SUITE, "id": sid, "messages": req["messages"], "target": str(target), "tools": None,
                        "response_format": None, "meta": {}, "params": {}})
        lat = rnd.lognormvariate(6.0, 0.5)
        ex = Exchange(SUITE, sid, 0, "chat", req, 200, body(content_c, pt, 60, finish, c_lp), None, None, lat, 1)
        exchanges.append(ex.to_json())
        findings = (Finding("usage_missing", "no usage"),) if i % 250 == 0 else ()
        v = Verdict(SUITE, sid, 0, "chat", "content", float(ok_c), str(ans_c), "correct" if ok_c else "wrong_answer", findings,
                    {"accuracy": float(ok_c)}, {"prompt_tokens": pt, "completion_tokens": 60, "finish_reason": finish, "latency_ms": lat})
        verdicts.append(v.to_json())
        gobs.append({"suite": SUITE, "sample_id": sid, "epoch": 0, "mode": "chat", "outcome": "content", "score": float(ok_g),
                     "metrics": {"accuracy": float(ok_g)}, "answer": str(ans_g), "reason": "correct" if ok_g else "wrong_answer",
                     "findings": [], "prompt_tokens": pt, "completion_tokens": 58, "finish_reason": "stop", "tool_triggered": None,
                     "latency_ms": rnd.lognormvariate(5.8, 0.4), "content": (filler + f" Answer: {ans_g}")[:golden.MAX_CONTENT],
                     "logprobs": g_lp})
    suites = {SUITE: {"version": VERSION, "dataset_sha256": "0" * 64, "samples": n, "requests": n}}
    hdr = {"run_id": "bench-run", "harness": {"name": "verifier", "version": "bench", "git_commit": None},
           "endpoint": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": None, "header_names": []},
           "sampling": {"defaults": {}, "overrides": {}}, "extra_body": {}, "epochs": 1, "modes": ["chat"], "suites": suites,
           "started": "2025-01-01T00:00:00+00:00", "finished": "2025-01-01T00:20:00+00:00", "server_info": {"models": {"data": [{"id": "m"}]}}}
    safewrite.write_json(run / journal.HEADER, hdr)
    safewrite.write_jsonl(run / journal.SAMPLES, samples)
    safewrite.write_jsonl(run / journal.RESPONSES, exchanges)
    safewrite.write_jsonl(run / scoring.VERDICTS, verdicts)
    safewrite.write_json(run / scoring.SUMMARY, {"run_id": "bench-run", "suites": {}})
    margins = {f"{SUITE}/accuracy": 0.02, f"{SUITE}/drift": 0.0,
               **{f"{SUITE}/signal:{s}": 0.0 for s in signals.EVENTS}}
    gdir.mkdir()
    safewrite.write_jsonl(gdir / golden.OBS, gobs)
    safewrite.write_json(gdir / golden.GOLDEN, {"golden_format": golden.FORMAT, "name": "golden", "suites": suites, "epochs": 1,
                                               "modes": ["chat"], "selection": {}, "summary": {}, "margins": margins,
                                               "source": {"run_id": "bench-golden", "endpoint": hdr["endpoint"], "server_info": {}}})
    scored.ensure_scored(run)  # score the synthetic journal: observations.jsonl is what compare and the report read
    doc = compare.compare(GoldenHeader.from_json({"margins": margins}), [Observation.from_dict(o) for o in gobs],
                          golden.observations(run)).to_dict()
    doc["golden"] = {"name": "golden", "path": str(gdir)}
    doc["run"] = {"run_dir": str(run), "run_id": "bench-run"}
    safewrite.write_json(run / "comparison.json", doc)
    return run, gdir


TIMER = """
import sys, time
t0 = time.perf_counter()
from verifier.app import report_files
t1 = time.perf_counter()
html = report_files.render_html(sys.argv[1], sys.argv[2], None)
t2 = time.perf_counter()
open(sys.argv[3], "w", encoding="utf-8").write(html)
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {len(html.encode())}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--logprobs", type=int, default=0, metavar="TOKENS",
                    help="give both sides logprobs on their first TOKENS tokens (drift plot, token diffs); default none")
    ap.add_argument("--keep", help="write the synthetic dirs and report.html here instead of a temp dir")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        root = Path(a.keep) if a.keep else Path(td)
        t0 = time.perf_counter()
        run, gdir = build(root, a.samples, logprob_tokens=a.logprobs)
        t1 = time.perf_counter()
        out = root / "report.html"
        # A fresh process, as `verifier report` would be: no warm caches, no garbage from building the data.
        r = subprocess.run([sys.executable, "-c", TIMER, str(run), str(gdir), str(out)], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parents[2], check=True)
        imp, cold, size = r.stdout.split()
        t2 = time.perf_counter()
        report_files.render_html(run, gdir, None)
        t3 = time.perf_counter()
        report_files.render_html(run, gdir, None)
        t4 = time.perf_counter()
        print(f"samples: {a.samples}, logprobs on {a.logprobs} tokens  (synthetic run + golden + comparison built in {t1 - t0:.1f} s)")
        print(f"render_html, fresh process: {float(cold):.2f} s  (+ {float(imp):.2f} s importing verifier.report)  budget 5 s")
        print(f"render_html, in-process: {t3 - t2:.2f} s first call, {t4 - t3:.2f} s second call")
        print(f"html size: {int(size) / 1e6:.2f} MB  ({out if a.keep else 'temp dir'})")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("report_bench"):  # the figures go to bench/results/report_bench.md
        main()
