"""The reviewer's report: one self-contained HTML file, a pure function of (run, golden, comparison).

Nothing here reads a file other than the template: the caller passes the loaded run, the loaded
golden (or None for a single-run report) and the comparison document (or None).

Safety model (why the HTML is built the way it is):
- jinja2 autoescape renders every model output and request field as text;
- sample data for the JS table is JSON inside <script type="application/json"> with
  `<`, `>`, `&`, U+2028/9 escaped, and the JS writes it with textContent only;
- a Content-Security-Policy allows only our own script (by hash) and no network at
  all, so even an escaping bug could not run a planted <script> or onerror= handler.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import jinja2
import markupsafe
import pandas as pd

from verifier.report import colours
from verifier.attribution.document import Comparison
from verifier.attribution.explain import tool_call_line
from verifier.surfaces.registry import REFERENCE_MODE
from . import pictures
from .data import GoldenData, Inputs, RunData, anchor, fmt, inputs
from .views import (MAX_FLIP_CARDS, delta_chart, findings_view, fingerprint_view, flip_cards, metric_tables, perf,
                    provenance)

TEMPLATE = "report.html.j2"
TABLE_TEXT = 300            # per-cell text in the JS sample table: keeps a 10k-sample report a few MB


def render(run: RunData, golden: GoldenData | None, comparison: Comparison | None) -> str:
    """The report's HTML. Pure: the same three inputs always give the same text."""
    return render_inputs(inputs(run, golden, comparison))


def render_inputs(inp: Inputs) -> str:
    return environment().get_template(TEMPLATE).render(**context(inp))


def _compared_golden_name(doc: Comparison | None) -> Any:
    """The golden's name as the comparison recorded it (a report whose golden is gone still names it)."""
    return doc.golden_name if doc is not None else None


TABLE_COLS = ["anchor", "suite", "sample_id", "epoch", "mode", "flip", "g_outcome", "c_outcome", "g_score", "c_score",
              "g_answer", "c_answer", "c_reason", "c_findings", "new_findings", "g_prompt_tokens", "c_prompt_tokens",
              "g_finish_reason", "c_finish_reason", "c_latency_ms", "g_content", "c_content", "answer_changed", "pt_mismatch"]


def table_json(df: pd.DataFrame) -> str:
    """The sample table's data: columns + rows, long text cut, escaped for a <script type="application/json"> block."""
    sub = df[TABLE_COLS].astype(object)
    # Columns assigned as object Series: a plain list lets pandas infer its arrow-backed string dtype, which refuses a
    # lone surrogate (valid JSON, "\ud800", in an answer) and whose missing value is NaN, which is not JSON.
    for col in ("g_content", "c_content", "g_answer", "c_answer"):
        sub[col] = pd.Series([None if v is None else (v if len(v) <= TABLE_TEXT else v[:TABLE_TEXT] + "…") for v in sub[col]],
                             index=sub.index, dtype=object)
    for col in ("c_findings", "new_findings"):
        sub[col] = pd.Series([" ".join(v) if v else "" for v in sub[col]], index=sub.index, dtype=object)
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


BANNER_CLASS = {"pass": "ok", "inconclusive": "warn", "incomplete": "grey", "frontend_regression": "bad",
                "quantization_regression": "bad", "both": "bad", "regression_unattributed": "unattributed"}


def context(inp: Inputs) -> dict[str, Any]:
    doc = inp.doc
    cards, nflips = flip_cards(inp) if doc is not None else ([], 0)
    evidence = []
    if doc is not None:
        anchors = dict(zip(zip(inp.frame["suite"], inp.frame["sample_id"]), inp.frame["anchor"]))
        for side in ("frontend", "quantization"):
            for e in doc.side(side).evidence:
                evidence.append({**e.to_dict(), "side": side,
                                 "links": [{"id": s, "anchor": anchors.get((e.suite, s), anchor(s))} for s in e.samples or ()]})
    diagnosis = []
    if doc is not None:
        for d in doc.diagnosis or ():
            links = []
            for ref in d.examples:
                suite, _, sid = ref.partition("/")
                links.append({"id": ref, "anchor": anchors.get((suite, sid), anchor(sid))})
            diagnosis.append({**d.to_dict(), "links": links})
    gold = pictures.golden_index(inp.golden_obs)
    for c in cards:  # the token diff is of the reference record (chat, epoch 0): only on a card showing that record
        shows_reference = c["mode"] == REFERENCE_MODE and c["epoch"] == 0
        c["token_diff"] = pictures.sample_token_diff(inp, c["suite"], c["sample_id"], gold) if shows_reference else None
    carded = {(c["suite"], c["sample_id"]) for c in cards if c["token_diff"]}
    diffs: list[dict[str, Any]] = []
    for suite, sid in pictures.diff_candidates(inp, carded):
        td = pictures.sample_token_diff(inp, suite, sid, gold)
        if td:
            diffs.append({"suite": suite, "sample_id": sid, "anchor": anchors_of(inp).get((suite, sid), anchor(sid)), "diff": td})
    targets = carded | {(d["suite"], d["sample_id"]) for d in diffs}
    return {
        "drift_plots": pictures.drift_plots(inp, {(d["suite"], d["sample_id"]) for d in diffs}), "token_diffs": diffs,
        "forced_plots": pictures.teacher_forced_plots(inp),
        "token_scatter": {sc["suite"]: sc for sc in pictures.token_scatter(inp)}, "diff_targets": len(targets),
        "tool_calls": {suite: tool_call_line(s.tool_calls) for suite, s in (doc.suites if doc is not None else {}).items()},
        "diagnosis": diagnosis, "flips_by_mode": _flips_by_mode(doc),
        "title": f"verifier report: {inp.header.run_id}" + (f" vs {inp.golden_header.name}" if inp.golden_header else ""),
        "run_id": inp.header.run_id, "golden_name": (inp.golden_header.name if inp.golden_header else None) or _compared_golden_name(doc),
        "doc": doc, "banner_class": BANNER_CLASS.get(doc.status if doc is not None else "", "single"),
        "metrics": metric_tables(inp), "chart": delta_chart({k: s.metrics for k, s in doc.suites.items()}) if doc else None, "evidence": evidence,
        "findings": findings_view(inp), "fingerprint": fingerprint_view(inp), "flips": cards, "nflips": nflips,
        "max_cards": MAX_FLIP_CARDS, "perf": perf(inp), "prov": provenance(inp), "has_golden": inp.golden_header is not None,
        "nrows": len(inp.frame), "table_json": markupsafe.Markup(table_json(inp.frame)),
        "suites": sorted(inp.frame["suite"].unique().tolist()),
    }


def anchors_of(inp: Inputs) -> dict[tuple[str, str], str]:
    return dict(zip(zip(inp.frame["suite"], inp.frame["sample_id"]), inp.frame["anchor"]))


def _flips_by_mode(doc: Comparison | None) -> list[dict[str, Any]]:
    """Per suite and wire mode: how many answers regressed / improved (a streamed-only change counts)."""
    out = []
    for suite, s in (doc.suites if doc is not None else {}).items():
        for mode, f in sorted(s.flips_by_mode.items()):
            out.append({"suite": suite, "mode": mode, "regressed": len(f["regressed"]), "improved": len(f["improved"])})
    return out


# ----------------------------------------------------------------------------- rendering

def _csp_hash(js: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(str(js).encode("utf-8")).digest()).decode()


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Cached: compiling the template costs ~0.3 s, more than rendering a small report."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = fmt
    env.filters["csp_hash"] = _csp_hash
    env.globals["shown"] = colours.shown
    env.globals["status_colour"] = colours.STATUS_COLOUR
    return env
