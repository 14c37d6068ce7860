"""The feature-contract probes: one declaration per probe (its requests, the surfaces it runs on, a pure check,
the frontend component it implicates), run on every surface a run (or the golden it gates against) records.

A probe is a few raw requests and a pure check on what came back (probe_checks.py). Requests are written as chat
bodies and sent to each surface through the same translator the suites use (its adapter in verifier/surfaces/), so
`stop` becomes `stop_sequences` and a named `tool_choice` becomes `{"type": "tool"}` on Messages; a request marked
`native` is already in its surface's own shape (previous_response_id, system blocks, count_tokens).

Results are compared with the golden's (probe_results.judge): only a probe the reference passed and the
candidate fails is a frontend regression, of the probe's component; one the reference fails too is reported,
not blamed (engines legitimately clamp instead of refusing, or have no stored responses).
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from verifier.execution import probe_checks as pc
from verifier.execution import probe_results
from verifier import scrub
from verifier.surfaces.messages import to_messages
from verifier.surfaces.registry import REFERENCE_SURFACE, SURFACE_NAMES, mode_named, translate

if TYPE_CHECKING:
    from verifier.wire.endpoint import Endpoint

from verifier.execution.layout import PROBES as FILE
ALL = SURFACE_NAMES
CHAT_ONLY = (REFERENCE_SURFACE,)

Body = dict[str, Any] | Callable[[list[pc.Answer]], dict[str, Any] | None]


@dataclass(frozen=True)
class Req:
    """One request of a probe. `body` is a chat body (translated per surface) unless `native`; a callable builds
    it from the answers before it (a second turn), and returning None skips it."""

    body: Body
    stream: bool = False
    native: bool = False
    path: str | None = None
    """Another route than the surface's own (e.g. `/messages/count_tokens`)."""
    together: bool = False
    """Sent at once with the requests next to it also marked `together` (one concurrent batch), after every request
    before the batch was answered; a body built from earlier answers sees those before the batch only."""


@dataclass(frozen=True)
class Probe:
    name: str
    component: str
    """The diagnosis component a regression of this probe implicates (diagnosis.COMPONENTS)."""
    sends: str
    checks: str
    requests: tuple[Req, ...]
    check: Callable[[list[pc.Answer]], pc.Seen]
    surfaces: tuple[str, ...] = CHAT_ONLY
    compare: Callable[[Any, Any], tuple[bool, str]] | None = None
    """For a probe that measures a value: candidate value vs the reference's -> (same, detail)."""
    reads_output: bool = False
    """Its check reads what the model chose to write (a string appearing in the output, two outputs agreeing, a
    tool call the model must make first): other weights write otherwise. Its failure is frontend evidence only
    where the sample-level numerics are the reference's (compare reads it with the drift and parting); a check of
    what the feature itself controls (a refusal, a token cap, a grammar, an event shape) is evidence by itself."""
    moves_outputs: bool = False
    """Its own check failing shows the server changing what the model writes by itself (generation-config defaults
    applied where the request set none, temperature 0 not greedy): then every probe whose evidence is what the model
    wrote (`reads_output`, or a passing check whose greedy text moved) is no evidence against its own component, as
    where the sample-level numerics moved (compare holds it inconclusive, naming this probe)."""


COUNT = [{"role": "user", "content": "Count from 1 to 30, separated by spaces."}]
HELLO = [{"role": "user", "content": "Say hello in one word."}]
# 30 repeats of one word: every penalty on repeated tokens (repetition, presence, frequency) grows with the output
# and shows; five repeats of a strongly predicted word went through a repetition_penalty of 1.1 unchanged.
REPEAT = [{"role": "user", "content": "Repeat the word hello 30 times, separated by spaces."}]
# Counting with every number written twice: an output that must repeat tokens all along (and numbers, not one word a
# model predicts whatever the penalty), so a penalty on repeated tokens applied by default shows on it.
PAIRS = [{"role": "user", "content": "Write each number from 1 to 20 twice, separated by spaces."}]
ASK_WEATHER = [{"role": "user", "content": "Call get_weather for Paris."}]
ASK_TWO = [{"role": "user", "content": "Call get_weather for Paris, then call get_weather for Lyon."}]
SUM = [{"role": "user", "content": "What is 2 + 3? Reply with the number only."}]
# The engine-state probe's prompts: one long shared prefix (what a prefix cache keeps and a speculative decoder reuses),
# two questions after it. Asked cold, then after the other question warmed the prefix, then again.
SHARED_PREFIX = ("You are a calculator. Read the question, work it out, and reply with the number only. "
                 "Numbers may be negative; never add words, units or punctuation. ") * 4
STATE_A = [{"role": "system", "content": SHARED_PREFIX}, {"role": "user", "content": "What is 17 + 25?"}]
STATE_B = [{"role": "system", "content": SHARED_PREFIX}, {"role": "user", "content": "What is 38 + 46?"}]
STATE_C = [{"role": "system", "content": SHARED_PREFIX}, {"role": "user", "content": "What is 59 + 13?"}]
LP = {"logprobs": True, "top_logprobs": 1}


def _tool(name: str, what: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": what, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


WEATHER, TIME = _tool("get_weather", "Current weather in a city."), _tool("get_time", "Current local time in a city.")
G = {"temperature": 0.0}

# A schema no model would satisfy unprompted: if response_format is applied, the output must match it.
FORCED_SCHEMA = {"type": "object", "properties": {"probe_code": {"type": "integer", "enum": [777]}},
                 "required": ["probe_code"], "additionalProperties": False}
ORDER = ["zeta", "alpha", "mid"]
ORDERED_SCHEMA = {"type": "object", "properties": {k: {"type": "string", "enum": [f"{k}-value"]} for k in ORDER},
                  "required": ORDER, "additionalProperties": False}
NEUTRAL = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_k": -1, "min_p": 0.0}
"""Every sampling extension at the value that changes nothing (top_k -1: off on vLLM and llama.cpp alike)."""
THINK = {"chat_template_kwargs": {"enable_thinking": True}}


def _png(size: int = 16, rgb: tuple[int, int, int] = (200, 30, 30)) -> str:
    """A solid-colour PNG as a data URL, built byte for byte here (the same bytes on every run and machine)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


ORACLE: tuple[list[dict[str, Any]], ...] = (
    [{"role": "user", "content": "Hello."}],
    [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "Name three colours."}],
    [{"role": "user", "content": "Translate into French: good morning, my friend."}],
    [{"role": "user", "content": [{"type": "text", "text": "What colour is this image?"},
                                  {"type": "image_url", "image_url": {"url": _png()}}]}],
)
"""The prompt-token oracle: fixed text and image prompts, independent of any suite; each one's prompt_tokens
must equal the reference's (a +3 skew from a template stub shows on every one)."""


def _second_turn(prev: list[pc.Answer]) -> dict[str, Any] | None:
    """Turn 2 replays turn 1's answer with its reasoning, as a client keeps thinking across turns."""
    p = prev[0].parsed
    if p is None:
        return None
    assistant: dict[str, Any] = {"role": "assistant", "content": p.content or ""}
    if p.reasoning:
        assistant["reasoning_content"] = p.reasoning
    return {**G, **THINK, "max_tokens": 16, "messages": SUM + [assistant, {"role": "user", "content": "And 4 + 4?"}]}


def _tool_result(prev: list[pc.Answer]) -> dict[str, Any] | None:
    p = prev[0].parsed
    calls = (p.tool_calls or []) if p else []
    if not calls:
        return None
    c = calls[0]
    return {**G, "max_tokens": 32, "tools": [WEATHER], "messages": ASK_WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [c]},
        {"role": "tool", "tool_call_id": c.get("id"), "content": json.dumps({"city": "Paris", "temp_c": 21})}]}


def _response_id(prev: list[pc.Answer]) -> str | None:
    body = prev[0].json()
    rid = body.get("id") if isinstance(body, dict) else None
    return rid if isinstance(rid, str) else None


def _follow_up(prev: list[pc.Answer]) -> dict[str, Any] | None:
    rid = _response_id(prev)
    return None if rid is None else {"input": "What is my name?", "previous_response_id": rid, "max_output_tokens": 8, **G}


SYSTEM_TEXT = "You are a careful assistant. Answer in one short sentence."
LONG_SYSTEM_TEXT = SYSTEM_TEXT + (" Be polite and plain; use common words a child would know; never mention these instructions;"
                                  " do not add a greeting or a closing line; do not use lists, headings or emphasis; when unsure,"
                                  " say so in a few words rather than guess.")
"""Why two system prompts, not one against none: a template may insert its own default system prompt when none is
given (Qwen2.5's is longer than SYSTEM_TEXT), so "fewer tokens with one than without" says nothing. Two given system
prompts of different lengths replace any default alike: only a frontend that drops them counts the same tokens."""
_MSG_SYSTEM = {k: v for k, v in to_messages({"messages": HELLO, "max_tokens": 8, **G}).items() if k != "model"}

CATALOGUE: tuple[Probe, ...] = (
    Probe("rejects_negative_temperature", "API validation", "temperature -1", "refused with a 4xx",
          (Req({"temperature": -1.0, "max_tokens": 8, "messages": COUNT}),), pc.refused, ALL),
    Probe("rejects_top_p_above_1", "API validation", "top_p 2", "refused with a 4xx",
          (Req({"top_p": 2.0, "max_tokens": 8, "messages": COUNT}),), pc.refused, ALL),
    Probe("max_tokens_honoured", "API validation", "max_tokens 1", "finish_reason length, at most 2 tokens",
          (Req({**G, "max_tokens": 1, "messages": COUNT}),), pc.one_token, ALL),
    Probe("max_completion_tokens_honoured", "API validation", "max_completion_tokens 1 (no max_tokens)",
          "finish_reason length, at most 2 tokens", (Req({**G, "max_completion_tokens": 1, "messages": COUNT}),), pc.one_token),
    Probe("temperature_0_deterministic", "API validation", "the same temperature-0 request 3 times (seeds 1, 2, 3)",
          "one output", tuple(Req({**G, "max_tokens": 48, "seed": s, "messages": COUNT}) for s in (1, 2, 3)), pc.same_text, ALL,
          moves_outputs=True),
    Probe("neutral_sampling_defaults", "API validation",
          "a greedy request without sampling extensions, then with repetition_penalty 1, presence/frequency_penalty 0, top_k -1, min_p 0",
          "the same output (a server applying generation-config defaults when they are absent fails)",
          (Req({**G, "max_tokens": 80, "messages": REPEAT}), Req({**G, **NEUTRAL, "max_tokens": 80, "messages": REPEAT})),
          pc.neutral_same_as_none, reads_output=True, moves_outputs=True),
    Probe("neutral_defaults_on_repeats", "API validation",
          "counting with each number written twice (\"1 1 2 2 ...\"), without sampling extensions, then with the neutral values",
          "the same output, its repeats kept (a penalty a server applies when the request sets none drops them)",
          (Req({**G, "max_tokens": 128, "messages": PAIRS}), Req({**G, **NEUTRAL, "max_tokens": 128, "messages": PAIRS})),
          pc.neutral_same_on_repeats, reads_output=True, moves_outputs=True),
    Probe("stop_honoured", "API validation", "counting without stop, then with stop [\"5\"] (Messages: stop_sequences)",
          "the output ends where the stop string would start, without it; finish_reason stop",
          (Req({**G, "max_tokens": 64, "messages": COUNT}), Req({**G, "max_tokens": 64, "stop": ["5"], "messages": COUNT})),
          pc.stop_honoured("5"), ("chat", "messages"), reads_output=True),
    Probe("n_honoured", "API validation", "n 2", "two choices, or a 4xx; never silently one",
          (Req({**G, "n": 2, "max_tokens": 8, "messages": HELLO}),), pc.n_choices(2)),
    Probe("seed_reproducible", "API validation", "the same temperature-1 request twice with seed 7", "one output",
          (Req({"temperature": 1.0, "seed": 7, "max_tokens": 24, "messages": HELLO}),) * 2, pc.same_text),
    Probe("logit_bias_honoured", "API validation", "a greedy request, then with logit_bias {\"100\": 100}",
          "the output changes, or the bias is refused with a 4xx",
          (Req({**G, "max_tokens": 8, "messages": HELLO}), Req({**G, "max_tokens": 8, "logit_bias": {"100": 100}, "messages": HELLO})),
          pc.effect_or_refusal),
    Probe("tool_choice_none", "API validation", "a request asking for get_weather, tool_choice none", "no tool call",
          (Req({**G, "max_tokens": 48, "tools": [WEATHER], "tool_choice": "none", "messages": ASK_WEATHER}),), pc.no_call, ALL),
    Probe("tool_choice_required", "API validation", "\"say hello\" with a tool declared, tool_choice required (Messages: any)",
          "a tool call", (Req({**G, "max_tokens": 48, "tools": [WEATHER], "tool_choice": "required", "messages": HELLO}),),
          pc.some_call, ALL),
    Probe("tool_choice_named", "API validation", "a request asking for get_weather, tool_choice naming get_time (Messages: tool)",
          "exactly get_time calls", (Req({**G, "max_tokens": 48, "tools": [WEATHER, TIME], "messages": ASK_WEATHER,
                                          "tool_choice": {"type": "function", "function": {"name": "get_time"}}}),),
          pc.named_call("get_time"), ALL),
    Probe("parallel_tool_calls_false", "API validation", "a request asking for two get_weather calls, parallel_tool_calls false",
          "at most one call", (Req({**G, "max_tokens": 96, "tools": [WEATHER], "parallel_tool_calls": False, "messages": ASK_TWO}),),
          pc.at_most_one_call, ("chat", "responses")),
    Probe("no_undeclared_tool", "tool-call parser", "a request asking for get_weather with get_weather declared",
          "every call names a declared tool", (Req({**G, "max_tokens": 48, "tools": [WEATHER], "messages": ASK_WEATHER}),),
          pc.declared_only({"get_weather"}), ALL),
    Probe("response_format_honoured", "structured-output backend", "a strict json_schema only {\"probe_code\": 777} satisfies",
          "exactly that object", (Req({**G, "max_tokens": 32, "messages": COUNT, "response_format": {
              "type": "json_schema", "json_schema": {"name": "probe", "strict": True, "schema": FORCED_SCHEMA}}}),),
          pc.forced_schema, ALL),
    Probe("json_object_honoured", "structured-output backend", "response_format json_object", "a JSON object",
          (Req({**G, "max_tokens": 32, "response_format": {"type": "json_object"}, "messages": [
              {"role": "user", "content": "Reply with a JSON object whose key answer holds the word yes."}]}),),
          pc.json_object, ("chat", "responses")),
    Probe("json_key_order_kept", "structured-output backend", "a strict json_schema with properties zeta, alpha, mid",
          "the keys in the schema's order", (Req({**G, "max_tokens": 48, "messages": HELLO, "response_format": {
              "type": "json_schema", "json_schema": {"name": "ordered", "strict": True, "schema": ORDERED_SCHEMA}}}),),
          pc.key_order(ORDER), ALL),
    Probe("stream_usage_last_chunk", "response formatting & usage",
          "the same request plain, then streamed with stream_options.include_usage",
          "usage in the last chunk only, equal to the non-streamed usage",
          (Req({**G, "max_tokens": 16, "messages": COUNT}),
           Req({**G, "max_tokens": 16, "messages": COUNT, "stream_options": {"include_usage": True}}, stream=True)),
          pc.usage_last_only),
    Probe("reasoning_content_separate", "reasoning parser", "a streamed request with thinking on",
          "no delta carries reasoning and content together",
          (Req({**G, **THINK, "max_tokens": 64, "messages": SUM}, stream=True),), pc.reasoning_apart),
    Probe("stream_packet_sizes", "stream assembly", "a streamed counting request",
          "content packets per token like the reference's: none larger than twice its largest, their mean size within "
          "4x of its mean (how many depends on what the model writes; how big each is, on the stream assembly)",
          (Req({**G, "max_tokens": 48, "messages": COUNT}, stream=True),), pc.packet_sizes, ALL, pc.packet_sizes_within,
          reads_output=True),
    Probe("thinking_off_honoured", "reasoning parser", "chat_template_kwargs.enable_thinking false", "no reasoning, no <think> in content",
          (Req({**G, "max_tokens": 48, "chat_template_kwargs": {"enable_thinking": False}, "messages": SUM}),), pc.thinking_off),
    Probe("thinking_on_honoured", "reasoning parser", "chat_template_kwargs.enable_thinking true", "reasoning returned apart from content",
          (Req({**G, **THINK, "max_tokens": 64, "messages": SUM}),), pc.thinking_on),
    Probe("reasoning_effort_honoured", "reasoning parser", "reasoning_effort low, then high", "less reasoning at low than at high",
          (Req({**G, "max_tokens": 96, "reasoning_effort": "low", "messages": SUM}),
           Req({**G, "max_tokens": 96, "reasoning_effort": "high", "messages": SUM})), pc.effort_orders, reads_output=True),
    Probe("thinking_kept_across_turns", "chat template & tokenization",
          "turn 1 with thinking on, turn 2 replaying its answer and reasoning",
          "turn 2's prompt_tokens equal the reference's (reasoning replayed or dropped as the template says)",
          (Req({**G, **THINK, "max_tokens": 16, "messages": SUM}), Req(_second_turn)), pc.prompt_tokens_value, ALL,
          pc.equal_where_measured, reads_output=True),  # turn 2's prompt holds turn 1's answer: other weights, other tokens
    Probe("prompt_tokens_oracle", "chat template & tokenization", f"{len(ORACLE)} fixed prompts (text, a system prompt, an image)",
          "each prompt_tokens equals the reference's", tuple(Req({**G, "max_tokens": 1, "messages": m}) for m in ORACLE),
          pc.prompt_tokens_value, ALL, pc.equal_where_measured),
    Probe("system_prompt_honoured", "surface translation",
          "a prompt with a short system prompt, then with a longer one (Responses: instructions)",
          "more prompt_tokens with the longer one", (Req({**G, "max_tokens": 8, "messages": [{"role": "system", "content": SYSTEM_TEXT}] + HELLO}),
                                                     Req({**G, "max_tokens": 8, "messages": [{"role": "system", "content": LONG_SYSTEM_TEXT}] + HELLO})),
          pc.longer_system_more_tokens, ALL),
    Probe("messages_system_blocks", "surface translation", "system as a string, then as a list of text blocks",
          "the same prompt_tokens", (Req({**_MSG_SYSTEM, "system": SYSTEM_TEXT}, native=True),
                                     Req({**_MSG_SYSTEM, "system": [{"type": "text", "text": SYSTEM_TEXT}]}, native=True)),
          pc.same_prompt_tokens, ("messages",)),
    Probe("count_tokens_matches_usage", "surface translation", "a Messages request, then /v1/messages/count_tokens of it",
          "input_tokens equal to the request's usage (cache reads included)",
          (Req({**_MSG_SYSTEM}, native=True), Req({k: v for k, v in _MSG_SYSTEM.items() if k != "max_tokens"}, native=True,
                                                  path="/messages/count_tokens")),
          pc.count_tokens_match, ("messages",)),
    Probe("responses_previous_response_id", "surface translation",
          "a stored response, a follow-up with previous_response_id, the follow-up alone",
          "the follow-up is served with the stored turn in its prompt (more prompt_tokens than alone)",
          (Req({"input": "My name is Zed. Reply with ok.", "max_output_tokens": 8, "store": True, **G}, native=True),
           Req(_follow_up, native=True), Req({"input": "What is my name?", "max_output_tokens": 8, **G}, native=True)),
          pc.previous_kept, ("responses",)),
    Probe("responses_store_false", "surface translation", "a response with store false, then previous_response_id of it",
          "the follow-up is refused with a 4xx (nothing was stored)",
          (Req({"input": "My name is Zed. Reply with ok.", "max_output_tokens": 8, "store": False, **G}, native=True),
           Req(_follow_up, native=True)), pc.store_false_refused, ("responses",)),
    Probe("function_call_round_trip", "surface translation", "a request asking for get_weather, then its call with the tool's result",
          "the result is accepted and answered with text; the answer's prompt_tokens equal the reference's",
          (Req({**G, "max_tokens": 48, "tools": [WEATHER], "messages": ASK_WEATHER}), Req(_tool_result)), pc.round_trip, ALL,
          pc.equal_where_measured, reads_output=True),
    Probe("state_repeat_after_shared_prefix", "engine state",
          "a greedy question after a long prefix (cold), another question sharing the prefix, the first again (warm)",
          "the first question's two answers are one text (or part only at a near-tie: logprob under log 0.6)",
          (Req({**G, **LP, "max_tokens": 16, "messages": STATE_A}), Req({**G, **LP, "max_tokens": 16, "messages": STATE_B}),
           Req({**G, **LP, "max_tokens": 16, "messages": STATE_A})), pc.cold_equals_warm),
    Probe("state_repeat_under_concurrency", "engine state",
          "a greedy question after a long prefix (cold, alone), then at once: two other questions sharing the prefix and "
          "the first question twice (warm, in one concurrent batch)",
          "each warm answer to the first question equals the cold one (or parts only at a near-tie: logprob under log 0.6)",
          (Req({**G, **LP, "max_tokens": 16, "messages": STATE_A}),
           Req({**G, **LP, "max_tokens": 16, "messages": STATE_B}, together=True),
           Req({**G, **LP, "max_tokens": 16, "messages": STATE_A}, together=True),
           Req({**G, **LP, "max_tokens": 16, "messages": STATE_C}, together=True),
           Req({**G, **LP, "max_tokens": 16, "messages": STATE_A}, together=True)), pc.cold_equals_warm_in_batch),
    Probe("cached_tokens_on_repeat", "response formatting & usage", "one prompt sent twice",
          "cached_tokens never above prompt_tokens; on the repeat, cached tokens where the reference reported them",
          (Req({**G, "max_tokens": 8, "messages": STATE_A}), Req({**G, "max_tokens": 8, "messages": STATE_A})),
          pc.cached_tokens_counted, CHAT_ONLY, pc.cached_where_reference_cached),
    Probe("stream_terminal_event", "surface translation", "a streamed request", "exactly one terminal event, last",
          (Req({**G, "max_tokens": 8, "messages": HELLO}, stream=True),), pc.terminal_event, ("responses", "messages")),
)
PROBES: dict[str, Probe] = {p.name: p for p in CATALOGUE}
COMPONENTS: dict[str, str] = {p.name: p.component for p in CATALOGUE}
COMPARATORS = {p.name: p.compare for p in CATALOGUE if p.compare is not None}
READS_OUTPUT = frozenset(p.name for p in CATALOGUE if p.reads_output)
MOVES_OUTPUTS = frozenset(p.name for p in CATALOGUE if p.moves_outputs)
BATCHED = frozenset(p.name for p in CATALOGUE if any(r.together for r in p.requests))


def _body(req: Req, surface: str, model: str, extra_body: dict[str, Any], prev: list[pc.Answer]) -> dict[str, Any] | None:
    raw = req.body(prev) if callable(req.body) else req.body
    if raw is None:
        return None
    if req.native:
        return {"model": model, **raw, **({"stream": True} if req.stream else {})}
    body = {"model": model, **extra_body, **raw}
    return translate(mode_named(surface, req.stream), body)


def _batches(requests: tuple[Req, ...]) -> list[list[Req]]:
    """The probe's requests in sending order: each alone, but neighbours marked `together` in one batch."""
    out: list[list[Req]] = []
    for req in requests:
        if req.together and out and out[-1][-1].together:
            out[-1].append(req)
        else:
            out.append([req])
    return out


async def run_one(ep: "Endpoint", probe: Probe, surface: str, model: str, extra_body: dict[str, Any]) -> dict[str, Any]:
    answers: list[pc.Answer] = []
    modes: list[str] = []

    async def send(req: Req, body: dict[str, Any], mode: str) -> pc.Answer:
        r = await ep.send(mode, body, path=req.path)
        # Scrubbed before any check quotes (and cuts) the text: a cut secret no longer matches its whole value.
        text = scrub.text(r.body) if isinstance(r.body, str) else r.body
        chunks = [scrub.text(c) for c in r.chunks] if r.chunks is not None else None
        return pc.answer(surface, mode, r.status, text, chunks, r.error, body)

    for batch in _batches(probe.requests):
        before = list(answers)  # a body is built from the answers before its batch
        sends: list[Any] = []
        for req in batch:
            body = _body(req, surface, model, extra_body, before)
            mode = mode_named(surface, req.stream) if body is not None else ""
            sends.append((req, body, mode))
        got = await asyncio.gather(*(send(req, body, mode) for req, body, mode in sends if body is not None))
        it = iter(got)
        for _, body, mode in sends:
            modes.append(mode)
            answers.append(next(it) if body is not None else
                           pc.Answer(None, None, None, "skipped: the request before it failed", surface))
    infra = next((a.error for a in answers if a.error and not a.error.startswith("skipped")), None)
    if infra is not None:  # transport failure, timeout, 5xx after retries: no evidence either way, never a failure
        return {"probe": probe.name, "surface": surface, "component": probe.component, "passed": False, "infra": infra,
                "detail": f"infra error: {infra}"}
    seen = probe.check(answers)
    out = {"probe": probe.name, "surface": surface, "component": probe.component, "passed": bool(seen.passed),
           "detail": seen.detail}
    if seen.value is not None:
        out["value"] = seen.value
    out["exchanges"] = [probe_results.exchange_facts(a.sent, a.parsed, m) for a, m in zip(answers, modes)]
    return out


def selection(recorded: dict[str, Any] | None) -> frozenset[str]:
    """What a gate reruns by default: exactly the probe results its golden recorded, as `<probe>@<surface>` keys (a
    bare name of an old golden is its chat result). A probe the golden does not have could only be reported "not in
    golden", never judged: sending it costs time and proves nothing."""
    return frozenset(probe_results.normalize(recorded))


def wanted(only: frozenset[str] | set[str] | None, probe: str, surface: str) -> bool:
    """`only` names probes (`tool_choice_none`: on every surface) or single results (`tool_choice_none@chat`); None: all."""
    return only is None or probe in only or probe_results.key(probe, surface) in only


async def run_probes(ep: "Endpoint", model: str, extra_body: dict[str, Any], surfaces: list[str] | tuple[str, ...] = CHAT_ONLY,
                     only: frozenset[str] | set[str] | None = None) -> dict[str, Any]:
    """Every probe of the catalogue on every surface it applies to among `surfaces` (or only those `only` names, see
    `wanted`; a gate passes `selection(golden probes)`), one after another (concurrent requests change the batch,
    and with it greedy outputs on some engines; only a probe's own `together` batch is sent at once); keyed
    `<probe>@<surface>`."""
    out: dict[str, Any] = {}
    for probe in CATALOGUE:
        for surface in probe.surfaces:
            if surface in surfaces and wanted(only, probe.name, surface):
                out[probe_results.key(probe.name, surface)] = await run_one(ep, probe, surface, model, dict(extra_body))
    return out


def judge(candidate: dict[str, Any] | None, golden: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The conformance table of a run's probe results against the golden's."""
    return probe_results.judge(candidate, golden, COMPONENTS, COMPARATORS, READS_OUTPUT, MOVES_OUTPUTS, BATCHED)


def verdicts(candidate: dict[str, Any], golden: dict[str, Any] | None) -> dict[str, Any]:
    """Probe results -> evidence items: fail only where the reference passed."""
    return probe_results.evidence(judge(candidate, golden))


def catalogue_table() -> list[tuple[str, str, str, str, str]]:
    """(probe, surfaces, what it sends, what it checks, component): the table of docs/reference/probes.md (scripts/probe_catalogue.py)."""
    return [(p.name, ", ".join(p.surfaces), p.sends, p.checks, p.component) for p in CATALOGUE]


def dumps(results: dict[str, Any]) -> str:
    return json.dumps(results, sort_keys=True, indent=1)
