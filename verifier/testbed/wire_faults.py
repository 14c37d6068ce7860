"""Faults whose evidence is on the wire but easy to overlook (issue 38): a server-side output cap, coerced tool-call
argument types, a duplicated stream event, a streaming tool parser that keeps only the first call, logprobs reported
otherwise (scaled, as probabilities, or dropped by a gateway), a stop reason rewritten on truncation.

Pure functions and stream mutators only, like the rest of the catalogue (mutation.py); the proxy applies them, on
the Responses and Messages surfaces by translation (surface_faults.py). They live beside the catalogue
(faults.FAULTS) in WIRE_FAULTS; faults.ALL_FAULTS holds both, which is every name the proxy takes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import text_faults as text
from .mutation import Fault, Pairs, StreamMutator, choices_of, deltas_of, per_chunk, pure_edit
from .tool_faults import args_fault

OUTPUT_CAP = 8
"""The cap output_capped imposes, in tokens: a gateway's default `max_tokens` applied whatever the request asks."""

LOGPROB_SCALE = 1.7
"""What logprobs_scaled multiplies every logprob by: a monotone transform (ranks and tokens unchanged)."""


@pure_edit
def cap_output(body: dict[str, Any]) -> Pairs:
    """Every limit the request sets (or none) becomes OUTPUT_CAP: the server's cap wins over the request's."""
    pairs: Pairs = []
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > OUTPUT_CAP:
            pairs.append((f"{key}={v}", f"{key}={OUTPUT_CAP}"))
            body[key] = OUTPUT_CAP
    if not any(k in body for k in ("max_tokens", "max_completion_tokens")):
        pairs.append(("no max_tokens", f"max_tokens={OUTPUT_CAP}"))
        body["max_tokens"] = OUTPUT_CAP
    return pairs


def coerce_types(arguments: str) -> str | None:
    """Numbers and booleans inside a tool call's arguments become strings (values kept): a schema-driven conversion
    in an XML-format tool parser (SGLang #35564; "offset": "130")."""
    try:
        val = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return None

    def to_str(x: Any) -> Any:
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, (int, float)):
            return json.dumps(x)
        if isinstance(x, dict):
            return {k: to_str(v) for k, v in x.items()}
        if isinstance(x, list):
            return [to_str(v) for v in x]
        return x

    new = to_str(val)
    return json.dumps(new, ensure_ascii=False) if new != val else None


_COERCE = args_fault(coerce_types)


class DuplicateEvent(StreamMutator):
    """The second content delta of the stream is sent twice (a retried write in an SSE writer: the client appends
    it twice). One event, once per stream: a sparse fault, not every chunk."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        text_delta = next((delta.get("content") for _, delta in deltas_of(d)
                           if isinstance(delta.get("content"), str) and delta.get("content")), None)
        if text_delta is None:
            return None
        self.seen += 1
        if self.seen != 2:
            return None
        self.note(text_delta, text_delta + text_delta)
        return [d, json.loads(json.dumps(d))]


class DoneDropped(StreamMutator):
    """Native to chat: the closing `data: [DONE]` is left out; the finish and usage chunks go out as sent and the
    response then ends cleanly (HF `transformers serve` 5.x ends its chat streams so)."""

    def feed(self, payload: str) -> list[str]:
        if payload.strip() == "[DONE]":
            self.note("[DONE]", "(stream ended without it)")
            return self.flush()
        return super().feed(payload)


def fffd_once(s: str) -> str | None:
    """One non-space character of the text becomes U+FFFD (a multi-byte character split across two deltas and
    decoded piece by piece)."""
    i = next((k for k, ch in enumerate(s) if not ch.isspace()), None)
    return None if i is None else s[:i] + "\ufffd" + s[i + 1:]


class FffdOnce(StreamMutator):
    """The second content delta's first visible character becomes U+FFFD, once per stream."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not any(isinstance(delta.get("content"), str) and delta["content"].strip() for _, delta in deltas_of(d)):
            return None
        self.seen += 1
        if self.seen != 2:
            return None
        pairs = text.text_edit(fffd_once)(d)
        for before, after in pairs:
            self.note(before, after)
        return [d] if pairs else None


class FirstCallOnly(StreamMutator):
    """Streams only: every tool-call delta after the first call (index > 0) is dropped; finish_reason stays
    tool_calls. A streaming tool parser that emits the first call of an array and loses the rest (SGLang #35564,
    vLLM PR #53965)."""

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        changed = False
        for _, delta in deltas_of(d):
            calls = delta.get("tool_calls")
            if not isinstance(calls, list):
                continue
            kept = [tc for tc in calls if not (isinstance(tc, dict) and isinstance(tc.get("index"), int) and tc["index"] > 0)]
            if len(kept) != len(calls):
                gone = [tc for tc in calls if tc not in kept]
                self.note(f"{len(gone)} tool-call delta(s) of call index {gone[0].get('index')}", "(dropped)")
                changed = True
                if kept:
                    delta["tool_calls"] = kept
                else:
                    del delta["tool_calls"]
        if not changed:
            return None
        empty = all(not delta and not c.get("finish_reason") for c, delta in deltas_of(d)) and d.get("usage") is None
        return [] if empty else [d]


def _logprob_entries(body_or_chunk: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in choices_of(body_or_chunk):
        lp = c.get("logprobs")
        for entry in (lp.get("content") if isinstance(lp, dict) else None) or []:
            if isinstance(entry, dict):
                out.append(entry)
                out += [x for x in entry.get("top_logprobs") or [] if isinstance(x, dict)]
    return out


def _transform_logprobs(d: dict[str, Any], fn: Any, label: str) -> Pairs:
    pairs: Pairs = []
    for e in _logprob_entries(d):
        v = e.get("logprob")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            e["logprob"] = fn(v)
            if not pairs:
                pairs.append((f"logprob {v}", f"{label} {e['logprob']}"))
    return pairs


def scale_chunk(d: dict[str, Any]) -> Pairs:
    return _transform_logprobs(d, lambda v: round(v * LOGPROB_SCALE, 6), f"x{LOGPROB_SCALE}")


def probs_chunk(d: dict[str, Any]) -> Pairs:
    return _transform_logprobs(d, lambda v: round(math.exp(v), 6), "exp")


def rewrite_length_stop(d: dict[str, Any]) -> Pairs:
    """finish_reason length becomes stop and completion_tokens one more (a gateway translating a backend's
    `completed` status on truncation; the reply's text unchanged)."""
    pairs: Pairs = []
    for c in choices_of(d):
        if c.get("finish_reason") == "length":
            c["finish_reason"] = "stop"
            pairs.append(("length", "stop"))
    u = d.get("usage")
    if pairs and isinstance(u, dict) and isinstance(u.get("completion_tokens"), int):
        u["completion_tokens"] += 1
        if isinstance(u.get("total_tokens"), int):
            u["total_tokens"] += 1
    return pairs


class LengthAsStopStream(StreamMutator):
    """Streams: the finish chunk's length becomes stop, and the usage chunk after it counts one token more."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pairs = rewrite_length_stop(d)
        if pairs:
            self.cut = True
            self.note(*pairs[0])
            return [d]
        u = d.get("usage")
        if self.cut and isinstance(u, dict) and isinstance(u.get("completion_tokens"), int):
            u["completion_tokens"] += 1
            return [d]
        return None


WIRE_FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("output_capped", f"request: max_tokens / max_completion_tokens lowered to {OUTPUT_CAP} (set where absent)",
          "a gateway default or a server max-length applied whatever the request asks (outputs cut at one length)",
          "output_capped (API validation: every output ends at the cap, below the request's limit)", request=cap_output),
    Fault("tool_args_types_coerced", "numbers and booleans in every tool call's arguments become strings (values kept)",
          "schema-driven conversion in an XML-format tool parser (SGLang #35564: integers quoted)",
          "tool_args_types_changed (same values, other JSON types than the golden's calls); tool_args_schema_violation",
          response=_COERCE[0], stream=_COERCE[1]),
    Fault("stream_duplicate_event", "streams only: the second content delta is sent twice",
          "a retried SSE write (one delta appended twice by the client)",
          "stream_text_mismatch (streamed text differs from the golden's, non-streamed equal)", stream=DuplicateEvent),
    Fault("stream_fffd", "streams only: one character of the second content delta becomes U+FFFD",
          "incremental detokenization splitting a multi-byte character (SGLang #31598, vLLM #8627)",
          "replacement_char; stream_text_mismatch", stream=FffdOnce),
    Fault("stream_first_tool_call_only", "streams only: tool-call deltas of every call after the first are dropped",
          "a streaming tool parser emitting only the first call of an array (SGLang #35564, vLLM PR #53965)",
          "stream_tool_calls_dropped (tool-call parser, streaming path)", stream=FirstCallOnly),
    Fault("logprobs_scaled", f"every logprob (and top logprob) multiplied by {LOGPROB_SCALE}",
          "processed logprobs instead of raw ones (vLLM's logprobs mode)", "logprobs_transformed (reporting, not numerics)",
          response=pure_edit(scale_chunk), stream=per_chunk(scale_chunk)),
    Fault("logprobs_as_probs", "every logprob replaced by its probability exp(logprob)",
          "probabilities in the logprob field", "logprob_positive", response=pure_edit(probs_chunk), stream=per_chunk(probs_chunk)),
    Fault("logprobs_dropped", "request: logprobs and top_logprobs removed before forwarding",
          "a gateway dropping parameters (LiteLLM drop_params): every response without logprobs",
          "logprobs_dropped (a parameter the golden's same mode honoured, silently ignored)",
          request=text.drop_keys("logprobs", "top_logprobs")),
    Fault("length_as_stop", "finish_reason length reported as stop, completion_tokens one more",
          "a gateway's Messages translation of a backend that says `completed` on truncation",
          "stop_reason_changed (the golden stopped for length on the same text)",
          response=pure_edit(rewrite_length_stop), stream=LengthAsStopStream),
    Fault("stream_done_dropped", "chat streams only: the closing data: [DONE] left out (finish and usage chunks sent, "
          "then a clean end)", "HF transformers serve (5.x): chat streams end without data: [DONE]",
          "stream_done_missing (stream assembly; a finding, not a cut stream)", stream=DoneDropped, native=("chat",)),
]}
