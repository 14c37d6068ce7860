"""Faults on text, reasoning, usage and the request: reasoning moved into content and back,
usage dropped, request keys or system prompts removed, stream text garbled. Pure functions only."""

from __future__ import annotations

from typing import Any, Callable

from .mutation import Change, Pairs, StreamMutator, deltas_of, messages_of, pure_edit, reasoning_key


@pure_edit
def reasoning_to_content(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for msg in messages_of(body):
        r = msg.get("reasoning_content") or msg.get("reasoning")
        if not isinstance(r, str) or not r:
            continue
        new = f"<think>{r}</think>{msg.get('content') or ''}"
        pairs.append((f"reasoning={r}", f"content={new}"))
        msg["content"] = new
        msg.pop("reasoning", None)
        msg["reasoning_content"] = None  # as in vLLM #12999: the field is there, null
    return pairs


class ReasoningToContentStream(StreamMutator):
    """Reasoning deltas become content, opened by <think> and closed at the first answer piece or the finish."""

    def __init__(self) -> None:
        super().__init__()
        self.open: set[int] = set()
        self.last: dict[str, Any] | None = None

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        self.last = d
        changed = False
        for c, delta in deltas_of(d):
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


@pure_edit
def content_to_reasoning(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for msg in messages_of(body):
        text = msg.get("content")
        if not isinstance(text, str) or not text:
            continue
        key = reasoning_key(msg)
        msg[key] = (msg.get(key) or "") + text
        msg["content"] = None
        pairs.append((f"content={text}", f"{key}={msg[key]}"))
    return pairs


def content_to_reasoning_chunk(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for _, delta in deltas_of(d):
        text = delta.get("content")
        if isinstance(text, str) and text:
            key = reasoning_key(delta)
            delta[key] = (delta.get(key) or "") + text
            del delta["content"]
            pairs.append((f"content={text}", f"{key}={delta[key]}"))
    return pairs


@pure_edit
def drop_usage(body: dict[str, Any]) -> Pairs:
    if body.get("usage") is None:
        return []
    return [(body.pop("usage"), "(removed)")]


class DropUsageStream(StreamMutator):
    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        if d.get("usage") is None:
            return None
        self.note(d.pop("usage"), "(removed)")
        # The usage-only chunk (choices: []) has nothing else to say: drop it whole.
        return [d] if d.get("choices") else []


# --- request faults -----------------------------------------------------------------------------


def drop_keys(*keys: str) -> Callable[[dict[str, Any]], Change | None]:
    @pure_edit
    def edit(body: dict[str, Any]) -> Pairs:
        gone = {k: body.pop(k) for k in keys if k in body}
        return [(gone, f"removed {', '.join(gone)}")] if gone else []

    return edit


@pure_edit
def drop_system(body: dict[str, Any]) -> Pairs:
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return []
    gone = [m for m in msgs if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    if not gone:
        return []
    body["messages"] = [m for m in msgs if m not in gone]
    return [(gone[0].get("content"), f"removed {len(gone)} system message(s)")]


@pure_edit
def drop_reasoning_history(body: dict[str, Any]) -> Pairs:
    """Earlier turns' reasoning removed from the history (on Responses: reasoning items; on Messages:
    thinking blocks, through the surface translation)."""
    pairs: Pairs = []
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "assistant":
            for k in ("reasoning_content", "reasoning"):
                if m.get(k):
                    pairs.append((m[k], "removed"))
                    m.pop(k)
    return pairs


FRONT_CUT_CHARS = 6000
"""What prompt_front_truncated keeps of a long user message: its last 6,000 characters (about 1,300 tokens)."""


@pure_edit
def cut_front(body: dict[str, Any]) -> Pairs:
    """Left truncation of long user messages: the end (the question) stays, the start (the facts) goes."""
    pairs: Pairs = []
    for m in body.get("messages") or []:
        text = m.get("content") if isinstance(m, dict) and m.get("role") == "user" else None
        if isinstance(text, str) and len(text) > FRONT_CUT_CHARS:
            m["content"] = text[-FRONT_CUT_CHARS:]
            pairs.append((f"{len(text)} chars: {text[:40]}", f"last {FRONT_CUT_CHARS} chars: {m['content'][:40]}"))
    return pairs


# Sampling knobs only. max_tokens / max_completion_tokens stay: they are a budget, not a sampling
# parameter; dropping them would let a server generate to its context limit (cost, hangs) and
# change what `finish_reason: length` means, which is a different fault from "temperature ignored".
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty")


# --- stream text faults -------------------------------------------------------------------------


def _first_visible(s: str) -> int | None:
    return next((i for i, ch in enumerate(s) if not ch.isspace()), None)


def text_edit(edit: Callable[[str], str | None]) -> Callable[[dict[str, Any]], Pairs]:
    def chunk(d: dict[str, Any]) -> Pairs:
        pairs: Pairs = []
        for _, delta in deltas_of(d):
            text = delta.get("content")
            new = edit(text) if isinstance(text, str) and text else None
            if new is not None and new != text:
                pairs.append((text, new))
                delta["content"] = new
        return pairs

    return chunk


def duplicate_char(s: str) -> str | None:
    i = _first_visible(s)
    return None if i is None else s[: i + 1] + s[i:]


def garble(s: str) -> str | None:
    # A multibyte character split across tokens and decoded piece by piece: the character is lost.
    i = _first_visible(s)
    return None if i is None else s[:i] + "\ufffd\ufffd" + s[i + 1 :]
