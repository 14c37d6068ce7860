"""The report's edge: read a run directory, a golden and a comparison from disk; write the outputs (`write_report` is the `report` command's one call).

The renderers (html.render, ci.junit_xml, ci.markdown) are pure; this module is the only one in
the package that touches files. Scoring an unscored run and comparing when no comparison exists
are application steps: they are imported from the application layer inside the one function
that needs each, so importing verifier.report stays cheap.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Mapping

from verifier.attribution.document import Comparison
from verifier.golden import store as golden_mod
from verifier.golden.model import Golden
from verifier import safewrite
from verifier.execution import journal
from verifier.execution.rundir import RunDir
from verifier import scrub
from verifier.errors import UsageError
from verifier.types import Observation
import verifier.report.ci as ci
import verifier.report.html as html
import verifier.report.views as views
from verifier.report.data import Drawn, GoldenData, Inputs, RunData, Shown, inputs


def read_run(run_dir: Path, with_exchanges: bool = True) -> RunData:
    """Verdicts joined with what scoring parsed of the journal (observations.jsonl), read once. A run not scored,
    scored from another journal, or whose observations.jsonl is missing or edited is scored again first
    (app.collect.observed_rows): the report never parses the journal a second way.

    `with_exchanges=False` leaves the journal's records out (`load` then draws only the flip cards' records, so
    memory does not grow with the journal); callers that render a RunData themselves keep the default."""
    from verifier.app.collect import each_observed_row  # application step

    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    header = rd.header_dict()
    scrub.register_run(header)  # the report is scrubbed of the key its run was made with
    # The report shows no logprobs in its rows; the token diffs read them from `shown`. Row by row: the file's
    # rows are never all held as dicts beside what the report keeps of them.
    rows: list[Observation] = []
    shown: dict[tuple[str, str, int, str], Shown] = {}

    def take(o: dict[str, Any]) -> None:
        rows.append(dataclasses.replace(Observation.from_dict(o), logprobs=None, top_logprobs=None))
        if "shown" in o:
            shown[(o["suite"], o["sample_id"], o["epoch"], o["mode"])] = Shown.of(o)

    def drop() -> None:
        rows.clear()
        shown.clear()

    each_observed_row(run_dir, take, drop)
    exchanges = rd.exchanges() if with_exchanges else {}
    finds = [{"suite": v.suite, "sample_id": v.sample_id, "mode": v.mode, "code": f.code, "detail": f.detail[:300]}
             for v in rd.iter_verdicts() for f in v.findings]  # streamed: only the findings are kept
    summary = rd.summary() or {"suites": {}}
    return RunData(run_dir, header, summary, rows, finds, exchanges, shown)


def golden_data(golden: Golden) -> GoldenData:
    """What the report shows of a loaded golden (its golden.json as this gate saw it, and its observations)."""
    return GoldenData(golden.header.to_json(), list(golden.observations))


def read_golden(path: str | Path) -> GoldenData | None:
    """The golden, or None when it is gone or broken (the report still shows the comparison made against it)."""
    try:
        golden = golden_mod.load(golden_mod.resolve(path))
    except golden_mod.BadGolden:
        return None
    return golden_data(golden)


def comparison(run_dir: Path, golden_path: str | Path) -> Comparison:
    """RUN_DIR/comparison.json when it was made against this golden; otherwise compare now (without overwriting it)."""
    doc = RunDir(run_dir).comparison()
    if doc is not None:
        if isinstance(doc.get("golden"), dict) and doc["golden"].get("name") == Path(golden_path).name:
            try:
                return Comparison.from_dict(doc)
            except KeyError:  # written by an older verifier, without a block this one reads: compare again, as below
                pass
    from verifier.app.gate import compare_run  # an application step, imported only when a report must compare

    return compare_run(run_dir, str(golden_path), None, None, write=False)  # a report never writes into the run


def load(run_dir: Path | str, golden_path: str | Path | None, doc: Comparison | Mapping[str, Any] | None,
         golden: GoldenData | None = None) -> Inputs:
    """The report's inputs from disk. Pass `golden` when the caller has it loaded (the gate does).

    Without either, a comparison's recorded golden path is used: older callers pass only the document.
    """
    run_dir = Path(run_dir)
    run = read_run(run_dir, with_exchanges=False)
    typed = None if doc is None else Comparison.of(doc)
    if golden is None:
        if golden_path is None and typed is not None:
            golden_path = (typed.golden or {}).get("path")
        if golden_path is not None:
            if typed is None:
                typed = comparison(run_dir, golden_path)
            golden = read_golden(golden_path)
    inp = inputs(run, golden, typed)
    inp.drawn = draw(run_dir, views.card_keys(inp))
    return inp


def draw(run_dir: Path, keys: set[tuple[str, str, int, str]]) -> dict[tuple[str, str, int, str], Drawn]:
    """The flip cards' records, cut as a card shows them: one pass over the journal keeping nothing else (the
    latest record of a key wins, as in journal.read_exchanges)."""
    out: dict[tuple[str, str, int, str], Drawn] = {}
    if keys:
        for ex in RunDir(run_dir).iter_exchanges():
            if ex.key in keys:
                out[ex.key] = views.drawn(ex)
    return out


def render_html(run_dir: Path | str, golden_path: str | Path | None, doc: Comparison | Mapping[str, Any] | None) -> str:
    """The HTML report of a run directory, optionally against a golden directory."""
    return html.render_inputs(load(run_dir, golden_path, doc))


def write_all(run_dir: Path | str, doc: Comparison | Mapping[str, Any], html: str | Path | None = None, junit: str | Path | None = None,
              markdown: str | Path | None = None, csv: str | Path | None = None,
              golden: GoldenData | Golden | None = None) -> dict[str, Path]:
    """Everything CI keeps from a gate: report.html, junit.xml, summary.md (+ $GITHUB_STEP_SUMMARY), samples.csv.
    `golden`: the golden the gate compared with, when the caller has it loaded (a gate loads it once)."""
    run_dir = Path(run_dir)
    if isinstance(golden, Golden):
        golden = golden_data(golden)
    paths = RunDir(run_dir).report_paths(html, junit, markdown, csv)
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    inp = load(run_dir, None, doc, golden)
    safewrite.write_text(paths["html"], _html.render_inputs(inp))
    ci.write_csv(inp, paths["csv"])
    typed = inp.doc
    assert typed is not None  # load keeps the document it is given
    safewrite.write_text(paths["junit"], ci.junit_xml(typed))
    md = ci.markdown(typed, str(paths["html"]))
    safewrite.write_text(paths["markdown"], md)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(scrub.text(md))
    return paths


_html = html  # write_all's parameter named `html` shadows the module


def write_report(run_dir: Path | str, golden: str | Path | None = None, out: str | Path | None = None,
                 csv: str | Path | None = None) -> tuple[Path, str, int]:
    """`verifier report`: the HTML report (default RUN_DIR/report.html) and optionally the per-sample CSV.
    Returns (HTML path, comparison status or "single run", records shown). UsageError when RUN_DIR is not a run."""
    run_dir = Path(run_dir)
    try:
        inp = load(run_dir, golden, None)
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    path = Path(out) if out else RunDir(run_dir).report_html()
    path.parent.mkdir(parents=True, exist_ok=True)
    safewrite.write_text(path, _html.render_inputs(inp))
    if csv:
        ci.write_csv(inp, Path(csv))
    return path, inp.doc.status if inp.doc is not None else "single run", len(inp.frame)
