"""The versioned JSON Schema of a golden (golden.json, each samples.jsonl and inputs.jsonl record), checked on every load.

Goldens are committed and reviewed like code, so they can be edited by hand or tampered with. A golden that
does not match is refused with the path of the first offending field, never half-used: a bogus outcome, a
string `prompt_tokens` or a negative margin would otherwise pass silently or change the verdict.
JSON Schema cannot say "finite", so non-finite numbers (NaN, Infinity) are refused by `nonfinite` first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, Iterator

from verifier.execution.observations import MAX_CONTENT, MAX_LOGPROBS, MAX_TOP
from verifier.surfaces.registry import MODES
from verifier.types import OUTCOMES, Observation

SCHEMA_VERSION = 2
"""Bump with golden.FORMAT when the shape changes; the schema's $id names it."""

# Bounds (issue: a golden travels; every count, length and size in it is capped here, at the one boundary, so a
# hostile golden cannot make a gate build a 91 MB request or 10**9 epochs). Generous against every real golden.
MAX_EPOCHS = 100
MAX_SUITES = 64
MAX_NAME = 256
"""Names, ids, versions, reasons: one line each."""
MAX_TEXT = 65_536
"""Free text of one field (a probe's detail)."""
MAX_COUNT = 10_000_000
"""Recorded sample and request counts."""
MAX_CONTEXT_LENGTHS = 16
MAX_CONTEXT_TOKENS = 262_144
"""The longest prompt the context-truncation probe may build (tokens): ~1 MB of request body."""
MAX_MARGINS = 10_000
MAX_PROBES = 1_000
MAX_FINDINGS = 256
MAX_MESSAGES = 4_096
MAX_TOOLS = 1_024
MAX_ROWS = 2_000_000
"""Observation rows in samples.jsonl, samples in inputs.jsonl."""
MAX_GOLDEN_BYTES = 16 * 1024 * 1024
MAX_SAMPLES_BYTES = 512 * 1024 * 1024
MAX_SAMPLES_LINE = 16 * 1024 * 1024
"""One samples.jsonl row: an observation holds at most 4,000 characters of content and 512 logprobs of 5
alternatives, tens of KB; a longer line is refused after reading this much of it, not parsed whole."""
MAX_INPUTS_LINE = 64 * 1024 * 1024
"""One inputs.jsonl row: a sample's messages and tools, images included (a vision sample's base64 image)."""
MAX_INPUTS_BYTES = 512 * 1024 * 1024

_NUM = {"type": "number"}
_NONNEG = {"type": "number", "minimum": 0}
_NONNEG_INT = {"type": "integer", "minimum": 0}
_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_STR = {"type": "string", "maxLength": MAX_NAME}
_TEXT = {"type": "string", "maxLength": MAX_TEXT}


def _nullable(s: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [s, {"type": "null"}]}


_MARGIN = {"anyOf": [
    _NONNEG,
    {"type": "object", "required": ["value"], "properties": {"value": _NONNEG, "source": _STR, "reason": _TEXT}},
]}

GOLDEN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["golden_format", "suites", "source", "summary"],
    "properties": {
        "golden_format": {"const": SCHEMA_VERSION},
        "name": _STR,
        "suites": {"type": "object", "minProperties": 1, "maxProperties": MAX_SUITES,
                   "propertyNames": {"maxLength": MAX_NAME}, "additionalProperties": {
                       "type": "object", "required": ["version"],
                       "properties": {"version": _STR, "samples": _COUNT, "requests": _COUNT,
                                      "dataset_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}},
        "source": {"type": "object", "properties": {
            "run_id": _nullable(_STR),
            "endpoint": _nullable({"type": "object", "properties": {"serving_adapter": _nullable(_STR)}}),
            "sampling": _nullable({"type": "object", "properties": {
                "overrides": _nullable({"type": "object"}), "defaults": _nullable({"type": "object"})}}),
            "extra_body": _nullable({"type": "object"}), "server_info": _nullable({"type": "object"})}},
        "selection": {"type": "object", "properties": {"smoke": {"type": "boolean"}, "limit": _nullable(_COUNT)}},
        "epochs": {"type": "integer", "minimum": 1, "maximum": MAX_EPOCHS},
        "modes": {"type": "array", "minItems": 1, "maxItems": len(MODES), "uniqueItems": True, "items": {"enum": list(MODES)}},
        "summary": {"type": "object", "properties": {"suites": {"type": "object"}}},
        "margins": _nullable({"type": "object", "maxProperties": MAX_MARGINS, "propertyNames": {"maxLength": MAX_NAME},
                              "additionalProperties": _MARGIN}),
        "probes": _nullable({"type": "object", "maxProperties": MAX_PROBES, "propertyNames": {"maxLength": MAX_NAME},
                             "additionalProperties": {
            # keyed `<probe>@<surface>` (bare names: chat results of goldens from before surfaces)
            "type": "object", "required": ["passed"], "properties": {"passed": {"type": "boolean"}, "detail": _TEXT,
                                                                     "probe": _STR, "surface": _STR, "component": _STR}}}),
        "context_probe": _nullable({"type": "object", "required": ["lengths"], "properties": {
            "lengths": {"type": "array", "minItems": 1, "maxItems": MAX_CONTEXT_LENGTHS,
                        "items": {"type": "integer", "minimum": 1, "maximum": MAX_CONTEXT_TOKENS}},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
            "results": {"type": "array", "maxItems": MAX_CONTEXT_LENGTHS, "items": {"type": "object"}}}}),
    },
}

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [_nullable(_TEXT), _nullable(_NUM)]}
_ROW_FIELDS: dict[str, dict[str, Any]] = {
    # One schema per field of verifier.types.Observation (the row's one definition): the table below must name
    # exactly its fields (OBSERVATION is built from them), so a field added there is checked here or fails import.
    "suite": _STR, "sample_id": {"type": "string", "maxLength": 1024}, "epoch": {"type": "integer", "minimum": 0, "maximum": MAX_EPOCHS},
    "mode": {"enum": list(MODES)},
    "outcome": {"enum": list(OUTCOMES)},
    "score": _nullable(_NUM),
    "metrics": {"type": "object", "maxProperties": 256, "additionalProperties": _NUM},
    "answer": {},
    "reason": _nullable(_TEXT),
    "findings": {"type": "array", "maxItems": MAX_FINDINGS, "items": _STR},
    "prompt_tokens": _nullable(_NONNEG_INT), "completion_tokens": _nullable(_NONNEG_INT),
    "finish_reason": _nullable(_STR), "tool_triggered": _nullable({"type": "boolean"}),
    "tool_call_id_style": _nullable({"type": "array", "maxItems": 1024, "items": _STR}),
    "latency_ms": _nullable(_NONNEG), "content": _nullable({"type": "string", "maxLength": MAX_CONTENT}),
    "logprobs": _nullable({"type": "array", "maxItems": MAX_LOGPROBS, "items": _PAIR}),
    "top_logprobs": _nullable({"type": "array", "maxItems": MAX_LOGPROBS,
                               "items": {"type": "array", "maxItems": MAX_TOP, "items": _PAIR}}),
    "sent": _nullable(_NONNEG_INT), "cached_tokens": _nullable(_NONNEG_INT),
    "resent": {"type": "null"},  # a resend record is built by compare from resends.jsonl, never kept in a row
}

OBSERVATION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden-observation/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["suite", "sample_id", "epoch", "mode", "outcome"],
    "properties": {f.name: _ROW_FIELDS[f.name] for f in dataclasses.fields(Observation)},
}


INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/golden-input/{SCHEMA_VERSION}",
    "type": "object",
    "required": ["suite", "id", "messages"],
    "additionalProperties": False,
    "properties": {
        "suite": _STR, "id": {"type": "string", "maxLength": 1024},
        "messages": {"type": "array", "maxItems": MAX_MESSAGES, "items": {"type": "object"}},
        "tools": _nullable({"type": "array", "maxItems": MAX_TOOLS, "items": {"type": "object"}}),
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
    if len(lp) > MAX_LOGPROBS:
        return f"$.logprobs: {len(lp)} entries, over the maximum of {MAX_LOGPROBS}"
    for i, pair in enumerate(lp):
        if not isinstance(pair, list) or len(pair) != 2:
            return f"$.logprobs[{i}]: {json.dumps(pair)[:80]} is not a [token, logprob] pair"
        token, value = pair
        if token is not None and (not isinstance(token, str) or len(token) > MAX_TEXT):
            return f"$.logprobs[{i}][0]: {json.dumps(token)[:80]} is not a string of at most {MAX_TEXT} characters"
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"$.logprobs[{i}][1]: {json.dumps(value)[:80]} is not of type 'number'"
    return None


def _deepest(e: Any) -> Any:
    """For anyOf (nullable fields, margins as number or object): the branch error that reaches furthest
    into the document names the field, rather than "is not valid under any of the given schemas" on its parent."""
    while e.context:
        e = max(e.context, key=lambda c: (len(c.absolute_path), c.validator != "type"))
    return e
