"""The numerics side of a comparison: quality, flips and logprob drift on clean paired samples, and the
verdict rules that turn paired values and event counts into pass / fail / inconclusive.

Only samples with a clean envelope on both sides, untouched by every frontend signal, reach the
accumulator here, so a frontend bug cannot masquerade as a quality drop.
"""

from __future__ import annotations

from collections import defaultdict
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypedDict

from verifier import stats
from verifier.judge.contract import comparable
from verifier.jsonsafe import is_finite_number
from verifier.attribution.document import Drift, MetricResult, SignalResult
from verifier.attribution.signals import tokens_part
from verifier.attribution.turn_diff import answer_key
from verifier.surfaces.registry import REFERENCE_MODE
from verifier.types import Observation

# A floor under the calibrated drift, with its reason: llama.cpp with 2 parallel slots is not bit-stable
# across reruns (batch composition), and its own reruns drifted 0.0028-0.0043 mean |Δ logprob| per token
# on this testbed, while requantization and KV-cache quantization drifted 0.05-0.12. 0.01 sits between.
DRIFT_FLOOR = 0.01
# Drift fires above this multiple of the largest drift seen between reference reruns, or above the floor,
# whichever is higher: the maximum over k=3 calibration runs underestimates the noise tail.
DRIFT_FACTOR = 3.0
# A floor under the calibrated rate at which greedy outputs part from the golden's: reruns of one configuration are
# often bit-identical (rate 0), and against a margin of 0 a single parted sample would be "significant".
DIVERGENCE_FLOOR = 0.05
# Per-sample drift kept in comparison.json for the report's drift plot: bounded, so a 10k-sample gate stays small.
PER_SAMPLE_MAX = 400


def logprob_drift(gl: list[list[Any]] | None, cl: list[list[Any]] | None) -> tuple[int, float, int] | None:
    """(measurable tokens of the shared prefix, sum |Δ logprob| over them, first divergence position) or None.
    Compared on contract.comparable tokens: a stop token one engine lists and another does not is no parting."""
    if not gl or not cl:
        return None
    n = m = 0
    total = 0.0
    for (_, gt, glp), (_, ct, clp) in zip(comparable(gl), comparable(cl)):
        if gt != ct:
            break
        if is_finite_number(glp) and is_finite_number(clp):  # NaN/Infinity/null: not measurable, never "no drift"
            total += abs(glp - clp)
            m += 1
        n += 1
    return None if n and not m else (m, total, n)


def drift(g: Observation, c: Observation) -> tuple[int, float, int] | None:
    """logprob_drift of two records of the same sample."""
    return logprob_drift(g.logprobs, c.logprobs)


def diverged(g: Observation, c: Observation) -> bool | None:
    """Whether two greedy outputs of the same sample part ways (a token differs, or one stops first); None
    without tokens on both sides. Reruns of one engine rarely part; changed weights or KV numerics do."""
    if not g.logprobs or not c.logprobs:
        return None
    return tokens_part(g.tokens, c.tokens)


def reference(obs: Sequence[Observation]) -> Observation:
    """The record drift is measured on (and a flip card shows): chat, epoch 0, when there is one."""
    return next((o for o in obs if o.mode == REFERENCE_MODE and o.epoch == 0), obs[0])


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def flip(g: Sequence[Observation], c: Sequence[Observation]) -> str | None:
    """`regressed` / `improved` when the mean score moved between the two sides, else None."""
    gscore = [o.score for o in g if o.score is not None]
    cscore = [o.score for o in c if o.score is not None]
    if not gscore or not cscore:
        return None
    ga, ca = _mean(gscore), _mean(cscore)
    return "regressed" if ga > ca else "improved" if ca > ga else None


@dataclass(frozen=True)
class PairedMetric:
    """One metric's per-sample values on the clean paired samples, golden and candidate in sample order."""

    golden: list[float]
    candidate: list[float]
    ids: list[str]


class DriftMeasure(TypedDict):
    """Logprob drift as measured, before drift_state sets its threshold and state (the Drift of the document)."""

    tokens: int
    mean_abs_delta: float | None
    first_divergence_median: int | None
    samples: int
    logprobs: dict[str, int]
    parted_at_token_0: int
    per_sample: list[dict[str, Any]]


class DivergenceCount(TypedDict):
    """On how many samples the greedy outputs parted, of how many comparable, and where."""

    count: int
    n: int
    samples: list[str]


@dataclass(frozen=True)
class NumericsSummary:
    """What the accumulator hands compare and calibrate (Numerics.summary); not written as is."""

    metrics: dict[str, PairedMetric]
    flips: dict[str, list[str]]
    drift: DriftMeasure
    answer_agreement: float | None
    clean_paired: int
    divergence: DivergenceCount


@dataclass
class Numerics:
    """Per-suite accumulator over clean, frontend-untouched paired samples."""

    metrics: dict[str, tuple[list[float], list[float]]] = field(default_factory=lambda: defaultdict(lambda: ([], [])))
    metric_ids: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    flips: dict[str, list[str]] = field(default_factory=lambda: {"regressed": [], "improved": []})
    drift_tokens: int = 0
    drift_sum: float = 0.0
    first_div: list[int] = field(default_factory=list)
    answers_same: int = 0
    answers_n: int = 0
    diverged_ids: list[str] = field(default_factory=list)
    divergence_n: int = 0
    logprobs_golden: int = 0
    """Samples whose golden reference record has logprobs (with logprobs_candidate: which side lacks them)."""
    logprobs_candidate: int = 0
    parted_at_0: list[str] = field(default_factory=list)
    """Samples whose outputs part from the golden's at the first token: no shared prefix to measure drift on."""
    per_sample: list[dict[str, Any]] = field(default_factory=list)

    def add(self, sid: str, g: Sequence[Observation], c: Sequence[Observation]) -> None:
        """One paired sample; both lists hold clean records only and neither is empty."""
        self.answers_n += 1
        self.answers_same += {answer_key(o.answer) for o in g} == {answer_key(o.answer) for o in c}
        for m in sorted(set(g[0].metrics) & set(c[0].metrics)):
            self.metrics[m][0].append(sum(o.metrics[m] for o in g if m in o.metrics) / len(g))
            self.metrics[m][1].append(sum(o.metrics[m] for o in c if m in o.metrics) / len(c))
            self.metric_ids[m].append(sid)
        kind = flip(g, c)
        if kind:
            self.flips[kind].append(sid)
        gr, cr = reference(g), reference(c)
        self.logprobs_golden += bool(gr.logprobs)
        self.logprobs_candidate += bool(cr.logprobs)
        parted = diverged(gr, cr)
        if parted is not None:
            self.divergence_n += 1
            if parted:
                self.diverged_ids.append(sid)
        d = drift(gr, cr)
        if d:
            self.drift_tokens += d[0]
            self.drift_sum += d[1]
            self.first_div.append(d[2])
            if d[2] == 0 and parted:
                self.parted_at_0.append(sid)
            self.per_sample.append({"id": sid, "tokens": d[0], "mean_abs_delta": stats.rnd(d[1] / d[0]) if d[0] else None,
                                    "first_divergence": d[2], "parted": bool(parted),
                                    "length": min(len(gr.logprobs or ()), len(cr.logprobs or ()))})

    def summary(self) -> NumericsSummary:
        fd = sorted(self.first_div)
        return NumericsSummary(
            metrics={m: PairedMetric(golden=v[0], candidate=v[1], ids=self.metric_ids[m]) for m, v in self.metrics.items()},
            flips=self.flips,
            drift={
                "tokens": self.drift_tokens,
                "mean_abs_delta": (self.drift_sum / self.drift_tokens) if self.drift_tokens else None,
                "first_divergence_median": fd[len(fd) // 2] if fd else None,
                "samples": len(fd),
                "logprobs": {"golden": self.logprobs_golden, "candidate": self.logprobs_candidate, "of": self.answers_n},
                "parted_at_token_0": len(self.parted_at_0),
                "per_sample": bounded_per_sample(self.per_sample),
            },
            answer_agreement=(self.answers_same / self.answers_n) if self.answers_n else None,
            clean_paired=self.answers_n,
            divergence={"count": len(self.diverged_ids), "n": self.divergence_n, "samples": self.diverged_ids[:50]},
        )


def parted_median(rows: Sequence[Mapping[str, Any]]) -> tuple[int, float] | None:
    """How many per-sample drift rows parted from the golden's output, and the median of their first divergence token
    (the middle one, or the mean of the two middle ones). The one definition every output uses (the console, the
    summaries and the report said 17 and 13 for one run). None when no row parted."""
    at = sorted(int(r["first_divergence"]) for r in rows if r.get("parted") and isinstance(r.get("first_divergence"), (int, float))
                and not isinstance(r.get("first_divergence"), bool))
    if not at:
        return None
    mid = at[len(at) // 2] if len(at) % 2 else (at[len(at) // 2 - 1] + at[len(at) // 2]) / 2
    return len(at), mid


def bounded_per_sample(rows: list[dict[str, Any]], cap: int = PER_SAMPLE_MAX) -> list[dict[str, Any]]:
    """At most `cap` per-sample drift rows, deterministically: all of them when they fit, else the half that drifted
    most (what a reviewer opens) and an even stride through the rest (the shape of the bulk), in sample order."""
    if len(rows) <= cap:
        return rows
    ranked = sorted(range(len(rows)), key=lambda i: (-(rows[i]["mean_abs_delta"] or 0.0), rows[i]["first_divergence"], i))
    top = set(ranked[:cap // 2])
    rest = [i for i in range(len(rows)) if i not in top]
    step = len(rest) / (cap - len(top))
    keep = top | {rest[int(k * step)] for k in range(cap - len(top))}
    return [rows[i] for i in sorted(keep)]


def tool_call_scores(golden: dict[str, Any] | None, candidate: dict[str, Any] | None,
                     agreement: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """K2VV's numbers for a tool-calling suite, each beside the golden's, from the two runs' suite summaries
    (`summary.json` `extra`): trigger F1 against the items' expected calls, calls-weighted schema accuracy,
    and the trigger F1 of the candidate's decisions against the golden's (K2VV's trigger similarity)."""
    if not isinstance(candidate, dict) or "schema_accuracy" not in candidate or "trigger" not in candidate:
        return None
    golden = golden if isinstance(golden, dict) else {}

    def pick(d: Any, *path: str) -> Any:
        for k in path:
            d = d.get(k) if isinstance(d, dict) else None
        return d

    return {"trigger_f1": {"golden": pick(golden, "trigger", "f1"), "candidate": pick(candidate, "trigger", "f1")},
            "schema_accuracy": {"golden": pick(golden, "schema_accuracy", "value"), "candidate": pick(candidate, "schema_accuracy", "value"),
                                "golden_calls": pick(golden, "schema_accuracy", "calls"), "candidate_calls": pick(candidate, "schema_accuracy", "calls")},
            "trigger_agreement_f1": (agreement or {}).get("f1")}


def metric_verdict(golden: list[float], cand: list[float], margin: float, seed: int = 0) -> MetricResult:
    """A quality metric, candidate against golden on the same samples: pass when the paired bootstrap interval's
    lower bound clears -margin, fail when its upper bound is below it (and McNemar agrees on a binary metric)."""
    n = len(golden)
    if n == 0:
        return MetricResult(golden=None, candidate=None, delta=None, ci=[None, None], margin=margin, p_value=None, n=0,
                            verdict="inconclusive")
    g, c = sum(golden) / n, sum(cand) / n
    lo, hi = stats.paired_bootstrap(golden, cand, seed=seed)
    p = None
    if stats.is_binary(golden) and stats.is_binary(cand):
        b = sum(1 for x, y in zip(golden, cand) if x == 1 and y == 0)
        cc = sum(1 for x, y in zip(golden, cand) if x == 0 and y == 1)
        p = stats.mcnemar_exact(b, cc)
    eps = 1e-12
    if lo >= -margin - eps:
        verdict = "pass"
    elif hi < -margin - eps and (p is None or p < 0.05):
        verdict = "fail"
    else:
        verdict = "inconclusive"
    return MetricResult(golden=stats.rnd(g), candidate=stats.rnd(c), delta=stats.rnd(c - g), ci=[stats.rnd(lo), stats.rnd(hi)],
                        margin=margin, p_value=stats.rnd(p), n=n, verdict=verdict)


def event_verdict(k: int, n: int, margin: float) -> SignalResult:
    """A rate of events that should not happen (beyond the calibrated rate): fail when Wilson's lower bound clears it."""
    if n == 0:
        return SignalResult(rate=None, ci=[None, None], count=0, n=0, margin=margin, verdict="pass", note="not measurable here")
    lo, hi = stats.wilson(k, n)
    rate = k / n
    eps = 1e-12
    verdict = "fail" if lo > margin + eps else "pass" if rate <= margin + eps else "inconclusive"
    return SignalResult(rate=stats.rnd(rate), ci=[stats.rnd(lo), stats.rnd(hi)], count=k, n=n, margin=margin, verdict=verdict)


def paired_event_verdict(k: int, reverse: int, n: int, margin: float) -> SignalResult:
    """A numerics event rate, candidate against golden on the same samples: exact McNemar on the per-sample
    events (k: the candidate's alone, reverse: the golden's alone). One event in 22 against none is not
    evidence; a rate above the calibrated one fails only when the paired test says so."""
    out = event_verdict(k, n, margin)
    if n == 0:
        return out
    p = stats.mcnemar_exact(k, reverse)
    excess = (k - reverse) / n
    eps = 1e-12
    if excess <= margin + eps:
        verdict = "pass"
    elif p < 0.05:
        verdict = "fail"
    else:
        verdict = "inconclusive" if k >= 3 else "pass"
    return dataclasses.replace(out, golden_count=reverse, p_value=stats.rnd(p), test="mcnemar_exact", verdict=verdict)


def drift_state(d: DriftMeasure, calibrated: float) -> Drift:
    """The drift block of comparison.json: the fire threshold and whether it was crossed."""
    margin = max(DRIFT_FACTOR * (calibrated if d["mean_abs_delta"] is not None else 0.0), DRIFT_FLOOR)
    if d["mean_abs_delta"] is None:
        state = "unavailable"
    else:
        state = "fired" if d["mean_abs_delta"] > margin else "clean"
    return Drift(tokens=d["tokens"], mean_abs_delta=stats.rnd(d["mean_abs_delta"]),
                 first_divergence_median=d["first_divergence_median"], samples=d["samples"], logprobs=d["logprobs"],
                 parted_at_token_0=d["parted_at_token_0"], per_sample=d["per_sample"], margin=margin, state=state)


def tool_trigger(t: dict[str, int]) -> dict[str, Any] | None:
    """Precision / recall / F1 of the candidate's tool-call decision against the golden's (K2VV)."""
    if not sum(t.values()):
        return None
    prec = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else None
    rec = t["tp"] / (t["tp"] + t["fn"]) if t["tp"] + t["fn"] else None
    f1 = 2 * prec * rec / (prec + rec) if prec and rec else (0.0 if prec is not None and rec is not None else None)
    return {**t, "precision": stats.rnd(prec), "recall": stats.rnd(rec), "f1": stats.rnd(f1)}
