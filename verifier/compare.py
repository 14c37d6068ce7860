"""Run vs golden -> per-metric deltas -> a frontend verdict and a quantization verdict, each with evidence.

The method (DESIGN.md, "Attribution"): frontend signals are weight-independent
(contract findings, prompt-token fingerprint, stream parity, new rejections);
numerics signals are measured only on samples whose envelope is clean and whose
prompt fingerprint matches, so a frontend bug cannot masquerade as a quality drop.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from typing import Any

from . import stats
from .contract import MODEL_BEHAVIOUR
from .jsonsafe import is_finite_number
from .golden import MAX_LOGPROBS
from .types import JUDGED

EXIT = {"pass": 0, "frontend_regression": 10, "quantization_regression": 11, "both": 12, "inconclusive": 20, "incomplete": 30}
MEANING = {
    0: "pass: no regression beyond calibrated margins",
    10: "frontend regression: the serving stack around the model changed behaviour",
    11: "quantization regression: the model's numerics changed with a clean frontend",
    12: "both: frontend and numerics regressions",
    20: "inconclusive: not enough evidence either way at this sample size",
    30: "incomplete: too many infra errors to judge",
}
FRONTEND_EVENTS = ("new_findings", "prompt_tokens_mismatch", "stream_parity_mismatch", "new_unsupported", "tool_call_id_format_changed",
                   "dual_path_mismatch")
NUMERICS_EVENTS = ("repetition",)
# A floor under the calibrated drift, with its reason: llama.cpp with 2 parallel slots is not bit-stable
# across reruns (batch composition), and its own reruns drifted 0.0028-0.0043 mean |Δ logprob| per token
# on this testbed, while requantization and KV-cache quantization drifted 0.05-0.12. 0.01 sits between.
DRIFT_FLOOR = 0.01
# Drift fires above this multiple of the largest drift seen between reference reruns, or above the floor,
# whichever is higher: the maximum over k=3 calibration runs underestimates the noise tail.
DRIFT_FACTOR = 3.0


class NoOverlap(ValueError):
    pass


def _group(obs: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    g: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for o in obs:
        g[o["suite"]][o["sample_id"]].append(o)
    return g


def degenerate(text: str | None) -> bool:
    """A repetition loop: the tail is one short unit repeated many times ('foss foss foss...')."""
    if not text or len(text) < 40:
        return False
    tail = text[-400:]
    if len(zlib.compress(tail.encode())) > 0.5 * len(tail.encode()):
        return False  # fast path: a loop compresses very well, ordinary text does not
    m = re.search(r"(.{1,40}?)\1{5,}$", tail, flags=re.S)
    return bool(m and len(m.group(0)) >= 30)


def _answer_key(o: dict[str, Any]) -> str:
    return json.dumps(o.get("answer"), sort_keys=True)


def _tokens_diverge(a: list[list[str]], b: list[list[str]]) -> bool:
    """Whether the two paths generated different token sequences (compared on their common length).

    Then a different answer is the decoding's doing (batch-order nondeterminism, amplified by a
    quantized KV cache), not the assembly's: a stream-assembly or detokenizer bug keeps the tokens
    and changes the text. Unknown (no logprobs) counts as not diverging.
    """
    if not a or not b:
        return False
    def visible(t: list[str]) -> list[str]:
        # llama-server lists the end-of-generation token as "" in non-streamed logprobs only.
        while t and t[-1] == "":
            t = t[:-1]
        return t

    x, y = visible(a[0]), visible(b[0])
    n = min(len(x), len(y))
    # Different lengths below the stored cap: one path stopped (EOS) where the other went on.
    return x[:n] != y[:n] or (len(x) != len(y) and n < MAX_LOGPROBS)


def _drift(g: dict[str, Any], c: dict[str, Any]) -> tuple[int, float, int] | None:
    """(shared prefix length, sum |Δ logprob| over it, first divergence position) or None."""
    gl, cl = g.get("logprobs"), c.get("logprobs")
    if not gl or not cl:
        return None
    n = m = 0
    total = 0.0
    for (gt, glp), (ct, clp) in zip(gl, cl):
        if gt != ct:
            break
        if is_finite_number(glp) and is_finite_number(clp):  # NaN/Infinity/null: not measurable, never "no drift"
            total += abs(glp - clp)
            m += 1
        n += 1
    return None if n and not m else (m, total, n)


def paired_signals(golden: list[dict[str, Any]], cand: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Everything compare and calibrate need, per suite, from two sets of observations."""
    G, C = _group(golden), _group(cand)
    out: dict[str, dict[str, Any]] = {}
    for suite in sorted(set(G) & set(C)):
        ids = sorted(set(G[suite]) & set(C[suite]))
        events: dict[str, list[str]] = {k: [] for k in FRONTEND_EVENTS + NUMERICS_EVENTS}
        denom: dict[str, int] = {k: 0 for k in events}
        metrics: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        metric_ids: dict[str, list[str]] = defaultdict(list)
        flips: dict[str, list[str]] = {"regressed": [], "improved": []}
        finding_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        drift_tokens = 0
        drift_sum = 0.0
        first_div: list[int] = []
        trig = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        answers_same = answers_n = 0
        for sid in ids:
            gs, cs = G[suite][sid], C[suite][sid]
            judged_g = [o for o in gs if o["outcome"] in JUDGED]
            judged_c = [o for o in cs if o["outcome"] in JUDGED]
            gcodes = {code for o in gs for code in o.get("findings", [])}
            ccodes = {code for o in cs for code in o.get("findings", [])}
            for code in gcodes | ccodes:
                finding_counts[code][0] += code in gcodes
                finding_counts[code][1] += code in ccodes
            touched = False
            if judged_c and judged_g:
                denom["new_findings"] += 1
                if (ccodes - gcodes) - MODEL_BEHAVIOUR:
                    events["new_findings"].append(sid)
                    touched = True
            gpt = {o["prompt_tokens"] for o in gs if o.get("prompt_tokens") is not None}
            cpt = {o["prompt_tokens"] for o in cs if o.get("prompt_tokens") is not None}
            if gpt and cpt:
                denom["prompt_tokens_mismatch"] += 1
                if gpt != cpt:
                    events["prompt_tokens_mismatch"].append(sid)
                    touched = True
            gst = {x for o in gs for x in (o.get("tool_call_id_style") or [])}
            cst = {x for o in cs for x in (o.get("tool_call_id_style") or [])}
            if gst and cst:
                denom["tool_call_id_format_changed"] += 1
                if cst - gst:
                    events["tool_call_id_format_changed"].append(sid)
                    touched = True
            modes = defaultdict(set)
            tokens = defaultdict(list)
            for o in judged_c:
                modes[o["mode"]].add(_answer_key(o))
                if o.get("logprobs"):
                    tokens[o["mode"]].append([t for t, _ in o["logprobs"]])
            for other, event in (("chat-stream", "stream_parity_mismatch"), ("completions", "dual_path_mismatch")):
                if "chat" in modes and other in modes:
                    denom[event] += 1
                    if modes["chat"] != modes[other] and not _tokens_diverge(tokens["chat"], tokens[other]):
                        events[event].append(sid)
                        touched = True
            denom["new_unsupported"] += 1
            if any(o["outcome"] == "unsupported" for o in cs) and not any(o["outcome"] == "unsupported" for o in gs):
                events["new_unsupported"].append(sid)
                touched = True
            if judged_c:
                denom["repetition"] += 1
                if any(degenerate(o.get("content")) for o in cs) and not any(degenerate(o.get("content")) for o in gs):
                    events["repetition"].append(sid)
            # K2VV trigger decision, against the golden's decision.
            gt = [o.get("tool_triggered") for o in judged_g if o.get("tool_triggered") is not None]
            ct = [o.get("tool_triggered") for o in judged_c if o.get("tool_triggered") is not None]
            if gt and ct:
                g1, c1 = sum(gt) / len(gt) >= 0.5, sum(ct) / len(ct) >= 0.5
                trig["tp" if g1 and c1 else "fp" if c1 else "fn" if g1 else "tn"] += 1
            # Numerics: only clean envelopes on both sides, untouched by frontend signals.
            clean_g = [o for o in gs if o["outcome"] == "content"]
            clean_c = [o for o in cs if o["outcome"] == "content"]
            if clean_g and clean_c and not touched:
                answers_n += 1
                answers_same += {_answer_key(o) for o in clean_g} == {_answer_key(o) for o in clean_c}
                names = set(clean_g[0].get("metrics", {})) & set(clean_c[0].get("metrics", {}))
                for m in sorted(names):
                    gv = sum(o["metrics"][m] for o in clean_g if m in o["metrics"]) / len(clean_g)
                    cv = sum(o["metrics"][m] for o in clean_c if m in o["metrics"]) / len(clean_c)
                    metrics[m][0].append(gv)
                    metrics[m][1].append(cv)
                    metric_ids[m].append(sid)
                gscore = [o["score"] for o in clean_g if o.get("score") is not None]
                cscore = [o["score"] for o in clean_c if o.get("score") is not None]
                if gscore and cscore:
                    ga, ca = sum(gscore) / len(gscore), sum(cscore) / len(cscore)
                    if ga > ca:
                        flips["regressed"].append(sid)
                    elif ca > ga:
                        flips["improved"].append(sid)
                gref = next((o for o in clean_g if o["mode"] == "chat" and o["epoch"] == 0), clean_g[0])
                cref = next((o for o in clean_c if o["mode"] == "chat" and o["epoch"] == 0), clean_c[0])
                d = _drift(gref, cref)
                if d:
                    drift_tokens += d[0]
                    drift_sum += d[1]
                    first_div.append(d[2])
        out[suite] = {
            "paired": len(ids),
            "golden_clean": sum(any(o["outcome"] == "content" for o in G[suite][sid]) for sid in ids),
            "golden_only": len(set(G[suite]) - set(C[suite])),
            "candidate_only": len(set(C[suite]) - set(G[suite])),
            "events": events,
            "denominators": denom,
            "metrics": {m: {"golden": v[0], "candidate": v[1], "ids": metric_ids[m]} for m, v in metrics.items()},
            "flips": flips,
            "findings": {k: {"golden": v[0], "candidate": v[1]} for k, v in sorted(finding_counts.items())},
            "drift": {
                "tokens": drift_tokens,
                "mean_abs_delta": (drift_sum / drift_tokens) if drift_tokens else None,
                "first_divergence_median": sorted(first_div)[len(first_div) // 2] if first_div else None,
                "samples": len(first_div),
            },
            "trigger": trig,
            "answer_agreement": (answers_same / answers_n) if answers_n else None,
        }
    return out


def metric_verdict(golden: list[float], cand: list[float], margin: float, seed: int = 0) -> dict[str, Any]:
    n = len(golden)
    if n == 0:
        return {"golden": None, "candidate": None, "delta": None, "ci": [None, None], "margin": margin, "p_value": None, "n": 0, "verdict": "inconclusive"}
    g, c = sum(golden) / n, sum(cand) / n
    lo, hi = stats.paired_bootstrap(golden, cand, seed=seed)
    p = None
    if stats.is_binary(golden) and stats.is_binary(cand):
        b = sum(1 for x, y in zip(golden, cand) if x == 1 and y == 0)
        cc = sum(1 for x, y in zip(golden, cand) if x == 0 and y == 1)
        p = stats.mcnemar_exact(b, cc)
    eps = 1e-12
    if lo >= -margin - eps:
        verdict = "pass"
    elif hi < -margin - eps and (p is None or p < 0.05):
        verdict = "fail"
    else:
        verdict = "inconclusive"
    return {"golden": stats.rnd(g), "candidate": stats.rnd(c), "delta": stats.rnd(c - g), "ci": [stats.rnd(lo), stats.rnd(hi)],
            "margin": margin, "p_value": stats.rnd(p), "n": n, "verdict": verdict}


def event_verdict(k: int, n: int, margin: float) -> dict[str, Any]:
    """A rate of events that should not happen (beyond the calibrated rate): fail when Wilson's lower bound clears it."""
    if n == 0:
        return {"rate": None, "ci": [None, None], "count": 0, "n": 0, "margin": margin, "verdict": "pass", "note": "not measurable here"}
    lo, hi = stats.wilson(k, n)
    rate = k / n
    eps = 1e-12
    verdict = "fail" if lo > margin + eps else "pass" if rate <= margin + eps else "inconclusive"
    return {"rate": stats.rnd(rate), "ci": [stats.rnd(lo), stats.rnd(hi)], "count": k, "n": n, "margin": margin, "verdict": verdict}


def _margin(margins: dict[str, Any], key: str) -> float:
    m = margins.get(key)
    if m is None:
        raise KeyError(key)
    return float(m["value"] if isinstance(m, dict) else m)


def _combine(verdicts: list[str]) -> str:
    if "fail" in verdicts:
        return "fail"
    if "inconclusive" in verdicts:
        return "inconclusive"
    return "pass"


def compare(golden_meta: dict[str, Any], golden_obs: list[dict[str, Any]], cand_obs: list[dict[str, Any]],
            infra_budget: float = 0.02, probes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The comparison document (DESIGN.md, "Machine-readable outputs")."""
    margins = golden_meta.get("margins") or {}
    sig = paired_signals(golden_obs, cand_obs)
    if not sig or all(s["paired"] == 0 for s in sig.values()):
        raise NoOverlap("the run and the golden share no sample ids")
    infra = sum(1 for o in cand_obs if o["outcome"] == "infra")
    infra_rate = infra / len(cand_obs) if cand_obs else 0.0
    fe_evidence: list[dict[str, Any]] = []
    q_evidence: list[dict[str, Any]] = []
    suites_out: dict[str, Any] = {}
    for suite, s in sig.items():
        mets = {}
        if not s["metrics"]:
            if s["golden_clean"] == 0:
                # The reference itself never answered cleanly (e.g. it rejects images): nothing to regress from.
                q_evidence.append({"signal": "quality", "suite": suite, "metric": "*", "verdict": "pass",
                                   "summary": "not measurable: the golden has no clean sample either (the reference refuses or breaks this suite)"})
            else:
                q_evidence.append({"signal": "quality", "suite": suite, "metric": "*", "verdict": "inconclusive",
                                   "summary": "no sample has a clean envelope on both sides: quality cannot be judged"})
        for m, v in sorted(s["metrics"].items()):
            mv = metric_verdict(v["golden"], v["candidate"], _margin(margins, f"{suite}/{m}"))
            mets[m] = mv
            q_evidence.append({"signal": "quality", "suite": suite, "metric": m, "verdict": mv["verdict"],
                               "summary": f"{m}: {mv['golden']} -> {mv['candidate']} (delta {mv['delta']}, CI {mv['ci']}, margin {mv['margin']}, p={mv['p_value']}, n={mv['n']})"})
        sigs = {}
        for name in FRONTEND_EVENTS + NUMERICS_EVENTS:
            n = s["denominators"][name]
            # A signal this run cannot measure needs no margin (older goldens predate newer signals).
            margin = _margin(margins, f"{suite}/signal:{name}") if n else margins.get(f"{suite}/signal:{name}", {}).get("value", 0.0)
            ev = event_verdict(len(s["events"][name]), n, margin)
            ev["samples"] = s["events"][name][:50]
            sigs[name] = ev
            target = fe_evidence if name in FRONTEND_EVENTS else q_evidence
            if ev["n"]:
                target.append({"signal": name, "suite": suite, "verdict": ev["verdict"],
                               "summary": f"{name}: {ev['count']}/{ev['n']} samples (rate {ev['rate']}, CI {ev['ci']}, margin {ev['margin']})",
                               "samples": ev["samples"][:10]})
        d = s["drift"]
        drift_margin = max(DRIFT_FACTOR * (_margin(margins, f"{suite}/drift") if d["mean_abs_delta"] is not None else 0.0), DRIFT_FLOOR)
        if d["mean_abs_delta"] is None:
            d_verdict = "unavailable"
        else:
            d_verdict = "fired" if d["mean_abs_delta"] > drift_margin else "clean"
        d = {**d, "margin": drift_margin, "state": d_verdict, "mean_abs_delta": stats.rnd(d["mean_abs_delta"])}
        if d_verdict != "unavailable":
            q_evidence.append({"signal": "logprob_drift", "suite": suite, "verdict": "fail" if d_verdict == "fired" else "pass",
                               "summary": f"mean |Δ logprob| {d['mean_abs_delta']} over {d['tokens']} shared-prefix tokens on {d['samples']} samples (noise floor {drift_margin}); median first divergence at token {d['first_divergence_median']}"})
        t = s["trigger"]
        prec = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else None
        rec = t["tp"] / (t["tp"] + t["fn"]) if t["tp"] + t["fn"] else None
        f1 = 2 * prec * rec / (prec + rec) if prec and rec else (0.0 if prec is not None and rec is not None else None)
        suites_out[suite] = {
            "paired": s["paired"], "golden_only": s["golden_only"], "candidate_only": s["candidate_only"],
            "metrics": mets, "signals": sigs, "drift": d, "flips": s["flips"], "findings": s["findings"],
            "tool_trigger": {**t, "precision": stats.rnd(prec), "recall": stats.rnd(rec), "f1": stats.rnd(f1)} if sum(t.values()) else None,
            "answer_agreement": stats.rnd(s["answer_agreement"]),
        }
    if probes:
        for name, p in sorted(probes.items()):
            fe_evidence.append({"signal": f"probe:{name}", "suite": "*", "verdict": p["verdict"], "summary": p["summary"]})

    frontend = _combine([e["verdict"] for e in fe_evidence])
    quality = _combine([e["verdict"] for e in q_evidence if e["signal"] == "quality"])
    drift_states = {s["drift"]["state"] for s in suites_out.values()}
    repetition = _combine([e["verdict"] for e in q_evidence if e["signal"] == "repetition"])
    quality = _combine([quality, repetition])
    if quality == "fail":
        # A frontend bug never moves the logprobs of a shared token prefix: if drift was measured and is
        # at the noise floor, the drop is not the weights (e.g. ignored sampling params).
        quant = "inconclusive" if drift_states == {"clean"} else "fail"
    elif "fired" in drift_states:
        quant = "inconclusive"
    else:
        quant = quality
    if infra_rate > infra_budget:
        status = "incomplete"
    elif frontend == "fail" and quant == "fail":
        status = "both"
    elif frontend == "fail":
        status = "frontend_regression"
    elif quant == "fail":
        status = "quantization_regression"
    elif "inconclusive" in (frontend, quant):
        status = "inconclusive"
    else:
        status = "pass"
    return {
        "status": status,
        "exit_code": EXIT[status],
        "meaning": MEANING[EXIT[status]],
        "infra": {"count": infra, "total": len(cand_obs), "rate": stats.rnd(infra_rate), "budget": infra_budget},
        "frontend": {"verdict": frontend, "evidence": fe_evidence},
        "quantization": {"verdict": quant, "evidence": q_evidence},
        "suites": suites_out,
    }


def calibrate_margins(runs: list[list[dict[str, Any]]], provenance: dict[str, Any]) -> dict[str, Any]:
    """Margins = the largest run-to-run spread seen between reference runs, per metric and signal."""
    if len(runs) < 2:
        raise ValueError("calibration needs at least 2 reference runs (k >= 3 recommended)")
    spread: dict[str, float] = {}
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            for suite, s in paired_signals(runs[i], runs[j]).items():
                for m, v in s["metrics"].items():
                    n = len(v["golden"])
                    d = abs(sum(v["candidate"]) - sum(v["golden"])) / n if n else 0.0
                    spread[f"{suite}/{m}"] = max(spread.get(f"{suite}/{m}", 0.0), d)
                for name in FRONTEND_EVENTS + NUMERICS_EVENTS:
                    n = s["denominators"][name]
                    rate = len(s["events"][name]) / n if n else 0.0
                    spread[f"{suite}/signal:{name}"] = max(spread.get(f"{suite}/signal:{name}", 0.0), rate)
                md = s["drift"]["mean_abs_delta"] or 0.0
                spread[f"{suite}/drift"] = max(spread.get(f"{suite}/drift", 0.0), md)
    return {k: {"value": round(v, 6), "source": "calibrate", **provenance} for k, v in sorted(spread.items())}
