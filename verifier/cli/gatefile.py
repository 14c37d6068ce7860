"""`verifier gate --config gate.toml`: a gate as a file to review in a pull request.

The file is read with the stdlib's tomllib, checked against its schema (gatefile_schema.py) and read once into a
typed `GateFile` (its tables as frozen dataclasses), then into typed values (app/spec.GateOptions), the same values
the flags give, so a file and the equivalent command line build
the same GateSpec (tests/test_gate_spec_doors.py, tests/test_gate_file.py). Precedence, merged as values: a flag given on
the command line > the file > the environment > defaults.

    golden = "goldens/demo-smoke"
    suites = ["smoke"]                  # a subset of the golden's suites (default: all)
    modes = ["chat", "chat-stream"]     # a subset of the golden's modes (default: all)
    limit = 5                           # the first N samples of each suite (default: all)
    data = "data/"                      # when the golden's suites need a local dataset

    [endpoint]                          # or several [[endpoints]], each with a `name`: gated concurrently
    base_url = "http://127.0.0.1:8080/v1"
    model = "qwen0.5b"
    api_key_env = "CANDIDATE_API_KEY"   # the variable's name; keys and header values never go in the file
    concurrency = 8
    timeout = 600
    max_retries = 3

    [sampling]
    temperature = 0.0
    max_tokens = 512
    logprobs = 1
    extra_body = { chat_template_kwargs = { enable_thinking = false } }

    [budgets]
    infra = 0.02                        # infra error rate above which the run is `incomplete`
    allow_inconclusive = false
    sequential = false
    looks = 5
    teacher_forcing = "auto"            # auto | off | prompt_logprobs | echo | prefill (docs/reference/attribution.md)
    forced_positions = 4                # prefill positions per sample
    resend = 4                          # greedy requests per suite sent again alone after the run (engine state); 0: none
    probes = false                      # true: run and compare the probes; false: none (no probes.json); unset: the golden's

    [margins]                           # over the golden's calibrated margins; each needs its reason
    "smoke/accuracy" = { value = 0.05, reason = "release notes allow 5 points on arithmetic" }

    [outputs]                           # report, junit, markdown, matrix: relative to the run directory, never outside
                                        # it and the gate file's own directory
    dir = "runs/gate"                   # one endpoint: the run directory; several: one run directory each (--out wins)
    report = "report.html"
    junit = "junit.xml"
    markdown = "summary.md"
    matrix = "matrix"                   # several endpoints: matrix.html + matrix.md here
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UsageError

if TYPE_CHECKING:
    from verifier.app.spec import GateOptions

MAX_BYTES = 1024 * 1024
"""A gate file is a page of TOML; anything larger is refused before it is parsed."""


def read(path: str | Path) -> dict[str, Any]:
    """The TOML document; unreadable or invalid files are usage errors naming the file."""
    import tomllib

    from verifier import safeio

    try:
        return tomllib.loads(safeio.read_text(path, max_bytes=MAX_BYTES))
    except safeio.UnsafeFile as e:
        raise UsageError(f"--config: {e}") from None
    except OSError as e:
        raise UsageError(f"--config: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--config {path}: not valid TOML: {e}") from None


# ------------------------------------------------------------------------------------ the file as typed tables
# Built once by `GateFile.from_dict`, after the schema (gatefile_schema.py) has checked every key's type and range:
# the schema stays the validator, these classes only give its tables names, so nothing past the door indexes the
# TOML by string key. A field is None where the file said nothing. tests/test_gate_file.py checks that their fields
# are the schema's keys, table by table.

@dataclass(frozen=True)
class EndpointTable:
    """`[endpoint]`, or one of `[[endpoints]]` (which also has its `name`)."""

    name: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    """The variable's name, checked by `app/spec.api_key_env` when the options are built (never the key)."""
    concurrency: int | None = None
    timeout: float | None = None
    max_retries: int | None = None
    serving_adapter: str | None = None

    @classmethod
    def from_dict(cls, t: Mapping[str, Any]) -> EndpointTable:
        return cls(name=t.get("name"), base_url=t.get("base_url"), model=t.get("model"), api_key_env=t.get("api_key_env"),
                   concurrency=t.get("concurrency"), timeout=t.get("timeout"), max_retries=t.get("max_retries"),
                   serving_adapter=t.get("serving_adapter"))

    def options(self, where: str) -> GateOptions:
        """This endpoint's options; `where` names the table in an error (`endpoint`, `endpoints.NAME`)."""
        from verifier.app.spec import GateOptions, api_key_env

        key_env = api_key_env(self.api_key_env, f"gate file: {where}.api_key_env") if self.api_key_env is not None else None
        return GateOptions(base_url=self.base_url, model=self.model, api_key_env=key_env, concurrency=self.concurrency,
                           timeout_s=float(self.timeout) if self.timeout is not None else None,
                           max_retries=self.max_retries, serving_adapter=self.serving_adapter)


@dataclass(frozen=True)
class SamplingTable:
    """`[sampling]` of a gate file, `[gate.sampling]` of a sweep file: the same keys."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    logprobs: int | None = None
    extra_body: Mapping[str, Any] | None = None
    """Merged into every request body as given (free-form: the endpoint's own keys)."""

    @classmethod
    def from_dict(cls, t: Mapping[str, Any]) -> SamplingTable:
        return cls(temperature=t.get("temperature"), top_p=t.get("top_p"), max_tokens=t.get("max_tokens"),
                   seed=t.get("seed"), logprobs=t.get("logprobs"), extra_body=t.get("extra_body"))

    def overrides(self) -> dict[str, Any] | None:
        """The sampling overrides (GateOptions.sampling); None when the table sets none."""
        from verifier.app.spec import sampling

        return sampling(self.temperature, self.top_p, self.max_tokens, self.seed, self.logprobs) or None

    def body(self) -> dict[str, Any] | None:
        """extra_body as GateOptions takes it (a copy); None when absent."""
        return dict(self.extra_body) if self.extra_body is not None else None


@dataclass(frozen=True)
class BudgetsTable:
    """`[budgets]`."""

    infra: float | None = None
    allow_inconclusive: bool | None = None
    sequential: bool | None = None
    looks: int | None = None
    teacher_forcing: str | None = None
    forced_positions: int | None = None
    resend: int | None = None
    probes: bool | None = None

    @classmethod
    def from_dict(cls, t: Mapping[str, Any]) -> BudgetsTable:
        return cls(infra=t.get("infra"), allow_inconclusive=t.get("allow_inconclusive"), sequential=t.get("sequential"),
                   looks=t.get("looks"), teacher_forcing=t.get("teacher_forcing"),
                   forced_positions=t.get("forced_positions"), resend=t.get("resend"), probes=t.get("probes"))


@dataclass(frozen=True)
class OutputsTable:
    """`[outputs]`: paths as written (resolve_outputs places them)."""

    dir: str | None = None
    report: str | None = None
    junit: str | None = None
    markdown: str | None = None
    matrix: str | None = None

    @classmethod
    def from_dict(cls, t: Mapping[str, Any]) -> OutputsTable:
        return cls(dir=t.get("dir"), report=t.get("report"), junit=t.get("junit"), markdown=t.get("markdown"),
                   matrix=t.get("matrix"))


@dataclass(frozen=True)
class GateFile:
    """A gate file, schema-checked, as typed tables: what `options` turns into GateOptions."""

    golden: str | None = None
    suites: str | tuple[str, ...] | None = None
    """As written: a list of names, or one comma-separated string (`app/spec.names` reads either)."""
    modes: str | tuple[str, ...] | None = None
    limit: int | None = None
    data: str | None = None
    endpoint: EndpointTable | None = None
    endpoints: tuple[EndpointTable, ...] | None = None
    sampling: SamplingTable = SamplingTable()
    budgets: BudgetsTable = BudgetsTable()
    margins: Mapping[str, Mapping[str, Any]] | None = None
    """`"suite/metric" = { value, reason }` as written: `app/spec.margins_from_table` makes them Margins."""
    outputs: OutputsTable = OutputsTable()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> GateFile:
        """The tables of a document the schema accepted (`problem(doc)` is None)."""
        def listed(v: Any) -> Any:
            return tuple(v) if isinstance(v, list) else v

        ep, eps = doc.get("endpoint"), doc.get("endpoints")
        return cls(golden=doc.get("golden"), suites=listed(doc.get("suites")), modes=listed(doc.get("modes")),
                   limit=doc.get("limit"), data=doc.get("data"),
                   endpoint=EndpointTable.from_dict(ep) if ep is not None else None,
                   endpoints=tuple(EndpointTable.from_dict(t) for t in eps) if eps is not None else None,
                   sampling=SamplingTable.from_dict(doc.get("sampling") or {}),
                   budgets=BudgetsTable.from_dict(doc.get("budgets") or {}), margins=doc.get("margins"),
                   outputs=OutputsTable.from_dict(doc.get("outputs") or {}))

    def shared_options(self) -> GateOptions:
        """What every endpoint of the file shares."""
        from verifier.app.spec import GateOptions, Probes, margins_from_table, names

        bud, outs = self.budgets, self.outputs
        return GateOptions(
            golden=self.golden, suites=names(self.suites, "gate file: suites") if self.suites is not None else None,
            modes=names(self.modes, "gate file: modes") if self.modes is not None else None, limit=self.limit,
            data=self.data,
            margins=margins_from_table(self.margins, "gate", "gate file: [margins]") if self.margins is not None else None,
            probes=Probes.of(bud.probes) if bud.probes is not None else None, sequential=bud.sequential,
            looks=bud.looks, teacher_forcing=bud.teacher_forcing, forced_positions=bud.forced_positions,
            resend=bud.resend, infra_budget=float(bud.infra) if bud.infra is not None else None,
            allow_inconclusive=bud.allow_inconclusive,
            sampling=self.sampling.overrides(), extra_body=self.sampling.body(),
            out=outs.dir, report=outs.report, junit=outs.junit, markdown=outs.markdown, matrix=outs.matrix)

    def endpoint_options(self) -> list[tuple[str, GateOptions]]:
        """One (name, endpoint options) per [endpoint] (named "") / [[endpoints]]; none when the file has neither."""
        if self.endpoint is not None:
            return [("", self.endpoint.options("endpoint"))]
        if self.endpoints is None:
            return []
        seen = [str(t.name) for t in self.endpoints]
        if len(set(seen)) != len(seen):
            raise UsageError("gate file: [[endpoints]] names must be unique")
        return [(str(t.name), t.options(f"endpoints.{t.name}")) for t in self.endpoints]


TOP = frozenset(f.name for f in fields(GateFile))
"""The gate file's top-level keys: the schema's, one field each (tests/test_gate_file.py)."""


def gate_file(doc: Any) -> GateFile:
    """The gate file's door: checked first against its schema (every key's type and range: a wrong type never
    changes a meaning), then read once into typed tables."""
    from .gatefile_schema import problem

    why = problem(doc)
    if why:
        raise UsageError(f"gate file: {why}")
    if "endpoint" in doc and "endpoints" in doc:
        raise UsageError("gate file: give [endpoint] or [[endpoints]], not both")
    return GateFile.from_dict(doc)


def options(doc: Any, path: Path) -> tuple[GateOptions, list[tuple[str, GateOptions]]]:
    """The shared options, and one (name, endpoint options) per [endpoint] / [[endpoints]] of a gate file's document."""
    file = gate_file(doc)
    return file.shared_options(), file.endpoint_options()


def refuse_foreign_dir(path: Path, value: str) -> None:
    """The file's `dir` names where the gate writes a dozen files (run.json, the journal, report.html, summary.md,
    ...): a directory that exists and holds anything but a run (whose own checks refuse it, naming --resume) would
    have its files replaced, so it is refused before anything is read or written, as a `report` leading out of the
    run is. A directory the gate makes, or an empty one, is fine; `--out` on the command line is the user's own."""
    from verifier.execution.rundir import RunDir

    try:
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise UsageError(f"gate file: [outputs] dir = {value!r} exists and is not a directory")
        if path.is_dir() and not RunDir(path).is_run() and next(path.iterdir(), None) is not None:
            raise UsageError(f"gate file: [outputs] dir = {value!r} is a directory that holds other files, not a run: "
                             "the gate would write its files into it (name a new directory, or pass --out)")
    except OSError as e:
        raise UsageError(f"gate file: [outputs] dir = {value!r} cannot be read ({e.strerror})") from None


def resolve_outputs(opts: GateOptions, out: str, config: Path) -> GateOptions:
    """[outputs] report/junit/markdown/matrix follow the run the gate makes: a relative path is relative to the
    run directory `out` (the file's `dir`, or `--out`, which wins), and one written under the file's own `dir`
    (`runs/gate/report.html`) is read as relative to it, so `--out runs/gate2` never writes into runs/gate.
    A path that leads outside both the run directory and the gate file's own directory is refused: a reviewed
    file must not write elsewhere on the machine (`report = "../../x.html"`)."""
    import dataclasses

    file_dir = Path(opts.out) if opts.out else None
    if opts.out and file_dir is not None and Path(out) == file_dir:
        refuse_foreign_dir(file_dir, opts.out)
    roots = [Path(out).resolve(), Path(config).resolve().parent]
    resolved: dict[str, Any] = {"out": out}
    for key in ("report", "junit", "markdown", "matrix"):
        value = getattr(opts, key)
        if not value:
            continue
        path = Path(value)
        if file_dir is not None and path.is_relative_to(file_dir) and path != file_dir:
            path = path.relative_to(file_dir)
        path = path if path.is_absolute() else Path(out) / path
        if not any(path.resolve().is_relative_to(r) for r in roots):
            raise UsageError(f"gate file: [outputs] {key} = {value!r} leads outside the run directory and the gate "
                             "file's directory")
        resolved[key] = str(path)
    return dataclasses.replace(opts, **resolved)
