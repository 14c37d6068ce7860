"""Multi-turn tool use, replayed on every surface: user -> tool call -> tool result -> answer -> second user turn.

Each conversation is one sample driven by the runner as a conversation (verifier.types.Conversation): three
requests, each turn replaying the server's previous answer exactly as it was emitted (verifier/judge/history.py).
Its records are the turns (`<conversation>/t<k>`), each covering its one request:

    t1  user asks; the model should call the declared tool          metric tool_called
    t2  history + the server's own tool call + our tool result      metric uses_tool_result
    t3  history + the final answer + a second user question         metric history_recall

What it checks, with which signal:
  - the server accepts its own tool-call ids back: t2 is answered, not refused (a refusal is a new
    `unsupported` outcome against the golden: frontend evidence);
  - the id format is stable against the golden (`tool_call_id_style` on t1; Kimi-style `functions.NAME:IDX`
    ids replaced by UUIDs are the known casualty, vLLM #29596);
  - reasoning history is accepted in the shape emitted (reasoning_content / reasoning item / thinking block
    with signature): a server that drops it moves t2's and t3's prompt-token fingerprint;
  - the final answer uses the tool result (t2) and the history (t3).

BFCL's multi_turn categories need BFCL's stateful API simulators (file system, trading bot...) to
execute the calls; these built-in conversations execute their one tool from a fixed table instead.
"""

from __future__ import annotations

import json
from typing import Any

from verifier.judge.parse import MalformedBody, parse_exchange
from verifier.judge.history import assistant_turn, extend, tool_results, user_turn
from verifier.types import Conversation, Exchange, Judgement, Parsed, Sample, Suite
from verifier import jsonsafe

SYSTEM = "You are a helpful assistant. Use the tools when they can answer. Keep answers short."
NUDGE = "Please use the tool to answer."


def _fn(name: str, desc: str, **props: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()}, "required": list(props)}}}


WEATHER = _fn("get_weather", "Current weather for a city.", city="string")
CONVERT = _fn("convert_currency", "Convert an amount between currencies.", amount="number", from_currency="string", to_currency="string")
ORDER = _fn("lookup_order", "Status of a customer order.", order_id="string")

# name -> tools, first question, {call key -> tool result}, facts t2 must state, second question, fact t3 must state
CONVERSATIONS: dict[str, dict[str, Any]] = {
    "weather": {"tools": [WEATHER], "user1": "What is the weather in Paris right now?",
                "results": {"paris": {"city": "Paris", "temperature_c": 18, "condition": "cloudy"}},
                "facts2": ["18"], "user2": "Is it sunny or cloudy there, according to that report?", "fact3": "cloud"},
    "currency": {"tools": [CONVERT], "user1": "Convert 250 USD to EUR.",
                 "results": {"usd": {"amount": 231.5, "currency": "EUR"}},
                 "facts2": ["231.5"], "user2": "Repeat the converted amount, please.", "fact3": "231.5"},
    "order": {"tools": [ORDER, WEATHER], "user1": "Where is my order A-1042?",
              "results": {"a-1042": {"order_id": "A-1042", "status": "shipped", "carrier": "DHL"}},
              "facts2": ["shipped"], "user2": "Which carrier is delivering it?", "fact3": "DHL"},
    "two_cities": {"tools": [WEATHER], "user1": "What is the weather in Rome and in Oslo? Check both.",
                   "results": {"rome": {"city": "Rome", "temperature_c": 24, "condition": "sunny"},
                               "oslo": {"city": "Oslo", "temperature_c": 7, "condition": "rain"}},
                   "facts2": ["24", "7"], "user2": "Which of the two cities is warmer?", "fact3": "Rome"},
}
TURNS = 3


def _sample(conv: str) -> Sample:
    """One conversation: the first request's prompt, and per turn what its answer must hold (`target[k - 1]`)."""
    c = CONVERSATIONS[conv]
    target = [[t["function"]["name"] for t in c["tools"]][:1], list(c["facts2"]), [c["fact3"]]]
    return Sample(id=conv, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": c["user1"]}],
                  tools=c["tools"], target=target,
                  meta={"conversation": conv, "turns": TURNS, "turn_ids": [f"{conv}/t{k}" for k in range(1, TURNS + 1)]})


def load(data: str | None = None, smoke: bool = True) -> list[Sample]:
    return [_sample(conv) for conv in CONVERSATIONS]


def request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages, "tools": sample.tools, "tool_choice": "auto"}


def run_tool(conv: str, call: dict[str, Any]) -> str:
    """Executes one call from the conversation's table: the result is keyed by the argument values."""
    fn = call.get("function") or {}
    try:
        args = jsonsafe.loads(fn.get("arguments") or "{}")
    except ValueError:
        return json.dumps({"error": "arguments are not valid JSON"})
    values = " ".join(str(v).lower() for v in args.values()) if isinstance(args, dict) else ""
    for key, result in CONVERSATIONS[conv]["results"].items():
        if key in values:
            return json.dumps(result)
    return json.dumps({"error": f"nothing found for {fn.get('name')} {args}"})


def step(sample: Sample, first: dict[str, Any], steps: list[Exchange]) -> tuple[str, dict[str, Any]] | None:
    """Turn k is one request: the first as the runner built it, each later one replaying the answer before it in
    the shape the server emitted it. An answer that cannot be parsed ends the conversation (nothing to replay)."""
    turn_ids, conv = sample.meta["turn_ids"], sample.meta["conversation"]
    if not steps:
        return turn_ids[0], first
    if len(steps) >= len(turn_ids):
        return None
    ex = steps[-1]
    try:
        calls = parse_exchange(ex).tool_calls or []
    except MalformedBody:
        return None
    body = extend(ex.mode, ex.request, assistant_turn(ex))
    if len(steps) == 1:
        results = [(c.get("id"), run_tool(conv, c)) for c in calls if isinstance(c, dict)]
        entries = tool_results(ex.mode, results) if results else user_turn(ex.mode, NUDGE)
    else:
        entries = user_turn(ex.mode, CONVERSATIONS[conv]["user2"])
    return turn_ids[len(steps)], extend(ex.mode, body, entries)


def score(sample: Sample, parsed: Parsed) -> Judgement:
    """One request's own judgement (its envelope is what the framework checks); the turns are judged in
    score_conversation, which knows which turn a request is."""
    return Judgement(reason="step")


def _call_name(call: dict[str, Any]) -> Any:
    """A tool call's function name as the server sent it: any JSON value (a name that is not a string fails the
    turn's check, as it did inline)."""
    return (call.get("function") or {}).get("name")


def score_turn(sample: Sample, turn: int, parsed: Parsed) -> Judgement:
    target = sample.target[turn - 1]
    calls = parsed.tool_calls if isinstance(parsed.tool_calls, list) else []
    if turn == 1:
        names = sorted({_call_name(c) for c in calls if isinstance(c, dict)})
        ok = bool(calls) and set(names) <= set(t["function"]["name"] for t in sample.tools or [])
        return Judgement(score=float(ok), answer=names, reason="called_tool" if ok else "no_tool_call",
                         metrics={"tool_called": float(ok)})
    text = (parsed.content or "").lower()
    ok = not calls and all(f.lower() in text for f in target)
    metric = "uses_tool_result" if turn == 2 else "history_recall"
    reason = "correct" if ok else ("called_tool_again" if calls else "fact_missing")
    return Judgement(score=float(ok), answer=ok, reason=reason, metrics={metric: float(ok)})


def score_conversation(sample: Sample, steps: list[Exchange]) -> list[tuple[str, Judgement, list[int]]]:
    """One record per turn, covering that turn's one request; a turn never sent covers none (scoring.judge_conversation
    then reports it as not reached), nor does one whose answer could not be parsed (its request's own verdict says why)."""
    out: list[tuple[str, Judgement, list[int]]] = []
    for k, record in enumerate(sample.meta["turn_ids"]):
        if k >= len(steps):
            out.append((record, Judgement(reason="not_reached"), []))
            continue
        try:
            parsed = parse_exchange(steps[k])
        except MalformedBody:
            out.append((record, Judgement(reason="malformed_body"), [k]))
            continue
        out.append((record, score_turn(sample, k + 1, parsed), [k]))
    return out


def records(sample: Sample) -> list[str]:
    return list(sample.meta["turn_ids"])


SUITE = Suite(name="multiturn", version="1", load=load, request=request, score=score,
              conversation=Conversation(step=step, score=score_conversation, records=records),
              description="tool call -> tool result -> answer -> second user turn, replayed as the server emitted it",
              defaults={"max_tokens": 256})
