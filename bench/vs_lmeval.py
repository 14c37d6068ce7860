"""verifier vs lm-eval, end to end, on the same full gsm8k against the same server.

    python bench/vs_lmeval.py --data PATH/TO/gsm8k/test.jsonl    (or VERIFIER_GSM8K=PATH)

One process tree: this script starts the test server (20 ms latency, a deterministic mix of right,
wrong and unformatted answers), then runs, one after the other, each as its own process:
- lm-eval's CLI, `local-chat-completions`, task gsm8k_cot_llama with --apply_chat_template
  --fewshot_as_multiturn, the data read from PATH (a task YAML that includes lm-eval's own), concurrency 32;
- `verifier run --suite gsm8k --data PATH --concurrency 32` (collect and score).
Prints both wall times, the ratio, and both scores, which must be identical (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import free_port, wait_http  # bench/ is on the path: run as a script

ROOT = Path(__file__).resolve().parent.parent
LATENCY_S = 0.02
CONCURRENCY = 32
PROBLEM = re.compile(r"Problem: (.*?)\nYour response", re.S)


def gold(answer: str) -> str:
    return answer.split("####")[-1].strip().replace(",", "")


def reply_for(i: int, g: str) -> str:
    """Right, right-but-unformatted, or wrong, by row: both lm-eval filters see every outcome."""
    if i % 3 == 0:
        return f"Let me think. {g} is it. The final answer is {g}"
    if i % 3 == 1:
        return f"The answer is {g}."
    return f"The final answer is {int(float(g)) + 1}" if re.fullmatch(r"-?\d+(\.\d+)?", g) else "I cannot tell."


def serve(port: int, data: str) -> None:
    """The server process: the project's test server app with a gsm8k responder."""
    sys.path.insert(0, str(ROOT))
    from aiohttp import web

    from verifier.testbed.server import Reply, Script, last_user_text, make_app

    rows = [json.loads(line) for line in Path(data).read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = {r["question"].strip(): reply_for(i, gold(r["answer"])) for i, r in enumerate(rows)}

    def responder(req):
        m = PROBLEM.search(last_user_text(req))
        return Reply(content=answers.get(m.group(1).strip(), "?") if m else "?", delay_s=LATENCY_S)

    script = Script(responder)
    script.requests, script.headers = _Discard(), _Discard()
    web.run_app(make_app(script), host="127.0.0.1", port=port, access_log=None, print=None)


class _Discard(list):
    def append(self, _):
        pass


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd[:4])} ...\n{r.stderr[-3000:]}")
    return wall, r


def run_lm_eval(url: str, data: str, work: Path, env: dict[str, str]) -> tuple[float, dict[str, float]]:
    import lm_eval

    yaml = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k-cot-llama.yaml"
    tasks = work / "tasks"
    tasks.mkdir()
    (tasks / "gsm8k_local.yaml").write_text(
        f"include: {yaml}\ntask: gsm8k_cot_llama_local\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {Path(data).resolve()}\n", encoding="utf-8")
    model_args = (f"base_url={url}/chat/completions,model=bench,num_concurrent={CONCURRENCY},tokenized_requests=False,"
                  "tokenizer_backend=None,max_retries=3,timeout=600")
    wall, _ = timed([sys.executable, "-m", "lm_eval", "run", "--model", "local-chat-completions", "--model_args", model_args,
                     "--tasks", "gsm8k_cot_llama_local", "--include_path", str(tasks), "--apply_chat_template",
                     "--fewshot_as_multiturn", "--output_path", str(work / "lm_eval_out")], env, work)
    (res,) = (work / "lm_eval_out").rglob("results_*.json")
    r = json.loads(res.read_text())["results"]["gsm8k_cot_llama_local"]
    return wall, {"strict_match": r["exact_match,strict-match"], "flexible_extract": r["exact_match,flexible-extract"]}


def run_verifier(url: str, data: str, work: Path, env: dict[str, str]) -> tuple[float, dict[str, float], str]:
    out = work / "verifier_run"
    wall, r = timed([sys.executable, "-m", "verifier", "run", "--suite", "gsm8k", "--data", data, "--base-url", url,
                     "--model", "bench", "--concurrency", str(CONCURRENCY), "--out", str(out), "--quiet"], env, ROOT)
    s = json.loads((out / "summary.json").read_text())["suites"]["gsm8k"]
    # The summary rounds to 6 places; the per-sample verdicts give the unrounded mean, as lm-eval computes it.
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    scored = [v["metrics"] for v in verdicts if v["outcome"] == "content"]
    means = {k: sum(m[k] for m in scored) / len(scored) for k in ("strict_match", "flexible_extract")}
    assert all(abs(means[k] - s["metrics"][k]["value"]) < 1e-6 for k in means)
    return wall, means, json.dumps(s["outcomes"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("VERIFIER_GSM8K"), help="gsm8k test.jsonl (or set VERIFIER_GSM8K)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run as the server process
    ap.add_argument("--order", default="lm-eval,verifier", help="which runs first (both are timed alike)")
    a = ap.parse_args()
    if not a.data or not Path(a.data).is_file():
        ap.error("--data PATH/TO/gsm8k/test.jsonl (or VERIFIER_GSM8K) is required")
    if a.serve:
        return serve(a.serve, a.data)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENAI_API_KEY": "bench",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    port = free_port()
    srv = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--data", a.data], env=env)
    url = f"http://127.0.0.1:{port}/v1"
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; server: {LATENCY_S * 1000:.0f} ms latency, "
          f"concurrency {CONCURRENCY}", flush=True)
    try:
        wait_http(url + "/models", srv)
        results = {}
        with tempfile.TemporaryDirectory() as d:
            for name in a.order.split(","):
                work = Path(d) / name
                work.mkdir()
                results[name] = run_lm_eval(url, a.data, work, env) if name == "lm-eval" else run_verifier(url, a.data, work, env)
                print(f"{name}: {results[name][0]:.1f} s, scores {results[name][1]}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
    (t_lm, s_lm), (t_v, s_v, outcomes) = results["lm-eval"], results["verifier"]
    print(f"verifier {t_v:.1f} s vs lm-eval {t_lm:.1f} s: {t_lm / t_v:.2f}x faster end to end (goal >= 3x); "
          f"load average now {os.getloadavg()[0]:.1f}; verifier outcomes {outcomes}")
    same = all(abs(s_lm[k] - s_v[k]) < 1e-9 for k in s_lm)
    print("scores identical to lm-eval's" if same else f"SCORES DIFFER: lm-eval {s_lm} vs verifier {s_v}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
