"""Why a comparison came out as it did, in words, and the stable list of checks CI tracks. Pure.

`reasons` names the signal behind an `incomplete` or `inconclusive` verdict (and leads a regression
with its diagnosis): "not enough evidence" is never the whole story. `checks` is one entry per
(suite, signal, metric) the golden defines, whatever the run's outcome, so a CI dashboard that
tracks JUnit testcases by name keeps its history across passing and failing runs.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from verifier.attribution import coverage as coverage_mod
from verifier.attribution.diagnosis import component_of, headline
from verifier.attribution.numerics import DRIFT_FLOOR
from verifier.attribution import signals
from verifier.attribution.document import Check, Comparison, SideCounts, SuiteResult
from verifier.golden.model import GoldenHeader
from verifier.surfaces.registry import surface_for
from verifier.types import Evidence, Observation


def _quality_fails(doc: Comparison) -> list[str]:
    out = []
    for suite, s in doc.suites.items():
        for m, v in s.metrics.items():
            if v.verdict == "fail":
                out.append(f"{suite}/{m} {v.golden}->{v.candidate} (p={v.p_value})")
    return out


def _numerics_changed(doc: Comparison) -> list[str]:
    """Suites whose numerics moved decisively (drift fired and greedy outputs parted), in words."""
    out = []
    for suite, s in doc.suites.items():
        d, dv = s.drift, s.divergence
        if _forced_passed(s):
            continue  # corroboration that did not hold: _outweighed_notes
        if d.numerics_changed and dv is not None:  # numerics_changed holds only with a failing divergence
            out.append(f"{suite}: logprob drift {d.mean_abs_delta} above {d.margin} and greedy outputs part from the "
                       f"golden's on {dv.count}/{dv.n} samples (reruns: {dv.margin})")
    return out


def _teacher_forced_fails(doc: Comparison) -> list[str]:
    """Suites whose teacher-forced distance failed (the primary numerics evidence), in words, with what it cost."""
    out = []
    impact = doc.quantization.extra.get("impact")
    for suite, s in doc.suites.items():
        t = s.teacher_forced or {}
        if t.get("verdict") == "fail":
            out.append(f"{suite}: on the golden's own tokens ({t.get('method')}) the distribution is further from the golden's "
                       f"than the reruns' (KL mean {_g(t.get('kl_mean'))}, p99 {_g(t.get('kl_p99'))}, reruns {_g(t.get('reference_kl_mean'))}, "
                       f"Mann-Whitney p={t.get('p_value')})" + (f"; {impact.replace('_', ' ')}" if isinstance(impact, str) else ""))
    return out


def _g(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _forced_passed(s: SuiteResult) -> bool:
    """The suite's teacher-forced distance was used and passed: it decides the suite's numerics (compare._decide)."""
    return (s.teacher_forced or {}).get("verdict") == "pass"


def _outweighed_notes(doc: Comparison) -> list[str]:
    """Suites whose drift or parting fired while the teacher-forced distance passed, in words: corroboration that did
    not hold, so the numerics did not fail or stay undecided on it."""
    out = []
    for suite, s in doc.suites.items():
        if not _forced_passed(s):
            continue
        d, dv = s.drift, s.divergence
        moved = ([f"logprob drift {_g(d.mean_abs_delta)} above its floor {_g(d.margin)}"]
                 if d.state in ("fired", "uncalibrated") else []) \
            + ([f"greedy outputs part from the golden's on {dv.count}/{dv.n} samples (reruns: {dv.margin})"]
               if dv is not None and dv.verdict != "pass" else [])
        if moved:
            t = s.teacher_forced or {}
            out.append(f"{suite}: {' and '.join(moved)}, but on the golden's own tokens the distribution is within the "
                       f"reruns' spread (teacher-forced KL mean {_g(t.get('kl_mean'))}, margin {_g(t.get('margin'))}, "
                       f"p={t.get('p_value')}): corroboration that did not hold, the greedy decode moved otherwise "
                       "(batch shape or kernel order flips near-tie tokens)")
    return out


def _why_unattributed(suite: str, s: SuiteResult) -> str:
    """Why one suite's quality drop could not be put on the frontend or the numerics, naming what is missing:
    advice to add logprobs only where they were absent."""
    d = s.drift
    lp = d.logprob_counts
    of = (lp.of if lp else None) or d.samples or 0
    if d.state == "clean":
        return (f"{suite}: logprob drift {_g(d.mean_abs_delta)} at the noise floor {_g(d.margin)} over {d.tokens} shared-prefix "
                "tokens: not the weights; look for post-processing or ignored sampling parameters (rerun with `verifier gate --probes`)")
    if d.state == "uncalibrated":
        return f"{suite}: logprob drift {_g(d.mean_abs_delta)} above the floor {_g(d.margin)}, but the golden is not calibrated for {suite}/drift: rerun `verifier calibrate`"
    if d.samples and not d.tokens:
        parted = d.samples if d.parted_at_token_0 is None else d.parted_at_token_0
        return (f"{suite}: outputs part from the golden at token 0 on {parted}/{d.samples} samples: "
                "no shared prefix to measure drift")
    if lp and (lp.golden or 0) == 0:
        return f"{suite}: the golden has no logprobs to measure drift on: bless a reference run made with `verifier run --logprobs 5`"
    if lp and (lp.candidate or 0) == 0:
        return f"{suite}: the candidate returned no logprobs on {of} samples: rerun with `verifier gate --logprobs 5` (or the endpoint does not return them)"
    return f"{suite}: no logprobs to separate numerics from frontend: rerun with `verifier gate --logprobs 5`"


def _behaviour_notes(doc: Comparison) -> list[str]:
    """Model-behaviour findings the candidate shows where the golden did not (empty answers...): they are scored as
    wrong, so they are part of a quality drop, and a person reading the reason should see them named."""
    from verifier.judge.contract import MODEL_BEHAVIOUR

    out = []
    for suite, s in doc.suites.items():
        for code, n in sorted(s.finding_counts().items()):
            if code in MODEL_BEHAVIOUR and n.candidate > n.golden:
                out.append(f"{suite}: {code} on {n.candidate}/{s.paired} samples (golden {n.golden})")
    return out


def _numerics_reasons(doc: Comparison) -> list[str]:
    """Why the quantization side is undecided."""
    out: list[str] = []
    drift = {suite: s.drift for suite, s in doc.suites.items()}
    states = {d.state for d in drift.values()}
    dropped = _quality_fails(doc)
    if dropped and "fired" not in states:
        failing = [suite for suite, s in doc.suites.items() if any(v.verdict == "fail" for v in s.metrics.values())]
        out.append(f"quality dropped ({'; '.join(dropped)}), cause not separable: "
                   + "; ".join(_why_unattributed(suite, doc.suites[suite]) for suite in failing))
        out += _behaviour_notes(doc)
    if not dropped and "fired" in states:
        for suite, d in drift.items():
            dv = doc.suites[suite].divergence
            if d.state == "fired" and not d.numerics_changed and not _forced_passed(doc.suites[suite]):
                parted = f"greedy outputs part on {dv.count}/{dv.n} samples, not above the reruns' rate" if dv else "no tokens to compare greedy outputs"
                out.append(f"{suite}: drift {d.mean_abs_delta} above floor {max(d.margin, DRIFT_FLOOR)} but no quality change "
                           f"and {parted}")
    for suite, s in doc.suites.items():
        for m, v in s.metrics.items():
            if v.verdict == "inconclusive" and v.margin is None and v.note:
                out.append(f"{suite}/{m}: {v.golden} -> {v.candidate} (delta {v.delta}, CI {v.ci}) "
                           f"inconclusive for this metric: {v.note}")
            elif v.verdict == "inconclusive":
                need = v.needed
                tail = f"about {need} samples needed" if need else "a margin of 0 is never cleared by sampling: recalibrate with more reruns"
                out.append(f"{suite}/{m}: n={v.n} too small for margin {v.margin} (delta {v.delta}, CI {v.ci}): {tail}")
    return out


def _evidence_reasons(doc: Comparison) -> list[str]:
    out = []
    for e in doc.evidence:
        if e.qualifier == "uncalibrated" and e.signal != "quality":  # quality: _numerics_reasons
            out.append(f"{e.suite}: {e.signal} uncalibrated, inconclusive for this signal (without a margin it "
                       f"cannot fail the gate): {e.summary}")
        elif e.verdict == "inconclusive" and e.signal not in ("quality", "logprob_drift", "greedy_divergence"):
            out.append(f"{e.suite}: {e.signal} not decided at this sample size: {e.summary}")
        elif e.verdict == "inconclusive" and e.metric == "*":
            out.append(f"{e.suite}: {e.summary}")
    return out


def reasons(doc: Comparison) -> list[str]:
    """One line per cause, the deciding one first."""
    out: list[str] = []
    inf, cov = doc.infra, doc.coverage
    if doc.status == "incomplete":
        if inf["rate"] is not None and inf["rate"] > inf["budget"]:
            out.append(f"infra errors {inf['count']}/{inf['total']} (rate {inf['rate']}) above the budget {inf['budget']}")
        if cov.get("rate", 0) > inf["budget"]:
            out.append(coverage_mod.describe(dict(cov)))
    head = headline(doc.diagnosis or ())
    if head and doc.status in ("frontend_regression", "both"):
        out.append(head)
    if doc.status in ("quantization_regression", "both"):
        out.append("numerics: " + "; ".join(_teacher_forced_fails(doc) + _quality_fails(doc) + _numerics_changed(doc)
                                            or ["repetition above the golden's"]))
    if doc.quantization.verdict == "inconclusive" or doc.status in ("inconclusive", "regression_unattributed"):
        out += _numerics_reasons(doc)
    if doc.status == "inconclusive":
        out += _evidence_reasons(doc)
    out += _outweighed_notes(doc)
    if doc.status in ("frontend_regression", "quantization_regression", "both"):
        out += _behaviour_notes(doc)  # empty answers and the like, named wherever the verdict fails
    if doc.logprobs_missing_modes:
        out.append(f"no logprobs on {', '.join(doc.logprobs_missing_modes)}: logprob drift and "
                   "decoding changes are not measured on those modes" + next((f" ({s.no_logprobs})" for s in map(
                       surface_for, doc.logprobs_missing_modes) if s.no_logprobs), ""))
    unmeasured = None if doc.logprobs_missing_modes else _numerics_unmeasured(doc)  # that line says it per mode
    if unmeasured and doc.status not in ("quantization_regression", "both"):
        out.append(unmeasured)
    if doc.tool_call_logprobs_missing_modes:
        out.append(f"no logprobs on the tool calls of {', '.join(doc.tool_call_logprobs_missing_modes)}: numerics on "
                   "tool-call tokens (drift, parting) are not measured on those modes")
    if cov.get("subset"):
        out.append(f"compared a subset of the golden: {cov['subset_skipped_samples']} golden sample(s) not run")
    elif cov.get("missing") and doc.status != "incomplete":
        out.append(coverage_mod.describe(dict(cov)) + " (within the budget)")
    return out


def _numerics_unmeasured(doc: Comparison) -> str | None:
    """The suites on which neither numerics line was measured (no logprob drift, no greedy parting): a pass there
    rests on the quality metrics alone, and says so."""
    blind: list[str] = []
    sides: set[str] = set()
    for suite, s in doc.suites.items():
        if s.drift.state != "unavailable" or (s.divergence is not None and s.divergence.n):
            continue
        blind.append(suite)
        lp = s.drift.logprob_counts or SideCounts.from_dict(None)
        sides.update(side for side, count in (("the golden", lp.golden), ("the run", lp.candidate)) if not count)
    if not blind:
        return None
    why = f"no logprobs from {' or '.join(sorted(sides))}" if sides else "no clean paired sample with logprobs"
    return (f"numerics not measured on {', '.join(blind)}: no logprob drift and no greedy parting ({why}); a numerics "
            "change shows here only as a quality drop (gate with `--logprobs 5` against a golden recorded with logprobs)")


def _metrics_of(golden_obs: Iterable[Observation], suite: str) -> list[str]:
    return sorted({m for o in golden_obs if o.suite == suite for m in o.metrics})


def _check(name: str, cls: str, ev: Evidence | None, default: str = "not measured on this run") -> Check:
    if ev is None:
        return Check(name, cls, "not_measured", default)
    return Check(name, cls, ev.verdict, ev.summary, samples=list(ev.samples or ()), qualifier=ev.qualifier or None)


def checks(doc: Comparison, golden: GoldenHeader, golden_obs: list[Observation]) -> list[Check]:
    """Every check the golden defines, named by (suite, signal, metric) only."""
    ev = {(e.suite, e.signal, e.metric): e for e in doc.evidence}
    out = []
    for suite in sorted(golden.suites):
        star = ev.get((suite, "quality", "*"))
        for m in _metrics_of(golden_obs, suite):
            out.append(_check(f"{suite}: quality/{m}", "verifier.quantization", ev.get((suite, "quality", m)) or star))
        for sg in signals.declared():
            cls = "verifier.frontend" if sg.side == "frontend" else "verifier.quantization"
            out.append(_check(f"{suite}: {sg.name}", cls, ev.get((suite, sg.name, None))))
        out.append(_check(f"{suite}: logprob_drift", "verifier.quantization", ev.get((suite, "logprob_drift", None)),
                          "not measured: no logprobs on one side (rerun with `verifier gate --logprobs 5`)"))
        out.append(_check(f"{suite}: greedy_divergence", "verifier.quantization", ev.get((suite, "greedy_divergence", None)),
                          "not measured: no output tokens on one side (rerun with `verifier gate --logprobs 5`)"))
        forced = doc.suites[suite].teacher_forced if suite in doc.suites else None
        if forced:  # only where the run made the pass: the checks of a run without it stay as they were
            why = f"not measured: teacher forcing {forced.get('state')} ({forced.get('reason')})"
            out.append(_check(f"{suite}: teacher_forced_kl", "verifier.quantization", ev.get((suite, "teacher_forced_kl", None)), why))
            out.append(_check(f"{suite}: teacher_forced_tokens", "verifier.frontend", ev.get((suite, "teacher_forced_tokens", None)), why))
    rows = doc.conformance
    if rows is None:  # a document from before the conformance table
        for name in sorted(golden.probes or {}):
            out.append(_check(f"*: probe:{name}", "verifier.frontend", ev.get(("*", f"probe:{name}", None)), "probe not run (rerun with `verifier gate --probes`)"))
    for r in rows or []:  # the conformance table, failing rows first: one check per probe x surface
        out.append(probe_check(r))
    return out


PROBE_VERDICT = {"regression": "fail", "pass": "pass", "improved": "pass", "reference_fails": "reference_fails",
                 "not_in_golden": "not_in_golden", "not_run": "not_measured", "infra": "not_measured", "reference_infra": "not_measured"}


def probe_check(r: dict[str, Any]) -> Check:
    """One conformance row as a CI check named `<surface>: probe:<name>` (a skip when the reference fails it too,
    when the golden never ran it, or when the run did not)."""
    ref = {"pass": "reference passed", "fail": "reference fails", "infra": "reference: infra error", None: "not in golden"}[r["reference"]]
    if r["status"] == "not_run":
        summary = f"{r['probe']} on {r['surface']}: not run (the golden has it; rerun with --probes)"
    else:
        summary = f"{r['probe']} on {r['surface']}: {r['candidate']} ({r['candidate_detail']}; {ref})"
    return Check(f"{r['surface']}: probe:{r['probe']}", "verifier.frontend", PROBE_VERDICT[r["status"]], summary,
                 samples=[], component=r["component"])


def component_line(doc: Comparison, check: Check) -> str | None:
    """The component a failing frontend check implicates, for its JUnit failure message."""
    signal = check.name.split(": ", 1)[-1]
    if check.cls != "verifier.frontend":
        return None
    if check.component:
        return check.component
    if signal == "new_findings":
        suite = check.name.split(": ", 1)[0]
        comps = [d.component for d in doc.diagnosis or () if suite in d.suites]
        return ", ".join(comps) or None
    own = next((e.component for e in doc.frontend.evidence if e.signal == signal and e.component), None)
    return own or component_of(signal)[0]


def tool_call_line(tc: Mapping[str, Any] | None) -> str | None:
    """A tool-calling suite's K2VV numbers in one line, each beside the golden's (comparison `suites.<s>.tool_calls`)."""
    if not tc:
        return None

    def num(x: Any) -> str:
        return "–" if x is None else f"{x:.3f}"

    f1, sa = SideCounts.from_dict(tc.get("trigger_f1")), tc.get("schema_accuracy") or {}
    accuracy = SideCounts.from_dict(sa)
    parts = []
    if f1.candidate is not None or f1.golden is not None:
        parts.append(f"trigger F1 {num(f1.candidate)} (golden {num(f1.golden)})")
    calls = f", {sa['candidate_calls']} calls" if sa.get("candidate_calls") is not None else ""
    parts.append(f"schema accuracy {num(accuracy.candidate)} (golden {num(accuracy.golden)}{calls})")
    if tc.get("trigger_agreement_f1") is not None:
        parts.append(f"trigger agreement with golden F1 {num(tc['trigger_agreement_f1'])}")
    return "tool calls: " + "; ".join(parts)


def cut_words(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis: never mid-word (a single word longer
    than half the limit is the one exception: it is cut where the limit falls)."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    if not text[limit - 1].isspace() and head.rfind(" ") >= limit // 2:  # the cut falls inside a word: back off
        head = head[:head.rfind(" ")]
    return head.rstrip(" ,;:(") + "…"
