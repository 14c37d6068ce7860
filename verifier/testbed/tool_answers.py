"""The test server's tool-calling model: BFCL requests answered with the calls of BFCL's own ground truth.

The server sees only the request body, and BFCL's ground truth is not derivable from it (the question is prose).
So the answers are looked up: an index of the BFCL samples the server knows, keyed by what every request of a
sample carries whatever the surface — the user texts so far and the names of the functions offered. A request
that matches gets the sample's ground-truth calls as real `tool_calls` (rendered on every surface, streamed and
not, by the same code as any other reply); one that does not match is left to the caller (None).

Which samples it knows, with no flag: the built-in bfcl smoke subset (suites/data/bfcl_smoke.jsonl, what
`--suite bfcl --smoke` sends), plus every single- and multi-turn category under the BFCL data directory the
suites themselves read ($VERIFIER_BFCL_DATA), or `data_dir` when given (`verifier testbed serve --bfcl-data DIR`).
The index is built on the first request that declares tools, once.

Multi-turn (bfcl-multi-turn) is replayed like a careful model: at each user turn it calls that turn's ground-truth
functions (all at once, ids `call_<turn>_<i>`); once each call's result is in the history, linked by its id, it
answers in text. A call whose result it cannot see it makes again (at most MAX_REPEATS times), the way a real
model acts on a broken history.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

MAX_REPEATS = 3
TurnKey = tuple[tuple[str, ...], tuple[str, ...]]
Call = tuple[str, dict[str, Any]]


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return " ".join(str(p.get("text", "")) for p in c if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return c if isinstance(c, str) else ""


def key_of(req: dict[str, Any]) -> TurnKey:
    """(user texts so far, sorted names of the functions offered): the offered functions tell a miss_func entry (its
    function held back) from the base entry with the same questions."""
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    names = tuple(sorted(str((t.get("function") or {}).get("name")) for t in req.get("tools") or [] if isinstance(t, dict)))
    return tuple(_text(m) for m in msgs if m.get("role") == "user"), names


def first_choice(values: Any) -> tuple[bool, Any]:
    """BFCL's possible values of one parameter -> (send it?, the value). "" among them means "may be omitted"; the
    first other value is sent (BFCL lists the canonical spelling first)."""
    if not isinstance(values, list) or not values:
        return True, values
    real = [v for v in values if v != ""]
    return (True, real[0]) if real else (False, None)


def single_turn_calls(ground_truth: Any) -> list[Call]:
    """BFCL single-turn ground truth [{name: {param: [values]}}] -> calls with one value per parameter."""
    from suites.bfcl import openai_name

    out: list[Call] = []
    for item in ground_truth if isinstance(ground_truth, list) else []:
        for name, params in (item.items() if isinstance(item, dict) else ()):
            args = {}
            for p, values in (params.items() if isinstance(params, dict) else ()):
                send, v = first_choice(values)
                if send:
                    args[p] = v
            out.append((openai_name(name), args))
    return out


PLACEHOLDER = {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def relevant_call(fn: dict[str, Any]) -> Call:
    """A call of `fn` with a placeholder of the declared type for each required parameter (its first enum value
    when it has one), for samples where any call of a declared function is right."""
    params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    args: dict[str, Any] = {}
    for p in params.get("required") or []:
        schema = props.get(p) if isinstance(props.get(p), dict) else {}
        enum = schema.get("enum")
        args[p] = enum[0] if isinstance(enum, list) and enum else PLACEHOLDER.get(str(schema.get("type")), "example")
    return str(fn.get("name")), args


class ToolAnswers:
    """The index of known BFCL samples, built lazily (thread-safe: the server answers on several threads)."""

    def __init__(self, data_dir: str | None = None, env: bool = True):
        self.data_dir = data_dir
        self.env = env
        """Also read $VERIFIER_BFCL_DATA (the directory the bfcl suites read) when no data_dir is given."""
        self._single: dict[TurnKey, list[Call]] | None = None
        self._multi: dict[TurnKey, tuple[int, list[Call]]] = {}
        self._lock = threading.Lock()

    def _root(self) -> Path | None:
        d = self.data_dir or (os.environ.get("VERIFIER_BFCL_DATA") if self.env else None)
        return Path(d) if d and Path(d).is_dir() else None

    def _build(self) -> None:
        from suites import bfcl

        single: dict[TurnKey, list[Call]] = {}
        samples = bfcl.load(smoke=True)
        root = self._root()
        if root is not None:
            for c in bfcl.CATEGORIES:
                if (root / f"BFCL_v4_{c}.json").is_file():
                    try:
                        samples += bfcl.load_category(root, c)
                    except (OSError, ValueError, KeyError):
                        continue  # a damaged category: its requests get no calls, the rest still do
        for s in samples:
            req = bfcl.request(s)
            calls = single_turn_calls(s.target)
            if s.meta.get("category") == "live_relevance" and s.tools:  # no ground truth: any call of a declared function is right
                calls = [relevant_call(s.tools[0]["function"])]
            single.setdefault(key_of(req), calls)
        self._single = single
        if root is not None:
            self._multi = _multi_turn_table(root)

    def calls_for(self, req: dict[str, Any]) -> tuple[int, list[Call]] | None:
        """(the user turn, 1-based; its ground-truth calls) for a known request, else None."""
        if not req.get("tools"):
            return None
        with self._lock:
            if self._single is None:
                self._build()
        key = key_of(req)
        if key in self._multi:
            return self._multi[key]
        assert self._single is not None
        calls = self._single.get(key)
        return (len(key[0]), calls) if calls is not None else None

    def reply_fields(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """The fields of a `Reply` answering `req` as the ground truth does, or None when `req` is not a known sample."""
        found = self.calls_for(req)
        if found is None:
            return None
        turn, calls = found
        if not calls:  # irrelevance: no call is right
            return {"content": "None of the functions offered can do that.", "tool_calls": None}
        msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
        users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
        after = msgs[users[-1] + 1:] if users else []
        answered = answered_ids(after)
        asked = sum(1 for m in after if m.get("role") == "assistant")
        pending = [(i, c) for i, c in enumerate(calls) if f"call_{turn}_{i}" not in answered]
        if not pending or asked >= MAX_REPEATS:
            return {"content": f"Turn {turn} is done.", "tool_calls": None}
        return {"content": None, "tool_calls": [{"name": name, "arguments": json.dumps(args, ensure_ascii=False), "id": f"call_{turn}_{i}"}
                                                for i, (name, args) in pending]}


def answered_ids(after: list[dict[str, Any]]) -> set[Any]:
    """The call ids whose results the model can use: each run of tool results must answer the calls of the
    assistant message before it, in the order they were made (a model reading results by position)."""
    out: set[Any] = set()
    for i, m in enumerate(after):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        ids = [c.get("id") for c in m["tool_calls"] if isinstance(c, dict)]
        results = []
        for r in after[i + 1:]:
            if r.get("role") != "tool":
                break
            results.append(r.get("tool_call_id"))
        for pos, cid in enumerate(results):
            if pos < len(ids) and ids[pos] == cid:
                out.add(cid)
    return out


def _multi_turn_table(root: Path) -> dict[TurnKey, tuple[int, list[Call]]]:
    from suites import bfcl_multi_turn as mt
    from suites.bfcl_sims.execute import parse_gt_call

    table: dict[TurnKey, tuple[int, list[Call]]] = {}
    for c in mt.CATEGORIES:
        if not (root / f"BFCL_v4_{c}.json").is_file():
            continue
        try:
            samples = mt.load_category(root, c)
        except (OSError, ValueError, KeyError):
            continue
        for s in samples:
            users: list[str] = []
            for k in range(s.meta["turns"]):
                users += [_text(m) for m in mt._turn_messages(s.meta["questions"], k, s.meta["held"])]
                names = tuple(sorted(t["function"]["name"] for t in mt._tools_at(s, k + 1)))
                try:
                    calls = [parse_gt_call(x) for x in s.target[k]]
                except ValueError:
                    continue
                table.setdefault((tuple(users), names), (k + 1, calls))
    return table


DEFAULT = ToolAnswers()
"""What the default responder answers from: the smoke subset and $VERIFIER_BFCL_DATA, read on first use."""
