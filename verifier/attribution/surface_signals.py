"""Cross-surface parity and per-mode attribution: small pure functions over one sample's observations.

`g` and `c` are the golden's and the candidate's observations of one sample (every epoch and mode).
At temperature 0 the same sample through chat, responses and messages gives the same answer (tool calls
included: the scorer's `answer`) and the same prompt-token count (normalized by the surface adapters, verifier/surfaces/). Real
servers may legitimately differ between surfaces (another chat-template call, another default), so parity
breaks only where two surfaces agreed in the golden and disagree in the candidate.

A frontend bug on one surface moves only that surface's modes, so compare also asks, for each signal
that fired, on which wire modes it fired (signals.where_fired), and the evidence names them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from verifier.surfaces.registry import REFERENCE_SURFACE, surface_for
from verifier.attribution.turn_diff import answer_key, is_turn
from verifier.types import Observation

Obs = Sequence[Observation]


def by_mode(obs: Obs) -> dict[str, list[Observation]]:
    out: dict[str, list[Observation]] = defaultdict(list)
    for o in obs:
        out[o.mode].append(o)
    return out


def _fingerprints(obs: Obs) -> dict[str, tuple[str, Any]]:
    """Per mode, what must agree across surfaces: the scorer's answer and the prompt-token count (lowest epoch)."""
    out = {}
    for mode, os_ in by_mode(obs).items():
        judged = sorted((o for o in os_ if o.judged), key=lambda o: o.epoch)
        if judged:
            out[mode] = (answer_key(judged[0].answer), judged[0].prompt_tokens)
    return out


def _same_history(obs: Obs, a: str, b: str) -> bool:
    """Conversation turns: two modes' answers are comparable only while their conversations have not parted
    already (same digest of the turns before); a later turn of two parted conversations is no new evidence."""
    rows = {o.mode: o.answer for o in sorted(obs, key=lambda o: o.epoch) if o.judged and is_turn(o.answer)}
    return a not in rows or b not in rows or rows[a].get("prior") == rows[b].get("prior")


def parity_modes(g: Obs, c: Obs) -> set[str] | None:
    """The modes that broke cross-surface parity (empty: parity holds); None when the sample was not sent
    through chat and another surface on both sides.

    Parity breaks where two modes of different surfaces agreed in the golden and disagree in the candidate;
    the modes named are the ones whose own answer moved against the golden, so if only one surface moved,
    it is that one (chat included: a chat-only flip does not blame the surfaces that stayed put)."""
    gf, cf = _fingerprints(g), _fingerprints(c)
    common = sorted(set(gf) & set(cf))
    surfaces = {surface_for(m).name for m in common}
    if REFERENCE_SURFACE not in surfaces or len(surfaces) < 2:
        return None
    split = [(a, b) for i, a in enumerate(common) for b in common[i + 1:]
             if surface_for(a).name != surface_for(b).name and gf[a] == gf[b] and cf[a] != cf[b] and _same_history(c, a, b)]
    if not split:
        return set()
    moved = {m for m in common if cf[m] != gf[m]}
    return {m for pair in split for m in pair if m in moved} or {m for pair in split for m in pair}


def mode_note(where: dict[str, int] | None) -> str:
    """' on messages-stream (3)' for an event's summary; empty when it fired on no particular mode."""
    return " on " + ", ".join(f"{m} ({k})" for m, k in sorted(where.items())) if where else ""
