"""Scripted models for the bfcl-multi-turn tests: a server-side replayer of BFCL's ground truth.

The replayer answers like a careful tool-calling model: at each user turn it calls the ground-truth functions of
that turn (all at once, with reasoning), each call with an id; once every call of the turn has a result linked
by its tool_call_id it answers in text. A call whose result it cannot see (dropped, unlinked, sent under another
role) it calls again, the way a real model acts on a broken history.
"""

from __future__ import annotations

import json
from typing import Any

from suites import bfcl_multi_turn as mt
from suites.bfcl_sims.execute import parse_gt_call
from verifier.testbed.tool_answers import answered_ids  # the test server's own rule: one definition
from verifier.testbed.server import Reply

MAX_REPEATS = 3


def user_text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return c or ""


def gt_table(samples) -> dict[tuple[Any, ...], list[tuple[str, dict]]]:
    """(user texts so far, functions offered) -> the ground-truth calls of that turn, named arguments. The offered
    functions tell a miss_func entry (its function held back) from the base entry with the same questions."""
    table: dict[tuple[Any, ...], list[tuple[str, dict]]] = {}
    for s in samples:
        users: list[str] = []
        for k in range(s.meta["turns"]):
            users += [m.get("content") or "" for m in mt._turn_messages(s.meta["questions"], k, s.meta["held"])]
            names = tuple(sorted(t["function"]["name"] for t in mt._tools_at(s, k + 1)))
            table.setdefault((tuple(users), names), [parse_gt_call(c) for c in s.target[k]])
    return table


def key_of(req: dict[str, Any]) -> tuple[Any, ...]:
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    names = tuple(sorted(str((t.get("function") or {}).get("name")) for t in req.get("tools") or [] if isinstance(t, dict)))
    return tuple(user_text(m) for m in msgs if m.get("role") == "user"), names


def replayer(table, skip: set[tuple[Any, ...]] = frozenset()):
    """A responder replaying `table`; at the user-text keys in `skip` it leaves out the turn's last call."""

    def respond(req: dict[str, Any]) -> Reply:
        msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
        users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
        key = key_of(req)
        calls = table.get(key)
        if calls is None:
            return Reply(content="I cannot do that with these functions.")
        if key in skip:
            calls = calls[:-1]
        n = len(users)
        after = msgs[users[-1] + 1:]
        answered = answered_ids(after)
        asked = sum(1 for m in after if m.get("role") == "assistant")
        pending = [(i, c) for i, c in enumerate(calls) if f"call_{n}_{i}" not in answered]
        if pending and asked < MAX_REPEATS:
            return Reply(content=None, reasoning_content=f"Turn {n}: calling {', '.join(c[0] for _, c in pending)}.",
                         tool_calls=[{"name": name, "arguments": json.dumps(args), "id": f"call_{n}_{i}"} for i, (name, args) in pending])
        return Reply(content=f"Turn {n} is done.", reasoning_content=f"Turn {n}: all results are in.")

    return respond


