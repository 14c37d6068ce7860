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


def logprobs_of(reply: Any) -> dict[str, Any]:
    """`logprobs` of a choice: the scripted entries, else one per whitespace-led piece of the content."""
    if reply.logprob_entries is not None:
        return {"content": [dict(e) for e in reply.logprob_entries]}
    toks = re.findall(r"\s*\S+", reply.content or "")
    return {"content": [{"token": t, "logprob": round(-0.01 * (i % 7) - reply.logprob_shift, 6), "top_logprobs": []}
                        for i, t in enumerate(toks)]}
