"""The teacher-forced distance: the candidate's next-token distribution against the golden's, at the golden's own
output positions given the golden's own prefix (execution/teacher_forcing.py obtains it). Pure functions.

Per position:
  KL(golden || candidate) on the tokens both sides list, with the rest of each side's mass as one bucket.
    A token only one side lists has an unknown probability on the other side (only bounded by that side's tail), so
    it joins the rest bucket on both sides. Merging outcomes never increases a KL divergence (data-processing
    inequality): the figure is a LOWER BOUND of the full-vocabulary KL, exact when both sides list the same tokens
    and the tail is one bucket. A golden blessed with `top_logprobs: 1` gives a two-bucket (binary) KL: the chosen
    token's probability against the rest.
  top-1 agreement: the candidate's most likely listed token is the golden's token.
  |delta logprob| of the golden's token, where the candidate lists it.
Per sample: the mean KL over its positions (what the decision tests). Per suite: positions, kl_mean, kl_p50,
kl_p99, kl_p999, top1_agreement, mean |delta logprob|.

The decision (compare.py): the candidate's per-sample KL against the reference reruns' per-sample KL (stored by
calibrate in the margin `<suite>/teacher_forced_kl`), one-sided Mann-Whitney U; it fails when the test rejects at
ALPHA and the mean is above the reruns' largest mean (the margin). Above the margin without a rejection it passes
only where the test could have rejected at these sample sizes (`least_p`), else it is inconclusive. Without that
margin the golden is uncalibrated for it: judged against 0, inconclusive where it fired.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from verifier import stats
from verifier.execution.teacher_forcing import Forced, Top, forced_of, tokens_digest
from verifier.judge.contract import comparable
from verifier.surfaces.registry import REFERENCE_MODE
from verifier.types import Evidence, Observation

SIGNAL = "teacher_forced_kl"
TOKENS_SIGNAL = "teacher_forced_tokens"
"""The candidate's tokenization of the golden's text did not reproduce the golden's tokens: a frontend (tokenizer)
event, never realigned."""
ALPHA = 0.05
EPS = 1e-12
MAX_REFERENCE = 2000
"""Per-sample reference values kept in a margin's provenance (bounded: a golden stays small)."""
PER_SAMPLE_MAX = 400
"""Per-sample KL rows kept in comparison.json (the report's picture), bounded: the furthest half and a stride."""
TOKENS_SHOWN = 512
"""Positions of the furthest sample kept in comparison.json (KL along its tokens)."""


def margin_key(suite: str) -> str:
    return f"{suite}/{SIGNAL}"


def tokens_key(suite: str) -> str:
    return f"{suite}/signal:{TOKENS_SIGNAL}"


def _probs(top: Iterable[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t, lp in top:
        if t not in out:
            out[t] = math.exp(lp)
    return out


def position_kl(golden: Top, candidate: Top) -> float:
    """KL(golden || candidate) over the tokens both list plus one rest bucket per side (module docstring)."""
    p, q = _probs(golden), _probs(candidate)
    shared = [t for t in p if t in q]
    kl = 0.0
    for t in shared:
        if p[t] > 0:
            kl += p[t] * math.log(p[t] / max(q[t], EPS))
    p_rest = max(0.0, 1.0 - sum(p[t] for t in shared))
    q_rest = max(0.0, 1.0 - sum(q[t] for t in shared))
    if p_rest > EPS:
        kl += p_rest * math.log(p_rest / max(q_rest, EPS))
    return max(0.0, kl)


def top1(top: Top) -> str | None:
    return max(top, key=lambda a: a[1])[0] if top else None


@dataclass(frozen=True)
class SampleMeasure:
    """One record's positions, measured."""

    sample_id: str
    kl: tuple[float, ...]
    top1_agree: int
    abs_delta: tuple[float, ...]
    positions: tuple[int, ...] = ()
    """The golden positions of `kl`, in order."""
    tokens: tuple[str, ...] = ()
    """The golden's tokens at those positions."""
    agree_at: tuple[bool, ...] = ()
    """Top-1 agreement at each position."""
    in_call: tuple[bool, ...] = ()
    """Whether each position lies in the tool-call span (the raw call text after the content), on records that
    answered with tool calls."""

    @property
    def kl_mean(self) -> float:
        return sum(self.kl) / len(self.kl)


def golden_distributions(o: Observation) -> list[tuple[str, float, Top]]:
    """(token, logprob, its alternatives) at each comparable golden position: the record's top_logprobs where kept,
    else the chosen token alone (at temperature 0 it is the top-1)."""
    out: list[tuple[str, float, Top]] = []
    tops = o.top_logprobs or []
    for i, tok, lp in comparable(o.logprobs):
        if not isinstance(lp, (int, float)) or not math.isfinite(lp):
            out.append((tok, float("nan"), ()))
            continue
        alts = tuple((a[0], float(a[1])) for a in (tops[i] if i < len(tops) else [])
                     if isinstance(a, list) and len(a) == 2 and isinstance(a[0], str) and isinstance(a[1], (int, float))
                     and math.isfinite(a[1]))
        if tok not in {a for a, _ in alts}:
            alts = ((tok, float(lp)), *alts)
        out.append((tok, float(lp), alts))
    return out


def measure_sample(golden: Observation, forced: Forced) -> SampleMeasure | None:
    """The positions of one record both sides measured; None when none is measurable."""
    dists = golden_distributions(golden)
    kls: list[float] = []
    agree = 0
    deltas: list[float] = []
    at: list[int] = []
    agree_at: list[bool] = []
    # Where the golden answered with tool calls, its tokens spell the content first and then the calls' raw text: a
    # token starting at or past the content's length is in the tool-call span.
    calls = isinstance(golden.answer, list) and bool(golden.answer) and isinstance(golden.answer[0], dict)
    starts = [0]
    for tok, _, _ in dists:
        starts.append(starts[-1] + len(tok))
    content_end = len(golden.content or "")
    for pos, cand in zip(forced.positions, forced.top):
        if pos >= len(dists) or not cand:
            continue
        tok, lp, gtop = dists[pos]
        if not gtop:
            continue
        kls.append(position_kl(gtop, cand))
        at.append(pos)
        agree_at.append(top1(cand) == tok)
        agree += agree_at[-1]
        c = dict(cand).get(tok)
        if c is not None:
            deltas.append(abs(c - lp))
    return SampleMeasure(golden.sample_id, tuple(kls), agree, tuple(deltas), tuple(at), tuple(dists[p][0] for p in at),
                         tuple(agree_at), tuple(calls and starts[p] >= content_end for p in at)) if kls else None


def _quantile(xs: Sequence[float], q: float) -> float | None:
    """The q-quantile of sorted `xs` (nearest rank, as llama.cpp's KLD percentiles)."""
    if not xs:
        return None
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


@dataclass(frozen=True)
class SuiteMeasure:
    """What one suite's forced records gave: per-sample measures and what kept records out."""

    method: str | None
    samples: tuple[SampleMeasure, ...] = ()
    records: int = 0
    """Forced records read for this suite."""
    misaligned: tuple[str, ...] = ()
    """Records whose tokens the candidate did not reproduce (teacher_forced_tokens)."""
    context_changed: tuple[str, ...] = ()
    """Records whose prompt-token fingerprint differs from the golden's: not used (the context is not the golden's)."""
    infra: int = 0
    aligned_n: int = 0
    """Records whose alignment could be judged."""
    per_token: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        kls = sorted(k for s in self.samples for k in s.kl)
        n = len(kls)
        agree = sum(s.top1_agree for s in self.samples)
        deltas = [d for s in self.samples for d in s.abs_delta]
        return {"positions": n, "samples": len(self.samples),
                "kl_mean": stats.rnd(sum(kls) / n) if n else None,
                "kl_p50": stats.rnd(_quantile(kls, 0.5)), "kl_p99": stats.rnd(_quantile(kls, 0.99)),
                "kl_p999": stats.rnd(_quantile(kls, 0.999)),
                "top1_agreement": stats.rnd(agree / n) if n else None,
                "mean_abs_delta_logprob": stats.rnd(sum(deltas) / len(deltas)) if deltas else None,
                **self._spans()}

    def _spans(self) -> dict[str, Any]:
        """Prose and tool-call spans apart, where the suite has both (`spans`); nothing otherwise."""
        parts: dict[str, tuple[list[float], list[bool]]] = {"prose": ([], []), "tool_calls": ([], [])}
        for s in self.samples:
            for k, a, c in zip(s.kl, s.agree_at, s.in_call or (False,) * len(s.kl)):
                kl, agree = parts["tool_calls" if c else "prose"]
                kl.append(k)
                agree.append(a)
        if not all(kl for kl, _ in parts.values()):
            return {}
        out = {}
        for name, (kl, agree) in parts.items():
            kl.sort()
            out[name] = {"positions": len(kl), "kl_mean": stats.rnd(sum(kl) / len(kl)), "kl_p99": stats.rnd(_quantile(kl, 0.99)),
                         "top1_agreement": stats.rnd(sum(agree) / len(agree))}
        return {"spans": out}

    def pictures(self) -> dict[str, Any]:
        """What the report draws: each sample's mean KL (bounded: the furthest half and an even stride through the
        rest), and KL along the tokens of the furthest sample."""
        rows: list[dict[str, Any]] = [{"id": s.sample_id, "kl_mean": stats.rnd(s.kl_mean, 9), "positions": len(s.kl)}
                                      for s in self.samples]
        if len(rows) > PER_SAMPLE_MAX:
            ranked = sorted(range(len(rows)), key=lambda i: (-self.samples[i].kl_mean, i))
            top = set(ranked[:PER_SAMPLE_MAX // 2])
            rest = [i for i in range(len(rows)) if i not in top]
            step = len(rest) / (PER_SAMPLE_MAX - len(top))
            keep = top | {rest[int(k * step)] for k in range(PER_SAMPLE_MAX - len(top))}
            rows = [rows[i] for i in sorted(keep)]
        far = max(self.samples, key=lambda s: s.kl_mean, default=None)
        along = None if far is None else {"id": far.sample_id, "positions": list(far.positions[:TOKENS_SHOWN]),
                                          "tokens": list(far.tokens[:TOKENS_SHOWN]),
                                          "kl": [stats.rnd(k, 9) for k in far.kl[:TOKENS_SHOWN]]}
        return {"per_sample": rows, "furthest_sample": along}


def measure(golden_obs: Sequence[Observation], cand_obs: Sequence[Observation], rows: Iterable[Mapping[str, Any]],
            method: str | None) -> dict[str, SuiteMeasure]:
    """Per suite, the forced records of a run (teacher_forced.jsonl rows) against the golden's records. A record is
    measured only where the candidate's prompt-token fingerprint (usage.prompt_tokens of the sample's chat record,
    epoch 0) matches the golden's, and its tokens aligned."""
    gref = {(o.suite, o.sample_id): o for o in golden_obs if o.mode == REFERENCE_MODE and o.epoch == 0}
    cref = {(o.suite, o.sample_id): o for o in cand_obs if o.mode == REFERENCE_MODE and o.epoch == 0}
    acc: dict[str, _SuiteTally] = {}
    for row in rows:
        key = (str(row.get("suite")), str(row.get("sample_id")))
        g = gref.get(key)
        if g is None:
            continue
        tokens = [t for _, t, _ in comparable(g.logprobs)]
        if row.get("tokens_sha256") != tokens_digest(tokens):
            continue  # forced against another golden's tokens (a run compared with a golden it was not gated on)
        a = acc.setdefault(key[0], _SuiteTally())
        a.records += 1
        f = forced_of(row, tokens)
        if f.infra is not None:
            a.infra += 1
            continue
        c = cref.get(key)
        if c is None or c.prompt_tokens is None or c.prompt_tokens != g.prompt_tokens:
            a.context_changed.append(key[1])
            continue
        a.aligned_n += 1
        if not f.aligned:
            a.misaligned.append(key[1])
            continue
        m = measure_sample(g, f)
        if m is not None:
            a.samples.append(m)
    return {suite: SuiteMeasure(method, tuple(a.samples), a.records, tuple(a.misaligned), tuple(a.context_changed),
                                a.infra, a.aligned_n)
            for suite, a in sorted(acc.items())}


@dataclass
class _SuiteTally:
    """One suite's SuiteMeasure while measure reads the forced records (the same fields, as lists)."""

    samples: list[SampleMeasure] = field(default_factory=list)
    records: int = 0
    misaligned: list[str] = field(default_factory=list)
    context_changed: list[str] = field(default_factory=list)
    infra: int = 0
    aligned_n: int = 0


def reference_values(margin_provenance: Mapping[str, Any] | None) -> list[float] | None:
    """The reruns' per-sample KL a margin carries (`reference_per_sample`), validated; None when absent or malformed."""
    raw = (margin_provenance or {}).get("reference_per_sample")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_REFERENCE:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in raw):
        return None
    return [float(x) for x in raw]


@dataclass(frozen=True)
class Judged:
    """`suites.<suite>.teacher_forced` and its evidence."""

    block: dict[str, Any]
    evidence: tuple[Evidence, ...]
    frontend: tuple[Evidence, ...]
    verdict: str | None
    """pass | fail | inconclusive where measured; None where not used."""
    calibrated: bool = False


def judge(suite: str, m: SuiteMeasure | None, state: Mapping[str, Any] | None, margin: float | None,
          reference: list[float] | None, tokens_margin: float | None) -> Judged | None:
    """The suite's teacher-forced block and evidence; None when the run made no pass (documents stay as they were)."""
    if state is None or state.get("state") in ("skipped", "off"):
        return None  # no pass was made: the document stays as it was
    run_state = state.get("state")
    base: dict[str, Any] = {"state": run_state, "method": state.get("method")}
    if run_state != "measured":
        base["reason"] = state.get("reason")
        return Judged(base, (), (), None)
    if m is None or not m.records:
        return Judged({**base, "state": "not_measured", "reason": "no forced record of this suite"}, (), (), None)
    fe: list[Evidence] = []
    if m.aligned_n:
        from verifier.attribution.numerics import event_verdict

        k = len(m.misaligned)
        tv = event_verdict(k, m.aligned_n, tokens_margin or 0.0)
        if tokens_margin is None and tv.verdict != "pass":
            tv = dataclasses.replace(tv, verdict="inconclusive", margin=None)
        fe.append(Evidence(TOKENS_SIGNAL, suite, tv.verdict,
                           f"{k}/{m.aligned_n} forced records: the endpoint's tokens of the golden's text are not the golden's"
                           + (f" ({', '.join(m.misaligned[:5])})" if k else ""), component="chat template & tokenization",
                           samples=tuple(m.misaligned[:10]),
                           qualifier=None if tokens_margin is not None or tv.verdict == "pass" else "uncalibrated"))
    fig = m.figures()
    block = {**base, **fig, "margin": margin, "reference_kl_mean": stats.rnd(sum(reference) / len(reference)) if reference else None,
             "records": m.records, "misaligned": len(m.misaligned), "context_changed": len(m.context_changed), "infra": m.infra}
    if not m.samples:
        why = (f"the prompt-token fingerprint differs on {len(m.context_changed)}/{m.records} records (the template or "
               "tokenizer changed the context): the figures are not the golden's context and are not used"
               if m.context_changed else "no record measurable (misaligned tokens or infra errors)")
        return Judged({**block, "state": "not_used", "reason": why}, (), tuple(fe), None)
    cand = [s.kl_mean for s in m.samples]
    ref = reference if reference is not None else [0.0] * len(cand)
    p = stats.mann_whitney_greater(ref, cand)
    limit = margin if margin is not None else 0.0
    above = (fig["kl_mean"] or 0.0) > limit + EPS
    decidable = least_p(ref, len(cand)) < ALPHA
    if not above:
        verdict = "pass"
    elif p < ALPHA:
        verdict = "fail" if margin is not None else "inconclusive"
    else:
        # Above the margin and not rejected: a pass only where the test could have rejected at these sample sizes.
        verdict = "pass" if margin is not None and decidable else "inconclusive"
    block = {**block, "p_value": stats.rnd(p, 6), "test": "mann_whitney_greater", "verdict": verdict, **m.pictures()}
    if above and not decidable:
        block["note"] = (f"too few samples for the test to decide: {len(cand)} measured against {len(ref)} reruns' values "
                         f"cannot reach p < {ALPHA} however far apart")
    if m.context_changed:
        block["note"] = "; ".join(filter(None, [block.get("note"),
                                                f"{len(m.context_changed)} record(s) left out: prompt-token fingerprint differs"]))
    summary = (f"KL(golden||candidate) on the golden's tokens by {m.method}: mean {fig['kl_mean']} (p99 {fig['kl_p99']}) over "
               f"{fig['positions']} positions of {fig['samples']} samples, top-1 agreement {fig['top1_agreement']}; "
               + (f"reruns' mean {block['reference_kl_mean']}, margin {margin}; " if margin is not None else
                  f"golden not calibrated for {margin_key(suite)}: rerun `verifier calibrate`; ")
               + f"one-sided Mann-Whitney p={stats.rnd(p, 4)}")
    if above and not decidable:
        summary += f"; {block['note']}"
    ev = Evidence(SIGNAL, suite, verdict, summary, component="numerics",
                  qualifier="uncalibrated" if margin is None and verdict == "inconclusive" else None)
    return Judged(block, (ev,), tuple(fe), verdict, calibrated=margin is not None)


def least_p(reference: Sequence[float], n: int) -> float:
    """The smallest p the one-sided test can give with `n` candidate samples against these reference values: every
    candidate value above every reference value. At or above ALPHA, no distance however large can fail at this n
    (one sample against 20 values gives p = 0.057), so a candidate above the margin is undecided, not a pass."""
    top = max(reference, default=0.0)
    return stats.mann_whitney_greater(reference, [top + 1.0 + i for i in range(n)])


def spreads(suite: str, m: SuiteMeasure) -> dict[str, tuple[float, list[float]]]:
    """One reference rerun's figures against the golden, per margin key: (value, per-sample KL) for the distance,
    (misaligned rate, []) for the tokens."""
    out: dict[str, tuple[float, list[float]]] = {}
    if m.samples:
        per = [s.kl_mean for s in m.samples]
        out[margin_key(suite)] = (sum(k for s in m.samples for k in s.kl) / sum(len(s.kl) for s in m.samples), per)
    if m.aligned_n:
        out[tokens_key(suite)] = (len(m.misaligned) / m.aligned_n, [])
    return out


def calibration(measures: Sequence[Mapping[str, SuiteMeasure]], provenance: Mapping[str, Any]) -> dict[str, Any]:
    """Margins from the reference reruns' forced passes: per suite, the largest rerun's mean KL, with every rerun's
    per-sample KL (bounded) for the rank test; the largest misaligned rate for the tokens."""
    values: dict[str, float] = {}
    per: dict[str, list[float]] = {}
    for runs in measures:
        for suite, m in runs.items():
            for key, (v, xs) in spreads(suite, m).items():
                values[key] = max(values.get(key, 0.0), v)
                per.setdefault(key, []).extend(xs)
    out: dict[str, Any] = {}
    for key, v in sorted(values.items()):
        entry: dict[str, Any] = {"value": round(v, 6), "source": "calibrate", **provenance}
        if per.get(key):
            xs = per[key]
            step = max(1, math.ceil(len(xs) / MAX_REFERENCE))
            entry["reference_per_sample"] = [round(x, 9) for x in xs[::step]][:MAX_REFERENCE]
        out[key] = entry
    return out


def summary_line(block: Mapping[str, Any] | None) -> str | None:
    """One line for the terminal and summary.md: the suite's teacher-forced figures, or why there are none."""
    if not block:
        return None
    method = block.get("method")
    if block.get("state") != "measured" or block.get("kl_mean") is None:
        return f"teacher-forced KL: {block.get('state')} ({block.get('reason') or 'no reason recorded'})"
    ref = block.get("reference_kl_mean")
    return (f"teacher-forced KL ({method}): mean {block['kl_mean']:.4g}, p99 {block['kl_p99']:.4g}, p99.9 {block['kl_p999']:.4g} "
            f"over {block['positions']} positions, top-1 agreement {block['top1_agreement']:.3f}; reruns "
            + (f"{ref:.4g}" if isinstance(ref, (int, float)) else "not calibrated")
            + f", p={block.get('p_value')}: {block.get('verdict')}")
