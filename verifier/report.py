"""The reviewer's report (one self-contained HTML file), JUnit XML and a Markdown summary for CI.

Everything here is a pure function of the run directory, the golden and the
comparison document: no network, nothing written except the requested outputs.

Safety model (why the HTML is built the way it is):
- jinja2 autoescape renders every model output and request field as text;
- sample data for the JS table is JSON inside <script type="application/json"> with
  `<`, `>`, `&`, U+2028/9 escaped, and the JS writes it with textContent only;
- a Content-Security-Policy allows only our own script (by hash) and no network at
  all, so even an escaping bug could not run a planted <script> or onerror= handler.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import html as _html
import json
import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from . import __version__, journal, scoring
from .parse import MalformedBody, parse_exchange
from .types import Exchange

TEMPLATE = "report.html.j2"
MAX_CONTENT = 4000          # same cap as goldens: both sides of a diff are cut alike
TABLE_TEXT = 300            # per-cell text in the JS sample table: keeps a 10k-sample report a few MB
RAW_BYTES = 4096            # raw response / request shown in a flip card
MAX_FLIP_CARDS = 100        # flip cards rendered server-side; the rest stay reachable via the table filter
FINDING_EXAMPLES = 5
KEYS = ["suite", "sample_id", "epoch", "mode"]
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


# ----------------------------------------------------------------------------- loading

@dataclass
class Inputs:
    run_dir: Path
    header: dict[str, Any]
    summary: dict[str, Any]
    doc: dict[str, Any] | None
    golden_meta: dict[str, Any] | None
    frame: pd.DataFrame                     # one row per (suite, sample, epoch, mode), columns c_* and g_*
    exchanges: dict[tuple[str, str, int, str], Exchange]
    findings: pd.DataFrame                  # candidate findings with detail: suite, sample_id, mode, code, detail


def _usage_error(msg: str) -> Exception:
    from .errors import UsageError

    return UsageError(msg)


def _candidate(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[Any, Exchange]]:
    """Verdicts joined with the parsed journal, read once (the golden observations shape, plus finding details)."""
    if not (run_dir / scoring.VERDICTS).exists():
        from .app import score

        score(run_dir)
    verdicts = scoring.read_verdicts(run_dir)
    exchanges = journal.read_exchanges(run_dir)
    rows, finds = [], []
    for v in verdicts:
        ex = exchanges.get((v.suite, v.sample_id, v.epoch, v.mode))
        content = None
        if ex is not None and v.outcome in ("content", "contract"):
            try:
                content = (parse_exchange(ex).content or "")[:MAX_CONTENT]
            except MalformedBody:
                pass
        rows.append({
            "suite": v.suite, "sample_id": v.sample_id, "epoch": v.epoch, "mode": v.mode,
            "outcome": v.outcome, "score": v.score, "answer": _j(v.answer), "reason": v.reason,
            "findings": sorted({f.code for f in v.findings}), "prompt_tokens": v.signals.get("prompt_tokens"),
            "completion_tokens": v.signals.get("completion_tokens"), "finish_reason": v.signals.get("finish_reason"),
            "latency_ms": v.signals.get("latency_ms"), "content": content,
        })
        for f in v.findings:
            finds.append({"suite": v.suite, "sample_id": v.sample_id, "mode": v.mode, "code": f.code, "detail": f.detail[:300]})
    return rows, finds, exchanges


def _j(x: Any) -> str | None:
    return None if x is None else json.dumps(x, sort_keys=True, ensure_ascii=False)


def _frame(cand: list[dict[str, Any]], gold: list[dict[str, Any]] | None, doc: dict[str, Any] | None) -> pd.DataFrame:
    cols = ["outcome", "score", "answer", "reason", "findings", "prompt_tokens", "completion_tokens", "finish_reason", "latency_ms", "content"]
    # dtype=object: no per-column type inference (pandas' arrow strings cost ~0.4 s at 10k rows and buy nothing here).
    c = pd.DataFrame(cand, columns=KEYS + cols, dtype=object).rename(columns={k: "c_" + k for k in cols})
    if gold is not None:
        g = pd.DataFrame([{k: (_j(o.get(k)) if k == "answer" else o.get(k)) for k in KEYS + cols} for o in gold], columns=KEYS + cols, dtype=object)
        g = g.rename(columns={k: "g_" + k for k in cols})
        df = c.merge(g, on=KEYS, how="outer")
    else:
        df = c.assign(**{"g_" + k: None for k in cols})
    df = df.sort_values(KEYS, kind="stable").reset_index(drop=True)
    df = df.astype(object).where(df.notna(), None)
    for col in ("epoch", "c_prompt_tokens", "g_prompt_tokens", "c_completion_tokens", "g_completion_tokens"):
        df[col] = [None if v is None else int(v) for v in df[col]]  # an outer merge turned them into floats
    flips: dict[tuple[str, str], str] = {}
    for suite, s in ((doc or {}).get("suites") or {}).items():
        for kind in ("regressed", "improved"):
            for sid in s.get("flips", {}).get(kind, []):
                flips[(suite, sid)] = kind
    ids_per_suite = df.groupby("sample_id")["suite"].nunique()
    shared = set(ids_per_suite[ids_per_suite > 1].index)
    df["anchor"] = [anchor(f"{su}/{sid}" if sid in shared else sid) for su, sid in zip(df["suite"], df["sample_id"])]
    df["flip"] = [flips.get(k, "") for k in zip(df["suite"], df["sample_id"])]
    df["new_findings"] = [sorted(set(cf or []) - set(gf or [])) if gf is not None else [] for cf, gf in zip(df["c_findings"], df["g_findings"])]
    df["answer_changed"] = [g is not None and c_ is not None and g != c_ for g, c_ in zip(df["g_answer"], df["c_answer"])]
    df["pt_mismatch"] = [g is not None and c_ is not None and g != c_ for g, c_ in zip(df["g_prompt_tokens"], df["c_prompt_tokens"])]
    return df


def anchor(sample_id: str) -> str:
    """A stable, HTML-id-safe form of a sample id: [A-Za-z0-9-] kept, anything else as _<hex>_ (reversible)."""
    return re.sub(r"[^A-Za-z0-9-]", lambda m: f"_{ord(m.group(0)):x}_", sample_id)


def load(run_dir: Path, golden_path: str | Path | None, doc: dict[str, Any] | None) -> Inputs:
    from . import golden as golden_mod

    run_dir = Path(run_dir)
    try:
        header = journal.check_run_dir(run_dir)
    except journal.NotARunDir as e:
        raise _usage_error(str(e)) from None
    cand, finds, exchanges = _candidate(run_dir)
    sp = run_dir / scoring.SUMMARY
    summary = json.loads(sp.read_text(encoding="utf-8")) if sp.exists() else {"suites": {}}
    gmeta = gobs = None
    if golden_path is None and doc is not None:
        golden_path = (doc.get("golden") or {}).get("path")
    if golden_path is not None:
        if doc is None:
            doc = _comparison(run_dir, str(golden_path))
        try:
            gmeta, gobs = golden_mod.load(Path(golden_path))
        except golden_mod.BadGolden:
            gmeta = gobs = None  # the golden moved since compare ran: the report still shows the comparison
    frame = _frame(cand, gobs, doc)
    fdf = pd.DataFrame(finds, columns=["suite", "sample_id", "mode", "code", "detail"])
    return Inputs(run_dir, header, summary, doc, gmeta, frame, exchanges, fdf)


def _comparison(run_dir: Path, golden_path: str) -> dict[str, Any]:
    """RUN_DIR/comparison.json when it was made against this golden; otherwise compare now (without overwriting it)."""
    cp = run_dir / "comparison.json"
    if cp.exists():
        doc = json.loads(cp.read_text(encoding="utf-8"))
        if (doc.get("golden") or {}).get("name") == Path(golden_path).name:
            return doc
    from .app_gate import compare_run

    if cp.exists():
        with tempfile.TemporaryDirectory() as td:
            return compare_run(run_dir, golden_path, Path(td) / "comparison.json", 0.02)
    return compare_run(run_dir, golden_path, None, 0.02)


# ----------------------------------------------------------------------------- view model

def _num(x: Any) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def delta_chart(doc: dict[str, Any]) -> dict[str, Any]:
    """Per metric: delta with its interval, against -margin. Geometry computed here so the template only draws."""
    rows = []
    for suite, s in doc.get("suites", {}).items():
        for m, v in s.get("metrics", {}).items():
            if v.get("delta") is None:
                continue
            rows.append({"label": f"{suite}/{m}", "delta": v["delta"], "lo": v["ci"][0], "hi": v["ci"][1], "margin": v["margin"], "verdict": v["verdict"]})
    span = max([0.05] + [abs(x) * 1.15 for r in rows for x in (r["delta"], r["lo"], r["hi"], r["margin"]) if x is not None])
    x0, w = 190.0, 420.0

    def x(v: float) -> float:
        return round(x0 + (v + span) / (2 * span) * w, 1)

    for i, r in enumerate(rows):
        r.update(y=30 + i * 26, x_lo=x(r["lo"]), x_hi=x(r["hi"]), x_d=x(r["delta"]), x_m=x(-r["margin"]))
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
    sides = ["candidate"] + (["golden"] if inp.golden_meta is not None else [])
    lat_rows, series = [], {}
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
    wall = _wall(inp.header.get("started"), inp.header.get("finished"))
    recorded = int(df["c_outcome"].notna().sum())
    through = {"wall_s": wall, "requests": recorded,
               "req_s": round(recorded / wall, 2) if wall else None,
               "tok_s": round(lat_rows[0]["tokens"] / wall, 1) if wall and lat_rows[0]["tokens"] else None}
    infra = df[df["c_outcome"] == "infra"]
    reasons = infra["c_reason"].astype(str).value_counts()
    return {"latency": lat_rows, "throughput": through, "hist": histogram(series), "finish": finish_mix(df, sides),
            "infra": (inp.doc or {}).get("infra") or {"count": len(infra), "total": recorded,
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
    doc_counts: dict[str, dict[str, int]] = {}
    for s in ((inp.doc or {}).get("suites") or {}).values():
        for code, c in s.get("findings", {}).items():
            d = doc_counts.setdefault(code, {"golden": 0, "candidate": 0})
            d["golden"] += c["golden"]
            d["candidate"] += c["candidate"]
    out = []
    f = inp.findings
    codes = sorted(set(f["code"]) | set(doc_counts))
    grouped = {k: g for k, g in f.groupby("code")} if len(f) else {}
    for code in codes:
        g = grouped.get(code, f.iloc[0:0])
        ex = [{"anchor": anchors.get((r.suite, r.sample_id), anchor(r.sample_id)), "suite": r.suite, "sample_id": r.sample_id,
               "mode": r.mode, "detail": r.detail} for r in g.drop_duplicates(["suite", "sample_id"]).head(FINDING_EXAMPLES).itertuples()]
        dc = doc_counts.get(code, {})
        out.append({"code": code, "records": len(g), "samples": g[["suite", "sample_id"]].drop_duplicates().shape[0],
                    "golden": dc.get("golden"), "candidate": dc.get("candidate"), "examples": ex})
    return sorted(out, key=lambda r: (-(r["candidate"] or r["samples"]), r["code"]))


def fingerprint_view(inp: Inputs) -> list[dict[str, Any]]:
    """Prompt-token fingerprint per suite: how many samples moved, by how much (a template bug shifts them all alike)."""
    df = inp.frame
    out = []
    for suite, g in df.groupby("suite", sort=True):
        per = g.groupby("sample_id").agg(anchor=("anchor", "first"), g=("g_prompt_tokens", "first"), c=("c_prompt_tokens", "first"))
        if inp.golden_meta is None:
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
            x = json.loads(x)
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
    fg = _flatten(json.loads(g)) if g is not None else {}
    fc = _flatten(json.loads(c)) if c is not None else {}
    return [{"path": p, "g": fg.get(p), "c": fc.get(p), "diff": fg.get(p) != fc.get(p)} for p in sorted(set(fg) | set(fc))]


def _cut(text: str | None, n: int) -> tuple[str, bool]:
    if text is None:
        return "", False
    return (text[:n], len(text) > n)


def flip_cards(inp: Inputs) -> tuple[list[dict[str, Any]], int]:
    df = inp.frame
    flipped = df[df["flip"] != ""]
    # One card per sample: its chat/epoch-0 record when there is one (the one drift is measured on).
    flipped = flipped.assign(_pref=[0 if (m == "chat" and e == 0) else 1 for m, e in zip(flipped["mode"], flipped["epoch"])])
    flipped = flipped.sort_values(["flip", "_pref"], ascending=[False, True], kind="stable").drop_duplicates(["suite", "sample_id"])
    total = len(flipped)
    cards = []
    for r in flipped.head(MAX_FLIP_CARDS).to_dict("records"):
        ex = inp.exchanges.get((r["suite"], r["sample_id"], r["epoch"], r["mode"]))
        raw = req = tool_calls = None
        if ex is not None:
            raw = ex.body if ex.body is not None else "\n".join(ex.chunks or [])
            req = json.dumps(ex.request, indent=1, ensure_ascii=False)
            try:
                tc = parse_exchange(ex).tool_calls
                tool_calls = json.dumps(tc, indent=1, ensure_ascii=False) if tc else None
            except MalformedBody:
                pass
        raw_t, raw_cut = _cut(raw, RAW_BYTES)
        req_t, req_cut = _cut(req, RAW_BYTES * 2)
        cards.append({**r, "raw": raw_t, "raw_cut": raw_cut, "raw_len": len(raw or ""), "request": req_t, "request_cut": req_cut,
                      "tool_calls": tool_calls, "diff": answer_diff(r["g_answer"], r["c_answer"])})
    return cards, total


TABLE_COLS = ["anchor", "suite", "sample_id", "epoch", "mode", "flip", "g_outcome", "c_outcome", "g_score", "c_score",
              "g_answer", "c_answer", "c_reason", "c_findings", "new_findings", "g_prompt_tokens", "c_prompt_tokens",
              "g_finish_reason", "c_finish_reason", "c_latency_ms", "g_content", "c_content", "answer_changed", "pt_mismatch"]


def table_json(df: pd.DataFrame) -> str:
    """The sample table's data: columns + rows, long text cut, escaped for a <script type="application/json"> block."""
    sub = df[TABLE_COLS].copy()
    for col in ("g_content", "c_content", "g_answer", "c_answer"):
        sub[col] = [None if v is None else (v if len(v) <= TABLE_TEXT else v[:TABLE_TEXT] + "…") for v in sub[col]]
    for col in ("c_findings", "new_findings"):
        sub[col] = [" ".join(v) if v else "" for v in sub[col]]
    # Assigning lists with None lets pandas infer a string dtype whose missing value is NaN, which is not JSON.
    sub = sub.astype(object)
    rows = sub.where(sub.notna(), None).to_numpy().tolist()
    return script_json({"cols": TABLE_COLS, "rows": rows})


def script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no `</script>`, no `<!--`, no line separators that break JS parsers."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_json_default, allow_nan=False)
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _json_default(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()  # numpy scalars
    raise TypeError(type(x).__name__)


def metric_tables(inp: Inputs) -> list[dict[str, Any]]:
    """Per suite: the metric rows (from the comparison, or the run's own summary in a single-run report)."""
    out = []
    if inp.doc is not None:
        for suite, s in inp.doc.get("suites", {}).items():
            m = pd.DataFrame.from_dict(s.get("metrics", {}), orient="index")
            rows = [{"metric": k, **v} for k, v in m.to_dict("index").items()] if len(m) else []
            sigs = [{"name": k, **v} for k, v in s.get("signals", {}).items()]
            out.append({"suite": suite, "rows": rows, "signals": sigs, "drift": s.get("drift"), "paired": s.get("paired"),
                        "golden_only": s.get("golden_only"), "candidate_only": s.get("candidate_only"),
                        "tool_trigger": s.get("tool_trigger"), "answer_agreement": s.get("answer_agreement")})
    else:
        for suite, s in inp.summary.get("suites", {}).items():
            rows = [{"metric": k, "candidate": v.get("value"), "ci": v.get("ci"), "n": v.get("n")} for k, v in s.get("metrics", {}).items()]
            out.append({"suite": suite, "rows": rows, "outcomes": s.get("outcomes"), "contract_rate": s.get("contract_rate"),
                        "infra_rate": s.get("infra_rate"), "version": s.get("version")})
    return out


def provenance(inp: Inputs) -> dict[str, Any]:
    """Endpoints, models, server info, harness and dataset hashes. Never header values (the run dir has only names)."""
    h = inp.header
    ep = dict(h.get("endpoint") or {})
    ep.pop("headers", None)  # defensive: only header *names* are ever shown
    side = {"candidate": {"run_id": h.get("run_id"), "endpoint": ep, "harness": h.get("harness"), "sampling": h.get("sampling"),
                          "extra_body": h.get("extra_body"), "started": h.get("started"), "finished": h.get("finished"),
                          "epochs": h.get("epochs"), "modes": h.get("modes"), "server_info": _pretty(h.get("server_info"))}}
    suites = [{"suite": k, "run_version": v.get("version"), "run_sha": v.get("dataset_sha256"), "samples": v.get("samples")}
              for k, v in sorted((h.get("suites") or {}).items())]
    if inp.golden_meta is not None:
        g = inp.golden_meta
        src = g.get("source") or {}
        gep = dict(src.get("endpoint") or {})
        gep.pop("headers", None)
        side["golden"] = {"run_id": src.get("run_id"), "name": g.get("name"), "endpoint": gep, "harness": src.get("harness"),
                          "sampling": src.get("sampling"), "extra_body": src.get("extra_body"), "started": src.get("started"),
                          "finished": src.get("finished"), "epochs": g.get("epochs"), "modes": g.get("modes"),
                          "server_info": _pretty(src.get("server_info"))}
        for s in suites:
            gs = (g.get("suites") or {}).get(s["suite"]) or {}
            s.update(golden_version=gs.get("version"), golden_sha=gs.get("dataset_sha256"))
    margins = ((inp.doc or {}).get("golden") or {}).get("margins_provenance")
    return {"sides": side, "suites": suites, "margins": _pretty(margins) if margins else None, "report_harness": __version__}


def _pretty(x: Any, limit: int = 20000) -> str | None:
    if not x:
        return None
    s = json.dumps(x, indent=1, sort_keys=True, ensure_ascii=False)
    return s if len(s) <= limit else s[:limit] + "\n… (truncated)"


BANNER_CLASS = {"pass": "ok", "inconclusive": "warn", "incomplete": "grey", "frontend_regression": "bad",
                "quantization_regression": "bad", "both": "bad"}


def context(inp: Inputs) -> dict[str, Any]:
    doc = inp.doc
    cards, nflips = flip_cards(inp) if doc is not None else ([], 0)
    evidence = []
    if doc is not None:
        anchors = dict(zip(zip(inp.frame["suite"], inp.frame["sample_id"]), inp.frame["anchor"]))
        for side in ("frontend", "quantization"):
            for e in doc[side]["evidence"]:
                evidence.append({**e, "side": side, "links": [{"id": s, "anchor": anchors.get((e["suite"], s), anchor(s))} for s in e.get("samples", [])]})
    return {
        "title": f"verifier report: {inp.header.get('run_id')}" + (f" vs {inp.golden_meta.get('name')}" if inp.golden_meta else ""),
        "run_id": inp.header.get("run_id"), "golden_name": (inp.golden_meta or {}).get("name") or ((doc or {}).get("golden") or {}).get("name"),
        "doc": doc, "banner_class": BANNER_CLASS.get((doc or {}).get("status", ""), "single"),
        "metrics": metric_tables(inp), "chart": delta_chart(doc) if doc else None, "evidence": evidence,
        "findings": findings_view(inp), "fingerprint": fingerprint_view(inp), "flips": cards, "nflips": nflips,
        "max_cards": MAX_FLIP_CARDS, "perf": perf(inp), "prov": provenance(inp), "has_golden": inp.golden_meta is not None,
        "nrows": len(inp.frame), "table_json": jinja2.utils.markupsafe.Markup(table_json(inp.frame)),
        "suites": sorted(inp.frame["suite"].unique().tolist()),
    }


# ----------------------------------------------------------------------------- rendering

def _fmt(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_fmt(v, digits) for v in x) + "]"
    return str(x)


def _csp_hash(js: str) -> str:
    import base64

    return "sha256-" + base64.b64encode(hashlib.sha256(str(js).encode("utf-8")).digest()).decode()


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Cached: compiling the template costs ~0.3 s, more than rendering a small report."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = _fmt
    env.filters["csp_hash"] = _csp_hash
    return env


def render_html(run_dir: Path | str, golden_path: str | Path | None, doc: dict[str, Any] | None) -> str:
    inp = load(Path(run_dir), golden_path, doc)
    return environment().get_template(TEMPLATE).render(**context(inp))


def samples_frame(inp: Inputs) -> pd.DataFrame:
    """The per-sample comparison as a flat table (what --csv writes)."""
    df = inp.frame.drop(columns=["anchor"]).copy()
    for col in ("c_findings", "g_findings", "new_findings"):
        df[col] = [" ".join(v) if isinstance(v, list) else (v or "") for v in df[col]]
    return df


def write_csv(inp: Inputs, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    samples_frame(inp).to_csv(path, index=False)


# ----------------------------------------------------------------------------- CI outputs

def junit_xml(doc: dict[str, Any]) -> str:
    """One <testcase> per gate check: every frontend/quantization evidence item, plus the infra budget."""
    suite = ET.Element("testsuite", name="verifier gate")
    cases = []
    for side in ("frontend", "quantization"):
        for e in doc[side]["evidence"]:
            name = f"{e['suite']}: {e['signal']}" + (f"/{e['metric']}" if e.get("metric") else "")
            cases.append((f"verifier.{side}", name, e["verdict"], e["summary"] + (f"\nsamples: {', '.join(e['samples'])}" if e.get("samples") else "")))
    inf = doc["infra"]
    over = inf["rate"] is not None and inf["rate"] > inf["budget"]
    cases.append(("verifier.infra", "infra error budget", "fail" if over else "pass",
                  f"infra errors {inf['count']}/{inf['total']} (rate {inf['rate']}, budget {inf['budget']})"))
    fails = skips = 0
    for cls, name, verdict, text in cases:
        tc = ET.SubElement(suite, "testcase", classname=cls, name=name)
        if verdict == "fail":
            fails += 1
            f = ET.SubElement(tc, "failure", message=text.splitlines()[0][:500], type=verdict)
            f.text = text
        elif verdict == "inconclusive":
            # Neither pass nor fail: visible in CI as skipped with the reason, the exit code decides the job.
            skips += 1
            ET.SubElement(tc, "skipped", message="inconclusive: " + text.splitlines()[0][:500])
        ET.SubElement(tc, "system-out").text = text
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(fails))
    suite.set("skipped", str(skips))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="verifier", tests=str(len(cases)), failures=str(fails))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️"}
STATUS_ICON = {"pass": "✅", "inconclusive": "⚠️", "incomplete": "⛔", "frontend_regression": "❌", "quantization_regression": "❌", "both": "❌"}


def _md(x: Any) -> str:
    """A Markdown table cell: no pipes or newlines from model output, HTML-escaped (GitHub renders inline HTML)."""
    return _html.escape(_fmt(x), quote=False).replace("|", "\\|").replace("\n", " ")[:120]


def markdown(doc: dict[str, Any], report_path: str | None = None, top_flips: int = 10) -> str:
    lines = [f"## verifier: {STATUS_ICON.get(doc['status'], '')} `{doc['status']}` (exit {doc['exit_code']})", "",
             f"{_md(doc['meaning'])}", "",
             f"- frontend: {ICON.get(doc['frontend']['verdict'], '')} **{doc['frontend']['verdict']}**",
             f"- quantization: {ICON.get(doc['quantization']['verdict'], '')} **{doc['quantization']['verdict']}**",
             f"- infra errors: {doc['infra']['count']}/{doc['infra']['total']} (budget {doc['infra']['budget']:.0%})"]
    g = doc.get("golden") or {}
    if g.get("name"):
        lines.append(f"- golden: `{_md(g['name'])}`, run: `{_md((doc.get('run') or {}).get('run_id'))}`")
    lines += ["", "| suite | metric | golden | candidate | delta | CI | margin | p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for suite, s in doc.get("suites", {}).items():
        for m, v in s.get("metrics", {}).items():
            lines.append(f"| {_md(suite)} | {_md(m)} | {_md(v['golden'])} | {_md(v['candidate'])} | {_md(v['delta'])} | {_md(v['ci'])} | "
                         f"{_md(v['margin'])} | {_md(v['p_value'])} | {ICON.get(v['verdict'], '')} {v['verdict']} |")
    fired = [e for side in ("frontend", "quantization") for e in doc[side]["evidence"] if e["verdict"] != "pass"]
    lines += ["", "### Signals that fired" if fired else "### Signals: none fired", ""]
    for e in fired:
        lines.append(f"- {ICON.get(e['verdict'], '')} {_md(e['suite'])}: {_md(e['summary'])}")
    flips = [(suite, sid) for suite, s in doc.get("suites", {}).items() for sid in s.get("flips", {}).get("regressed", [])]
    if flips:
        lines += ["", f"### Top regressed samples ({len(flips)} in all)", ""]
        lines += [f"- `{_md(suite)}/{_md(sid)}`" for suite, sid in flips[:top_flips]]
    if report_path:
        lines += ["", f"Full report: `{_md(report_path)}`"]
    return "\n".join(lines) + "\n"


def write_all(run_dir: Path | str, doc: dict[str, Any], html: str | Path | None = None, junit: str | Path | None = None,
              markdown: str | Path | None = None, csv: str | Path | None = None) -> dict[str, Path]:
    """Everything CI keeps from a gate: report.html, junit.xml, summary.md (+ $GITHUB_STEP_SUMMARY), samples.csv."""
    run_dir = Path(run_dir)
    paths = {"html": Path(html) if html else run_dir / "report.html", "junit": Path(junit) if junit else run_dir / "junit.xml",
             "markdown": Path(markdown) if markdown else run_dir / "summary.md", "csv": Path(csv) if csv else run_dir / "samples.csv"}
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    inp = load(run_dir, None, doc)
    paths["html"].write_text(environment().get_template(TEMPLATE).render(**context(inp)), encoding="utf-8")
    write_csv(inp, paths["csv"])
    paths["junit"].write_text(junit_xml(doc), encoding="utf-8")
    md = _markdown(doc, str(paths["html"]))
    paths["markdown"].write_text(md, encoding="utf-8")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(md)
    return paths


_markdown = markdown  # write_all's parameter named `markdown` shadows the function


# ----------------------------------------------------------------------------- command

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="scored (or scorable) run directory")
    p.add_argument("--golden", help="golden directory: compare against it (uses RUN_DIR/comparison.json when made against it)")
    p.add_argument("-o", "--out", help="HTML file to write (default RUN_DIR/report.html)")
    p.add_argument("--csv", help="also write the per-sample comparison as CSV to this file")


def run(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    inp = load(run_dir, a.golden, None)
    out = Path(a.out) if a.out else run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(environment().get_template(TEMPLATE).render(**context(inp)), encoding="utf-8")
    if a.csv:
        write_csv(inp, Path(a.csv))
    status = (inp.doc or {}).get("status", "single run")
    print(f"report: {out} ({status}, {len(inp.frame)} records)")
    return 0
