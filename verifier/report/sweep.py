"""The sweep page and table: pure functions of the typed sweep table (`SweepTable` of `SweepRow`s, which
verifier/app/sweep.py builds from the configuration directories; its `to_json()` is sweep.json).

One row per configuration: gate status and diagnosis, drift and greedy parting rate against the golden, the
lossless check where the configuration claims it, then the speed figures with their intervals; rows on the
Pareto front (pass the gate, not dominated on speed) are marked. Self-contained HTML: inline CSS, the matrix's
sort script under a CSP hash, no network.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from verifier.report.matrix import SORT_JS
from verifier.report.matrix import _md_cell as _md  # the matrix's table-cell escaping: one Markdown dialect for both pages

@dataclass(frozen=True)
class Parting:
    """Greedy parting over every suite of a configuration's gate: `count` of `n` samples whose greedy output parted
    from the golden's, their `rate` (None: not measured), and the reference reruns' calibrated rate (the largest)."""

    count: int = 0
    n: int = 0
    rate: float | None = None
    reference_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "n": self.n, "rate": self.rate, "reference_rate": self.reference_rate}


@dataclass(frozen=True)
class Lossless:
    """A configuration's lossless claim, checked: `held` True / False, None when it could not be measured; `why`."""

    held: bool | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"held": self.held, "why": self.why}


@dataclass(frozen=True)
class SweepRow:
    """One configuration's row of sweep.json (app/sweep.row builds it from the configuration's directory)."""

    name: str
    status: str
    """The gate's status; `error` when the configuration could not run, `incomplete` when it has no comparison."""
    describe: Mapping[str, Any] = field(default_factory=dict)
    """The engine and its flags, or the endpoint (config.json's, never secrets)."""
    endpoint: Mapping[str, Any] | None = None
    """The endpoint as gated (redacted), None when it never started."""
    exit_code: int | None = None
    error: str | None = None
    diagnosis: str | None = None
    """The first diagnosed frontend component."""
    reason: str | None = None
    drift: float | None = None
    parting: Parting = Parting()
    teacher_forced_kl: float | None = None
    lossless: Lossless | None = None
    """None where the configuration claims nothing."""
    perf: Mapping[str, Any] = field(default_factory=dict)
    """The performance probe's headline figures (execution/perf.headline); {} when not measured."""
    warnings: Sequence[str] = ()
    dir: str = ""
    """The configuration directory's name, relative to the sweep directory."""
    front: bool = False
    """On the speed Pareto front (app/sweep.pareto)."""
    kl_front: bool = False
    """On the teacher-forced KL x tokens/s front."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "describe": dict(self.describe), "endpoint": self.endpoint, "status": self.status,
                "exit_code": self.exit_code, "error": self.error, "diagnosis": self.diagnosis, "reason": self.reason,
                "drift": self.drift, "parting": self.parting.to_json(), "teacher_forced_kl": self.teacher_forced_kl,
                "lossless": self.lossless.to_json() if self.lossless is not None else None, "perf": dict(self.perf),
                "warnings": list(self.warnings), "dir": self.dir, "front": self.front, "kl_front": self.kl_front}


@dataclass(frozen=True)
class SweepTable:
    """sweep.json: the rows over every configuration directory combined, against one golden (or the goldens'
    paths, when configurations were gated against the same golden at different paths)."""

    format: int
    golden: str | list[str]
    rows: tuple[SweepRow, ...]

    @property
    def front(self) -> list[str]:
        return [r.name for r in self.rows if r.front]

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "golden": self.golden, "rows": [r.to_json() for r in self.rows],
                "front": self.front}


# Status colours as the matrix and the report use them: green pass, amber undecided, red regressions.
STATUS_CLASS = {"pass": "v-pass", "inconclusive": "v-inconclusive", "incomplete": "v-incomplete", "error": "v-incomplete",
                "frontend_regression": "v-fail", "quantization_regression": "v-fail", "both": "v-fail",
                "regression_unattributed": "v-fail"}

COLUMNS = ("configuration", "status", "diagnosis", "drift", "parting", "lossless", "TTFT p50", "ITL", "tok/s per request",
           "aggregate tok/s", "latency p50 / p90 / p99", "client CPU", "front", "teacher-forced KL", "KL × tok/s front")


def _num(x: Any, unit: str = "", scale: float = 1.0, digits: int = 3) -> str:
    """Readable at a glance: 1,540 / 41.2 / 0.482; never scientific notation."""
    if x is None:
        return "—"
    v = x * scale
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.{digits}g}"
    return text + unit


def figure(f: Mapping[str, Any] | None, unit: str = "", scale: float = 1.0) -> str:
    """A mean with its 95% interval, e.g. `41.2 [39.8, 42.6] tok/s`; `—` when not measured."""
    if not f or f.get("mean") is None:
        return "—"
    ci = f.get("ci")
    tail = f" [{_num(ci[0], '', scale)}, {_num(ci[1], '', scale)}]" if ci else " (one round: no interval)"
    return f"{_num(f['mean'], '', scale)}{tail}{unit}"


def _parting(p: Parting) -> str:
    if p.rate is None:
        return "—"
    ref = p.reference_rate
    return f"{p.count}/{p.n} (reruns {ref if ref is not None else '—'})"


def _lossless(lo: Lossless | None) -> str:
    if lo is None:
        return "—"
    if lo.held is None:
        return "not measured"
    return "held" if lo.held else "NOT output-invariant"


REASON_CHARS = 140


def _short_reason(r: SweepRow) -> str:
    """A verdict names its cause: a row that is not a pass and has no frontend component (a numerics verdict, an
    inconclusive one) shows the gate's reason, cut to fit a cell (the whole of it is the cell's tooltip)."""
    reason = r.reason
    if r.status == "pass" or not isinstance(reason, str) or not reason:
        return "—"
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


def cells(r: SweepRow) -> list[str]:
    p = r.perf
    lat = " / ".join(_num((p.get(k) or {}).get("mean"), "", 1000, 4) for k in ("latency_p50_s", "latency_p90_s", "latency_p99_s"))
    return [
        r.name, f"{r.status}" + (f" ({r.exit_code})" if r.exit_code is not None else ""),
        r.diagnosis or r.error or _short_reason(r),
        _num(r.drift, digits=3), _parting(r.parting), _lossless(r.lossless),
        figure(p.get("ttft_p50_s"), " ms", 1000), figure(p.get("itl_mean_s"), " ms", 1000),
        figure(p.get("request_tokens_per_s")), figure(p.get("aggregate_tokens_per_s")),
        (lat + " ms") if p else "—",
        _num(p.get("client_cpu_ms_per_request"), " ms/req", digits=3) if p else "—",
        "★" if r.front else "",
        _num(r.teacher_forced_kl, digits=3), "◆" if r.kl_front else "",
    ]


def markdown(table: SweepTable) -> str:
    rows = table.rows
    lines = [f"## verifier sweep vs golden `{table.golden}`", "",
             f"{len(rows)} configurations; ★ = passes the gate and no passing configuration is faster on every speed "
             "figure beyond the intervals (the Pareto front); ◆ = no configuration has both a lower teacher-forced KL and "
             "more aggregate tokens/s (the KL × tok/s front).", "",
             "| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(_md(c) for c in cells(r)) + " |")
    notes = [f"- `{r.name}`: {r.lossless.why}" for r in rows if r.lossless is not None and r.lossless.held is False]
    notes += [f"- `{r.name}`: {w}" for r in rows for w in r.warnings]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def _sort_key(r: SweepRow, i: int) -> str:
    p = r.perf
    keys = {1: r.exit_code if r.exit_code is not None else 99, 3: r.drift,
            4: r.parting.rate,
            6: (p.get("ttft_p50_s") or {}).get("mean"), 7: (p.get("itl_mean_s") or {}).get("mean"),
            8: (p.get("request_tokens_per_s") or {}).get("mean"), 9: (p.get("aggregate_tokens_per_s") or {}).get("mean"),
            10: (p.get("latency_p50_s") or {}).get("mean"), 11: p.get("client_cpu_ms_per_request"), 12: 1 if r.front else 0,
            13: r.teacher_forced_kl, 14: 1 if r.kl_front else 0}
    v = keys.get(i)
    return "" if v is None else str(v)


def html(table: SweepTable) -> str:
    e = _html.escape
    rows = table.rows
    csp = "sha256-" + base64.b64encode(hashlib.sha256(SORT_JS.encode()).digest()).decode()
    head = "".join(f'<th data-col="{i}">{e(c)}</th>' for i, c in enumerate(COLUMNS))
    body = []
    for r in rows:
        tds = []
        for i, c in enumerate(cells(r)):
            cls = ""
            if i == 1:
                cls = STATUS_CLASS.get(r.status, "v-inconclusive")
            elif i == 5 and r.lossless is not None:
                cls = "v-incomplete" if r.lossless.held is None else "v-pass" if r.lossless.held else "v-fail"
            title = ""
            if i == 2 and r.reason:
                title = f' title="{e(r.reason)}"'
            elif i == 5 and r.lossless is not None:
                title = f' title="{e(r.lossless.why)}"'
            tds.append(f'<td class="{cls}" data-key="{e(_sort_key(r, i))}"{title}>{e(c)}</td>')
        link = f'<a href="{e(r.dir)}/gate/report.html">report</a>'
        body.append(f'<tr data-config="{e(r.name)}"{" class=front" if r.front else ""}>' + "".join(tds)
                    + f"<td>{link}</td></tr>")
    notes = [f"<li><code>{e(r.name)}</code>: {e(w)}</li>" for r in rows for w in r.warnings]
    notes += [f"<li><code>{e(r.name)}</code>: {e(r.lossless.why)}</li>" for r in rows
              if r.lossless is not None and r.lossless.held is False]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src '{csp}'; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>verifier sweep: {e(str(table.golden))}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1a1a1a; }}
h1 {{ font-size: 1.3rem; }} table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border: 1px solid #ccc; padding: .35rem .5rem; vertical-align: top; text-align: left; }}
th[data-col] {{ cursor: pointer; background: #f3f3f3; user-select: none; white-space: nowrap; }}
th[data-dir=asc]::after {{ content: " ▲"; }} th[data-dir=desc]::after {{ content: " ▼"; }}
.v-pass {{ background: #e3f6e3; }} .v-fail {{ background: #fbe0e0; }} .v-inconclusive {{ background: #fff4d6; }}
.v-incomplete {{ background: #e8e8e8; }} tr.front td:first-child {{ font-weight: 600; }} .muted {{ color: #666; }}
</style></head><body>
<h1>verifier sweep vs golden <code>{e(str(table.golden))}</code></h1>
<p class="muted">{len(rows)} configurations. ★ marks the Pareto front: configurations that pass the gate and that no other
passing configuration beats on every speed figure beyond the 95% intervals. Speed is measured from the client; figures
are means over rounds with 95% intervals. Click a column header to sort.</p>
<table id="matrix"><thead><tr>{head}<th>report</th></tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table>
{"<h2>Notes</h2><ul>" + "".join(notes) + "</ul>" if notes else ""}
<script>{SORT_JS}</script>
</body></html>
"""
