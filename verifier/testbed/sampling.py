"""How the scripted server (server.py) shapes a reply like a real engine: the sampling contract (validation,
max_tokens, noise above temperature 0), scripted latency and dropped connections."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

_noise = random.Random()


def apply_sampling(reply: Any, req: dict[str, Any]) -> Any:
    """A real engine's sampling contract, for probes and for faults that drop parameters. str = a 400 message."""
    t, top_p = req.get("temperature", 0.8), req.get("top_p", 1.0)
    if not isinstance(t, (int, float)) or not 0 <= t <= 2:
        return "temperature must be in [0, 2]"
    if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        return "top_p must be in (0, 1]"
    content, finish = reply.content, reply.finish_reason
    if content is not None and t > 0:
        seed = req.get("seed")
        rng = random.Random(f"{seed}\0{content}") if isinstance(seed, int) else _noise  # a seed makes sampling reproducible
        content = f"{content} {''.join(rng.choice('abcdefghij') for _ in range(8))}"  # no digits: answers keep their numbers
    limit = req.get("max_completion_tokens", req.get("max_tokens"))
    if content is not None and isinstance(limit, int):
        words = re.findall(r"\s*\S+", content)
        if len(words) > limit:
            content, finish = "".join(words[:limit]), "length"
    return type(reply)(**{**reply.__dict__, "content": content, "finish_reason": finish})


async def delay_or_drop(reply: Any, request: Any) -> None:
    """The scripted latency, then a dropped connection if the script asks for one (every surface alike)."""
    if reply.delay_s:
        await asyncio.sleep(reply.delay_s)
    if reply.drop:
        request.transport.abort()
        raise ConnectionResetError("dropped on purpose")

