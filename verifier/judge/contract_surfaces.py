"""Contract checks that only the surfaces other than chat can fail -> findings. Pure.

The chat checks in contract.py run on every surface (the parsers map each surface to the chat shape);
these read what the chat shape cannot hold, which the surface parsers leave in `Parsed.extra`, plus the
request (was thinking asked for?) and, for errors, the raw body (is it the surface's error shape?).
"""

from __future__ import annotations

from typing import Any

from verifier.jsonsafe import TooDeep, loads_bounded
from verifier.surfaces.registry import surface_for
from verifier.types import Finding, Parsed

BLOCKING = {"function_call_without_call_id", "tool_input_not_object", "stop_reason_tool_use_without_block"}
"""Added to contract.BLOCKING: each makes the answer unusable by a client of that surface."""


def _thinking_requested(request: dict[str, Any]) -> bool:
    th = request.get("thinking")
    return isinstance(th, dict) and th.get("type") in ("enabled", "adaptive")


def check(request: dict[str, Any], p: Parsed, mode: str) -> list[Finding]:
    """Findings from what a surface's parser left in `Parsed.extra` (a parser that leaves none gets none:
    the chat parser sets none of these facts)."""
    f: list[Finding] = []
    x = p.extra
    if x.function_call_without_call_id:
        f.append(Finding("function_call_without_call_id", f"{x.function_call_without_call_id} function_call item(s)"))
    if x.tool_input_not_object:
        f.append(Finding("tool_input_not_object", str(x.tool_input_not_object)))
    if x.stop_reason == "tool_use" and not p.tool_calls:
        f.append(Finding("stop_reason_tool_use_without_block"))
    if x.usage_missing_in and p.usage is not None:
        # contract.py already says usage_missing when there is none at all; this is the final event without it.
        f.append(Finding("usage_missing", f"no usage in {x.usage_missing_in}"))
    if x.thinking_without_signature and _thinking_requested(request):
        f.append(Finding("thinking_signature_missing", f"{x.thinking_without_signature} thinking block(s)"))
    limit = request.get("max_output_tokens")
    if x.surface_status == "completed" and isinstance(limit, int) and (p.completion_tokens or 0) >= limit:
        # Seen on llama-server b11434: a reply cut at max_output_tokens still says `completed`.
        f.append(Finding("finish_reason_mismatch", f"status completed at the token limit ({p.completion_tokens} of {limit})"))
    if x.terminal_event_missing:
        f.append(Finding("stream_terminal_event_missing", str(x.terminal_event_missing)))
    if x.stream_error_event:
        f.append(Finding("stream_error_event", str(x.stream_error_event)))
    return f


def error_findings(mode: str, status: int | None, body: str | None) -> list[Finding]:
    """A 4xx/5xx answer on a surface must use that surface's error shape: clients parse it to decide retries."""
    surface = surface_for(mode)
    if status is None or status < 400 or surface.error_shape is None or not body:
        return []
    try:
        d = loads_bounded(body)
    except (ValueError, TooDeep):
        return [Finding("error_shape_wrong", "error body is not JSON")]
    return [] if surface.error_ok(d) else [Finding("error_shape_wrong", f"expected {surface.error_shape}")]
