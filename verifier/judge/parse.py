"""Raw wire bytes -> `Parsed`. Pure; no network.

Each surface's adapter (verifier/surfaces/) parses its own bodies and reassembles its own streams into the one
`Parsed` shape, so one scorer serves every mode; here every surface then goes through the same guards (depth,
size, finite usage, finish-reason synonyms). Wire facts that the reassembled shape cannot show (index collisions, a
missing finish_reason) go into `Parsed.extra`.
"""

from __future__ import annotations

import dataclasses
import math
import re

from verifier.jsonsafe import MAX_JSON_DEPTH, TooDeep, values_over
from verifier.surfaces.base import Surface, SurfaceMalformed
from verifier.surfaces.registry import REFERENCE_MODE, mode_of, surface_for
from verifier.types import Exchange, Parsed, WireFacts

TOO_DEEP = "[json_too_deep]"
"""Stands in for a tool-argument string nested past the limit: scorers that parse it see invalid JSON, not a RecursionError."""
TOO_LARGE = "[json_too_large]"
"""Stands in for a tool-argument string of more values than jsonsafe.MAX_JSON_VALUES: scorers that parse it see
invalid JSON, and no copy of the arguments is ever parsed into objects."""
_JSONISH = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class MalformedBody(ValueError):
    """The body is not a response of the surface it was sent to (the adapter's SurfaceMalformed, as the judge says it)."""


def text_too_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON-looking text nests brackets past `max_depth` (outside strings). Cheap when it cannot."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    d = 0
    for m in _JSONISH.finditer(text):
        c = m.group(0)
        if c in "[{":
            d += 1
            if d > max_depth:
                return True
        elif c in "]}":
            d = max(0, d - 1)
    return False


def _finite_usage(p: Parsed) -> Parsed:
    """NaN/Infinity in `usage` (bare NaN is accepted by Python's parser) are dropped and reported as
    `usage_non_finite`: downstream arithmetic and strict JSON writers never see them."""
    u = p.usage
    if not u:
        return p
    bad = sorted(k for k, v in u.items() if isinstance(v, float) and not math.isfinite(v))
    if not bad:
        return p
    return dataclasses.replace(p, usage={k: v for k, v in u.items() if k not in bad},
                               extra=dataclasses.replace(p.extra, usage_non_finite=", ".join(bad)))


# finish_reason spellings other engines use for the same event (TGI, Anthropic-style gateways, legacy OpenAI):
# benign differences, read as the canonical chat value (the wire value is kept in `extra`).
FINISH_SYNONYMS = {"eos": "stop", "eos_token": "stop", "end_turn": "stop", "stop_sequence": "stop", "end": "stop",
                   "max_tokens": "length", "max_length": "length", "model_length": "length",
                   "tool_use": "tool_calls", "function_call": "tool_calls"}


def _canonical_finish(p: Parsed) -> Parsed:
    fr = p.finish_reason
    if not isinstance(fr, str) or fr not in FINISH_SYNONYMS:
        return p
    return dataclasses.replace(p, finish_reason=FINISH_SYNONYMS[fr], extra=dataclasses.replace(p.extra, finish_reason_wire=fr))


def _guard_json(p: Parsed) -> Parsed:
    """Neutralize text a scorer would parse (structured-output content, tool arguments) when it nests past the depth
    limit or holds more values than parsing into objects may cost (jsonsafe.MAX_JSON_VALUES), and say so in `extra`
    (contract findings `json_too_deep`, `json_too_large`): never a RecursionError or gigabytes of objects downstream."""
    deep: list[str] = []
    large: list[str] = []
    content = p.content
    # The value count first: it is a C count, and it bounds the text the depth check then walks bracket by bracket.
    # Any content over it, JSON or not: scorers also parse JSON found inside prose (bfcl_checker.calls_as_text), and a
    # million commas and brackets is no answer a real max_tokens allows.
    if content and values_over(content):
        content, large = None, ["content"]
    elif content and text_too_deep(content):
        content, deep = None, ["content"]
    calls = p.tool_calls
    if isinstance(calls, list):
        fixed = []
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            args = fn.get("arguments") if isinstance(fn, dict) else None
            if isinstance(args, str) and values_over(args):
                c = {**c, "function": {**fn, "arguments": TOO_LARGE}}  # type: ignore[dict-item]
                large.append("tool arguments")
            elif isinstance(args, str) and text_too_deep(args):
                c = {**c, "function": {**fn, "arguments": TOO_DEEP}}  # type: ignore[dict-item]
                deep.append("tool arguments")
            fixed.append(c)
        calls = fixed
    if not deep and not large:
        return p
    extra = dataclasses.replace(p.extra, json_too_deep=", ".join(sorted(set(deep))) or p.extra.json_too_deep,
                                json_too_large=", ".join(sorted(set(large))) or None)
    return dataclasses.replace(p, content=content, tool_calls=calls, extra=extra)


def _too_deep() -> Parsed:
    return Parsed(content=None, reasoning=None, tool_calls=None, finish_reason=None, usage=None, logprobs=None,
                  extra=WireFacts(json_too_deep="body"))


def _guarded(surface: Surface, body: str | None, chunks: list[str] | None) -> Parsed:
    """The surface's parser, then the same depth, finiteness and finish-reason guards on every surface."""
    try:
        p = surface.parse_stream(chunks) if chunks is not None and body is None else surface.parse_body(body)
    except TooDeep:
        p = _too_deep()
    except SurfaceMalformed as e:
        raise MalformedBody(str(e)) from None
    return _canonical_finish(_finite_usage(_guard_json(p)))


def parse_body(text: str | None) -> Parsed:
    """A chat-completions (or /completions) body -> Parsed."""
    return _guarded(surface_for(REFERENCE_MODE), text, None)


def parse_chunks(chunks: list[str]) -> Parsed:
    """The SSE `data:` payloads of a chat-completions stream -> Parsed."""
    return _guarded(surface_for(REFERENCE_MODE), None, chunks)


def parse_surface(mode: str, body: str | None, chunks: list[str] | None) -> Parsed:
    """An exchange of any mode -> Parsed: its surface's parser, through the same guards as every surface."""
    return _guarded(surface_for(mode), body, chunks)


def parse_exchange(ex: Exchange) -> Parsed:
    p = parse_surface(ex.mode, ex.body, ex.chunks)
    if mode_of(ex.mode).stream and ex.chunks is None and ex.body is not None and ex.status is not None and 200 <= ex.status < 300:
        # A stream was asked for and one JSON body came back: a streaming client (the SDK's iterator) gets nothing.
        p.extra.stream_ignored = "stream requested; the server answered with one JSON body"
    return p
