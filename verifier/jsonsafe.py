"""JSON in and out for data we do not control.

Out: strict JSON only. Python's `json` writes bare `NaN`/`Infinity`, which strict parsers (jq, browsers,
most CI tooling) reject, so a server that reports `Infinity` tokens in `usage` could poison every file we
write. `dumps_strict` maps non-finite floats to null instead.

In: a depth limit. A 2 KB string of 1,000 nested brackets is enough to raise RecursionError in the parser
or, later, in any recursive walk (scoring, compare, report). `loads_bounded` turns that into `TooDeep`, a
ValueError the caller records as a contract finding (`json_too_deep`). An integer longer than Python's
int-str limit (4,300 digits) raises a plain ValueError from inside the parser, which no `except JSONDecodeError`
catches; `loads` turns it into `NumberTooLong`, a JSONDecodeError, so every caller that handles bad JSON (a
`malformed_body`, a bad stream chunk, `tool_args_invalid_json`, a corrupt file) handles it too.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Iterator, TypeGuard

if TYPE_CHECKING:
    from verifier.types import WireFacts

MAX_JSON_DEPTH = 100
"""Deeper than any real tool argument or structured output; far below the interpreter's recursion limit."""
MAX_JSON_VALUES = 1_000_000
"""An answer or a tool call's arguments are parsed into objects only if their text has fewer commas and opening
brackets than this, counted over the whole text (strings included: a C count, no parse). A JSON text holds at most
one value more than those, and a parsed value costs 8 to 100 bytes of memory beyond its text (`[{},{},...]`: 3 bytes
of text, about 70 of objects), so 60 MiB of `[{},...]` parsed would take 1.4 GB; within the bound under 100 MB.
Far more than any real tool call or structured output: a million commas is a million tokens."""


class TooDeep(ValueError):
    """JSON nested deeper than the limit."""


def _finite(o: Any, depth: int = 0) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if depth > MAX_JSON_DEPTH * 4:
        return None  # only reachable for objects we built ourselves; never recurse without bound
    if isinstance(o, dict):
        return {k: _finite(v, depth + 1) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v, depth + 1) for v in o]
    return o


def finite(o: Any) -> Any:
    """A copy of a JSON-like value with every non-finite float replaced by None (what dumps_strict writes)."""
    return _finite(o)


class NumberTooLong(json.JSONDecodeError):
    """A JSON integer longer than the interpreter converts (sys.get_int_max_str_digits): bad JSON to us."""


_LONG_DIGITS = re.compile(r"\d{1000,}")


def loads(text: str | bytes, **kw: Any) -> Any:
    """`json.loads` whose only failure for bad input is a JSONDecodeError (or RecursionError, see loads_bounded)."""
    try:
        return json.loads(text, **kw)
    except json.JSONDecodeError:
        raise
    except ValueError as e:
        if "digits" not in str(e):
            raise
        doc = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
        m = _LONG_DIGITS.search(doc)
        raise NumberTooLong(f"integer longer than {_max_digits()} digits", doc, m.start() if m else 0) from None


def _max_digits() -> int:
    import sys

    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300


def dumps_strict(obj: Any, **kw: Any) -> str:
    """`json.dumps` that never emits NaN/Infinity: non-finite floats become null.

    The fast path is a plain strict dump; only an object that actually holds a non-finite number is copied.
    """
    kw["allow_nan"] = False
    try:
        return json.dumps(obj, **kw)
    except ValueError:
        return json.dumps(_finite(obj), **kw)


def depth(o: Any, limit: int | None = None) -> int:
    """Nesting depth of a parsed JSON value, iteratively (a recursive walk is what we are guarding against), one
    level at a time over containers only; with `limit`, it stops as soon as the depth is past it."""
    if not isinstance(o, (dict, list)):
        return 0
    d, level = 0, [o]
    while level:
        d += 1
        if limit is not None and d > limit:
            return d
        below: list[Any] = []
        for x in level:
            below.extend(v for v in (x.values() if isinstance(x, dict) else x) if isinstance(v, (dict, list)))
        level = below
    return d


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` that raises TooDeep (not RecursionError) past `max_depth`; other errors as json raises them."""
    try:
        val = loads(text)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {max_depth}") from None
    # A value cannot nest deeper than its text has opening brackets: counting them (in C) spares the walk of
    # nearly every payload (a stream chunk has a handful; the walk was a third of scoring a logprob-heavy run).
    if isinstance(val, (dict, list)) and _opening(text) > max_depth and depth(val, max_depth) > max_depth:
        raise TooDeep(f"JSON nested deeper than {max_depth}")
    return val


def _opening(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def values_over(text: str, limit: int = MAX_JSON_VALUES) -> bool:
    """Whether JSON text has `limit` or more commas and opening brackets (see MAX_JSON_VALUES): too many values to
    parse into objects. Counted in C over the whole text: a millisecond per megabyte, whatever the text holds."""
    return text.count(",") + text.count("[") + text.count("{") >= limit


def is_finite_number(x: object) -> TypeGuard[float]:
    """An int or float (not a bool) that is finite: a TypeGuard, so a number checked here compares as one."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def stream_objects(chunks: list[str], extra: WireFacts) -> Iterator[dict[str, Any]]:
    """Each SSE `data:` payload of a stream that is a JSON object, parsed with the depth bound; `[DONE]` skipped.

    Nothing is dropped silently: once the stream is consumed, payloads that were not JSON objects are counted in
    extra.bad_chunks and too-deep ones in extra.json_too_deep (the Parsed.extra facts every surface uses)."""
    bad = deep = 0
    for raw in chunks:
        if raw == "[DONE]":
            continue
        try:
            data = loads_bounded(raw)
        except TooDeep:
            deep += 1
            continue
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(data, dict):
            yield data
        else:
            bad += 1
    if bad:
        extra.bad_chunks = bad
    if deep:
        extra.json_too_deep = f"{deep} stream chunk(s)"


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(o: Any, path: str = "$") -> str | None:
    """The JSON path of the first string (key or value) holding a lone surrogate (`"\\ud800"` parses to one; it
    cannot be encoded as UTF-8, so such a body cannot be sent), or None. Iterative, like `depth`."""
    stack = [(o, path)]
    while stack:
        x, p = stack.pop()
        if isinstance(x, str):
            if _SURROGATE.search(x):
                return p
        elif isinstance(x, dict):
            for k, v in x.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    return f"{p} (a key)"
                stack.append((v, f"{p}.{k}"))
        elif isinstance(x, list):
            stack.extend((v, f"{p}[{i}]") for i, v in enumerate(x))
    return None
