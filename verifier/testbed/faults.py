"""The catalogue of frontend faults: what the fault-injection proxy can do to traffic, as pure data.

Each fault reproduces a real bug (docs/FRONTEND_BUGS.md) and names the verifier signal
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

from . import text_faults as text
from . import tool_faults as tool
from .history_faults import HISTORY_FAULTS
from .mutation import Chain, Change, Fault, StreamMutator, per_chunk, pure_edit, run_stream

__all__ = ["ALL_FAULTS", "FAULTS", "HISTORY_FAULTS", "Chain", "Change", "Fault", "StreamMutator", "list_faults", "parse_fault_spec", "run_stream", "selected"]

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
]}


ALL_FAULTS: dict[str, Fault] = {**FAULTS, **HISTORY_FAULTS}
"""The catalogue plus the multi-turn history faults (history_faults.py): every name the proxy takes."""


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
