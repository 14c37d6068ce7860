"""The Python API: `from verifier import gate, run, compare, load_golden`. A thin layer over the specs the CLI
builds (verifier/app/collect.py, verifier/app/gate.py); each call returns a typed value, whose `.to_json()` is the
document the command would write.

    import verifier
    g = verifier.load_golden("demo-smoke")                  # a directory, or a packaged golden by name
    doc = verifier.gate("demo-smoke", base_url="http://127.0.0.1:8080/v1", model="test", out="runs/api-gate")
    print(doc.status, doc.exit_code)                        # a Comparison; doc.to_json() is comparison.json
    run = verifier.run("smoke", base_url="http://127.0.0.1:8080/v1", model="test", smoke=True, modes=g.modes)
    run.summary.suites["smoke"].metrics                     # a RunResult: run_dir, summary (a RunSummary), sent, errors
    verifier.compare(run.run_dir, g, write=False)           # the loaded golden: not read again

`load_golden` returns the typed Golden (verifier/golden/model.py); `gate` and `compare` return a
`verifier.attribution.document.Comparison` (`.to_json()`: the comparison.json document); `run` returns a
`RunResult` whose `summary` is a `verifier.types.RunSummary` (`.to_json()`: summary.json).

Errors are `verifier.errors.UsageError` (bad input; the CLI's exit 2); nothing here prints unless `quiet=False`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from dataclasses import dataclass

from verifier import scrub
from verifier.app.spec import CompareSpec, GateSpec
from verifier.attribution.document import Comparison
from verifier.errors import UsageError
from verifier.golden.model import Golden as Golden, Margin
from verifier.execution.rundir import RunDir
from verifier.types import RunSummary
from verifier.surfaces.registry import REFERENCE_MODE

if TYPE_CHECKING:
    from verifier.app.collect import EndpointSpec


ENDPOINT_FIELDS = frozenset({"concurrency", "timeout_s", "max_retries", "max_response_bytes", "max_stream_events",
                             "request_deadline_s", "info_deadline_s", "model_check", "serving_adapter"})
"""EndpointSpec's other fields, which `run` and `gate` take as keyword arguments."""


@dataclass(frozen=True)
class RunResult:
    """What `run` did: the run directory it wrote, its scored summary, and what it sent."""

    run_dir: Path
    """The run directory written."""
    summary: RunSummary
    """summary.json, typed (`summary.to_json()` is the document)."""
    sent: int
    """Requests sent by this call."""
    errors: int
    """Of which ended in an infra error."""

    def to_json(self) -> dict[str, Any]:
        """The summary.json document."""
        return self.summary.to_json()


def load_golden(name: str | Path) -> Golden:
    """A golden directory, or a packaged golden by name (see `verifier list-goldens`): the typed, validated value
    (verifier.golden.model.Golden: header, observations, inputs), the one `gate` and `compare` use."""
    from verifier.app.gate import load_golden as _load

    return _load(name)


def _endpoint(base_url: str, model: str, api_key_env: str | None, headers: Mapping[str, str] | None,
              **kw: Any) -> "EndpointSpec":
    from verifier.app.collect import EndpointSpec

    return EndpointSpec(base_url=base_url, model=model, api_key_env=api_key_env, headers=dict(headers or {}), **kw)


def run(suites: str | Iterable[str], *, base_url: str, model: str, out: str | Path | None = None,
        modes: Iterable[str] = (REFERENCE_MODE,), smoke: bool = False, limit: int | None = None, data: str | None = None,
        epochs: int = 1, logprobs: int | None = None, sampling: Mapping[str, Any] | None = None, probes: bool = False,
        api_key_env: str | None = "OPENAI_API_KEY", headers: Mapping[str, str] | None = None, quiet: bool = True,
        **endpoint: Any) -> RunResult:
    """`verifier run`: collect and score; returns a RunResult (run_dir, summary as a RunSummary, sent, errors).
    `modes` defaults to the reference mode (the registry's first); to compare with a golden later, run its modes
    (`modes=verifier.load_golden(G).modes`). `endpoint` takes EndpointSpec's other fields (concurrency, timeout_s,
    max_retries, model_check...)."""
    from verifier.app.collect import RunSpec, collect
    from verifier.app.spec import api_key_env as key_env, names, sampling as _sampling

    if api_key_env is not None:
        key_env(api_key_env, "api_key_env")

    # A string or a list, read as every door reads one (`modes="chat,chat-stream"` is not seven one-letter modes)
    spec = RunSpec(endpoint=_endpoint(base_url, model, api_key_env, headers, **endpoint),
                   suites=names(suites, "suites"), modes=names(modes, "modes"),
                   overrides={**(sampling or {}), **_sampling(logprobs=logprobs)}, data=data, smoke=smoke, limit=limit, epochs=epochs,
                   out=Path(out) if out else None, probes=probes, quiet=quiet)
    with scrub.command():  # this call's secrets, as a CLI command's: they end with it, no other thread sees them
        done = collect(spec)
    summary = RunDir(done.run_dir).summary()  # summary.json as written (with the journal's digest), typed
    if summary is None:  # collect scores every run it finishes: a missing summary is a bug, not a result
        raise RuntimeError(f"{done.run_dir}: collect returned without writing summary.json")
    return RunResult(done.run_dir, summary, done.sent, done.errors)


def compare(run_dir: str | Path, golden: str | Path | Golden, *, infra_budget: float | None = None,
            allow_subset: bool = False, write: bool = True, out: str | Path | None = None, force: bool = False) -> Comparison:
    """`verifier compare`: the Comparison (its `.to_json()` written to `out`, default RUN_DIR/comparison.json, unless
    write=False). `golden`: a directory, a packaged name, or a Golden from `load_golden` (not loaded again). A gate's
    run directory is judged as its gate was asked (suites, modes, limit, probes, margins; `infra_budget` None: the
    gate's, else app/spec.DEFAULT_INFRA_BUDGET), and its comparison.json, the gate's verdict of record, is kept as the
    command keeps it: UsageError unless `out` writes elsewhere, write=False, or force=True replaces it."""
    from verifier.app.gate import compare_run, holds_gate_comparison

    if write and out is None and not force and holds_gate_comparison(Path(run_dir)):
        raise UsageError(f"{run_dir} holds the comparison its gate wrote; compare keeps it: pass out=FILE to write this "
                         "one elsewhere, write=False to only return it, or force=True to replace the gate's")
    loaded = golden if isinstance(golden, Golden) else None
    path: str | Path = loaded.path if loaded is not None else golden  # type: ignore[assignment]  # not a Golden here
    with scrub.command():
        return compare_run(Path(run_dir), CompareSpec(path, infra_budget, allow_subset=allow_subset, write=write,
                                                      out=Path(out) if out is not None else None), loaded)


def gate_spec(golden: str | Path, *, base_url: str, model: str, out: str | Path | None = None,
              suites: str | Iterable[str] | None = None, modes: str | Iterable[str] | None = None, limit: int | None = None,
              margins: Mapping[str, Any] | Iterable[Margin] | None = None, logprobs: int | None = None,
              sampling: Mapping[str, Any] | None = None, extra_body: Mapping[str, Any] | None = None,
              infra_budget: float | None = None, probes: bool | None = None, sequential: bool | None = None,
              looks: int | None = None, data: str | None = None, api_key_env: str | None = None,
              headers: Mapping[str, str] | None = None, quiet: bool = True, teacher_forcing: str | None = None,
              forced_positions: int | None = None, resend: int | None = None, **endpoint: Any) -> GateSpec:
    """The GateSpec `gate` runs for these arguments (the API's door: app/spec.py). Every argument means what the
    same flag or gate-file key means: `suites`/`modes` narrow the golden (default: all of its suites and modes),
    `limit` takes the first N samples per suite, `probes` None reruns exactly the golden's probes, True runs and
    compares them, False leaves them out; `margins` is {KEY: {"value": V, "reason": WHY}} (or Margin values), over
    the golden's; `endpoint` takes EndpointSpec's other fields (concurrency, timeout_s, max_retries...)."""
    from verifier.app.spec import GateOptions, Probes, api_key_env as key_env, margins_from_table, names, sampling as _sampling

    if margins is not None and not isinstance(margins, Mapping):
        margins = {m.key: m for m in margins}
    unknown = sorted(set(endpoint) - ENDPOINT_FIELDS)
    if unknown:
        raise UsageError(f"gate() got an unexpected keyword argument {unknown[0]!r}")
    return GateOptions(
        golden=str(golden), base_url=base_url, model=model, out=str(out) if out else None,
        suites=names(suites, "suites") if suites else None, modes=names(modes, "modes") if modes else None, limit=limit,
        margins=margins_from_table(margins, "gate", "margins") if margins else None,
        sampling={**(sampling or {}), **_sampling(logprobs=logprobs)} or None,
        extra_body=dict(extra_body) if extra_body is not None else None, infra_budget=infra_budget,
        probes=Probes.of(probes) if probes is not None else None, sequential=sequential, looks=looks, data=data,
        teacher_forcing=teacher_forcing, forced_positions=forced_positions, resend=resend,
        api_key_env=key_env(api_key_env, "api_key_env") if api_key_env is not None else None,
        headers=dict(headers) if headers else None, quiet=quiet, **endpoint).spec()


def gate(golden: str | Path, *, reports: bool = True, **options: Any) -> Comparison:
    """`verifier gate`: run the golden's own samples against the endpoint and compare; returns the Comparison
    (status, exit_code, evidence, diagnosis...; `.to_json()` is comparison.json). `options` are `gate_spec`'s (base_url and model
    required). With `reports`, report.html, junit.xml, summary.md and samples.csv go into the run directory, as
    the command writes them."""
    from verifier.app import gate as app_gate

    spec = gate_spec(golden, **options)
    with scrub.command():  # this call's secrets, as a CLI command's: they end with it, no other thread sees them
        loaded = app_gate.gate_golden(spec)  # loaded once: the gate compares with it, the report shows it
        doc = app_gate.gate(spec, loaded)
        if reports:
            from verifier.app import report_files as report

            report.write_all(doc.run_dir, doc, golden=loaded)
        return doc
