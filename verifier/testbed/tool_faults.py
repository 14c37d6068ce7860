"""Tool-call faults: markup instead of tool_calls, broken arguments, merged stream indexes,
wrong or missing finish_reason, rewritten ids. Pure functions and stream mutators only."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from .mutation import Change, Pairs, StreamMutator, choices_of, deltas_of, messages_of, pure_edit


def _markup(name: str, arguments: str) -> str:
    try:
        args: Any = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        args = arguments
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


@pure_edit
def markup_response(body: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in choices_of(body):
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
        has_calls = any(delta.get("tool_calls") for _, delta in deltas_of(d))
        has_finish = any(c.get("finish_reason") for c in choices_of(d))
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
            for c, delta in deltas_of(d):
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


class MarkupStream(_ToolCallBuffer):
    @staticmethod
    def render(name: str, arguments: str) -> str:
        """The text one call becomes in the content."""
        return _markup(name, arguments)

    @staticmethod
    def retoken(text: str, logprobs: list[Any]) -> list[Any]:
        """The logprob entries of the content the calls became: the calls' own tokens (the markup is what the model
        generated; a parser that did not run passes it on)."""
        return logprobs

    def transform(self, held: list[dict[str, Any]], finish: dict[str, Any] | None) -> list[dict[str, Any]]:
        calls: dict[int, dict[int, dict[str, str]]] = {}
        logprobs: dict[int, list[Any]] = {}  # the call tokens' logprobs: a parser that did not run still streams them
        kept: list[dict[str, Any]] = []
        for d in held:
            for c, delta in deltas_of(d):
                for tc in delta.pop("tool_calls", None) or []:
                    fn = tc.get("function") or {}
                    slot = calls.setdefault(c.get("index", 0), {}).setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
            if any(delta or c.get("finish_reason") for c, delta in deltas_of(d)):
                kept.append(d)  # something besides the tool calls is left (role, content, finish)
            else:
                for c in choices_of(d):
                    lp = (c.get("logprobs") or {}).get("content") if isinstance(c.get("logprobs"), dict) else None
                    if isinstance(lp, list):
                        logprobs.setdefault(c.get("index", 0), []).extend(lp)
        envelope = {k: v for k, v in held[0].items() if k not in ("choices", "usage")}
        out: list[dict[str, Any]] = []
        for ci, per_index in calls.items():
            text = "".join(self.render(s["name"], s["arguments"]) for s in per_index.values())
            self.note(f"{len(per_index)} streamed tool_calls", text)
            choice: dict[str, Any] = {"index": ci, "delta": {"content": text}, "finish_reason": None}
            if logprobs.get(ci):
                choice["logprobs"] = {"content": self.retoken(text, logprobs[ci])}
            out.append({**envelope, "choices": [choice]})
        for d in kept + ([finish] if finish else []):
            for c in choices_of(d):
                if c.get("finish_reason") == "tool_calls":
                    c["finish_reason"] = "stop"
            out.append(d)
        return out


def args_fault(edit: Callable[[str], str | None]) -> tuple[Callable[[dict[str, Any]], Change | None], Callable[[], StreamMutator]]:
    @pure_edit
    def response(body: dict[str, Any]) -> Pairs:
        pairs: Pairs = []
        for msg in messages_of(body):
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") or {}
                a = fn.get("arguments")
                new = edit(a) if isinstance(a, str) else None
                if new is not None and new != a:
                    pairs.append((a, new))
                    fn["arguments"] = new
        return pairs

    return response, lambda: _ArgsStream(edit)


def drop_last_brace(a: str) -> str | None:
    s = a.rstrip()
    return s[:-1] if s.endswith("}") else None


def double_encode(a: str) -> str | None:
    return json.dumps(a) if a.strip() else None


def truncate_half(a: str) -> str | None:
    return a[: len(a) // 2] if len(a) >= 2 else None


def index_zero(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for _, delta in deltas_of(d):
        for tc in delta.get("tool_calls") or []:
            if tc.get("index", 0) != 0:
                pairs.append((f"index {tc['index']}", "index 0"))
                tc["index"] = 0
    return pairs


FINISH_SWAP = {"tool_calls": "stop", "stop": "tool_calls"}


def finish_wrong(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in choices_of(d):
        fr = c.get("finish_reason")
        if fr in FINISH_SWAP:
            pairs.append((fr, FINISH_SWAP[fr]))
            c["finish_reason"] = FINISH_SWAP[fr]
    return pairs


def finish_missing(d: dict[str, Any]) -> Pairs:
    pairs: Pairs = []
    for c in choices_of(d):
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


def ids_response(body: dict[str, Any]) -> Pairs:
    return [p for msg in messages_of(body) for p in _ids_in(msg.get("tool_calls"))]


def ids_chunk(d: dict[str, Any]) -> Pairs:
    return [p for _, delta in deltas_of(d) for p in _ids_in(delta.get("tool_calls"))]
