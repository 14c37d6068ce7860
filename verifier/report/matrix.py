"""A vendor matrix: N candidate runs (one per provider) against one golden, as one HTML page and one Markdown table.

Pure functions of the documents each run directory already holds, read for it by app/report_files.matrix_entry:
`comparison.json` (verdicts, evidence, metrics with intervals, infra rate) and `summary.json` (latency). Nothing
here reads a file, compares or scores; a row (`MatrixRow`, of the `Matrix` whose `to_json()` is matrix.json) is what
the comparison said, cut per suite:

- frontend / quantization verdict of a suite: the worst verdict among that side's evidence for the suite
  (fail > inconclusive > pass), else the document's overall verdict;
- top evidence: the first failing, else the first inconclusive, evidence line of the suite;
- key metrics: every metric of the suite as golden -> candidate, delta with its interval, and verdict.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence
from verifier import safewrite
from verifier.attribution.document import Comparison, SideCounts, SuiteResult
from verifier.types import RunSummary

from verifier.report import colours
from verifier.attribution.explain import cut_words, tool_call_line

RANK = {"fail": 2, "inconclusive": 1, "pass": 0}
TEMPLATES = Path(__file__).parent / "templates"  # the report package's own, covered by the same package data
FILES = ("matrix.html", "matrix.md", "matrix.json")


@dataclass(frozen=True)
class Entry:
    """One provider's gate, as read from its run directory (app/report_files.matrix_entry): typed values only."""

    provider: str
    """The name shown in the matrix (unique)."""
    comparison: Comparison
    """Its comparison against the matrix's golden."""
    report: Path | None
    """The run's report.html when it renders the comparison the row shows (the run's own); None when there is none:
    a run never reported, or a comparison the matrix made in memory (the run's report, if any, shows another one).
    The row then says so and links its comparison."""
    comparison_file: Path
    """The comparison.json the row shows: the run's, or the one the matrix made in memory and wrote elsewhere."""
    summary: RunSummary | None = None
    """Its summary.json (latency), when present."""


@dataclass(frozen=True)
class MetricCell:
    """One metric of a row: golden -> candidate, the delta with its interval, the verdict (comparison's MetricResult)."""

    name: str
    golden: float | None
    candidate: float | None
    delta: float | None
    ci: Sequence[float | None] | None
    verdict: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "golden": self.golden, "candidate": self.candidate, "delta": self.delta,
                "ci": self.ci, "verdict": self.verdict}


@dataclass(frozen=True)
class MatrixRow:
    """One provider's suite: matrix.json's row, the page's and the table's line."""

    provider: str
    suite: str
    status: str
    exit_code: int
    frontend: str
    """The worst frontend verdict among the suite's evidence, else the side's."""
    quantization: str
    metrics: tuple[MetricCell, ...]
    evidence: str
    """The first failing, else inconclusive, evidence line ("" when none)."""
    tool_calls: str | None
    diagnosis: tuple[str, ...]
    missing: tuple[str, ...]
    """For an incomplete gate: what is missing."""
    infra_rate: float | None
    latency_ms: Mapping[str, float] | None
    paired: int
    report: str | None
    """The provider's report, relative to the matrix page; None when it has none (the row links its comparison)."""
    comparison: str
    endpoint: str | None

    def to_json(self) -> dict[str, Any]:
        return {"provider": self.provider, "suite": self.suite, "status": self.status, "exit_code": self.exit_code,
                "frontend": self.frontend, "quantization": self.quantization,
                "metrics": [m.to_json() for m in self.metrics], "evidence": self.evidence, "tool_calls": self.tool_calls,
                "diagnosis": list(self.diagnosis), "missing": list(self.missing), "infra_rate": self.infra_rate,
                "latency_ms": self.latency_ms, "paired": self.paired, "report": self.report,
                "comparison": self.comparison, "endpoint": self.endpoint}


@dataclass(frozen=True)
class Matrix:
    """matrix.json: one row per provider and suite against one golden (or the goldens' names, when they differ)."""

    golden: str | list[str]
    providers: tuple[str, ...]
    rows: tuple[MatrixRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"golden": self.golden, "providers": list(self.providers), "rows": [r.to_json() for r in self.rows]}


def side_verdict(doc: Comparison, side: str, suite: str) -> str:
    verdicts = [e.verdict for e in doc.side(side).evidence if e.suite == suite and e.verdict in RANK]
    if not verdicts:
        return doc.side(side).verdict
    return max(verdicts, key=RANK.__getitem__)


def top_evidence(doc: Comparison, suite: str) -> str:
    for wanted in ("fail", "inconclusive"):
        for side in ("frontend", "quantization"):
            for e in doc.side(side).evidence:
                if e.suite == suite and e.verdict == wanted:
                    return f"{side}: {e.summary}" + _new_findings(doc, suite, e.signal)
    return ""


def _new_findings(doc: Comparison, suite: str, signal: str | None) -> str:
    """For `new_findings`, which ones: that is what tells two providers' frontend bugs apart."""
    if signal != "new_findings":
        return ""
    s = doc.suites.get(suite)
    found = s.findings if s is not None else {}
    # Only well-formed counts: a hand-edited comparison's non-object count is no finding here (it was never one).
    counts = {k: SideCounts.from_dict(v) for k, v in found.items() if isinstance(v, dict)}
    new = [f"{k} {c.candidate}" for k, c in sorted(counts.items()) if (c.candidate or 0) > (c.golden or 0)]
    return f"; new: {', '.join(new)}" if new else ""


def metric_cells(suite_doc: SuiteResult) -> tuple[MetricCell, ...]:
    return tuple(MetricCell(name=name, golden=m.golden, candidate=m.candidate, delta=m.delta, ci=m.ci, verdict=m.verdict)
                 for name, m in sorted(suite_doc.metrics.items()))


def diagnosis_cells(doc: Comparison, suite: str) -> list[str]:
    """The diagnosed components behind this suite's frontend verdict: component, findings, wire modes."""
    out = []
    for d in doc.diagnosis or ():
        if suite in d.suites:
            modes = f" [{', '.join(d.modes)}]" if d.modes else ""
            out.append(f"{d.component}: {', '.join(d.findings)}{modes}")
    return out


def missing_cells(doc: Comparison) -> list[str]:
    """For an `incomplete` gate, what is missing: infra errors over the budget, golden coverage not answered."""
    if doc.status != "incomplete":
        return []
    from verifier.attribution.coverage import describe

    out = []
    inf, cov = doc.infra, doc.coverage
    budget = inf.get("budget") or 0.0
    if inf.get("rate") is not None and inf["rate"] > budget:
        out.append(f"infra errors {inf['count']}/{inf['total']} (rate {inf['rate']:.3g}) above the budget {budget:.3g}")
    if cov.get("missing") and cov.get("rate", 0) > budget:
        out.append(describe(dict(cov)))
    return out or list(doc.reasons or [])[:2]


def _infra_rate(e: Entry, suite: str) -> float | None:
    s = e.summary.suite(suite) if e.summary is not None else None
    rate: float | None = s.infra_rate if s is not None else e.comparison.infra.get("rate")
    return rate


def _latency(e: Entry, suite: str) -> dict[str, float] | None:
    s = e.summary.suite(suite) if e.summary is not None else None
    return s.latency_ms if s is not None else None


def _relative(target: Path, out_dir: Path) -> str:
    return Path(os.path.relpath(target.resolve(), out_dir.resolve())).as_posix()


def _report_link(e: Entry, out_dir: Path) -> str | None:
    """The provider's full report, relative to the matrix page; None when the row has none (it links its comparison)."""
    return _relative(e.report, out_dir) if e.report is not None else None


def _comparison_link(e: Entry, out_dir: Path) -> str:
    """The comparison.json the row shows, relative to the matrix page (the run's, or the one the matrix made)."""
    return _relative(e.comparison_file, out_dir)


def build(entries: list[Entry], out_dir: Path) -> Matrix:
    """The matrix: one row per provider and suite, in the order given."""
    names = [e.provider for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"provider names must be unique, got {names}")
    goldens = sorted({str(e.comparison.golden_name) for e in entries})
    rows = []
    for e in entries:
        doc = e.comparison
        for suite in sorted(doc.suites):
            s = doc.suites[suite]
            rows.append(MatrixRow(
                provider=e.provider, suite=suite, status=doc.status, exit_code=doc.exit_code,
                frontend=side_verdict(doc, "frontend", suite), quantization=side_verdict(doc, "quantization", suite),
                metrics=metric_cells(s), evidence=top_evidence(doc, suite), tool_calls=tool_call_line(s.tool_calls),
                diagnosis=tuple(diagnosis_cells(doc, suite)), missing=tuple(missing_cells(doc)),
                infra_rate=_infra_rate(e, suite), latency_ms=_latency(e, suite),
                paired=s.paired, report=_report_link(e, out_dir), comparison=_comparison_link(e, out_dir),
                endpoint=doc.run_base_url))
    return Matrix(golden=goldens[0] if len(goldens) == 1 else goldens, providers=tuple(names), rows=tuple(rows))


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def metric_text(m: MetricCell) -> str:
    ci = m.ci or [None, None]
    return (f"{m.name} {fmt(m.golden)}→{fmt(m.candidate)} "
            f"(Δ {fmt(m.delta)}, CI [{fmt(ci[0])}, {fmt(ci[1])}]) {m.verdict or ''}").strip()


def latency_text(lat: Mapping[str, float] | None) -> str:
    if not lat:
        return "—"
    return f"p50 {lat.get('p50', 0):.0f} ms / p95 {lat.get('p95', 0):.0f} ms"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "—"


def report_cell(r: MatrixRow) -> str:
    """The row's report link, or what there is instead: its comparison, said to be one."""
    return f"[report]({r.report})" if r.report else f"no report: [comparison]({r.comparison})"


def markdown(m: Matrix) -> str:
    """The Markdown table: one line per provider and suite (GitHub renders it in a step summary)."""
    lines = [f"## verifier matrix vs golden `{m.golden}`", "",
             "| provider | suite | status | diagnosis | frontend | quantization | key metrics | top evidence | infra | latency | report |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in m.rows:
        metrics = "; ".join([metric_text(x) for x in r.metrics] + ([r.tool_calls] if r.tool_calls else [])) or "—"
        why = "; ".join(list(r.diagnosis) + [f"missing: {x}" for x in r.missing])
        infra = "—" if r.infra_rate is None else f"{100 * r.infra_rate:.1f}%"
        lines.append("| " + " | ".join(_md_cell(c) for c in (
            r.provider, r.suite, f"{colours.STATUS_ICON.get(r.status, '')} {r.status} ({r.exit_code})".strip(), why,
            r.frontend, r.quantization, metrics,
            r.evidence, infra, latency_text(r.latency_ms), report_cell(r))) + " |")
    return "\n".join(lines) + "\n"


def render_html(m: Matrix) -> str:
    """One self-contained page (inline CSS and script, CSP by hash, no network); rows sortable by any column."""
    import base64
    import hashlib

    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = fmt
    env.filters["metric_text"] = metric_text
    env.filters["latency_text"] = latency_text
    env.filters["cut"] = cut_words
    env.globals["status_colour"] = colours.STATUS_COLOUR
    env.filters["csp_hash"] = lambda js: "sha256-" + base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    tpl = env.get_template("matrix.html.j2")
    return tpl.render(m=m, rank=RANK, script=SORT_JS)


def write(m: Matrix, out_dir: Path) -> dict[str, Path]:
    """matrix.html, matrix.md and matrix.json into `out_dir`; their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / name for name in FILES}
    # Through the one atomic, scrubbed writer: a planted temp symlink is refused, a run's echoed key is masked.
    safewrite.write_text(paths["matrix.html"], render_html(m))
    safewrite.write_text(paths["matrix.md"], markdown(m))
    safewrite.write_json(paths["matrix.json"], m.to_json())
    return paths


# Click a header to sort by it; click again to reverse. Cells sort by data-key when present (verdict rank,
# numbers), else by text. Kept free of template syntax: its sha256 goes into the page's CSP.
SORT_JS = """
document.querySelectorAll('th[data-col]').forEach(function (th) {
  th.addEventListener('click', function () {
    var col = Number(th.dataset.col), body = document.querySelector('#matrix tbody');
    var dir = th.dataset.dir === 'asc' ? 'desc' : 'asc';
    document.querySelectorAll('th[data-col]').forEach(function (h) { h.removeAttribute('data-dir'); h.removeAttribute('aria-sort'); });
    th.dataset.dir = dir;
    th.setAttribute('aria-sort', dir === 'asc' ? 'ascending' : 'descending');
    var key = function (tr) {
      var td = tr.children[col], k = td.dataset.key;
      if (k !== undefined && k !== '' && !isNaN(Number(k))) { return Number(k); }
      return (k !== undefined ? k : td.textContent).trim().toLowerCase();
    };
    var rows = Array.prototype.slice.call(body.querySelectorAll('tr'));
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), c = x < y ? -1 : x > y ? 1 : 0;
      return dir === 'asc' ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""
