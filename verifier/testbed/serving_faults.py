"""Faults of the serving bugs filed in 2026 (issue 47): answers that depend on engine state, streamed tool-call
arguments that lose content when several tokens arrive in one delta, argument values mangled by a parser, a forcing
`tool_choice` answered without a call, cached-token accounting, and `response_format` not enforced with reasoning on.

Pure functions and stream mutators only, like the rest of the catalogue (mutation.py); the proxy applies them, on the
Responses and Messages surfaces by translation (surface_faults.py). Some need more than a body: `Fault.when` (the
request they act on), `Fault.on_repeat` (only the second and later sends of one prompt) and `Fault.with_shared_prefix`
(only requests in flight together with another prompt sharing their first message), which the proxy reads.
They live in SERVING_FAULTS; faults.ALL_FAULTS holds every table.
"""

from __future__ import annotations

import json
import re
from typing import Any

from verifier.judge import contract

from . import tool_faults as tool
from .mutation import Fault, Pairs, StreamMutator, choices_of, pure_edit
from .text_faults import drop_keys

# ----------------------------------------------------------------------------- engine state

DIGIT_SHIFT = str.maketrans("0123456789", "1234567891")
"""Every digit one up (9 becomes 1, never 0: no number gains a leading zero, so JSON numbers stay JSON)."""


def _shift(s: str) -> str:
    return s.translate(DIGIT_SHIFT)


def shift_numbers(d: dict[str, Any]) -> Pairs:
    """Every digit of the answer one up, in the content, the tool-call arguments and the logprob tokens (the chosen
    one and its alternatives) alike, logprob values kept: another generation, consistent in every view of it, with
    no drift on the tokens before it. What a prefix cache or a speculative decoder serving stale state does to a
    repeat of a prompt it has seen (the first send is right)."""
    pairs: Pairs = []
    for c in choices_of(d):
        for part in (c.get("message"), c.get("delta")):
            if not isinstance(part, dict):
                continue
            text = part.get("content")
            if isinstance(text, str) and _shift(text) != text:
                pairs.append((text, _shift(text)))
                part["content"] = _shift(text)
            for tc in part.get("tool_calls") or []:
                fn = tc.get("function") if isinstance(tc, dict) else None
                args = fn.get("arguments") if isinstance(fn, dict) else None
                if isinstance(args, str) and _shift(args) != args:
                    pairs.append((args, _shift(args)))
                    fn["arguments"] = _shift(args)  # type: ignore[index]
        lp = c.get("logprobs")
        for entry in (lp.get("content") if isinstance(lp, dict) else None) or []:
            if not isinstance(entry, dict):
                continue
            for alt in [entry] + [a for a in entry.get("top_logprobs") or [] if isinstance(a, dict)]:
                if isinstance(alt.get("token"), str):
                    alt["token"] = _shift(alt["token"])
                    if isinstance(alt.get("bytes"), list):
                        alt["bytes"] = list(alt["token"].encode("utf-8"))
    return pairs


class _PerChunkShift(StreamMutator):
    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pairs = shift_numbers(d)
        for before, after in pairs[:1]:
            self.note(before, after)
        return [d] if pairs or any(isinstance(c.get("logprobs"), dict) for c in choices_of(d)) else None


# ----------------------------------------------------------------------------- tool-call arguments


def _edit_args(arguments: str, edit: Any, numbers: Any = None) -> str | None:
    try:
        val = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return None

    def walk(x: Any) -> Any:
        if isinstance(x, str):
            return edit(x)
        if numbers is not None and isinstance(x, (int, float)) and not isinstance(x, bool):
            return numbers(x)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    new = walk(val)
    out = json.dumps(new, ensure_ascii=False)
    return out if out != json.dumps(val, ensure_ascii=False) else None


FIRST_PIECE = re.compile(r"\s*\S+")


def first_token_of_strings(arguments: str) -> str | None:
    """Each string value keeps only its first whitespace-led piece ("San Francisco, CA" -> "San"): a streaming
    parser that diffs its partial JSON per delta and, given several tokens in one delta, emits only the first
    (vLLM #48020, #55082; SGLang #31915). The JSON stays valid; the content is lost."""
    return _edit_args(arguments, lambda s: (FIRST_PIECE.match(s).group(0) if FIRST_PIECE.match(s) else s))  # type: ignore[union-attr]


def mangle_values(arguments: str) -> str | None:
    """Underscores and whitespace stripped inside string values ("123_456" -> "123456", "New York" -> "NewYork"),
    integers rewritten as floats (3 -> 3.0): a parser normalising values it should pass through (SGLang #30644)."""
    return _edit_args(arguments, lambda s: re.sub(r"[\s_]+", "", s), lambda n: float(n))


_LOST = tool.args_fault(first_token_of_strings)
_MANGLED = tool.args_fault(mangle_values)


# ----------------------------------------------------------------------------- tool_choice


def forces_a_call(request: dict[str, Any]) -> bool:
    """The request's tool_choice demands a call (the contract check's own reading of it: judge/contract.py)."""
    return contract.forces_a_call(request) is not None


def _json_text(name: str, arguments: str) -> str:
    try:
        args: Any = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        args = arguments
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False)


def text_logprobs(text: str) -> list[dict[str, Any]]:
    """Logprob entries that spell `text`, one per whitespace-led piece: the tokens of a call the model wrote as text
    (not the call template's tokens, which a parser would have turned into a call)."""
    return [{"token": t, "logprob": round(-0.01 * (i % 7), 6), "top_logprobs": []} for i, t in enumerate(FIRST_PIECE.findall(text))]


@pure_edit
def calls_as_json_text(body: dict[str, Any]) -> Pairs:
    """The tool calls written into the content as bare JSON, tool_calls emptied, finish_reason stop: a forcing
    tool_choice not applied (no grammar), so the model wrote its call as text and the parser left it there."""
    pairs: Pairs = []
    for c in choices_of(body):
        msg = c.get("message") or {}
        calls = msg.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            continue
        text = "\n".join(_json_text((tc.get("function") or {}).get("name", ""), (tc.get("function") or {}).get("arguments", ""))
                         for tc in calls)
        pairs.append((f"{len(calls)} tool_calls", text))
        msg["content"] = text
        msg.pop("tool_calls", None)
        c["finish_reason"] = "stop"
        if isinstance(c.get("logprobs"), dict) and isinstance(c["logprobs"].get("content"), list):
            c["logprobs"]["content"] = text_logprobs(text)
    return pairs


class CallsAsJsonTextStream(tool.MarkupStream):
    """Streams: the calls' deltas become one content delta of bare JSON (MarkupStream with another rendering)."""

    @staticmethod
    def render(name: str, arguments: str) -> str:
        return _json_text(name, arguments)

    @staticmethod
    def retoken(text: str, logprobs: list[Any]) -> list[Any]:
        return text_logprobs(text)


# ----------------------------------------------------------------------------- usage accounting

CACHED_EXCESS = 7
"""How many tokens more than the prompt cached_tokens claims."""


def _overcount(usage: Any) -> Pairs:
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return []
    n = usage["prompt_tokens"] + CACHED_EXCESS
    before = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") if isinstance(usage.get("prompt_tokens_details"), dict) else None
    usage["prompt_tokens_details"] = {**(usage.get("prompt_tokens_details") or {}), "cached_tokens": n}
    return [(f"cached_tokens {before}", f"cached_tokens {n} of prompt_tokens {usage['prompt_tokens']}")]


@pure_edit
def overcount_cached(body: dict[str, Any]) -> Pairs:
    """usage.prompt_tokens_details.cached_tokens above prompt_tokens (a prefix cache counting blocks twice)."""
    return _overcount(body.get("usage"))


class SplitUsageStream(StreamMutator):
    """Streams: the usage chunk is sent twice, the first without prompt_tokens_details and the second with
    cached_tokens above prompt_tokens: a client that reads the first usage it sees never learns of the cache, one that
    reads the last is told more tokens were cached than the prompt has."""

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        usage = d.get("usage")
        if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
            return None
        first = json.loads(json.dumps(d))
        first["usage"] = {k: v for k, v in usage.items() if k != "prompt_tokens_details"}
        for before, after in _overcount(usage):
            self.note(before, after + " (in a second usage chunk)")
        return [first, d]


def _drop_cached(usage: Any) -> Pairs:
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if not isinstance(details, dict) or "cached_tokens" not in details:
        return []
    usage["prompt_tokens_details"] = None  # what an engine without the details flag sends (vLLM: null)
    return [(f"cached_tokens {details['cached_tokens']}", "prompt_tokens_details null")]


@pure_edit
def drop_cached_tokens(body: dict[str, Any]) -> Pairs:
    """usage.prompt_tokens_details (cached_tokens) sent as null: the prefix cache's count dropped from usage."""
    return _drop_cached(body.get("usage"))


class DropCachedStream(StreamMutator):
    """Streams: the usage chunk without its cached-token figure."""

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pairs = _drop_cached(d.get("usage"))
        for before, after in pairs:
            self.note(before, after)
        return [d] if pairs else None


# ----------------------------------------------------------------------------- structured output with reasoning


def reasoning_on(request: dict[str, Any]) -> bool:
    """The request turns reasoning on: enable_thinking / thinking in chat_template_kwargs, or a reasoning_effort."""
    kwargs = request.get("chat_template_kwargs")
    on = isinstance(kwargs, dict) and (kwargs.get("enable_thinking") is True or kwargs.get("thinking") is True)
    return on or request.get("reasoning_effort") not in (None, "none")


def _has_format(request: dict[str, Any]) -> bool:
    return isinstance(request.get("response_format"), dict) and request["response_format"].get("type") in ("json_schema", "json_object")


SERVING_FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("state_dependent_answers", "the second and later sends of one prompt (any mode or surface) come back with every digit "
          "one up, in the text, the tool-call arguments and the logprob tokens (values kept); the first send is right",
          "prefix caching or speculative decoding serving stale state (vLLM #43559: prefix caching with MTP costs ~20% "
          "accuracy; #35800: malformed calls until restart)",
          "repeats_disagree (engine state: the candidate's repeats of one request part at tokens the model was sure of); "
          "probe:state_repeat_after_shared_prefix",
          response=pure_edit(shift_numbers), stream=_PerChunkShift, on_repeat=True),
    Fault("shared_prefix_batch_state", "answers to requests in flight together with another prompt that shares their first "
          "message (held a batch window) come back with every digit one up, in the text, the tool-call arguments and the "
          "logprob tokens (values kept); a request alone is right",
          "state shared across a batch of requests with a common prefix (a prefix-cache block or a cascade-attention "
          "kernel shared by concurrent requests): right alone, wrong under concurrency",
          "probe:state_repeat_under_concurrency (engine state: the warm resends in a concurrent batch part from the cold "
          "answer at tokens the model was sure of)",
          response=pure_edit(shift_numbers), stream=_PerChunkShift, with_shared_prefix=True),
    Fault("stream_multi_token_args_lost", "streams only: each string value in the tool-call arguments keeps only its first "
          "word (the rest of a multi-token delta lost); the text channel and the non-streamed call intact",
          "several tokens per streamed delta in a streaming tool parser (vLLM #48020, #55082; SGLang #31915: 71-91% loss)",
          "stream_tool_args_changed (tool-call parser, streaming path)", stream=_LOST[1]),
    Fault("tool_args_values_mangled", "underscores and whitespace stripped inside string argument values, integers "
          "rewritten as floats (3 -> 3.0)", "a parser normalising argument values (SGLang #30644: \"123_456\" -> \"123456\")",
          "tool_args_values_changed (the golden's values, reformatted)", response=_MANGLED[0], stream=_MANGLED[1]),
    Fault("tool_choice_forced_as_text", "on requests whose tool_choice forces a call (required, a named function): the calls "
          "come back as bare JSON in the content, no tool_calls, finish_reason stop",
          "tool_choice required answered in prose (vLLM #58315, #58105)",
          "tool_choice_unmet (API validation: a forcing tool_choice not applied)",
          response=calls_as_json_text, stream=CallsAsJsonTextStream, when=forces_a_call),
    Fault("cached_tokens_overcounted", f"usage.prompt_tokens_details.cached_tokens = prompt_tokens + {CACHED_EXCESS} on "
          "repeats of a prompt; streams: usage in two chunks, cached_tokens only in the second",
          "prefix-cache accounting (cached_tokens above prompt_tokens on repeats, a second usage chunk in streams)",
          "cached_tokens_exceed_prompt; usage_split_across_chunks (response formatting & usage); probe:cached_tokens_on_repeat",
          response=overcount_cached, stream=SplitUsageStream, on_repeat=True),
    Fault("cached_tokens_dropped", "usage.prompt_tokens_details (cached_tokens) sent as null, in bodies and in the streamed "
          "usage chunk", "usage accounting without the prefix cache's count (an engine or gateway dropping "
          "prompt_tokens_details: clients billing cached input cannot)",
          "cached_tokens_dropped (response formatting & usage: the golden's records reported cached tokens)",
          response=drop_cached_tokens, stream=DropCachedStream),
    Fault("response_format_dropped_with_reasoning", "request: response_format removed when reasoning is on "
          "(chat_template_kwargs enable_thinking, reasoning_effort)", "structured output not enforced with reasoning on "
          "(vLLM #44012)", "json_invalid_strict / json_schema_violation_strict (structured-output backend)",
          request=drop_keys("response_format"), when=lambda r: reasoning_on(r) and _has_format(r)),
]}
