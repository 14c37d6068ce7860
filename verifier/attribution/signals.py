"""The signal table: one small pure function per signal, shared by compare and calibrate.

Each signal looks at one paired sample, the golden's observations of it and the candidate's
(every epoch and mode of that sample id), and answers:
    True   the event happened on this sample (it counts against the candidate),
    False  measured, and it did not happen,
    None   not measurable on this sample (it is left out of the denominator).
compare turns the per-sample answers into an event rate with a Wilson interval against the
calibrated margin; calibrate measures the same rates between reference reruns. So a new signal
is one function here plus one entry in FRONTEND_SIGNALS or NUMERICS_SIGNALS, and its margin key
is `<suite>/signal:<function name>`.

Frontend signals are weight-independent: a sample on which any of them fired is kept out of the
numerics comparison (DESIGN.md, "Attribution").
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from typing import Callable, Sequence

from verifier.judge.contract import MODEL_BEHAVIOUR, comparable
from verifier.golden.store import MAX_LOGPROBS
from verifier.attribution.surface_signals import by_mode, parity_modes
from verifier.attribution.turn_diff import comparable_answer, first_divergence, is_followup, turn_rows
from verifier.surfaces.registry import DUAL_PATH_MODE, REFERENCE_MODE, STREAM_PARITY_MODE
from verifier.types import Observation

Obs = Sequence[Observation]
Signal = Callable[[Obs, Obs], "bool | None"]


def answer_key(o: Observation) -> str:
    return json.dumps(comparable_answer(o.answer), sort_keys=True)


def degenerate(text: str | None) -> bool:
    """A repetition loop: the tail is one short unit repeated many times ('foss foss foss...')."""
    if not text or len(text) < 40:
        return False
    tail = text[-400:]
    if len(zlib.compress(tail.encode())) > 0.5 * len(tail.encode()):
        return False  # fast path: a loop compresses very well, ordinary text does not
    m = re.search(r"(.{1,40}?)\1{5,}$", tail, flags=re.S)
    return bool(m and len(m.group(0)) >= 30)


def tokens_diverge(a: list[list[str]], b: list[list[str]]) -> bool:
    """Whether the two paths generated different token sequences (compared on their common length).

    Then a different answer is the decoding's doing (batch-order nondeterminism, amplified by a
    quantized KV cache), not the assembly's: a stream-assembly or detokenizer bug keeps the tokens
    and changes the text. Unknown (no logprobs) counts as not diverging.
    """
    if not a or not b:
        return False

    def visible(t: list[str]) -> list[str]:
        # llama-server lists the end-of-generation token as "" in non-streamed logprobs only; vLLM lists the stop token.
        return [tok for _, tok, _ in comparable([[x, None] for x in t])]

    x, y = visible(a[0]), visible(b[0])
    n = min(len(x), len(y))
    # Different lengths below the stored cap: one path stopped (EOS) where the other went on.
    return x[:n] != y[:n] or (len(x) != len(y) and n < MAX_LOGPROBS)


# ----------------------------------------------------------------------------- frontend signals

def new_findings(g: Obs, c: Obs) -> bool | None:
    """A contract finding the golden never had on this sample (model-behaviour codes excepted)."""
    if not any(o.judged for o in g) or not any(o.judged for o in c):
        return None
    gcodes = {code for o in g for code in o.findings}
    ccodes = {code for o in c for code in o.findings}
    return bool((ccodes - gcodes) - MODEL_BEHAVIOUR)


def prompt_tokens_mismatch(g: Obs, c: Obs) -> bool | None:
    """The prompt-token fingerprint moved: chat template, tokenizer or image preprocessing changed."""
    gpt = {o.prompt_tokens for o in g if o.prompt_tokens is not None}
    cpt = {o.prompt_tokens for o in c if o.prompt_tokens is not None}
    if not gpt or not cpt:
        return None
    return gpt != cpt


def _path_mismatch(c: Obs, other: str) -> bool | None:
    """The chat path and `other` answered differently while generating the same tokens."""
    answers: dict[str, set[str]] = defaultdict(set)
    tokens: dict[str, list[list[str]]] = defaultdict(list)
    for o in c:
        if o.judged:
            answers[o.mode].add(answer_key(o))
            if o.logprobs:
                tokens[o.mode].append(o.tokens)
    if REFERENCE_MODE not in answers or other not in answers:
        return None
    return answers[REFERENCE_MODE] != answers[other] and not tokens_diverge(tokens[REFERENCE_MODE], tokens[other])


def stream_parity_mismatch(g: Obs, c: Obs) -> bool | None:
    """Streamed and non-streamed answers of the candidate disagree (stream assembly)."""
    return _path_mismatch(c, STREAM_PARITY_MODE)


def dual_path_mismatch(g: Obs, c: Obs) -> bool | None:
    """The chat path and the client-rendered completions path disagree (chat template)."""
    return _path_mismatch(c, DUAL_PATH_MODE)


def new_unsupported(g: Obs, c: Obs) -> bool | None:
    """The candidate refuses (4xx) a request the golden served."""
    return any(o.outcome == "unsupported" for o in c) and not any(o.outcome == "unsupported" for o in g)


def opaque_id_style(style: str) -> bool:
    """An id shape that carries nothing but randomness (`call_<hex>`, llama.cpp's `<id>`, `chatcmpl-tool-<hex>`):
    engines legitimately differ here, and a client can only echo such an id back. An index or the function's name
    in the id (`functions.NAME:<n>`, `call_<n>`) is structure a chat template or a client may depend on."""
    return "NAME" not in style and "<n>" not in style and ("<hex>" in style or "<id>" in style)


def tool_call_id_format_changed(g: Obs, c: Obs) -> bool | None:
    """Tool-call ids in a shape the golden never used, where the golden's shape had structure (an index, the
    function's name) that clients and templates parse (Kimi's functions.NAME:IDX). One opaque random scheme for
    another is a benign engine difference, not a finding."""
    gst = {x for o in g for x in (o.tool_call_id_style or [])}
    cst = {x for o in c for x in (o.tool_call_id_style or [])}
    if not gst or not cst:
        return None
    new = cst - gst
    return bool(new) and not (all(map(opaque_id_style, gst)) and all(map(opaque_id_style, new)))


# How much more probable (in logprob) the reference's token must be, under the candidate's own returned
# distribution, than the token the candidate chose: above float noise and exact ties.
CHOICE_EPS = 1e-3


def parting(g: Observation, c: Observation) -> tuple[int, int] | None:
    """The first position where two records' generated tokens differ, as (golden index, candidate index) into
    their logprobs, compared on contract.comparable tokens (None: not measurable, or they never part)."""
    return next(((gi, ci) for (gi, gt, _), (ci, ct, _) in zip(comparable(g.logprobs), comparable(c.logprobs)) if gt != ct), None)


def choice_changed(g: Observation, c: Observation) -> bool | None:
    """At the position where the candidate's greedy output parts from the golden's, the candidate's own returned
    distribution rates the golden's token above the token it chose: the model did not change its mind, the
    choice rule did (server-side penalties or sampling defaults, an ignored temperature). A greedy engine
    always takes its own top token, whatever its weights or kernels, so changed numerics never do this, and
    a near-tie flipped by batch-shape noise is the candidate's top too. None: not measurable (no parting, or
    no alternatives returned on a greedy record: Messages has no logprobs at all)."""
    at = parting(g, c)
    if at is None or not c.top_logprobs or at[1] >= len(c.top_logprobs):
        return None
    gi, i = at
    gtok = g.logprobs[gi][0]  # type: ignore[index]
    chosen = c.logprobs[i][1]  # type: ignore[index]
    alts = {t: lp for t, lp in c.top_logprobs[i] if isinstance(lp, (int, float))}
    if not isinstance(chosen, (int, float)) or not alts:
        return None
    return gtok in alts and alts[gtok] > chosen + CHOICE_EPS


def decoding_changed(g: Obs, c: Obs) -> bool | None:
    """The decoding path changed on this sample (choice_changed on a record of the same mode and epoch)."""
    gi = {(o.mode, o.epoch): o for o in g if o.judged}
    answers = [choice_changed(gi[(o.mode, o.epoch)], o) for o in c if o.judged and (o.mode, o.epoch) in gi]
    measured = [a for a in answers if a is not None]
    return any(measured) if measured else None


def surface_parity_mismatch(g: Obs, c: Obs) -> bool | None:
    """Chat, Responses and Messages answered the same sample differently where the golden's agreed
    (answer, tool calls, normalized prompt tokens): one surface's frontend moved (surface_signals.py)."""
    broke = parity_modes(g, c)
    return None if broke is None else bool(broke)


def followup_divergence(g: Obs, c: Obs) -> bool | None:
    """A conversation's first divergence from the golden is a follow-up: a request that replays the model's own
    earlier output (a tool-result step of turn 1, or any request of turn 2 or later) answered otherwise, while every
    request before it went as the golden's, the conversation's first included. The follow-up failure of day-0
    deployments: tool results, ids or reasoning replayed in a shape the server renders wrong (turn_diff.py).
    Measured on conversation turns whose history up to the turn matched the golden's."""
    gr, cr = turn_rows(g), turn_rows(c)
    measured = fired = False
    for mode in gr.keys() & cr.keys():
        a, b = gr[mode], cr[mode]
        if a["prior"] != b["prior"]:
            continue
        d = first_divergence(a, b)
        if a["turn"] == 1 and d is not None and not is_followup(d):
            continue  # the conversation's very first answer differed: not a follow-up, and nothing after it is comparable
        measured = True
        fired = fired or d is not None
    return fired if measured else None


def history_tokens_mismatch(g: Obs, c: Obs) -> bool | None:
    """A request that replays conversation history had other prompt tokens than the golden's same request (same
    history, same answers so far): the server rendered the replayed assistant calls, tool results, ids, reasoning
    or system prompt differently. The conversation's first request (no history) is left to prompt_tokens_mismatch."""
    gr, cr = turn_rows(g), turn_rows(c)
    measured = fired = False
    for mode in gr.keys() & cr.keys():
        a, b = gr[mode], cr[mode]
        if a["prior"] != b["prior"]:
            continue
        fa, fb = a.get("fingerprint") or [], b.get("fingerprint") or []
        sa, sb = a.get("steps") or [], b.get("steps") or []
        for j in range(min(len(fa), len(fb))):
            if not (a["turn"] == 1 and j == 0) and fa[j] is not None and fb[j] is not None:
                measured = True
                fired = fired or fa[j] != fb[j]
            if j >= len(sa) or j >= len(sb) or sa[j] != sb[j]:
                break  # the next request's history differs: its tokens may rightly differ
    return fired if measured else None


# ----------------------------------------------------------------------------- numerics signals

def repetition(g: Obs, c: Obs) -> bool | None:
    """The candidate fell into a repetition loop where the golden did not (a numerics symptom)."""
    if not any(o.judged for o in c):
        return None
    return any(degenerate(o.content) for o in c) and not any(degenerate(o.content) for o in g)


# The order is the order of the evidence in comparison.json.
FRONTEND_SIGNALS: tuple[Signal, ...] = (new_findings, prompt_tokens_mismatch, stream_parity_mismatch, new_unsupported,
                                        tool_call_id_format_changed, dual_path_mismatch, surface_parity_mismatch,
                                        decoding_changed, history_tokens_mismatch, followup_divergence)
NUMERICS_SIGNALS: tuple[Signal, ...] = (repetition,)
SIGNALS: tuple[Signal, ...] = FRONTEND_SIGNALS + NUMERICS_SIGNALS
FRONTEND_EVENTS = tuple(f.__name__ for f in FRONTEND_SIGNALS)
NUMERICS_EVENTS = tuple(f.__name__ for f in NUMERICS_SIGNALS)
EVENTS = FRONTEND_EVENTS + NUMERICS_EVENTS
SIGNAL_BY_NAME: dict[str, Signal] = {f.__name__: f for f in SIGNALS}
# Signals whose event a healthy engine cannot produce at all, so their margin is 0 by construction and a golden
# calibrated before they existed still judges them (a greedy engine never skips its own top token).
STRUCTURAL_ZERO = frozenset({"decoding_changed"})
# Frontend signals that do not take a sample out of the numerics: new_findings' codes either block the record
# (it is then not clean) or leave the answer usable (usage_missing...), and such a sample is still measurable.
NOT_TOUCHING = frozenset({"new_findings"})


def evaluate(g: Obs, c: Obs) -> dict[str, bool | None]:
    """Every signal of the table on one paired sample, by name."""
    return {f.__name__: f(g, c) for f in SIGNALS}


def touched_by_frontend(results: dict[str, bool | None]) -> bool:
    """Whether any frontend signal fired that changes what the numerics would measure: such a sample is kept
    out of the numerics comparison. Non-blocking findings alone do not (see NOT_TOUCHING)."""
    return any(results[name] for name in FRONTEND_EVENTS if name not in NOT_TOUCHING)


def where_fired(g: Obs, c: Obs, results: dict[str, bool | None]) -> dict[str, set[str]]:
    """For each signal that fired on this sample: the candidate's wire modes it fired on, so evidence can
    name a surface. A signal is asked again of each mode alone (against the golden's same mode); surface
    parity names the modes that moved; signals that need two modes (stream parity) name none."""
    out: dict[str, set[str]] = {}
    gm, cm = by_mode(g), by_mode(c)
    for f in SIGNALS:
        if not results.get(f.__name__):
            continue
        if f is surface_parity_mismatch:
            out[f.__name__] = parity_modes(g, c) or set()
        else:
            out[f.__name__] = {m for m, co in cm.items() if f(gm.get(m) or g, co)}
    return out
