"""The per-turn golden diff of conversation suites: where a candidate's conversation first parts from the golden's.

A conversation suite's records are its turns (`<conversation>/t<k>`), each with an `answer` holding that
turn's transcript: `steps` (per request, the calls as [name, arguments] and digests of their results),
the final text (`text_sha`), the digest of every turn before it (`prior`) and the prompt tokens of each
request (`fingerprint`). Two conversations are the same up to turn k when their turn-k `prior` digests
agree, so one turn's record is enough to tell whether the conversation first diverged there.

`first_divergence` names the turn and what moved first (tool name, arguments, result or final text);
`summarize` counts it per wire mode and per surface, with examples. A first divergence on a follow-up
request (turn 2 or later, or a tool-result step of turn 1: `later_turn` counts the former) is the
follow-up signal (signals.followup_divergence): the conversation went as the golden's until a request
that replays the model's own output. Pure.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from verifier.surfaces.registry import surface_for
from verifier.types import Observation

KINDS = ("tool_name", "arguments", "result", "final_text")
MAX_EXAMPLES = 10


def is_turn(answer: Any) -> bool:
    """Whether a record's answer is a conversation turn's transcript."""
    return isinstance(answer, dict) and isinstance(answer.get("turn"), int) and "prior" in answer and "steps" in answer


def comparable_answer(answer: Any) -> Any:
    """An answer as answers are compared (flips, stream and surface parity): a turn's prompt-token fingerprint is
    the history signal's evidence, not part of what the model answered."""
    if is_turn(answer) and "fingerprint" in answer:
        return {k: v for k, v in answer.items() if k != "fingerprint"}
    return answer


def answer_key(answer: Any) -> str:
    """The one canonical text two answers are compared by (answer agreement, stream and surface parity)."""
    return json.dumps(comparable_answer(answer), sort_keys=True)


def transcript(answer: dict[str, Any]) -> tuple[Any, Any]:
    """What the model did in the turn (calls, their results, final text): the fingerprint is not part of it."""
    return answer.get("steps"), answer.get("text_sha")


def turn_rows(obs: Sequence[Observation]) -> dict[str, dict[str, Any]]:
    """Per wire mode, the turn transcript of the lowest judged epoch."""
    out: dict[str, dict[str, Any]] = {}
    for o in sorted(obs, key=lambda o: o.epoch):
        if o.judged and is_turn(o.answer) and o.mode not in out:
            out[o.mode] = o.answer
    return out


def divergence_kind(g: dict[str, Any], c: dict[str, Any]) -> tuple[str, int, Any, Any] | None:
    """(kind, step index, golden's, candidate's) of the first difference between two turn transcripts; None if equal."""
    gs, cs = g.get("steps") or [], c.get("steps") or []
    for j in range(max(len(gs), len(cs))):
        a = gs[j] if j < len(gs) else {"calls": [], "results": []}
        b = cs[j] if j < len(cs) else {"calls": [], "results": []}
        names_a, names_b = [x[0] for x in a.get("calls") or []], [x[0] for x in b.get("calls") or []]
        if names_a != names_b:
            return "tool_name", j, names_a, names_b
        if a.get("calls") != b.get("calls"):
            return "arguments", j, a.get("calls"), b.get("calls")
        if a.get("results") != b.get("results"):
            return "result", j, a.get("results"), b.get("results")
    if g.get("text_sha") != c.get("text_sha"):
        return "final_text", max(len(gs), len(cs)) - 1, g.get("text"), c.get("text")
    return None


def first_divergence(g: dict[str, Any], c: dict[str, Any]) -> dict[str, Any] | None:
    """Of one turn pair: the divergence when this turn is the first one that differs (earlier turns equal)."""
    if g.get("prior") != c.get("prior"):
        return None  # an earlier turn differed already
    d = divergence_kind(g, c)
    if d is None:
        return None
    kind, step, a, b = d
    return {"turn": g["turn"], "step": step, "kind": kind, "golden": a, "candidate": b}


def is_followup(d: dict[str, Any]) -> bool:
    """Whether a first divergence is on a follow-up request: one replaying the model's own calls or answers."""
    return bool(d["turn"] >= 2 or d["step"] >= 1)


@dataclass
class _SurfaceTally:
    """`by_surface.<surface>`: one surface's modes' conversations, divergences and follow-up divergences summed."""

    conversations: int = 0
    diverged: int = 0
    followup: int = 0
    modes: list[str] = field(default_factory=list)

    def add(self, mode: str, block: dict[str, Any]) -> None:
        """One mode's `by_mode` block."""
        self.conversations += block["conversations"]
        self.diverged += block["diverged"]
        self.followup += block["followup"]
        self.modes.append(mode)

    def to_dict(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "diverged": self.diverged, "followup": self.followup,
                "modes": list(self.modes)}


def summarize(G: dict[str, list[Observation]], C: dict[str, list[Observation]]) -> dict[str, Any] | None:
    """The `turn_diff` block of a suite in comparison.json, or None when the suite has no turn transcripts."""
    by_mode: dict[str, dict[str, Any]] = {}
    conversations: set[str] = set()
    seen = False
    for sid in sorted(set(G) & set(C)):
        gr, cr = turn_rows(G[sid]), turn_rows(C[sid])
        for mode in sorted(gr.keys() & cr.keys()):
            seen = True
            conv = sid.rsplit("/", 1)[0]
            conversations.add(conv)
            m = by_mode.setdefault(mode, {"conversations": set(), "diverged": 0, "first_turn": defaultdict(int),
                                          "kinds": defaultdict(int), "followup": 0, "later_turn": 0, "examples": []})
            m["conversations"].add(conv)
            d = first_divergence(gr[mode], cr[mode])
            if d is None:
                continue
            m["diverged"] += 1
            m["first_turn"][str(d["turn"])] += 1
            m["kinds"][d["kind"]] += 1
            m["followup"] += is_followup(d)
            m["later_turn"] += d["turn"] >= 2
            if len(m["examples"]) < MAX_EXAMPLES:
                m["examples"].append({"conversation": conv, **d})
    if not seen:
        return None
    out_modes = {}
    by_surface: dict[str, _SurfaceTally] = {}
    for mode, m in sorted(by_mode.items()):
        block = {"conversations": len(m["conversations"]), "diverged": m["diverged"], "followup": m["followup"], "later_turn": m["later_turn"],
                 "first_turn": dict(sorted(m["first_turn"].items(), key=lambda kv: int(kv[0]))),
                 "kinds": {k: m["kinds"][k] for k in KINDS if m["kinds"].get(k)}, "examples": m["examples"]}
        out_modes[mode] = block
        by_surface.setdefault(surface_for(mode).name, _SurfaceTally()).add(mode, block)
    return {"conversations": len(conversations), "by_mode": out_modes,
            "by_surface": {name: t.to_dict() for name, t in by_surface.items()}}
