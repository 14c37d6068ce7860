"""What CI keeps from a gate besides the HTML: JUnit XML, a Markdown summary, the per-sample CSV.

junit_xml and markdown are pure functions of the comparison document; the CSV is the joined
per-sample table (data.inputs) flattened.
"""

from __future__ import annotations

import html as _html
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from verifier import safewrite
from verifier.report import colours
from verifier.attribution.document import Comparison
from verifier.attribution.explain import cut_words
from .data import Inputs, fmt


def samples_frame(inp: Inputs) -> pd.DataFrame:
    """The per-sample comparison as a flat table (what --csv writes)."""
    df = inp.frame.drop(columns=["anchor"]).copy()
    for col in ("c_findings", "g_findings", "new_findings"):
        df[col] = [" ".join(v) if isinstance(v, list) else (v or "") for v in df[col]]
    return df


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is read as a formula by spreadsheet programs (OWASP, "CSV Injection")."""


def neutral_cell(v: Any) -> Any:
    """A text cell as a spreadsheet shows it, never runs it: one that starts like a formula gets a leading `'`
    (OWASP's advice). Numbers stay numbers: only text an endpoint or a golden wrote can start a formula."""
    return "'" + v if isinstance(v, str) and v.startswith(FORMULA_STARTS) else v


def write_csv(inp: Inputs, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df = samples_frame(inp)
    df.columns = [neutral_cell(str(c)) for c in df.columns]
    carriage_return = False
    for col in df.columns:
        values = [neutral_cell(v) for v in df[col]]
        if any(isinstance(v, str) for v in values):
            df[col] = pd.Series(values, index=df.index, dtype=object)
            carriage_return = carriage_return or any(isinstance(v, str) and "\r" in v for v in values)
    # The csv module quotes a cell holding a character of the line terminator, and only then: a bare CR inside a
    # cell would end the row for most readers (and start the next cell with what follows it). A file with such a
    # cell is written with CRLF line ends (RFC 4180's), so that cell is quoted; others keep LF.
    safewrite.write_text(path, df.to_csv(index=False, lineterminator="\r\n" if carriage_return else "\n"))


def _cases_from_evidence(doc: Comparison) -> list[tuple[str, str, str, str]]:
    """Older comparison documents (no `checks`), read as they are: one testcase per evidence item."""
    cases = []
    for side in ("frontend", "quantization"):
        for e in doc.side(side).evidence:
            name = f"{e.suite}: {e.signal}" + (f"/{e.metric}" if e.metric else "")
            cases.append((f"verifier.{side}", name, e.verdict, e.summary + (f"\nsamples: {', '.join(e.samples)}" if e.samples else "")))
    return cases


def _cases_from_checks(doc: Comparison) -> list[tuple[str, str, str, str]]:
    """One testcase per check the golden defines (stable names), led by the diagnosis; a failing frontend
    check's message starts with the component it implicates."""
    from verifier.attribution.diagnosis import headline
    from verifier.attribution.explain import component_line

    head = headline(doc.diagnosis or ())
    cases = [("verifier.attribution.diagnosis", "diagnosis", "fail" if head else "pass",
              head or "no frontend component implicated")]
    for c in doc.checks or ():
        text = c.summary + (f"\nsamples: {', '.join(c.samples)}" if c.samples else "")
        comp = component_line(doc, c) if c.verdict == "fail" else None
        cases.append((c.cls, c.name, c.verdict, (f"[{comp}] " if comp else "") + text))
    cov = doc.coverage
    if cov:
        from verifier.attribution.coverage import describe

        gap = cov["rate"] > doc.infra["budget"]
        cases.append(("verifier.infra", "golden coverage", "fail" if gap else "pass",
                      describe(dict(cov)) if cov["missing"] else f"every (sample, mode) and probe of the golden answered ({cov['expected']})"))
    return cases


# Characters XML 1.0 cannot carry at all, escaped or not (C0 controls but tab/newline/CR, lone surrogates,
# U+FFFE/U+FFFF): one of them in a sample id made the whole file unparseable and CI showed no result.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(s: str) -> str:
    """`s` with every character XML cannot hold written as a visible `\\xNN` / `\\uNNNN` escape."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


def junit_xml(doc: Comparison) -> str:
    """One <testcase> per gate check: the diagnosis first, every check the golden defines, coverage and the infra budget."""
    suite = ET.Element("testsuite", name="verifier gate")
    if doc.checks is not None:
        cases = _cases_from_checks(doc)
    else:  # a document from before `checks`, read as it is
        cases = _cases_from_evidence(doc)
    inf = doc.infra
    over = inf["rate"] is not None and inf["rate"] > inf["budget"]
    cases.append(("verifier.infra", "infra error budget", "fail" if over else "pass",
                  f"infra errors {inf['count']}/{inf['total']} (rate {inf['rate']}, budget {inf['budget']})"))
    fails = skips = 0
    for cls, name, verdict, text in cases:
        cls, name, text = _xml_text(str(cls)), _xml_text(str(name)), _xml_text(str(text))
        tc = ET.SubElement(suite, "testcase", classname=cls, name=name)
        if verdict == "fail":
            fails += 1
            f = ET.SubElement(tc, "failure", message=text.splitlines()[0][:500], type=verdict)
            f.text = text
        elif verdict in ("inconclusive", "not_measured", "reference_fails", "not_in_golden"):
            # Neither pass nor fail: visible in CI as skipped with the reason, the exit code decides the job.
            skips += 1
            ET.SubElement(tc, "skipped", message=verdict.replace("_", " ") + ": " + text.splitlines()[0][:500])
        ET.SubElement(tc, "system-out").text = text
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(fails))
    suite.set("skipped", str(skips))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="verifier", tests=str(len(cases)), failures=str(fails))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


STATUS_ICON = colours.STATUS_ICON


def _icon(verdict: str, qualifier: str | None = None, measured: bool = True) -> str:
    return colours.shown(verdict, qualifier, measured)[2]


def _md(x: Any, limit: int = 120) -> str:
    """A Markdown table cell: no pipes or newlines from model output, HTML-escaped (GitHub renders inline HTML).
    Cut (at a word) before escaping, so no entity is cut in half."""
    text = cut_words(fmt(x).replace("\n", " "), limit)
    return _html.escape(text, quote=False).replace("|", "\\|")


def _lead(doc: Comparison) -> list[str]:
    """What to fix first: the diagnosis (component, findings, where to look, examples), then why."""
    out = []
    for d in doc.diagnosis or ():
        ex = ", ".join(f"`{_md(x)}`" for x in d.examples[:3])
        out.append(f"- **{_md(d.component)}**: {_md(d.explanation, 400)}" + (f"; e.g. {ex}" if ex else ""))
    out += [f"- why: {_md(r, 400)}" for r in doc.reasons or [] if not r.startswith("diagnosis:")]
    return out + [""] if out else []


EVIDENCE_TEXT = 1000  # an evidence line is the harness's own sentence: kept whole unless a hostile value inflates it


def markdown(doc: Comparison, report_path: str | None = None, top_flips: int = 10) -> str:
    inf = doc.infra
    lines = [f"## verifier: {STATUS_ICON.get(doc.status, '')} `{doc.status}` (exit {doc.exit_code})", ""]
    lines += _lead(doc)
    lines += [f"{_md(doc.meaning)}", "",
             f"- frontend: {_icon(doc.frontend.verdict)} **{doc.frontend.verdict}**",
             f"- quantization: {_icon(doc.quantization.verdict)} **{doc.quantization.verdict}**",
             f"- infra errors: {inf['count']}/{inf['total']} (budget {inf['budget']:.0%})"
             + (f"; {inf['reference_also_failed']} more where the golden failed too (not counted)"
                if inf.get("reference_also_failed") else "")]
    g = doc.golden or {}
    if g.get("name"):
        lines.append(f"- golden: `{_md(g['name'])}`, run: `{_md(doc.run_id)}`")
    lines += ["", "| suite | metric | golden | candidate | delta | CI | margin | p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for suite, s in doc.suites.items():
        for m, v in s.metrics.items():
            lines.append(f"| {_md(suite)} | {_md(m)} | {_md(v.golden)} | {_md(v.candidate)} | {_md(v.delta)} | {_md(v.ci)} | "
                         f"{_md(v.margin)} | {_md(v.p_value)} | {_icon(v.verdict)} {v.verdict} |")
    from verifier.attribution.explain import tool_call_line
    from verifier.execution.probe_results import markdown as probe_table

    tools = [(suite, tool_call_line(s.tool_calls)) for suite, s in doc.suites.items()]
    lines += [""] + [f"- **{_md(suite)}** {_md(line, 400)}" for suite, line in tools if line] if any(t for _, t in tools) else []
    from verifier.attribution.teacher_forced import summary_line

    forced = [(suite, summary_line(s.teacher_forced)) for suite, s in doc.suites.items()]
    lines += [""] + [f"- **{_md(suite)}** {_md(line, 400)}" for suite, line in forced if line] if any(t for _, t in forced) else []
    lines += probe_table(doc.conformance or [], _md)
    evidence = doc.evidence
    fired = [e for e in evidence if e.verdict != "pass"]
    lines += ["", "### Signals that fired" if fired else "### Signals: none fired", ""]
    for e in fired:
        lines.append(f"- {_icon(e.verdict)} {_md(e.suite)}: {_md(e.summary, EVIDENCE_TEXT)}")
    ref_fails = [e for e in evidence if e.qualifier == "reference_fails"]
    if ref_fails:
        lines += ["", "### Failed by the golden too (not held against the candidate)", ""]
        lines += [f"- {_icon(e.verdict, 'reference_fails')} {_md(e.summary, EVIDENCE_TEXT)}" for e in ref_fails]
    unmeasured = [c.name for c in doc.checks or () if c.verdict == "not_measured" or c.qualifier == "not_measured"]
    if unmeasured:
        shown = ", ".join(f"`{_md(n)}`" for n in unmeasured[:12])
        lines += ["", f"{_icon('not_measured')} not measured on this run ({len(unmeasured)} checks): {shown}"
                  + (f" and {len(unmeasured) - 12} more" if len(unmeasured) > 12 else "")]
    per_mode = [f"{_md(suite)} {_md(mode)}: {len(f['regressed'])} regressed, {len(f['improved'])} improved"
                for suite, s in doc.suites.items() for mode, f in sorted(s.flips_by_mode.items())]
    if per_mode:
        lines += ["", "### Answer changes per mode", ""] + [f"- {x}" for x in per_mode]
    flips = [(suite, sid) for suite, s in doc.suites.items() for sid in s.flips.get("regressed", [])]
    if flips:
        lines += ["", f"### Top regressed samples ({len(flips)} in all)", ""]
        lines += [f"- `{_md(suite)}/{_md(sid)}`" for suite, sid in flips[:top_flips]]
    if report_path:
        lines += ["", f"Full report: `{_md(report_path)}`"]
    return "\n".join(lines) + "\n"
