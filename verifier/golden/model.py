"""The golden as a typed value: `Golden` (header, observations, inputs), built once by `store.load`, never mutated.

`store.load` is the trust boundary: it checks golden.json, samples.jsonl and inputs.jsonl against the schema
(schema.py: every count, length and size bounded) and builds these values; everything above reads typed fields,
never the JSON. `Golden.narrow` is the only way to see less of a golden (suites, modes, first N samples, no probes,
other margins), and it returns a new value.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from verifier.surfaces.registry import REFERENCE_MODE
from verifier.types import Observation, Sample, owner_ids


@dataclass(frozen=True)
class Margin:
    """How far a metric or signal may move from the golden's before it counts as a regression, and why.

    `source` says who set it: `calibrate` (reference reruns), `manual` (calibrate --margin), `gate` (a gate's own
    margin over the golden's). `provenance` keeps what calibration recorded (method, k, runs, created)."""

    key: str
    """`suite/metric`, `suite/signal:NAME`, `suite/drift`, `suite/divergence`."""
    value: float
    reason: str | None = None
    source: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    bare: bool = False
    """Written in golden.json as a bare number (goldens made by hand); kept so a rewrite changes nothing else."""

    @staticmethod
    def from_json(key: str, raw: Any) -> "Margin":
        """One `margins` entry of golden.json (a number, or {value, source, reason, ...}), already schema-checked."""
        if isinstance(raw, Mapping):
            rest = {k: v for k, v in raw.items() if k not in ("value", "reason", "source")}
            return Margin(key, float(raw["value"]), raw.get("reason"), raw.get("source"), MappingProxyType(rest))
        return Margin(key, float(raw), bare=True)

    @property
    def reference_per_sample(self) -> Any:
        """A teacher-forced margin's per-sample distances of the reference's reruns (calibration's record), or None."""
        return self.provenance.get("reference_per_sample")

    def to_json(self) -> Any:
        if self.bare and self.reason is None and self.source is None and not self.provenance:
            return self.value
        out: dict[str, Any] = {"value": self.value}
        if self.source is not None:
            out["source"] = self.source
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(self.provenance)
        return out


def margins_from_json(raw: Mapping[str, Any] | None) -> dict[str, Margin]:
    return {k: Margin.from_json(k, v) for k, v in (raw or {}).items()}


@dataclass(frozen=True)
class SuiteInfo:
    """What the reference recorded of one suite."""

    version: str
    samples: int | None = None
    requests: int | None = None
    dataset_sha256: str | None = None
    document: Mapping[str, Any] = field(default_factory=dict)
    """The entry as blessed (written back unchanged)."""


@dataclass(frozen=True)
class Source:
    """The reference run the golden was blessed from."""

    run_id: str | None
    endpoint: Mapping[str, Any] | None
    sampling: Mapping[str, Any] | None
    extra_body: Mapping[str, Any] | None
    server_info: Mapping[str, Any] | None
    document: Mapping[str, Any] = field(default_factory=dict)
    """The whole `source` object (harness, start and end times...), as blessed."""

    @property
    def model(self) -> str | None:
        m = (self.endpoint or {}).get("model")
        return m if isinstance(m, str) else None

    @property
    def serving_adapter(self) -> str | None:
        """The serving adapter the reference was recorded behind (run.json's `endpoint.serving_adapter`, carried by
        bless; wire/serving_adapters.py), or None: served as it is."""
        a = (self.endpoint or {}).get("serving_adapter")
        return a if isinstance(a, str) else None

    @property
    def harness(self) -> Any:
        """The harness that made the reference run (`source.harness`), as blessed."""
        return self.document.get("harness")

    @property
    def started(self) -> Any:
        return self.document.get("started")

    @property
    def finished(self) -> Any:
        return self.document.get("finished")

    @property
    def sampling_overrides(self) -> dict[str, Any]:
        """The sampling the reference's user set over the suites' defaults (a gate starts from these)."""
        return dict((self.sampling or {}).get("overrides") or {})


@dataclass(frozen=True)
class GoldenHeader:
    """golden.json as typed fields."""

    name: str | None
    suites: Mapping[str, SuiteInfo]
    modes: tuple[str, ...]
    epochs: int
    source: Source
    smoke: bool
    """The reference ran each suite's smoke subset (selection.smoke)."""
    summary: Mapping[str, Any]
    margins: Mapping[str, Margin]
    probes: Mapping[str, Mapping[str, Any]] | None
    """Probe results keyed `<probe>@<surface>` (bare names: chat), as execution/probes.judge reads them."""
    context_probe: Mapping[str, Any] | None
    document: Mapping[str, Any] = field(default_factory=dict)
    """golden.json as read (for keys this verifier does not know: kept on a rewrite)."""

    @property
    def context_lengths(self) -> tuple[int, ...] | None:
        return tuple(self.context_probe["lengths"]) if self.context_probe else None

    def suite_summary(self, suite: str) -> Mapping[str, Any]:
        return ((self.summary.get("suites") or {}).get(suite)) or {}

    @staticmethod
    def from_json(g: Mapping[str, Any]) -> "GoldenHeader":
        """A schema-checked golden.json (store.load checks it first)."""
        src = g.get("source") or {}
        return GoldenHeader(
            name=g.get("name"),
            suites={k: SuiteInfo(v.get("version", ""), v.get("samples"), v.get("requests"), v.get("dataset_sha256"), v)
                    for k, v in (g.get("suites") or {}).items()},
            modes=tuple(g.get("modes") or (REFERENCE_MODE,)), epochs=int(g.get("epochs", 1)),
            source=Source(src.get("run_id"), src.get("endpoint"), src.get("sampling"), src.get("extra_body"),
                          src.get("server_info"), src),
            smoke=bool((g.get("selection") or {}).get("smoke", False)), summary=g.get("summary") or {},
            margins=margins_from_json(g.get("margins")), probes=g.get("probes") or None,
            context_probe=g.get("context_probe") or None, document=g)

    def to_json(self) -> dict[str, Any]:
        """golden.json for this header: the blessed document with the typed fields written back (so a narrowed or
        recalibrated header reads as what it is)."""
        out = dict(self.document)
        out["suites"] = {k: dict(v.document) or {"version": v.version} for k, v in self.suites.items()}
        if "modes" in out or self.modes != (REFERENCE_MODE,):
            out["modes"] = list(self.modes)
        if self.margins or out.get("margins"):
            out["margins"] = {k: m.to_json() for k, m in self.margins.items()}
        if self.probes:
            out["probes"] = dict(self.probes)
        elif out.get("probes"):  # left out by a narrowing
            out["probes"] = None
        return out


@dataclass(frozen=True)
class Golden:
    """A golden as loaded and validated: its header, its observations and its own samples."""

    path: Path
    """The directory it was read from."""
    header: GoldenHeader
    observations: tuple[Observation, ...]
    """samples.jsonl: one observation per (suite, sample, epoch, mode)."""
    inputs: Mapping[str, tuple[Sample, ...]]
    """inputs.jsonl: the samples themselves per suite, in the order the reference sent them."""
    narrowed: Mapping[str, Any] | None = None
    """Set by `narrow` when it left part of the golden out: what comparison.json's `limited` reports."""
    whole_records: int | None = None
    """Set by `store.load(limit=)`, which keeps only the first samples of each suite: the records of the whole golden."""

    @property
    def name(self) -> str:
        return self.header.name or self.path.name

    @property
    def suites(self) -> tuple[str, ...]:
        return tuple(self.header.suites)

    @property
    def modes(self) -> tuple[str, ...]:
        return self.header.modes

    @property
    def margins(self) -> Mapping[str, Margin]:
        return self.header.margins

    def records(self) -> int:
        """Distinct (suite, sample) records observed."""
        return len({(o.suite, o.sample_id) for o in self.observations})

    def rows(self) -> list[dict[str, Any]]:
        """The observations as samples.jsonl rows."""
        return [o.to_dict() for o in self.observations]

    def narrow(self, *, suites: Iterable[str] = (), modes: Iterable[str] = (), limit: int | None = None,
               probes: bool = True, margins: Iterable[Margin] = ()) -> "Golden":
        """The golden as a gate sees it: only these suites and modes (empty: all), the first `limit` samples of each
        suite in the order the reference sent them (a multi-turn conversation whole), without its probes when
        `probes` is False, and `margins` over its own. Pure: a new value; unknown names are a ValueError naming them."""
        from verifier.errors import did_you_mean

        suites, modes, margins = tuple(suites), tuple(modes), tuple(margins)
        for what, chosen, have in (("suite", suites, self.suites), ("mode", modes, self.modes)):
            missing = [x for x in chosen if x not in have]
            if missing:
                raise ValueError(f"golden {self.path} has no {what} {missing[0]!r}; {did_you_mean(missing[0], list(have))}"
                                 f"it has: {', '.join(have)}")
        unknown = [m.key for m in margins if m.key not in self.margins]
        if unknown:
            raise ValueError(f"golden {self.path} has no margin {unknown[0]!r}; known: {', '.join(sorted(self.margins))}")
        if not (suites or modes or limit or not probes or margins):
            return self
        keep_suites = set(suites or self.suites)
        keep_modes = set(modes or self.modes)
        inputs = {k: v for k, v in self.inputs.items() if k in keep_suites}
        obs = [o for o in self.observations if o.suite in keep_suites and o.mode in keep_modes]
        if limit:
            inputs = {k: v[:limit] for k, v in inputs.items()}
            keep = {(k, x.id) for k, v in inputs.items() for x in v}
            obs = [o for o in obs if any((o.suite, sid) in keep for sid in owner_ids(o.sample_id))]
        h = self.header
        header = dataclasses.replace(
            h, suites={k: v for k, v in h.suites.items() if k in keep_suites},
            modes=tuple(m for m in h.modes if m in keep_modes), probes=h.probes if probes else None,
            margins={**h.margins, **{m.key: m for m in margins}})
        narrowed = None
        if limit or (not probes and h.probes):  # a reviewer must see that this gate judged part of the golden, and which part
            # (leaving out probes a golden never had leaves nothing out)
            narrowed = {"limit": limit, "golden_records": self.whole_records or self.records(),
                        "gated_records": len({(o.suite, o.sample_id) for o in obs}),
                        "probes_left_out": bool(not probes and h.probes)}
        return dataclasses.replace(self, header=header, observations=tuple(obs), inputs=inputs, narrowed=narrowed)


# ---------------------------------------------------------------- what a golden's numbers can plausibly be

RATE_KINDS = ("signal:", "divergence")
"""Margin keys (after `suite/`) whose value is a change in a rate (events / samples): never more than 1."""
MAX_DRIFT_MARGIN = 1e4
"""A drift margin (mean |delta logprob| per token) past any two logprobs a server returns: servers report an
impossible token as -9999 (vLLM) or -inf (refused as non-finite), so two reruns of one reference differ by less."""
FLOOR = 0.05
"""A suite whose every quality metric the reference scored at most this (1 in 20 right, or none) is at the floor:
a broken endpoint scores as much, so a quality regression cannot show."""


def margin_bound(key: str, metric_values: Mapping[str, tuple[float, float]]) -> tuple[float, str] | None:
    """The largest value a margin of `key` can take, with why; None when nothing bounds it here. `metric_values`:
    (min, max) of each `suite/metric`'s values in the golden's rows. A change in a rate, or in the mean of a metric
    whose recorded values all lie in [0, 1] (every built-in score), is at most 1, whatever calibration measured:
    reruns of the reference measure differences of such means, and no two means in [0, 1] differ by more. A metric
    recorded outside [0, 1] (an imported lm-eval metric) moves at most by twice its largest recorded magnitude."""
    suite, _, rest = key.partition("/")
    if rest.startswith(RATE_KINDS):
        return 1.0, "a change in a rate is at most 1"
    if rest == "drift":
        return MAX_DRIFT_MARGIN, f"no two logprobs a server returns differ by more than {MAX_DRIFT_MARGIN:g}"
    span = metric_values.get(key)
    if span is None:
        return None
    lo, hi = span
    if 0.0 <= lo and hi <= 1.0:
        return 1.0, "its recorded values lie in [0, 1], so its mean moves by at most 1"
    top = 2 * max(abs(lo), abs(hi))
    return top, f"its recorded values lie in [{lo:g}, {hi:g}], so its mean moves by at most {top:g}"


def add_metric_spans(spans: dict[str, tuple[float, float]], suite: Any, metrics: Any) -> None:
    """Widen `spans` ({`suite/metric`: (min, max)}) by one golden row's metrics (finite numbers only)."""
    if not isinstance(suite, str) or not isinstance(metrics, Mapping):
        return
    for m, v in metrics.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            k = f"{suite}/{m}"
            lo, hi = spans.get(k, (v, v))
            spans[k] = (min(lo, v), max(hi, v))


def implausible_margin(header: GoldenHeader, spans: Mapping[str, tuple[float, float]]) -> str | None:
    """The first margin past what any calibration of this golden could give (`margin_bound`), as the field and
    why; None when every margin is within its bound. `spans`: every golden row's metric spans (add_metric_spans),
    rows past a `--limit` included."""
    for key, margin in header.margins.items():
        runs = margin.provenance.get("k")
        if margin.source == "calibrate" and runs is not None and (not isinstance(runs, int) or isinstance(runs, bool) or runs < 2):
            return (f"$.margins[{key!r}].k: {runs!r} is not a number of runs calibration can measure a spread from "
                    "(at least 2); recalibrate the golden (verifier calibrate)")
        bound = margin_bound(key, spans)
        if bound is not None and margin.value > bound[0]:
            how = f" (provenance {margin.source})" if margin.source else ""
            return (f"$.margins[{key!r}]: {margin.value:g}{how} is more than this margin can be ({bound[0]:g}: "
                    f"{bound[1]}); recalibrate the golden (verifier calibrate)")
    return None


def quality_at_floor(summary: Mapping[str, Any]) -> dict[str, str]:
    """{suite: what its quality metrics are} for each suite whose every quality metric the run (or golden) summary
    holds at FLOOR or below; suites without metric values are not judged here."""
    out: dict[str, str] = {}
    for suite, s in ((summary or {}).get("suites") or {}).items():
        metrics = {m: v for m, v in ((s or {}).get("metrics") or {}).items()
                   if isinstance(v, Mapping) and isinstance(v.get("value"), (int, float)) and not isinstance(v.get("value"), bool)}
        if metrics and all(v["value"] <= FLOOR for v in metrics.values()):
            out[suite] = ", ".join(f"{m} {v['value']:g}" + (f" (n={v['n']})" if v.get("n") is not None else "")
                                   for m, v in sorted(metrics.items()))
    return out


def floor_warning(suite: str, what: str) -> str:
    return (f"the reference's own quality on {suite} is at the floor ({what}; at most {FLOOR:g}): a broken endpoint "
            f"scores as much, so a quality regression on {suite} cannot show")
