"""`verifier gate --config gate.toml`: a gate as a file to review in a pull request.

The file is read with the stdlib's tomllib, checked against its schema (gatefile_schema.py) and read once into
typed values (app/spec.GateOptions), the same values the flags give, so a file and the equivalent command line build
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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from verifier.app.spec import GateOptions

TOP = {"golden", "suites", "modes", "limit", "data", "endpoint", "endpoints", "sampling", "budgets", "margins", "outputs"}
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


def endpoint_options(t: dict[str, Any], where: str) -> GateOptions:
    from verifier.app.spec import GateOptions, api_key_env

    return GateOptions(base_url=t.get("base_url"), model=t.get("model"),
                       api_key_env=api_key_env(t["api_key_env"], f"gate file: {where}.api_key_env") if "api_key_env" in t else None,
                       concurrency=t.get("concurrency"), timeout_s=float(t["timeout"]) if "timeout" in t else None,
                       max_retries=t.get("max_retries"), serving_adapter=t.get("serving_adapter"))


def options(doc: dict[str, Any], path: Path) -> tuple[GateOptions, list[tuple[str, GateOptions]]]:
    """The gate file's door: the shared options, and one (name, endpoint options) per [endpoint] / [[endpoints]].
    Checked first against the gate file's schema (every key's type and range), then read once into values."""
    from verifier.app.spec import GateOptions, Probes, margins_from_table, names, sampling
    from .gatefile_schema import problem

    why = problem(doc)  # every key's type and range first: a wrong type never changes a meaning
    if why:
        raise UsageError(f"gate file: {why}")
    if "endpoint" in doc and "endpoints" in doc:
        raise UsageError("gate file: give [endpoint] or [[endpoints]], not both")
    smp, bud, outs = doc.get("sampling") or {}, doc.get("budgets") or {}, doc.get("outputs") or {}
    shared = GateOptions(
        golden=doc.get("golden"), suites=names(doc["suites"], "gate file: suites") if "suites" in doc else None,
        modes=names(doc["modes"], "gate file: modes") if "modes" in doc else None, limit=doc.get("limit"),
        data=doc.get("data"),
        margins=margins_from_table(doc["margins"], "gate", "gate file: [margins]") if "margins" in doc else None,
        probes=Probes.of(bud["probes"]) if "probes" in bud else None, sequential=bud.get("sequential"),
        looks=bud.get("looks"), teacher_forcing=bud.get("teacher_forcing"), forced_positions=bud.get("forced_positions"),
        infra_budget=float(bud["infra"]) if "infra" in bud else None,
        allow_inconclusive=bud.get("allow_inconclusive"),
        sampling=sampling(smp.get("temperature"), smp.get("top_p"), smp.get("max_tokens"), smp.get("seed"),
                          smp.get("logprobs")) or None,
        extra_body=dict(smp["extra_body"]) if "extra_body" in smp else None,
        out=outs.get("dir"), report=outs.get("report"), junit=outs.get("junit"), markdown=outs.get("markdown"),
        matrix=outs.get("matrix"))
    endpoints: list[tuple[str, GateOptions]] = []
    if "endpoint" in doc:
        endpoints = [("", endpoint_options(doc["endpoint"], "endpoint"))]
    elif "endpoints" in doc:
        seen = [t["name"] for t in doc["endpoints"]]
        if len(set(seen)) != len(seen):
            raise UsageError("gate file: [[endpoints]] names must be unique")
        endpoints = [(t["name"], endpoint_options(t, f"endpoints.{t['name']}")) for t in doc["endpoints"]]
    return shared, endpoints


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
