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
from verifier.run import journal, scoring
from verifier.run import observations as observe
from verifier import scrub
from verifier.errors import UsageError
from verifier.judge.parse import MalformedBody, parse_exchange
from verifier.types import Observation
import verifier.report.ci as ci
import verifier.report.html as html
from verifier.report.data import MAX_CONTENT, GoldenData, Inputs, RunData, Shown, inputs
from verifier import jsonsafe


def read_run(run_dir: Path) -> RunData:
    """Verdicts joined with the parsed journal, read once; scores the run first when it has no verdicts yet
    or they were scored from another journal. The parsed part comes from observations.jsonl (scoring parsed
    each exchange once); a run scored before that file existed is parsed here, with the same result."""
    run_dir = Path(run_dir)
    header = journal.check_run_dir(run_dir)
    if journal.stale(run_dir):
        from verifier.app.collect import score  # application step

        score(run_dir)
    exchanges = journal.read_exchanges(run_dir)
    verdicts = scoring.read_verdicts(run_dir)
    finds = [{"suite": v.suite, "sample_id": v.sample_id, "mode": v.mode, "code": f.code, "detail": f.detail[:300]}
             for v in verdicts for f in v.findings]
    observed = observe.read(run_dir)
    shown: dict[tuple[str, str, int, str], Shown] | None = None
    if observed is not None and len(observed) == len(verdicts):
        # The report shows no logprobs in its rows; the token diffs read them from `shown`.
        rows = [dataclasses.replace(Observation.from_dict(o), logprobs=None, top_logprobs=None) for o in observed]
        shown = {(o["suite"], o["sample_id"], o["epoch"], o["mode"]): Shown.of(o) for o in observed if "shown" in o}
    else:
        rows = []
        for v in verdicts:
            ex = exchanges.get((v.suite, v.sample_id, v.epoch, v.mode))
            content = None
            if ex is not None and v.outcome in ("content", "contract"):
                try:
                    content = (parse_exchange(ex).content or "")[:MAX_CONTENT]
                except MalformedBody:
                    pass
            rows.append(Observation.from_verdict(v, content))
    sp = run_dir / scoring.SUMMARY
    summary = jsonsafe.loads(sp.read_text(encoding="utf-8")) if sp.exists() else {"suites": {}}
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
    cp = run_dir / "comparison.json"
    if cp.exists():
        doc = jsonsafe.loads(cp.read_text(encoding="utf-8"))
        if (doc.get("golden") or {}).get("name") == Path(golden_path).name:
            try:
                return Comparison.from_dict(doc)
            except KeyError:  # written by an older verifier, without a block this one reads: compare again, as below
                pass
    from verifier.app.gate import compare_run  # application step; pulls in the openai SDK (~2 s)

    return compare_run(run_dir, str(golden_path), None, 0.02, write=False)  # a report never writes into the run


def load(run_dir: Path | str, golden_path: str | Path | None, doc: Comparison | Mapping[str, Any] | None,
         golden: GoldenData | None = None) -> Inputs:
    """The report's inputs from disk. Pass `golden` when the caller has it loaded (the gate does).

    Without either, a comparison's recorded golden path is used: older callers pass only the document.
    """
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    typed = None if doc is None else Comparison.of(doc)
    if golden is None:
        if golden_path is None and typed is not None:
            golden_path = (typed.golden or {}).get("path")
        if golden_path is not None:
            if typed is None:
                typed = comparison(run_dir, golden_path)
            golden = read_golden(golden_path)
    return inputs(run, golden, typed)


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
    paths = {"html": Path(html) if html else run_dir / "report.html", "junit": Path(junit) if junit else run_dir / "junit.xml",
             "markdown": Path(markdown) if markdown else run_dir / "summary.md", "csv": Path(csv) if csv else run_dir / "samples.csv"}
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    inp = load(run_dir, None, doc, golden)
    journal.write_text(paths["html"], _html.render_inputs(inp))
    ci.write_csv(inp, paths["csv"])
    typed = inp.doc
    assert typed is not None  # load keeps the document it is given
    journal.write_text(paths["junit"], ci.junit_xml(typed))
    md = ci.markdown(typed, str(paths["html"]))
    journal.write_text(paths["markdown"], md)
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
    path = Path(out) if out else run_dir / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text(path, _html.render_inputs(inp))
    if csv:
        ci.write_csv(inp, Path(csv))
    return path, inp.doc.status if inp.doc is not None else "single run", len(inp.frame)
