"""The versioned JSON Schema of a golden (golden.json, each samples.jsonl and inputs.jsonl record), checked on every load.

Goldens are committed and reviewed like code, so they can be edited by hand or tampered with. A golden that
does not match is refused with the path of the first offending field, never half-used: a bogus outcome, a
string `prompt_tokens` or a negative margin would otherwise pass silently or change the verdict.
JSON Schema cannot say "finite", so non-finite numbers (NaN, Infinity) are refused by `nonfinite` first.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Iterator

from verifier.types import OUTCOMES

SCHEMA_VERSION = 2
"""Bump with golden.FORMAT when the shape changes; the schema's $id names it."""

_NUM = {"type": "number"}
_NONNEG = {"type": "number", "minimum": 0}
_NONNEG_INT = {"type": "integer", "minimum": 0}
_STR = {"type": "string"}


def _nullable(s: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [s, {"type": "null"}]}


_MARGIN = {"anyOf": [
    _NONNEG,
    {"type": "object", "required": ["value"], "properties": {"value": _NONNEG, "source": _STR, "reason": _STR}},
]}

GOLDEN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["golden_format", "suites", "source", "summary"],
    "properties": {
        "golden_format": {"const": SCHEMA_VERSION},
        "name": _STR,
        "suites": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": ["version"],
            "properties": {"version": _STR, "samples": _NONNEG_INT, "requests": _NONNEG_INT, "dataset_sha256": _STR}}},
        "source": {"type": "object", "properties": {
            "run_id": _nullable(_STR), "endpoint": _nullable({"type": "object"}), "sampling": _nullable({"type": "object"}),
            "extra_body": _nullable({"type": "object"}), "server_info": _nullable({"type": "object"})}},
        "selection": {"type": "object", "properties": {"smoke": {"type": "boolean"}, "limit": _nullable(_NONNEG_INT)}},
        "epochs": {"type": "integer", "minimum": 1},
        "modes": {"type": "array", "minItems": 1, "items": _STR},
        "summary": {"type": "object"},
        "margins": _nullable({"type": "object", "additionalProperties": _MARGIN}),
        "probes": _nullable({"type": "object", "additionalProperties": {
            # keyed `<probe>@<surface>` (bare names: chat results of goldens from before surfaces)
            "type": "object", "required": ["passed"], "properties": {"passed": {"type": "boolean"}, "detail": _STR,
                                                                     "probe": _STR, "surface": _STR, "component": _STR}}}),
    },
}

OBSERVATION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden-observation/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["suite", "sample_id", "epoch", "mode", "outcome"],
    "properties": {
        "suite": _STR, "sample_id": _STR, "epoch": _NONNEG_INT, "mode": _STR,
        "outcome": {"enum": list(OUTCOMES)},
        "score": _nullable(_NUM),
        "metrics": {"type": "object", "additionalProperties": _NUM},
        "reason": _nullable(_STR),
        "findings": {"type": "array", "items": _STR},
        "prompt_tokens": _nullable(_NONNEG_INT), "completion_tokens": _nullable(_NONNEG_INT),
        "finish_reason": _nullable(_STR), "tool_triggered": _nullable({"type": "boolean"}),
        "latency_ms": _nullable(_NONNEG), "content": _nullable(_STR),
        "logprobs": _nullable({"type": "array", "items": {
            "type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [_nullable(_STR), _nullable(_NUM)]}}),
        "top_logprobs": _nullable({"type": "array", "items": {"type": "array", "items": {
            "type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [_nullable(_STR), _nullable(_NUM)]}}}),
    },
}


INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden-input/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["suite", "id", "messages"],
    "additionalProperties": False,
    "properties": {
        "suite": _STR, "id": _STR,
        "messages": {"type": "array", "items": {"type": "object"}},
        "tools": _nullable({"type": "array", "items": {"type": "object"}}),
        "response_format": _nullable({"type": "object"}),
        "target": {},
        "meta": {"type": "object"},
        "params": {"type": "object"},
    },
}


def nonfinite(x: Any, path: str = "$", depth: int = 0) -> Iterator[str]:
    """Paths of NaN / Infinity values (json.loads accepts them; strict JSON and the statistics do not)."""
    if depth > 64:
        return
    if isinstance(x, float) and not math.isfinite(x):
        yield path
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from nonfinite(v, f"{path}.{k}", depth + 1)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from nonfinite(v, f"{path}[{i}]", depth + 1)


def _where(err: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)


@functools.lru_cache(maxsize=None)
def _validator(name: str) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator({"golden": GOLDEN, "observation": OBSERVATION, "input": INPUT}[name])


def problem(doc: Any, name: str) -> str | None:
    """The first thing wrong with `doc` against schema `name` ("golden", "observation" or "input"), naming the field, or None."""
    bad = next(nonfinite(doc), None)
    if bad is not None:
        return f"{bad}: not a finite number"
    lp = None
    if name == "observation" and isinstance(doc, dict) and "logprobs" in doc:
        # The same rule as the schema's, checked in plain Python: jsonschema spends ~10 ms per 500-token row here,
        # minutes for a large golden with logprobs (every gate, calibrate and report loads it).
        doc, lp = {k: v for k, v in doc.items() if k != "logprobs"}, _logprobs_problem(doc["logprobs"])
    errors = sorted(_validator(name).iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return lp
    e = _deepest(errors[0])
    return f"{_where(e)}: {e.message[:200]}"


def _logprobs_problem(lp: Any) -> str | None:
    """OBSERVATION's `logprobs` rule: null, or a list of [token (string or null), logprob (number or null)] pairs."""
    if lp is None:
        return None
    if not isinstance(lp, list):
        return f"$.logprobs: {json.dumps(lp)[:80]} is not of type 'array'"
    for i, pair in enumerate(lp):
        if not isinstance(pair, list) or len(pair) != 2:
            return f"$.logprobs[{i}]: {json.dumps(pair)[:80]} is not a [token, logprob] pair"
        token, value = pair
        if token is not None and not isinstance(token, str):
            return f"$.logprobs[{i}][0]: {json.dumps(token)[:80]} is not of type 'string'"
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"$.logprobs[{i}][1]: {json.dumps(value)[:80]} is not of type 'number'"
    return None


def _deepest(e: Any) -> Any:
    """For anyOf (nullable fields, margins as number or object): the branch error that reaches furthest
    into the document names the field, rather than "is not valid under any of the given schemas" on its parent."""
    while e.context:
        e = max(e.context, key=lambda c: (len(c.absolute_path), c.validator != "type"))
    return e
