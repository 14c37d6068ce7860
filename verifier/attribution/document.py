"""The comparison document as types: `comparison.json` and its parts, frozen, each with `to_dict()` / `from_dict()`.

compare.compare builds the document as a `Comparison` (and the gate adds its blocks with `dataclasses.replace`);
readers take it as one (`Comparison.read(path)` from a file, `Comparison.from_dict(doc)` from a document) and
read fields, not string keys. `to_dict()` gives back today's document exactly, key order included (the order compare inserts the
keys in): `Comparison.from_dict(d).to_dict() == d` and the file written from either is the same bytes (the journal
writes JSON with sorted keys). A key a part does not name (a newer writer's, or a block kept as is) is kept in
`extra` and written back after the named ones.

Optional keys: a field that is None where the document may lack the key is left out of `to_dict()` (noted on each
field); where the key may also hold null (`MetricResult.samples_needed`) the absence is its own value, `ABSENT`.

Blocks whose shape is owned elsewhere stay mappings: `infra`, `coverage` (coverage.py), `golden`, `run`
(app/gate.py), `conformance` rows (execution/probe_results.py), `tool_trigger`, `tool_calls`, `turn_diff`, flips and
finding counts (numerics.py, compare.py). Readers take their `{"golden", "candidate"}` pairs as `SideCounts` and a new
finding's detail as `NewFinding` (SuiteResult.finding_counts / new_findings, Drift.logprob_counts), not by key.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from verifier import jsonsafe
from verifier.types import Evidence


class Absent(enum.Enum):
    """A key the document does not have (distinct from a key holding null)."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT


def _extra(d: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    names = set(known)
    return {k: v for k, v in d.items() if k not in names}


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """A key left out when its field is None (the document lacks it)."""
    if value is not None:
        out[key] = value


@dataclass(frozen=True)
class MetricResult:
    """`suites.<suite>.metrics.<metric>` (numerics.metric_verdict): a quality metric, candidate against golden."""

    golden: float | None
    candidate: float | None
    delta: float | None
    ci: list[float | None]
    margin: float | None
    """None: the golden has no calibrated margin for it (compare.uncalibrated)."""
    p_value: float | None
    n: int
    verdict: str
    samples_needed: int | None | Absent = ABSENT
    """Set on an inconclusive verdict with a margin: about how many samples would decide it (None: none would)."""
    note: str | None = None
    """Why the verdict is not a plain one (uncalibrated); absent when None."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("golden", "candidate", "delta", "ci", "margin", "p_value", "n", "verdict", "samples_needed", "note")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricResult:
        return cls(golden=d["golden"], candidate=d["candidate"], delta=d["delta"], ci=list(d["ci"]), margin=d["margin"],
                   p_value=d["p_value"], n=d["n"], verdict=d["verdict"], samples_needed=d.get("samples_needed", ABSENT),
                   note=d.get("note"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"golden": self.golden, "candidate": self.candidate, "delta": self.delta, "ci": list(self.ci),
                               "margin": self.margin, "p_value": self.p_value, "n": self.n, "verdict": self.verdict}
        if not isinstance(self.samples_needed, Absent):
            out["samples_needed"] = self.samples_needed
        _put(out, "note", self.note)
        return {**out, **self.extra}

    @property
    def needed(self) -> int | None:
        """samples_needed, None where absent."""
        return None if isinstance(self.samples_needed, Absent) else self.samples_needed


def prompt_tokens_move(pt: Mapping[str, Any]) -> str:
    """`median prompt tokens golden 332 → candidate 29`, from a prompt_tokens_mismatch block's `prompt_tokens`."""
    return f"median prompt tokens golden {pt['golden_median']:g} → candidate {pt['candidate_median']:g}"


@dataclass(frozen=True)
class SignalResult:
    """`suites.<suite>.signals.<name>` and `suites.<suite>.divergence` (numerics.event_verdict): an event rate."""

    rate: float | None
    ci: list[float | None]
    count: int
    n: int
    margin: float | None
    """None: the golden has no calibrated margin for it (compare.uncalibrated)."""
    verdict: str
    golden_count: int | None = None
    """Numerics signals (paired_event_verdict): the golden's events alone (McNemar); absent when None."""
    p_value: float | None | Absent = ABSENT
    test: str | None = None
    note: str | None = None
    samples: list[str] | None = None
    """Where it fired (at most 50); absent when None."""
    prompt_tokens: Mapping[str, Any] | None = None
    """prompt_tokens_mismatch only: `{"golden_median", "candidate_median", "samples"}` over the samples it fired on
    (the magnitude the diagnosis line gives); absent when None."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("rate", "ci", "count", "n", "margin", "verdict", "golden_count", "p_value", "test", "note", "samples",
            "prompt_tokens")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SignalResult:
        samples = d.get("samples")
        return cls(rate=d["rate"], ci=list(d["ci"]), count=d["count"], n=d["n"], margin=d["margin"], verdict=d["verdict"],
                   golden_count=d.get("golden_count"), p_value=d.get("p_value", ABSENT), test=d.get("test"),
                   note=d.get("note"), samples=None if samples is None else list(samples), prompt_tokens=d.get("prompt_tokens"),
                   extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rate": self.rate, "ci": list(self.ci), "count": self.count, "n": self.n,
                               "margin": self.margin, "verdict": self.verdict}
        _put(out, "golden_count", self.golden_count)
        if not isinstance(self.p_value, Absent):
            out["p_value"] = self.p_value
        _put(out, "test", self.test)
        _put(out, "note", self.note)
        if self.samples is not None:
            out["samples"] = list(self.samples)
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = dict(self.prompt_tokens)
        return {**out, **self.extra}


@dataclass(frozen=True)
class Drift:
    """`suites.<suite>.drift`: logprob drift on the shared prefix of greedy outputs (numerics.drift_state)."""

    tokens: int
    mean_abs_delta: float | None
    first_divergence_median: int | None
    samples: int
    logprobs: Mapping[str, int] | None
    """`{"golden", "candidate", "of"}`: samples with logprobs on each side."""
    parted_at_token_0: int | None
    per_sample: list[dict[str, Any]] | None
    """One row per sample for the report's drift plot (numerics.bounded_per_sample); None where the document
    predates it (the report says so), so an older document reads back as it was written."""
    margin: float
    """The fire threshold (calibrated drift x DRIFT_FACTOR, at least DRIFT_FLOOR)."""
    state: str
    """`clean` | `fired` | `uncalibrated` | `unavailable`."""
    numerics_changed: bool | None = None
    """Drift fired and greedy outputs parted beyond the reruns' rate; absent when None."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("tokens", "mean_abs_delta", "first_divergence_median", "samples", "logprobs", "parted_at_token_0",
            "per_sample", "margin", "state", "numerics_changed")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Drift:
        return cls(tokens=d["tokens"], mean_abs_delta=d["mean_abs_delta"], first_divergence_median=d["first_divergence_median"],
                   samples=d["samples"], logprobs=d.get("logprobs"), parted_at_token_0=d.get("parted_at_token_0"),
                   per_sample=None if d.get("per_sample") is None else list(d["per_sample"]), margin=d["margin"], state=d["state"],
                   numerics_changed=d.get("numerics_changed"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": self.tokens, "mean_abs_delta": self.mean_abs_delta,
                               "first_divergence_median": self.first_divergence_median, "samples": self.samples}
        _put(out, "logprobs", None if self.logprobs is None else dict(self.logprobs))
        _put(out, "parted_at_token_0", self.parted_at_token_0)
        if self.per_sample is not None:
            out["per_sample"] = list(self.per_sample)
        out.update(margin=self.margin, state=self.state)
        _put(out, "numerics_changed", self.numerics_changed)
        return {**out, **self.extra}

    @property
    def logprob_counts(self) -> SideCounts | None:
        """`logprobs`, typed (None where the block is absent or empty)."""
        return SideCounts.from_dict(self.logprobs) if self.logprobs else None


@dataclass(frozen=True)
class SideCounts:
    """A `{"golden", "candidate"}` pair inside a block that stays a mapping (a finding's sample counts, a drift's
    samples with logprobs, a tool-calling suite's F1 or schema accuracy): the same figure on each side. A side the
    block leaves out is None; `of` is a drift's logprob count's total (`logprobs.of`), None elsewhere."""

    golden: Any
    candidate: Any
    of: Any = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> SideCounts:
        """The pair as the block holds it; an absent block (None, {}) is a pair of Nones."""
        d = d or {}
        return cls(golden=d.get("golden"), candidate=d.get("candidate"), of=d.get("of"))


@dataclass(frozen=True)
class NewFinding:
    """`suites.<suite>.new_finding_detail.<code>` (compare._NewFinding.detail), read: where a finding code new on the
    candidate was seen."""

    samples: list[str]
    """Sample ids (at most 50)."""
    modes: list[str]
    completion_tokens: list[int] | None = None
    """Output lengths (compare.LENGTH_EVIDENCE codes only)."""
    requested_max_tokens: Any = None
    """The max_tokens the requests asked for, where one value was asked (compare.py adds it)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> NewFinding:
        d = d or {}
        ct = d.get("completion_tokens")
        return cls(samples=list(d.get("samples") or []), modes=list(d.get("modes") or []),
                   completion_tokens=None if ct is None else list(ct), requested_max_tokens=d.get("requested_max_tokens"))


@dataclass(frozen=True)
class SuiteResult:
    """`suites.<suite>`: one suite's paired comparison (compare._suite_verdicts)."""

    paired: int
    golden_only: int
    candidate_only: int
    metrics: Mapping[str, MetricResult]
    signals: Mapping[str, SignalResult]
    drift: Drift
    divergence: SignalResult | None
    """Greedy divergence against the reference's reruns; None where no output tokens were comparable."""
    flips: Mapping[str, list[str]]
    """`{"regressed": [ids], "improved": [ids]}` on the clean paired samples."""
    findings: Mapping[str, Mapping[str, int]]
    """finding code -> `{"golden", "candidate"}` sample counts."""
    flips_by_mode: Mapping[str, Mapping[str, list[str]]]
    new_finding_detail: Mapping[str, Mapping[str, Any]]
    signal_modes: Mapping[str, list[str]]
    tool_trigger: Mapping[str, Any] | None
    answer_agreement: float | None
    turn_diff: Mapping[str, Any] | None = None
    """Multi-turn suites only (with `modes`); absent when None. (`modes` is also set on runs over several surfaces.)"""
    modes: list[str] | None = None
    tool_calls: Mapping[str, Any] | None = None
    """K2VV's numbers on tool-calling suites (app/gate.py); absent when None."""
    teacher_forced: Mapping[str, Any] | None = None
    """The teacher-forced distance (attribution/teacher_forced.judge); absent when the run made no teacher-forcing pass."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("paired", "golden_only", "candidate_only", "metrics", "signals", "drift", "divergence", "flips", "findings",
            "flips_by_mode", "new_finding_detail", "signal_modes", "tool_trigger", "answer_agreement", "turn_diff", "modes",
            "tool_calls", "teacher_forced")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteResult:
        dv = d.get("divergence")
        return cls(paired=d["paired"], golden_only=d["golden_only"], candidate_only=d["candidate_only"],
                   metrics={k: MetricResult.from_dict(v) for k, v in (d.get("metrics") or {}).items()},
                   signals={k: SignalResult.from_dict(v) for k, v in (d.get("signals") or {}).items()},
                   drift=Drift.from_dict(d["drift"]), divergence=None if dv is None else SignalResult.from_dict(dv),
                   flips=d["flips"], findings=d["findings"], flips_by_mode=d["flips_by_mode"],
                   new_finding_detail=d["new_finding_detail"], signal_modes=d["signal_modes"], tool_trigger=d["tool_trigger"],
                   answer_agreement=d["answer_agreement"], turn_diff=d.get("turn_diff"), modes=d.get("modes"),
                   tool_calls=d.get("tool_calls"), teacher_forced=d.get("teacher_forced"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "paired": self.paired, "golden_only": self.golden_only, "candidate_only": self.candidate_only,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
            "signals": {k: v.to_dict() for k, v in self.signals.items()},
            "drift": self.drift.to_dict(), "divergence": None if self.divergence is None else self.divergence.to_dict(),
            "flips": self.flips, "findings": self.findings, "flips_by_mode": self.flips_by_mode,
            "new_finding_detail": self.new_finding_detail, "signal_modes": self.signal_modes,
            "tool_trigger": self.tool_trigger, "answer_agreement": self.answer_agreement,
        }
        _put(out, "turn_diff", self.turn_diff)
        _put(out, "modes", self.modes)
        _put(out, "tool_calls", self.tool_calls)
        _put(out, "teacher_forced", self.teacher_forced)
        return {**out, **self.extra}

    def finding_counts(self) -> dict[str, SideCounts]:
        """`findings`, typed: finding code -> the samples showing it on each side."""
        return {code: SideCounts.from_dict(n) for code, n in self.findings.items()}

    def new_findings(self) -> dict[str, NewFinding]:
        """`new_finding_detail`, typed: finding code new on the candidate -> where it was seen."""
        return {code: NewFinding.from_dict(d) for code, d in self.new_finding_detail.items()}


@dataclass(frozen=True)
class Side:
    """`frontend` / `quantization`: one verdict and the evidence that decided it."""

    verdict: str
    evidence: tuple[Evidence, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Side:
        return cls(verdict=d["verdict"], evidence=tuple(Evidence.from_dict(e) for e in d["evidence"]),
                   extra=_extra(d, ("verdict", "evidence")))

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "evidence": [e.to_dict() for e in self.evidence], **self.extra}


@dataclass(frozen=True)
class DiagnosisEntry:
    """One item of `diagnosis` (diagnosis.diagnose): a component the evidence implicates, root causes first."""

    component: str
    findings: list[str]
    """Finding codes and signal names, most affected samples first."""
    counts: Mapping[str, int]
    suites: list[str]
    modes: list[str]
    examples: list[str]
    """Example sample ids."""
    explanation: str
    where: str
    """Where to look (diagnosis.COMPONENTS)."""
    explains: list[str] | None = None
    """Other components this one's findings explain (a root cause); absent when None."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("component", "findings", "counts", "suites", "modes", "examples", "explanation", "where", "explains")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DiagnosisEntry:
        return cls(component=d["component"], findings=list(d["findings"]), counts=dict(d["counts"]), suites=list(d["suites"]),
                   modes=list(d["modes"]), examples=list(d["examples"]), explanation=d["explanation"], where=d["where"],
                   explains=d.get("explains"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "findings": list(self.findings), "counts": dict(self.counts),
                               "suites": list(self.suites), "modes": list(self.modes), "examples": list(self.examples),
                               "explanation": self.explanation, "where": self.where}
        _put(out, "explains", None if self.explains is None else list(self.explains))
        return {**out, **self.extra}


@dataclass(frozen=True)
class Check:
    """One item of `checks` (explain.checks): one check the golden defines, named stably for CI (JUnit testcases)."""

    name: str
    """`<suite>: <signal>` or `<suite>: quality/<metric>`, `<surface>: probe:<name>`."""
    cls: str
    """The key `class`: `verifier.frontend` | `verifier.quantization`."""
    verdict: str
    """`pass` | `fail` | `inconclusive` | `not_measured` | `reference_fails` | `not_in_golden`."""
    summary: str
    samples: list[str] | None = None
    """Absent (None) on a check not measured on this run."""
    qualifier: str | None = None
    component: str | None = None
    """A probe's own component."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("name", "class", "verdict", "summary", "samples", "qualifier", "component")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        samples = d.get("samples")
        return cls(name=d["name"], cls=d["class"], verdict=d["verdict"], summary=d["summary"],
                   samples=None if samples is None else list(samples), qualifier=d.get("qualifier"),
                   component=d.get("component"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "class": self.cls, "verdict": self.verdict, "summary": self.summary}
        _put(out, "samples", None if self.samples is None else list(self.samples))
        _put(out, "qualifier", self.qualifier)
        _put(out, "component", self.component)
        return {**out, **self.extra}


@dataclass(frozen=True)
class Comparison:
    """`comparison.json`: a run against a golden (compare.compare, completed by app/gate.py)."""

    status: str
    """A key of compare.EXIT."""
    exit_code: int
    meaning: str
    infra: Mapping[str, Any]
    """`{"count", "total", "rate", "budget", "reference_also_failed"}`."""
    frontend: Side
    quantization: Side
    suites: Mapping[str, SuiteResult]
    coverage: Mapping[str, Any]
    """coverage.coverage's block."""
    conformance: list[dict[str, Any]] | None = None
    """The probe x surface table (probe_results.judge); absent (None) when neither side ran probes."""
    logprobs_missing_modes: list[str] | None = None
    tool_call_logprobs_missing_modes: list[str] | None = None
    """Modes whose tool-call answers carried no logprobs while the run had logprobs elsewhere: numerics on the
    generated tool-call tokens not measured there (engines that return them: vLLM, llama.cpp's raw text)."""
    diagnosis: tuple[DiagnosisEntry, ...] | None = None
    """None only in the document compare is still building (diagnose, reasons and checks read it)."""
    reasons: list[str] | None = None
    reason: str | None = None
    """The first reason (null when there is none); present whenever `reasons` is."""
    checks: tuple[Check, ...] | None = None
    golden: Mapping[str, Any] | None = None
    """`{"name", "path", "source_run", "endpoint", "margins_provenance"}` (app/gate.py); absent when None."""
    run: Mapping[str, Any] | None = None
    """`{"run_dir", "run_id", "endpoint"}` (app/gate.py); absent when None."""
    context_truncation: Mapping[str, Any] | None = None
    limited: Mapping[str, Any] | None = None
    """A gate that judged part of the golden (--limit, --no-probes), and which part."""
    sequential: Mapping[str, Any] | None = None
    """A sequential gate's looks."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    KEYS = ("status", "exit_code", "meaning", "infra", "frontend", "quantization", "suites", "coverage", "conformance",
            "logprobs_missing_modes", "tool_call_logprobs_missing_modes", "diagnosis", "reasons", "reason", "checks", "golden", "run", "context_truncation",
            "limited", "sequential")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Comparison:
        diag, checks = d.get("diagnosis"), d.get("checks")
        return cls(status=d["status"], exit_code=d["exit_code"], meaning=d["meaning"], infra=d["infra"],
                   frontend=Side.from_dict(d["frontend"]), quantization=Side.from_dict(d["quantization"]),
                   suites={k: SuiteResult.from_dict(v) for k, v in (d.get("suites") or {}).items()},
                   coverage=d.get("coverage") or {}, conformance=d.get("conformance"),
                   logprobs_missing_modes=d.get("logprobs_missing_modes"),
                   tool_call_logprobs_missing_modes=d.get("tool_call_logprobs_missing_modes"),
                   diagnosis=None if diag is None else tuple(DiagnosisEntry.from_dict(x) for x in diag),
                   reasons=d.get("reasons"), reason=d.get("reason"),
                   checks=None if checks is None else tuple(Check.from_dict(x) for x in checks),
                   golden=d.get("golden"), run=d.get("run"), context_truncation=d.get("context_truncation"),
                   limited=d.get("limited"), sequential=d.get("sequential"), extra=_extra(d, cls.KEYS))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status, "exit_code": self.exit_code, "meaning": self.meaning, "infra": self.infra,
            "frontend": self.frontend.to_dict(), "quantization": self.quantization.to_dict(),
            "suites": {k: v.to_dict() for k, v in self.suites.items()}, "coverage": self.coverage,
        }
        _put(out, "conformance", self.conformance)
        _put(out, "logprobs_missing_modes", self.logprobs_missing_modes)
        _put(out, "tool_call_logprobs_missing_modes", self.tool_call_logprobs_missing_modes)
        if self.diagnosis is not None:
            out["diagnosis"] = [x.to_dict() for x in self.diagnosis]
        if self.reasons is not None:
            out["reasons"] = list(self.reasons)
            out["reason"] = self.reason
        if self.checks is not None:
            out["checks"] = [c.to_dict() for c in self.checks]
        for key, value in (("golden", self.golden), ("run", self.run), ("context_truncation", self.context_truncation),
                           ("limited", self.limited), ("sequential", self.sequential)):
            _put(out, key, value)
        return {**out, **self.extra}

    @classmethod
    def read(cls, path: str | Path) -> Comparison:
        """A comparison.json file (ValueError when it is not JSON or not a comparison document)."""
        try:
            doc = jsonsafe.loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        if not isinstance(doc, dict) or "status" not in doc or "suites" not in doc:
            raise ValueError(f"{path}: not a comparison document")
        return cls.from_dict(doc)

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """Frontend evidence, then quantization evidence."""
        return self.frontend.evidence + self.quantization.evidence

    def to_json(self) -> dict[str, Any]:
        """comparison.json, key for key (`to_dict`): the Python API's documented name for the document."""
        return self.to_dict()

    @property
    def run_dir(self) -> Path:
        """The run directory the gate or compare recorded (`run.run_dir`; compare_run always records it)."""
        return Path((self.run or {})["run_dir"])

    @property
    def run_id(self) -> Any:
        """The run's id as the gate or compare recorded it (`run.run_id`), or None."""
        return (self.run or {}).get("run_id")

    @property
    def golden_name(self) -> Any:
        """The golden's name as the gate recorded it (`golden.name`), or None."""
        return (self.golden or {}).get("name")

    @property
    def golden_path(self) -> Any:
        """The golden's path as the gate recorded it (`golden.path`), or None."""
        return (self.golden or {}).get("path")

    @property
    def run_model(self) -> Any:
        """The model the compared run was made with, as recorded (`run.endpoint.model`), or None."""
        return ((self.run or {}).get("endpoint") or {}).get("model")

    @property
    def golden_model(self) -> Any:
        """The model the golden was recorded with, as the gate recorded it (`golden.endpoint.model`), or None."""
        return ((self.golden or {}).get("endpoint") or {}).get("model")

    def side(self, name: str) -> Side:
        """`frontend` or `quantization` by name."""
        if name == "frontend":
            return self.frontend
        if name == "quantization":
            return self.quantization
        raise ValueError(f"no side {name!r}")
