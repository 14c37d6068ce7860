"""Plain-text views of the app's documents, shared by the commands (and the lm-eval command in suites)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a comparison is printed: `verifier run` never prints one
    from verifier.attribution.document import Comparison, DiagnosisEntry
    from verifier.types import RunSummary


def print_summary(summary: RunSummary) -> None:
    from verifier.execution.scoring import summary_lines

    print("\n".join(summary_lines(summary)))


def first_cause(doc: Comparison) -> str | None:
    """The one line that says why, for `--quiet`, as the full summary writes it: the first diagnosis (the component
    to fix), else the first reason."""
    from verifier.attribution.document import Comparison, DiagnosisEntry

    c = doc
    if c.diagnosis:
        return _diagnosis_line(c.diagnosis[0])
    why = next((r for r in c.reasons or [] if not r.startswith("diagnosis:")), None)
    return None if why is None else f"  why: {why}"


def _diagnosis_line(d: DiagnosisEntry) -> str:
    ex = f" e.g. {', '.join(d.examples[:3])}" if d.examples else ""
    return f"  diagnosis: {d.component}: {d.explanation};{ex} [{', '.join(d.modes)}]"


def print_quiet(doc: Comparison) -> None:
    """`--quiet`: the status and its first cause; the rest is in the report."""
    from verifier.attribution.document import Comparison, DiagnosisEntry

    c = doc
    print(f"status: {c.status} (exit {c.exit_code}): {c.meaning}")
    cause = first_cause(c)
    if cause:
        print(cause)


def print_comparison(doc: Comparison) -> None:
    from verifier.attribution.document import Comparison, DiagnosisEntry

    c = doc
    print(f"status: {c.status} (exit {c.exit_code}): {c.meaning}")
    # Lead with what to fix: the diagnosis (component, finding, where to look), then why, then the evidence.
    for d in c.diagnosis or ():
        print(_diagnosis_line(d))
    for why in c.reasons or []:
        if not why.startswith("diagnosis:"):
            print(f"  why: {why}")
    models = [c.run_model, c.golden_model]
    if all(isinstance(m, str) and m for m in models) and models[0] != models[1]:
        print(f"  note: the run is of model {models[0]!r}, the golden of {models[1]!r}: a difference may be the model's, not the endpoint's")
    from verifier.attribution.explain import tool_call_line

    from verifier.attribution.teacher_forced import summary_line

    for suite, s in c.suites.items():
        line = tool_call_line(s.tool_calls)
        if line:
            print(f"  {suite} {line}")
        forced = summary_line(s.teacher_forced)
        if forced:
            print(f"  {suite} {forced}")
    for name, side in (("frontend", c.frontend), ("quantization", c.quantization)):
        print(f"  {name}: {side.verdict}")
        for e in side.evidence:
            if e.verdict not in ("pass",):
                print(f"    [{e.verdict}] {e.suite}: {e.summary}")
    rows = c.conformance or []
    if rows:
        from collections import Counter

        n = Counter(r["status"] for r in rows)
        print(f"  probes: {len(rows)} probe x surface rows: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(n.items())))
        for r in rows:  # failing rows lead the table
            if r["status"] in ("regression", "not_run", "infra"):
                print(f"    [{r['status'].replace('_', ' ')}] {r['probe']} on {r['surface']} ({r['component']}): {r['candidate_detail']}")
    also = c.infra.get("reference_also_failed")
    print(f"  infra: {c.infra['count']}/{c.infra['total']} (budget {c.infra['budget']:.0%})"
          + (f"; {also} more where the golden failed too (not counted)" if also else ""))
