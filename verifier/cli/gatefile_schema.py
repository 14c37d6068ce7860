"""The versioned JSON Schema of a gate file (`verifier gate --config gate.toml`), checked before anything is read.

A gate file is reviewed like code and decides what ships, so a value of the wrong type must never change its
meaning: TOML's `allow_inconclusive = "false"` is a non-empty string, truthy to Python, and used to switch the
option *on*; `infra = true` was a 100% budget; `timeout = [1]` an internal error. Every key has a type and a range
here, switches take booleans only, unknown keys are refused, and the first problem is one line naming the key.
"""

from __future__ import annotations

import functools
from typing import Any

from verifier.execution.teacher_forcing import CHOICES as FORCING
from verifier.execution.resend import MAX_SAMPLES as MAX_RESEND
from verifier.wire.serving_adapters import ADAPTERS

SCHEMA_VERSION = 1
"""Bump when a key changes meaning or type; the schema's $id names it."""

_STR = {"type": "string", "minLength": 1}
_SWITCH = {"type": "boolean"}
_NAMES = {"anyOf": [_STR, {"type": "array", "minItems": 1, "items": _STR}]}
_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"}

_ENDPOINT_PROPS = {
    "name": _NAME,
    "base_url": _STR,
    "model": _STR,
    "api_key_env": {"type": "string", "minLength": 1, "maxLength": 128},  # the name's form: app/spec.api_key_env (never echoed)
    "concurrency": {"type": "integer", "minimum": 1, "maximum": 4096},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
    "max_retries": {"type": "integer", "minimum": 0, "maximum": 100},
    "serving_adapter": {"enum": sorted(ADAPTERS)},  # --serving-adapter: the request rewrite the golden was recorded behind
}
_ENDPOINT = {"type": "object", "additionalProperties": False, "properties": _ENDPOINT_PROPS}

GATE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://verifier.invalid/schemas/gate-file/{SCHEMA_VERSION}",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "golden": _STR,
        "suites": _NAMES,
        "modes": _NAMES,
        "limit": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
        "data": _STR,
        "endpoint": _ENDPOINT,
        "endpoints": {"type": "array", "minItems": 1, "items": {**_ENDPOINT, "required": ["name"]}},
        "sampling": {"type": "object", "additionalProperties": False, "properties": {
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "max_tokens": {"type": "integer", "minimum": 1},
            "seed": {"type": "integer"},
            "logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
            "extra_body": {"type": "object"},
        }},
        "budgets": {"type": "object", "additionalProperties": False, "properties": {
            "infra": {"type": "number", "minimum": 0, "maximum": 1},
            "allow_inconclusive": _SWITCH,
            "sequential": _SWITCH,
            "looks": {"type": "integer", "minimum": 1, "maximum": 100},
            "teacher_forcing": {"enum": list(FORCING)},
            "forced_positions": {"type": "integer", "minimum": 1, "maximum": 512},
            "resend": {"type": "integer", "minimum": 0, "maximum": MAX_RESEND},
            "probes": _SWITCH,
        }},
        "margins": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False, "required": ["value", "reason"],
            "properties": {"value": {"type": "number", "minimum": 0}, "reason": {"type": "string", "pattern": r"\S"}}}},
        "outputs": {"type": "object", "additionalProperties": False, "properties": {
            k: _STR for k in ("dir", "report", "junit", "markdown", "matrix")}},
    },
}


@functools.lru_cache(maxsize=None)
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(GATE)


def _key(path: Any) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _explain(e: Any) -> str:
    """One line for the deepest cause of `e`: the key, what it must be, what it was."""
    while e.context:  # anyOf (a name or a list of names): the branch that got furthest names the key
        e = max(e.context, key=lambda c: (len(c.absolute_path), c.validator != "type"))
    key = _key(e.absolute_path)
    if e.validator == "additionalProperties":
        extra = sorted(set(e.instance) - set(e.schema.get("properties") or {}))
        where = f"{key}." if key else ""
        known = ", ".join(sorted(e.schema.get("properties") or {}))
        return f"unknown key {where}{extra[0] if extra else '?'}" + (f"; known: {known}" if known else "")
    if e.validator == "required":
        missing = next((r for r in e.validator_value if r not in e.instance), "?")
        return f"{key or 'the file'}: needs a `{missing}`"
    want = e.schema.get("type") if e.validator == "type" else None
    value = repr(e.instance)[:80]
    if want == "boolean":
        return f"{key} = {value}: must be true or false (a switch takes a boolean, never a string or a number)"
    if want:
        return f"{key} = {value}: must be {'an' if want[0] in 'aeiou' else 'a'} {want}"
    return f"{key} = {value}: {e.message[:160]}"


def problem(doc: Any) -> str | None:
    """The first thing wrong with a gate file, as one line naming the key, or None."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    return _explain(errors[0]) if errors else None
