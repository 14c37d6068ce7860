"""One gate spec, four front doors: CLI flags, a gate file, a sweep's [gate] table and the API's keyword arguments.

Each door parses its own syntax once, at its edge, into `GateOptions`: typed values, None where that door said
nothing. Doors are merged as values (`flags.over(file).over(env)`: the first that set a field wins) and
`GateOptions.spec()` fills the defaults and builds the one `GateSpec` the application runs. Nothing is ever
formatted into flag strings and parsed again, so an option means the same whichever door it came through
(tests/test_gate_spec_doors.py sends each option through each door and compares the specs).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping

from verifier.app.collect import EndpointSpec
from verifier.errors import UsageError
from verifier.golden.model import Margin
from verifier.types import DEFAULT_INFRA_BUDGET as DEFAULT_INFRA_BUDGET
from verifier.execution.resend import DEFAULT_SAMPLES as DEFAULT_RESEND, MAX_SAMPLES as MAX_RESEND


def check_resend(value: Any, where: str) -> None:
    """The resend step's requests per suite from any door: an integer from 0 (off) to MAX_RESEND, else a UsageError."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RESEND):
        raise UsageError(f"{where} {value!r}: an integer from 0 (no resend step) to {MAX_RESEND}")


class Probes(StrEnum):
    """Which parameter-contract probes a gate runs. One meaning from every door."""

    GOLDEN = "golden"
    """Unset (the default): rerun exactly what the golden holds, its probes when it has them, none when it has none."""
    ON = "on"
    """Run the probes and compare them (`--probes`, `probes = true`): a golden without probe results is an error."""
    OFF = "off"
    """Leave the golden's probes out (`--no-probes`, `probes = false`): samples only, no probes.json."""

    @staticmethod
    def of(value: "bool | str | Probes | None") -> "Probes":
        """True / False / None (the API's and the files' booleans), or a name."""
        if value is None:
            return Probes.GOLDEN
        if isinstance(value, bool):
            return Probes.ON if value else Probes.OFF
        try:
            return Probes(value)
        except ValueError:
            raise UsageError(f"probes must be true, false or one of {', '.join(p.value for p in Probes)}; got {value!r}") from None


@dataclass(frozen=True)
class CompareSpec:
    """Compare a run directory with a golden: what `compare`, `report`, `matrix`, a gate's looks and the API ask of
    app/gate.compare_run, built once at each door (cli/compare.spec_from_flags, cli/matrix, the report's
    "compare if missing" step, api.compare), each option's default written here once."""

    golden: str | Path
    """Golden directory, or the name of a packaged golden (must have margins)."""
    infra_budget: float | None = None
    """Infra error rate above which the run is incomplete; None: the budget the run's gate recorded (GateRequest),
    else DEFAULT_INFRA_BUDGET (`budget`)."""
    allow_subset: bool = False
    """Judge a subset of the golden: samples never run are not counted missing."""
    out: Path | None = None
    """Where comparison.json goes (None: RUN_DIR/comparison.json)."""
    write: bool = True
    """Write the document (False: only return it; the matrix, the report and a gate's looks never write)."""
    as_gated: bool = True
    """A gate's run directory is judged as that gate judged it (its recorded narrowing and budget); a gate itself,
    which narrowed already, says False."""

    def budget(self, recorded: float | None) -> float:
        """The infra budget this comparison uses: the caller's, else the gate's `recorded` one, else the default."""
        if self.infra_budget is not None:
            return self.infra_budget
        return recorded if recorded is not None else DEFAULT_INFRA_BUDGET


@dataclass(frozen=True)
class GateSpec:
    """Run the golden's samples against an endpoint and compare."""

    golden: Path
    """Golden directory, or the name of a packaged golden (must have margins)."""
    endpoint: EndpointSpec
    """The candidate endpoint."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """User sampling overrides over the golden's."""
    extra_body: Mapping[str, Any] | None = None
    """Request body extras; None means the golden's."""
    data: str | None = None
    """Dataset path, when the golden's suites need one."""
    out: Path | None = None
    """Run directory (default runs/<timestamp>-gate)."""
    infra_budget: float = DEFAULT_INFRA_BUDGET
    """Infra error rate above which the run is incomplete."""
    sequential: bool = False
    """Send in batches and stop once a regression is decided."""
    looks: int = 5
    """With sequential: number of batches."""
    probes: Probes = Probes.GOLDEN
    """Which probes run (see Probes)."""
    quiet: bool = False
    """No progress on stderr."""
    suites: tuple[str, ...] = ()
    """Gate only these of the golden's suites (empty: all)."""
    modes: tuple[str, ...] = ()
    """Gate only these of the golden's wire modes (empty: all)."""
    margins: tuple[Margin, ...] = ()
    """Margins over the golden's, each recorded with its reason (source `gate`)."""
    limit: int | None = None
    """Gate only the first N of each suite's samples, in the order the reference sent them (a conversation whole)."""
    force: bool = False
    """Write the run into `out` even when it is a golden directory (`--force`)."""
    teacher_forcing: str = "auto"
    """The teacher-forcing pass (execution/teacher_forcing.CHOICES): detect the best method, `off`, or one method."""
    forced_positions: int | None = None
    """Prefill positions per sample (None: teacher_forcing.DEFAULT_POSITIONS)."""
    resend: int = DEFAULT_RESEND
    """The resend step (execution/resend.py): this many greedy requests per suite sent again, alone, after the run, where
    the golden's records are greedy with logprobs; 0: none."""


@dataclass(frozen=True)
class CalibrateSpec:
    """Store the run-to-run spread of k >= 3 reference runs as the golden's margins."""

    golden: Path
    """Golden directory to update."""
    runs: tuple[Path, ...] = ()
    """Existing reference rerun directories."""
    endpoint: EndpointSpec | None = None
    """With an endpoint: make `k` new reruns against it."""
    k: int = 2
    """How many reruns to make (the golden itself counts as one)."""
    out_prefix: str = str(Path("runs") / "calibrate")
    """Run directory prefix for new reruns."""
    manual: tuple[Margin, ...] = ()
    """Margins set by hand, recorded with their reason (source `manual`)."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """User sampling overrides for new reruns."""
    extra_body: Mapping[str, Any] | None = None
    """Request body extras for new reruns; None means the golden's."""
    data: str | None = None
    """Dataset path for new reruns."""
    quiet: bool = False
    """No progress on stderr."""
    teacher_forcing: str = "on"
    """New reruns' teacher-forcing pass (as GateSpec's, but measured whatever margins the golden holds): its figures
    become the `<suite>/teacher_forced_kl` margins."""
    forced_positions: int | None = None
    resend: int = DEFAULT_RESEND
    """New reruns' resend step (as GateSpec's): what they resend calibrates `repeats_disagree` as a gate reads it."""


# ------------------------------------------------------------------------------------------------ edge parsers

MARGIN_FLAG = re.compile(r"^(?P<key>[\w:./-]+)=(?P<value>[0-9.eE+-]+):(?P<reason>.+)$")


def margin(key: str, value: Any, reason: Any, source: str, where: str) -> Margin:
    """One margin from any door: a finite number >= 0 and a non-empty reason, else a UsageError naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UsageError(f"{where}: margin {key!r} must be a finite number >= 0, got {value!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise UsageError(f"{where}: margin {key!r} needs a reason (why this gate may move that far)")
    if not re.fullmatch(r"[\w:./-]{1,256}", key):
        raise UsageError(f"{where}: margin key {key[:80]!r} must look like suite/metric or suite/signal:name")
    return Margin(key, float(value), reason.strip(), source)


def margin_from_flag(text: str, source: str, flag: str = "--margin") -> Margin:
    """`KEY=VALUE:reason`, the command line's spelling of a margin."""
    m = MARGIN_FLAG.match(text)
    if not m:
        raise UsageError(f"{flag} must look like KEY=VALUE:reason, got {text!r}")
    try:
        value = float(m["value"])
    except ValueError:
        raise UsageError(f"{flag} must look like KEY=VALUE:reason, got {text!r}") from None
    return margin(m["key"], value, m["reason"], source, flag)


def margins_from_table(table: Mapping[str, Any], source: str, where: str) -> tuple[Margin, ...]:
    """`{"suite/metric": {value = 0.05, reason = "why"}}`, the files' and the API's spelling."""
    out = []
    for key, m in table.items():
        if isinstance(m, Margin):
            out.append(dataclasses.replace(m, key=key, source=source))
            continue
        if not isinstance(m, Mapping) or set(m) != {"value", "reason"}:
            raise UsageError(f"{where}: margin {key!r} must be {{ value = NUMBER, reason = \"why\" }}")
        out.append(margin(key, m["value"], m["reason"], source, where))
    return tuple(out)


_API_KEY_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEY_PREFIXES = ("sk-", "sk_", "hf_", "ghp_", "gho_", "github_pat_", "xoxb-", "xoxp-", "AKIA", "AIza", "glpat-", "pk-", "rk-")


def looks_like_a_key(value: str) -> bool:
    """A value given where the *name* of an environment variable belongs that is more likely the key itself:
    a known key prefix, or a long token mixing letters and digits with high entropy, unlike NAMES_LIKE_THIS."""
    if value.startswith(_KEY_PREFIXES) or value.lower().startswith(("sk-", "hf_", "bearer ")):
        return True
    lower, upper, digits = (sum(c.islower() for c in value), sum(c.isupper() for c in value), sum(c.isdigit() for c in value))
    if len(value) >= 16 and lower and upper and digits:
        return True  # a mixed-case token with digits (a 22-character key was taken for a name); names are UPPER_SNAKE
    if len(value) < 24:
        return False
    counts = {c: value.count(c) for c in set(value)}
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return bool(lower and upper and digits) or (digits >= 6 and entropy > 3.5) or entropy > 4.2


def api_key_env(value: Any, where: str) -> str:
    """The name of the variable holding the key; a value that looks like the key itself is refused, never kept."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} must be the name of an environment variable")
    if looks_like_a_key(value):
        raise UsageError(f"{where}: that looks like a key, not a variable name; put the key in an environment "
                         "variable and give its name (e.g. CANDIDATE_API_KEY)")
    if not _API_KEY_ENV.match(value):  # the value is not repeated: it may be a key after all
        raise UsageError(f"{where} must be the name of an environment variable (letters, digits, _; e.g. CANDIDATE_API_KEY), "
                         "not the key; the value given is not repeated here")
    return value


def names(value: Any, where: str) -> tuple[str, ...]:
    """A list of names (files, API) or a comma-separated string (flags, API): a tuple of stripped, non-empty items,
    each named once, in order. A list's items are split at commas as a flag's value is, so every door reads a list
    the same way: `modes = ["chat,chat-stream"]` is `--mode chat,chat-stream` is `--mode chat --mode chat-stream`."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = tuple(dict.fromkeys(x.strip() for v in value for x in v.split(",") if x.strip()))
        if items:
            return items
    raise UsageError(f"{where} must be a list of names")


def sampling(temperature: float | None = None, top_p: float | None = None, max_tokens: int | None = None,
             seed: int | None = None, logprobs: int | None = None) -> dict[str, Any]:
    """The sampling overrides a door set (unset: the golden's): what `--temperature ... --logprobs N` mean."""
    out: dict[str, Any] = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens),
                                             ("seed", seed)) if v is not None}
    if logprobs:
        out.update({"logprobs": True, "top_logprobs": int(logprobs)})
    return out


# ------------------------------------------------------------------------------------------------- the merge

@dataclass(frozen=True)
class GateOptions:
    """A gate as one front door gave it: every field None where that door said nothing.

    `a.over(b)` takes each field from `a` where set, else from `b` (flags over the file over the environment);
    sampling overrides and margins merge per key. `spec()` fills the defaults and builds the GateSpec."""

    golden: str | None = None
    suites: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    limit: int | None = None
    data: str | None = None
    margins: tuple[Margin, ...] | None = None
    probes: Probes | None = None
    sequential: bool | None = None
    looks: int | None = None
    teacher_forcing: str | None = None
    forced_positions: int | None = None
    resend: int | None = None
    infra_budget: float | None = None
    allow_inconclusive: bool | None = None
    quiet: bool | None = None
    # endpoint
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    headers: Mapping[str, str] | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    max_retries: int | None = None
    max_response_bytes: int | None = None
    max_stream_events: int | None = None
    request_deadline_s: float | None = None
    info_deadline_s: float | None = None
    model_check: bool | None = None
    serving_adapter: str | None = None
    # request
    sampling: Mapping[str, Any] | None = None
    extra_body: Mapping[str, Any] | None = None
    # outputs (the CLI's; the API writes the report files into the run directory)
    out: str | None = None
    report: str | None = None
    junit: str | None = None
    markdown: str | None = None
    matrix: str | None = None

    def over(self, other: "GateOptions") -> "GateOptions":
        """These options where set, `other`'s elsewhere."""
        merged: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "sampling" and mine is not None and theirs is not None:
                merged[f.name] = {**theirs, **mine}
            elif f.name == "margins" and mine is not None and theirs is not None:
                keys = {m.key for m in mine}
                merged[f.name] = tuple(m for m in theirs if m.key not in keys) + tuple(mine)
            else:
                merged[f.name] = mine if mine is not None else theirs
        return GateOptions(**merged)

    def endpoint(self) -> EndpointSpec:
        """The endpoint these options name, EndpointSpec's defaults elsewhere; seconds are floats from every door."""
        d = EndpointSpec(base_url=None, model=None)

        def pick(mine: Any, default: Any) -> Any:
            return default if mine is None else mine

        return EndpointSpec(
            base_url=self.base_url, model=self.model, api_key_env=pick(self.api_key_env, d.api_key_env),
            headers=dict(self.headers or {}), concurrency=pick(self.concurrency, d.concurrency),
            timeout_s=float(pick(self.timeout_s, d.timeout_s)), max_retries=pick(self.max_retries, d.max_retries),
            max_response_bytes=pick(self.max_response_bytes, d.max_response_bytes),
            max_stream_events=pick(self.max_stream_events, d.max_stream_events),
            request_deadline_s=None if self.request_deadline_s is None else float(self.request_deadline_s),
            info_deadline_s=float(pick(self.info_deadline_s, d.info_deadline_s)),
            model_check=pick(self.model_check, d.model_check), serving_adapter=self.serving_adapter)

    def spec(self, endpoint_required: bool = True) -> GateSpec:
        """The GateSpec, defaults filled; the golden, base URL and model are required from some door (the endpoint
        not when `endpoint_required` is False: a sweep checks its [gate] table against the golden before any engine
        has started)."""
        required = (("golden", self.golden), ("base_url", self.base_url), ("model", self.model))
        missing = [f for f, v in required[: 3 if endpoint_required else 1] if not v]
        if missing:
            flags = {"golden": "--golden", "base_url": "--base-url", "model": "--model"}
            raise UsageError(f"gate needs {', '.join(flags[m] for m in missing)} (on the command line, in the gate file "
                             "or as the API's arguments)")
        assert self.golden is not None
        from verifier.execution.teacher_forcing import CHOICES

        if self.teacher_forcing is not None and self.teacher_forcing not in CHOICES:
            raise UsageError(f"teacher_forcing {self.teacher_forcing!r}: one of {', '.join(CHOICES)}")
        if self.forced_positions is not None and (not isinstance(self.forced_positions, int) or self.forced_positions < 1):
            raise UsageError(f"forced_positions {self.forced_positions!r}: a positive integer")
        check_resend(self.resend, "resend")
        d = GateSpec(golden=Path(self.golden), endpoint=self.endpoint())
        return GateSpec(
            golden=Path(self.golden), endpoint=self.endpoint(), overrides=dict(self.sampling or {}),
            extra_body=dict(self.extra_body) if self.extra_body is not None else None, data=self.data,
            out=Path(self.out) if self.out else None,
            infra_budget=self.infra_budget if self.infra_budget is not None else d.infra_budget,
            sequential=bool(self.sequential), looks=self.looks if self.looks is not None else d.looks,
            probes=self.probes or Probes.GOLDEN, quiet=bool(self.quiet), suites=self.suites or (),
            modes=self.modes or (), margins=self.margins or (), limit=self.limit,
            teacher_forcing=self.teacher_forcing or d.teacher_forcing, forced_positions=self.forced_positions,
            resend=d.resend if self.resend is None else self.resend)
