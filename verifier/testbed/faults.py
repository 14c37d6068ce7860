"""The catalogue of frontend faults: what the fault-injection proxy can do to traffic, as pure data.

Each fault reproduces a real bug (docs/frontend-bugs.md) and names the verifier signal
that should flag it (`catches`). Its mutations are pure functions on a parsed request
body, a parsed response body, or one SSE `data:` payload at a time (see mutation.py);
the proxy (proxy.py) only moves bytes and calls them.

Selection is deterministic: a fault with rate r hits a request iff
sha256(seed, fault, request key) < r, where the proxy's key is sha256(original body) and
the occurrence of that body, so a rerun of the same requests mutates the same ones,
whatever the arrival order.
"""

from __future__ import annotations

import hashlib

from . import probe_faults as pf
from . import text_faults as text
from . import tool_faults as tool
from .history_faults import HISTORY_FAULTS
from .serving_faults import SERVING_FAULTS
from .mutation import Chain, Change, Fault, StreamMutator, per_chunk, pure_edit, run_stream
from .wire_faults import WIRE_FAULTS

__all__ = ["ALL_FAULTS", "FAULTS", "HISTORY_FAULTS", "SERVING_FAULTS", "WIRE_FAULTS", "Chain", "Change", "Fault", "StreamMutator", "list_faults", "parse_fault_spec", "run_stream", "selected"]

_INVALID = tool.args_fault(tool.drop_last_brace)
_DOUBLE = tool.args_fault(tool.double_encode)
_TRUNC = tool.args_fault(tool.truncate_half)

FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("tool_markup_in_content",
          "tool calls rendered as <tool_call>{\"name\":..,\"arguments\":..}</tool_call> in content; tool_calls emptied; finish_reason tool_calls -> stop",
          "tool-call parser not applied (vLLM PR #31207, #28543; often streaming only)",
          "tool_markup_in_content", response=tool.markup_response, stream=tool.MarkupStream),
    Fault("tool_args_invalid_json", "the final `}` of every tool-call arguments string is dropped",
          "vLLM PR #41739 (missing final brace)", "tool_args_invalid_json", response=_INVALID[0], stream=_INVALID[1]),
    Fault("tool_args_double_encoded", "every arguments string is JSON-encoded a second time (json.loads gives a string)",
          "vLLM PR #54964", "tool_args_not_object", response=_DOUBLE[0], stream=_DOUBLE[1]),
    Fault("tool_args_truncated", "every arguments string is cut to half its length",
          "size-capped Kimi parser in vLLM (8 KB cap)", "tool_args_invalid_json", response=_TRUNC[0], stream=_TRUNC[1]),
    Fault("stream_index_zero", "streams only: every parallel tool call's delta gets index 0",
          "Ollama #15457, LiteLLM #33678 (calls merged as write_filewrite_file)", "stream_index_collision",
          stream=per_chunk(tool.index_zero)),
    Fault("finish_reason_wrong", "finish_reason swapped: tool_calls -> stop, stop -> tool_calls (length untouched)",
          "vLLM #53269 (stream says tool_calls where non-stream says length); DeepSeek-V3 #944",
          "finish_reason_mismatch / finish_reason_tool_calls_without_calls",
          response=pure_edit(tool.finish_wrong), stream=per_chunk(tool.finish_wrong)),
    Fault("finish_reason_missing", "finish_reason set to null on every choice / chunk",
          "a verifier silently read a missing finish_reason as stop", "finish_reason_missing",
          response=pure_edit(tool.finish_missing), stream=per_chunk(tool.finish_missing)),
    Fault("tool_call_ids_rewritten", "tool-call ids replaced with chatcmpl-tool-<hex> (derived from the original id)",
          "vLLM #29596, SGLang PR #21377, exo #2281 (Kimi expects functions.NAME:IDX)",
          "tool_call_id_format (needs the model's expected id format) and multi-turn replays",
          response=pure_edit(tool.ids_response), stream=per_chunk(tool.ids_chunk)),
    Fault("reasoning_in_content", "reasoning moved into content as <think>reasoning</think>answer; reasoning_content null",
          "vLLM #12999 (template moved <think> into the prompt)", "reasoning_in_content",
          response=text.reasoning_to_content, stream=text.ReasoningToContentStream),
    Fault("answer_in_reasoning", "content moved into reasoning_content; content null (streams: content deltas become reasoning deltas)",
          "Qwen3 with thinking off under the wrong reasoning parser (vLLM #19839, SGLang #14821)", "answer_in_reasoning",
          response=text.content_to_reasoning, stream=per_chunk(text.content_to_reasoning_chunk)),
    Fault("usage_dropped", "usage removed (streams: the usage chunk is dropped)",
          "servers that ignore stream_options.include_usage or omit usage", "usage_missing",
          response=text.drop_usage, stream=text.DropUsageStream),
    Fault("drop_response_format", "request: response_format removed before forwarding",
          "response_format silently ignored (llama-cpp-python, grammar skipped)", "json_invalid_strict / json_schema_violation_strict",
          request=text.drop_keys("response_format")),
    Fault("drop_system_prompt", "request: system/developer messages removed before forwarding",
          "silent front truncation drops the system prompt first (Ollama #6253)", "prompt_tokens fingerprint (below the golden's)",
          request=text.drop_system),
    Fault("prompt_front_truncated", f"request: a user message over {text.FRONT_CUT_CHARS} characters keeps only its last {text.FRONT_CUT_CHARS}",
          "silent left truncation to a smaller context (Ollama's default num_ctx; gateways capping prompt size)",
          "context_truncated (the context probe: prompt_tokens capped, the fact at the start lost)", request=text.cut_front),
    Fault("drop_tools", "request: tools, tool_choice and parallel_tool_calls removed before forwarding",
          "template ignores tools (llama.cpp #27129)", "prompt_tokens fingerprint; tool-decision accuracy",
          request=text.drop_keys("tools", "tool_choice", "parallel_tool_calls")),
    Fault("drop_sampling_params", f"request: {', '.join(text.SAMPLING_KEYS)} removed (max_tokens kept: it is a budget, and dropping it risks unbounded generation)",
          "temperature ignored / server defaults override the request (vLLM #15241, #17075)",
          "parameter-effect probes; run-to-run spread at temperature 0",
          request=text.drop_keys(*text.SAMPLING_KEYS)),
    Fault("stream_ignored", "request: stream and stream_options removed, so a stream request is answered with one JSON body",
          "servers and gateways that ignore `stream: true` (a streaming client, e.g. the openai SDK's iterator, gets nothing)",
          "stream_ignored", request=text.drop_keys("stream", "stream_options")),
    Fault("stream_duplicate_chars", "streams only: the first visible character of every content delta is doubled",
          "duplicated CJK characters in streams (SGLang #31598)", "stream parity (streamed vs non-streamed answer)",
          stream=per_chunk(text.text_edit(text.duplicate_char))),
    Fault("stream_garble", "streams only: the first visible character of every content delta becomes U+FFFD U+FFFD",
          "detokenizer splits multibyte characters (vLLM #8627)", "stream parity (streamed vs non-streamed answer)",
          stream=per_chunk(text.text_edit(text.garble))),
    # -- each breaks one request option; `catches` names the feature-contract probe that fails (verifier/execution/probes.py)
    Fault("sampling_params_clamped", "request: out-of-range temperature / top_p clamped into range instead of refused",
          "engines and gateways that clamp (a validation layer skipped)", "probe:rejects_negative_temperature, probe:rejects_top_p_above_1",
          request=pf.clamp_sampling),
    Fault("max_tokens_floored", f"request: max_tokens under {pf.MIN_BUDGET} raised to 64", "a gateway enforcing a minimum budget",
          "probe:max_tokens_honoured", request=pf.floor_max_tokens),
    Fault("max_completion_tokens_ignored", "request: max_completion_tokens removed (only the deprecated max_tokens is read)",
          "servers that predate max_completion_tokens", "probe:max_completion_tokens_honoured",
          request=text.drop_keys("max_completion_tokens")),
    Fault("temperature_zero_ignored", "request: temperature 0 removed, so the server's default temperature applies",
          "a falsy 0 read as 'not set' (vLLM #15241)", "probe:temperature_0_deterministic",
          request=pf.drop_when("temperature", lambda v: v == 0, "temperature 0 read as unset")),
    Fault("generation_config_defaults", "request: repetition_penalty 1.1 added where the request sends none",
          "generation_config.json defaults applied silently (vLLM --generation-config auto)", "probe:neutral_sampling_defaults; probe:neutral_defaults_on_repeats",
          request=pf.generation_defaults),
    Fault("stop_ignored", "request: stop removed (Messages: stop_sequences)", "stop sequences dropped in translation",
          "probe:stop_honoured", request=text.drop_keys("stop")),
    Fault("n_ignored", "request: n removed, so n > 1 is silently served as one choice", "n not passed to the engine",
          "probe:n_honoured", request=text.drop_keys("n")),
    Fault("seed_ignored", "request: seed removed", "seed not passed to the sampler", "probe:seed_reproducible",
          request=text.drop_keys("seed")),
    Fault("logit_bias_ignored", "request: logit_bias removed", "logit_bias accepted and ignored", "probe:logit_bias_honoured",
          request=text.drop_keys("logit_bias")),
    Fault("tool_choice_none_ignored", "request: tool_choice none removed (auto applies)", "tool_choice none not enforced",
          "probe:tool_choice_none", request=pf.drop_when("tool_choice", lambda v: v == "none", "none")),
    Fault("tool_choice_required_ignored", "request: tool_choice required removed (Messages: any)", "tool_choice required not enforced",
          "probe:tool_choice_required", request=pf.drop_when("tool_choice", lambda v: v == "required", "required")),
    Fault("tool_choice_named_ignored", "request: a named tool_choice removed (Messages: tool)", "a forced function not enforced",
          "probe:tool_choice_named", request=pf.drop_when("tool_choice", lambda v: isinstance(v, dict), "named function")),
    Fault("parallel_tool_calls_ignored", "request: parallel_tool_calls removed", "parallel_tool_calls false not enforced",
          "probe:parallel_tool_calls_false", request=text.drop_keys("parallel_tool_calls")),
    Fault("tool_names_prefixed", "tool-call names become functions.<name>", "Kimi-style names leaked by the parser",
          "probe:no_undeclared_tool; tool_name_undeclared", response=pf.prefix_tool_names, stream=per_chunk(pf.prefix_tool_names_chunk)),
    Fault("json_schema_ignored", "request: a json_schema response_format removed", "grammar skipped for json_schema",
          "probe:response_format_honoured, probe:json_key_order_kept",
          request=pf.drop_when("response_format", lambda v: isinstance(v, dict) and v.get("type") == "json_schema", "json_schema")),
    Fault("json_object_ignored", "request: a json_object response_format removed", "JSON mode accepted and ignored",
          "probe:json_object_honoured",
          request=pf.drop_when("response_format", lambda v: isinstance(v, dict) and v.get("type") == "json_object", "json_object")),
    Fault("json_keys_sorted", "response: JSON content re-serialized with sorted keys", "a sorting JSON round trip (MiniMax format check)",
          "probe:json_key_order_kept", response=pf.sort_json_keys),
    Fault("usage_every_chunk", "streams: a usage object on every content chunk, not only the last",
          "continuous usage stats sent unasked", "probe:stream_usage_last_chunk", stream=pf.UsageEveryChunk),
    Fault("reasoning_content_same_delta", "streams: the last reasoning delta and the first content delta merged into one",
          "a parser flushing both at </think> (MiniMax format check)", "probe:reasoning_content_separate", stream=pf.ReasoningMerged),
    Fault("stream_coalesced", "streams: every content delta buffered into one packet before the finish",
          "a gateway buffering the stream", "probe:stream_packet_sizes", stream=pf.Coalesced),
    Fault("thinking_kwargs_dropped", "request: chat_template_kwargs removed", "enable_thinking not passed to the template",
          "probe:thinking_on_honoured, probe:thinking_off_honoured", request=text.drop_keys("chat_template_kwargs")),
    Fault("reasoning_effort_ignored", "request: reasoning_effort removed", "reasoning_effort accepted and ignored",
          "probe:reasoning_effort_honoured", request=text.drop_keys("reasoning_effort")),
    Fault("reasoning_history_dropped", "request: reasoning of earlier assistant turns removed from the history",
          "SGLang #19257 (thinking dropped on the Messages path)", "probe:thinking_kept_across_turns; prompt_tokens on later turns",
          request=text.drop_reasoning_history),
    Fault("prompt_tokens_skewed", f"usage.prompt_tokens +{pf.SKEW} on every response", "ROCm ATOM #1727 (a template stub)",
          "probe:prompt_tokens_oracle; prompt_tokens fingerprint", response=pf.skew_prompt_tokens,
          stream=per_chunk(pf.skew_prompt_tokens_chunk)),
    Fault("tool_results_dropped", "request: tool results removed from the history", "function_call_output lost in translation",
          "probe:function_call_round_trip", request=pf.drop_tool_results),
    Fault("system_blocks_dropped", "Messages request: system given as content blocks removed (the string form kept)",
          "only the string form of `system` handled", "probe:messages_system_blocks", request=pf.drop_system_blocks,
          native=("messages",)),
    Fault("count_tokens_skewed", f"Messages: /v1/messages/count_tokens answers +{pf.SKEW}", "LiteLLM #30043 (count_tokens corrupted)",
          "probe:count_tokens_matches_usage", response=pf.skew_count_tokens, native=("messages",)),
    Fault("previous_response_ignored", "Responses request: previous_response_id removed", "stored responses not chained",
          "probe:responses_previous_response_id", request=text.drop_keys("previous_response_id"), native=("responses",)),
    Fault("store_false_ignored", "Responses request: store false removed (the response is stored)", "store: false not honoured",
          "probe:responses_store_false", request=pf.drop_when("store", lambda v: v is False, "store false"), native=("responses",)),
    Fault("terminal_event_as_done", "Responses / Messages streams: the terminal event replaced by data: [DONE]",
          "a chat stream writer reused for the surface (vLLM PR #52418)", "probe:stream_terminal_event; stream_terminal_event_missing",
          stream=pf.TerminalAsDone, native=("responses", "messages")),
]}


ALL_FAULTS: dict[str, Fault] = {**FAULTS, **HISTORY_FAULTS, **WIRE_FAULTS, **SERVING_FAULTS}
"""The catalogue plus the multi-turn history faults (history_faults.py), the wire faults of issue 38
(wire_faults.py) and the serving faults of issue 47 (serving_faults.py): every name the proxy takes."""


def parse_fault_spec(spec: str) -> tuple[str, float]:
    """'NAME' or 'NAME:RATE' -> (name, rate). ValueError with a one-line reason."""
    name, _, rate_s = spec.strip().partition(":")
    if name not in ALL_FAULTS:
        raise ValueError(f"unknown fault {name!r}; see --list-faults")
    try:
        rate = float(rate_s) if rate_s else 1.0
    except ValueError:
        raise ValueError(f"fault {name}: rate {rate_s!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"fault {name}: rate must be in [0, 1], got {rate}")
    return name, rate


def selected(seed: int, fault: str, key: str, rate: float) -> bool:
    """Deterministic coin: the same (seed, fault, request key) always gives the same answer."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = hashlib.sha256(f"{seed}\0{fault}\0{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < rate


def list_faults() -> str:
    lines = []
    for f in ALL_FAULTS.values():
        lines.append(f"{f.name}  [{', '.join(f.kinds)}]")
        lines.append(f"    does:    {f.description}")
        lines.append(f"    mimics:  {f.mimics}")
        lines.append(f"    catches: {f.catches}")
    return "\n".join(lines)
