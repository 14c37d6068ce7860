"""BFCL v4 multi-turn (FC mode): whole conversations executed against stateful API simulators, checked per turn.

One sample is one BFCL entry: several user turns over a file system, a trading bot, a travel API... (the
simulators in suites/bfcl_sims/, built from the entry's `initial_config`). The runner drives it as a
conversation (verifier.types.Conversation), one journaled request per step:

    turn k, step 0   history + the k-th user message              -> the model answers, maybe with calls
    turn k, step j   history + its calls + one tool result each   -> ... until it answers without a call
                                                                     (at most MAX_STEPS_PER_TURN steps)

Each call is executed on the conversation's own simulator instances and its result goes back as the
surface's tool result (chat `tool` message with the call's id, Responses `function_call_output` with its
`call_id`, Messages `tool_result` block with its `tool_use_id`); the assistant turn is replayed exactly as
the server emitted it (reasoning included: verifier/judge/history.py). `miss_func` turns offer the
held-back function from the turn the data names, with BFCL's own user prompt for it.

Checking, as BFCL's multi-turn checker does it, after every turn whose ground truth calls something (pure: the
simulators are deterministic, so scoring re-executes the journaled calls offline):
  - the calls checked are those bfcl-eval's FC decoder keeps (`bfcl_step_calls`: an answer with a call whose
    arguments are not an object, or a JSON string of one, is dropped whole);
  - state check: every simulator instance the model drove equals the one the ground-truth calls drove;
  - response check: every ground-truth call's result appears among the model's results so far;
  - the turn must see at least one decoded model call.
A turn whose ground truth calls nothing is not checked (BFCL's neither), but what the model did there carries on.
Records are the turns (`<id>/t<k>`, metric `turn_accuracy`); the last turn also carries `entry_accuracy`
(every turn passed). Each record's `answer` is the turn's transcript (calls, argument values, result
digests, final text) and the digest of every turn before it, which the golden diff uses
(verifier/attribution/turn_diff.py and the `followup_divergence` / `history_tokens_mismatch` signals).

Data: BFCL_v4_multi_turn_<category>.json, possible_answer/ and multi_turn_func_doc/ from `--data DIR`,
else $VERIFIER_BFCL_DATA. A system prompt is added (BFCL's FC mode sends none): every agent client sends
one, and the Messages path's handling of `system` is one of the things this suite checks.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from verifier.jsonsafe import TooDeep, loads_bounded
from verifier.judge.parse import MalformedBody, parse_exchange
from verifier.surfaces import responses
from verifier.surfaces.registry import surface_for, translate
from verifier.judge.history import assistant_turn, extend, tool_results, user_turn
from verifier.types import Conversation, Exchange, Judgement, Parsed, Sample, Suite, Verdict

from suites.bfcl import _jsonl, data_dir, to_tools

NAME = "bfcl-multi-turn"
VERSION = "1"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
FUNC_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
}
SYSTEM = ("You are an assistant that acts through the provided functions. Call functions to do what the user asks; "
          "when the task is done or cannot be done with the functions, answer in plain text.")
HOLDOUT_PROMPT = "I have updated some more functions you can choose from. What about now?"
"""BFCL's user message for a turn that only adds held-back functions (DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)."""
MAX_STEPS_PER_TURN = 20
"""BFCL's own bound on requests within one user turn (MAXIMUM_STEP_LIMIT)."""
MAX_CALLS_PER_STEP = 64
"""Calls executed from one answer; more are answered with an error result (a hostile endpoint's flood)."""
MAX_TEXT = 200
"""Characters of a turn's final text kept in the record (with a digest of the whole)."""


# ---------------------------------------------------------------- loading

def _docs(root: Path, classes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in classes:
        if c not in FUNC_DOCS:
            raise ValueError(f"unknown BFCL API class {c!r}")
        out += _jsonl(root / "multi_turn_func_doc" / FUNC_DOCS[c])
    return out


def make_sample(category: str, entry: dict[str, Any], answer: dict[str, Any], docs: list[dict[str, Any]]) -> Sample:
    held_names = {str(k): list(v) for k, v in (entry.get("missed_function") or {}).items()}
    held_all = {n for v in held_names.values() for n in v}
    offered = [d for d in docs if d["name"] not in held_all]
    tools, _ = to_tools(offered)
    held = {k: to_tools([d for d in docs if d["name"] in v])[0] for k, v in held_names.items()}
    questions = [list(q) for q in entry["question"]]
    gt = [list(t) for t in answer["ground_truth"]]
    if len(gt) != len(questions):
        raise ValueError(f"{entry['id']}: {len(questions)} turns but {len(gt)} ground-truth turns")
    n = len(questions)
    return Sample(
        id=entry["id"], messages=[{"role": "system", "content": SYSTEM}, *_turn_messages(questions, 0, held)],
        tools=tools, target=gt,
        meta={"category": category, "turns": n, "turn_ids": [f"{entry['id']}/t{k}" for k in range(1, n + 1)],
              "questions": questions, "held": held, "involved_classes": list(entry["involved_classes"]),
              "initial_config": entry.get("initial_config") or {}},
    )


def load_category(root: Path, category: str) -> list[Sample]:
    entries = _jsonl(root / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a for a in _jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    missing = [e["id"] for e in entries if e["id"] not in answers]
    if missing:
        raise ValueError(f"{category}: no possible answer for {missing[:3]}")
    cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    out = []
    for e in entries:
        key = tuple(e["involved_classes"])
        if key not in cache:
            cache[key] = _docs(root, list(key))
        out.append(make_sample(category, e, answers[e["id"]], cache[key]))
    return out


def load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    """Every category present, in CATEGORIES order then file order. `data` may name one category file."""
    root = data_dir(data)
    m = re.fullmatch(r"BFCL_v4_(\w+)\.json", root.name)
    if root.is_file() and m and m.group(1) in CATEGORIES:
        return load_category(root.parent, m.group(1))
    if not root.is_dir():
        raise FileNotFoundError(f"BFCL data dir {root} does not exist (want a dir holding BFCL_v4_multi_turn_<category>.json)")
    present = [c for c in CATEGORIES if (root / f"BFCL_v4_{c}.json").is_file()]
    if not present:
        raise FileNotFoundError(f"no BFCL_v4_multi_turn_<category>.json files in {root}")
    return [s for c in present for s in load_category(root, c)]


def request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages, "tools": sample.tools, "tool_choice": "auto"}


# ---------------------------------------------------------------- the conversation

def _turn_messages(questions: list[list[dict[str, Any]]], k: int, held: dict[str, Any]) -> list[dict[str, Any]]:
    """The user messages of turn k (0-based); a holdout turn with no message gets BFCL's prompt."""
    msgs = [dict(m) for m in questions[k]]
    if not msgs and str(k) in held:
        msgs = [{"role": "user", "content": HOLDOUT_PROMPT}]
    return msgs


def position(step_id: str) -> tuple[int, int]:
    """`<id>/t<k>/<j>` -> (turn k, 1-based; step j, 0-based)."""
    _, t, j = step_id.rsplit("/", 2)
    return int(t[1:]), int(j)


def _tools_at(sample: Sample, turn: int) -> list[dict[str, Any]]:
    """The chat tools offered in `turn` (1-based): the initial ones plus every held-back batch released so far."""
    tools = list(sample.tools or [])
    for k in range(turn):
        tools += sample.meta["held"].get(str(k), [])
    return tools


def _surface_tools(mode: str, tools: list[dict[str, Any]]) -> Any:
    # The chat adapter sends the body as written, so its tools come back as they went in.
    return translate(mode, {"messages": [{"role": "user", "content": "x"}], "tools": tools, "max_tokens": 1}).get("tools")


def _calls(parsed: Parsed) -> list[dict[str, Any]]:
    return [c for c in (parsed.tool_calls if isinstance(parsed.tool_calls, list) else []) if isinstance(c, dict)]


def _decode(call: dict[str, Any]) -> tuple[str, Any]:
    function = call.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else {}
    raw = fn.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = raw
    return str(fn.get("name")), args


def bfcl_step_calls(parsed: Parsed | None) -> list[tuple[str, dict[str, Any]]] | None:
    """One answer's calls as bfcl-eval's multi-turn checker reads them (the FC handlers' `decode_execute`): each
    call's arguments are an object, or a string that `json.loads` makes one; one call that is neither drops the
    whole answer, and so does an answer without calls. None: the checker executes nothing of this answer."""
    out: list[tuple[str, dict[str, Any]]] = []
    for c in _calls(parsed) if parsed is not None else []:
        name, raw = _decode_raw(c)
        try:
            args = loads_bounded(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        out.append((name, args))
    return out or None


def _decode_raw(call: dict[str, Any]) -> tuple[str, Any]:
    function = call.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else {}
    return str(fn.get("name")), fn.get("arguments")


def _instances(sample: Sample) -> dict[str, Any]:
    """Fresh simulator instances, validating calls against the function docs the sample itself carries (not a
    data dir looked up at scoring time: the score is a function of the run directory alone, and scoring reads no
    file beyond it)."""
    from suites.bfcl_sims import execute as sims  # the simulators: imported on first use

    docs = [t["function"] for t in _tools_at(sample, sample.meta["turns"])]
    return sims.instances_for({"id": sample.id, "involved_classes": sample.meta["involved_classes"],
                                  "initial_config": sample.meta["initial_config"]}, docs=docs)


def check(sample: Sample) -> str | None:
    """A golden's sample, before anything is sent: its simulators load from its initial_config (a wrong shape is
    a one-line problem naming the sample and the field, never an internal error once scoring reaches it)."""
    from suites.bfcl_sims import execute as sims

    meta = sample.meta if isinstance(sample.meta, dict) else {}
    try:
        sims.instances_for({"id": sample.id, "involved_classes": meta.get("involved_classes"),
                               "initial_config": meta.get("initial_config")}, docs=[])
    except ValueError as e:
        return f"$.meta of sample {e}"
    return None


def _run(instances: dict[str, Any], name: str, args: Any, allowed: set[str]) -> dict[str, Any]:
    from suites.bfcl_sims import execute as sims

    if not isinstance(args, dict):
        return {"error": f"arguments of {name} are not a JSON object"}
    return sims.execute(instances, name, args, allowed)


def result_text(result: Any) -> str:
    """A call's result as the tool message carries it (BFCL: json.dumps of the returned dict)."""
    return result if isinstance(result, str) else json.dumps(result)


def _parsed(ex: Exchange) -> Parsed | None:
    if ex.error is not None or ex.status != 200:
        return None
    try:
        return parse_exchange(ex)
    except MalformedBody:
        return None


def _next(sample: Sample, steps: list[Exchange]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None] | None:
    """After the last journaled answer: (next step id, the history entries it adds after that answer, the tools to
    offer when they change), or None when the conversation is over."""
    last = steps[-1]
    parsed = _parsed(last)
    if parsed is None:
        return None
    turn, j = position(last.sample_id)
    mode = last.mode
    calls = _calls(parsed)
    entries: list[dict[str, Any]] = []
    if calls:
        results = replay(sample, steps, [_parsed(ex) for ex in steps])[0][-1]
        entries += tool_results(mode, [(c.get("id"), r) for c, r in zip(calls, results)])
        if j + 1 < MAX_STEPS_PER_TURN:
            return f"{sample.id}/t{turn}/{j + 1}", entries, None
    if turn >= sample.meta["turns"]:
        return None
    for m in _turn_messages(sample.meta["questions"], turn, sample.meta["held"]):
        entries += user_turn(mode, m.get("content") or "")
    tools = _surface_tools(mode, _tools_at(sample, turn + 1)) if str(turn) in sample.meta["held"] else None
    return f"{sample.id}/t{turn + 1}/0", entries, tools


def step(sample: Sample, first: dict[str, Any], steps: list[Exchange]) -> tuple[str, dict[str, Any]] | None:
    """The next request of the conversation, built from the journaled answers before it (Conversation.step): the
    whole history replayed, the server's own answer included."""
    if not steps:
        return f"{sample.id}/t1/0", first
    nxt = _next(sample, steps)
    if nxt is None:
        return None
    sid, entries, tools = nxt
    last = steps[-1]
    body = extend(last.mode, extend(last.mode, last.request, assistant_turn(last)), entries)
    return sid, body if tools is None else {**body, "tools": tools}


def response_id(ex: Exchange) -> str | None:
    """The id of a Responses answer (the body's, or the terminal event's response), None when it carries none."""
    if ex.body is not None:
        doc = _load_json(ex.body)
        rid = doc.get("id") if isinstance(doc, dict) else None
    else:
        final: dict[str, Any] = next((e["response"] for e in reversed([_load_json(c) for c in ex.chunks or [] if c != "[DONE]"])
                      if isinstance(e, dict) and e.get("type") in responses.TERMINAL and isinstance(e.get("response"), dict)), {})
        rid = final.get("id")
    return rid if isinstance(rid, str) and rid else None


def _load_json(text: str) -> Any:
    try:
        return loads_bounded(text)
    except (ValueError, TooDeep):
        return None


def step_chained(sample: Sample, first: dict[str, Any], steps: list[Exchange]) -> tuple[str, dict[str, Any]] | None:
    """`step`, except that on Responses each follow-up sends only what is new (tool outputs, the next user
    message) with `previous_response_id` of the answer before it: the server rebuilds the history from what it
    stored. Other surfaces have no chaining and replay the whole history, as `step` does. An answer without an id
    cannot be chained: the conversation stops there and its remaining turns are not reached (never scored wrong)."""
    if not steps or surface_for(steps[-1].mode) is not responses.SURFACE:
        return step(sample, first, steps)
    nxt = _next(sample, steps)
    rid = response_id(steps[-1])
    if nxt is None or rid is None:
        return None
    sid, entries, tools = nxt
    body = {**steps[-1].request, "input": entries, "previous_response_id": rid}
    return sid, body if tools is None else {**body, "tools": tools}


# ---------------------------------------------------------------- checking

def _digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


def _canonical(result: str) -> str:
    """A result text compared as JSON when it is JSON (key order is not a difference)."""
    try:
        return json.dumps(json.loads(result), sort_keys=True)
    except ValueError:
        return result


def _gt_call(s: str) -> tuple[str, dict[str, Any]]:
    name, args = _parsed_gt_call(s)
    return name, json.loads(args)


@lru_cache(maxsize=8192)
def _parsed_gt_call(s: str) -> tuple[str, str]:
    from suites.bfcl_sims import execute as sims

    name, args = sims.parse_gt_call(s)
    return name, json.dumps(args)


def _multiset_contains(have: list[str], want: list[str]) -> list[str]:
    """The wanted items not found in `have` (each item of `have` used once)."""
    pool = list(have)
    missing = []
    for w in want:
        if w in pool:
            pool.remove(w)
        else:
            missing.append(w)
    return missing


def score_conversation(sample: Sample, steps: list[Exchange]) -> list[tuple[str, Judgement, list[int]]]:
    """Per turn: state check, response check, transcript (Conversation.score). Pure."""
    from suites.bfcl_sims import execute as sims  # the simulators: imported on first use

    n = sample.meta["turns"]
    parsed = [_parsed(ex) for ex in steps]
    by_turn: dict[int, list[int]] = {k: [] for k in range(1, n + 1)}
    for i, ex in enumerate(steps):
        by_turn.setdefault(position(ex.sample_id)[0], []).append(i)
    model_results, model_inst = replay(sample, steps, parsed)
    # The turn checks read the calls as bfcl-eval's checker does: an answer with an undecodable call executes nothing.
    # Only when some answer differs that way is the history replayed a second time (the transcript keeps every call).
    checked = [bfcl_step_calls(p) for p in parsed]
    if any(c is None and p is not None and _calls(p) for c, p in zip(checked, parsed)):
        bfcl_results, bfcl_inst = replay(sample, steps, parsed, as_bfcl=True)
    else:
        bfcl_results, bfcl_inst = model_results, model_inst
    gt_inst = _instances(sample)
    all_model: list[str] = []
    prior = _digest([])
    passed_all = True
    out = []
    for k in range(1, n + 1):
        idx = by_turn[k]
        gt_calls = sample.target[k - 1]
        gt_results = []
        allowed = {t["function"]["name"] for t in _tools_at(sample, k)} | {_gt_call(c)[0] for c in gt_calls}
        for c in gt_calls:
            name, args = _gt_call(c)
            gt_results.append(_canonical(result_text(sims.execute(gt_inst, name, args, allowed))))
        turn_steps: list[dict[str, Any]] = []  # the transcript's steps, written as JSON
        for i in idx:
            p = parsed[i]
            calls = [list(_decode(c)) for c in _calls(p)] if p is not None else []
            turn_steps.append({"calls": calls, "results": [_digest(_canonical(r)) for r in model_results[i]]})
            all_model += [_canonical(r) for r in bfcl_results[i]]
        text = next((p.content or "" for p in (parsed[i] for i in reversed(idx)) if p is not None), "")
        n_calls = sum(len(s["calls"]) for s in turn_steps)
        n_checked = sum(len(checked[i] or []) for i in idx)
        states = bfcl_inst.get(k)
        reason, detail = "correct", ""
        if not idx:
            reason = "not_reached"
        elif not gt_calls:
            pass  # BFCL's checker checks nothing on a turn whose ground truth calls nothing (its state carries on)
        elif n_checked == 0:
            reason, detail = "empty_turn", ("the ground truth calls functions, the model called none" if n_calls == 0 else
                                            f"the ground truth calls functions; none of the model's {n_calls} call(s) could be decoded")
        else:
            gt_state = {c: inst.state() for c, inst in gt_inst.items()}
            diff = sorted(c for c in gt_state if (states or {}).get(c) != gt_state[c])
            missing = _multiset_contains(all_model, gt_results)
            if diff:
                reason, detail = "state_mismatch", f"instances differ from the ground truth's: {', '.join(diff)}"
            elif missing:
                reason, detail = "response_missing", f"{len(missing)} ground-truth result(s) not among the model's: {missing[0][:120]}"
        ok = reason == "correct"
        passed_all = passed_all and ok
        transcript = {"steps": turn_steps, "text": text[:MAX_TEXT], "text_sha": _digest(text)}
        answer = {"turn": k, "prior": prior, **transcript,
                  "fingerprint": [_prompt_tokens(parsed[i]) for i in idx]}
        prior = _digest([prior, transcript])
        metrics = {"turn_accuracy": float(ok)}
        if k == n:
            metrics["entry_accuracy"] = float(passed_all)
        signals = {"category": sample.meta["category"], "turn": k, "check_detail": detail, "calls": n_calls,
                   "gt_calls": len(gt_calls)}
        if k > 1:
            signals["prompt_tokens"] = None  # history-bearing: judged by history_tokens_mismatch, not the template fingerprint
        out.append((f"{sample.id}/t{k}", Judgement(score=float(ok), answer=answer, reason=reason, metrics=metrics,
                                                  signals=signals), idx))
    return out


def _prompt_tokens(p: Parsed | None) -> int | None:
    return p.prompt_tokens if p is not None else None


def replay(sample: Sample, steps: list[Exchange], parsed: list[Parsed | None],
           as_bfcl: bool = False) -> tuple[list[list[str]], dict[int, dict[str, Any]]]:
    """Every step's calls executed in order on fresh instances (deterministic, so the step function and the
    scorer see the same results) -> (per step, its result texts; per turn, each instance's state after it).

    The conversation executes every call it can (an undecodable one gets an error result, which the model sees);
    `as_bfcl` executes only what bfcl-eval's checker executes (`bfcl_step_calls`), for the turn checks."""
    instances = _instances(sample)
    results: list[list[str]] = []
    states: dict[int, dict[str, Any]] = {}
    current = 1
    for ex, p in zip(steps, parsed):
        turn, _ = position(ex.sample_id)
        if turn != current:
            states[current] = {c: inst.state() for c, inst in instances.items()}
            current = turn
        allowed = {t["function"]["name"] for t in _tools_at(sample, turn)}
        calls: list[tuple[str, Any]]
        if as_bfcl:
            calls = list(bfcl_step_calls(p) or [])
        else:
            calls = [_decode(c) for c in (_calls(p) if p is not None else [])]
        rs = []
        for i, (name, args) in enumerate(calls):
            r = {"error": f"more than {MAX_CALLS_PER_STEP} calls in one answer"} if i >= MAX_CALLS_PER_STEP else _run(instances, name, args, allowed)
            rs.append(result_text(r))
        results.append(rs)
    states[current] = {c: inst.state() for c, inst in instances.items()}
    for k in range(1, sample.meta["turns"] + 1):  # turns never reached keep the last state seen
        states.setdefault(k, states.get(k - 1, {}))
    return results, states


def score(sample: Sample, parsed: Parsed) -> Judgement:
    """One request's own judgement (its envelope is what the framework checks); the turns are judged whole."""
    return Judgement(answer=[list(_decode(c)) for c in _calls(parsed)], reason="step")


def records(sample: Sample) -> list[str]:
    return list(sample.meta["turn_ids"])


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    """Entry and turn accuracy per category, failure reasons, requests per turn."""
    per: dict[str, dict[str, list[float]]] = {}
    reasons: dict[str, int] = {}
    requests = []
    for v in verdicts:
        if v.outcome != "content":
            continue
        cat = str(v.signals.get("category"))
        d = per.setdefault(cat, {"turn_accuracy": [], "entry_accuracy": []})
        for m in d:
            if m in v.metrics:
                d[m].append(v.metrics[m])
        reasons[v.reason] = reasons.get(v.reason, 0) + 1
        requests.append(v.signals.get("requests") or 0)
    by_cat = {c: {m: (round(sum(x) / len(x), 6) if x else None) for m, x in d.items()} | {"entries": len(d["entry_accuracy"]), "turns": len(d["turn_accuracy"])}
              for c, d in sorted(per.items(), key=lambda kv: CATEGORIES.index(kv[0]) if kv[0] in CATEGORIES else 99)}
    return {"by_category": by_cat, "turn_reasons": dict(sorted(reasons.items())),
            "requests_per_turn": round(sum(requests) / len(requests), 3) if requests else None}


SUITE = Suite(
    name=NAME, version=VERSION, load=load, request=request, score=score, summarize=summarize,
    conversation=Conversation(step=step, score=score_conversation, records=records), check=check,
    description="BFCL v4 multi-turn: conversations executed on stateful API simulators, state + response check per turn",
    defaults={"max_tokens": 512},
)

CHAINED = Suite(
    name=f"{NAME}-chained", version=VERSION, load=load, request=request, score=score, summarize=summarize,
    conversation=Conversation(step=step_chained, score=score_conversation, records=records), check=check,
    description="bfcl-multi-turn with Responses follow-ups chained by previous_response_id (other surfaces: whole history)",
    defaults={"max_tokens": 512},
)
