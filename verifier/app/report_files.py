"""The report's edge: read a run directory, a golden and a comparison from disk; write the outputs (`write_report` is the `report` command's one call).

The renderers (html.render, ci.junit_xml, ci.markdown) are pure and take typed values (a RunData read from a
RunDir, the golden's header and observations, a Comparison); this module is the only one that touches their files.
Reading never scores or compares: "compare if missing" (`comparison`, ordered with the golden in `prepared`) and
"score again if stale" (app/scored.ensure_scored, in `load_scored`, when `read_run` finds the run not freshly
scored: one read of observations.jsonl on the fresh path) are explicit steps of the commands.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable

from verifier.attribution.document import Comparison
from verifier.golden import store as golden_mod
from verifier.golden.model import Golden
from verifier import safewrite
from verifier.execution import journal, layout
from verifier.execution.rundir import RunDir
from verifier import scrub
from verifier.errors import UsageError
from verifier.types import Observation
import verifier.report.ci as ci
import verifier.report.html as html
import verifier.report.matrix as matrix
import verifier.report.views as views
from verifier.report.data import Drawn, GoldenData, Inputs, RunData, Shown, inputs


class NotScored(UsageError):
    """A run not scored, or scored from another journal: `load_scored` scores it again (app/scored.ensure_scored)."""


def read_run(run_dir: Path, with_exchanges: bool = True) -> RunData:
    """Verdicts joined with what scoring parsed of the journal (observations.jsonl), read once. Reading never
    scores: a run not freshly scored is NotScored (a UsageError naming `verifier score`), which `load_scored` answers
    with the explicit step; the report never parses the journal a second way.

    `with_exchanges=False` leaves the journal's records out (`load` then draws only the flip cards' records, so
    memory does not grow with the journal); callers that render a RunData themselves keep the default."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    header = rd.header()
    scrub.register_run(header.endpoint)  # the report is scrubbed of the key its run was made with
    rows: list[Observation] = []
    shown: dict[tuple[str, str, int, str], Shown] = {}
    take = _kept(rows, shown)
    if rd.stale() or not rd.each_observation(take):
        raise NotScored(f"{run_dir}: not scored, or scored from another journal ({layout.OBSERVATIONS} is missing or "
                         f"does not match it); run `verifier score {run_dir}`")
    exchanges = rd.exchanges() if with_exchanges else {}
    finds = [{"suite": v.suite, "sample_id": v.sample_id, "mode": v.mode, "code": f.code, "detail": f.detail[:300]}
             for v in rd.iter_verdicts() for f in v.findings]  # streamed: only the findings are kept
    return RunData(run_dir, header, rd.summary(), rows, finds, exchanges, shown)


def _kept(rows: list[Observation], shown: dict[tuple[str, str, int, str], Shown]) -> Callable[[Observation, dict[str, Any] | None], None]:
    """What the report keeps of each observation row, into `rows` and `shown`. The report shows no logprobs in its
    rows; the token diffs read them from `shown`. Row by row: the file's rows are never all held beside what the
    report keeps of them."""
    def take(o: Observation, extra: dict[str, Any] | None) -> None:
        rows.append(dataclasses.replace(o, logprobs=None, top_logprobs=None))
        if extra is not None:
            shown[(o.suite, o.sample_id, o.epoch, o.mode)] = Shown.of(o, extra)
    return take


def read_run_in_memory(run_dir: Path) -> RunData:
    """`read_run` of a run this user may not write (a colleague's, a read-only mount), without writing into it: its
    files when fresh and sealed with this user's key, else its journal scored again in memory (app/scored), so the
    report shows what the journal backs, never a stale or foreign verdicts.jsonl, summary.json or observations.jsonl."""
    from verifier.app.scored import scored_in_memory

    rd = RunDir(run_dir)
    header = rd.header()
    scrub.register_run(header.endpoint)
    rows: list[Observation] = []
    shown: dict[tuple[str, str, int, str], Shown] = {}

    def drop() -> None:
        rows.clear()
        shown.clear()

    summary, verdicts = scored_in_memory(run_dir, _kept(rows, shown), drop)
    finds = [{"suite": v.suite, "sample_id": v.sample_id, "mode": v.mode, "code": f.code, "detail": f.detail[:300]}
             for v in (verdicts if verdicts is not None else rd.iter_verdicts()) for f in v.findings]
    return RunData(run_dir, header, summary, rows, finds, {}, shown)


def matrix_entry(provider: str, run_dir: Path, comparison: Comparison, link: Path | None = None) -> "matrix.Entry":
    """A matrix row's inputs from a compared run directory: the comparison in hand (read, or made in memory), the
    run's summary.json, its report.html when rendered (never for a comparison the matrix made: `link`, where it
    wrote it) and the comparison.json the row shows. The run's key and credential marks are registered, so
    what the matrix writes is scrubbed of them."""
    rd = RunDir(run_dir)
    if rd.is_run():
        try:
            scrub.register_run(rd.header().endpoint)
        except journal.NotARunDir:
            pass  # a corrupt run.json: nothing of it to scrub by (the comparison was read, or made, without it)
    report = rd.report_html() if link is None and rd.report_html().exists() else None
    return matrix.Entry(provider, comparison, report, link if link is not None else rd.comparison_path(), rd.summary())


def read_matrix_entry(provider: str, run_dir: Path) -> "matrix.Entry":
    """matrix_entry of a run directory's own comparison.json (ValueError when it holds none)."""
    rd = RunDir(run_dir)
    doc = rd.comparison()
    if doc is None:
        raise ValueError(f"{run_dir} holds no {rd.comparison_path().name}: compare or gate it first")
    return matrix_entry(provider, run_dir, Comparison.from_dict(doc))


def read_golden(path: str | Path) -> GoldenData | None:
    """The golden, or None when it is gone or broken (the report still shows the comparison made against it)."""
    try:
        golden = golden_mod.load(golden_mod.resolve(path))
    except golden_mod.BadGolden:
        return None
    return GoldenData.of(golden)


def recorded_comparison(run_dir: Path, golden_path: str | Path) -> Comparison | None:
    """RUN_DIR/comparison.json when it was made against this golden (by its directory's name), else None. Reads
    only: comparing is `comparison`'s explicit step."""
    doc = RunDir(run_dir).comparison()
    if doc is None:
        return None
    try:
        typed = Comparison.from_dict(doc)
    except KeyError:  # written by an older verifier, without a block this one reads: the caller compares again
        return None
    return typed if typed.golden_name == Path(golden_path).name else None


def comparison(run_dir: Path, golden_path: str | Path) -> Comparison:
    """"Compare if missing", the `report` command's explicit step: the recorded comparison against this golden,
    else one made now (never written: a report never writes into the run)."""
    recorded = recorded_comparison(run_dir, golden_path)
    if recorded is not None:  # believed as far as the run's own evidence backs it, as the matrix does
        from verifier.app.gate import load_golden
        from verifier.app.runs import believed

        shown, why = believed(run_dir, golden_path, load_golden(golden_path), recorded)
        if why is not None:
            print(f"verifier: report: {why}", file=sys.stderr)
        return shown
    from verifier.app.gate import compare_run  # an application step, imported only when a report must compare
    from verifier.app.spec import CompareSpec

    return compare_run(run_dir, CompareSpec(str(golden_path), write=False))  # a report never writes into the run


def load(run_dir: Path | str, golden: GoldenData | None, doc: Comparison | None, in_memory: bool = False) -> Inputs:
    """The report's inputs: the scored run read from disk (`read_run`; `in_memory`: `read_run_in_memory`), the
    golden and the comparison as given. Nothing is written here."""
    run_dir = Path(run_dir)
    run = read_run_in_memory(run_dir) if in_memory else read_run(run_dir, with_exchanges=False)
    inp = inputs(run, golden, doc)
    inp.drawn = draw(run_dir, views.card_keys(inp))
    return inp


def load_scored(run_dir: Path | str, golden: GoldenData | None, doc: Comparison | None,
                write_run: bool = True) -> Inputs:
    """`load`, with "score again if stale" as the explicit step between two reads: a run `read_run` finds not
    freshly scored is scored again (app/scored.ensure_scored), then read; a run this user may not write, or one the
    caller must not write (`write_run` False: `compare --ci-outputs-dir`), is scored again in memory instead, and
    left as it is. A fresh run is read once."""
    try:
        return load(run_dir, golden, doc)
    except NotScored:
        from verifier.app.scored import ensure_scored

        if not write_run or not RunDir(Path(run_dir)).writable():
            return load(run_dir, golden, doc, in_memory=True)
        ensure_scored(Path(run_dir))
        return load(run_dir, golden, doc)


def prepared(run_dir: Path | str, golden_path: str | Path | None,
             doc: Comparison | None = None) -> tuple[GoldenData | None, Comparison | None]:
    """The golden a report of RUN_DIR shows (from `golden_path`, else the path `doc` recorded) and the comparison
    against it: `doc`, else the recorded one, else one made now ("compare if missing", `comparison`, which scores the
    run again first when stale, as every compare does)."""
    run_dir = Path(run_dir)
    if golden_path is None and doc is not None:
        golden_path = doc.golden_path
    if golden_path is None:
        return None, doc
    if doc is None:
        doc = comparison(run_dir, golden_path)
    return read_golden(golden_path), doc


def draw(run_dir: Path, keys: set[tuple[str, str, int, str]]) -> dict[tuple[str, str, int, str], Drawn]:
    """The flip cards' records, cut as a card shows them: one pass over the journal keeping nothing else (the
    latest record of a key wins, as in journal.read_exchanges)."""
    out: dict[tuple[str, str, int, str], Drawn] = {}
    if keys:
        for ex in RunDir(run_dir).iter_exchanges():
            if ex.key in keys:
                out[ex.key] = views.drawn(ex)
    return out


def render_html(run_dir: Path | str, golden_path: str | Path | None, doc: Comparison | None) -> str:
    """The HTML report of a run directory, optionally against a golden directory (the `report` command's steps,
    without writing)."""
    golden, doc = prepared(run_dir, golden_path, doc)
    return html.render_inputs(load_scored(run_dir, golden, doc))


def write_all(run_dir: Path | str, doc: Comparison, html: str | Path | None = None, junit: str | Path | None = None,
              markdown: str | Path | None = None, csv: str | Path | None = None,
              golden: Golden | None = None, write_run: bool = True) -> dict[str, Path]:
    """Everything CI keeps from a gate: report.html, junit.xml, summary.md (+ $GITHUB_STEP_SUMMARY), samples.csv.
    `golden`: the golden the gate compared with, when the caller has it loaded (a gate loads it once; else the one
    the comparison recorded is read). `write_run` False: a stale run is scored again in memory, never in place."""
    run_dir = Path(run_dir)
    paths = RunDir(run_dir).report_paths(html, junit, markdown, csv)
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    shown = GoldenData.of(golden) if golden is not None else prepared(run_dir, None, doc)[0]
    inp = load_scored(run_dir, shown, doc, write_run)
    safewrite.write_text(paths["html"], _html.render_inputs(inp))
    ci.write_csv(inp, paths["csv"])
    safewrite.write_text(paths["junit"], ci.junit_xml(doc))
    md = ci.markdown(doc, str(paths["html"]))
    safewrite.write_text(paths["markdown"], md)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        safewrite.append_text(step, md)
    return paths


_html = html  # write_all's parameter named `html` shadows the module


def write_report(run_dir: Path | str, golden: str | Path | None = None, out: str | Path | None = None,
                 csv: str | Path | None = None) -> tuple[Path, str, int]:
    """`verifier report`: the HTML report (default RUN_DIR/report.html) and optionally the per-sample CSV.
    Returns (HTML path, comparison status or "single run", records shown). UsageError when RUN_DIR is not a run."""
    run_dir = Path(run_dir)
    if out is None and RunDir(run_dir).is_run() and not RunDir(run_dir).writable():
        raise UsageError(f"{run_dir} cannot be written (report.html goes there): give -o FILE to write the report "
                         "elsewhere; the run is then read, never written")
    try:
        shown, doc = prepared(run_dir, golden, None)
        inp = load_scored(run_dir, shown, doc)
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    path = Path(out) if out else RunDir(run_dir).report_html()
    path.parent.mkdir(parents=True, exist_ok=True)
    safewrite.write_text(path, _html.render_inputs(inp))
    if csv:
        ci.write_csv(inp, Path(csv))
    return path, inp.doc.status if inp.doc is not None else "single run", len(inp.frame)
