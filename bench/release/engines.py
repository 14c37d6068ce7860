"""How far do llama.cpp's numerics variants move the suites, and what does llama-server accept?

    python bench/release/engines.py [--model qwen0.5b] [--variants ref,q2k,kv] [--gsm8k-limit 10] [--out DIR]

For each variant of the model (reference, requantized Q2_K, KV cache q4_0) it
starts llama-server, runs the smoke suite (and gsm8k --smoke --limit N if that
suite is registered) at temperature 0 with `logprobs` on, and prints accuracy,
answer flips against the reference and logprob drift on the shared token
prefix. Then it probes the reference server's API surface. Prints figures; it
asserts nothing. Not part of the test suite: it takes several minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from verifier.execution import journal  # noqa: E402
from verifier.cli import main as verifier_main  # noqa: E402
from verifier.testbed import engines  # noqa: E402

VARIANTS = {
    "ref": {"label": "reference (as shipped)"},
    "q2k": {"label": "requantized Q2_K", "quant": "Q2_K"},
    "q3km": {"label": "requantized Q3_K_M", "quant": "Q3_K_M"},
    "kv": {"label": "KV cache q4_0", "kv_cache": "q4_0"},
}
LOGPROBS = {"logprobs": True, "top_logprobs": 1}


def registered() -> set[str]:
    from suites import BUILTIN as SUITES

    return set(SUITES)


def run_suite(srv: engines.Server, out: Path, suite: str, extra: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    code = verifier_main(["run", "--suite", suite, "--base-url", srv.url, "--model", srv.name, "--out", str(out), "--quiet",
                          "--mode", "chat", "--concurrency", str(srv.slots), "--temperature", "0",
                          "--extra-body", json.dumps(LOGPROBS), *extra])
    if code != 0:
        raise SystemExit(f"verifier run {suite} on {srv.name} exited {code}")
    s = json.loads((out / "summary.json").read_text())["suites"][suite]
    s["wall_s"] = round(time.perf_counter() - t0, 1)
    return s


def metrics(s: dict[str, Any]) -> str:
    return ", ".join(f"{k} {m['value']} (n={m['n']})" for k, m in s["metrics"].items() if m.get("value") is not None) or "-"


def per_sample(out: Path) -> dict[str, dict[str, Any]]:
    """sample_id -> {score, tokens: [(token, logprob)], prompt_tokens}"""
    vs = {v["sample_id"]: v for v in journal.read_jsonl(out / "verdicts.jsonl")}
    res = {}
    for ex in journal.read_exchanges(out).values():
        toks = []
        try:
            body = json.loads(ex.body or "{}")
            for t in ((body.get("choices") or [{}])[0].get("logprobs") or {}).get("content") or []:
                toks.append((t["token"], t["logprob"]))
        except (ValueError, KeyError, TypeError):
            pass
        v = vs.get(ex.sample_id, {})
        res[ex.sample_id] = {"score": v.get("score"), "tokens": toks, "prompt_tokens": (v.get("signals") or {}).get("prompt_tokens")}
    return res


def compare(ref: dict[str, dict[str, Any]], cand: dict[str, dict[str, Any]]) -> dict[str, Any]:
    flips = shared = total = pt_diff = 0
    abs_sum = 0.0
    for sid, r in ref.items():
        c = cand.get(sid)
        if c is None:
            continue
        flips += r["score"] is not None and c["score"] is not None and r["score"] != c["score"]
        pt_diff += r["prompt_tokens"] != c["prompt_tokens"]
        n = 0
        for (ta, la), (tb, lb) in zip(r["tokens"], c["tokens"]):
            if ta != tb:
                break
            abs_sum += abs(la - lb)
            n += 1
        shared += n
        total += max(len(r["tokens"]), 1)
    return {"flips": flips, "shared_tokens": shared, "shared_frac": round(shared / total, 3) if total else None,
            "mean_abs_dlogprob": round(abs_sum / shared, 4) if shared else None, "prompt_tokens_differ": pt_diff}


def probe(srv: engines.Server) -> dict[str, Any]:
    """What llama-server answers for the API surface the harness cares about."""
    out: dict[str, Any] = {}
    with httpx.Client(timeout=120) as c:
        props = c.get(srv.root + "/props")
        out["props_has_chat_template"] = props.status_code == 200 and bool(props.json().get("chat_template"))
        r = c.post(srv.root + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]})
        out["apply_template"] = f"{r.status_code} {'prompt' in r.json() if r.status_code == 200 else r.text[:80]}"
        r = c.post(srv.url + "/completions", json={"model": srv.name, "prompt": "1 + 1 =", "max_tokens": 4, "temperature": 0})
        out["v1_completions"] = f"{r.status_code} {r.json().get('object') if r.status_code == 200 else r.text[:80]}"
        base = {"model": srv.name, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
        r = c.post(srv.url + "/chat/completions", json={**base, "temperature": 0, **LOGPROBS})
        lp = (r.json()["choices"][0].get("logprobs") or {}).get("content") if r.status_code == 200 else None
        out["chat_logprobs"] = (f"{r.status_code}; choices[0].logprobs.content: {len(lp)} tokens, first {json.dumps(lp[0])[:160]}"
                                if lp else f"{r.status_code}; no choices[0].logprobs.content")
        for name, extra in {"temperature=-1": {"temperature": -1}, "top_p=2": {"top_p": 2}, "n=2": {"n": 2}}.items():
            r = c.post(srv.url + "/chat/completions", json={**base, **extra})
            note = ""
            if r.status_code == 200:
                note = f" ({len(r.json().get('choices', []))} choices)"
            else:
                note = " " + r.text[:100]
            out[f"status {name}"] = f"{r.status_code}{note}"
        r = c.post(srv.url + "/chat/completions", json={**base, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}]}]})
        out["image part on a text-only model"] = f"{r.status_code} {r.text[:100]}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen0.5b", choices=sorted(engines.MODELS))
    ap.add_argument("--variants", default="ref,q2k,kv", help=f"comma-separated: {', '.join(VARIANTS)}")
    ap.add_argument("--gsm8k-limit", type=int, default=10)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--out", help="directory for the runs (default runs/bench-engines-<stamp>)")
    a = ap.parse_args()
    out = Path(a.out or f"runs/bench-engines-{dt.datetime.now():%Y%m%d-%H%M%S}")
    suites = [("smoke", [])]
    if "gsm8k" in registered():
        suites.append(("gsm8k", ["--smoke", "--limit", str(a.gsm8k_limit)]))
    else:
        print("gsm8k not registered: smoke only")

    results: dict[str, dict[str, Any]] = {}
    samples: dict[tuple[str, str], dict] = {}
    probes: dict[str, Any] = {}
    for v in a.variants.split(","):
        spec = VARIANTS[v]
        t0 = time.perf_counter()
        path = engines.prepare(a.model, spec.get("quant"))
        prep = time.perf_counter() - t0
        with engines.Server(a.model, quant=spec.get("quant"), kv_cache=spec.get("kv_cache"), slots=a.slots, ctx=a.ctx,
                            log_path=out / f"{v}.llama-server.log") as srv:
            print(f"== {spec['label']}: {srv.name} ({path.stat().st_size / 1e6:.0f} MB, prepared in {prep:.0f}s)", flush=True)
            if v == "ref" or not probes:
                probes = probe(srv)
            for suite, extra in suites:
                d = out / f"{v}-{suite}"
                s = run_suite(srv, d, suite, extra)
                results[(v, suite)] = s
                samples[(v, suite)] = per_sample(d)
                print(f"   {suite}: {metrics(s)} outcomes {s['outcomes']} in {s['wall_s']}s", flush=True)

    print("\n| variant | suite | metrics (n) | flips vs ref | mean abs Δ logprob (shared prefix) | shared prefix | prompt_tokens differ | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for (v, suite), s in results.items():
        cmp = compare(samples[("ref", suite)], samples[(v, suite)]) if ("ref", suite) in samples and v != "ref" else None
        print(f"| {VARIANTS[v]['label']} | {suite} | {metrics(s)} | "
              f"{cmp['flips'] if cmp else '-'} | {cmp['mean_abs_dlogprob'] if cmp else '-'} "
              f"({cmp['shared_tokens'] if cmp else '-'} tok) | {cmp['shared_frac'] if cmp else '-'} | "
              f"{cmp['prompt_tokens_differ'] if cmp else '-'} | {s['wall_s']} |")
    print("\nllama-server API probes:")
    for k, val in probes.items():
        print(f"  {k}: {val}")
    print(f"\nruns and server logs in {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("engines"):  # the figures go to bench/results/engines.md
        main()
