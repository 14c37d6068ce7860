"""The report's sections as plain data: charts with their geometry, tables, flip cards, provenance.

Each function takes the joined Inputs (data.inputs) and returns dicts the template only draws.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from ..attribution.document import MetricResult
from ..version import __version__
from verifier.surfaces.registry import REFERENCE_MODE
from ..types import Exchange
from .data import Drawn, Inputs, anchor
from .pictures import parting
from .. import jsonsafe

RAW_BYTES = 4096            # raw response / request shown in a flip card
MAX_FLIP_CARDS = 100        # flip cards rendered server-side; the rest stay reachable via the table filter
FINDING_EXAMPLES = 5
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def delta_chart(metrics: Mapping[str, Mapping[str, MetricResult]]) -> dict[str, Any]:
    """Per metric (suite -> metric -> result): delta with its interval, against -margin. Geometry computed here so
    the template only draws."""
    rows: list[dict[str, Any]] = []
    for suite, ms in metrics.items():
        for m, v in ms.items():
            if v.delta is None:
                continue
            rows.append({"label": f"{suite}/{m}", "delta": v.delta, "lo": v.ci[0], "hi": v.ci[1], "margin": v.margin, "verdict": v.verdict})
    span = max([0.05] + [abs(x) * 1.15 for r in rows for x in (r["delta"], r["lo"], r["hi"], r["margin"]) if x is not None])
    x0, w = 190.0, 420.0

    def x(v: float) -> float:
        return round(x0 + (v + float(span)) / (2 * float(span)) * w, 1)

    for i, r in enumerate(rows):
        # A metric without a margin (uncalibrated, or judged by its interval alone) has no margin line to draw.
        r.update(y=30 + i * 26, x_lo=x(r["lo"]), x_hi=x(r["hi"]), x_d=x(r["delta"]),
                 x_m=x(-r["margin"]) if r["margin"] is not None else None)
    return {"rows": rows, "height": 50 + 26 * len(rows), "x_zero": x(0.0), "x_left": x0, "x_right": x0 + w,
            "span": round(span, 4), "ticks": [{"x": x(t), "label": f"{t:+.2f}"} for t in (-span, -span / 2, 0.0, span / 2, span)]}


def histogram(series: dict[str, list[float]], bins: int = 30) -> dict[str, Any] | None:
    vals = [v for xs in series.values() for v in xs]
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        hi = lo + 1.0
    width = (hi - lo) / bins
    out = []
    peak = 1
    counts = {}
    for name, xs in series.items():
        c = pd.cut(pd.Series(xs, dtype=float), bins=[lo + i * width for i in range(bins + 1)], include_lowest=True).value_counts(sort=False).tolist()
        counts[name] = c
        peak = max([peak] + c)
    bw = 560 / bins
    for k, (name, c) in enumerate(counts.items()):
        for i, n in enumerate(c):
            if n:
                h = round(150 * n / peak, 1)
                out.append({"x": round(40 + i * bw + k * bw / len(counts), 1), "w": round(bw / len(counts) - 0.5, 1), "y": round(170 - h, 1), "h": h,
                            "n": n, "side": name, "color": PALETTE[k], "range": f"{lo + i * width:.0f}-{lo + (i + 1) * width:.0f} ms"})
    return {"bars": out, "lo": round(lo), "hi": round(hi), "peak": peak, "sides": [{"name": n, "color": PALETTE[k]} for k, n in enumerate(counts)]}


def finish_mix(df: pd.DataFrame, sides: list[str]) -> dict[str, Any] | None:
    rows = []
    reasons: list[str] = []
    for side in sides:
        vc = df[f"{side[0]}_finish_reason"].dropna().astype(str).value_counts()
        if vc.empty:
            continue
        reasons += [r for r in vc.index if r not in reasons]
        rows.append((side, vc))
    if not rows:
        return None
    color = {r: PALETTE[i % len(PALETTE)] for i, r in enumerate(reasons)}
    bars = []
    for i, (side, vc) in enumerate(rows):
        total, x = int(vc.sum()), 100.0
        segs = []
        for r, n in vc.items():
            w = round(480 * n / total, 1)
            segs.append({"x": round(x, 1), "w": w, "reason": r, "n": int(n), "pct": f"{100 * n / total:.1f}%", "color": color[r]})
            x += w
        bars.append({"side": side, "y": 10 + i * 34, "segs": segs, "total": total})
    return {"bars": bars, "legend": [{"reason": r, "color": c} for r, c in color.items()], "height": 30 + 34 * len(bars)}


def _pct(xs: pd.Series, q: float) -> float | None:
    return round(float(xs.quantile(q)), 1) if len(xs) else None


def perf(inp: Inputs) -> dict[str, Any]:
    df = inp.frame
    sides = ["candidate"] + (["golden"] if inp.golden_header is not None else [])
    lat_rows: list[dict[str, Any]] = []
    series: dict[str, Any] = {}
    for side in sides:
        p = side[0]
        xs = pd.to_numeric(df.loc[df[f"{p}_outcome"].notna() & (df[f"{p}_outcome"] != "infra"), f"{p}_latency_ms"], errors="coerce").dropna()
        series[side] = xs.tolist()
        ct = pd.to_numeric(df[f"{p}_completion_tokens"], errors="coerce")
        lat = pd.to_numeric(df[f"{p}_latency_ms"], errors="coerce")
        tps = (ct / (lat / 1000.0)).replace([float("inf")], float("nan")).dropna()
        lat_rows.append({"side": side, "n": len(xs), "p50": _pct(xs, 0.5), "p95": _pct(xs, 0.95), "p99": _pct(xs, 0.99),
                         "mean": round(float(xs.mean()), 1) if len(xs) else None, "max": round(float(xs.max()), 1) if len(xs) else None,
                         "tokens": int(ct.sum()) if ct.notna().any() else None, "tok_s_median": round(float(tps.median()), 1) if len(tps) else None})
    wall = _wall(inp.header.started, inp.header.finished)
    recorded = int(df["c_outcome"].notna().sum())
    through = {"wall_s": wall, "requests": recorded,
               "wall_note": "" if wall else "the run has no finish time (interrupted?), so no rate is given"
               if not inp.header.finished else "the run took less than the one-second resolution of run.json's times, so no rate is given",
               "req_s": round(recorded / wall, 2) if wall else None,
               "tok_s": round(lat_rows[0]["tokens"] / wall, 1) if wall and lat_rows[0]["tokens"] else None}
    infra = df[df["c_outcome"] == "infra"]
    reasons = infra["c_reason"].astype(str).value_counts()
    return {"latency": lat_rows, "throughput": through, "hist": histogram(series), "finish": finish_mix(df, sides),
            "infra": (inp.doc.infra if inp.doc is not None else None) or {"count": len(infra), "total": recorded,
                                                      "rate": round(len(infra) / recorded, 4) if recorded else None, "budget": None},
            "infra_reasons": [{"reason": r, "count": int(n)} for r, n in reasons.items()]}


def _wall(a: str | None, b: str | None) -> float | None:
    import datetime as dt

    try:
        return max((dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds(), 0.0) or None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def findings_view(inp: Inputs) -> list[dict[str, Any]]:
    """Contract findings grouped by code: counts on both sides and a few candidate examples with their detail."""
    anchors = dict(zip(zip(inp.frame["suite"], inp.frame["sample_id"]), inp.frame["anchor"]))
    doc_counts: dict[str, tuple[int, int]] = {}  # code -> samples showing it (golden, candidate), over the suites
    for s in (inp.doc.suites if inp.doc is not None else {}).values():
        for code, c in s.finding_counts().items():
            in_golden, in_candidate = doc_counts.get(code, (0, 0))
            doc_counts[code] = (in_golden + c.golden, in_candidate + c.candidate)
    out = []
    f = inp.findings
    codes = sorted(set(f["code"]) | set(doc_counts))
    grouped = {k: g for k, g in f.groupby("code")} if len(f) else {}
    for code in codes:
        g = grouped.get(code, f.iloc[0:0])
        ex = [{"anchor": anchors.get((r.suite, r.sample_id), anchor(r.sample_id)), "suite": r.suite, "sample_id": r.sample_id,
               "mode": r.mode, "detail": r.detail} for r in g.drop_duplicates(["suite", "sample_id"]).head(FINDING_EXAMPLES).itertuples()]
        counted: tuple[int | None, int | None] = doc_counts.get(code, (None, None))
        golden, candidate = counted
        out.append({"code": code, "records": len(g), "samples": g[["suite", "sample_id"]].drop_duplicates().shape[0],
                    "golden": golden, "candidate": candidate, "examples": ex})
    return sorted(out, key=lambda r: (-(r["candidate"] or r["samples"]), r["code"]))


def fingerprint_view(inp: Inputs) -> list[dict[str, Any]]:
    """Prompt-token fingerprint per suite: how many samples moved, by how much (a template bug shifts them all alike)."""
    df = inp.frame
    out = []
    for suite, g in df.groupby("suite", sort=True):
        per = g.groupby("sample_id").agg(anchor=("anchor", "first"), g=("g_prompt_tokens", "first"), c=("c_prompt_tokens", "first"))
        if inp.golden_header is None:
            c = pd.to_numeric(per["c"], errors="coerce").dropna()
            out.append({"suite": suite, "single": True, "n": len(c), "min": int(c.min()) if len(c) else None,
                        "median": float(c.median()) if len(c) else None, "max": int(c.max()) if len(c) else None, "distinct": int(c.nunique())})
            continue
        both = per.dropna(subset=["g", "c"]).copy()
        both["delta"] = both["c"].astype(int) - both["g"].astype(int)
        moved = both[both["delta"] != 0]
        top = moved.reindex(moved["delta"].abs().sort_values(ascending=False).index).head(20)
        out.append({"suite": suite, "single": False, "n": len(both), "mismatched": len(moved),
                    "deltas": [{"delta": int(d), "count": int(n)} for d, n in moved["delta"].value_counts().head(8).items()],
                    "examples": [{"sample_id": sid, "anchor": r.anchor, "g": int(r.g), "c": int(r.c), "delta": int(r.delta)} for sid, r in top.iterrows()]})
    return out


def _flatten(x: Any, path: str = "$") -> dict[str, str]:
    """Answer -> {json path: scalar repr}; JSON strings (tool-call arguments) are opened so argument diffs show per key."""
    if isinstance(x, str) and x[:1] in "{[":
        try:
            x = jsonsafe.loads(x)
        except ValueError:
            pass
    if isinstance(x, dict):
        out: dict[str, str] = {}
        for k in sorted(x):
            out.update(_flatten(x[k], f"{path}.{k}"))
        return out or {path: "{}"}
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(_flatten(v, f"{path}[{i}]"))
        return out or {path: "[]"}
    return {path: json.dumps(x, ensure_ascii=False)}


def answer_diff(g: str | None, c: str | None) -> list[dict[str, Any]]:
    fg = _flatten(jsonsafe.loads(g)) if g is not None else {}
    fc = _flatten(jsonsafe.loads(c)) if c is not None else {}
    return [{"path": p, "g": fg.get(p), "c": fc.get(p), "diff": fg.get(p) != fc.get(p)} for p in sorted(set(fg) | set(fc))]


def _cut(text: str | None, n: int) -> tuple[str, bool]:
    if text is None:
        return "", False
    return (text[:n], len(text) > n)


def _card_rows(inp: Inputs) -> tuple[list[dict[str, Any]], int]:
    df = inp.frame
    flipped = df[df["flip"] != ""]
    # One card per sample: a record whose own mode flipped (a streamed-only flip shows its stream), the chat/epoch-0
    # record among them when there is one (the one drift is measured on).
    flipped = flipped.assign(_pref=[(0 if here else 2) + (0 if (m == REFERENCE_MODE and e == 0) else 1)
                                    for here, m, e in zip(flipped["flip_here"], flipped["mode"], flipped["epoch"])])
    flipped = flipped.sort_values(["flip", "_pref"], ascending=[False, True], kind="stable").drop_duplicates(["suite", "sample_id"])
    return flipped.head(MAX_FLIP_CARDS).to_dict("records"), len(flipped)


def card_keys(inp: Inputs) -> set[tuple[str, str, int, str]]:
    """The journal records the flip cards show (at most MAX_FLIP_CARDS): the only ones the report reads bodies of."""
    if inp.doc is None:
        return set()
    return {(r["suite"], r["sample_id"], r["epoch"], r["mode"]) for r in _card_rows(inp)[0]}


def drawn(ex: Exchange) -> Drawn:
    """A journal record as its flip card shows it, cut to RAW_BYTES (response) and 2 * RAW_BYTES (request)."""
    raw = ex.body if ex.body is not None else "\n".join(ex.chunks or [])
    raw_t, raw_cut = _cut(raw, RAW_BYTES)
    req_t, req_cut = _cut(json.dumps(ex.request, indent=1, ensure_ascii=False), RAW_BYTES * 2)
    return Drawn(raw_t, raw_cut, len(raw), req_t, req_cut)


def flip_cards(inp: Inputs) -> tuple[list[dict[str, Any]], int]:
    rows, total = _card_rows(inp)
    cards = []
    for r in rows:
        key = (r["suite"], r["sample_id"], r["epoch"], r["mode"])
        d = (inp.drawn or {}).get(key)
        if d is None and key in inp.exchanges:
            d = drawn(inp.exchanges[key])
        tool_calls = None
        if d is not None:
            tool_calls = getattr((inp.shown or {}).get(key), "tool_calls", None)  # parsed once, by scoring (observations.jsonl)
        else:
            d = Drawn("", False, 0, "", False)
        cards.append({**r, "raw": d.raw, "raw_cut": d.raw_cut, "raw_len": d.raw_len, "request": d.request, "request_cut": d.request_cut,
                      "tool_calls": tool_calls, "diff": answer_diff(r["g_answer"], r["c_answer"])})
    return cards, total


def metric_tables(inp: Inputs) -> list[dict[str, Any]]:
    """Per suite: the metric rows (from the comparison, or the run's own summary in a single-run report)."""
    out = []
    if inp.doc is not None:
        for suite, s in inp.doc.suites.items():
            # the metric rows as the document holds them (a DataFrame aligns the keys one metric lacks)
            m = pd.DataFrame.from_dict({k: v.to_dict() for k, v in s.metrics.items()}, orient="index")
            rows = [{"metric": k, **v} for k, v in m.to_dict("index").items()] if len(m) else []
            sigs = [{"name": k, **v.to_dict()} for k, v in s.signals.items()]
            out.append({"suite": suite, "rows": rows, "signals": sigs, "drift": s.drift.to_dict(), "drift_parting": parting(s.drift), "paired": s.paired,
                        "golden_only": s.golden_only, "candidate_only": s.candidate_only,
                        "tool_trigger": s.tool_trigger, "answer_agreement": s.answer_agreement})
    else:
        for suite, counted in (inp.summary.suites if inp.summary is not None else {}).items():
            rows = [{"metric": k, "candidate": v.get("value"), "ci": v.get("ci"), "n": v.get("n")}
                    for k, v in counted.metrics.items()]
            out.append({"suite": suite, "rows": rows, "outcomes": counted.outcomes, "contract_rate": counted.contract_rate,
                        "infra_rate": counted.infra_rate, "version": counted.version})
    return out


def provenance(inp: Inputs) -> dict[str, Any]:
    """Endpoints, models, server info, harness and dataset hashes. Never header values (the run dir has only names)."""
    h = inp.header
    ep = dict(h.endpoint)
    ep.pop("headers", None)  # defensive: only header *names* are ever shown
    side: dict[str, dict[str, Any]] = {"candidate": {"run_id": h.run_id, "endpoint": ep, "harness": h.harness, "sampling": h.sampling,
                          "extra_body": h.extra_body, "started": h.started, "finished": h.finished,
                          "epochs": h.epochs, "modes": h.modes, "server_info": _pretty(h.server_info)}}
    suites: list[dict[str, Any]] = [{"suite": k, "run_version": v.version, "run_sha": v.dataset_sha256, "samples": v.samples}
                                   for k, v in h.suite_infos().items()]
    if inp.golden_header is not None:
        g = inp.golden_header
        src = g.source
        gep = dict(src.endpoint or {})
        gep.pop("headers", None)
        side["golden"] = {"run_id": src.run_id, "name": g.name, "endpoint": gep, "harness": src.harness,
                          "sampling": src.sampling, "extra_body": src.extra_body, "started": src.started,
                          "finished": src.finished, "epochs": g.epochs, "modes": list(g.modes),
                          "server_info": _pretty(src.server_info)}
        for s in suites:
            gs = g.suites.get(s["suite"])
            s.update(golden_version=gs.version if gs else None, golden_sha=gs.dataset_sha256 if gs else None)
    margins = ((inp.doc.golden if inp.doc is not None else None) or {}).get("margins_provenance")
    return {"sides": side, "suites": suites, "margins": _pretty(margins) if margins else None, "report_harness": __version__}


def _pretty(x: Any, limit: int = 20000) -> str | None:
    if not x:
        return None
    s = json.dumps(x, indent=1, sort_keys=True, ensure_ascii=False)
    return s if len(s) <= limit else s[:limit] + "\n… (truncated)"
