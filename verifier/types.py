"""The few core types. Everything else is a function of these.

All are frozen dataclasses so a scorer cannot mutate what it was given; each
field is documented because these shapes are written to disk and read back by
other tools (compare, report, CI).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from collections.abc import Sequence
from typing import Any, Callable


@dataclass(frozen=True)
class Sample:
    """One item of a suite."""

    id: str
    """Stable across runs and machines: the join key between a run and its golden."""
    messages: list[dict[str, Any]]
    """OpenAI chat messages, sent as-is."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI `tools` list, when the sample exercises tool calling."""
    response_format: dict[str, Any] | None = None
    """OpenAI `response_format`, when the sample exercises structured output."""
    target: Any = None
    """What a correct answer looks like; its shape is the suite's business."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else the scorer needs (category, image size, ...). Must be JSON-serializable."""
    params: dict[str, Any] = field(default_factory=dict)
    """Per-sample request fields (e.g. tool_choice, max_tokens) merged over the run's sampling params."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Sample":
        return Sample(**d)


@dataclass(frozen=True)
class Exchange:
    """One HTTP round trip, exactly as sent and received (after retries)."""

    suite: str
    """Name of the suite the sample belongs to."""
    sample_id: str
    """`Sample.id`."""
    epoch: int
    """Repeat index, 0-based; used to measure run-to-run spread."""
    mode: str
    """Wire mode: `chat`, `chat-stream`, `completions`, `responses`, `responses-stream`, `messages`, `messages-stream`."""
    request: dict[str, Any]
    """The JSON body as sent (never headers: they may carry secrets)."""
    status: int | None
    """HTTP status of the last attempt; None when no response arrived."""
    body: str | None = None
    """Raw response body text of a non-streamed response (or of an error response)."""
    chunks: list[str] | None = None
    """Raw SSE `data:` payloads of a streamed response, in arrival order, `[DONE]` included (Responses and
    Messages events carry their event name as `type` inside the payload)."""
    error: str | None = None
    """Infra error class (`connect_error`, `timeout`, `read_error`, `http_503`, `stream_truncated`...); None on success."""
    latency_ms: float = 0.0
    """Wall time of the last attempt, first byte sent to last byte received."""
    attempts: int = 1
    """How many attempts were made, retries included."""
    sent: int | None = None
    """The run's send sequence number: requests are numbered in the order the runner handed them to the client, across
    every worker (concurrency), batch and resume of the run, so "sent before" can be read between any two records of
    it (the order of repeats: engine state). None: a journal from before it was recorded, or a request outside the
    samples' sequence (teacher forcing)."""

    def to_json(self) -> dict[str, Any]:
        # Shallow on purpose: asdict() deep-copies the request and chunks, a measurable cost per record.
        d = dict(self.__dict__)
        if d["sent"] is None:
            del d["sent"]  # the historical line, key for key, where there is no send order
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Exchange":
        return Exchange(**d)

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.suite, self.sample_id, self.epoch, self.mode)


@dataclass(slots=True)
class WireFacts:
    """Facts about the wire that the Parsed shape cannot hold, as a surface parser (or parse.py's guards) saw them;
    contract.py and contract_surfaces.py turn them into findings. None: not seen.

    Mutable on purpose: a parser fills it in as it reads (stream_objects counts bad chunks into it), and it is
    never written to a file. `slots`: setting a name that is not a field fails, so a misspelt fact is an error,
    not a fact nobody reads. `to_dict()` is the form it had as `Parsed.extra`'s dict: the facts that were seen."""

    bad_chunks: int | None = None
    """Stream payloads that were not JSON objects (jsonsafe.stream_objects)."""
    json_too_deep: str | None = None
    """Where JSON nested past the bound: `body`, `N stream chunk(s)`, `content`, `tool arguments`."""
    json_too_large: str | None = None
    """Where JSON held more values than an answer may be parsed into (jsonsafe.MAX_JSON_VALUES): `content`, `tool arguments`."""
    index_collisions: list[int] | None = None
    """Stream indexes two different calls / items / blocks were sent under."""
    stream_ignored: str | None = None
    """A stream was asked for and one JSON body came back."""
    usage_non_finite: str | None = None
    """`usage` keys that held NaN or Infinity (dropped from usage)."""
    finish_reason_wire: str | None = None
    """The finish reason as sent, where another engine's synonym was read as the chat value."""
    function_call_without_call_id: int | None = None
    """Responses: function_call items without `call_id`."""
    surface_status: Any = None
    """Responses: the response's `status`, as sent."""
    tool_input_not_object: str | None = None
    """Messages: a tool_use block whose `input` is not an object (`name: type`)."""
    stop_reason: Any = None
    """Messages: `stop_reason` as sent."""
    thinking_without_signature: int | None = None
    """Messages: thinking blocks without a signature."""
    terminal_event_missing: str | None = None
    """The surface's terminal stream event that never came."""
    stream_done_missing: bool | None = None
    """Chat: the stream ended cleanly after its finish chunk without `data: [DONE]` (whole, but not as the API ends it)."""
    usage_missing_in: str | None = None
    """The stream event that should have carried usage and did not."""
    stream_error_event: str | None = None
    """An error event inside the stream (its message, cut at 120 characters)."""
    usage_split: str | None = None
    """Chat streams: usage sent in several chunks whose prompt figures disagree (a key only a later chunk carries,
    or another value), what differed."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}

    def merge(self, other: WireFacts) -> None:
        """The facts `other` saw, over these (a stream's bad payloads, counted apart from its events)."""
        for f in fields(other):
            if (value := getattr(other, f.name)) is not None:
                setattr(self, f.name, value)


@dataclass(frozen=True)
class Parsed:
    """An Exchange reduced to the non-streamed response shape; streams are reassembled into it."""

    content: str | None
    """`choices[0].message.content`."""
    reasoning: str | None
    """`reasoning_content` (or `reasoning`), kept separate from content."""
    tool_calls: list[dict[str, Any]] | None
    """`choices[0].message.tool_calls` as received (arguments left as strings)."""
    finish_reason: str | None
    """As received; None when the server sent none (which is itself a finding)."""
    usage: dict[str, Any] | None
    """`usage` as received; None when absent."""
    logprobs: list[dict[str, Any]] | None = None
    """`choices[0].logprobs.content` entries: token, logprob, top_logprobs."""
    extra: WireFacts = field(default_factory=WireFacts)
    """Facts about the wire not visible in the shape above (e.g. stream index collisions)."""

    @property
    def prompt_tokens(self) -> int | None:
        return (self.usage or {}).get("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return (self.usage or {}).get("completion_tokens")


@dataclass(frozen=True)
class Judgement:
    """What a scorer says about one response, before the framework attaches identity.

    `scoring.judge` is the one place that turns it into a `Verdict` (suite, sample id, epoch, mode,
    plus the contract findings and wire signals), as inspect_ai's Score becomes a SampleScore.
    """

    score: float | None = None
    """Primary metric in [0, 1]; None when the suite has no ground truth for this sample."""
    answer: Any = None
    """What the scorer extracted, for diffs against the golden."""
    reason: str = ""
    """Why: `correct`, `wrong_answer`, `no_answer`..."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-sample values of the suite's metrics."""
    outcome: str = "content"
    """`content`, or `contract` when the suite itself saw the envelope broken (e.g. a strict schema violated)."""
    findings: tuple["Finding", ...] = ()
    """The suite's own findings, appended after the engine's contract findings."""
    signals: dict[str, Any] = field(default_factory=dict)
    """Suite-specific observations for compare and summaries, merged over the wire signals."""


@dataclass(frozen=True)
class Finding:
    """One violation of the API or frontend contract, e.g. `tool_args_invalid_json`."""

    code: str
    """Stable, snake_case identifier; compare and report group by it."""
    detail: str = ""
    """Short human-readable evidence (truncated excerpt, offending value)."""


# ---------------------------------------------------------------- outcomes and the run header (R1)


class Outcome(StrEnum):
    """What became of one Exchange. A StrEnum, so it compares equal to the strings on disk."""

    CONTENT = "content"
    """Well-formed; judged on merit."""
    CONTRACT = "contract"
    """The envelope is broken; judged (a wrong answer) and reported as a contract finding."""
    UNSUPPORTED = "unsupported"
    """The endpoint refused a feature with a 4xx: not a model failure."""
    INFRA = "infra"
    """No usable response (connect error, timeout, 5xx): never a wrong answer."""


OUTCOMES = tuple(o.value for o in Outcome)
JUDGED = frozenset({Outcome.CONTENT, Outcome.CONTRACT})
"""Outcomes that count in accuracy: the server answered, well-formed or not."""

RUN_FORMAT = 1


@dataclass(frozen=True)
class ForcingAsked:
    """run.json's `teacher_forcing_asked`: the teacher-forcing pass a gate's (or calibration rerun's) run asked for,
    read by a resume that makes the pass the run has not made (app/collect.resumed_forcing checks each value)."""

    method: Any
    positions: Any
    calibrated: bool
    golden: Any
    """The golden's directory."""
    golden_run: Any
    """Its source run (the directory must still hold that golden)."""


@dataclass(frozen=True)
class RunSuite:
    """`run.json`'s `suites.<suite>`: what the run was made with of one suite (execution/runner writes it). A key an
    older writer left out, or an entry that is not an object, reads as None."""

    version: str | None
    dataset_sha256: str | None
    samples: int | None
    requests: int | None

    @staticmethod
    def from_dict(d: Any) -> "RunSuite":
        d = d if isinstance(d, dict) else {}
        return RunSuite(version=d.get("version"), dataset_sha256=d.get("dataset_sha256"), samples=d.get("samples"),
                        requests=d.get("requests"))


@dataclass(frozen=True)
class RunHeader:
    """`run.json`: what a run was made with. Written by `run`, `merge` and the lm-eval importer alike."""

    run_id: str
    """The run directory's name."""
    harness: dict[str, Any]
    """`{"name", "version", "git_commit"}` of the harness that wrote the run."""
    endpoint: dict[str, Any]
    """`{"base_url" (redacted), "model", "api_key_env", "header_names"}`: never a secret value."""
    sampling: dict[str, Any]
    """`{"defaults", "overrides"}` sampling parameters."""
    extra_body: dict[str, Any]
    """JSON merged into every request body."""
    epochs: int
    """Repeats per sample."""
    modes: list[str]
    """Wire modes, in request order."""
    suites: dict[str, Any]
    """Per suite: version, dataset_sha256, samples, requests."""
    started: str | None
    """ISO-8601 UTC."""
    finished: str | None = None
    """ISO-8601 UTC; None while the run is unfinished."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Optional keys written beside the above (server_info, selection, shards, imported_from...)."""
    format: int = RUN_FORMAT
    """Version of this layout; readers accept headers without it (written before it existed)."""

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "extra"}
        return {**self.extra, **d}

    @staticmethod
    def from_dict(d: "dict[str, Any]") -> "RunHeader":
        """A run.json as read (RunDir.header()): the named keys become fields, the optional ones `extra`. Lenient
        as every reader has been: a key an older writer left out reads as empty (`format` as 0: before it existed)."""
        named = {f for f in RunHeader.__dataclass_fields__ if f != "extra"}
        return RunHeader(run_id=d.get("run_id") or "", harness=d.get("harness") or {}, endpoint=d.get("endpoint") or {},
                         sampling=d.get("sampling") or {}, extra_body=d.get("extra_body") or {}, epochs=d.get("epochs") or 1,
                         modes=list(d.get("modes") or []), suites=d.get("suites") or {}, started=d.get("started"),
                         finished=d.get("finished"), format=d.get("format", 0),
                         extra={k: v for k, v in d.items() if k not in named})

    def suite_version(self, suite: str) -> str | None:
        """The version of `suite` the run was made with (None: the run has no such suite, or did not record it)."""
        return RunSuite.from_dict(self.suites.get(suite)).version

    def suite_infos(self) -> dict[str, RunSuite]:
        """`suites`, typed, in suite-name order."""
        return {name: RunSuite.from_dict(info) for name, info in sorted(self.suites.items())}

    def _object(self, key: str) -> dict[str, Any] | None:
        """An optional block of run.json (kept in `extra`) when it is an object; None when absent or of another type."""
        v = self.extra.get(key)
        return v if isinstance(v, dict) else None

    @property
    def model(self) -> str | None:
        return self.endpoint.get("model")

    @property
    def serving_adapter(self) -> str | None:
        """The serving adapter the run was sent behind (`endpoint.serving_adapter`, wire/serving_adapters.py), or None."""
        a = self.endpoint.get("serving_adapter")
        return a if isinstance(a, str) else None

    @property
    def has_gate_request(self) -> bool:
        """Whether a gate recorded what it was asked (run.json's `gate`, checked by app/gate.GateRequest.from_json)."""
        return "gate" in self.extra

    @property
    def gate_request(self) -> Any:
        """run.json's `gate` as written (unchecked: app/gate.GateRequest.from_json checks it at the edge)."""
        return self.extra.get("gate")

    @property
    def teacher_forcing(self) -> dict[str, Any] | None:
        """run.json's `teacher_forcing` block (the teacher-forcing pass's method and state), when it is an object."""
        return self._object("teacher_forcing")

    @property
    def teacher_forcing_asked(self) -> ForcingAsked | None:
        """The teacher-forcing pass the run asked for (`teacher_forcing_asked`), when it is an object."""
        v = self._object("teacher_forcing_asked")
        if v is None:
            return None
        return ForcingAsked(method=v.get("method"), positions=v.get("positions"), calibrated=v.get("calibrated") is True,
                            golden=v.get("golden"), golden_run=v.get("golden_run"))

    @property
    def probes_asked(self) -> dict[str, Any] | None:
        """The probes the run asked for (`probes_asked`: `only`, a selection, or null for the catalogue)."""
        return self._object("probes_asked")

    @property
    def resend_asked(self) -> dict[str, Any] | None:
        """The resend step the run asked for (`resend_asked`: `samples` per suite), when it is an object."""
        return self._object("resend_asked")

    @property
    def resend(self) -> dict[str, Any] | None:
        """run.json's `resend` block (the resend step's state, requests and errors), when it is an object."""
        return self._object("resend")

    @property
    def context_probe_asked(self) -> dict[str, Any] | None:
        """The context probe the run asked for (`context_probe_asked`: its `lengths`, or null for the defaults)."""
        return self._object("context_probe_asked")

    @property
    def server_info(self) -> Any:
        """What the server said of itself (`server_info`), as recorded."""
        return self.extra.get("server_info")

    @property
    def gate_of(self) -> Any:
        """The golden a gate's run was made against (`gate_of`), when a gate made it."""
        return self.extra.get("gate_of")

    @property
    def selection(self) -> Any:
        """How the run's samples were chosen (`selection`: smoke, limit, sample_seed, ids, shard, source), as recorded."""
        return self.extra.get("selection")

    @property
    def shard_set(self) -> dict[str, Any] | None:
        """A merged run's shard set (`shard_set`: inputs, n, missing, complete), when it is an object."""
        return self._object("shard_set")


DEFAULT_INFRA_BUDGET = 0.02
"""Infra error rate above which a run is incomplete, when neither the caller nor the gate's record says otherwise:
the one default every door (app/spec.CompareSpec, GateSpec), record (app/gate.GateRequest), the decision
(attribution/compare.compare) and help string reads. Here, in the base floor, so the CLI's help needs no import
of the application to print it."""


@dataclass(frozen=True)
class SuiteSummary:
    """`summary.json`'s `suites.<suite>`: what scoring counted of one suite (execution/scoring.summarize).

    Typed fields for what callers read; a key an older writer left out reads as None (or empty). The document
    itself is kept as read, so `to_json` gives it back key for key (summary.json's bytes never change)."""

    version: str | None
    """The suite's version the run was scored with."""
    requests: int | None
    """Records the run meant to send."""
    recorded: int | None
    """Verdicts scored."""
    missing: int | None
    """Requests without a verdict."""
    outcomes: dict[str, int]
    """Verdicts per outcome (`content`, `contract`, `unsupported`, `infra`)."""
    findings: dict[str, int]
    """Contract findings per code."""
    contract_rate: float | None
    """Contract failures among judged records (None: nothing judged)."""
    infra_rate: float | None
    """Infra errors among recorded verdicts (None: nothing recorded)."""
    metrics: dict[str, dict[str, Any]]
    """Per metric `{"value", "ci": [lo, hi], "n"}`."""
    latency_ms: dict[str, Any] | None
    """`{"p50", "p95"}` of the non-infra records."""
    extra: dict[str, Any] | None
    """The suite's own summary (`Suite.summarize`), e.g. BFCL's tool-call counts; None when it has none."""
    document: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    """The block as written: what `to_json` returns."""

    def to_json(self) -> dict[str, Any]:
        return _json_copy(self.document)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "SuiteSummary":
        """A block as read: shapes are checked where a caller reads them (ValueError naming the key)."""

        def obj(key: str) -> dict[str, Any]:
            v = d.get(key)
            if v is None:
                return {}
            if not isinstance(v, dict):
                raise ValueError(f"`{key}` is not an object")
            return v

        def num(key: str) -> Any:
            v = d.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"`{key}` is not a number")
            return v

        version = d.get("version")
        extra = d.get("extra")
        latency = d.get("latency_ms")
        if extra is not None and not isinstance(extra, dict):
            raise ValueError("`extra` is not an object")
        if latency is not None and not isinstance(latency, dict):
            raise ValueError("`latency_ms` is not an object")
        return SuiteSummary(version=None if version is None else str(version), requests=num("requests"),
                            recorded=num("recorded"), missing=num("missing"), outcomes=obj("outcomes"),
                            findings=obj("findings"), contract_rate=num("contract_rate"), infra_rate=num("infra_rate"),
                            metrics=obj("metrics"), latency_ms=latency, extra=extra, document=d)


@dataclass(frozen=True)
class RunSummary:
    """`summary.json`: what `verifier score` (execution/scoring.summarize) counted of a run, per suite.

    `RunDir.summary()` reads it, `from_dict` converting any older document where it is read; `to_json()` gives the
    document back exactly (the file's bytes are the same whichever way it was written)."""

    run_id: str | None
    """The run directory's name, as its run.json said when it was scored."""
    suites: dict[str, SuiteSummary]
    """Per suite, in the document's order."""
    responses_digest: dict[str, Any] | None = None
    """The digest of responses.jsonl it was scored from (written by `write_scores`; None in an older document)."""
    document: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    """The document as read or written: what `to_json` returns."""

    def to_json(self) -> dict[str, Any]:
        """summary.json, key for key."""
        return _json_copy(self.document)

    def suite(self, name: str) -> SuiteSummary | None:
        return self.suites.get(name)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "RunSummary":
        """summary.json as read (or as scoring made it). ValueError naming the key when its shape is not a summary's."""
        suites = d.get("suites", {})
        if not isinstance(suites, dict):
            raise ValueError("`suites` is not an object")
        typed = {}
        for name, block in suites.items():
            if not isinstance(block, dict):
                raise ValueError(f"`suites.{name}` is not an object")
            try:
                typed[name] = SuiteSummary.from_dict(block)
            except ValueError as e:
                raise ValueError(f"`suites.{name}`: {e}") from None
        run_id, digest = d.get("run_id"), d.get("responses_digest")
        return RunSummary(run_id=None if run_id is None else str(run_id), suites=typed,
                          responses_digest=digest if isinstance(digest, dict) else None, document=d)


def _json_copy(d: dict[str, Any]) -> dict[str, Any]:
    """A copy a caller may change without changing the value it came from (the documents are plain JSON)."""
    import copy

    return copy.deepcopy(d)


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """The scorer's judgement of one Exchange."""

    suite: str
    sample_id: str
    epoch: int
    mode: str
    outcome: str
    """`content` (well-formed, judged on merit), `contract` (envelope broken), `unsupported`
    (the endpoint refused a feature with a 4xx: not a model failure) or `infra` (never a wrong answer)."""
    score: float | None = None
    """Primary metric in [0, 1]; None when the sample could not be judged on content."""
    answer: Any = None
    """What the scorer extracted (number, tool calls, JSON object...), for diffs against the golden."""
    reason: str = ""
    """Why: `correct`, `wrong_answer`, `no_answer`, an error code..."""
    findings: tuple[Finding, ...] = ()
    """Contract findings on this response (some do not block content scoring, e.g. `usage_missing`)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-sample values of the suite's metrics (e.g. strict_match, flexible_extract); aggregated in the summary."""
    signals: dict[str, Any] = field(default_factory=dict)
    """Weight-independent observations used by compare: prompt_tokens, finish_reason, latency_ms..."""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["findings"] = [asdict(f) for f in self.findings]
        return d

    @property
    def latency_ms(self) -> float:
        """The request's (or a record's requests') time in ms, from `signals` (0.0 when it was not recorded)."""
        latency: float = self.signals.get("latency_ms") or 0.0
        return latency

    def fields(self) -> dict[str, Any]:
        """to_json's keys and values without asdict's deep copy (1 ms a gsm8k verdict), for writing only: it shares
        the verdict's values, and `safewrite.write_jsonl(..., nested_dataclasses=True)` writes it as to_json."""
        d = {name: getattr(self, name) for name in _VERDICT_FIELDS}
        d["findings"] = [{name: getattr(f, name) for name in _FINDING_FIELDS} for f in self.findings]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Verdict":
        d = dict(d)
        d["findings"] = tuple(Finding(**f) for f in d.get("findings", ()))
        return Verdict(**d)


_VERDICT_FIELDS = tuple(Verdict.__dataclass_fields__)
_FINDING_FIELDS = tuple(Finding.__dataclass_fields__)


def owner_ids(record_id: str) -> tuple[str, str]:
    """The sample ids a journal, record or step id can belong to: itself, or (a conversation's records and steps,
    `<sample id>/<suffix>`, whose sample id holds no `/`) the part before its first `/`."""
    return record_id, record_id.split("/", 1)[0]


@dataclass(frozen=True)
class Conversation:
    """How a conversation suite drives and scores one sample that is a whole conversation of many requests.

    Each request is its own Exchange in the journal, under a step id of the form `<sample id>/<suffix>`
    (the sample id itself holds no `/`). Both functions are pure, so a run killed mid-conversation is
    resumed by replaying the journaled steps through `step` (bit-identical bodies) and sending only the
    missing ones, and scoring stays a function of the journal.
    """

    step: Callable[[Sample, dict[str, Any], list[Exchange]], tuple[str, dict[str, Any]] | None]
    """(sample, the first request's body as the runner built it, this conversation's exchanges so far,
    oldest first) -> (step id of the next request, its full body), or None when the conversation is over."""
    score: Callable[[Sample, list[Exchange]], list[tuple[str, Judgement, list[int]]]]
    """(sample, its exchanges in order) -> one (record id, judgement, indexes of the exchanges it covers)
    per record in `records(sample)`: the records are what verdicts, goldens and compare see."""
    records: Callable[[Sample], list[str]]
    """The record ids of a conversation (e.g. one per user turn), known before anything is sent."""


@dataclass(frozen=True)
class Suite:
    """A benchmark: where samples come from, how to ask, how to judge.

    What a suite provides, built-in (suites/) or a plugin (an entry point naming a Suite): each callable's type is
    the contract, so `mypy --strict` checks a suite module's functions against it where it builds its Suite.
    """

    name: str
    version: str
    """Changes whenever the prompt or scoring changes; goldens of another version are refused."""
    load: Callable[[str | None, bool], Sequence[Sample]]
    """`load(data, smoke)`, called positionally: `data` (a path) overrides the default source, `smoke` asks for the
    small built-in subset. A list, or a lazy sequence that builds each sample on access (suites/lazy.py)."""
    request: Callable[[Sample], dict[str, Any]]
    """Sample -> request body (without model and sampling params, which the runner adds)."""
    score: Callable[[Sample, Parsed], Judgement]
    """Pure: same (sample, parsed) always gives the same Judgement (outcome `content` or `contract`)."""
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Sampling defaults this suite needs (e.g. a larger max_tokens for chain of thought)."""
    unsupported: Callable[[Sample, int, str], bool] | None = None
    """Whether an error status with this body means 'feature unsupported' (e.g. images on a text-only server)."""
    summarize: Callable[[list[Verdict]], dict[str, Any]] | None = None
    """Extra suite-level metrics that are not means of per-sample values."""
    conversation: Conversation | None = None
    """Multi-turn suites (several requests per sample, each built from the answers before it: replayed history,
    agent loops with tool execution): drives and scores the sample instead of one request per sample (see
    Conversation). The one multi-turn mechanism."""
    check: Callable[[Sample], str | None] | None = None
    """A sample this suite did not load itself (a golden's inputs.jsonl, a run directory's samples.jsonl) checked
    before anything is sent or scored: a one-line problem naming the sample and the field (the caller exits 2), or
    None. For data a scorer would only trip on later, e.g. the simulators' initial state of a conversation suite."""


# ----------------------------------------------------------------------------- R3: records after scoring


@dataclass(frozen=True)
class Observation:
    """One scored record as compare, calibrate and the report see it: a golden's samples.jsonl line.

    Built from a Verdict plus the parsed journal (golden.observations); `to_dict` writes exactly the
    historical row, key for key and in order, so goldens stay byte-compatible.
    """

    suite: str
    sample_id: str
    epoch: int
    mode: str
    outcome: str
    """`content` | `contract` | `unsupported` | `infra` (see Verdict.outcome)."""
    score: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-sample metric values, averaged per sample by compare."""
    answer: Any = None
    reason: str = ""
    findings: tuple[str, ...] = ()
    """Sorted, distinct contract finding codes."""
    prompt_tokens: int | None = None
    """`usage.prompt_tokens`: the chat-template / tokenizer fingerprint."""
    completion_tokens: int | None = None
    finish_reason: str | None = None
    tool_triggered: bool | None = None
    """Whether the response called a tool (K2VV trigger decision); None when not a tool sample."""
    tool_call_id_style: list[str] | None = None
    """Shapes of the tool-call ids (e.g. `functions.NAME:IDX`), for the id-format signal."""
    latency_ms: float | None = None
    content: str | None = None
    """Response text, capped (golden.MAX_CONTENT); None unless the outcome was judged."""
    logprobs: list[list[Any]] | None = None
    """[[token, logprob], ...] of the generated tokens, capped (golden.MAX_LOGPROBS)."""
    top_logprobs: list[list[list[Any]]] | None = None
    """Per generated token, the alternatives the server returned ([[token, logprob], ...], capped at
    golden.MAX_TOP), on greedy (temperature 0) records only: what signals.decoding_changed reads at the
    position where the output parts from the golden's. Not written into goldens (bless drops it)."""
    sent: int | None = None
    """The record's send sequence number in its run (Exchange.sent; a conversation's: its first request's): which of
    a sample's repeats went out first. None: not recorded (an older journal or golden)."""
    cached_tokens: int | None = None
    """The prompt tokens the usage reported as cached (`prompt_tokens_details.cached_tokens`, Responses'
    `input_tokens_details`, Messages' `cache_read_input_tokens`); None where the usage did not report the figure."""
    resent: bool | None = None
    """True on a record of the gate's resend step (resends.jsonl, execution/resend.py): the request sent again, alone,
    after the run. Never written into a row: compare builds these records from the run's resends.jsonl."""

    @property
    def judged(self) -> bool:
        """Judged on the merits or for its envelope: an answer exists to compare."""
        return self.outcome in JUDGED

    @property
    def clean(self) -> bool:
        """A clean envelope: the only records numerics signals use."""
        return self.outcome == "content"

    @property
    def tokens(self) -> list[str]:
        return [t for t, _ in self.logprobs or []]

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["findings"] = list(self.findings)
        for k in OPTIONAL_ROW_KEYS:
            if d[k] is None:
                del d[k]  # the historical row, key for key, where there are none
        return d

    @staticmethod
    def from_verdict(v: Verdict, content: str | None = None, logprobs: list[list[Any]] | None = None,
                     top_logprobs: list[list[list[Any]]] | None = None) -> "Observation":
        """The one place a scored Verdict becomes an observation row (content and logprobs come from the journal)."""
        s = v.signals
        return Observation(
            suite=v.suite, sample_id=v.sample_id, epoch=v.epoch, mode=v.mode, outcome=v.outcome, score=v.score,
            metrics=v.metrics, answer=v.answer, reason=v.reason, findings=tuple(sorted({f.code for f in v.findings})),
            prompt_tokens=s.get("prompt_tokens"), completion_tokens=s.get("completion_tokens"),
            finish_reason=s.get("finish_reason"), tool_triggered=s.get("tool_triggered"),
            tool_call_id_style=s.get("tool_call_id_style"), latency_ms=s.get("latency_ms"),
            content=content, logprobs=logprobs, top_logprobs=top_logprobs,
            sent=s.get("sent"), cached_tokens=s.get("cached_tokens"),
        )

    @staticmethod
    def from_dict(d: "dict[str, Any] | Observation") -> "Observation":
        """Tolerant of older goldens and hand-built rows: missing keys take their defaults, unknown keys are ignored."""
        if isinstance(d, Observation):
            return d
        known = {k: v for k, v in d.items() if k in _OBSERVATION_FIELDS}
        known["findings"] = tuple(known.get("findings") or ())
        known["metrics"] = known.get("metrics") or {}
        return Observation(**known)


_OBSERVATION_FIELDS = frozenset(Observation.__dataclass_fields__)
OPTIONAL_ROW_KEYS = ("top_logprobs", "sent", "cached_tokens", "resent")
"""Observation fields written into a row only when set: rows (and goldens) without them stay byte for byte as they were."""


@dataclass(frozen=True)
class Evidence:
    """One line of a verdict's evidence in comparison.json: which signal, where, what it decided and why."""

    signal: str
    """`quality`, a signal name (`new_findings`, ...), `logprob_drift` or `probe:<name>`."""
    suite: str
    """Suite name, or `*` for run-wide evidence (probes)."""
    verdict: str
    """`pass` | `fail` | `inconclusive`."""
    summary: str
    """One line for a human: counts, rates, intervals, margins."""
    metric: str | None = None
    """For quality evidence: the metric (or `*` when none was measurable)."""
    samples: tuple[str, ...] | None = None
    """Example sample ids where the signal fired (at most 10)."""
    modes: dict[str, int] | None = None
    """Wire modes the signal fired on, with sample counts: names the surface a frontend bug sits on."""
    component: str | None = None
    """The component run-wide evidence implicates when it says so itself (a probe's own declaration)."""
    qualifier: str | None = None
    """Why a verdict is not a plain one, for readers: `not_measured` (a pass with nothing to judge, e.g. the golden
    has no clean sample), `reference_fails` (a probe the candidate failed, as the golden did too) or `uncalibrated`
    (the golden has no margin for it and it fired: inconclusive for this signal, never a failure) or `confounded` (a
    follow-up divergence while the numerics moved too: compare._followup_confounded)."""

    def to_dict(self) -> dict[str, Any]:
        # The historical key order: signal, suite, [metric], verdict, summary, [samples].
        d: dict[str, Any] = {"signal": self.signal, "suite": self.suite}
        if self.metric is not None:
            d["metric"] = self.metric
        d.update(verdict=self.verdict, summary=self.summary)
        if self.samples is not None:
            d["samples"] = list(self.samples)
        if self.modes:
            d["modes"] = dict(self.modes)
        if self.component:
            d["component"] = self.component
        if self.qualifier:
            d["qualifier"] = self.qualifier
        return d

    @staticmethod
    def from_dict(d: "dict[str, Any]") -> "Evidence":
        """An evidence item of comparison.json (the inverse of to_dict; ValueError on a key it does not know)."""
        unknown = set(d) - _EVIDENCE_KEYS
        if unknown:
            raise ValueError(f"evidence item with unknown keys {sorted(unknown)}")
        samples = d.get("samples")
        return Evidence(signal=d["signal"], suite=d["suite"], verdict=d["verdict"], summary=d["summary"], metric=d.get("metric"),
                        samples=None if samples is None else tuple(samples), modes=d.get("modes"),
                        component=d.get("component"), qualifier=d.get("qualifier"))


_EVIDENCE_KEYS = frozenset({"signal", "suite", "metric", "verdict", "summary", "samples", "modes", "component", "qualifier"})
