"""Run vs golden -> per-metric deltas -> a frontend verdict and a quantization verdict, each with evidence.

The method (DESIGN.md, "Attribution"): frontend signals are weight-independent
(contract findings, prompt-token fingerprint, stream parity, new rejections);
numerics signals are measured only on samples whose envelope is clean and whose
prompt fingerprint matches, so a frontend bug cannot masquerade as a quality drop.

The signals themselves are declared once each in signals.py (signals.SIGNALS); this module pairs
the observations, runs the declarations, and turns counts into verdicts (compare) or into the
run-to-run spreads that become margins (calibrate_margins).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, TypeVar

from verifier.attribution import numerics, signals, turn_diff
from verifier import stats
from verifier.attribution.document import Absent, Comparison, Drift, MetricResult, Side, SignalResult, SuiteResult, prompt_tokens_move
from verifier.attribution.numerics import DivergenceCount, DriftMeasure, PairedMetric
from verifier.attribution.surface_signals import mode_note
from verifier.golden.model import GoldenHeader, Margin
from verifier.judge.contract import MODEL_BEHAVIOUR, SIGNAL_JUDGED
from verifier.surfaces.registry import surface_for
from verifier.types import DEFAULT_INFRA_BUDGET, Evidence, Observation

if TYPE_CHECKING:
    from verifier.attribution.teacher_forced import SuiteMeasure

EXIT = {"pass": 0, "frontend_regression": 10, "quantization_regression": 11, "both": 12, "regression_unattributed": 13,
        "inconclusive": 20, "incomplete": 30}
MEANING = {
    0: "pass: no regression beyond calibrated margins",
    10: "frontend regression: the serving stack around the model changed behaviour",
    11: "quantization regression: the model's numerics changed with a clean frontend",
    12: "both: frontend and numerics regressions",
    13: "regression, cause not separable: quality dropped significantly and nothing measured says whether the frontend or the numerics did it",
    20: "inconclusive: not enough evidence either way at this sample size",
    30: "incomplete: too many infra errors or too much of the golden not covered to judge",
}

Rows = Iterable[Observation]
"""Observation rows: the golden's (store.load) or a run's (RunDir.observations); dicts are read into Observations
at those load boundaries, never here."""
Grouped = dict[str, dict[str, list[Observation]]]


class NoOverlap(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class PairedSuite:
    """What compare and calibrate read of one suite's paired observations (_suite_signals); not written as is."""

    turn_diff: dict[str, Any] | None
    modes: list[str]
    paired: int
    golden_clean: int
    clean_paired: int
    golden_only: int
    candidate_only: int
    events: dict[str, list[str]]
    """signal -> the sample ids it fired on"""
    reverse_events: dict[str, int]
    """numerics signal -> samples where it fired on the golden and not the candidate (McNemar)"""
    denominators: dict[str, int]
    """signal -> samples it was measurable on"""
    unordered: dict[str, int]
    """signal reading the send order (Signal.reads_send_order) -> samples it fired on whose records had none"""
    through_resends: dict[str, int]
    """signal reading the resend step (Signal.reads_resends) -> samples it fired on only with their resends"""
    pooled_transform: dict[str, Any]
    """logprobs_transformed over the samples too short to measure it alone, pooled: {"samples", "points", "fired"}"""
    signal_modes: dict[str, list[str]]
    event_modes: dict[str, dict[str, int]]
    metrics: dict[str, PairedMetric]
    flips: dict[str, list[str]]
    flips_by_mode: dict[str, dict[str, list[str]]]
    findings: dict[str, dict[str, int]]
    new_finding_detail: dict[str, dict[str, Any]]
    drift: DriftMeasure
    divergence: DivergenceCount
    trigger: dict[str, int]
    answer_agreement: float | None
    prompt_tokens_moved: dict[str, Any] | None
    """Where prompt_tokens_mismatch fired: the median prompt tokens of those samples, golden and candidate (the
    magnitude the diagnosis line gives: a template that drops the system prompt reads 332 -> 29)."""


def as_observations(rows: Rows) -> list[Observation]:
    """The rows as a list, each checked to be an Observation (a dict here is a caller that skipped the load
    boundary: a TypeError, not a silent conversion)."""
    out = list(rows)
    for o in out:
        if not isinstance(o, Observation):
            raise TypeError(f"expected Observation rows (RunDir.observations, Golden.observations), got {type(o).__name__}")
    return out


def _group(obs: list[Observation]) -> Grouped:
    g: Grouped = defaultdict(lambda: defaultdict(list))
    for o in obs:
        g[o.suite][o.sample_id].append(o)
    return g


@dataclasses.dataclass
class _NewFinding:
    """Where a finding code new on the candidate was seen, accumulated over samples (new_finding_detail[code])."""

    samples: list[str] = dataclasses.field(default_factory=list)
    modes: set[str] = dataclasses.field(default_factory=set)
    completion_tokens: set[int] | None = None
    """Output lengths, for LENGTH_EVIDENCE codes only."""

    def detail(self) -> dict[str, Any]:
        """The bounded block the comparison keeps."""
        lengths = {} if self.completion_tokens is None else {"completion_tokens": sorted(self.completion_tokens)[:20]}
        return {"samples": self.samples[:50], "modes": sorted(self.modes), **lengths}


def _count_findings(counts: dict[str, list[int]], detail: dict[str, _NewFinding], sid: str,
                    g: Sequence[Observation], c: Sequence[Observation]) -> None:
    """Per finding code: on how many samples each side showed it; for codes new on the candidate, where (diagnosis)."""
    gcodes = {code for o in g for code in o.findings}
    ccodes = {code for o in c for code in o.findings}
    for code in gcodes | ccodes:
        counts[code][0] += code in gcodes
        counts[code][1] += code in ccodes
    for code in sorted((ccodes - gcodes) - MODEL_BEHAVIOUR - SIGNAL_JUDGED):
        d = detail.setdefault(code, _NewFinding())
        d.samples.append(sid)
        d.modes.update(o.mode for o in c if code in o.findings)
        if code in LENGTH_EVIDENCE:  # where the outputs ended: one constant length is a cap (the diagnosis says it)
            if d.completion_tokens is None:
                d.completion_tokens = set()
            d.completion_tokens.update(o.completion_tokens for o in c if code in o.findings and o.completion_tokens is not None)


LENGTH_EVIDENCE = frozenset({"output_capped"})
"""Finding codes whose records' output lengths the comparison keeps (new_finding_detail[code]["completion_tokens"])."""


def _flip_by_mode(flips: dict[str, dict[str, list[str]]], sid: str, g: Sequence[Observation], c: Sequence[Observation]) -> None:
    """Answer changes per wire mode, over every judged record: a streamed-only change is a flip too."""
    for mode in sorted({o.mode for o in c}):
        kind = numerics.flip([o for o in g if o.mode == mode and o.judged], [o for o in c if o.mode == mode and o.judged])
        if kind:
            flips.setdefault(mode, {"regressed": [], "improved": []})[kind].append(sid)


def _count_trigger(trig: dict[str, int], g: Sequence[Observation], c: Sequence[Observation]) -> None:
    """K2VV trigger decision (did the model call a tool?), the candidate's against the golden's, by majority over records."""
    gt = [o.tool_triggered for o in g if o.judged and o.tool_triggered is not None]
    ct = [o.tool_triggered for o in c if o.judged and o.tool_triggered is not None]
    if gt and ct:
        g1, c1 = sum(gt) / len(gt) >= 0.5, sum(ct) / len(ct) >= 0.5
        trig["tp" if g1 and c1 else "fp" if c1 else "fn" if g1 else "tn"] += 1


@dataclasses.dataclass
class _SignalTally:
    """The declared signals over one suite's paired samples (PairedSuite's events, reverse_events, denominators,
    unordered, signal_modes, event_modes), one sample at a time."""

    several: bool
    """The run covers several surfaces: each signal's evidence names where it fired (event_modes)."""
    declared: dict[str, signals.Signal]
    numerics_events: tuple[str, ...]
    path_modes: dict[str, set[str]]
    """signal -> the modes it blames whatever mode it fired on (signals.fixed_blame_modes)"""
    events: dict[str, list[str]]
    reverse: dict[str, int]
    denom: dict[str, int]
    unordered: dict[str, int]
    through_resends: dict[str, int]
    modes: dict[str, set[str]]
    event_modes: dict[str, dict[str, int]]
    """signal -> wire mode -> samples"""

    @classmethod
    def start(cls, several: bool) -> _SignalTally:
        declared = signals.by_name()
        numerics_events = signals.names("numerics")
        return cls(several=several, declared=declared, numerics_events=numerics_events,
                   path_modes=signals.fixed_blame_modes(), events={k: [] for k in declared},
                   reverse={k: 0 for k in numerics_events}, denom={k: 0 for k in declared},
                   unordered={k: 0 for k, sg in declared.items() if sg.reads_send_order},
                   through_resends={k: 0 for k, sg in declared.items() if sg.reads_resends}, modes=defaultdict(set),
                   event_modes=defaultdict(lambda: defaultdict(int)))

    def add(self, sid: str, gs: list[Observation], cs: list[Observation], results: dict[str, bool | None],
            touched: bool, rs: Sequence[Observation] = ()) -> None:
        """One sample's signal results (`touched`: some frontend signal fired on it; `rs`: its resend records)."""
        # Where each signal fired (mode by mode): the evidence names a surface when there are several, and the
        # diagnosis tells a streamed-only fault from one on every path.
        where = signals.where_fired(gs, cs, results, rs)
        for name, fired in results.items():
            # Numerics signals count only on samples no frontend signal touched (DESIGN.md, "Attribution").
            if fired is None or (touched and name in self.numerics_events):
                continue
            self.denom[name] += 1
            if fired:
                self.events[name].append(sid)
                if name in self.unordered and signals.send_order_unknown(cs):
                    self.unordered[name] += 1
                if rs and name in self.through_resends and not self.declared[name].measure(gs, cs):
                    self.through_resends[name] += 1
                self.modes[name].update(self.path_modes.get(name) or where.get(name) or {o.mode for o in cs})
                for m in (where.get(name) or ()) if self.several else ():
                    self.event_modes[name][m] += 1
        for name in self.numerics_events:
            if not touched and results[name] is not None:
                self.reverse[name] += bool(self.declared[name].measure(cs, gs))


@dataclasses.dataclass
class _SuiteTally:
    """Everything _suite_signals gathers over one suite's paired samples, one sample at a time (add), and the
    PairedSuite it makes of them (paired_suite)."""

    signal_tally: _SignalTally
    pooled: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    """logprobs_transformed's values on samples it could not measure alone"""
    pooled_samples: list[str] = dataclasses.field(default_factory=list)
    finding_counts: dict[str, list[int]] = dataclasses.field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    detail: dict[str, _NewFinding] = dataclasses.field(default_factory=dict)
    flips_by_mode: dict[str, dict[str, list[str]]] = dataclasses.field(default_factory=dict)
    trigger: dict[str, int] = dataclasses.field(default_factory=lambda: {"tp": 0, "fp": 0, "fn": 0, "tn": 0})
    paired_numerics: numerics.Numerics = dataclasses.field(default_factory=numerics.Numerics)
    """Drift, parting and the quality metrics, on the clean samples no frontend signal touched"""
    moved: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    """(golden, candidate) prompt tokens where prompt_tokens_mismatch fired"""

    def add(self, sid: str, gs: list[Observation], cs: list[Observation], rs: Sequence[Observation] = ()) -> None:
        """One paired sample: the golden's records and the candidate's (`rs`: its records of the resend step, which
        only the signals declared `reads_resends` read)."""
        results = signals.evaluate(gs, cs, rs)
        if results.get("prompt_tokens_mismatch"):
            self.moved.append(_prompt_tokens_of(gs, cs))
        touched = signals.touched_by_frontend(results)
        self.signal_tally.add(sid, gs, cs, results, touched, rs)
        if results.get("logprobs_transformed") is None:
            pts = signals.transform_points(gs, cs)
            if pts:
                self.pooled += pts
                self.pooled_samples.append(sid)
        _count_findings(self.finding_counts, self.detail, sid, gs, cs)
        _flip_by_mode(self.flips_by_mode, sid, gs, cs)
        _count_trigger(self.trigger, gs, cs)
        clean_g, clean_c = [o for o in gs if o.clean], [o for o in cs if o.clean]
        if clean_g and clean_c and not touched:
            self.paired_numerics.add(sid, clean_g, clean_c)

    def paired_suite(self, G: dict[str, list[Observation]], C: dict[str, list[Observation]], ids: list[str]) -> PairedSuite:
        num = self.paired_numerics.summary()
        sig = self.signal_tally
        return PairedSuite(
            turn_diff=turn_diff.summarize(G, C),
            modes=sorted({o.mode for sid in ids for o in C[sid]}),
            paired=len(ids),
            golden_clean=sum(any(o.clean for o in G[sid]) for sid in ids),
            clean_paired=num.clean_paired,
            golden_only=len(set(G) - set(C)),
            candidate_only=len(set(C) - set(G)),
            events=sig.events,
            reverse_events=sig.reverse,
            denominators=sig.denom,
            unordered=sig.unordered,
            through_resends=sig.through_resends,
            pooled_transform={"samples": self.pooled_samples, "points": len(self.pooled),
                              "fired": signals.one_transform(self.pooled) if len(self.pooled_samples) >= POOLED_MIN_SAMPLES else None},
            signal_modes={k: sorted(v) for k, v in sig.modes.items()},
            event_modes={k: dict(sorted(v.items())) for k, v in sig.event_modes.items()},
            metrics=num.metrics,
            flips=num.flips,
            flips_by_mode=self.flips_by_mode,
            findings={k: {"golden": v[0], "candidate": v[1]} for k, v in sorted(self.finding_counts.items())},
            new_finding_detail={k: v.detail() for k, v in sorted(self.detail.items())},
            drift=num.drift,
            divergence=num.divergence,
            trigger=self.trigger,
            answer_agreement=num.answer_agreement,
            prompt_tokens_moved=_median_move(self.moved),
        )


def _suite_signals(G: dict[str, list[Observation]], C: dict[str, list[Observation]],
                   R: Mapping[str, list[Observation]] | None = None) -> PairedSuite:
    """One suite's paired observations, sample by sample (_SuiteTally.add), summed into a PairedSuite; `R`: the
    candidate's resend records per sample."""
    ids = sorted(set(G) & set(C))
    # A run over several surfaces asks each signal where it fired, so the evidence names the surface.
    several = len({surface_for(o.mode).name for sid in ids for o in C[sid]}) > 1
    tally = _SuiteTally(signal_tally=_SignalTally.start(several))
    for sid in ids:
        tally.add(sid, G[sid], C[sid], (R or {}).get(sid, ()))
    return tally.paired_suite(G, C, ids)


POOLED_MIN_SAMPLES = 3
"""Samples whose logprob values are pooled at least, for logprobs_transformed's suite-level form: one transform
explaining every value across several answers is no coincidence of one short answer."""


def _prompt_tokens_of(g: Sequence[Observation], c: Sequence[Observation]) -> tuple[float, float]:
    """One sample's prompt tokens, golden and candidate: the median over its records (every mode sends one prompt)."""
    import statistics

    def med(obs: Sequence[Observation]) -> float:
        return float(statistics.median(o.prompt_tokens for o in obs if o.prompt_tokens is not None))

    return med(g), med(c)


def _median_move(moved: list[tuple[float, float]]) -> dict[str, Any] | None:
    """The median prompt tokens over the samples whose prompt tokens moved, golden and candidate; None: none moved."""
    import statistics

    if not moved:
        return None
    return {"golden_median": statistics.median(g for g, _ in moved), "candidate_median": statistics.median(c for _, c in moved),
            "samples": len(moved)}


def paired_signals(golden: Rows, cand: Rows, resent: Rows = ()) -> dict[str, PairedSuite]:
    """Everything compare and calibrate need, per suite, from two sets of observations (`resent`: the candidate's
    records of the resend step, execution/resend.py)."""
    G, C, R = _group(as_observations(golden)), _group(as_observations(cand)), _group(as_observations(resent))
    return {suite: _suite_signals(G[suite], C[suite], R.get(suite)) for suite in sorted(set(G) & set(C))}


def _margin(margins: Mapping[str, Margin], key: str) -> float | None:
    """The calibrated margin, or None where the golden predates the key (a signal added after it was calibrated)."""
    m = margins.get(key)
    return None if m is None else m.value


UNCALIBRATED = "uncalibrated"
Verdict = TypeVar("Verdict", MetricResult, SignalResult)


def uncalibrated(verdict: Verdict, key: str) -> Verdict:
    """A verdict judged against margin 0 because the golden has no margin for `key` (a golden calibrated before the
    signal existed, or without it): what did not fire passes (a rate of 0 clears any margin), what fired is
    `inconclusive` for this signal (the reference's own spread is unknown), never a failure and never an error.
    The other signals decide as always (_decide): the status is `inconclusive` only when nothing else fails."""
    if verdict.verdict == "pass":
        return verdict
    return dataclasses.replace(verdict, verdict="inconclusive", margin=None,
                               note=f"golden not calibrated for {key}: rerun `verifier calibrate`")


def _qualifier(verdict: MetricResult | SignalResult) -> str | None:
    return UNCALIBRATED if verdict.note and verdict.margin is None else None


def _combine(verdicts: Iterable[str]) -> str:
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    if "inconclusive" in verdicts:
        return "inconclusive"
    return "pass"


def _quality(suite: str, s: PairedSuite, margins: Mapping[str, Margin]) -> tuple[dict[str, MetricResult], list[Evidence]]:
    """Per-metric verdicts on the clean paired samples, and their evidence."""
    if not s.metrics:
        if s.golden_clean == 0:
            # The reference itself never answered cleanly (e.g. it rejects images): nothing to regress from.
            return {}, [Evidence("quality", suite, "pass", metric="*", qualifier="not_measured",
                                 summary="not measurable: the golden has no clean sample either (the reference refuses or breaks this suite)")]
        if s.clean_paired:
            # A suite without a metric (a replay of recorded requests with no tool calls to diff): its signals judge it.
            return {}, [Evidence("quality", suite, "pass", metric="*",
                                 summary=f"no quality metric on this suite: its {s.clean_paired} clean paired samples are judged by the signals only")]
        return {}, [Evidence("quality", suite, "inconclusive", metric="*",
                             summary="no sample has a clean envelope on both sides: quality cannot be judged")]
    mets: dict[str, MetricResult] = {}
    ev: list[Evidence] = []
    for m, v in sorted(s.metrics.items()):
        key = f"{suite}/{m}"
        margin = _margin(margins, key)
        mv = numerics.metric_verdict(v.golden, v.candidate, 0.0 if margin is None else margin)
        if margin is None:
            mv = uncalibrated(mv, key)
        elif mv.verdict == "inconclusive":
            diffs = [c - g for g, c in zip(v.golden, v.candidate)]
            mv = dataclasses.replace(mv, samples_needed=stats.samples_needed(stats.sd(diffs), margin))
        mets[m] = mv
        p_value = "" if mv.p_value is None else f", p={mv.p_value}"  # no test on a non-binary metric: not "p=None"
        # A metric is judged on the samples both sides answered cleanly: where findings or errors left some out, the
        # line says so (an unchanged accuracy beside a schema accuracy of 0 is then no contradiction)
        left_out = s.paired - (mv.n or 0)
        scope = f"; on the {mv.n} of {s.paired} paired samples both sides answered cleanly" if left_out > 0 else ""
        ev.append(Evidence("quality", suite, mv.verdict, metric=m, qualifier=_qualifier(mv),
                           summary=f"{m}: {mv.golden} -> {mv.candidate} (delta {mv.delta}, CI {mv.ci}, margin {mv.margin}{p_value}, n={mv.n})"
                                   + scope + (f"; {mv.note}" if mv.note else "")))
    return mets, ev


def _signal_verdicts(suite: str, s: PairedSuite, margins: Mapping[str, Margin]) -> tuple[dict[str, SignalResult], list[Evidence], list[Evidence]]:
    """Event-rate verdicts for every signal of the table: (per-signal blocks, frontend evidence, numerics evidence)."""
    sigs: dict[str, SignalResult] = {}
    fe: list[Evidence] = []
    q: list[Evidence] = []
    for sg in signals.declared():
        name = sg.name
        n = s.denominators[name]
        key = f"{suite}/signal:{name}"
        # Older goldens predate newer signals: judged against 0 and, where the signal fired, undecided (uncalibrated).
        margin = 0.0 if sg.structural_zero else _margin(margins, key)
        if sg.side == "frontend":
            ev = numerics.event_verdict(len(s.events[name]), n, margin or 0.0)
        else:
            ev = numerics.paired_event_verdict(len(s.events[name]), s.reverse_events[name], n, margin or 0.0)
        if margin is None and n:
            ev = uncalibrated(ev, key)
        ev = dataclasses.replace(ev, samples=s.events[name][:50])
        unordered = s.unordered.get(name)
        if unordered:
            ev = dataclasses.replace(ev, note="; ".join(x for x in (ev.note, f"{unordered} sample(s) read without "
                                     "their send order (a journal from before it was recorded): any two repeats compared, "
                                     "not only first against later") if x))
        resent = s.through_resends.get(name)
        if resent:
            ev = dataclasses.replace(ev, note="; ".join(x for x in (ev.note, f"{resent} sample(s) read through the gate's "
                                     "resend step (the request sent again alone after the run)") if x))
        if name == "prompt_tokens_mismatch" and s.prompt_tokens_moved:  # the fingerprint's magnitude, for the diagnosis
            ev = dataclasses.replace(ev, prompt_tokens=s.prompt_tokens_moved)
        sigs[name] = ev
        if ev.n:
            target = fe if sg.side == "frontend" else q
            where = s.event_modes.get(name) or None  # the wire modes it fired on: names a surface
            paired = "" if isinstance(ev.p_value, Absent) else f"; golden {ev.golden_count}/{ev.n}, McNemar p={ev.p_value}"
            target.append(Evidence(name, suite, ev.verdict, samples=tuple(s.events[name][:10]), modes=where,
                                   qualifier=_qualifier(ev), summary=f"{name}: {ev.count}/{ev.n} samples{mode_note(where)} (rate {ev.rate}, CI {ev.ci}, margin {ev.margin}"
                                           + paired + ")" + (f"; {ev.note}" if ev.note else "")
                                           + (f"; {prompt_tokens_move(ev.prompt_tokens)}" if ev.prompt_tokens else "")))
    return sigs, fe, q


def _drift_evidence(suite: str, s: PairedSuite, margins: Mapping[str, Margin]) -> tuple[Drift, list[Evidence]]:
    key = f"{suite}/drift"
    calibrated = _margin(margins, key)
    d = numerics.drift_state(s.drift, calibrated or 0.0)
    if d.state == "unavailable":
        return d, []
    note = ""
    if d.state == "fired" and calibrated is None:
        d = dataclasses.replace(d, state="uncalibrated")  # above the floor, but the reference's own rerun drift is unknown
        note = f"; golden not calibrated for {key}: rerun `verifier calibrate`"
    verdict = {"fired": "fail", "uncalibrated": "inconclusive"}.get(d.state, "pass")
    return d, [Evidence("logprob_drift", suite, verdict, qualifier=UNCALIBRATED if d.state == "uncalibrated" else None,
                        summary=f"mean |Δ logprob| {_g(d.mean_abs_delta)} over {d.tokens} shared-prefix tokens on {d.samples} samples "
                                f"(noise floor {_g(d.margin)}); {_parting(d)}{note}")]


def _g(x: float | None) -> str:
    """A logprob figure for people: four significant digits (0.01309, not 0.013094999999999999)."""
    return "–" if x is None else f"{x:.4g}"


def _parting(d: Drift) -> str:
    """The median first divergence over the samples that parted; a sample that never parted has none."""
    rows = d.per_sample
    if rows is None:
        return f"median first divergence at token {d.first_divergence_median}"
    parted = numerics.parted_median(rows)
    if parted is None:
        return "no greedy output parted from the golden's"
    return f"parted on {parted[0]} of {len(rows)} samples, median first divergence at token {parted[1]:g}"


def _divergence_evidence(suite: str, s: PairedSuite, margins: Mapping[str, Margin]) -> tuple[SignalResult | None, list[Evidence]]:
    """How often the candidate's greedy output parts from the golden's, against how often the reference's own
    reruns parted (calibrated): the second, independent line of numerics evidence beside the drift."""
    dv = s.divergence
    n = dv["n"]
    if not n:
        return None, []
    key = f"{suite}/divergence"
    if key not in margins and dv["count"]:  # goldens calibrated before this evidence existed: the rerun rate is unknown
        ev = dataclasses.replace(numerics.event_verdict(dv["count"], n, 0.0), verdict="inconclusive", margin=None)
        tail = f"golden not calibrated for {key}: rerun `verifier calibrate`"
    else:
        ev = numerics.event_verdict(dv["count"], n, max(_margin(margins, key) or 0.0, numerics.DIVERGENCE_FLOOR))
        tail = f"reference reruns parted at rate {ev.margin}"
    samples = dv["samples"][:50]
    ev = dataclasses.replace(ev, samples=samples)
    return ev, [Evidence("greedy_divergence", suite, ev.verdict, samples=tuple(samples[:10]),
                         qualifier=UNCALIBRATED if ev.margin is None else None, summary=f"greedy output parts from the golden's on {ev.count}/{n} samples (rate {ev.rate}, CI {ev.ci}); {tail}")]


# Mean |Δ logprob| per shared-prefix token below which the prefix is computed identically: far under llama.cpp's
# batch-shape noise (0.0028-0.0043 measured), which is what a healthy engine on another batch shape shows.
ZERO_DRIFT = 1e-4
ZERO_DRIFT_MIN_TOKENS = 10


def _zero_drift_parting(suite: str, d: Drift, dv: SignalResult | None) -> list[Evidence]:
    """Greedy outputs part from the golden's significantly more often than the reference's reruns, while the
    logprobs of every shared prefix are unchanged: the distribution is the reference's, the choice is not. That is
    a changed decoding path (server-side sampling defaults such as repetition_penalty, an ignored temperature),
    a frontend finding, where the engine returns no alternatives to show it token by token (decoding_changed)."""
    if not dv or dv.verdict != "fail" or d.state != "clean" or d.mean_abs_delta is None \
            or d.mean_abs_delta > ZERO_DRIFT or d.tokens < ZERO_DRIFT_MIN_TOKENS:
        return []
    return [Evidence("decoding_changed", suite, "fail", samples=tuple((dv.samples or [])[:10]),
                     summary=f"decoding path changed: greedy outputs part from the golden's on {dv.count}/{dv.n} samples "
                             f"({_parting(d)}; reference reruns parted at rate {dv.margin}) with "
                             f"zero logprob drift ({d.mean_abs_delta}) over {d.tokens} shared-prefix tokens: the model's "
                             "distribution is unchanged, the choice is not (server-side sampling defaults, penalties, ignored temperature)")]


def _pooled_transform(suite: str, s: PairedSuite, sigs: dict[str, SignalResult]) -> list[Evidence]:
    """logprobs_transformed's suite-level form: answers too short to measure alone (fewer than three tokens with a
    value, as a one-word vision answer), whose values pooled over the suite's samples all moved by one monotone
    transform (a scale, or exp) on the golden's own tokens: logprobs reported otherwise (response formatting), where
    the per-sample signal could measure nothing. No margin: numerics move each token's value by its own amount, and
    batch shape moves none by a 5% factor, so one transform over every value of several answers is the reporting's."""
    pool = s.pooled_transform
    per_sample = sigs.get("logprobs_transformed")
    if not pool.get("fired") or (per_sample is not None and per_sample.verdict == "fail"):
        return []
    samples = list(pool["samples"])
    return [Evidence("logprobs_transformed", suite, "fail", samples=tuple(samples[:10]),
                     summary=f"logprobs_transformed (pooled): every logprob of {len(samples)} samples too short to measure "
                             f"alone ({pool['points']} token values, the golden's tokens) moved by one monotone transform: "
                             "logprobs reported otherwise, not changed numerics")]


CONFOUNDED = "confounded"
FOLLOWUP_ALPHA = 0.05


def _followup_confounded(suite: str, td: dict[str, Any] | None, sigs: dict[str, SignalResult], fe: list[Evidence],
                         d: Drift) -> tuple[dict[str, SignalResult], list[Evidence]]:
    """A follow-up divergence blames the replayed history only where the numerics are the reference's.

    When the prompt tokens of the replayed history also changed (history_tokens_mismatch), the render moved: that
    signal carries the failure. Otherwise a follow-up answered otherwise is either a history bug that keeps the
    token count (results reordered, ids rewritten) or numerics: different weights, kernels or dtype part long
    follow-ups as easily as a history bug does. The evidence that tells them apart is the conversations' opening
    requests, which replay no history: when some of those parted too (or the logprobs drifted), the numerics moved,
    and the follow-ups count against the history only if they part significantly more often than the openings
    (one-sided Fisher exact test, per conversation). Else the signal is inconclusive and says why."""
    fu, hist = sigs.get("followup_divergence"), sigs.get("history_tokens_mismatch")
    if fu is None or fu.verdict != "fail" or (hist is not None and hist.verdict == "fail") or not td:
        return sigs, fe
    modes = td["by_mode"].values()
    convs = sum(m["conversations"] for m in modes)
    opened = sum(m["diverged"] - m["followup"] for m in modes)  # parted on the opening request (turn 1, step 0)
    later = sum(m["followup"] for m in modes)
    if opened == 0 and d.state not in ("fired", "uncalibrated"):
        return sigs, fe
    p = stats.fisher_greater(opened, convs, later, convs - opened)
    moved = f"{opened}/{convs} conversations parted on their opening request, which replays no history" if opened \
        else f"the logprobs drifted ({d.state})"
    if p < FOLLOWUP_ALPHA:
        note = f"{moved}, but follow-ups parted significantly more often ({later}/{convs - opened}, Fisher p={stats.rnd(p, 4)}): the history"
        verdict = "fail"
    else:
        note = (f"{moved}: the numerics moved, and follow-ups parted no more often than that explains ({later}/{convs - opened}, "
                f"Fisher p={stats.rnd(p, 4)}) with unchanged prompt tokens; a history bug that keeps the token count and numerics "
                "are not told apart here")
        verdict = "inconclusive"
    sigs = {**sigs, "followup_divergence": dataclasses.replace(fu, verdict=verdict, note=note)}
    fe = [dataclasses.replace(e, verdict=verdict, qualifier=CONFOUNDED if verdict == "inconclusive" else e.qualifier,
                              summary=f"{e.summary}; {note}")
          if e.signal == "followup_divergence" and e.suite == suite else e for e in fe]
    return sigs, fe


def _suite_verdicts(suite: str, s: PairedSuite, margins: Mapping[str, Margin]) -> tuple[SuiteResult, list[Evidence], list[Evidence]]:
    """One suite's block of comparison.json, with its frontend and numerics evidence."""
    mets, q = _quality(suite, s, margins)
    sigs, fe, q_sig = _signal_verdicts(suite, s, margins)
    d, q_drift = _drift_evidence(suite, s, margins)
    dv, q_div = _divergence_evidence(suite, s, margins)
    # Numerics changed, decisively: the shared-prefix logprobs moved beyond the calibrated noise AND the greedy
    # outputs part from the golden's significantly more often than the reference's own reruns do.
    d = dataclasses.replace(d, numerics_changed=d.state == "fired" and dv is not None and dv.verdict == "fail")
    fe += _zero_drift_parting(suite, d, dv)
    fe += _pooled_transform(suite, s, sigs)
    sigs, fe = _followup_confounded(suite, s.turn_diff, sigs, fe, d)
    block = SuiteResult(
        paired=s.paired, golden_only=s.golden_only, candidate_only=s.candidate_only,
        metrics=mets, signals=sigs, drift=d, divergence=dv, flips=s.flips, findings=s.findings,
        flips_by_mode=s.flips_by_mode, new_finding_detail=s.new_finding_detail, signal_modes=s.signal_modes,
        tool_trigger=numerics.tool_trigger(s.trigger), answer_agreement=stats.rnd(s.answer_agreement),
        # multi-turn suites: the per-turn diff, and the modes it was made over; runs over several surfaces: the modes,
        # so the diagnosis can tell a signal that fired off chat only while chat ran (`<signal>:surface`)
        turn_diff=s.turn_diff or None,
        modes=s.modes if s.turn_diff or len({surface_for(m).name for m in s.modes}) > 1 else None,
    )
    return block, fe, q + q_sig + q_drift + q_div


def _teacher_forced(suites: dict[str, SuiteResult], run: "tuple[Mapping[str, Any], Mapping[str, SuiteMeasure]]",
                    margins: Mapping[str, Margin]) -> tuple[dict[str, SuiteResult], list[Evidence], list[Evidence], dict[str, str]]:
    """Each suite's teacher-forced block (attribution/teacher_forced.py) and its evidence: (suites, frontend
    evidence, numerics evidence, suite -> verdict where the figures were used)."""
    from verifier.attribution import teacher_forced as tf

    state, measures = run
    out = dict(suites)
    fe: list[Evidence] = []
    q: list[Evidence] = []
    verdicts: dict[str, str] = {}
    for suite, block in suites.items():
        m = margins.get(tf.margin_key(suite))
        judged = tf.judge(suite, measures.get(suite), state, None if m is None else m.value,
                          tf.reference_values(m.provenance) if m is not None else None, _margin(margins, tf.tokens_key(suite)))
        if judged is None:
            continue
        out[suite] = dataclasses.replace(block, teacher_forced=judged.block)
        fe += judged.frontend
        q += judged.evidence
        if judged.verdict is not None:
            verdicts[suite] = judged.verdict
    return out, fe, q, verdicts


IMPACT = {"fail": "quality_regressed", "pass": "no_measurable_quality_cost", "inconclusive": "quality_undecided"}
"""What a teacher-forced numerics failure cost (`quantization.impact`): the served distribution is not the reference's
either way (exit 11); quality says whether it is a regression users see or a change that costs nothing measurable
at this n."""


def _impact(q: list[Evidence]) -> dict[str, Any]:
    quality = _combine(e.verdict for e in q if e.signal == "quality")
    return {"impact": IMPACT[quality]}


OUTWEIGHED = "outweighed"
"""Qualifier of drift and parting evidence on a suite whose teacher-forced distance passed: corroboration that did
not hold. The greedy decode moved (batch shape, kernel order: near-tie tokens flip and the shared prefix drifts),
while the candidate's distribution on the golden's own tokens is within the reruns' spread."""
CORROBORATION = ("logprob_drift", "greedy_divergence")


def _outweighed(q: list[Evidence], forced: Mapping[str, str]) -> list[Evidence]:
    """Drift and parting evidence of the suites whose teacher-forced distance passed, as corroboration that did not
    hold: `pass` with the qualifier `outweighed` and a summary that says why, so that neither the numerics verdict
    nor a CI check fails or stays undecided on them alone (docs/reference/attribution.md, "Decision")."""
    out = []
    for e in q:
        if e.signal in CORROBORATION and forced.get(e.suite) == "pass" and e.verdict != "pass":
            e = dataclasses.replace(e, verdict="pass", qualifier=OUTWEIGHED, summary=(
                f"{e.summary}; corroboration that did not hold ({e.verdict} alone): the teacher-forced distance on "
                "the golden's own tokens passed, so the distribution is the reference's and the greedy decode moved "
                "otherwise (batch shape or kernel order flips near-tie tokens)"))
        out.append(e)
    return out


@dataclasses.dataclass(frozen=True)
class SuiteNumerics:
    """What one suite says about the numerics, for _decide."""

    drift: str
    """The drift state (numerics.drift_state): clean, fired, uncalibrated, unavailable."""
    changed: bool
    """Drift and greedy parting both fired (`drift.numerics_changed`)."""
    forced: str | None
    """The teacher-forced verdict where its figures were used (pass, fail, inconclusive); None where not measured,
    unavailable or not used: today's drift-and-parting rule then decides this suite."""

    def vote(self) -> str:
        """This suite's numerics verdict before quality: the teacher-forced distance where used (primary evidence),
        else the two corroborating measures."""
        if self.forced in ("fail", "pass"):
            return self.forced  # primary: drift and parting alone neither fail nor unsettle a forced pass
        if self.changed:
            return "fail"  # two independent measures agree
        if self.drift in ("fired", "uncalibrated") or self.forced == "inconclusive":
            return "inconclusive"
        return "pass"

    @property
    def blames_quality_drop(self) -> bool:
        """Whether this suite's numerics evidence puts a significant quality drop on the weights."""
        return self.forced == "fail" or (self.drift == "fired" and self.forced != "pass")


def _numerics_of(suites: Mapping[str, SuiteResult], forced: Mapping[str, str]) -> dict[str, SuiteNumerics]:
    return {suite: SuiteNumerics(s.drift.state, bool(s.drift.numerics_changed), forced.get(suite))
            for suite, s in suites.items()}


def _decide(fe: list[Evidence], q: list[Evidence], numerics: Mapping[str, SuiteNumerics],
            incomplete: bool) -> tuple[str, str, str]:
    """(status, frontend verdict, quantization verdict) from the evidence.

    One rule above the others: a significant quality drop is never `pass` and never `inconclusive`. Where
    nothing attributes it (no drift measured above the noise, no frontend signal), it is `regression_unattributed`:
    strong evidence of an unknown cause, which --allow-inconclusive does not turn into a pass.

    The numerics are judged per suite (SuiteNumerics.vote): where the teacher-forced distance was measured, it
    decides that suite, and drift and parting only corroborate; elsewhere the two decide as before it existed."""
    frontend = _combine(e.verdict for e in fe)
    quality = _combine(e.verdict for e in q if e.signal == "quality")
    repetition = _combine(e.verdict for e in q if e.signal == "repetition")
    quality = _combine([quality, repetition])
    if quality == "fail":
        # A frontend bug never moves the logprobs of a shared token prefix: only drift above the noise floor
        # blames the weights. Without it (at the floor, unmeasurable, uncalibrated) the numerics are undecided.
        # The teacher-forced distance, on the golden's own context and tokens, blames them as well; where it was
        # measured and passed, the distribution is the reference's and drift alone blames nothing.
        quant = "fail" if any(n.blames_quality_drop for n in numerics.values()) else "inconclusive"
    else:
        # A teacher-forced failure fails whatever quality did (quantization.impact says what it cost); drift and
        # parting together fail a suite without a forced measure: a vendor verifier asks whether the weights are
        # served faithfully, not only how well.
        quant = _combine([quality, *(n.vote() for n in numerics.values())])
    if incomplete:
        status = "incomplete"
    elif frontend == "fail" and quant == "fail":
        status = "both"
    elif frontend == "fail":
        status = "frontend_regression"
    elif quant == "fail":
        status = "quantization_regression"
    elif quality == "fail":
        status = "regression_unattributed"
    elif "inconclusive" in (frontend, quant):
        status = "inconclusive"
    else:
        status = "pass"
    return status, frontend, quant


def _probe_evidence(probes: Mapping[str, Any], numerics_moved: bool, decode_noise: bool = False) -> list[Evidence]:
    """The run-wide evidence items (probe verdicts, the context probe) as frontend Evidence: context_truncated names
    itself; a probe's evidence names its component and the surface it ran on.

    `decode_noise`: the greedy decode moved on the suites and, on every suite where it did, the teacher-forced
    distance passed (the drift and parting were outweighed): a probe whose check came out as the reference's and whose
    only change is its greedy text met the same near-tie flips, so it passes like the suites' parting did."""
    out: list[Evidence] = []
    # Probes whose own failing check shows the server changing the model's outputs by itself (sampling defaults,
    # temperature 0 not greedy): what the model wrote on the other probes moved for that reason, not their own.
    outputs_moved = sorted({str(p.get("signal", name)).removeprefix("probe:") for name, p in probes.items()
                            if p.get("verdict") == "fail" and p.get("moves_outputs")})
    for name, p in sorted(probes.items()):
        verdict, summary, qualifier = p["verdict"], p["summary"], p.get("qualifier")
        if verdict == "fail" and qualifier == "exchange_text" and decode_noise:
            verdict, qualifier = "pass", OUTWEIGHED
            summary = (f"{summary}; the greedy decode moved on the suites too and the teacher-forced distance on the "
                       "golden's own tokens passed there: near-tie flips (batch shape, kernel order), not the frontend")
        elif verdict == "fail" and qualifier in ("exchange_text", "model_output") and numerics_moved:
            # only a probe's greedy text moved, or its check reads what the model wrote (a stop string it must write,
            # two outputs agreeing, a call it must make), and on the suites the logprobs drifted above the noise or
            # greedy outputs parted beyond the reruns' rate: the numerics change what the model writes too, so this
            # is no evidence against the frontend by itself
            verdict, summary = "inconclusive", f"{summary}; the numerics moved too (drift or greedy parting on the suites)"
        elif verdict == "fail" and qualifier in ("exchange_text", "model_output") and outputs_moved \
                and not p.get("moves_outputs"):
            verdict, summary = "inconclusive", (f"{summary}; the server changes what the model writes by itself "
                                                f"({', '.join(outputs_moved)} failed): explained there, not here")
        out.append(Evidence(p.get("signal", f"probe:{name}"), "*", verdict, summary, component=p.get("component"),
                            modes={p["surface"]: 1} if p.get("surface") else None, qualifier=qualifier))
    return out


def _probe_infra_evidence(cov: Mapping[str, Any]) -> list[Evidence]:
    """Probes whose requests met an infra error (the reference answered them): no evidence either way, so the
    frontend is at best inconclusive; counted on their own (coverage `probe_infra`), never in the samples' budget."""
    infra = list(cov.get("missing_probes_infra") or ())
    if not infra:
        return []
    of = (cov.get("probe_infra") or {}).get("of") or len(infra)
    return [Evidence("probe_infra", "*", "inconclusive", qualifier="infra",
                     summary=f"{len(infra)} of {of} probe(s) met an infra error and are not judged "
                             f"(the reference answered them): {', '.join(sorted(infra)[:8])}")]


def _logprob_gaps(golden_obs: list[Observation], cand_obs: list[Observation],
                  sampling: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(wire modes with no logprobs at all on the candidate where the golden has them on some mode, the tool-call
    modes whose calls carry none where logprobs were asked for). Drift and decoding changes are not measured there,
    and the document says so rather than guess (the Messages API has none)."""
    c_lp = {o.mode for o in cand_obs if o.logprobs}
    missing_lp = sorted({o.mode for o in cand_obs if o.judged} - c_lp) if any(o.logprobs for o in golden_obs) else []
    # Tool-call answers are measured from the logprobs of their generated tokens where the engine returns them; the
    # modes where it returned none for them (while it did for text) are said, not guessed over.
    calls = [o for o in cand_obs if o.judged and isinstance(o.answer, list) and o.answer and isinstance(o.answer[0], dict)]
    asked = bool(c_lp) or bool((sampling.get("overrides") or {}).get("logprobs"))
    tool_lp_missing = sorted(m for m in {o.mode for o in calls} - {o.mode for o in calls if o.logprobs} - set(missing_lp)
                             if not surface_for(m).no_logprobs) if asked else []
    return missing_lp, tool_lp_missing


def compare(header: GoldenHeader, golden_obs: Rows, cand_obs: Rows, infra_budget: float = DEFAULT_INFRA_BUDGET,
            probes: dict[str, Any] | None = None, allow_subset: bool = False,
            probe_table: list[dict[str, Any]] | None = None,
            teacher_forced: "tuple[Mapping[str, Any], Mapping[str, SuiteMeasure]] | None" = None,
            resent: Rows = ()) -> Comparison:
    """The comparison document (DESIGN.md, "Machine-readable outputs"), typed; `to_dict()` is comparison.json. `probes`: run-wide evidence items (probe
    verdicts, the context probe); `probe_table`: the probes' conformance rows (probe_results.judge); `teacher_forced`: the
    run's teacher-forcing state (run.json) and what its forced records measured per suite (teacher_forced.measure);
    `resent`: the run's resend records (execution/resend.observations), read by the signals declared `reads_resends`
    only (never counted in coverage, infra or quality)."""
    from verifier.attribution import coverage, diagnosis, explain

    margins = header.margins
    golden_obs, cand_obs = as_observations(golden_obs), as_observations(cand_obs)
    sig = paired_signals(golden_obs, cand_obs, resent)
    if not sig or all(s.paired == 0 for s in sig.values()):
        raise NoOverlap("the run and the golden share no sample ids")
    sampling = header.source.sampling or {}
    requested = (sampling.get("defaults") or {}).get("max_tokens")
    for s_ in sig.values():  # the run's limit beside the lengths a cap cut at (a gate sends the golden's sampling)
        for code in LENGTH_EVIDENCE & s_.new_finding_detail.keys():
            if isinstance(requested, int):
                s_.new_finding_detail[code]["requested_max_tokens"] = requested
    # A sample the reference itself could not reliably get (infra in the golden on any of its records: e.g. a parser
    # that answers this model output with a 500) is no evidence on either side, not missing evidence: it is reported,
    # but the budget counts only infra errors on samples the golden answered every time. Per sample, not per record:
    # the modes and epochs of one sample are one prompt, and a reference that failed it once sits on an output its
    # server cannot always serve (measured on llama-server: parallel_7's chat answered 500 while its stream parsed;
    # a rerun on 2 slots, where batch shape moves near-ties, may fail the stream instead).
    golden_infra = {(o.suite, o.sample_id) for o in golden_obs if o.outcome == "infra"}
    cand_infra = [o for o in cand_obs if o.outcome == "infra"]
    shared = sum(1 for o in cand_infra if (o.suite, o.sample_id) in golden_infra)
    infra = len(cand_infra) - shared
    infra_rate = infra / len(cand_obs) if cand_obs else 0.0
    if probe_table is not None:  # probe x surface keys, old goldens' bare names read as chat
        cov = coverage.coverage(golden_obs, cand_obs, {r["key"]: r for r in probe_table if r["reference"] is not None},
                                {r["key"]: r for r in probe_table if r["candidate"] not in (None, "infra")}, allow_subset)
    else:
        cov = coverage.coverage(golden_obs, cand_obs, dict(header.probes) if header.probes else None, probes, allow_subset)
    fe: list[Evidence] = []
    q: list[Evidence] = []
    suites_out: dict[str, SuiteResult] = {}
    for suite, s in sig.items():
        suites_out[suite], fe_s, q_s = _suite_verdicts(suite, s, margins)
        fe += fe_s
        q += q_s
    forced: dict[str, str] = {}
    if teacher_forced is not None:
        suites_out, fe_tf, q_tf, forced = _teacher_forced(suites_out, teacher_forced, margins)
        fe += fe_tf
        q = _outweighed(q, forced) + q_tf
    moved_suites = [name for name, s in suites_out.items()
                    if s.drift.state == "fired" or (s.divergence is not None and s.divergence.verdict == "fail")]
    numerics_moved = bool(moved_suites)
    decode_noise = numerics_moved and all(forced.get(name) == "pass" for name in moved_suites)
    fe += _probe_evidence(probes or {}, numerics_moved, decode_noise) + _probe_infra_evidence(cov)
    status, frontend, quant = _decide(fe, q, _numerics_of(suites_out, forced),
                                      infra_rate > infra_budget or cov["rate"] > infra_budget)
    missing_lp, tool_lp_missing = _logprob_gaps(golden_obs, cand_obs, sampling)
    doc = Comparison(
        status=status, exit_code=EXIT[status], meaning=MEANING[EXIT[status]],
        infra={"count": infra, "total": len(cand_obs), "rate": stats.rnd(infra_rate), "budget": infra_budget,
               "reference_also_failed": shared},
        frontend=Side(frontend, tuple(fe)), quantization=Side(quant, tuple(q), _impact(q) if "fail" in forced.values() else {}),
        suites=suites_out, coverage=cov,
        conformance=probe_table, logprobs_missing_modes=missing_lp, tool_call_logprobs_missing_modes=tool_lp_missing or None,
    )
    # The diagnosis reads the verdicts; reasons and checks read the diagnosis too (the document so far).
    doc = dataclasses.replace(doc, diagnosis=tuple(diagnosis.diagnose(doc)))
    reasons = explain.reasons(doc)
    checks = tuple(explain.checks(doc, header, golden_obs))
    return dataclasses.replace(doc, reasons=reasons, reason=reasons[0] if reasons else None, checks=checks)


def _spreads(s: PairedSuite, suite: str) -> dict[str, float]:
    """The run-to-run spread of one pair of reference runs, per margin key (the same keys compare looks up)."""
    out: dict[str, float] = {}
    for m, v in s.metrics.items():
        n = len(v.golden)
        out[f"{suite}/{m}"] = abs(sum(v.candidate) - sum(v.golden)) / n if n else 0.0
    for name in signals.names():
        n = s.denominators[name]
        out[f"{suite}/signal:{name}"] = len(s.events[name]) / n if n else 0.0
    out[f"{suite}/drift"] = s.drift["mean_abs_delta"] or 0.0
    dv = s.divergence
    if dv["n"]:
        out[f"{suite}/divergence"] = dv["count"] / dv["n"]
    return out


def calibrate_margins(runs: Sequence[Rows], provenance: dict[str, Any], resent: Sequence[Rows] | None = None) -> dict[str, Any]:
    """Margins = the largest run-to-run spread seen between reference runs, per metric and signal.

    Every ordered pair: a signal read within one run (stream parity: its chat and its stream answers) is counted on
    the pair's candidate side, so each run, the blessed one included, must be a candidate once, or its own rate
    would never reach the margin and the golden would fail against the very run it was blessed from. `resent`: each
    run's resend records (execution/resend.py), read on the pair's candidate side as compare reads them."""
    if len(runs) < 2:
        raise ValueError("calibration needs at least 2 reference runs (k >= 3 recommended)")
    runs = [as_observations(r) for r in runs]
    spread: dict[str, float] = {}
    for i in range(len(runs)):
        for j in range(len(runs)):
            if i == j:
                continue
            for suite, s in paired_signals(runs[i], runs[j], resent[j] if resent else ()).items():
                for key, v in _spreads(s, suite).items():
                    spread[key] = max(spread.get(key, 0.0), v)
    return {k: {"value": round(v, 6), "source": "calibrate", **provenance} for k, v in sorted(spread.items())}
