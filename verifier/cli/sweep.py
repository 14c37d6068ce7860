"""`verifier sweep SWEEP.toml`: gate and speed-probe each serving configuration; one table and one page.

The sweep file is validated by a JSON Schema (SCHEMA, versioned by `format`) before anything starts: unknown
keys and wrong types exit 2 naming the key. Engine configurations become launchers over the test bed's engines
here, at the top floor, so the application (verifier/app/sweep.py) never imports the test bed.

    verifier sweep sweep.toml [--only NAME,...] [--out DIR]       # all configurations, or one shard of them
    verifier sweep --combine DIR [DIR ...] --out DIR              # join shards (configuration directories)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from verifier.execution.teacher_forcing import CHOICES as FORCING
from verifier.execution.resend import MAX_SAMPLES as MAX_RESEND
from verifier.wire.serving_adapters import ADAPTERS
from .gatefile import SamplingTable
from .types import CommaList, SpacedList

if TYPE_CHECKING:
    from verifier.app.spec import GateOptions
    from verifier.app.sweep import Launcher, SweepSpec
    from verifier.execution.perf import PerfSpec
    from verifier.report.sweep import SweepTable

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_LIST_INT = {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 1_000_000}, "minItems": 1, "maxItems": 16}
_OPTIONS = {  # llama.cpp engine options: the engines.Server keyword arguments a sweep may set
    "type": "object", "additionalProperties": False,
    "properties": {"slots": {"type": "integer", "minimum": 1, "maximum": 256},
                   "ctx": {"type": "integer", "minimum": 64, "maximum": 1_048_576},
                   "kv_cache": {"type": "string"}, "quant": {"type": "string"}, "template": {"type": "string"},
                   "spec": {"type": "string"}, "cache_prompt": {"type": "boolean"},
                   "threads": {"type": "integer", "minimum": 1, "maximum": 1024},
                   "seed": {"type": "integer"}},
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "required": ["golden", "config"],
    "properties": {
        "format": {"const": 1},
        "golden": {"type": "string", "minLength": 1},
        "out": {"type": "string", "minLength": 1},
        "gate": {"type": "object", "additionalProperties": False, "properties": {
            "suites": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
            "modes": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
            "probes": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
            "sequential": {"type": "boolean"},
            "looks": {"type": "integer", "minimum": 1, "maximum": 100},
            "teacher_forcing": {"enum": list(FORCING)},
            "forced_positions": {"type": "integer", "minimum": 1, "maximum": 512},
            "resend": {"type": "integer", "minimum": 0, "maximum": MAX_RESEND},
            "margins": {"type": "object", "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["value", "reason"],
                "properties": {"value": {"type": "number", "minimum": 0}, "reason": {"type": "string", "pattern": r"\S"}}}},
            "sampling": {"type": "object", "additionalProperties": False, "properties": {
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "max_tokens": {"type": "integer", "minimum": 1},
                "seed": {"type": "integer"},
                "logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                "extra_body": {"type": "object"}}},
            "infra_budget": {"type": "number", "minimum": 0, "maximum": 1},
            "concurrency": {"type": "integer", "minimum": 1, "maximum": 4096},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
            "max_retries": {"type": "integer", "minimum": 0, "maximum": 100},
            "serving_adapter": {"enum": sorted(ADAPTERS)},  # --serving-adapter: the rewrite the golden was recorded behind
            "data": {"type": "string", "minLength": 1}}},
        "perf": {"type": "object", "additionalProperties": False, "properties": {
            "concurrency": _LIST_INT, "prompt_tokens": _LIST_INT,
            "output_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            "requests": {"type": "integer", "minimum": 0, "maximum": 100_000},
            "repeats": {"type": "integer", "minimum": 1, "maximum": 100},
            "warmup": {"type": "integer", "minimum": 0, "maximum": 1000},
            "ignore_eos": {"type": "boolean"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400}}},
        "config": {"type": "array", "minItems": 1, "maxItems": 256, "items": {
            "type": "object", "additionalProperties": False, "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": NAME},
                "engine": {"enum": ["llama", "vllm"]},
                "model": {"type": "string", "minLength": 1},
                "base_url": {"type": "string", "minLength": 1},
                "api_key_env": {"type": "string", "minLength": 1, "maxLength": 128},  # form: app/spec.api_key_env
                "options": _OPTIONS,
                "args": {"type": "array", "items": {"type": "string"}, "maxItems": 256},
                "lossless": {"type": "boolean"}},
            "oneOf": [{"required": ["engine", "model"], "not": {"required": ["base_url"]}},
                      {"required": ["base_url", "model"], "not": {"anyOf": [{"required": ["engine"]}, {"required": ["options"]}, {"required": ["args"]}]}}]}},
    },
}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("sweep", help="gate and speed-probe each serving configuration of a sweep file; one table and one page")
    p.add_argument("file", nargs="?", metavar="SWEEP.toml", help="the sweep file (see docs/sweeps.md)")
    p.add_argument("--only", action=CommaList, help="comma-separated configuration names: run only these (one CI job each)")
    p.add_argument("--out", help="sweep directory (default: the file's `out`, else runs/<timestamp>-sweep)")
    p.add_argument("--combine", nargs="+", action=SpacedList, metavar="DIR", help="join configuration directories from several jobs into --out (given once: --combine D E)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=handle)


# ----------------------------------------------------------------------------------- the file as typed tables
# Built once by `SweepFile.from_dict` right after SCHEMA has checked every key's type and range: the schema stays the
# validator, these classes give its tables names, so nothing past the door indexes the TOML by string key. A field is
# None where the file said nothing; tests/test_sweep.py checks that the fields are the schema's keys.

@dataclass(frozen=True)
class SweepGateTable:
    """`[gate]`: what every configuration's gate shares."""

    suites: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    probes: bool | None = None
    limit: int | None = None
    sequential: bool | None = None
    looks: int | None = None
    teacher_forcing: str | None = None
    forced_positions: int | None = None
    resend: int | None = None
    margins: Mapping[str, Mapping[str, Any]] | None = None
    """`"suite/metric" = { value, reason }` as written: `app/spec.margins_from_table` makes them Margins."""
    sampling: SamplingTable = SamplingTable()
    infra_budget: float | None = None
    concurrency: int | None = None
    timeout: float | None = None
    max_retries: int | None = None
    serving_adapter: str | None = None
    data: str | None = None

    @classmethod
    def from_dict(cls, g: Mapping[str, Any]) -> SweepGateTable:
        suites, modes = g.get("suites"), g.get("modes")
        return cls(suites=tuple(suites) if suites is not None else None, modes=tuple(modes) if modes is not None else None,
                   probes=g.get("probes"), limit=g.get("limit"), sequential=g.get("sequential"), looks=g.get("looks"),
                   teacher_forcing=g.get("teacher_forcing"), forced_positions=g.get("forced_positions"),
                   resend=g.get("resend"), margins=g.get("margins"), sampling=SamplingTable.from_dict(g.get("sampling") or {}),
                   infra_budget=g.get("infra_budget"), concurrency=g.get("concurrency"), timeout=g.get("timeout"),
                   max_retries=g.get("max_retries"), serving_adapter=g.get("serving_adapter"), data=g.get("data"))

    def options(self) -> GateOptions:
        """The sweep's gate door: this table as the values every configuration's gate shares."""
        from verifier.app.spec import GateOptions, Probes, margins_from_table, names

        return GateOptions(  # lists read as the gate file's and the flags' are (app/spec.names)
            suites=names(self.suites, "sweep: [gate] suites") if self.suites is not None else None,
            modes=names(self.modes, "sweep: [gate] modes") if self.modes is not None else None,
            limit=self.limit, data=self.data,
            probes=Probes.of(self.probes) if self.probes is not None else None,
            sequential=self.sequential, looks=self.looks, teacher_forcing=self.teacher_forcing,
            forced_positions=self.forced_positions, resend=self.resend,
            infra_budget=float(self.infra_budget) if self.infra_budget is not None else None,
            margins=margins_from_table(self.margins, "gate", "sweep: [gate.margins]") if self.margins is not None else None,
            concurrency=self.concurrency, timeout_s=float(self.timeout) if self.timeout is not None else None,
            max_retries=self.max_retries, serving_adapter=self.serving_adapter,
            sampling=self.sampling.overrides(), extra_body=self.sampling.body())


@dataclass(frozen=True)
class PerfTable:
    """`[perf]`: the performance probe's ladder (unset: perf.PerfSpec's defaults)."""

    concurrency: tuple[int, ...] | None = None
    prompt_tokens: tuple[int, ...] | None = None
    output_tokens: int | None = None
    requests: int | None = None
    repeats: int | None = None
    warmup: int | None = None
    ignore_eos: bool | None = None
    timeout: float | None = None

    @classmethod
    def from_dict(cls, p: Mapping[str, Any]) -> PerfTable:
        conc, prompt = p.get("concurrency"), p.get("prompt_tokens")
        return cls(concurrency=tuple(conc) if conc is not None else None,
                   prompt_tokens=tuple(prompt) if prompt is not None else None, output_tokens=p.get("output_tokens"),
                   requests=p.get("requests"), repeats=p.get("repeats"), warmup=p.get("warmup"),
                   ignore_eos=p.get("ignore_eos"), timeout=p.get("timeout"))

    def spec(self) -> PerfSpec:
        from verifier.execution import perf

        d = perf.PerfSpec()

        def given(value: Any, default: Any) -> Any:
            return default if value is None else value

        return perf.PerfSpec(concurrencies=given(self.concurrency, d.concurrencies),
                             prompt_tokens=given(self.prompt_tokens, d.prompt_tokens),
                             output_tokens=given(self.output_tokens, d.output_tokens),
                             requests=given(self.requests, d.requests), repeats=given(self.repeats, d.repeats),
                             warmup=given(self.warmup, d.warmup), ignore_eos=given(self.ignore_eos, d.ignore_eos),
                             timeout_s=float(given(self.timeout, d.timeout_s)))


@dataclass(frozen=True)
class ConfigTable:
    """One `[[config]]`: an engine the sweep starts (`engine` + `model`, its `options` and `args`) or an endpoint
    someone else runs (`base_url` + `model`); the schema's oneOf holds exactly one of the two shapes."""

    name: str
    engine: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    options: Mapping[str, Any] | None = None
    """The llama.cpp engine's keyword arguments (engines.Server), passed through in the file's order."""
    args: tuple[str, ...] | None = None
    lossless: bool | None = None

    @classmethod
    def from_dict(cls, c: Mapping[str, Any]) -> ConfigTable:
        args = c.get("args")
        return cls(name=c["name"], engine=c.get("engine"), model=c.get("model"), base_url=c.get("base_url"),
                   api_key_env=c.get("api_key_env"), options=c.get("options"),
                   args=tuple(args) if args is not None else None, lossless=c.get("lossless"))


@dataclass(frozen=True)
class SweepFile:
    """A sweep file, schema-checked, as typed tables."""

    golden: str
    config: tuple[ConfigTable, ...]
    format: int | None = None
    out: str | None = None
    gate: SweepGateTable = SweepGateTable()
    perf: PerfTable = PerfTable()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SweepFile:
        """The tables of a document SCHEMA accepted."""
        return cls(golden=doc["golden"], config=tuple(ConfigTable.from_dict(c) for c in doc["config"]),
                   format=doc.get("format"), out=doc.get("out"), gate=SweepGateTable.from_dict(doc.get("gate") or {}),
                   perf=PerfTable.from_dict(doc.get("perf") or {}))


def read(path: str) -> SweepFile:
    """The sweep file, schema-checked (every error is one line naming the key), then read once into a SweepFile."""
    import tomllib

    import jsonschema

    from ..errors import UsageError

    from verifier import safeio

    try:
        doc = tomllib.loads(safeio.read_text(path, max_bytes=1024 * 1024))  # a regular file of at most 1 MiB
    except safeio.UnsafeFile as e:
        raise UsageError(f"sweep: {e}") from None
    except OSError as e:
        raise UsageError(f"sweep: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"sweep {path}: not valid TOML: {e}") from None
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            msg = f"unknown key {where + '.' if err.absolute_path else ''}{extra[0]}" if extra else err.message
        elif err.validator == "oneOf":
            msg = f"{where}: a configuration is either `engine` + `model` (+ options, args) or `base_url` + `model`"
        else:
            msg = f"{where}: {err.message}"
        raise UsageError(f"sweep {path}: {msg}")
    file = SweepFile.from_dict(doc)
    names = [c.name for c in file.config]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UsageError(f"sweep {path}: two configurations are named {dup!r}")
    return file


def _check_llama(name: str, model: str, options: dict[str, Any]) -> None:
    """Engine choices are checked before anything starts, like every other key of the file."""
    from ..errors import UsageError
    from ..testbed.engine_models import KV_CACHE_TYPES, MODELS, QUANTS, SPEC_TYPES

    for key, value, known in (("model", model, tuple(MODELS)), ("options.kv_cache", options.get("kv_cache"), KV_CACHE_TYPES),
                              ("options.spec", options.get("spec"), SPEC_TYPES), ("options.quant", options.get("quant"), QUANTS)):
        if value is not None and value not in known:
            raise UsageError(f"sweep: configuration {name!r}: {key} {value!r} is not one of {', '.join(known)}")


def _llama(model: str, options: dict[str, Any], args: list[str]) -> Launcher:
    from ..testbed import engines

    @contextlib.contextmanager
    def launch() -> Iterator[tuple[str, str]]:
        with engines.Server(model, extra_args=args, **options) as srv:
            yield srv.url, srv.name

    return launch


def _vllm_server(model: str, args: list[str]) -> Any:  # a vllm_engine.VllmServer, not started
    from ..errors import UsageError

    try:
        from ..testbed import vllm_engine
    except ImportError:
        raise UsageError("sweep: engine = \"vllm\" needs the vLLM engine (docs/engines.md, 'vLLM'); it is not in this build") from None
    return vllm_engine.VllmServer(model, extra_args=args)


def _vllm(model: str, options: dict[str, Any], args: list[str]) -> Launcher:
    @contextlib.contextmanager
    def launch() -> Iterator[tuple[str, str]]:
        with _vllm_server(model, args) as srv:
            yield srv.url, srv.name

    return launch


def spec_from_file(file: SweepFile, out: Path, quiet: bool) -> "SweepSpec":
    from verifier.app.spec import GateOptions, api_key_env
    from ..errors import UsageError
    from verifier.app.sweep import SweepConfig, SweepSpec

    shared = file.gate.options()
    configs = []
    for c in file.config:
        key_env = api_key_env(c.api_key_env, f"sweep: configuration {c.name!r}: api_key_env") if c.api_key_env is not None else None
        ep = GateOptions(base_url=c.base_url, model=c.model, api_key_env=key_env).over(shared).endpoint()
        launcher = None
        describe: dict[str, Any] = {}
        if c.engine:
            assert c.model is not None  # the schema: an engine configuration names its model
            options, args = dict(c.options or {}), list(c.args or [])
            if c.engine == "vllm" and options:
                raise UsageError(f"sweep: configuration {c.name!r}: vLLM flags go in `args`, not `options`")
            if c.engine == "llama":
                _check_llama(c.name, c.model, options)
            launcher = (_llama if c.engine == "llama" else _vllm)(c.model, options, args)
            describe = {"engine": c.engine, "model": c.model, **options, **({"args": " ".join(args)} if args else {})}
        else:
            from verifier.wire.endpoint import check_base_url, redact_url

            assert c.base_url is not None  # the schema: an endpoint configuration names its base_url
            check_base_url(c.base_url)
            describe = {"endpoint": redact_url(c.base_url), "model": c.model}
        configs.append(SweepConfig(name=c.name, endpoint=ep, launcher=launcher, describe=describe,
                                   lossless=bool(c.lossless or False)))
    return SweepSpec(golden=Path(file.golden), configs=tuple(configs), out=out, perf=file.perf.spec(), gate=shared,
                     quiet=quiet)


def _say(quiet: bool) -> Callable[[str], None]:
    return (lambda s: None) if quiet else (lambda s: print(s, file=sys.stderr))


def print_table(table: "SweepTable", out: Path) -> None:
    from ..report.sweep import figure

    for r in table.rows:
        p = r.perf
        speed = (f"TTFT p50 {figure(p.get('ttft_p50_s'), ' ms', 1000)}, aggregate {figure(p.get('aggregate_tokens_per_s'), ' tok/s')}"
                 if p else "no speed figures")
        extra = f" {r.diagnosis}" if r.diagnosis else ""
        err = f" error: {r.error}" if r.error else ""
        print(f"{'*' if r.front else ' '} {r.name}: {r.status}{extra}; {speed}{err}")
    print(f"sweep: wrote {out / 'sweep.html'}, {out / 'sweep.md'}, {out / 'sweep.json'}")


def _stop_on_sigterm() -> None:
    """A CI job cancelled mid-sweep gets SIGTERM, a closed terminal SIGHUP: turn either into SystemExit so every
    `with` unwinds and the engine the sweep started is stopped, not orphaned (Python's default for both ends the
    process with no cleanup). SIGKILL cannot be caught: engines die with their parent (testbed die_with_parent)."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    if hasattr(signal, "SIGHUP"):  # not on Windows
        signal.signal(signal.SIGHUP, stop)


def continue_command(file: str, spec: Any, only: Any, out: Path) -> str:
    """The sweep that finishes an interrupted one: the configurations without a config.json yet (the one that was
    running and those after it), into the same OUT. Its table is built over every configuration directory in OUT,
    so it is the table the uninterrupted sweep gives (app/sweep.run_config sets an interrupted gate's directory aside)."""
    import shlex

    rest = [c.name for c in spec.configs if (not only or c.name in only) and not (out / c.name / "config.json").exists()]
    if not rest:  # every configuration finished: only the table is left
        done = [str(out / c.name) for c in spec.configs if (out / c.name / "config.json").exists()]
        return shlex.join(["verifier", "sweep", "--combine", *done, "--out", str(out)])
    return shlex.join(["verifier", "sweep", file, "--out", str(out), "--only", ",".join(rest)])


def _say_how_to_continue(e: BaseException, file: str, spec: Any, only: Any, out: Path) -> None:
    step = continue_command(file, spec, only, out)
    if isinstance(e, KeyboardInterrupt):  # cli/main prints it with where the journal stands
        e.next_steps = (step,)  # type: ignore[attr-defined]
    else:  # SIGTERM / SIGHUP (_stop_on_sigterm): the process ends with this SystemExit, nothing else prints
        print(f"verifier: terminated\n  continue with: {step}", file=sys.stderr)


def handle(a: argparse.Namespace) -> int:
    from verifier.app import sweep
    from verifier.app.collect import default_run_dir
    from ..errors import UsageError
    from .args import names

    if a.combine:
        if a.file or a.only:
            raise UsageError("--combine joins existing configuration directories: give no sweep file and no --only")
        if not a.out:
            raise UsageError("--combine needs --out DIR for the combined table")
        out = Path(a.out)
        table = sweep.combine([Path(d) for d in a.combine], out)
    else:
        if not a.file:
            raise UsageError("sweep needs a sweep file (or --combine DIR ... --out DIR)")
        file = read(a.file)
        out = Path(a.out or file.out or default_run_dir("sweep"))
        spec = spec_from_file(file, out, a.quiet)
        _stop_on_sigterm()
        only = names(a.only)
        try:
            table = sweep.run(spec, only=only, log=_say(a.quiet))
        except (KeyboardInterrupt, SystemExit) as e:
            _say_how_to_continue(e, a.file, spec, only, out)
            raise
    print_table(table, out)
    # The table is the product; a configuration that could not be measured makes the sweep incomplete (30).
    return 30 if any(r.error or r.status == "error" for r in table.rows) else 0
