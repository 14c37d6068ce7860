"""Faults that each break one request option a client relies on: the mutations behind the feature-contract probes.

Every one reproduces a way servers and gateways really get an option wrong (ignored, clamped, defaulted,
re-serialized), and the probe named in its `catches` fails on it; the catalogue's entries are in faults.py.
Chat-shaped faults run on every surface by translation (surface_faults.py); a fault with `native` surfaces
edits that surface's own shapes (previous_response_id, system blocks, count_tokens, terminal events). Pure.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from .mutation import Change, Pairs, StreamMutator, choices_of, deltas_of, messages_of, pure_edit


def drop_when(key: str, when: Callable[[Any], bool], what: str) -> Callable[[dict[str, Any]], Change | None]:
    """Request: `key` removed when its value matches (`tool_choice: none` ignored, `store: false` ignored...)."""
    @pure_edit
    def edit(body: dict[str, Any]) -> Pairs:
        if key in body and when(body[key]):
            return [({key: body.pop(key)}, f"removed ({what})")]
        return []

    return edit


@pure_edit
def clamp_sampling(body: dict[str, Any]) -> Pairs:
    """Out-of-range temperature / top_p clamped into range instead of refused."""
    pairs: Pairs = []
    t, p = body.get("temperature"), body.get("top_p")
    if isinstance(t, (int, float)) and not 0 <= t <= 2:
        body["temperature"] = min(2.0, max(0.0, float(t)))
        pairs.append((f"temperature={t}", f"temperature={body['temperature']}"))
    if isinstance(p, (int, float)) and not 0 < p <= 1:
        body["top_p"] = 1.0
        pairs.append((f"top_p={p}", "top_p=1.0"))
    return pairs


@pure_edit
def generation_defaults(body: dict[str, Any]) -> Pairs:
    """The model's generation_config filled in where a request that sets its sampling is silent (repetition_penalty 1.1)."""
    if "repetition_penalty" in body or "temperature" not in body:
        return []
    body["repetition_penalty"] = 1.1
    return [("repetition_penalty absent", "repetition_penalty=1.1")]


MIN_BUDGET = 4


@pure_edit
def floor_max_tokens(body: dict[str, Any]) -> Pairs:
    """A budget under 4 tokens raised to 64 (a gateway enforcing a minimum max_tokens)."""
    n = body.get("max_tokens")
    if isinstance(n, int) and not isinstance(n, bool) and n < MIN_BUDGET:
        body["max_tokens"] = 64
        return [(f"max_tokens={n}", "max_tokens=64")]
    return []


def _rename(fn: Any) -> Pairs:
    if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"] and not fn["name"].startswith("functions."):
        before = fn["name"]
        fn["name"] = f"functions.{before}"
        return [(before, fn["name"])]
    return []


@pure_edit
def prefix_tool_names(body: dict[str, Any]) -> Pairs:
    """Tool names as a Kimi-style parser leaks them (`functions.get_weather`): a name the request never declared."""
    return [p for msg in messages_of(body) for c in msg.get("tool_calls") or [] if isinstance(c, dict) for p in _rename(c.get("function"))]


def prefix_tool_names_chunk(d: dict[str, Any]) -> Pairs:
    return [p for _, delta in deltas_of(d) for c in delta.get("tool_calls") or [] if isinstance(c, dict) for p in _rename(c.get("function"))]


@pure_edit
def sort_json_keys(body: dict[str, Any]) -> Pairs:
    """Structured output re-serialized with sorted keys (a JSON round trip through a sorting encoder)."""
    pairs: Pairs = []
    for msg in messages_of(body):
        try:
            value = json.loads(msg.get("content") or "")
        except (ValueError, TypeError):
            continue
        if isinstance(value, dict) and list(value) != sorted(value):
            new = json.dumps(value, sort_keys=True)
            pairs.append((msg["content"], new))
            msg["content"] = new
    return pairs


def _skew(u: Any, by: int) -> Pairs:
    if not isinstance(u, dict) or not isinstance(u.get("prompt_tokens"), int):
        return []
    before = u["prompt_tokens"]
    u["prompt_tokens"] = before + by
    if isinstance(u.get("total_tokens"), int):
        u["total_tokens"] += by
    s = u.get("surface")
    if isinstance(s, dict) and isinstance(s.get("input_tokens"), int):  # the surface's own spelling, re-rendered
        s["input_tokens"] += by
    return [(f"prompt_tokens={before}", f"prompt_tokens={u['prompt_tokens']}")]


SKEW = 3
"""A constant +3 prompt tokens: a response-channel stub in the template (ROCm ATOM #1727, SMG #2564)."""


@pure_edit
def skew_prompt_tokens(body: dict[str, Any]) -> Pairs:
    return _skew(body.get("usage"), SKEW)


def skew_prompt_tokens_chunk(d: dict[str, Any]) -> Pairs:
    return _skew(d.get("usage"), SKEW)


@pure_edit
def drop_tool_results(body: dict[str, Any]) -> Pairs:
    msgs = body.get("messages")
    gone = [m for m in msgs or [] if isinstance(m, dict) and m.get("role") == "tool"]
    if not gone:
        return []
    body["messages"] = [m for m in msgs if m not in gone]
    return [(gone[0].get("content"), f"removed {len(gone)} tool result(s)")]


class UsageEveryChunk(StreamMutator):
    """Usage attached to every content chunk (continuous usage stats nobody asked for), not only the last."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if "usage" in d or not any(isinstance(delta.get("content"), str) and delta["content"] for _, delta in deltas_of(d)):
            return None
        self.n += 1
        d["usage"] = {"prompt_tokens": 0, "completion_tokens": self.n, "total_tokens": self.n}
        self.note("no usage", f"usage on chunk {self.n}")
        return [d]


def _reasoning_only(d: dict[str, Any]) -> bool:
    ds = [delta for _, delta in deltas_of(d)]
    return len(ds) == 1 and bool(ds[0].get("reasoning_content") or ds[0].get("reasoning")) and not ds[0].get("content")


class ReasoningMerged(StreamMutator):
    """The last reasoning delta and the first content delta sent as one delta (a parser flushing both at </think>)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, Any] | None = None

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if _reasoning_only(d):
            out, self.held = ([self.held] if self.held else []), d
            return out
        if self.held is None:
            return None
        held, self.held = self.held, None
        content = next((delta.get("content") for _, delta in deltas_of(d) if isinstance(delta.get("content"), str) and delta["content"]), None)
        if content is None:
            return [held, d]
        for _, delta in deltas_of(held):
            delta["content"] = content
        for _, delta in deltas_of(d):
            delta.pop("content", None)
        self.note("reasoning delta, then content delta", f"one delta with both: {content!r}")
        rest = any(delta for _, delta in deltas_of(d)) or any(c.get("finish_reason") for c in choices_of(d)) or d.get("usage")
        return [held, d] if rest else [held]

    def end(self) -> list[dict[str, Any]]:
        held, self.held = self.held, None
        return [held] if held else []


class Coalesced(StreamMutator):
    """Content deltas buffered and sent as one packet before the finish (a gateway buffering the stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.env: dict[str, Any] | None = None

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pieces = [(c, delta) for c, delta in deltas_of(d) if isinstance(delta.get("content"), str) and delta["content"]]
        finishing = any(c.get("finish_reason") for c in choices_of(d))
        if pieces and not finishing:
            self.env = self.env or {k: v for k, v in d.items() if k not in ("choices", "usage")}
            self.text += [delta.pop("content") for _, delta in pieces]
            other = any(delta for _, delta in deltas_of(d))
            return [d] if other else []
        if finishing and self.text:
            return self._packet() + [d]
        return None

    def _packet(self) -> list[dict[str, Any]]:
        text, self.text = "".join(self.text), []
        self.note("many content deltas", f"one packet of {len(text)} chars")
        return [{**(self.env or {}), "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}]

    def end(self) -> list[dict[str, Any]]:
        return self._packet() if self.text else []


TERMINAL = ("response.completed", "response.incomplete", "message_stop")


class TerminalAsDone(StreamMutator):
    """Native to Responses / Messages: the terminal event replaced by chat's `data: [DONE]` (a chat stream
    writer reused for the surface)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = False

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if d.get("type") in TERMINAL:
            self.dropped = True
            self.note(d["type"], "[DONE]")
            return []
        return None

    def flush(self) -> list[str]:
        if self._ended:
            return []
        self._ended = True
        return ["[DONE]"] if self.dropped else []


@pure_edit
def drop_system_blocks(body: dict[str, Any]) -> Pairs:
    """Native to Messages: `system` given as a list of blocks dropped (only the string form is handled)."""
    if isinstance(body.get("system"), list):
        return [(body.pop("system"), "removed system blocks")]
    return []


@pure_edit
def skew_count_tokens(body: dict[str, Any]) -> Pairs:
    """Native to Messages: count_tokens answers +3 (a proxy counting with another template; LiteLLM #30043)."""
    if set(body) == {"input_tokens"} and isinstance(body["input_tokens"], int):
        body["input_tokens"] += SKEW
        return [(body["input_tokens"] - SKEW, body["input_tokens"])]
    return []
