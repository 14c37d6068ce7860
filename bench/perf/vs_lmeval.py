"""verifier vs lm-eval, end to end, on the same full gsm8k against the same server.

    python bench/perf/vs_lmeval.py --data PATH/TO/gsm8k/test.jsonl    (or VERIFIER_GSM8K=PATH)

One process tree: this script starts bench/perf/lean_server.py (a server outside the package: one fixed completion
20 ms after each request, nothing else), then runs, one after the other, each as its own process:
- lm-eval's CLI, `local-chat-completions`, task gsm8k_cot_llama with --apply_chat_template
  --fewshot_as_multiturn, the data read from PATH (a task YAML that includes lm-eval's own), concurrency 32;
- `verifier run --suite gsm8k --data PATH --concurrency 32` (collect and score).
Prints both wall times, the ratio, each client's CPU per request (user + system of its process, from
getrusage's children counter around it) and both scores, which must be identical (exit 1 if not), and writes
them with the machine, the load and the command to bench/results/vs_lmeval.md (`--out`).

    python bench/perf/vs_lmeval.py --data PATH --server testbed [--repeat 3]

`--server testbed` uses verifier's own test server instead (20 ms, a deterministic mix of right, wrong and
unformatted answers, so both lm-eval filters see every outcome); `--latency` sets the lean server's delay;
`--base-url URL --model NAME` uses a server that is already running. `--repeat N` alternates the runs N times, each line with the load average before it;
`--verifier-root DIR` times another checkout of verifier (e.g. the commit before a change) beside this one.
Each verifier run is split by its files' times: start-up (to samples.jsonl, written after the preflight, before
the first request), requests (to the last journal record) and the rest (scoring left after the last answer, the
files, the process's exit).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # benchlib

from benchlib import free_port, machine, wait_http  # noqa: E402
LATENCY_S = 0.02
LEAN_LATENCY_S = 0.02
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


CPU: dict[str, float] = {}
"""CPU seconds (user + system) of the last timed process, all its threads and waited children."""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    c0 = children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    CPU["last"] = children_cpu() - c0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd[:4])} ...\n{r.stderr[-3000:]}")
    return wall, r


def run_lm_eval(url: str, data: str, work: Path, env: dict[str, str], model: str = "bench") -> tuple[float, dict[str, float]]:
    import lm_eval

    yaml = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k-cot-llama.yaml"
    tasks = work / "tasks"
    tasks.mkdir()
    (tasks / "gsm8k_local.yaml").write_text(
        f"include: {yaml}\ntask: gsm8k_cot_llama_local\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {Path(data).resolve()}\n", encoding="utf-8")
    model_args = (f"base_url={url}/chat/completions,model={model},num_concurrent={CONCURRENCY},tokenized_requests=False,"
                  "tokenizer_backend=None,max_retries=3,timeout=600")
    wall, _ = timed([sys.executable, "-m", "lm_eval", "run", "--model", "local-chat-completions", "--model_args", model_args,
                     "--tasks", "gsm8k_cot_llama_local", "--include_path", str(tasks), "--apply_chat_template",
                     "--fewshot_as_multiturn", "--output_path", str(work / "lm_eval_out")], env, work)
    (res,) = (work / "lm_eval_out").rglob("results_*.json")
    r = json.loads(res.read_text())["results"]["gsm8k_cot_llama_local"]
    return wall, {"strict_match": r["exact_match,strict-match"], "flexible_extract": r["exact_match,flexible-extract"]}


def run_verifier(url: str, data: str, work: Path, env: dict[str, str], model: str = "bench",
                 root: Path = ROOT) -> tuple[float, dict[str, float], str, dict[str, float]]:
    out = work / "verifier_run"
    env = {**env, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.time()
    wall, r = timed([sys.executable, "-m", "verifier", "run", "--suite", "gsm8k", "--data", data, "--base-url", url,
                     "--model", model, "--concurrency", str(CONCURRENCY), "--out", str(out), "--quiet"], env, root)
    end = t0 + wall
    first, last = (out / "samples.jsonl").stat().st_mtime, (out / "responses.jsonl").stat().st_mtime
    phases = {"start-up": first - t0, "requests": last - first, "after last answer": end - last}
    s = json.loads((out / "summary.json").read_text())["suites"]["gsm8k"]
    # The summary rounds to 6 places; the per-sample verdicts give the unrounded mean, as lm-eval computes it.
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    scored = [v["metrics"] for v in verdicts if v["outcome"] == "content"]
    means = {k: sum(m[k] for m in scored) / len(scored) for k in ("strict_match", "flexible_extract")}
    assert all(abs(means[k] - s["metrics"][k]["value"]) < 1e-6 for k in means)
    return wall, means, json.dumps(s["outcomes"]), phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("VERIFIER_GSM8K"), help="gsm8k test.jsonl (or set VERIFIER_GSM8K)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run as the server process
    ap.add_argument("--order", default="lm-eval,verifier", help="which runs first (both are timed alike)")
    ap.add_argument("--server", choices=("testbed", "lean"), default="lean",
                    help="lean: bench/perf/lean_server.py (default); testbed: verifier's test server with gsm8k answers")
    ap.add_argument("--latency", type=float, help=f"seconds per answer (default {LATENCY_S} testbed, {LEAN_LATENCY_S} lean)")
    ap.add_argument("--base-url", help="a running OpenAI-compatible server to use instead of starting one")
    ap.add_argument("--model", default="bench", help="model name with --base-url (lean: its own)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the runs this many times")
    ap.add_argument("--verifier-root", action="append", default=[], metavar="DIR",
                    help="also time the verifier checkout in DIR (repeatable); named verifier@DIR")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "vs_lmeval.md"), help="the results file ('' for none)")
    a = ap.parse_args()
    if not a.data or not Path(a.data).is_file():
        ap.error("--data PATH/TO/gsm8k/test.jsonl (or VERIFIER_GSM8K) is required")
    if a.serve:
        return serve(a.serve, a.data)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENAI_API_KEY": "bench",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    latency = a.latency if a.latency is not None else (LEAN_LATENCY_S if a.server == "lean" else LATENCY_S)
    srv, model = None, a.model
    if a.base_url:
        url, what = a.base_url.rstrip("/"), f"server {a.base_url}"
    else:
        port = free_port()
        if a.server == "lean":
            srv = subprocess.Popen([sys.executable, str(ROOT / "bench" / "perf" / "lean_server.py"), str(port), str(latency)], env=env)
            model, what = "lean", f"bench/perf/lean_server.py, {latency * 1000:.0f} ms latency"
        else:
            if a.latency is not None:
                ap.error("--latency is for --server lean (the test server's is fixed at 20 ms)")
            srv = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--data", a.data], env=env)
            what = f"verifier's test server, {LATENCY_S * 1000:.0f} ms latency"
        url = f"http://127.0.0.1:{port}/v1"
    rows = sum(1 for line in Path(a.data).read_text(encoding="utf-8").splitlines() if line.strip())
    print(f"machine: {machine()}; {what}, concurrency {CONCURRENCY}, {rows} questions", flush=True)
    if not a.base_url:
        # What the server alone allows: every wave of CONCURRENCY requests waits one latency.
        print(f"the server's own floor for the requests: {-(-rows // CONCURRENCY)} waves x {latency * 1000:.0f} ms = "
              f"{-(-rows // CONCURRENCY) * latency:.2f} s", flush=True)
    # Other checkouts are named by their directory's name (results files never name a path of this machine).
    other_roots = {f"verifier@{Path(d).resolve().name}": Path(d).resolve() for d in a.verifier_root}
    names = [n for n in a.order.split(",")] + list(other_roots)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    report = [f"# verifier vs lm-eval, full gsm8k ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)", "",
              "command: python bench/perf/vs_lmeval.py " + " ".join(
                  "GSM8K" if x == a.data else Path(x).resolve().name if x in a.verifier_root else shlex.quote(x) for x in sys.argv[1:]),
              f"machine: {machine()}", f"server: {what}, concurrency {CONCURRENCY}, {rows} questions", "",
              "| run | client | wall s | client CPU s | CPU ms/request | load before |", "|---|---|---:|---:|---:|---:|"]
    scores: dict[str, dict[str, float]] = {}
    cold_cpu = None
    try:
        if srv is not None:
            wait_http(url + "/models", srv)
        with tempfile.TemporaryDirectory() as d:
            # A cache of its own: the first verifier run compiles lm-eval's gsm8k task (suites/lm_eval_compiled.py),
            # the later ones read it, as every run after a user's first does. The first is marked "cold".
            env = {**env, "VERIFIER_CACHE_DIR": str(Path(d) / "cache")}
            if "verifier" in names:  # reported, not counted: a machine's first run also compiles the task, once
                (Path(d) / "cold").mkdir()
                wall, _, _, _ = run_verifier(url, a.data, Path(d) / "cold", env, model)
                cold_cpu = CPU["last"]
                print(f"[cold] verifier, compiling lm-eval's task: {wall:.1f} s, client CPU {cold_cpu:.2f} s", flush=True)
                report.append(f"| cold | verifier (compiles the lm-eval task; not counted) | {wall:.2f} | {cold_cpu:.2f} | "
                              f"{1000 * cold_cpu / rows:.2f} | {os.getloadavg()[0]:.2f} |")
            for rep in range(a.repeat):
                for name in names:
                    work = Path(d) / f"{rep}-{name.replace('/', '_')}"
                    work.mkdir()
                    load = os.getloadavg()[0]
                    if name == "lm-eval":
                        wall, scores[name] = run_lm_eval(url, a.data, work, env, model)
                        detail = ""
                    else:
                        root = other_roots.get(name, ROOT)
                        wall, scores[name], outcomes, phases = run_verifier(url, a.data, work, env, model, root)
                        detail = "; " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
                    times[name].append(wall)
                    cpus[name].append(CPU["last"])
                    print(f"[{rep + 1}/{a.repeat}] {name}: {wall:.1f} s (load {load:.1f} before), client CPU {CPU['last']:.2f} s = "
                          f"{1000 * CPU['last'] / rows:.2f} ms/request{detail}; scores {scores[name]}", flush=True)
                    report.append(f"| {rep + 1} | {name} | {wall:.2f} | {CPU['last']:.2f} | {1000 * CPU['last'] / rows:.2f} | {load:.2f} |")
    finally:
        if srv is not None:
            srv.terminate()
            srv.wait()
    lines = []
    if cold_cpu is not None:
        lines.append(f"verifier, first run on a fresh cache (compiles lm-eval's task, not counted below): client CPU {cold_cpu:.2f} s = "
                     f"{1000 * cold_cpu / rows:.2f} ms/request")
    for name in names:
        ts, cs = sorted(times[name]), sorted(cpus[name])
        lines.append(f"{name}: best {ts[0]:.1f} s, median {ts[len(ts) // 2]:.1f} s over {len(ts)}; client CPU median "
                     f"{cs[len(cs) // 2]:.2f} s = {1000 * cs[len(cs) // 2] / rows:.2f} ms/request (whole process, start-up included)")
    if "lm-eval" in times:
        lm = sorted(times["lm-eval"])
        for name in names:
            if name != "lm-eval":
                v = sorted(times[name])
                lines.append(f"{name} vs lm-eval end to end: {lm[0] / v[0]:.2f}x (best vs best), "
                             f"{lm[len(lm) // 2] / v[len(v) // 2]:.2f}x (median vs median)")
    lines.append(f"load average now {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))
    if a.out:
        report += ["", *(f"- {line}" for line in lines), ""]
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("\n".join(report) + "\n", encoding="utf-8")
        print(f"-> {a.out}")
    ref = scores.get("lm-eval")
    same = ref is None or all(all(abs(ref[k] - s[k]) < 1e-9 for k in ref) for s in scores.values())
    print("scores identical to lm-eval's" if ref and same else "" if same else f"SCORES DIFFER: {scores}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
