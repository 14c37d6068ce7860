"""Journal -> verdicts.jsonl + observations.jsonl + summary.json, one parse per exchange. Offline and pure: same
journal, same bytes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from verifier.judge import contract, contract_surfaces
from verifier import safewrite
from verifier.execution import journal, rundir
from verifier import stats
from verifier.wire.bodyread import STREAM_REFUSED, TOO_MANY_EVENTS
from verifier.judge.parse import MalformedBody, parse_exchange
from verifier.execution import observations as observe
from verifier.types import Exchange, Finding, Judgement, Outcome, Parsed, RunHeader, RunSummary, Sample, Suite, Verdict
from verifier import jsonsafe

VERDICTS = journal.VERDICTS
# Exchange errors that are findings about the stream the server sent, not transport failures.
CONTRACT_ERRORS = {TOO_MANY_EVENTS: "the stream was cut at --max-stream-events (mostly empty or repeated events)"}
SUMMARY = journal.SUMMARY


def _signals(ex: Exchange, parsed: Parsed | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"latency_ms": ex.latency_ms, "attempts": ex.attempts, "status": ex.status}
    if ex.sent is not None:
        s["sent"] = ex.sent
    if parsed is not None:
        cached = cached_tokens(parsed.usage)
        if cached is not None:
            s["cached_tokens"] = cached
        s["finish_reason"] = parsed.finish_reason
        s["prompt_tokens"] = parsed.prompt_tokens
        s["completion_tokens"] = parsed.completion_tokens
        calls = parsed.tool_calls if isinstance(parsed.tool_calls, list) else []
        styles = sorted({contract.id_style(c["id"], (c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)})
        if styles:
            s["tool_call_id_style"] = styles
    return s


def cached_tokens(usage: Any) -> int | None:
    """The cached prompt tokens the usage reported (chat's `prompt_tokens_details`, Responses'
    `input_tokens_details`; Messages' `cache_read_input_tokens` is read into the chat spelling by its surface), or None
    where it reported no such figure (a key absent or not a count)."""
    if not isinstance(usage, dict):
        return None
    for details in ("prompt_tokens_details", "input_tokens_details"):
        d = usage.get(details)
        n = d.get("cached_tokens") if isinstance(d, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
    return None


def judge(suite: Suite, sample: Sample, ex: Exchange, parse: Callable[[], Parsed] | None = None) -> Verdict:
    """One exchange -> one verdict. Infra is decided here, before any scorer sees the response.

    The only place a Verdict is built: identity (suite, sample, epoch, mode) comes from the
    Exchange, never from the scorer, whose Judgement knows nothing of epochs or wire modes.
    `parse` (execution/observations.Once) shares one parse of the exchange with the observation row.
    """
    base: dict[str, Any] = dict(suite=ex.suite, sample_id=ex.sample_id, epoch=ex.epoch, mode=ex.mode)
    if ex.status is not None and ex.status >= 400 and suite.unsupported and suite.unsupported(sample, ex.status, ex.body or ""):
        return Verdict(**base, outcome="unsupported", reason=f"http_{ex.status}", signals=_signals(ex))
    if ex.error in CONTRACT_ERRORS:
        # What the endpoint sent broke the stream contract itself (the reader cut it at a cap): a finding, not infra.
        f = Finding(ex.error, CONTRACT_ERRORS[ex.error])
        return Verdict(**base, outcome="contract", reason=ex.error, findings=(f,), signals=_signals(ex))
    if ex.error == STREAM_REFUSED:
        # The server refused the request inside its 200 stream (an error event with a 4xx code): a refusal, judged
        # as the 4xx it names, never an infra failure (which would retry it and count it against the infra budget).
        return Verdict(**base, outcome="unsupported", reason=STREAM_REFUSED, signals=_signals(ex))
    if ex.error is not None:
        return Verdict(**base, outcome="infra", reason=ex.error, signals=_signals(ex))
    if ex.status is None or ex.status >= 400:
        # A non-retryable 4xx: the endpoint refused the request as sent. Not a wrong answer (but a
        # Responses/Messages error must still have its surface's shape).
        return Verdict(**base, outcome="unsupported", reason=f"http_{ex.status}", signals=_signals(ex),
                       findings=tuple(contract_surfaces.error_findings(ex.mode, ex.status, ex.body)))
    try:
        parsed = parse() if parse is not None else parse_exchange(ex)
    except MalformedBody as e:
        return Verdict(**base, outcome="contract", reason="malformed_body", findings=(Finding("malformed_body", str(e)),), signals=_signals(ex))
    checked = contract.check(ex.request, parsed, ex.mode)
    j: Judgement = suite.score(sample, parsed)
    findings = tuple(checked) + tuple(j.findings)
    outcome = "contract" if contract.blocking(findings) else j.outcome
    reason = j.reason
    if outcome == "contract" and j.outcome != "contract":
        reason = next(f.code for f in findings if f.code in contract.BLOCKING)
    return Verdict(
        **base, outcome=outcome, score=j.score, answer=j.answer, reason=reason,
        findings=findings, metrics=j.metrics, signals={**_signals(ex, parsed), **j.signals},
    )


def _steps_signals(steps: list[Verdict]) -> dict[str, Any]:
    """A record's wire signals over the requests it covers: the first request's prompt tokens (the one
    whose prompt the record's history does not depend on), totals of completion tokens, latency and
    attempts, the last finish reason, every tool-call id style."""
    sig = [v.signals for v in steps]
    styles = sorted({x for s in sig for x in s.get("tool_call_id_style") or ()})
    out: dict[str, Any] = {
        "latency_ms": sum(v.latency_ms for v in steps), "attempts": sum(s.get("attempts") or 0 for s in sig),
        "status": sig[-1].get("status"), "finish_reason": sig[-1].get("finish_reason"),
        "prompt_tokens": sig[0].get("prompt_tokens"), "requests": len(steps),
        "completion_tokens": sum(s.get("completion_tokens") or 0 for s in sig) if any(s.get("completion_tokens") is not None for s in sig) else None,
    }
    if styles:
        out["tool_call_id_style"] = styles
    for k in ("sent", "cached_tokens"):  # the first request's, as its prompt tokens: the one the history does not shape
        if sig[0].get(k) is not None:
            out[k] = sig[0][k]
    return out


def judge_conversation(suite: Suite, sample: Sample, steps: list[Exchange],
                       parses: Sequence[Callable[[], Parsed]] | None = None) -> list[Verdict]:
    """One conversation's exchanges (in step order) -> one verdict per record of `Suite.conversation`.

    Each request is judged for its envelope like any exchange (infra, refusal, contract findings); the
    suite judges the content of each record over the whole conversation. A record's outcome is the worst
    of the requests it covers: infra, then unsupported, then contract. A record with no request (the
    conversation stopped before it) takes the outcome of the request it stopped at, as `not_reached`.
    """
    conv = suite.conversation
    assert conv is not None  # judge_conversation is called for conversation suites only
    base_steps = [judge(suite, sample, ex, parses[i] if parses else None) for i, ex in enumerate(steps)]
    stopped = next((v for v in base_steps if v.outcome in ("infra", "unsupported")), None)
    if stopped is None and base_steps and base_steps[-1].outcome == "contract":
        stopped = base_steps[-1]  # e.g. an answer that could not be parsed: nothing to build the next request on
    out = []
    for record, j, covered in conv.score(sample, steps):
        if not steps:
            break
        ex0 = steps[0]
        base: dict[str, Any] = dict(suite=ex0.suite, sample_id=record, epoch=ex0.epoch, mode=ex0.mode)
        vs = [base_steps[i] for i in covered if 0 <= i < len(base_steps)]
        if not vs:
            outcome = stopped.outcome if stopped else "infra"
            out.append(Verdict(**base, outcome=outcome, reason="not_reached" if stopped is None else f"not_reached:{stopped.reason}",
                               signals={"requests": 0}))
            continue
        bad = next((v for o in ("infra", "unsupported", "contract") for v in vs if v.outcome == o), None)
        findings = tuple(f for v in vs for f in v.findings) + tuple(j.findings)
        signals = {**_steps_signals(vs), **j.signals}
        if bad is not None and bad.outcome in ("infra", "unsupported"):
            out.append(Verdict(**base, outcome=bad.outcome, reason=bad.reason, findings=findings, signals=signals))
            continue
        outcome = "contract" if bad is not None else j.outcome
        out.append(Verdict(**base, outcome=outcome, score=j.score, answer=j.answer,
                           reason=bad.reason if bad is not None and j.outcome != "contract" else j.reason,
                           findings=findings, metrics=j.metrics, signals=signals))
    return out


def score_run(run_dir: Path, suites: dict[str, Suite]) -> tuple[list[Verdict], RunSummary]:
    verdicts, summary, _ = score_journal(run_dir, suites)
    return verdicts, summary


def score_journal(run_dir: Path, suites: dict[str, Suite]) -> tuple[list[Verdict], RunSummary, observe.Collector]:
    """Verdicts, the summary, and what observations.jsonl keeps of each record, from one parse per exchange."""
    rundir.check_run_dir(run_dir)
    samples = journal.read_samples(run_dir)
    for (name, _), sample in samples.items():  # a run directory may come from someone else: its samples too
        check = suites[name].check if name in suites else None
        problem = check(sample) if check is not None else None
        if problem is not None:
            raise journal.NotARunDir(f"{run_dir}: {journal.SAMPLES}: {problem}")
    scorer = Scorer(run_dir, suites, samples)
    # One record at a time: only verdicts are kept (a 300 MB journal cost 446 MB when it was loaded whole).
    for ex in journal.iter_exchanges(run_dir):
        scorer.add(ex)
    return scorer.result()


class Scorer:
    """score_journal's walk of the journal, one record at a time: `add` every record in journal order, then
    `result`. `verifier score` feeds it the whole journal at once; `verifier run` feeds it each record as it is
    journaled (execution/live.py), so that when the last answer arrives only `result` is left. Same records in the
    same order, same bytes out."""

    def __init__(self, run_dir: Path, suites: dict[str, Suite], samples: dict[tuple[str, str], Sample]):
        self.run_dir = Path(run_dir)
        self.suites = suites
        self.samples = samples
        """samples.jsonl as journal.read_samples reads it."""
        # Only verdicts are kept; a conversation's steps are kept until its verdicts are judged together (result).
        # The last record of a key wins.
        self.latest: dict[tuple[str, str, int, str], Verdict] = {}
        self.conv_latest: dict[tuple[str, str, int, str], Exchange] = {}
        self.seen = observe.Collector()
        self.records = 0

    def add(self, ex: Exchange, parsed: tuple[Parsed | None, BaseException | None] | None = None) -> None:
        """The next record of the journal; `parsed`: parse_exchange's result (or exception) for it, when known."""
        self.records += 1
        suites = self.suites
        suite = suites.get(ex.suite) or suites[ex.suite.split(":", 1)[0]]
        if suite.conversation:
            self.conv_latest[ex.key] = ex
            return
        once = observe.Once(ex, parsed)
        v = self.latest[ex.key] = judge(suite, self.samples[(ex.suite, ex.sample_id)], ex, once)
        self.seen.add(ex, once, observe.judged(v))

    def result(self) -> tuple[list[Verdict], RunSummary, observe.Collector]:
        """Verdicts (conversations judged now, whole), the summary and the observations, once every record is in."""
        # The header as it is now (a run finished or resumed since this scorer started has rewritten it).
        header = rundir.RunDir(self.run_dir).header()
        suites, samples, latest, conv_latest, seen = self.suites, self.samples, self.latest, self.conv_latest, self.seen
        verdicts = [latest[k] for k in sorted(latest)]
        conversations: dict[tuple[str, str, int, str], list[Exchange]] = defaultdict(list)
        for key in sorted(conv_latest):
            ex = conv_latest[key]
            conversations[(ex.suite, ex.sample_id.split("/", 1)[0], ex.epoch, ex.mode)].append(ex)
        steps_once: dict[tuple[str, str, int, str], observe.Once] = {}
        for (name, sid, _, _), steps in sorted(conversations.items()):
            suite = suites.get(name) or suites[name.split(":", 1)[0]]
            steps.sort(key=lambda ex: step_order(ex.sample_id))
            onces = [steps_once.setdefault(ex.key, observe.Once(ex)) for ex in steps]
            verdicts.extend(judge_conversation(suite, samples[(name, sid)], steps, onces))
        verdicts.sort(key=lambda v: (v.suite, v.sample_id, v.epoch, v.mode))
        if conv_latest:
            # A conversation's records are named by record, its exchanges by step: a row takes the text of the
            # exchange whose key it shares, if any (as bless always paired them).
            outcome = {(v.suite, v.sample_id, v.epoch, v.mode): v for v in verdicts}
            for key in sorted(conv_latest):
                if key in outcome:
                    seen.add(conv_latest[key], steps_once[key], observe.judged(outcome[key]))
        return verdicts, summarize(header, verdicts, suites, samples), seen


def step_order(step_id: str) -> tuple[Any, ...]:
    """Sort key of a step id: its `/`-separated parts, numbers as numbers (t2/10 after t2/9, t10 after t9)."""
    import re

    return tuple(tuple((0, int(x)) if x.isdigit() else (1, x) for x in re.split(r"(\d+)", part) if x) for part in step_id.split("/")[1:])


def summarize(header: RunHeader, verdicts: list[Verdict], suites: dict[str, Suite], samples: Any = None) -> RunSummary:
    """What scoring counted of the run `header` describes, typed. Its `to_json()` is summary.json's document as this
    function has always built it (key for key: `write_scores` adds only the journal's digest), so the file's bytes
    do not depend on the type."""
    by_suite: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        by_suite[v.suite].append(v)
    per_suite: dict[str, Any] = {}
    out: dict[str, Any] = {"run_id": header.run_id or None, "suites": per_suite}
    for name in sorted(header.suites):
        vs = by_suite.get(name, [])
        info = header.suites[name]
        expected = info.get("requests", len(vs))
        outcomes = Counter(v.outcome for v in vs)
        # Metrics are averaged over epochs per sample first, then over samples;
        # only `content` verdicts count: contract and infra failures are reported, never scored as wrong.
        per_sample: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for v in vs:
            if v.outcome == "content":
                for m, x in v.metrics.items():
                    per_sample[m][v.sample_id].append(x)
        metrics = {}
        for m in sorted(per_sample):
            vals = [sum(xs) / len(xs) for _, xs in sorted(per_sample[m].items())]
            mean, (lo, hi) = stats.mean_ci(vals)
            metrics[m] = {"value": stats.rnd(mean), "ci": [stats.rnd(lo), stats.rnd(hi)], "n": len(vals)}
        judged = outcomes[Outcome.CONTENT] + outcomes[Outcome.CONTRACT]
        findings = Counter(f.code for v in vs for f in v.findings)
        lat = sorted(v.latency_ms for v in vs if v.outcome != "infra")
        entry: dict[str, Any] = {
            "version": info.get("version"),
            "requests": expected,
            "recorded": len(vs),
            "missing": max(0, expected - len(vs)),
            "outcomes": dict(sorted(outcomes.items())),
            "reasons": dict(sorted(Counter(v.reason for v in vs).items())),
            "findings": dict(sorted(findings.items())),
            "contract_rate": stats.rnd(outcomes[Outcome.CONTRACT] / judged) if judged else None,
            "infra_rate": stats.rnd(outcomes[Outcome.INFRA] / len(vs)) if vs else None,
            "metrics": metrics,
            "latency_ms": {
                "p50": stats.rnd(lat[len(lat) // 2]) if lat else None,
                "p95": stats.rnd(lat[min(len(lat) - 1, int(len(lat) * 0.95))]) if lat else None,
            },
        }
        suite = suites.get(name)
        if suite and suite.summarize:
            entry["extra"] = suite.summarize(vs)
        per_suite[name] = entry
    return RunSummary.from_dict(out)


def summary_lines(summary: RunSummary) -> list[str]:
    """The summary as a person reads it: per suite, metrics with intervals, then outcomes and findings."""
    out = []
    for name, s in summary.suites.items():
        ms = "  ".join(f"{m}={v['value']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}] (n={v['n']})" for m, v in s.metrics.items() if v["value"] is not None)
        out.append(f"{name} v{s.version}: {ms or 'no metric values (see outcomes)'}")
        out.append(f"  outcomes {s.outcomes}  findings {s.findings or '{}'}")
    return out


def write_scores(run_dir: Path, verdicts: list[Verdict], summary: RunSummary,
                 observed: observe.Collector | None = None) -> None:
    """verdicts.jsonl, summary.json, then observations.jsonl (when `observed`; else any older one is removed),
    recording the journal they were scored from (see `RunDir.stale`, `observations.read`): observations.jsonl
    comes last because its header binds the other two (a kill before it leaves it stale, and the run is scored
    again)."""
    digest = journal.file_digest(Path(run_dir) / journal.RESPONSES)
    observe.discard(run_dir)  # no sealed file may vouch for the verdicts and summary being replaced
    safewrite.write_jsonl(Path(run_dir) / VERDICTS, (v.fields() for v in verdicts), nested_dataclasses=True)
    safewrite.write_json(Path(run_dir) / SUMMARY, {**summary.to_json(), "responses_digest": digest})
    if observed is not None:
        observe.write(run_dir, observed, digest)


def read_verdicts(run_dir: Path) -> list[Verdict]:
    return [Verdict.from_json(d) for d in journal.read_jsonl(Path(run_dir) / VERDICTS, within=Path(run_dir))]
