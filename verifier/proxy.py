"""Fault-injection reverse proxy: mutation testing for the verifier.

    verifier proxy --upstream http://host:8000/v1 --port 8089 --fault answer_in_reasoning:0.5 --seed 7
    verifier proxy --list-faults

It forwards every request to the upstream and applies named frontend faults
(the real bugs of docs/FRONTEND_BUGS.md) to `/chat/completions` traffic:
request faults edit the body before it is sent, response faults edit a JSON
body, stream faults rewrite SSE `data:` payloads as they pass (a few hold the
tool-call deltas back until the choice finishes, because their mutation needs
the whole arguments string). Every other path is forwarded byte for byte.
If the verifier is any good, each fault shows up as the signal named in its
`catches` field.

Two layers, kept apart so the mutations can be tested without sockets:
  * pure mutation functions: `Fault.request(body)` / `Fault.response(body)` return a
    `Change` or None (nothing to mutate), `Fault.stream()` makes a `StreamMutator`
    that maps one payload string to zero or more payload strings;
  * the aiohttp plumbing: `Proxy` (a context manager like testserver.TestServer) and `run`.

Selection is deterministic: a fault with rate r hits a request iff
sha256(seed, fault, sha256(original body), occurrence of that body) < r, so a
rerun of the same requests mutates the same ones, whatever the arrival order.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import hashlib
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TextIO

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

# ----------------------------------------------------------------------------------------------
# Pure layer
# ----------------------------------------------------------------------------------------------

SUMMARY_CHARS = 120


def _short(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
    return s if len(s) <= SUMMARY_CHARS else s[: SUMMARY_CHARS - 1] + "…"


@dataclass(frozen=True)
class Change:
    """A mutation that happened: the new value plus a short before/after for the log."""

    value: Any
    before: str
    after: str
    count: int = 1


Pairs = list[tuple[Any, Any]]


def _pure(fn: Callable[[dict[str, Any]], Pairs]) -> Callable[[dict[str, Any]], Change | None]:
    """Wrap an in-place editor into a pure function: it edits a deep copy and reports what moved."""

    def wrapped(body: dict[str, Any]) -> Change | None:
        new = copy.deepcopy(body)
        pairs = fn(new)
        if not pairs:
            return None
        return Change(new, _short(pairs[0][0]), _short(pairs[0][1]), len(pairs))

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _choices(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for c in body.get("choices") or []:
        if isinstance(c, dict):
            yield c


def _messages(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for c in _choices(body):
        if isinstance(c.get("message"), dict):
            yield c["message"]


def _deltas(chunk: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for c in _choices(chunk):
        if isinstance(c.get("delta"), dict):
            yield c, c["delta"]


def _reasoning_key(d: dict[str, Any]) -> str:
    # vLLM/llama.cpp say reasoning_content; some newer servers say reasoning. Keep the server's dialect.
    return "reasoning" if "reasoning" in d and "reasoning_content" not in d else "reasoning_content"


class StreamMutator:
    """Rewrites a stream's `data:` payloads one at a time. Pure: no I/O, only this object's state.

    `feed` returns the payloads to send now (possibly none, when held back), `flush`
    what is still held when the stream ends. `changes` records (before, after) summaries.
    Subclasses implement `chunk` (None = pass the payload through byte for byte) and `end`.
    """

    def __init__(self) -> None:
        self.changes: list[tuple[str, str]] = []
        self._ended = False

    def feed(self, payload: str) -> list[str]:
        if payload.strip() == "[DONE]":
            return self.flush() + [payload]
        try:
            d = json.loads(payload)
        except json.JSONDecodeError:
            return [payload]  # not ours to fix; the verifier's bad-chunk check should see it as sent
        if not isinstance(d, dict):
            return [payload]
        out = self.chunk(d)
        return [payload] if out is None else [json.dumps(x, ensure_ascii=False) for x in out]

    def flush(self) -> list[str]:
        if self._ended:
            return []
        self._ended = True
        return [json.dumps(x, ensure_ascii=False) for x in self.end()]

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        return None

    def end(self) -> list[dict[str, Any]]:
        return []

    def note(self, before: Any, after: Any) -> None:
        self.changes.append((_short(before), _short(after)))


class _PerChunk(StreamMutator):
    """A stateless per-chunk edit: `edit(chunk)` changes the chunk in place and returns (before, after) pairs."""

    def __init__(self, edit: Callable[[dict[str, Any]], Pairs]) -> None:
        super().__init__()
        self._edit = edit

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pairs = self._edit(d)
        for b, a in pairs:
            self.note(b, a)
        return [d] if pairs else None


def per_chunk(edit: Callable[[dict[str, Any]], Pairs]) -> Callable[[], StreamMutator]:
    return lambda: _PerChunk(edit)


def run_stream(mutators: list[StreamMutator], payloads: list[str]) -> list[str]:
    """Push a whole stream through a chain of mutators (tests and offline use)."""
    chain = Chain(mutators)
    out = [x for p in payloads for x in chain.feed(p)]
    return out + chain.flush()


class Chain:
    """Several stream mutators in order: each one's output is the next one's input."""

    def __init__(self, mutators: list[StreamMutator]) -> None:
        self.mutators = mutators

    def feed(self, payload: str) -> list[str]:
        payloads = [payload]
        for m in self.mutators:
            payloads = [y for x in payloads for y in m.feed(x)]
        return payloads

    def flush(self) -> list[str]:
        # What mutator i still holds must still pass through mutators i+1.., which then flush in turn.
        pending: list[str] = []
        for m in self.mutators:
            pending = [y for x in pending for y in m.feed(x)] + m.flush()
        return pending


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    """What the proxy does to the traffic."""
    mimics: str
    """The real bug it reproduces (FRONTEND_BUGS.md)."""
    catches: str
    """The verifier signal that should flag it (a contract finding code, or a compare signal)."""
    request: Callable[[dict[str, Any]], Change | None] | None = None
    response: Callable[[dict[str, Any]], Change | None] | None = None
    stream: Callable[[], StreamMutator] | None = None

    @property
    def kinds(self) -> list[str]:
        return [k for k in ("request", "response", "stream") if getattr(self, k) is not None]


# --- tool-call faults ---------------------------------------------------------------------------


def _markup(name: str, arguments: str) -> str:
    try:
        args: Any = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        args = arguments
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


@_pure
def _markup_response(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in _choices(body):
        msg = c.get("message") or {}
        calls = msg.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            continue
        text = "".join(_markup((tc.get("function") or {}).get("name", ""), (tc.get("function") or {}).get("arguments", "")) for tc in calls)
        pairs.append((f"{len(calls)} tool_calls, finish_reason={c.get('finish_reason')}", text))
        msg["content"] = (msg.get("content") or "") + text
        msg["tool_calls"] = []
        c["finish_reason"] = "stop"
    return pairs


class _ToolCallBuffer(StreamMutator):
    """Holds chunks carrying tool-call deltas until the choice finishes; content streams on live.

    Buffering is needed because e.g. "drop the final `}`" is only decidable once the
    whole arguments string is known.
    """

    def __init__(self) -> None:
        super().__init__()
        self.held: list[dict[str, Any]] = []

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        has_calls = any(delta.get("tool_calls") for _, delta in _deltas(d))
        has_finish = any(c.get("finish_reason") for c in _choices(d))
        if has_calls:
            self.held.append(d)
            return self._release(None) if has_finish else []
        if has_finish and self.held:
            return self._release(d)
        return None

    def end(self) -> list[dict[str, Any]]:
        return self._release(None) if self.held else []

    def _release(self, finish: dict[str, Any] | None) -> list[dict[str, Any]]:
        held, self.held = self.held, []
        return self.transform(held, finish)

    def transform(self, held: list[dict[str, Any]], finish: dict[str, Any] | None) -> list[dict[str, Any]]:
        raise NotImplementedError


class _ArgsStream(_ToolCallBuffer):
    """Applies a string edit to each call's full arguments, then re-splits them at the original boundaries."""

    def __init__(self, edit: Callable[[str], str | None]) -> None:
        super().__init__()
        self._edit = edit

    def transform(self, held: list[dict[str, Any]], finish: dict[str, Any] | None) -> list[dict[str, Any]]:
        pieces: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for d in held:
            for c, delta in _deltas(d):
                for tc in delta.get("tool_calls") or []:
                    fn = tc.get("function") or {}
                    if isinstance(fn.get("arguments"), str):
                        pieces.setdefault((c.get("index", 0), tc.get("index", 0)), []).append(fn)
        for fns in pieces.values():
            full = "".join(f["arguments"] for f in fns)
            new = self._edit(full)
            if new is None or new == full:
                continue
            self.note(full, new)
            pos = 0
            for i, f in enumerate(fns):
                n = len(new) if i == len(fns) - 1 else len(f["arguments"])
                f["arguments"] = new[pos : pos + n]
                pos += n
        return held + ([finish] if finish else [])


class _MarkupStream(_ToolCallBuffer):
    def transform(self, held: list[dict[str, Any]], finish: dict[str, Any] | None) -> list[dict[str, Any]]:
        calls: dict[int, dict[int, dict[str, str]]] = {}
        kept: list[dict[str, Any]] = []
        for d in held:
            for c, delta in _deltas(d):
                for tc in delta.pop("tool_calls", None) or []:
                    fn = tc.get("function") or {}
                    slot = calls.setdefault(c.get("index", 0), {}).setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
            if any(delta or c.get("finish_reason") for c, delta in _deltas(d)):
                kept.append(d)  # something besides the tool calls is left (role, content, finish)
        envelope = {k: v for k, v in held[0].items() if k not in ("choices", "usage")}
        out: list[dict[str, Any]] = []
        for ci, per_index in calls.items():
            text = "".join(_markup(s["name"], s["arguments"]) for s in per_index.values())
            self.note(f"{len(per_index)} streamed tool_calls", text)
            out.append({**envelope, "choices": [{"index": ci, "delta": {"content": text}, "finish_reason": None}]})
        for d in kept + ([finish] if finish else []):
            for c in _choices(d):
                if c.get("finish_reason") == "tool_calls":
                    c["finish_reason"] = "stop"
            out.append(d)
        return out


def _args_fault(edit: Callable[[str], str | None]) -> tuple[Callable[[dict[str, Any]], Change | None], Callable[[], StreamMutator]]:
    @_pure
    def response(body: dict[str, Any]) -> Pairs:
        pairs: Pairs = []
        for msg in _messages(body):
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") or {}
                a = fn.get("arguments")
                new = edit(a) if isinstance(a, str) else None
                if new is not None and new != a:
                    pairs.append((a, new))
                    fn["arguments"] = new
        return pairs

    return response, lambda: _ArgsStream(edit)


def _drop_last_brace(a: str) -> str | None:
    s = a.rstrip()
    return s[:-1] if s.endswith("}") else None


def _double_encode(a: str) -> str | None:
    return json.dumps(a) if a.strip() else None


def _truncate_half(a: str) -> str | None:
    return a[: len(a) // 2] if len(a) >= 2 else None


def _index_zero(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for _, delta in _deltas(d):
        for tc in delta.get("tool_calls") or []:
            if tc.get("index", 0) != 0:
                pairs.append((f"index {tc['index']}", "index 0"))
                tc["index"] = 0
    return pairs


FINISH_SWAP = {"tool_calls": "stop", "stop": "tool_calls"}


def _finish_wrong(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in _choices(d):
        fr = c.get("finish_reason")
        if fr in FINISH_SWAP:
            pairs.append((fr, FINISH_SWAP[fr]))
            c["finish_reason"] = FINISH_SWAP[fr]
    return pairs


def _finish_missing(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in _choices(d):
        if c.get("finish_reason") is not None:
            pairs.append((c["finish_reason"], None))
            c["finish_reason"] = None
    return pairs


def _rewritten_id(old: str) -> str:
    # Derived from the original id, so every chunk of a stream and every rerun agree.
    return "chatcmpl-tool-" + hashlib.sha256(old.encode()).hexdigest()[:32]


def _ids_in(calls: Any) -> Pairs:
    pairs: Pairs = []
    for tc in calls or []:
        old = tc.get("id") if isinstance(tc, dict) else None
        if isinstance(old, str) and old and not old.startswith("chatcmpl-tool-"):
            tc["id"] = _rewritten_id(old)
            pairs.append((old, tc["id"]))
    return pairs


def _ids_response(body: dict[str, Any]) -> Pairs:
    return [p for msg in _messages(body) for p in _ids_in(msg.get("tool_calls"))]


def _ids_chunk(d: dict[str, Any]) -> Pairs:
    return [p for _, delta in _deltas(d) for p in _ids_in(delta.get("tool_calls"))]


# --- reasoning / usage faults -------------------------------------------------------------------


@_pure
def _reasoning_to_content(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for msg in _messages(body):
        r = msg.get("reasoning_content") or msg.get("reasoning")
        if not isinstance(r, str) or not r:
            continue
        new = f"<think>{r}</think>{msg.get('content') or ''}"
        pairs.append((f"reasoning={r}", f"content={new}"))
        msg["content"] = new
        msg.pop("reasoning", None)
        msg["reasoning_content"] = None  # as in vLLM #12999: the field is there, null
    return pairs


class _ReasoningToContentStream(StreamMutator):
    """Reasoning deltas become content, opened by <think> and closed at the first answer piece or the finish."""

    def __init__(self) -> None:
        super().__init__()
        self.open: set[int] = set()
        self.last: dict[str, Any] | None = None

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        self.last = d
        changed = False
        for c, delta in _deltas(d):
            i = c.get("index", 0)
            r = delta.pop("reasoning_content", None) or delta.pop("reasoning", None)
            delta.pop("reasoning", None)
            text = delta.get("content") if isinstance(delta.get("content"), str) else ""
            out = ""
            if r:
                out += ("" if i in self.open else "<think>") + r
                self.open.add(i)
            if (text or c.get("finish_reason")) and i in self.open:
                out += "</think>"
                self.open.discard(i)
            if out:
                self.note(f"reasoning={r or ''}", out + text)
                delta["content"] = out + text
                changed = True
        return [d] if changed else None

    def end(self) -> list[dict[str, Any]]:
        if not self.open or self.last is None:
            return []  # a stream cut mid-reasoning keeps its open <think>; nothing to close it with
        env = {k: v for k, v in self.last.items() if k not in ("choices", "usage")}
        out = [{**env, "choices": [{"index": i, "delta": {"content": "</think>"}, "finish_reason": None}]} for i in sorted(self.open)]
        self.open.clear()
        return out


@_pure
def _content_to_reasoning(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for msg in _messages(body):
        text = msg.get("content")
        if not isinstance(text, str) or not text:
            continue
        key = _reasoning_key(msg)
        msg[key] = (msg.get(key) or "") + text
        msg["content"] = None
        pairs.append((f"content={text}", f"{key}={msg[key]}"))
    return pairs


def _content_to_reasoning_chunk(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for _, delta in _deltas(d):
        text = delta.get("content")
        if isinstance(text, str) and text:
            key = _reasoning_key(delta)
            delta[key] = (delta.get(key) or "") + text
            del delta["content"]
            pairs.append((f"content={text}", f"{key}={delta[key]}"))
    return pairs


@_pure
def _drop_usage(body: dict[str, Any]) -> Pairs:
    if body.get("usage") is None:
        return []
    return [(body.pop("usage"), "(removed)")]


class _DropUsageStream(StreamMutator):
    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if d.get("usage") is None:
            return None
        self.note(d.pop("usage"), "(removed)")
        # The usage-only chunk (choices: []) has nothing else to say: drop it whole.
        return [d] if d.get("choices") else []


# --- request faults -----------------------------------------------------------------------------


def _drop_keys(*keys: str) -> Callable[[dict[str, Any]], Change | None]:
    @_pure
    def edit(body: dict[str, Any]) -> Pairs:
        gone = {k: body.pop(k) for k in keys if k in body}
        return [(gone, f"removed {', '.join(gone)}")] if gone else []

    return edit


@_pure
def _drop_system(body: dict[str, Any]) -> Pairs:
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return []
    gone = [m for m in msgs if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    if not gone:
        return []
    body["messages"] = [m for m in msgs if m not in gone]
    return [(gone[0].get("content"), f"removed {len(gone)} system message(s)")]


# Sampling knobs only. max_tokens / max_completion_tokens stay: they are a budget, not a sampling
# parameter; dropping them would let a server generate to its context limit (cost, hangs) and
# change what `finish_reason: length` means, which is a different fault from "temperature ignored".
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty")


# --- stream text faults -------------------------------------------------------------------------


def _first_visible(s: str) -> int | None:
    return next((i for i, ch in enumerate(s) if not ch.isspace()), None)


def _text_edit(edit: Callable[[str], str | None]) -> Callable[[dict[str, Any]], Pairs]:
    def chunk(d: dict[str, Any]) -> Pairs:
        pairs: Pairs = []
        for _, delta in _deltas(d):
            text = delta.get("content")
            new = edit(text) if isinstance(text, str) and text else None
            if new is not None and new != text:
                pairs.append((text, new))
                delta["content"] = new
        return pairs

    return chunk


def _duplicate_char(s: str) -> str | None:
    i = _first_visible(s)
    return None if i is None else s[: i + 1] + s[i:]


def _garble(s: str) -> str | None:
    # A multibyte character split across tokens and decoded piece by piece: the character is lost.
    i = _first_visible(s)
    return None if i is None else s[:i] + "\ufffd\ufffd" + s[i + 1 :]


# --- the table ----------------------------------------------------------------------------------

_INVALID = _args_fault(_drop_last_brace)
_DOUBLE = _args_fault(_double_encode)
_TRUNC = _args_fault(_truncate_half)

FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("tool_markup_in_content",
          "tool calls rendered as <tool_call>{\"name\":..,\"arguments\":..}</tool_call> in content; tool_calls emptied; finish_reason tool_calls -> stop",
          "tool-call parser not applied (vLLM PR #31207, #28543; often streaming only)",
          "tool_markup_in_content", response=_markup_response, stream=_MarkupStream),
    Fault("tool_args_invalid_json", "the final `}` of every tool-call arguments string is dropped",
          "vLLM PR #41739 (missing final brace)", "tool_args_invalid_json", response=_INVALID[0], stream=_INVALID[1]),
    Fault("tool_args_double_encoded", "every arguments string is JSON-encoded a second time (json.loads gives a string)",
          "vLLM PR #54964", "tool_args_not_object", response=_DOUBLE[0], stream=_DOUBLE[1]),
    Fault("tool_args_truncated", "every arguments string is cut to half its length",
          "size-capped Kimi parser in vLLM (8 KB cap)", "tool_args_invalid_json", response=_TRUNC[0], stream=_TRUNC[1]),
    Fault("stream_index_zero", "streams only: every parallel tool call's delta gets index 0",
          "Ollama #15457, LiteLLM #33678 (calls merged as write_filewrite_file)", "stream_index_collision",
          stream=per_chunk(_index_zero)),
    Fault("finish_reason_wrong", "finish_reason swapped: tool_calls -> stop, stop -> tool_calls (length untouched)",
          "vLLM #53269 (stream says tool_calls where non-stream says length); DeepSeek-V3 #944",
          "finish_reason_mismatch / finish_reason_tool_calls_without_calls",
          response=_pure(_finish_wrong), stream=per_chunk(_finish_wrong)),
    Fault("finish_reason_missing", "finish_reason set to null on every choice / chunk",
          "a verifier silently read a missing finish_reason as stop", "finish_reason_missing",
          response=_pure(_finish_missing), stream=per_chunk(_finish_missing)),
    Fault("tool_call_ids_rewritten", "tool-call ids replaced with chatcmpl-tool-<hex> (derived from the original id)",
          "vLLM #29596, SGLang PR #21377, exo #2281 (Kimi expects functions.NAME:IDX)",
          "tool_call_id_format (needs the model's expected id format) and multi-turn replays",
          response=_pure(_ids_response), stream=per_chunk(_ids_chunk)),
    Fault("reasoning_in_content", "reasoning moved into content as <think>reasoning</think>answer; reasoning_content null",
          "vLLM #12999 (template moved <think> into the prompt)", "reasoning_in_content",
          response=_reasoning_to_content, stream=_ReasoningToContentStream),
    Fault("answer_in_reasoning", "content moved into reasoning_content; content null (streams: content deltas become reasoning deltas)",
          "Qwen3 with thinking off under the wrong reasoning parser (vLLM #19839, SGLang #14821)", "answer_in_reasoning",
          response=_content_to_reasoning, stream=per_chunk(_content_to_reasoning_chunk)),
    Fault("usage_dropped", "usage removed (streams: the usage chunk is dropped)",
          "servers that ignore stream_options.include_usage or omit usage", "usage_missing",
          response=_drop_usage, stream=_DropUsageStream),
    Fault("drop_response_format", "request: response_format removed before forwarding",
          "response_format silently ignored (llama-cpp-python, grammar skipped)", "json_invalid_strict / json_schema_violation_strict",
          request=_drop_keys("response_format")),
    Fault("drop_system_prompt", "request: system/developer messages removed before forwarding",
          "silent front truncation drops the system prompt first (Ollama #6253)", "prompt_tokens fingerprint (below the golden's)",
          request=_drop_system),
    Fault("drop_tools", "request: tools, tool_choice and parallel_tool_calls removed before forwarding",
          "template ignores tools (llama.cpp #27129)", "prompt_tokens fingerprint; tool-decision accuracy",
          request=_drop_keys("tools", "tool_choice", "parallel_tool_calls")),
    Fault("drop_sampling_params", f"request: {', '.join(SAMPLING_KEYS)} removed (max_tokens kept: it is a budget, and dropping it risks unbounded generation)",
          "temperature ignored / server defaults override the request (vLLM #15241, #17075)",
          "parameter-effect probes; run-to-run spread at temperature 0",
          request=_drop_keys(*SAMPLING_KEYS)),
    Fault("stream_duplicate_chars", "streams only: the first visible character of every content delta is doubled",
          "duplicated CJK characters in streams (SGLang #31598)", "stream parity (streamed vs non-streamed answer)",
          stream=per_chunk(_text_edit(_duplicate_char))),
    Fault("stream_garble", "streams only: the first visible character of every content delta becomes U+FFFD U+FFFD",
          "detokenizer splits multibyte characters (vLLM #8627)", "stream parity (streamed vs non-streamed answer)",
          stream=per_chunk(_text_edit(_garble))),
]}


def parse_fault_spec(spec: str) -> tuple[str, float]:
    """'NAME' or 'NAME:RATE' -> (name, rate). ValueError with a one-line reason."""
    name, _, rate_s = spec.strip().partition(":")
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; see --list-faults")
    try:
        rate = float(rate_s) if rate_s else 1.0
    except ValueError:
        raise ValueError(f"fault {name}: rate {rate_s!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"fault {name}: rate must be in [0, 1], got {rate}")
    return name, rate


def selected(seed: int, fault: str, key: str, rate: float) -> bool:
    """Deterministic coin: the same (seed, fault, request key) always gives the same answer."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = hashlib.sha256(f"{seed}\0{fault}\0{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < rate


def list_faults() -> str:
    lines = []
    for f in FAULTS.values():
        lines.append(f"{f.name}  [{', '.join(f.kinds)}]")
        lines.append(f"    does:    {f.description}")
        lines.append(f"    mimics:  {f.mimics}")
        lines.append(f"    catches: {f.catches}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Plumbing
# ----------------------------------------------------------------------------------------------

# Hop-by-hop and framing headers are the proxy's own business; everything else (Authorization
# included) goes through untouched. Accept-Encoding is dropped so bodies arrive rewritable.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "accept-encoding", "content-encoding"}


def _filter_headers(h: Any) -> CIMultiDict[str]:
    return CIMultiDict((k, v) for k, v in h.items() if k.lower() not in _HOP)


class Proxy:
    """The reverse proxy. As a context manager it runs on its own thread and loop, like TestServer.

    `faults`: "NAME[:RATE]" strings or (name, rate) pairs. `log`: a text stream or a path
    for JSON lines; None keeps mutations in `.mutations` only.
    """

    def __init__(self, upstream: str, faults: Iterable[str | tuple[str, float]] = (), seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0, log: TextIO | str | Path | None = None, connections: int = 100):
        self.faults: list[tuple[Fault, float]] = []
        for spec in faults:
            name, rate = parse_fault_spec(spec) if isinstance(spec, str) else (spec[0], float(spec[1]))
            if name not in FAULTS:
                raise ValueError(f"unknown fault {name!r}; see --list-faults")
            self.faults.append((FAULTS[name], rate))
        self.upstream_root = upstream.rstrip("/").removesuffix("/v1")
        self.seed = seed
        self.host = host
        self._port = port
        self.port = 0
        self.connections = connections
        self.mutations: list[dict[str, Any]] = []
        self.requests = 0
        self._seen: dict[str, int] = {}
        self._log_arg = log
        self._log: TextIO | None = None
        self._owns_log = False
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- selection and logging --

    def _key(self, raw: bytes) -> str:
        # Identical bodies are interchangeable, so "the nth copy of this body" is reproducible
        # under any concurrency; a request counter would not be.
        h = hashlib.sha256(raw).hexdigest()[:16]
        n = self._seen.get(h, 0)
        self._seen[h] = n + 1
        return f"{h}:{n}"

    def _record(self, fault: Fault, path: str, n: int, stream: bool, before: str, after: str, count: int) -> None:
        rec = {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"), "fault": fault.name, "path": path,
               "request": n, "stream": stream, "changes": count, "before": before, "after": after}
        self.mutations.append(rec)
        if self._log is not None:
            self._log.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self._log.flush()

    # -- the handler --

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        raw = await request.read()
        path = request.path
        active: list[Fault] = []
        n = 0
        stream = False
        if request.method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            if isinstance(body, dict):
                self.requests += 1
                n = self.requests
                key = self._key(raw)
                active = [f for f, rate in self.faults if selected(self.seed, f.name, key, rate)]
                body, changed = self._apply(active, "request", body, path, n, bool(body.get("stream")))
                if changed:
                    raw = json.dumps(body, ensure_ascii=False).encode()
        try:
            up = await self._session.request(request.method, self.upstream_root + request.path_qs, data=raw,
                                             headers=_filter_headers(request.headers), allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            return web.json_response({"error": {"message": f"proxy: upstream failed: {type(e).__name__}", "type": "proxy_error"}}, status=502)
        async with up:
            headers = _filter_headers(up.headers)
            ctype = up.headers.get("Content-Type", "")
            if up.status == 200 and "text/event-stream" in ctype:
                mutators = [(f, f.stream()) for f in active if f.stream]
                if mutators:
                    return await self._stream(request, up, headers, mutators, path, n)
            elif up.status == 200 and "json" in ctype and any(f.response for f in active):
                return await self._body(up, headers, [f for f in active if f.response], path, n)
            return await self._passthrough(request, up, headers)

    def _apply(self, faults: list[Fault], kind: str, body: dict[str, Any], path: str, n: int, stream: bool) -> tuple[dict[str, Any], bool]:
        """Run each fault's `request` or `response` mutation in turn, logging every change."""
        changed = False
        for f in faults:
            fn = getattr(f, kind)
            ch = fn(body) if fn else None
            if ch is not None:
                body, changed = ch.value, True
                self._record(f, path, n, stream, ch.before, ch.after, ch.count)
        return body, changed

    async def _passthrough(self, request: web.Request, up: aiohttp.ClientResponse, headers: CIMultiDict[str]) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, reason=up.reason, headers=headers)
        await resp.prepare(request)
        try:
            async for data in up.content.iter_any():
                await resp.write(data)
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError):
            pass  # either side went away; nothing to tell anyone
        return resp

    async def _body(self, up: aiohttp.ClientResponse, headers: CIMultiDict[str], faults: list[Fault], path: str, n: int) -> web.Response:
        data = await up.read()
        try:
            body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict):
            body, changed = self._apply(faults, "response", body, path, n, False)
            if changed:
                data = json.dumps(body, ensure_ascii=False).encode()
        return web.Response(status=up.status, body=data, headers=headers)

    async def _stream(self, request: web.Request, up: aiohttp.ClientResponse, headers: CIMultiDict[str],
                      mutators: list[tuple[Fault, StreamMutator]], path: str, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, reason=up.reason, headers=headers)
        await resp.prepare(request)
        chain = Chain([m for _, m in mutators])

        def frame(payloads: list[str]) -> bytes:
            return b"".join(f"data: {p}\n\n".encode() for p in payloads)

        logged = False

        def log_once() -> None:
            nonlocal logged
            if not logged:
                logged = True
                for f, m in mutators:
                    if m.changes:
                        self._record(f, path, n, True, m.changes[0][0], m.changes[0][1], len(m.changes))

        buf = b""
        try:
            async for data in up.content.iter_any():
                buf += data
                out = b""
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    text = line.decode("utf-8", errors="replace").rstrip("\r")
                    if text.startswith("data:"):
                        out += frame(chain.feed(text[5:].strip()))
                    elif text:
                        out += (text + "\n").encode()  # event:, id:, comments: as they came
                if out:
                    await resp.write(out)
            tail = buf.decode("utf-8", errors="replace").strip()
            out = frame(chain.feed(tail[5:].strip())) if tail.startswith("data:") else b""
            await resp.write(out + frame(chain.flush()))
            log_once()  # before the end of the body, so a client that saw the end sees the log too
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError):
            pass  # a cut upstream or a gone client: the client sees the cut, as it would without us
        finally:
            log_once()
        return resp

    # -- lifecycle --

    async def _start(self) -> None:
        if isinstance(self._log_arg, (str, Path)):
            self._log = open(self._log_arg, "a", encoding="utf-8")
            self._owns_log = True
        else:
            self._log = self._log_arg
        # One pooled session for the proxy's life; no per-request client construction.
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=256 * 1024**2)  # image requests are large
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()
        if self._session:
            await self._session.close()
        if self._owns_log and self._log:
            self._log.close()

    def start(self) -> "Proxy":
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "Proxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", help="OpenAI-compatible base URL to forward to, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8089, help="port to listen on (default 8089; 0 = any free port)")
    p.add_argument("--fault", action="append", default=[], metavar="NAME[:RATE]",
                   help="fault to inject (repeatable; RATE in [0,1], default 1.0); see --list-faults")
    p.add_argument("--seed", type=int, default=0, help="selection seed: same seed and requests, same mutations (default 0)")
    p.add_argument("--log", metavar="FILE.jsonl", help="append one JSON line per mutation here (default stderr); headers are never logged")
    p.add_argument("--list-faults", action="store_true", help="describe every fault and exit")


def run(a: argparse.Namespace) -> int:
    from .errors import UsageError

    if a.list_faults:
        print(list_faults())
        return 0
    if not a.upstream:
        raise UsageError("proxy needs --upstream URL (or --list-faults)")
    if not a.upstream.startswith(("http://", "https://")):
        raise UsageError("--upstream must be an http:// or https:// URL")
    specs = [s for item in a.fault for s in item.split(",") if s.strip()]
    try:
        proxy = Proxy(a.upstream, specs, seed=a.seed, host=a.host, port=a.port, log=a.log or sys.stderr)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if a.log:
        try:
            Path(a.log).open("a", encoding="utf-8").close()
        except OSError as e:
            raise UsageError(f"--log {a.log}: {e.strerror}") from None

    async def serve() -> None:
        from .endpoint import redact_url

        try:
            await proxy._start()
        except OSError as e:
            await proxy._stop()
            raise UsageError(f"cannot listen on {a.host}:{a.port}: {e.strerror}") from None

        names = ", ".join(f"{f.name}:{r:g}" for f, r in proxy.faults) or "none (pass-through)"
        print(f"verifier proxy: {proxy.url} -> {redact_url(a.upstream)}  faults: {names}  seed: {a.seed}", file=sys.stderr, flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await proxy._stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0
