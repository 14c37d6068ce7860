"""The chat-completions surface: `chat`, `chat-stream` and `completions` (the dual path) on `/chat/completions`
and `/completions`. Suites write chat bodies, so the request is sent as the suite wrote it; a stream is
reassembled by choice delta and tool-call index into the same `Parsed` shape as a body. Pure; no network.
"""

from __future__ import annotations

from typing import Any, Callable

from verifier.jsonsafe import stream_objects
from verifier.surfaces.base import Mode, SurfaceMalformed, load, load_or_none
from verifier.types import Exchange, Parsed, WireFacts

CHAT_MESSAGE_KEYS = ("role", "content", "tool_calls", "reasoning_content", "reasoning")
_PING = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}


def reasoning_of(msg: dict[str, Any]) -> str | None:
    # vLLM/SGLang/llama.cpp use reasoning_content; some newer servers use reasoning.
    r = msg.get("reasoning_content")
    if r is None:
        r = msg.get("reasoning")
    return r if isinstance(r, str) else None


def parse_body(text: str | None) -> Parsed:
    """A chat (or /completions) body -> Parsed, unguarded: TooDeep and SurfaceMalformed are the caller's."""
    data = load(text)
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise SurfaceMalformed("no choices in body")
    choice = data["choices"][0]
    if not isinstance(choice, dict):
        raise SurfaceMalformed("choice is not an object")
    msg = choice.get("message") or {}
    if "message" not in choice and isinstance(choice.get("text"), str):
        msg = {"content": choice["text"]}  # a /v1/completions response (the dual path)
    lp = choice.get("logprobs")
    return Parsed(
        content=msg.get("content") if isinstance(msg.get("content"), str) else None,
        reasoning=reasoning_of(msg),
        tool_calls=msg.get("tool_calls"),
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage") if isinstance(data.get("usage"), dict) else None,
        logprobs=lp.get("content") if isinstance(lp, dict) else None,
    )


class _Stream:
    """What a chat-completions stream has said so far, reassembled by choice delta and tool-call index."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.ids_per_index: dict[int, set[str]] = {}
        self.logprobs: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.saw_content = self.saw_reasoning = False

    def add_choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
            self.saw_content = True
        r = reasoning_of(delta)
        if r is not None:
            self.reasoning.append(r)
            self.saw_reasoning = True
        for tc in delta.get("tool_calls") or []:
            self.add_tool_call(tc)
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            self.logprobs.extend(lp["content"])
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def add_tool_call(self, tc: dict[str, Any]) -> None:
        # Parallel calls are told apart by index; names and arguments arrive in pieces to concatenate.
        idx = tc.get("index", 0)
        slot = self.calls.setdefault(idx, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if tc.get("id"):
            self.ids_per_index.setdefault(idx, set()).add(tc["id"])
            slot["id"] = slot["id"] or tc["id"]
        fn = tc.get("function") or {}
        if fn.get("name"):
            slot["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            slot["function"]["arguments"] += fn["arguments"]


MAX_USAGE_CHUNKS = 64
"""Usage objects of one stream compared for consistency (a stream with usage on every chunk is judged on its first 64)."""
RUNNING_COUNTS = frozenset({"completion_tokens", "total_tokens", "completion_tokens_details"})
"""Usage figures that may grow from one usage chunk to the next (continuous usage stats count the output as it goes);
the prompt's figures are known before the first token and never change."""


def usage_split(usages: list[dict[str, Any]]) -> str | None:
    """What disagrees between a stream's usage chunks: a prompt figure (prompt_tokens, prompt_tokens_details and what
    it holds, such as cached_tokens) that a later chunk adds, drops or changes. None: one usage chunk, or chunks that
    agree on the prompt (running output counts may grow)."""
    if len(usages) < 2:
        return None
    first = {k: v for k, v in usages[0].items() if k not in RUNNING_COUNTS}
    for n, later in enumerate(usages[1:], start=2):
        other = {k: v for k, v in later.items() if k not in RUNNING_COUNTS}
        if other != first:
            keys = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
            return f"usage chunk {n} of {len(usages)} differs in {', '.join(keys)[:120]}"
    return None


def parse_stream(chunks: list[str]) -> Parsed:
    st = _Stream()
    extra = WireFacts()
    usages: list[dict[str, Any]] = []
    for data in stream_objects(chunks, extra):
        if isinstance(data.get("usage"), dict):
            st.usage = data["usage"]
            if len(usages) < MAX_USAGE_CHUNKS:
                usages.append(data["usage"])
        for choice in data.get("choices") or []:
            st.add_choice(choice)
    extra.usage_split = usage_split(usages)
    collided = sorted(i for i, ids in st.ids_per_index.items() if len(ids) > 1)
    if collided:
        extra.index_collisions = collided
    if chunks and chunks[-1] != "[DONE]" and finished_without_done(chunks):
        extra.stream_done_missing = True
    return Parsed(
        content="".join(st.content) if st.saw_content else None,
        reasoning="".join(st.reasoning) if st.saw_reasoning else None,
        tool_calls=[st.calls[i] for i in sorted(st.calls)] or None,
        finish_reason=st.finish_reason,
        usage=st.usage,
        logprobs=st.logprobs or None,
        extra=extra,
    )


DONE_TAIL = 3
"""Payloads at a stream's end read for its finish chunk: the finish chunk, the usage chunk, one more to spare."""


def finished_without_done(chunks: list[str]) -> bool:
    """A chat stream that ended cleanly after a finish chunk (a choice with a finish_reason, then its usage) and
    never sent `data: [DONE]` (HF `transformers serve` does this): the answer is whole, so it is the frontend's
    stream-termination defect (`stream_done_missing`), not a cut stream. The caller knows the connection closed
    cleanly: a torn connection is a read error before this is asked. Only the last payloads are parsed."""
    tail = chunks[-DONE_TAIL:]
    if not tail or load_or_none(tail[-1]) is None:
        return False  # it ends inside a payload: cut
    for raw in tail:
        d = load_or_none(raw)
        choices = d.get("choices") if isinstance(d, dict) else None
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
            return True
    return False


class Chat:
    name = "chat"
    modes = (
        Mode("chat", "/chat/completions", False, _PING),
        Mode("chat-stream", "/chat/completions", True, _PING),
        # The dual path: the chat template rendered client-side (verifier/wire/dualpath.py), sent as a raw prompt.
        Mode("completions", "/completions", False, {"prompt": "ping", "max_tokens": 1}, dual_path=True),
    )
    error_shape = None
    no_logprobs = None
    terminal_events: tuple[str, ...] = ()

    def headers(self, cfg: Any) -> dict[str, str]:
        return {}

    def translate(self, mode: Mode, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True} if mode.stream else body

    def request(self, mode: Mode, body: dict[str, Any], extra_body: dict[str, Any]) -> dict[str, Any]:
        if mode.stream:
            body["stream"] = True
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        else:
            body.pop("stream_options", None)
        return body

    def parse_body(self, text: str | None) -> Parsed:
        return parse_body(text)

    def parse_stream(self, chunks: list[str]) -> Parsed:
        return parse_stream(chunks)

    def stream_complete(self, chunks: list[str]) -> bool:
        """`[DONE]` last; or a clean end right after the finish chunk, which is whole but a finding (stream_done_missing)."""
        return bool(chunks) and (chunks[-1] == "[DONE]" or finished_without_done(chunks))

    def error_ok(self, data: Any) -> bool:
        return True

    def text_deltas(self, event: dict[str, Any]) -> list[str]:
        out = []
        for ch in event.get("choices") or []:
            c = (ch.get("delta") or {}).get("content") if isinstance(ch, dict) else None
            if isinstance(c, str) and c:
                out.append(c)
        return out

    def assistant_turn(self, ex: Exchange, parsed: Callable[[], Parsed]) -> list[dict[str, Any]]:
        """The message with the reasoning under the key the server used (`reasoning_content` or `reasoning`)."""
        if ex.chunks is not None and ex.body is None:
            p = parsed()
            key = "reasoning" if any('"reasoning":' in c for c in ex.chunks or []) else "reasoning_content"
            out: dict[str, Any] = {"role": "assistant", "content": p.content}
            if p.reasoning is not None:
                out[key] = p.reasoning
            if p.tool_calls:
                out["tool_calls"] = p.tool_calls
            return [out]
        msg = ((load_or_none(ex.body) or {}).get("choices") or [{}])[0].get("message") or {}
        return [{k: msg[k] for k in CHAT_MESSAGE_KEYS if k in msg}]

    def tool_results(self, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": cid, "content": out} for cid, out in results]

    def extend(self, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {**body, "messages": list(body.get("messages") or []) + entries}


SURFACE = Chat()
