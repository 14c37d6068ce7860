"""The application layer: specs in, typed documents out. No argparse here; the CLI builds the specs.

collect(RunSpec)      -> Collected (run dir, summary, counts): the only network phase, then scored; the run is
                         collected by the steps in STEPS, in that order, over one Collection
score(run_dir)        -> summary: offline and pure
Goldens, compare_run, bless, calibrate and gate (which chain these) live in app/gate.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import hashlib
import os
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from verifier import safewrite
from verifier.execution import journal, rundir, runner, scoring
from verifier.execution.live import Follower
from verifier.execution.rundir import RunDir
from verifier import safeio, scrub
from verifier.app.catalog import get_suites, resolve_suites, suite_named, suite_origin
from verifier.errors import Interrupted, UsageError, did_you_mean
from verifier.surfaces.registry import MODES, REFERENCE_MODE, mode_of, surfaces_of
from verifier.types import Exchange, ForcingAsked, RunHeader, RunSummary, Sample, Suite, owner_ids

if TYPE_CHECKING:
    from verifier.execution.teacher_forcing import Forcing
    from verifier.golden.model import Golden
    from verifier.wire.endpoint import Endpoint, EndpointConfig


DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True)
class EndpointSpec:
    """Where to send requests and how hard; the key is named, never held."""

    base_url: str | None
    """OpenAI-compatible base URL; None only when resuming without one (refused later with a clear message)."""
    model: str | None
    """Model name sent in every request; None on resume means the journal's."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers; their values are never written."""
    concurrency: int | None = None
    """Requests in flight; None: the resumed run's (or the golden's, for a gate's rerun), else DEFAULT_CONCURRENCY."""
    timeout_s: float = 600.0
    """Per-request timeout."""
    max_retries: int = 3
    """Retries on 429/5xx/connect/read errors."""
    max_response_bytes: int = 64 * 2**20
    """Cap on one response's decoded size (decompression counted)."""
    max_stream_events: int = 250_000
    """Cap on the events of one stream (bodyread.MAX_STREAM_EVENTS)."""
    request_deadline_s: float | None = None
    """Total seconds per request, retries and the whole stream included; None means 10 x timeout_s."""
    info_deadline_s: float = 10.0
    """Total seconds for the start-up /models, /props, /version calls."""
    model_check: bool = True
    """Refuse a model the server's /v1/models does not list (off for gateways that alias names)."""
    serving_adapter: str | None = None
    """A serving adapter (wire/serving_adapters.ADAPTERS) applied in front of the endpoint to every chat-completions
    request, and recorded in run.json; None: none. A resume takes the run's own."""


@dataclass(frozen=True)
class RunSpec:
    """Everything `collect` needs: which samples, which endpoint, which request parameters, where to write."""

    endpoint: EndpointSpec
    """The endpoint under test."""
    suites: tuple[str, ...] = ()
    """Suite names (empty on resume: the journal names them)."""
    modes: tuple[str, ...] = (REFERENCE_MODE,)
    """Wire modes."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """User sampling overrides (temperature, top_p, max_tokens, seed, logprobs...), over the suites' defaults."""
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """JSON merged into every request body."""
    data: str | None = None
    """Dataset path for every suite, or `suite=PATH,...`."""
    smoke: bool = False
    """Each suite's built-in smoke subset."""
    limit: int | None = None
    """First N samples (after shuffling with sample_seed)."""
    sample_seed: int | None = None
    """Shuffle seed applied before limit."""
    shard: str | None = None
    """`I/N`: every N-th sample from the I-th."""
    only_ids: Mapping[str, frozenset[str]] | None = None
    """Exactly these sample ids per suite (a golden's selection); overrides limit and seed."""
    samples: Mapping[str, tuple[Sample, ...]] | None = None
    """The samples themselves per suite (a golden's inputs.jsonl): no dataset is loaded; `data` then unused."""
    epochs: int = 1
    """Repeats per sample."""
    chat_template: str | None = None
    """Jinja template file for the completions mode (default: the server's /props)."""
    out: Path | None = None
    """Run directory to create (default runs/<timestamp>-<suites>)."""
    resume: Path | None = None
    """Resume this run directory instead of starting one."""
    probes: bool = False
    """Also run the parameter-contract probes."""
    context_probe: bool = False
    """Also run the context-truncation probe (context.json)."""
    context_lengths: tuple[int, ...] | None = None
    """Its prompt lengths (a golden's); None: the defaults that fit the server's context."""
    looks: int = 5
    """With a stop check: number of sample-aligned batches."""
    quiet: bool = False
    """No progress on stderr."""
    probe_only: frozenset[str] | None = None
    """With `probes`: the `<probe>@<surface>` results to run (a gate's rerun: exactly the golden's, execution/probes.selection);
    None: the whole catalogue (`run --probes`, `gate --probes`)."""
    golden_path: str | None = None
    """A gate's (or calibration rerun's) golden directory, recorded with its teacher-forcing pass
    (`teacher_forcing_asked`) so a resume can make the pass an interrupt left undone."""
    golden_run: str | None = None
    """That golden's source run (a resume checks the directory still holds the same golden)."""
    golden: str | None = None
    """A gate's rerun: the golden's name, recorded in run.json (`gate_of`) so a gate killed before it compared is
    still listed as a gate (`verifier runs`)."""
    force: bool = False
    """Write into `out` even when it is a golden directory (`--force`)."""
    gate_request: Mapping[str, Any] | None = None
    """A gate's rerun: what the gate was asked (app/gate.gate_request: narrowing, probes, margins, infra budget),
    recorded in run.json as `gate` so a later `compare` of this directory judges it as the gate would have."""
    forcing: "Forcing | None" = None
    """A gate's (or calibration rerun's) teacher-forcing pass over the golden's greedy records, after the samples
    (execution/teacher_forcing.py); None: no pass."""
    resend: int = 0
    """The resend step after the samples (execution/resend.py): this many greedy requests per suite sent again, alone;
    0: none (a plain run; a gate asks for it where its golden can read it)."""

    @classmethod
    def for_golden(cls, golden: "Golden", endpoint: EndpointSpec, out: Path, *,
                   overrides: Mapping[str, Any] | None = None, extra_body: Mapping[str, Any] | None = None,
                   data: str | None = None, looks: int = 5, probes: bool = False, quiet: bool = False,
                   force: bool = False, gate_request: Mapping[str, Any] | None = None,
                   teacher_forcing: str = "auto", forced_positions: int | None = None, resend: int = 0) -> "RunSpec":
        """A run that reproduces the golden's selection, sampling and modes against another endpoint: from the
        golden's own samples (inputs.jsonl), or, with `data`, reloaded from the dataset."""
        h = golden.header
        ids: dict[str, set[str]] = {}
        owners: dict[str, set[str]] = {}  # the sample ids the golden's records belong to (a conversation's turns)
        for o in golden.observations:
            ids.setdefault(o.suite, set()).add(o.sample_id)
            owners.setdefault(o.suite, set()).update(owner_ids(o.sample_id))
        from verifier.redact import credential_values

        if extra_body is None and credential_values(dict(h.source.extra_body or {})):
            raise UsageError("the golden's extra_body holds credentials, masked when it was blessed: pass --extra-body")
        samples = None
        if not data:
            samples = {name: tuple(x for x in golden.inputs.get(name, ()) if x.id in owners.get(name, ())) for name in h.suites}
            table = get_suites()
            for name, chosen in samples.items():
                check = table[name].check if name in table else None
                if check is None:
                    continue
                for sample in chosen:
                    problem = check(sample)
                    if problem is not None:  # data a scorer would trip on: refused before anything is sent
                        raise UsageError(f"golden {golden.path}: inputs.jsonl: {problem}")
        base = h.source.sampling_overrides
        base.update(overrides or {})
        from verifier.execution.probes import selection
        from verifier.execution.resume import recorded_concurrency

        return cls(
            endpoint=recorded_concurrency(endpoint, dict(h.source.endpoint or {}), "the golden's rerun"), suites=tuple(h.suites), modes=h.modes, overrides=base,
            extra_body=dict(extra_body) if extra_body is not None else dict(h.source.extra_body or {}),
            data=data, smoke=h.smoke, epochs=h.epochs,
            only_ids={k: frozenset(v) for k, v in ids.items()}, samples=samples, out=out, looks=looks,
            probes=probes or bool(h.probes), probe_only=None if probes else selection(dict(h.probes or {})),
            quiet=quiet, golden=h.name or golden.path.name, context_probe=bool(h.context_probe),
            context_lengths=h.context_lengths, force=force, gate_request=gate_request,
            forcing=_forcing(golden, teacher_forcing, forced_positions), golden_path=str(Path(golden.path).resolve()),
            golden_run=h.source.run_id or None, resend=resend if _reads_repeats(golden) else 0,
        )


def _reads_repeats(golden: "Golden") -> bool:
    """Whether the golden's records can judge a resend (repeats_disagree): greedy (temperature 0) with logprobs. A
    sampled golden's repeats disagree by design, and without logprobs a sure token cannot be told from a near tie:
    the resend step would send requests nothing reads."""
    sampling = golden.header.source.sampling or {}
    temperature = {**(sampling.get("defaults") or {}), **(sampling.get("overrides") or {})}.get("temperature")
    return temperature == 0 and any(o.logprobs for o in golden.observations)


def _forcing(golden: "Golden", method: str, positions: int | None) -> "Forcing | None":
    """The golden's greedy records to force, or None when the pass is off or there is nothing to force."""
    from verifier.execution import teacher_forcing as tf

    if method == "off":
        return None
    sampling = golden.header.source.sampling or {}
    temperature = {**(sampling.get("defaults") or {}), **(sampling.get("overrides") or {})}.get("temperature")
    targets = tf.targets_of(golden.observations, greedy=temperature == 0)
    if not targets:
        return None
    calibrated = any(k.endswith("/teacher_forced_kl") for k in golden.margins)
    return tf.Forcing(targets, method=method, positions=positions or tf.DEFAULT_POSITIONS, calibrated=calibrated)


@dataclass(frozen=True)
class Collected:
    """What `collect` did."""

    run_dir: Path
    """The run directory written."""
    summary: RunSummary
    """The scored summary (summary.json's document is its `to_json()`, the journal's digest aside)."""
    sent: int
    """Requests sent by this invocation."""
    errors: int
    """Of which ended in an infra error."""


def select(samples: Sequence[Sample], limit: int | None, seed: int | None) -> Sequence[Sample]:
    """Shuffle (seeded), then limit. A conversation is one sample (Suite.conversation): it is kept or dropped whole."""
    pool = samples  # may be lazy (built per sample on access): slicing keeps unselected samples unbuilt
    if seed is not None:
        shuffled = list(pool)
        random.Random(seed).shuffle(shuffled)
        pool = shuffled
    return pool[:limit] if limit else pool


def data_for(data: str | None, suite: str) -> str | None:
    """`--data PATH` goes to every suite; `--data bfcl=DIR,gsm8k=FILE` names one path per suite."""
    if not data or "=" not in data:
        return data
    table = dict(item.split("=", 1) for item in data.split(",") if "=" in item)
    return table.get(suite)


def check_data(data: str | None) -> None:
    """Every path `--data` (or a gate file's `data`) names exists and is a regular file or a directory, before anything
    is sent: a path pointing nowhere (a suite that does not read it, smoke, would otherwise accept it without a word),
    a FIFO, a device (/dev/zero) or a socket is refused in one line (exit 2), as a golden's or a run's files are."""
    if not data:
        return
    paths = [item.split("=", 1)[1] for item in data.split(",") if "=" in item] if "=" in data else [data]
    for path in paths:
        if not Path(path).exists() and not Path(path).is_symlink():
            raise UsageError(f"--data {path}: no such file or directory (the dataset path of --data, or of a gate file's data)")
        try:
            safeio.refuse_special(path, "--data")
        except safeio.UnsafeFile as e:
            raise UsageError(str(e)) from None


def default_run_dir(prefix: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{prefix}"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_adapter_modes(adapter: str | None, modes: Sequence[str]) -> None:
    """A serving adapter rewrites chat-completions requests only (wire/serving_adapters.CHAT_PATH). A mode on another
    route (the Responses and Messages surfaces, the dual path's /completions) would reach the engine unadapted beside
    adapted chat modes: one run, two deployments, and a golden whose non-chat records were never served as it says.
    Refused before anything is sent (run, gate, calibrate, a sweep and the API all build their run here)."""
    if adapter is None:
        return
    from verifier.wire.serving_adapters import CHAT_PATH

    off = [m for m in modes if mode_of(m).path != CHAT_PATH]
    if off:
        chat = [m for m in modes if m not in off]
        raise UsageError(f"the serving adapter {adapter} rewrites chat-completions requests only; mode(s) {', '.join(off)} "
                         "would be sent unadapted: leave them out of a run or gate behind an adapter",
                         hints=(f"pass --mode {','.join(chat)}",) if chat else ())


def endpoint_config(ep: EndpointSpec, model: str | None = None) -> "EndpointConfig":
    from verifier.redact import url_query_values
    from verifier.wire.endpoint import EndpointConfig, check_base_url

    if ep.concurrency is not None and ep.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    check_base_url(ep.base_url)
    if ep.serving_adapter is not None:
        from verifier.wire.serving_adapters import adapter_named

        try:
            adapter_named(ep.serving_adapter)
        except ValueError as e:
            raise UsageError(f"--serving-adapter: {e}") from None
    api_key = os.environ.get(ep.api_key_env) if ep.api_key_env else None
    scrub.register_endpoint(api_key, dict(ep.headers))  # first: the checks below must not print them either
    scrub.register(*url_query_values(ep.base_url))  # `?api_key=K` is a secret too: a server may echo it
    # A control character cannot go into an HTTP header (the client raises mid-run), and a newline would split one.
    if api_key is not None and _CONTROL.search(api_key):
        # the default variable is named; one the user named is not (what was given may be a key pasted in its place)
        which = "$OPENAI_API_KEY" if ep.api_key_env == "OPENAI_API_KEY" else "the variable --api-key-env names"
        raise UsageError(f"{which} holds a control character (a trailing newline?); strip it")
    for name, value in ep.headers.items():
        if _CONTROL.search(value):
            raise UsageError(f"--header {name}: the value holds a control character (a newline?)")
    scrub.register_endpoint(api_key, dict(ep.headers))  # before anything is sent or written
    return EndpointConfig(
        base_url=ep.base_url or "", model=model or ep.model or "",
        api_key=api_key, headers=dict(ep.headers),
        concurrency=ep.concurrency or DEFAULT_CONCURRENCY, timeout_s=ep.timeout_s, max_retries=ep.max_retries,
        max_response_bytes=ep.max_response_bytes, max_stream_events=ep.max_stream_events, request_deadline_s=ep.request_deadline_s,
        info_deadline_s=ep.info_deadline_s, serving_adapter=ep.serving_adapter,
    )


def load_suite_samples(suites: list[Suite], spec: RunSpec) -> list[tuple[Suite, Sequence[Sample]]]:
    from verifier.execution.merge import take_shard

    out: list[tuple[Suite, Sequence[Sample]]] = []
    for s in suites:
        if spec.samples is not None:  # a golden's own samples: nothing to load, no hub, no --data
            out.append((s, list(spec.samples.get(s.name, ()))))
            continue
        check_data(data_for(spec.data, s.name))
        try:
            samples = s.load(data_for(spec.data, s.name), spec.smoke)
        except FileNotFoundError as e:
            raise UsageError(f"suite {s.name}: data not found: {e.filename or e}", hints=getattr(e, "hints", ())) from None
        except ValueError as e:
            raise UsageError(f"suite {s.name}: {e}", hints=getattr(e, "hints", ())) from None
        chosen = select(samples, spec.limit, spec.sample_seed)
        if spec.shard:
            try:
                chosen = take_shard(chosen, spec.shard)
            except ValueError as e:
                raise UsageError(str(e)) from None
        if spec.only_ids is not None:
            # A golden names records: a sample's own id, or (conversations) one of its record ids.
            want = spec.only_ids.get(s.name, frozenset())
            chosen = [x for x in samples if x.id in want or (s.conversation and any(r in want for r in s.conversation.records(x)))]
        out.append((s, chosen))
    return out


def _sampling(spec: RunSpec) -> dict[str, Any]:
    return {"defaults": runner.DEFAULT_SAMPLING, "overrides": dict(spec.overrides)}


async def _server_facts(ep: "Endpoint", spec: RunSpec, modes: list[str]) -> tuple[dict[str, Any], str | None]:
    """Reachability, server info, and the chat template for the dual path (flag > /props), on the run's one client."""
    why = await ep.unreachable()
    if why:
        raise UsageError(why)
    from verifier.wire.preflight import check

    seen = await check(ep, ep.cfg.model, modes, spec.endpoint.api_key_env, spec.endpoint.model_check)  # before any sample is spent
    facts = await ep.server_info()
    status = seen.get("models_status")
    if status != 200:  # said once and recorded: server info without the model list is not left empty without a word
        from verifier.wire.endpoint import redact_url

        what = f"HTTP {status}" if status is not None else "no answer"
        facts["models_error"] = what
        print(f"warning: GET {redact_url(ep.cfg.base_url.rstrip('/'))}/models -> {what}: the server's model list is not "
              "checked or recorded (run.json server_info.models_error)", file=sys.stderr)
    template = None
    if spec.chat_template:
        try:
            template = Path(spec.chat_template).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--chat-template: cannot read {spec.chat_template}: {e.strerror}") from None
    elif isinstance(facts.get("props"), dict):
        template = facts["props"].get("chat_template")
    dual = [m for m in modes if mode_of(m).dual_path]
    if dual and not template:
        raise UsageError(f"mode {dual[0]!r} (the dual path) needs a chat template: the server reports none in /props; pass --chat-template FILE")
    return facts, template


# ---------------------------------------------------------------- collection as a sequence of steps
# A run is collected by the steps in STEPS, in that order, over one `Collection`: what preparation found (a new run's
# or a resumed run's) and what each step adds for the next. Resume is how the collection is prepared (the journaled
# records, the header to complete, no teacher-forcing pass), not a branch in each step. A new step is a class with
# `async def run(self, c: Collection) -> None` and one entry in STEPS.

Work = tuple[Suite, Sample, int, str, dict[str, Any]]
"""One planned request: (suite, sample, epoch, mode, body), as runner.plan makes it."""


@dataclass
class Sent:
    """What the samples step sent in this invocation."""

    sent: int = 0
    """Requests sent."""
    errors: int = 0
    """Of which ended in an infra error."""
    error_classes: dict[str, int] = field(default_factory=dict)
    """Infra errors per class (wire/endpoint.describe_error names them)."""

    def add(self, result: Mapping[str, Any]) -> None:
        """One runner.execute result added in."""
        self.sent += result["sent"]
        self.errors += result["errors"]
        for k, n in result["error_classes"].items():
            self.error_classes[k] = self.error_classes.get(k, 0) + n


@dataclass
class Collection:
    """One run as its steps collect it. Preparation fills the fields above `server_info`; the steps fill the rest."""

    spec: RunSpec
    """What was asked."""
    run_dir: Path
    """The run directory (locked by a resume's preparation, by Begin for a new run)."""
    cfg: "EndpointConfig"
    """The endpoint's configuration (secrets registered)."""
    endpoint: "Endpoint"
    """The run's one client: reachability, server info, probes and every request."""
    suites: list[tuple[Suite, Sequence[Sample]]]
    """Each suite with its samples."""
    modes: list[str]
    """Wire modes, in request order."""
    stack: contextlib.ExitStack
    """Holds the run directory's lock until the run is scored."""
    stop_check: Callable[[Path], bool] | None = None
    """A sequential gate's look: asked after each batch whether the answer is already decided."""
    resumed: RunHeader | None = None
    """The header of the run being resumed; None: a new run."""
    leave_out: frozenset[str] = frozenset()
    """Named header keys the resumed run.json was written without (a run from before they existed): a resume adds
    to it only what it adds."""
    journaled: dict[tuple[str, str, int, str], Exchange] = field(default_factory=dict)
    """A resume's answered records, the latest per key: not sent again (a conversation replays them)."""
    order: runner.SendOrder = field(default_factory=runner.SendOrder)
    """The run's send sequence, shared by every batch (a resume's continues after its journal's highest number)."""
    forcing: "Forcing | None" = None
    """The teacher-forcing pass (None: no pass; a resume makes the one its run asked for and has not made)."""
    server_info: dict[str, Any] = field(default_factory=dict)
    """Preflight: what the server said of itself."""
    template: str | None = None
    """Preflight: the chat template for the dual path (flag > /props)."""
    header: RunHeader | None = None
    """Begin: run.json as it is built; written by Begin and once more when the run ends."""
    work: list[Work] = field(default_factory=list)
    """Begin: the requests to send."""
    live: Follower | None = None
    """Begin: the scorer following the journal (execution/live.py)."""
    following: "asyncio.Task[None] | None" = None
    """Begin: the task that feeds it."""
    sent: Sent = field(default_factory=Sent)
    """Samples: what was sent."""
    stopped: bool = False
    """SequentialLook: the answer is decided, no further batch is sent."""

    def started(self) -> RunHeader:
        """The header Begin wrote (a step after Begin only)."""
        if self.header is None:
            raise RuntimeError("a collection step ran before Begin wrote the header")
        return self.header

    def extra_body(self) -> dict[str, Any]:
        """What probes send beside their own body: run.json's copy has its credentials masked; the model, transport
        and prompt are the spec's (runner.IDENTITY_KEYS)."""
        from verifier.execution.resume import resumed_extra_body

        return runner.without_identity(resumed_extra_body(self.spec, self.started()))


def with_keys(header: RunHeader, **keys: Any) -> RunHeader:
    """`header` with these optional keys (server_info, gate_of, teacher_forcing...) set beside the ones it has."""
    return dataclasses.replace(header, extra={**header.extra, **keys})


class Step(Protocol):
    """One part of collecting a run (see STEPS)."""

    async def run(self, c: Collection) -> None:
        """Do this step's part; what later steps need goes into `c`."""


class Preflight:
    """Reachability, server info (its model list checked), and the chat template for the dual path, before any
    sample is spent."""

    async def run(self, c: Collection) -> None:
        c.server_info, c.template = await _server_facts(c.endpoint, c.spec, c.modes)


class Begin:
    """The plan of requests and run.json, written before the first request; then the scorer that follows the journal
    (execution/live.py: the records of a resumed run first)."""

    async def run(self, c: Collection) -> None:
        if c.resumed is None:
            c.header, c.work = _start_new(c.spec, c.run_dir, c.cfg, c.suites, c.server_info, c.template, c.stack)
        else:
            from verifier.execution.resume import check_same_server, resumed_extra_body

            check_same_server(c.run_dir, c.resumed.server_info or {}, c.server_info)
            c.header = with_keys(c.resumed, server_info=c.server_info)
            h = c.header
            c.work = runner.plan(c.suites, c.cfg.model, h.sampling, resumed_extra_body(c.spec, h), h.epochs,
                                 c.modes, set(c.journaled), c.template)
        journal.write_header(c.run_dir, c.header, leave_out=c.leave_out)
        c.live = Follower(c.run_dir, get_suites())
        c.following = asyncio.create_task(c.live.follow())


class Probes:
    """The parameter-contract probes (probes.json) on every surface the run speaks (a gate: every surface the golden
    records), each result naming its surface."""

    async def run(self, c: Collection) -> None:
        if not c.spec.probes:
            return
        from verifier.execution.layout import PROBES
        from verifier.execution.probes import run_probes

        safewrite.write_json(c.run_dir / PROBES, await run_probes(c.endpoint, c.cfg.model, c.extra_body(), surfaces_of(c.modes),
                                                                only=c.spec.probe_only))


class ContextProbe:
    """The context-truncation probe (context.json), at the golden's lengths or the ones that fit the server."""

    async def run(self, c: Collection) -> None:
        if not c.spec.context_probe:
            return
        from verifier.execution import context_probe as cp
        from verifier.execution.layout import CONTEXT

        lengths = list(c.spec.context_lengths or cp.lengths_for(cp.n_ctx_of(c.server_info)))
        safewrite.write_json(c.run_dir / CONTEXT, await cp.run(c.endpoint, c.cfg.model, c.extra_body(), lengths))


class SequentialLook:
    """After a batch of a sequential gate: the live scorer's verdicts so far written as `score` writes them, and the
    stop check asked whether the answer is already decided."""

    async def run(self, c: Collection) -> None:
        if c.stop_check is None:
            return
        _interim_scores(c.run_dir, c.live)
        c.stopped = c.stop_check(c.run_dir)


class Samples:
    """The samples, journaled and scored as they come in: all at once, or with a stop check in `looks` sample-aligned
    batches (seeded order), `after_batch` running after each."""

    def __init__(self, after_batch: Step):
        self.after_batch = after_batch

    async def run(self, c: Collection) -> None:
        live = c.live
        for batch in ([c.work] if c.stop_check is None else batches(c.work, c.spec.looks)):
            c.sent.add(await runner.execute(c.run_dir, batch, c.cfg, quiet=c.spec.quiet, endpoint=c.endpoint,
                                            journaled=c.journaled, written=live.offer if live is not None else None,
                                            order=c.order))
            await self.after_batch.run(c)
            if c.stopped:
                break


class TeacherForcing:
    """The teacher-forcing pass after the samples (the queue of a scripted fault is spent by then): the run's own chat
    requests of epoch 0 are the contexts forced; run.json records the pass as `teacher_forcing`."""

    async def run(self, c: Collection) -> None:
        if c.forcing is None:
            return
        from verifier.execution import teacher_forcing as tf

        requests = {(ex.suite, ex.sample_id): ex.request for ex in journal.iter_exchanges(c.run_dir)
                    if ex.mode == REFERENCE_MODE and ex.epoch == 0 and ex.error is None}
        done = await tf.run(c.endpoint, c.forcing, requests, c.template, c.run_dir, quiet=c.spec.quiet)
        c.header = with_keys(c.started(), teacher_forcing=done)


class Resend:
    """The resend step after the samples (execution/resend.py): a few of the run's greedy requests sent again, one at a
    time, journaled in resends.jsonl; run.json records the step as `resend`. Before teacher forcing, whose forced
    requests would warm the engine with the golden's outputs."""

    async def run(self, c: Collection) -> None:
        if not c.spec.resend:
            return
        from verifier.execution import resend

        if c.stopped:
            block: dict[str, Any] = {"state": "skipped", "samples": c.spec.resend, "requests": 0, "errors": 0,
                                     "reason": "the sequential gate stopped early, its regression decided"}
        else:
            block = await resend.run(c.endpoint, c.run_dir, c.spec.resend, c.cfg.concurrency, c.modes, c.order,
                                     {s.name for s, _ in c.suites if s.conversation},
                                     [c.cfg.api_key or "", *c.cfg.headers.values()])
        resend.say(block, c.spec.quiet)
        c.header = with_keys(c.started(), resend=block)


STEPS: tuple[Step, ...] = (Preflight(), Begin(), Probes(), ContextProbe(), Samples(after_batch=SequentialLook()),
                           Resend(), TeacherForcing())
"""The one order of a run's collection."""


def _prepare_resume(spec: RunSpec, stack: contextlib.ExitStack) -> tuple[Path, RunHeader, frozenset[str], list[tuple[Suite, Sequence[Sample]]], "EndpointConfig", dict[tuple[str, str, int, str], Exchange], runner.SendOrder]:
    from verifier.execution.resume import check_resume

    run_dir = Path(spec.resume or "")
    try:
        hdr = rundir.check_run_dir(run_dir)  # the document as read: which keys an older writer left out (absent_keys)
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    header = RunHeader.from_dict(hdr)
    scrub.register_run(header.endpoint)
    check_resume(spec, header, run_dir)
    stack.enter_context(journal.locked(run_dir))  # before reading what is done: a second writer would re-send it
    samples = journal.read_samples(run_dir)
    suites: list[tuple[Suite, Sequence[Sample]]] = []
    for name in header.suites:
        suite = suite_named(name)
        if suite.version != header.suite_version(name):
            raise UsageError(f"run was made with {name} version {header.suite_version(name)}, this harness has {suite.version}")
        suites.append((suite, [s for (sn, _), s in samples.items() if sn == name]))
    from verifier.execution.resume import recorded_adapter, recorded_concurrency

    cfg = endpoint_config(recorded_adapter(recorded_concurrency(spec.endpoint, header.endpoint, f"--resume {run_dir}"),
                                           header.serving_adapter, f"--resume {run_dir}"),
                          spec.endpoint.model or header.endpoint["model"])
    if not spec.endpoint.base_url:
        raise UsageError("resuming needs the endpoint's base URL (the journal stores it redacted)", hints=("pass --base-url",))
    # Streamed; the last record of a key wins. Answered exchanges keep their bodies: a conversation resumes by
    # rebuilding each step and reusing a journaled one whose request matches bit for bit.
    answered: dict[tuple[str, str, int, str], Exchange] = {}
    last_sent: int | None = None  # over every record, a superseded one too: a resumed send is numbered after all of them
    for ex in journal.iter_exchanges(run_dir):
        if ex.sent is not None:
            last_sent = ex.sent if last_sent is None else max(last_sent, ex.sent)
        if ex.error is None:
            answered[ex.key] = ex
        else:
            answered.pop(ex.key, None)
    from verifier.execution import resend

    try:
        resent = resend.read(run_dir)  # the resend step's sends are in the one sequence too
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    last_sent = max([x for x in [last_sent, *(ex.sent for ex in resent)] if x is not None], default=None)
    return run_dir, header, journal.absent_keys(hdr), suites, cfg, answered, runner.SendOrder(last_sent)


def resumed_steps(spec: RunSpec, header: RunHeader, run_dir: Path) -> RunSpec:
    """A resume's spec with the probes and the context probe its run asked for (run.json's `probes_asked`,
    `context_probe_asked`) and has no results of yet (an interrupt during them, before any sample): run as they were
    asked, so the continuation ends where the uninterrupted command would. Results already written are kept; a
    run from before the record asks nothing more. The resend step (`resend_asked`) is made when run.json has no
    `resend` block yet (execution/resend.run sends only what resends.jsonl lacks). The teacher-forcing pass
    (`teacher_forcing_asked`) is made when run.json has no `teacher_forcing` block yet, over the golden it names
    (resumed_forcing)."""
    from verifier.execution.layout import CONTEXT, PROBES

    probes, context = header.probes_asked, header.context_probe_asked
    if probes is not None and not spec.probes and not (run_dir / PROBES).exists():
        only = probes.get("only")
        if only is not None and not (isinstance(only, list) and all(isinstance(x, str) for x in only)):
            raise UsageError(f"{run_dir / journal.HEADER}: probes_asked.only is not a list of probe names")
        spec = dataclasses.replace(spec, probes=True, probe_only=frozenset(only) if only is not None else None)
    if context is not None and not spec.context_probe and not (run_dir / CONTEXT).exists():
        lengths = context.get("lengths")
        if lengths is not None and not (isinstance(lengths, list) and len(lengths) <= 64
                                        and all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 10_000_000 for n in lengths)):
            raise UsageError(f"{run_dir / journal.HEADER}: context_probe_asked.lengths is not a list of prompt lengths")
        spec = dataclasses.replace(spec, context_probe=True, context_lengths=tuple(lengths) if lengths else None)
    resend = header.resend_asked
    if resend is not None and not spec.resend and header.resend is None:
        from verifier.execution.resend import MAX_SAMPLES

        n = resend.get("samples")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_SAMPLES:
            raise UsageError(f"{run_dir / journal.HEADER}: resend_asked.samples is not a count of requests per suite")
        spec = dataclasses.replace(spec, resend=n)
    forcing = header.teacher_forcing_asked
    if forcing is not None and spec.forcing is None and header.teacher_forcing is None:
        spec = dataclasses.replace(spec, forcing=resumed_forcing(forcing, header, run_dir))
    return spec


def resumed_forcing(asked: ForcingAsked, header: RunHeader, run_dir: Path) -> "Forcing | None":
    """The teacher-forcing pass a gate's run asked for (run.json's `teacher_forcing_asked`: method, positions, the
    golden's directory and source run), over the golden's greedy records of the samples this run planned, as the
    gate computed it. A golden that cannot be read, or that is another golden now, makes no pass: said on stderr
    (the comparison then has no `teacher_forced` block, as for a gate made with --teacher-forcing off)."""
    from verifier.execution import teacher_forcing as tf
    from verifier.golden import store

    method, positions, path = asked.method, asked.positions, asked.golden
    if method not in tf.CHOICES or isinstance(positions, bool) or not isinstance(positions, int) or not 0 < positions <= 512 \
            or not isinstance(path, str):
        raise UsageError(f"{run_dir / journal.HEADER}: teacher_forcing_asked is not a method, positions and a golden")
    if REFERENCE_MODE not in header.modes:
        return None
    try:
        golden = store.load(Path(path))
    except (store.BadGolden, OSError) as e:
        print(f"warning: the teacher-forcing pass this run asked for is not made: its golden {path} cannot be read "
              f"({scrub.text(str(e))[:200]})", file=sys.stderr)
        return None
    if (golden.header.source.run_id or None) != asked.golden_run:
        print(f"warning: the teacher-forcing pass this run asked for is not made: {path} holds another golden now",
              file=sys.stderr)
        return None
    forcing = _forcing(golden, method, positions)
    if forcing is None:
        return None
    planned = set(journal.read_samples(run_dir))
    targets = tuple(t for t in forcing.targets if any((t.suite, sid) in planned for sid in owner_ids(t.sample_id)))
    # calibrated as the gate saw its (narrowed) golden: `auto` measures only then
    return dataclasses.replace(forcing, targets=targets, calibrated=asked.calibrated) if targets else None


def _prepare_new(spec: RunSpec) -> tuple[Path, list[tuple[Suite, Sequence[Sample]]], "EndpointConfig"]:
    if spec.out is not None:  # before anything is loaded or sent: a golden is not a place for a run's files
        RunDir(spec.out).claim_for_write(flag="--out", force=spec.force, own_run=True)  # a run there: refused below
    suites_ = resolve_suites(spec.suites)
    # Samples before the endpoint module: a dataset that cannot be had is reported without loading the openai SDK.
    samples = load_suite_samples(suites_, spec)
    for m in spec.modes:
        if m not in MODES:
            raise UsageError(f"unknown mode {m!r}; {did_you_mean(m, MODES)}known: {', '.join(MODES)}")
    check_adapter_modes(spec.endpoint.serving_adapter, spec.modes)
    cfg = endpoint_config(spec.endpoint)
    run_dir = spec.out or default_run_dir("-".join(s.name for s in suites_))
    if (run_dir / journal.HEADER).exists():
        journal.ensure_writable_new_dir(run_dir)  # refuses, naming --resume
    safewrite.check_writable(run_dir, directory=True)  # before the preflight's first request
    return run_dir, samples, cfg


def _prepare(spec: RunSpec, stack: contextlib.ExitStack, stop_check: Callable[[Path], bool] | None) -> Collection:
    """The collection before its first step: a resumed run's header, samples and answered records, or a new run's
    samples; the endpoint's configuration either way (nothing is sent yet)."""
    from verifier.wire.endpoint import Endpoint
    from verifier.redact import credential_values

    if spec.resume:
        run_dir, header, leave_out, suites, cfg, done, order = _prepare_resume(spec, stack)
        scrub.register(*credential_values(dict(spec.extra_body)))  # `--extra-body '{"api_key": ...}'` is a secret too
        resumed = resumed_steps(spec, header, run_dir)
        return Collection(spec=resumed, run_dir=run_dir, cfg=cfg, endpoint=Endpoint(cfg),
                          suites=suites, modes=header.modes,
                          stack=stack, stop_check=stop_check, resumed=header, leave_out=leave_out, journaled=done,
                          order=order, forcing=resumed.forcing)
    if not spec.suites:
        raise UsageError("--suite is required")
    run_dir, suites, cfg = _prepare_new(spec)
    scrub.register(*credential_values(dict(spec.extra_body)))
    return Collection(spec=spec, run_dir=run_dir, cfg=cfg, endpoint=Endpoint(cfg), suites=suites, modes=list(spec.modes),
                      stack=stack, stop_check=stop_check, forcing=spec.forcing)


async def _collect(spec: RunSpec, stop_check: Callable[[Path], bool] | None,
                   stack: contextlib.ExitStack, started: dict[str, Path] | None = None) -> tuple[Path, Sent, "Follower | None"]:
    c = _prepare(spec, stack, stop_check)
    if started is not None:
        started["run_dir"] = c.run_dir
    try:
        for step in STEPS:
            await step.run(c)
    except BaseException:
        if c.live is not None:
            c.live.close()  # nothing is scored: an interrupted run is left to --resume or `verifier score`, as ever
        raise
    finally:
        if c.live is not None:
            c.live.stop()
            if c.following is not None:
                await c.following
        await c.endpoint.aclose()
    journal.write_header(c.run_dir, dataclasses.replace(c.started(), finished=runner.now()), leave_out=c.leave_out)
    return c.run_dir, c.sent, c.live


def _start_new(spec: RunSpec, run_dir: Path, cfg: "EndpointConfig", suites: list[tuple[Suite, Sequence[Sample]]],
               info: dict[str, Any], template: str | None, stack: contextlib.ExitStack) -> tuple[RunHeader, list[Work]]:
    modes, extra, sampling = list(spec.modes), dict(spec.extra_body), _sampling(spec)
    dropped = sorted({k for s, xs in suites for x in xs for k in runner.identity_overrides(s, x, extra, sampling["overrides"])})
    if dropped:  # a golden or requests file must not change what is measured: said once, the spec's values are sent
        print(f"warning: ignored {', '.join(dropped)[:200]}: the model, stream mode, prompt and the suite's tools and "
              f"schema are the spec's, never a golden's, an input's or a requests file's", file=sys.stderr)
    extra = runner.without_identity(extra)
    sampling = {**sampling, "overrides": runner.without_identity(dict(sampling["overrides"]))}
    try:
        work = runner.plan(suites, cfg.model, sampling, extra, spec.epochs, modes, template=template)
    except ValueError as e:  # e.g. a template that does not render: before anything is written
        raise UsageError(str(e)) from None
    journal.ensure_writable_new_dir(run_dir)
    stack.enter_context(journal.locked(run_dir))
    journal.ensure_writable_new_dir(run_dir)  # again, locked: another process may have started this run meanwhile
    keys: dict[str, Any] = {"server_info": info}
    if spec.golden:
        keys["gate_of"] = spec.golden
    if spec.gate_request is not None:
        keys["gate"] = dict(spec.gate_request)
    # The steps asked beside the samples, so a resume runs the ones an interrupt left undone (resumed_steps): a gate
    # killed during its probes must not continue to a verdict with every golden probe `not run`.
    if spec.probes:
        keys["probes_asked"] = {"only": sorted(spec.probe_only) if spec.probe_only is not None else None}
    if spec.context_probe:
        keys["context_probe_asked"] = {"lengths": list(spec.context_lengths) if spec.context_lengths else None}
    if spec.resend:
        keys["resend_asked"] = {"samples": spec.resend}
    if spec.forcing is not None and spec.golden_path is not None:
        keys["teacher_forcing_asked"] = {"method": spec.forcing.method, "positions": spec.forcing.positions,
                                         "calibrated": spec.forcing.calibrated, "golden": spec.golden_path,
                                         "golden_run": spec.golden_run}
    if template and any(mode_of(m).dual_path for m in modes):
        keys["dual_path_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
    keys["selection"] = {"smoke": bool(spec.smoke), "limit": spec.limit, "sample_seed": spec.sample_seed,
                         "ids": spec.only_ids is not None, "shard": spec.shard,
                         "source": "golden" if spec.samples is not None else "dataset"}
    hdr = with_keys(runner.header(run_dir.name, cfg, suites, sampling, extra, spec.epochs, modes, spec.endpoint.api_key_env), **keys)
    journal.write_samples(run_dir, [(s.name, x) for s, xs in suites for x in xs])
    return hdr, work


def collect(spec: RunSpec, stop_check: Callable[[Path], bool] | None = None) -> Collected:
    """Collect (or resume) a run, scored as it goes (execution/live.py): once the last answer is in, only the aggregation is left.

    With `stop_check`, work is sent in `spec.looks` sample-aligned batches (seeded order) and
    `stop_check(run_dir)` is asked after each whether the answer is already decided.
    """
    check_data(spec.data)
    with contextlib.ExitStack() as stack:  # the run directory's lock, held until it is scored
        started: dict[str, Path] = {}  # the run directory, once _collect knows it (for an interrupt's message)
        try:
            run_dir, sent, live = asyncio.run(_collect(spec, stop_check, stack, started))
        except KeyboardInterrupt:
            where = started.get("run_dir")
            raise Interrupted(where if where is not None and (where / journal.HEADER).exists() else None) from None
        summary = _score_followed(run_dir, live)
    if sent.errors:  # said even when quiet: which failure it was, and what to check
        from verifier.wire.endpoint import describe_error

        top = sorted(sent.error_classes.items(), key=lambda kv: -kv[1])
        print(f"run: {sent.errors} infra error(s): " + "; ".join(f"{n} x {describe_error(k)}" for k, n in top[:3]),
              file=sys.stderr)
    _say_refused_modes(run_dir)
    if not spec.quiet:
        print(f"run: {run_dir}  sent={sent.sent} infra_errors={sent.errors}", file=sys.stderr)
    return Collected(run_dir, summary, sent.sent, sent.errors)


def _say_refused_modes(run_dir: Path) -> None:
    """A (suite, mode) whose every record the server refused (4xx), said once, even when quiet, with logprobs named
    when the run asked for them: llama-server refuses logprobs on streams with tools (HTTP 400), which turned a whole
    bfcl chat-stream half `unsupported` without a word."""
    rd = RunDir(run_dir)
    seen: dict[tuple[str, str], list[int]] = {}
    reason: dict[tuple[str, str], str] = {}
    for v in rd.iter_verdicts():
        n = seen.setdefault((v.suite, v.mode), [0, 0])
        n[0] += v.outcome == "unsupported"
        n[1] += 1
        if v.outcome == "unsupported":
            reason.setdefault((v.suite, v.mode), str(v.reason))
    refused = sorted(k for k, (bad, total) in seen.items() if total and bad == total)
    if not refused:
        return
    asked_logprobs = bool((rd.header().sampling.get("overrides") or {}).get("logprobs"))
    why = ("; the run asked for logprobs, which some servers refuse on some modes (llama-server: streams with tools): "
           "without --logprobs that mode may answer") if asked_logprobs else ""
    where = ", ".join(f"{suite} on {mode} ({reason[(suite, mode)]})" for suite, mode in refused[:4])
    print(f"warning: the server refused every record of {where}{why}", file=sys.stderr)


def batches(work: list[Any], looks: int) -> list[list[Any]]:
    """Split work into `looks` batches that keep each sample's epochs and modes together, in a seeded order."""
    ids = sorted({(w[0].name, w[1].id) for w in work})
    random.Random(0).shuffle(ids)
    size = max(1, -(-len(ids) // max(1, looks)))
    rank = {k: i // size for i, k in enumerate(ids)}
    out: list[list[Any]] = [[] for _ in range(max(rank.values(), default=0) + 1)]
    for w in work:
        out[rank[(w[0].name, w[1].id)]].append(w)
    return out


def _interim_scores(run_dir: Path, live: "Follower | None") -> None:
    """Before a look: the live scorer's verdicts of every record journaled so far, written as `score` writes them,
    so the look (a compare) reads them instead of scoring the journal again. A follower that failed leaves the files
    stale, and the look scores afresh, which reports the failure as `score` does."""
    if live is None or live.failed is not None:
        return
    live.step(float("inf"))  # the batch is in: catch up with its last records (nothing is being sent now)
    scoring.write_scores(run_dir, *live.scorer.result())


def _score_followed(run_dir: Path, live: "Follower | None") -> RunSummary:
    """The scores of a run judged as it was collected: only the aggregation is left. Anything the follower could
    not judge (a corrupt line, a scorer's exception) is left to a fresh `score`, which reports it as it always has."""
    if live is None:
        return score(run_dir)
    try:
        verdicts, summary, observed = live.result()
    except Exception:  # noqa: BLE001 - scored afresh below: the same error, raised and reported as `score` does
        return score(run_dir)
    scoring.write_scores(run_dir, verdicts, summary, observed)
    return summary


def score(run_dir: Path) -> RunSummary:
    """Score a run directory offline: verdicts.jsonl, observations.jsonl and summary.json; returns the summary."""
    try:
        scrub.register_run(RunDir(run_dir).header().endpoint)  # what scoring writes is scrubbed of the run's key
        verdicts, summary, observed = scoring.score_journal(run_dir, get_suites())
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    except KeyError as e:
        raise UsageError(f"{run_dir}: journal names unknown suite or sample {e}") from None
    scoring.write_scores(run_dir, verdicts, summary, observed)
    return summary
