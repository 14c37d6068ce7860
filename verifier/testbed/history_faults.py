"""Multi-turn frontend faults: what a serving stack does wrong to the conversation history it is sent.

Each is a pure edit of a chat request (the proxy applies it on Responses and Messages by translation,
surface_faults.on_surface), so each changes only requests that replay history: a single-turn golden does
not move, which is why these live beside the catalogue (faults.FAULTS) rather than in it. The proxy and
`verifier proxy --fault NAME` take them by name like any other fault. What catches them: the conversation
suites' `history_tokens_mismatch` and `followup_divergence` signals, on the first turn whose history holds
what the fault edits (turn_diff.py), and the state and response checks when the model acts on the damage.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .mutation import Fault, Pairs, pure_edit
from .text_faults import drop_reasoning_history


def _messages(body: dict[str, Any]) -> list[Any]:
    msgs = body.get("messages")
    return msgs if isinstance(msgs, list) else []


def _tool_runs(msgs: list[Any]) -> list[list[int]]:
    """Indexes of each run of consecutive `tool` messages (the results of one assistant turn's calls)."""
    runs: list[list[int]] = []
    for i, m in enumerate(msgs):
        if isinstance(m, dict) and m.get("role") == "tool":
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
    return runs


@pure_edit
def drop_tool_result(body: dict[str, Any]) -> Pairs:
    """The last result of every run of tool results removed (a parallel call's result lost; a lone call left without one)."""
    msgs = _messages(body)
    gone = {run[-1] for run in _tool_runs(msgs)}
    if not gone:
        return []
    body["messages"] = [m for i, m in enumerate(msgs) if i not in gone]
    return [(msgs[i].get("content"), "removed") for i in sorted(gone)]


@pure_edit
def reorder_tool_results(body: dict[str, Any]) -> Pairs:
    """Every run of two or more tool results reversed (ids kept: a server that matches by position breaks)."""
    msgs = list(_messages(body))
    pairs: Pairs = []
    for run in _tool_runs(msgs):
        if len(run) > 1:
            items = [msgs[i] for i in run]
            for i, m in zip(run, reversed(items)):
                msgs[i] = m
            pairs.append(([m.get("tool_call_id") for m in items], [m.get("tool_call_id") for m in reversed(items)]))
    if pairs:
        body["messages"] = msgs
    return pairs


def _other_id(cid: Any) -> str:
    """vLLM's own id shape (chatcmpl-tool-<hex>), derived from the original so a rerun rewrites alike."""
    return "chatcmpl-tool-" + hashlib.sha256(str(cid).encode()).hexdigest()[:16]


@pure_edit
def rewrite_earlier_tool_call_ids(body: dict[str, Any]) -> Pairs:
    """In the turns before the last user message, each tool result's tool_call_id is replaced by another id, so it
    no longer links to the call it answers (a frontend that regenerates ids it emitted when they come back)."""
    msgs = _messages(body)
    last_user = max((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    pairs: Pairs = []
    for m in msgs[:last_user]:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") is not None:
            new = _other_id(m["tool_call_id"])
            pairs.append((m["tool_call_id"], new))
            m["tool_call_id"] = new
    return pairs


@pure_edit
def flatten_tool_calls(body: dict[str, Any]) -> Pairs:
    """Assistant tool calls in the history turned into text (`name(arguments)` lines in content), tool_calls removed."""
    pairs: Pairs = []
    for m in _messages(body):
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls"):
            calls = m.pop("tool_calls")
            lines = []
            for c in calls if isinstance(calls, list) else []:
                fn = (c.get("function") if isinstance(c, dict) else None) or {}
                lines.append(f"{fn.get('name')}({fn.get('arguments')})")
            m["content"] = "\n".join(x for x in [m.get("content") or "", *lines] if x)
            pairs.append((json.dumps(calls)[:80], m["content"]))
    return pairs


@pure_edit
def move_system_to_user(body: dict[str, Any]) -> Pairs:
    """The system prompt moved into the first user message (an Anthropic `system` translated as user text)."""
    msgs = _messages(body)
    sys_i = next((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "system"), None)
    user_i = next((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "user"), None)
    if sys_i is None or user_i is None or not isinstance(msgs[sys_i].get("content"), str):
        return []
    text = msgs[sys_i]["content"]
    user = dict(msgs[user_i])
    c = user.get("content")
    user["content"] = f"{text}\n\n{c}" if isinstance(c, str) else [{"type": "text", "text": text}, *(c or [])]
    body["messages"] = [user if i == user_i else m for i, m in enumerate(msgs) if i != sys_i]
    return [(text[:60], "moved into the first user message")]


@pure_edit
def tool_result_as_user(body: dict[str, Any]) -> Pairs:
    """Tool results sent as user messages (role `user`, the tool_call_id dropped)."""
    pairs: Pairs = []
    msgs = _messages(body)
    for i, m in enumerate(msgs):
        if isinstance(m, dict) and m.get("role") == "tool":
            msgs[i] = {"role": "user", "content": m.get("content")}
            pairs.append((m.get("tool_call_id"), "role user"))
    return pairs


HISTORY_FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("tool_result_dropped", "request: the last tool result of every run of results removed from the history",
          "gateways that keep one result of parallel calls; clients that lose a result between turns",
          "history_tokens_mismatch; state/response check when the model re-calls", request=drop_tool_result),
    Fault("tool_results_reordered", "request: every run of two or more tool results reversed (ids kept)",
          "result order assumed to be call order by a template or translation layer",
          "history_tokens_mismatch", request=reorder_tool_results),
    Fault("tool_call_id_rewritten", "request: tool results of earlier turns get another tool_call_id (no longer linked)",
          "vLLM #29596 and kin: ids regenerated or normalised when history comes back",
          "history_tokens_mismatch / followup_divergence on turn 2", request=rewrite_earlier_tool_call_ids),
    Fault("reasoning_dropped", "request: reasoning of earlier assistant turns removed from the history",
          "SGLang #19257 (thinking dropped on the Messages path); reasoning vs reasoning_content on replay",
          "history_tokens_mismatch", request=drop_reasoning_history),
    Fault("tool_calls_flattened", "request: assistant tool calls in the history rewritten as text in content",
          "translation layers that drop structured calls from history (Kimi-K2 #128-style follow-up failures)",
          "history_tokens_mismatch; followup_divergence", request=flatten_tool_calls),
    Fault("system_moved", "request: the system prompt moved into the first user message",
          "Anthropic Messages `system` translated as user text", "prompt_tokens / surface parity on the first request",
          request=move_system_to_user),
    Fault("tool_result_wrong_role", "request: tool results sent as user messages",
          "tool / tool_result mapped to the user role by a surface translation", "history_tokens_mismatch; state/response check",
          request=tool_result_as_user),
]}
