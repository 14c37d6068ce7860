"""Endpoint preflight: before any sample is spent, one tiny request per wire mode and a look at /models.

A misconfigured endpoint (base URL without /v1, a wrong key, a model name the server does not serve)
turns every request into a 404/401 that would otherwise be recorded as `unsupported` and blamed on
the frontend, or blessed as a golden. Here it is a usage error instead: one line with the status,
the URL tried and a hint. Anything else (5xx, 429, a 400 on the tiny body) is left for the run to
record: the preflight judges the route, the key and the model, not the server's health.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifier.surfaces.registry import mode_of
from verifier.wire.endpoint import endpoint_url, redact_url
from verifier.errors import UsageError

if TYPE_CHECKING:
    from verifier.wire.endpoint import Endpoint

# Sent with each preflight request, so a server or proxy log can tell it from the run's samples.
HEADER = "X-Verifier-Preflight"

def ping_body(mode: str, model: str) -> dict[str, Any]:
    """The smallest valid body of `mode` (its surface adapter declares it per mode)."""
    m = mode_of(mode)
    body = {"model": model, **m.ping}
    if m.stream:
        body["stream"] = True
    return body


def model_ids(listing: Any) -> list[str]:
    """Model ids from a /models body (OpenAI `data` list; tolerant of odd shapes)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    return [str(m["id"]) for m in data or [] if isinstance(m, dict) and m.get("id") is not None]


def _mentions_model(body: str | None) -> bool:
    text = (body or "").lower()
    return "model" in text and any(w in text for w in ("not found", "does not exist", "not exist", "unknown", "model_not_found"))


def hint(status: int | None, model: str, listed: list[str], body: str | None, key_env: str | None) -> str | None:
    """The one-line hint for a status that means the endpoint is misconfigured, or None when it is not."""
    if status in (401, 403):
        # The variable is named by the flag, never by its value: a key pasted where its variable's name belongs
        # must not be echoed (the value is the user's, and may be the key itself).
        default = " (default OPENAI_API_KEY)" if key_env in (None, "OPENAI_API_KEY") else ""
        return f"the endpoint refused the credentials: is the key in the variable --api-key-env names{default} set and right (or pass --header)?"
    unknown = bool(listed) and model not in listed
    if status == 404 or (status == 400 and unknown and _mentions_model(body)):
        return f"model {model!r} not in /v1/models: {', '.join(listed[:10])}" if unknown else "does the base URL end in /v1?"
    return None


async def check(ep: "Endpoint", model: str, modes: list[str], key_env: str | None = None,
                model_check: bool = True) -> dict[str, Any]:
    """Raise UsageError on a misconfigured endpoint; return what was seen (status per mode, models listed).

    A server that lists its models must list the one asked for: llama-server answers any name with its one
    model, so a wrong `--model` would otherwise pass silently. Gateways that alias names opt out (model_check)."""
    models_url = endpoint_url(ep.cfg.base_url, "/models")
    mstatus, listing = await ep.get(models_url)
    listed = model_ids(listing) if mstatus == 200 else []
    if mstatus in (401, 403):
        raise UsageError(f"preflight: GET {redact_url(models_url)} -> HTTP {mstatus}: "
                         + str(hint(mstatus, model, listed, None, key_env)))
    if model_check and listed and model not in listed:
        raise UsageError(f"preflight: model {model!r} is not in GET {redact_url(models_url)}: "
                         f"{', '.join(listed[:20])}{' ...' if len(listed) > 20 else ''}",
                         hints=("pass --model with one of them", "--no-model-check for a gateway that aliases model names"))
    statuses: dict[str, int | None] = {}
    seen: dict[str, Any] = {"models": listed, "models_status": mstatus, "modes": statuses}
    for mode in modes:
        r = await ep.send(mode, ping_body(mode, model), extra_headers={HEADER: "1"})
        statuses[mode] = r.status
        why = hint(r.status, model, listed, r.body, key_env)
        if why:
            url = redact_url(endpoint_url(ep.cfg.base_url, mode_of(mode).path))
            raise UsageError(f"preflight: mode {mode}: POST {url} -> HTTP {r.status}: {why}")
    return seen
