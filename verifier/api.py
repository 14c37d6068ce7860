"""The Python API: `from verifier import gate, run, compare, load_golden`. A thin layer over the specs the CLI
builds (verifier/app/collect.py, verifier/app/gate.py); each call returns the document the command would write.

    import verifier
    g = verifier.load_golden("demo-smoke")                  # a directory, or a packaged golden by name
    doc = verifier.gate("demo-smoke", base_url="http://127.0.0.1:8080/v1", model="test", out="runs/api-gate")
    print(doc["status"], doc["exit_code"])                  # the comparison.json document

Errors are `verifier.errors.UsageError` (bad input; the CLI's exit 2); nothing here prints unless `quiet=False`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class Golden:
    """A golden as loaded and validated: its header, its observations and its own samples."""

    path: Path
    """The directory it was read from."""
    header: dict[str, Any]
    """golden.json: suites and versions, modes, epochs, sampling, probes, margins."""
    observations: list[dict[str, Any]]
    """samples.jsonl: one observation per (suite, sample, epoch, mode)."""
    inputs: dict[str, list[Any]]
    """inputs.jsonl: the samples themselves (verifier.types.Sample) per suite, as the reference sent them."""

    @property
    def name(self) -> str:
        return str(self.header.get("name") or self.path.name)

    @property
    def suites(self) -> list[str]:
        return list(self.header["suites"])

    @property
    def modes(self) -> list[str]:
        return list(self.header.get("modes") or ["chat"])

    @property
    def margins(self) -> dict[str, Any]:
        return dict(self.header.get("margins") or {})


def load_golden(name: str | Path) -> Golden:
    """A golden directory, or a packaged golden by name (see `verifier list-goldens`)."""
    from verifier.golden import store as golden_mod
    from verifier.app.gate import golden_inputs, load_golden as _load

    path = golden_mod.resolve(name)
    g, obs = _load(path)
    return Golden(path=path, header=g, observations=obs, inputs=golden_inputs(path, g, obs))


def _endpoint(base_url: str, model: str, api_key_env: str | None, headers: Mapping[str, str] | None, **kw: Any):
    from verifier.app.collect import EndpointSpec

    return EndpointSpec(base_url=base_url, model=model, api_key_env=api_key_env, headers=dict(headers or {}), **kw)


def _overrides(logprobs: int | None, sampling: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(sampling or {})
    if logprobs:
        out.update({"logprobs": True, "top_logprobs": int(logprobs)})
    return out


def run(suites: str | Iterable[str], *, base_url: str, model: str, out: str | Path | None = None,
        modes: Iterable[str] = ("chat",), smoke: bool = False, limit: int | None = None, data: str | None = None,
        epochs: int = 1, logprobs: int | None = None, sampling: Mapping[str, Any] | None = None, probes: bool = False,
        api_key_env: str | None = "OPENAI_API_KEY", headers: Mapping[str, str] | None = None, quiet: bool = True,
        **endpoint: Any):
    """`verifier run`: collect and score; returns app.Collected (run_dir, summary, sent, errors).
    `endpoint` takes EndpointSpec's other fields (concurrency, timeout_s, max_retries, model_check...)."""
    from verifier.app.collect import RunSpec, collect

    names = (suites,) if isinstance(suites, str) else tuple(suites)
    spec = RunSpec(endpoint=_endpoint(base_url, model, api_key_env, headers, **endpoint),
                   suites=tuple(s for n in names for s in n.split(",") if s), modes=tuple(modes),
                   overrides=_overrides(logprobs, sampling), data=data, smoke=smoke, limit=limit, epochs=epochs,
                   out=Path(out) if out else None, probes=probes, quiet=quiet)
    return collect(spec)


def compare(run_dir: str | Path, golden: str | Path, *, infra_budget: float = 0.02, allow_subset: bool = False,
            write: bool = True) -> dict[str, Any]:
    """`verifier compare`: the comparison document (written to RUN_DIR/comparison.json unless write=False)."""
    from verifier.app.gate import compare_run

    return compare_run(Path(run_dir), golden, None, infra_budget, allow_subset=allow_subset, write=write).to_dict()


def gate(golden: str | Path, *, base_url: str, model: str, out: str | Path | None = None, suites: Iterable[str] = (),
         modes: Iterable[str] = (), margins: Iterable[str] = (), logprobs: int | None = None,
         sampling: Mapping[str, Any] | None = None, infra_budget: float = 0.02, probes: bool = False,
         api_key_env: str | None = "OPENAI_API_KEY", headers: Mapping[str, str] | None = None, reports: bool = True,
         quiet: bool = True, **endpoint: Any) -> dict[str, Any]:
    """`verifier gate`: run the golden's own samples against the endpoint and compare; returns the comparison
    document (status, exit_code, evidence, diagnosis...). With `reports`, report.html, junit.xml, summary.md and
    samples.csv go into the run directory, as the command writes them."""
    from verifier.app.gate import GateSpec, gate as _gate

    spec = GateSpec(golden=Path(golden), endpoint=_endpoint(base_url, model, api_key_env, headers, **endpoint),
                    overrides=_overrides(logprobs, sampling), out=Path(out) if out else None, infra_budget=infra_budget,
                    probes=probes, quiet=quiet, suites=tuple(suites), modes=tuple(modes), margins=tuple(margins))
    doc = _gate(spec)
    if reports:
        from verifier.app import report_files as report

        report.write_all(Path((doc.run or {})["run_dir"]), doc)  # compare_run always records it
    return doc.to_dict()
