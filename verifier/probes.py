"""Parameter-contract probes: invalid sampling parameters must be refused, honoured ones must change the output.

Each probe is a few raw requests and a pure check on what came back. Results are
compared with the golden's: only a probe the reference passed and the candidate
fails is a frontend regression (some engines legitimately clamp instead of refusing).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable

from . import scrub
from .endpoint import Endpoint
from .parse import MalformedBody, parse_body
from . import jsonsafe

PROMPT = [{"role": "user", "content": "Count from 1 to 30, separated by spaces."}]


def _text(status: int | None, body: str | None) -> tuple[str | None, dict[str, Any]]:
    if status != 200:
        return None, {}
    try:
        p = parse_body(body)
    except MalformedBody:
        return None, {}
    return p.content or "", {"finish_reason": p.finish_reason, "completion_tokens": p.completion_tokens}


def _rejects(results: list[tuple[int | None, str | None]]) -> tuple[bool, str]:
    status = results[0][0]
    return (status is not None and 400 <= status < 500), f"HTTP {status}"


def _max_tokens(results: list[tuple[int | None, str | None]]) -> tuple[bool, str]:
    text, info = _text(*results[0])
    if text is None:
        return False, f"HTTP {results[0][0]}"
    ok = info.get("finish_reason") == "length" and (info.get("completion_tokens") in (None, 1, 2) or len(text) <= 12)
    return ok, f"finish_reason={info.get('finish_reason')} completion_tokens={info.get('completion_tokens')} text={text[:40]!r}"


def _deterministic(results: list[tuple[int | None, str | None]]) -> tuple[bool, str]:
    texts = [_text(*r)[0] for r in results]
    if any(t is None for t in texts):
        return False, "a request failed"
    return len(set(texts)) == 1, f"{len(set(texts))} distinct outputs from {len(texts)} identical temperature-0 requests"


# A schema no model would satisfy unprompted: if response_format is applied, the output must match it.
FORCED_SCHEMA = {"type": "object", "properties": {"probe_code": {"type": "integer", "enum": [777]}},
                 "required": ["probe_code"], "additionalProperties": False}


def _schema_honoured(results: list[tuple[int | None, str | None]]) -> tuple[bool, str]:
    text, _ = _text(*results[0])
    if text is None:
        return False, f"HTTP {results[0][0]}"
    try:
        ok = jsonsafe.loads(text) == {"probe_code": 777}
    except json.JSONDecodeError:
        ok = False
    return ok, f"output {text[:60]!r}"


Results = list[tuple[int | None, str | None]]


@dataclass(frozen=True)
class Probe:
    """One parameter-contract probe: the request variants it sends, the pure check on what came back, and the
    frontend component a failure implicates (diagnosis reads it from the result: one place, no second table)."""

    name: str
    requests: list[dict[str, Any]]
    """Fields merged over the probe prompt, one request each, sent in order."""
    check: Callable[[Results], tuple[bool, str]]
    component: str
    """A diagnosis.COMPONENTS name."""


_SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "probe", "strict": True, "schema": FORCED_SCHEMA}}
PROBES: dict[str, Probe] = {p.name: p for p in (
    Probe("rejects_negative_temperature", [{"temperature": -1.0, "max_tokens": 8}], _rejects, "API validation"),
    Probe("rejects_top_p_above_1", [{"top_p": 2.0, "max_tokens": 8}], _rejects, "API validation"),
    Probe("max_tokens_honoured", [{"temperature": 0.0, "max_tokens": 1}], _max_tokens, "API validation"),
    Probe("temperature_0_deterministic", [{"temperature": 0.0, "max_tokens": 48, "seed": s} for s in (1, 2, 3)],
          _deterministic, "API validation"),
    Probe("response_format_honoured", [{"temperature": 0.0, "max_tokens": 32, "response_format": _SCHEMA_FORMAT}],
          _schema_honoured, "structured-output backend"),
)}


def component(name: str, result: dict[str, Any] | None = None) -> str:
    """The component of a probe result: its own `component`, else its declaration's (results written before the
    field existed), else API validation (a probe this version does not know)."""
    if result and isinstance(result.get("component"), str):
        return result["component"]
    return PROBES[name].component if name in PROBES else "API validation"


async def run_probes(ep: Endpoint, model: str, extra_body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, probe in PROBES.items():
        results = []
        for v in probe.requests:
            body = {"model": model, "messages": PROMPT, **extra_body, **v}
            r = await ep.send("chat", body)
            # Scrubbed before any check quotes (and cuts) the text: a cut secret no longer matches its whole value.
            results.append((r.status, scrub.text(r.body) if isinstance(r.body, str) else r.body))
        passed, detail = probe.check(results)
        out[name] = {"passed": passed, "detail": detail, "component": probe.component}
    return out


def verdicts(candidate: dict[str, Any], golden: dict[str, Any] | None) -> dict[str, Any]:
    """Probe results -> evidence items: fail only where the reference passed."""
    out = {}
    for name, c in sorted(candidate.items()):
        g = (golden or {}).get(name)
        if c["passed"]:
            v = "pass"
        elif g is None:
            v = "inconclusive"  # no reference result to say whether this engine ever honoured it
        else:
            v = "fail" if g["passed"] else "pass"
        ref = "no reference" if g is None else ("reference passed" if g["passed"] else "reference also fails")
        out[name] = {"verdict": v, "summary": f"{name}: {'passed' if c['passed'] else 'FAILED'} ({c['detail']}; {ref})",
                     "component": component(name, c)}
        if not c["passed"] and g is not None and not g["passed"]:
            out[name]["qualifier"] = "reference_fails"  # a pass only because the golden cannot do it either
    return out


def dumps(results: dict[str, Any]) -> str:
    return json.dumps(results, sort_keys=True, indent=1)
