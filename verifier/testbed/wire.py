"""What the scripted server (server.py) reports beside the text: prompt tokens, usage and logprobs. A deterministic
stand-in for a tokenizer, so anything that changes the prompt or the answer moves them, and faults can be scripted."""

from __future__ import annotations

import json
import re
from typing import Any


def prompt_tokens(req: dict[str, Any]) -> int:
    """A deterministic stand-in for tokenization: anything that changes the prompt moves it."""
    text = json.dumps(req.get("messages", []), sort_keys=True) + json.dumps(req.get("tools") or [], sort_keys=True)
    return max(1, len(re.findall(r"\w+|[^\w\s]", text)))


def usage_of(reply: Any, req: dict[str, Any], stream: bool = False) -> dict[str, Any] | None:
    """The reply's usage block (`stream_usage` on streams when it is scripted)."""
    if stream and reply.stream_usage != "auto":
        return reply.stream_usage
    if reply.usage != "auto":
        return reply.usage
    pt = prompt_tokens(req)
    ct = len(re.findall(r"\w+|[^\w\s]", (reply.content or "") + (reply.reasoning_content or "") + json.dumps(reply.tool_calls or [])))
    return {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}


def raw_call_text(name: str, arguments: str) -> str:
    """The text a Hermes-style model writes for one call, which a tool-call parser turns into `tool_calls`."""
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {arguments}}}\n</tool_call>'


def generated_text(reply: Any) -> str:
    """What the model generated: the content, then the raw text of each tool call (what its logprobs spell)."""
    calls = "\n".join(raw_call_text(c["name"], c["arguments"]) for c in reply.tool_calls or [])
    return (reply.content or "") + ("\n" if reply.content and calls else "") + calls


def call_token_counts(reply: Any) -> list[int]:
    """How many of the reply's logprob tokens each tool call's raw text takes (the last ones, in call order)."""
    return [len(re.findall(r"\s*\S+", "\n" + raw_call_text(c["name"], c["arguments"]))) for c in reply.tool_calls or []]


def logprobs_of(reply: Any) -> dict[str, Any]:
    """`logprobs` of a choice: the scripted entries, else one per whitespace-led piece of the generated text (the
    content and the raw text of the tool calls, as an engine reports the tokens its parser turned into calls)."""
    if reply.logprob_entries is not None:
        return {"content": [dict(e) for e in reply.logprob_entries]}
    toks = re.findall(r"\s*\S+", generated_text(reply))
    return {"content": [{"token": t, "logprob": round(-0.01 * (i % 7) - reply.logprob_shift, 6), "top_logprobs": []}
                        for i, t in enumerate(toks)]}
