"""The signal table: one small pure function per signal, shared by compare and calibrate.

Each signal looks at one paired sample, the golden's observations of it and the candidate's
(every epoch and mode of that sample id), and answers:
    True   the event happened on this sample (it counts against the candidate),
    False  measured, and it did not happen,
    None   not measurable on this sample (it is left out of the denominator).
compare turns the per-sample answers into an event rate with a Wilson interval against the
calibrated margin; calibrate measures the same rates between reference reruns.

Each signal is declared once, in SIGNALS (a `Signal`: name, side, component, meaning, blame_modes,
measure): compare, calibrate, the checks CI tracks and the diagnosis table (diagnosis.TABLE) all read
the declarations, so a new signal is one function here plus one declaration, and cannot drop out of
the diagnosis. Its margin key is `<suite>/signal:<name>`; a golden calibrated before the signal
existed has no margin for it, and compare judges it uncalibrated (compare.uncalibrated), never an error.

Frontend signals are weight-independent: a sample on which any of them fired is kept out of the
numerics comparison (DESIGN.md, "Attribution").
"""

from __future__ import annotations

import difflib
import json
import math
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence

from verifier.judge.contract import MODEL_BEHAVIOUR, SIGNAL_JUDGED, SPECIAL_TOKEN, SPECIAL_TOKEN_WHOLE, comparable
from verifier.golden.store import MAX_LOGPROBS
from verifier.attribution.surface_signals import by_mode, parity_modes
from verifier.attribution.turn_diff import answer_key, first_divergence, is_followup, turn_rows
from verifier.surfaces.registry import DUAL_PATH_MODE, REFERENCE_MODE, STREAM_PARITY_MODE, mode_of, surface_for
from verifier.types import Observation

Obs = Sequence[Observation]
Measure = Callable[[Obs, Obs], "bool | None"]
# Which wire modes a signal that fired on a sample blames: the modes that moved, told by the signal itself.
ModesOf = Callable[[Obs, Obs], "set[str] | None"]


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
    return tokens_part(a[0], b[0])


def tokens_part(a: list[str], b: list[str]) -> bool:
    """The one rule for "two greedy outputs part ways" (stream parity here, greedy divergence in numerics): a
    contract.comparable token differs, or one output stops below the stored cap where the other goes on."""

    def visible(t: list[str]) -> list[str]:
        # llama-server lists the end-of-generation token as "" in non-streamed logprobs only; vLLM lists the stop token.
        return [tok for _, tok, _ in comparable([[x, None] for x in t])]

    x, y = visible(a), visible(b)
    n = min(len(x), len(y))
    # Different lengths below the stored cap: one path stopped (EOS) where the other went on. (Rows hold at most
    # MAX_LOGPROBS tokens, so past the cap a difference in length says nothing.)
    return x[:n] != y[:n] or (len(x) != len(y) and n < MAX_LOGPROBS)


# ----------------------------------------------------------------------------- frontend signals

def new_findings(g: Obs, c: Obs) -> bool | None:
    """A contract finding the golden never had on this sample (model-behaviour codes excepted)."""
    if not any(o.judged for o in g) or not any(o.judged for o in c):
        return None
    gcodes = {code for o in g for code in o.findings}
    ccodes = {code for o in c for code in o.findings}
    return bool((ccodes - gcodes) - MODEL_BEHAVIOUR - SIGNAL_JUDGED)


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
            answers[o.mode].add(answer_key(o.answer))
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
    ctok = c.logprobs[i][0]  # type: ignore[index]
    if isinstance(ctok, str) and isinstance(gtok, str) and (SPECIAL_TOKEN.search(ctok) or (ctok.startswith(gtok) and SPECIAL_TOKEN_WHOLE.fullmatch(ctok[len(gtok):]))):
        return None  # the golden's token with a suffix (a stop token appended): the detokenizer's, not a decoding path
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


def _matched_turns(g: Obs, c: Obs) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Per wire mode, the golden's and the candidate's conversation turn whose history up to it is the same: the
    only turns the history signals compare (after two conversations part, nothing later is evidence)."""
    gr, cr = turn_rows(g), turn_rows(c)
    for mode in gr.keys() & cr.keys():
        if gr[mode]["prior"] == cr[mode]["prior"]:
            yield gr[mode], cr[mode]


def followup_divergence(g: Obs, c: Obs) -> bool | None:
    """A conversation's first divergence from the golden is a follow-up: a request that replays the model's own
    earlier output (a tool-result step of turn 1, or any request of turn 2 or later) answered otherwise, while every
    request before it went as the golden's, the conversation's first included. The follow-up failure of day-0
    deployments: tool results, ids or reasoning replayed in a shape the server renders wrong (turn_diff.py).
    Measured on conversation turns whose history up to the turn matched the golden's."""
    measured = fired = False
    for a, b in _matched_turns(g, c):
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
    measured = fired = False
    for a, b in _matched_turns(g, c):
        fa, fb = a.get("fingerprint") or [], b.get("fingerprint") or []
        sa, sb = a.get("steps") or [], b.get("steps") or []
        for j in range(min(len(fa), len(fb))):
            if not (a["turn"] == 1 and j == 0) and fa[j] is not None and fb[j] is not None:
                measured = True
                fired = fired or fa[j] != fb[j]
            if j >= len(sa) or j >= len(sb) or sa[j] != sb[j]:
                break  # the next request's history differs: its tokens may rightly differ
    return fired if measured else None


# ----------------------------------------------------------------------------- what else the wire carries (issue 38)

def _pairs(g: Obs, c: Obs) -> Iterator[tuple[Observation, Observation]]:
    """The golden's and the candidate's judged records of one sample with the same wire mode and epoch."""
    gi = {(o.mode, o.epoch): o for o in g if o.judged}
    for o in c:
        if o.judged and (o.mode, o.epoch) in gi:
            yield gi[(o.mode, o.epoch)], o


def _loose(x: Any) -> Any:
    """A JSON value with numbers and booleans spelled as the strings a schema-driven converter would write."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, float)):
        return json.dumps(x)
    if isinstance(x, dict):
        return {str(k): _loose(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_loose(v) for v in x]
    return x


def _calls(o: Observation) -> list[dict[str, Any]] | None:
    """A tool suite's answer: the calls as [{"name", "arguments"}] (None on other suites or answers)."""
    a = o.answer
    if not isinstance(a, list) or not all(isinstance(x, dict) and "name" in x and "arguments" in x for x in a):
        return None
    return a


def _types_changed(g: Observation, c: Observation) -> bool | None:
    gc, cc = _calls(g), _calls(c)
    if not gc or cc is None:
        return None
    if sorted(json.dumps(_loose(x), sort_keys=True) for x in gc) != sorted(json.dumps(_loose(x), sort_keys=True) for x in cc):
        return False  # other calls or other values: the model's doing or another signal's
    return sorted(json.dumps(x, sort_keys=True) for x in gc) != sorted(json.dumps(x, sort_keys=True) for x in cc)


def tool_args_types_changed(g: Obs, c: Obs) -> bool | None:
    """The candidate's tool calls have the golden's names and values on the same sample and mode, with other JSON
    types (130 -> "130", true -> "true"): a parser converted the arguments; the model wrote the same call."""
    measured = [x for x in (_types_changed(a, b) for a, b in _pairs(g, c)) if x is not None]
    return any(measured) if measured else None


def _streamed_pairs(obs: Obs) -> dict[tuple[str, int], tuple[Observation, Observation]]:
    """(streamed mode, epoch) -> (the non-streamed record of the same surface and epoch, the streamed one)."""
    rec = {(o.mode, o.epoch): o for o in obs if o.judged}
    return {(m, e): (rec[(m.removesuffix("-stream"), e)], o) for (m, e), o in rec.items()
            if mode_of(m).stream and (m.removesuffix("-stream"), e) in rec}


def stream_text_modes(g: Obs, c: Obs) -> set[str] | None:
    """Streamed modes whose text differs from the golden's streamed text while the same surface's non-streamed text
    equals the golden's, on a sample where the golden's two paths wrote the same text: the stream's assembly
    (a duplicated event, a dropped one, a split multi-byte character) changed it. Like with like only: where the
    golden's paths differed, the candidate's non-streamed text moved, or the streamed tokens show another generation
    (a greedy output flipped by batch shape on the streamed path alone), nothing is measured."""
    gp, cp = _streamed_pairs(g), _streamed_pairs(c)
    measured, fired = False, set()
    for key, (cn, cs) in cp.items():
        if key not in gp:
            continue
        gn, gs = gp[key]
        texts = (gn.content, gs.content, cn.content, cs.content)
        if not all(isinstance(t, str) for t in texts) or gn.content != gs.content or cn.content != gn.content:
            continue
        if cs.content == gs.content:
            measured = True
            continue
        kept = same_generation(gs, cs, cn)
        if kept is False:
            continue
        measured = True
        # Tokens that are the golden's (up to events repeated or dropped in transit) under other text: the text was
        # changed after generation, however it looks. Without tokens to tell, the text must read as an edit.
        if kept or assembly_edit(gs.content, cs.content):  # type: ignore[arg-type]
            fired.add(key[0])
    return fired if measured else None


EDIT_TOKENS = 4
"""Most tokens one event repeated or dropped in transit carries (a delta is one token, or a few merged)."""
REALIGN = 8
"""Tokens that must agree again right after such an event."""
SURE_LOGPROB = math.log(0.6)
"""A token the model gives at least this probability is never flipped by batch-shape noise: the runner-up has at
most 0.4, a logit gap of 0.4, where batch shape moves logits by hundredths."""


def _token_values(o: Observation) -> list[tuple[Any, Any]]:
    """(token, logprob) of the generated tokens two engines can be compared on (contract.comparable)."""
    return [(t, lp) for _, t, lp in comparable(o.logprobs)]


def _sure(records: Sequence[list[tuple[Any, Any]]], at: int, token: Any) -> bool:
    """Every record (its _token_values) that generated `token` at position `at` gave it at least SURE_LOGPROB (and
    one did)."""
    values = [pairs[at][1] for pairs in records if at < len(pairs) and pairs[at][0] == token]
    return bool(values) and all(isinstance(v, (int, float)) and v >= SURE_LOGPROB for v in values)


def same_generation(g: Observation, c: Observation, own: Observation | None = None) -> bool | None:
    """Whether the candidate's streamed record `c` carries the golden's streamed generation `g`, up to events
    repeated or dropped in transit. True: the same tokens; or a few tokens inserted that are an exact copy, logprob
    values included, of the tokens beside them (an event sent twice carries its logprobs twice, while a model that
    writes a word again computes a fresh value); or a few tokens missing that the model was sure of (SURE_LOGPROB on
    the golden's stream and on the candidate's own non-streamed record `own`), so no batch-shape flip skipped them;
    and in both cases agreeing again right after. False: otherwise, the engine chose other tokens: another generation,
    whatever text it later shares with the golden's (greedy outputs part at a near-tie and can meet again, e.g.
    `tickets they used` against `tickets used`). None: not measurable (no logprobs, or too near the stored cap)."""
    gt, ct = _token_values(g), _token_values(c)
    if not gt or not ct:
        return None
    capped = max(len(g.logprobs or ()), len(c.logprobs or ())) >= MAX_LOGPROBS
    gtok, ctok = [t for t, _ in gt], [t for t, _ in ct]
    if gtok == ctok:
        return None if capped else True  # past the cap they may still part
    p = next((i for i, (a, b) in enumerate(zip(gtok, ctok)) if a != b), min(len(gtok), len(ctok)))
    if capped and p + EDIT_TOKENS + REALIGN > min(len(gtok), len(ctok)):
        return None

    def realigns(rest_g: list[Any], rest_c: list[Any]) -> bool:
        n = min(len(rest_g), len(rest_c), REALIGN)
        return rest_g[:n] == rest_c[:n] and bool(n or (not rest_g and not rest_c))

    sure_sides = [gt, _token_values(own)] if own else [gt]  # a dropped token must be sure on both
    for k in range(1, EDIT_TOKENS + 1):
        inserted = ct[p:p + k]
        if realigns(gtok[p:], ctok[p + k:]) and inserted in (ct[max(0, p - k):p], ct[p + k:p + 2 * k]):
            return True
        if realigns(gtok[p + k:], ctok[p:]) and all(_sure(sure_sides, p + i, gtok[p + i]) for i in range(k)):
            return True
    return False


EDIT_SPAN = 32
"""Largest piece (characters) one assembly edit inserts, drops or replaces: a delta or two."""
SAME_TAIL = 8


def _garbled(a: str, b: str) -> bool:
    """b is a's characters broken in transit: a replacement character, or a's UTF-8 bytes read as a one-byte code."""
    if "\ufffd" in b:
        return True
    raw = a.encode("utf-8")
    return b in (raw.decode("cp1252", "replace"), raw.decode("latin-1"))


def _edit_op(op: str, text_a: str, text_b: str, i1: int, i2: int, j1: int, j2: int) -> bool:
    """One differing piece of a diff of the golden's text `text_a` and the streamed `text_b` reads as a transit edit:
    a piece repeated beside its copy, a dropped piece that leaves a word cut, or garbled characters. New words in
    place of the golden's, and a whole word missing, are what a greedy output that parted and met the golden's again
    also writes: text alone cannot call them edits."""
    a, b = text_a[i1:i2], text_b[j1:j2]
    if max(len(a), len(b)) > EDIT_SPAN:
        return False
    if op == "insert":
        n = j2 - j1
        return text_b[j2:j2 + n] == b or text_b[max(0, j1 - n):j1] == b
    if op == "delete":
        cut_start = i1 > 0 and text_a[i1 - 1].isalnum() and a[0].isalnum()
        cut_end = i2 < len(text_a) and a[-1].isalnum() and text_a[i2].isalnum()
        return cut_start or cut_end
    return _garbled(a, b)


def assembly_edit(a: str, b: str) -> bool:
    """b is a with pieces repeated, dropped or garbled, each at most EDIT_SPAN long, and the two end alike: the text
    was edited after generation (read when no tokens tell, same_generation)."""
    if a == b:
        return False
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    last = ops[-1]
    return all(_edit_op(op, a, b, i1, i2, j1, j2) for op, i1, i2, j1, j2 in ops if op != "equal") \
        and last[0] == "equal" and last[2] - last[1] >= min(SAME_TAIL, max(1, len(a) // 4))


def stream_text_mismatch(g: Obs, c: Obs) -> bool | None:
    m = stream_text_modes(g, c)
    return None if m is None else bool(m)


def _n_calls(o: Observation) -> int | None:
    calls = _calls(o)
    return None if calls is None else len(calls)


def stream_calls_modes(g: Obs, c: Obs) -> set[str] | None:
    """Streamed modes that carry fewer tool calls than the same surface's non-streamed record, where the golden's
    two paths carried as many: the tool-call parser's streaming path lost calls."""
    gp, cp = _streamed_pairs(g), _streamed_pairs(c)
    measured, fired = False, set()
    for key, (cn, cs) in cp.items():
        gpair = gp.get(key)
        if gpair is None:
            continue
        gn, gs = (_n_calls(x) for x in gpair)
        n, s = _n_calls(cn), _n_calls(cs)
        # A clean streamed envelope only: calls merged by a shared stream index (stream_index_collision) or broken
        # arguments are the assembly's or another finding's; a parser that drops calls leaves a well-formed stream.
        if None in (gn, gs, n, s) or gn != gs or not n or not cs.clean:
            continue
        if cn.logprobs and cs.logprobs and _tokens_differ(cn.tokens, cs.tokens):
            # the two paths generated different tokens (batch shape): another generation, not a lost call. (A streamed
            # token list that is a prefix of the other is the same generation whose later calls' deltas, with the
            # logprobs of their tokens, were dropped.)
            continue
        measured = True
        kept = _calls(cs) or []
        if s < n and kept == (_calls(cn) or [])[: len(kept)]:  # type: ignore[operator]
            fired.add(key[0])  # the calls the stream kept are the first ones of the same generation
    return fired if measured else None


def _tokens_differ(a: list[str], b: list[str]) -> bool:
    """A comparable token differs within the length both lists have (a prefix is no difference)."""
    x, y = ([tok for _, tok, _ in comparable([[v, None] for v in t])] for t in (a, b))
    n = min(len(x), len(y))
    return x[:n] != y[:n]


def stream_tool_calls_dropped(g: Obs, c: Obs) -> bool | None:
    m = stream_calls_modes(g, c)
    return None if m is None else bool(m)


# ----------------------------------------------------------------------------- the 2026 serving classes (issue 47)

def _norm_value(x: Any) -> Any:
    """An argument value as a lenient reader sees it: strings without whitespace, underscores or hyphens, case folded
    (and read as a number when they spell one), numbers as floats. Two values equal here and different as sent were
    reformatted, not chosen otherwise by the model."""
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        s = re.sub(r"[\s_\-]+", "", x).casefold()
        try:
            return float(s.replace(",", "")) if s and re.fullmatch(r"[+\-]?[\d,]*\.?\d+(e[+\-]?\d+)?", s) else s
        except ValueError:
            return s
    if isinstance(x, dict):
        return {str(k): _norm_value(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_norm_value(v) for v in x]
    return x


def _call_keys(calls: list[dict[str, Any]], value: Callable[[Any], Any]) -> list[str]:
    return sorted(json.dumps({"name": x.get("name"), "arguments": value(x.get("arguments"))}, sort_keys=True, default=str) for x in calls)


def _values_changed(g: Observation, c: Observation) -> bool | None:
    gc, cc = _calls(g), _calls(c)
    if not gc or not cc or len(gc) != len(cc) or _types_changed(g, c):
        return None  # no calls to compare, other calls, or another signal's (types converted)
    if not (g.logprobs and c.logprobs) or tokens_part(g.tokens, c.tokens):
        # Like with like only: the same generated tokens under other values is the parser's doing; without tokens, a
        # value's case or spelling may be the model's own near-tie (measured across engines: "go for shopping" on
        # one path, "Go for shopping" on the other, 133 against 133.0).
        return None
    if _call_keys(gc, _norm_value) != _call_keys(cc, _norm_value):
        return False  # other values: the model's doing, or another signal's
    return _call_keys(gc, lambda v: v) != _call_keys(cc, lambda v: v)


def tool_args_values_changed(g: Obs, c: Obs) -> bool | None:
    """The candidate's tool calls are the golden's on the same sample and mode up to formatting: string values that
    lost whitespace, underscores or hyphens or changed case, numbers rewritten (3 -> 3.0, "1,000" -> "1000"), while
    the generated tokens are the golden's (logprobs on both records: without them, not measured). A parser normalised
    the values; the model wrote the same call. Judged against the golden's values, not by BFCL's lenient
    checker (which normalises exactly these away, so accuracy holds while a client receives other values)."""
    measured = [x for x in (_values_changed(a, b) for a, b in _pairs(g, c)) if x is not None]
    return any(measured) if measured else None


def stream_args_modes(g: Obs, c: Obs) -> set[str] | None:
    """Streamed modes whose tool calls have the non-streamed calls' names and count with other arguments, while the
    non-streamed calls are the golden's, the text channel (content) is the non-streamed one's and the golden's two paths
    carried the same calls: the tool-call parser's streaming path lost or changed argument content (several tokens in
    one delta). The same generation only: where the two paths' tokens differ, nothing is measured."""
    gp, cp = _streamed_pairs(g), _streamed_pairs(c)
    measured, fired = False, set()
    for key, (cn, cs) in cp.items():
        gpair = gp.get(key)
        if gpair is None:
            continue
        gn, gs = gpair
        gcalls, ncalls, scalls = _calls(gn), _calls(cn), _calls(cs)
        if not gcalls or gcalls != _calls(gs) or ncalls != gcalls or scalls is None:
            continue
        if (cn.content or "") != (cs.content or ""):
            continue  # the text channel moved too: the stream's assembly, another signal's
        tokens = bool(cn.logprobs and cs.logprobs)
        if tokens and _tokens_differ(cn.tokens, cs.tokens):
            continue
        measured = True
        if [x.get("name") for x in scalls] == [x.get("name") for x in ncalls] and scalls != ncalls \
                and (tokens or all(_lost(n.get("arguments"), s.get("arguments")) for n, s in zip(ncalls, scalls))):
            # (without tokens to tell the same generation, only a loss counts: a value that is another word, "Go" for
            # "go", is what a path that parted at a near-tie writes too)
            fired.add(key[0])
    return fired if measured else None


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def _lost(full: Any, streamed: Any) -> bool:
    """The streamed arguments are the full ones with content lost: undecodable (a raw string), or each string value a
    subsequence of the full one's, at least one shorter, nothing else changed."""
    if full == streamed:
        return True
    if isinstance(streamed, str) and not isinstance(full, str):
        return True  # the stream's arguments did not even decode
    if isinstance(full, str) and isinstance(streamed, str):
        return len(streamed) < len(full) and _subsequence(streamed, full)
    if isinstance(full, dict) and isinstance(streamed, dict):
        return set(full) == set(streamed) and all(_lost(full[k], streamed[k]) for k in full)
    if isinstance(full, list) and isinstance(streamed, list):
        return len(full) == len(streamed) and all(_lost(a, b) for a, b in zip(full, streamed))
    return False


def stream_tool_args_changed(g: Obs, c: Obs) -> bool | None:
    m = stream_args_modes(g, c)
    return None if m is None else bool(m)


MAX_TEXT_CALLS = 16
"""JSON objects read out of one content for calls written as text."""
MAX_DECODE_ATTEMPTS = 64
"""Positions a JSON value is tried at in one content: hostile text full of `{` costs at most this many parses."""


def _text_calls(text: str | None) -> list[dict[str, Any]]:
    """The {"name", "arguments"} objects a content holds as JSON text (bounded: MAX_TEXT_CALLS objects, MAX_DECODE_ATTEMPTS
    parses of a content that is itself capped, golden.MAX_CONTENT)."""
    out: list[dict[str, Any]] = []
    if not text:
        return out
    dec = json.JSONDecoder()
    i, attempts = text.find("{"), 0
    while i >= 0 and len(out) < MAX_TEXT_CALLS and attempts < MAX_DECODE_ATTEMPTS:
        attempts += 1
        try:
            obj, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        items = obj if isinstance(obj, list) else [obj]
        for x in items:
            if isinstance(x, dict) and isinstance(x.get("name"), str):
                args = x.get("arguments", x.get("parameters"))
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass
                out.append({"name": x["name"], "arguments": args})
        i = text.find("{", end)
    return out


def _same_name(a: Any, b: Any) -> bool:
    """Names equal up to the dots a benchmark's names carry and the underscores their declared spelling has."""
    return isinstance(a, str) and isinstance(b, str) and re.sub(r"\W", "_", a) == re.sub(r"\W", "_", b)


def _calls_as_text(g: Observation, c: Observation) -> bool | None:
    gc, cc = _calls(g), _calls(c)
    if not gc or cc is None:
        return None
    if cc:
        return False
    written = _text_calls(c.content)
    return len(written) >= len(gc) and all(
        any(_same_name(x["name"], w["name"]) and _norm_value(x.get("arguments")) == _norm_value(w["arguments"]) for w in written)
        for x in gc)


def tool_calls_as_text(g: Obs, c: Obs) -> bool | None:
    """The golden's record made tool calls; the candidate's same mode and epoch made none and wrote those very calls
    (names and argument values) as text: the model chose the same call, the tool-call parser did not turn it into one
    (or a forcing tool_choice was not applied: the contract finding tool_choice_unmet says so where it was sent).
    A model that writes a call as text on its own writes another text than the golden's parsed call."""
    measured = [x for x in (_calls_as_text(a, b) for a, b in _pairs(g, c)) if x is not None]
    return any(measured) if measured else None


def _with_tokens(obs: Obs) -> list[Observation]:
    """Judged records with logprobs, on a path the server renders itself (the dual path renders the prompt on the
    client, so its prompt is another request's)."""
    return [o for o in obs if o.judged and o.logprobs and not mode_of(o.mode).dual_path]


def _sure_parting(a: Observation, b: Observation) -> bool | None:
    """Whether two records of one request part at a token one of them was sure of (SURE_LOGPROB): not a near-tie that
    batch shape flips. None: they do not part (or only by events repeated or dropped in transit: same_generation)."""
    at, bt = _token_values(a), _token_values(b)
    p = next((i for i, (x, y) in enumerate(zip(at, bt)) if x[0] != y[0]), None)
    if p is None:
        return None
    if same_generation(a, b) or same_generation(b, a):
        return None
    sure = [v for v in (at[p][1], bt[p][1]) if isinstance(v, (int, float))]
    return bool(sure) and max(sure) >= SURE_LOGPROB


def repeats_modes(g: Obs, c: Obs) -> set[str] | None:
    """The modes whose record of a greedy request parted from another of the candidate's records of the same request
    (same surface, same prompt tokens: an epoch, the streamed twin) at a token the model was sure of, while one of the candidate's records is the golden's generation and the golden's
    own repeats (epochs, modes) agreed: the engine answered the same request two ways, and one way is the reference's.
    Weights and kernels compute the same thing every time; a prefix cache or a speculative decoder serving stale state
    does not. None: not measurable (fewer than two greedy records with logprobs, or the golden's repeats disagreed)."""
    # Greedy decoding is what makes repeats comparable: a sampled golden's own repeats disagree, and then nothing is
    # measured; where a sampled golden's repeats happened to agree, its reruns calibrate the margin.
    grecs, crecs = _with_tokens(g), _with_tokens(c)
    if not grecs or len(crecs) < 2:
        return None
    golden = {tuple(t for t, _ in _token_values(o)) for o in grecs}
    if len(golden) != 1:
        return None  # the reference's own repeats disagreed (or it has no tokens here): nothing to hold the candidate to
    ref = next(iter(golden))
    right = [o for o in crecs if tuple(t for t, _ in _token_values(o)) == ref]
    if not right:
        return set()  # every record left the golden's generation: the weights' doing, the numerics judge it
    # Repeats of one request to the engine only: the same surface (a mode and its streamed twin, every epoch), the same
    # prompt tokens. Another surface renders its own request (a fault in its translation is that surface's), so two
    # surfaces answering differently is surface parity's to judge, not the engine's state.
    # And other answers: tokens alone that differ under the same text are the reporting's (a stream whose logprobs
    # skip a speculative decoder's accepted tokens spells the same text: stream assembly's, detokenize_mismatch).
    # "First right, later wrong" where the journal recorded the send order: a record that went out before every
    # record it parts from is not a stale state's doing (a cold first request, which llama.cpp answers otherwise at
    # temperature 0 before its prompt cache is warm). Without the order (an older journal) any two repeats are read
    # as today, unordered (compare says so: Signal.reads_send_order).
    # A resend (the gate's resend step: the request sent again alone, once the run was in) that is the golden's
    # generation, against the run's record that parted from it: "alone right, in the run wrong", the run's record sent
    # warm or beside other requests (a batch-dependent answer, state shared across a batch). The resend step leaves
    # out the run's first, cold, concurrent sends, so a cold first request is not read this way either.
    return {o.mode for o in crecs if o not in right and any(_same_request(r, o) and _in_order(r, o) and _answered_otherwise(r, o)
                                                          and _sure_parting(r, o) for r in right)}


def _in_order(right: Observation, wrong: Observation) -> bool:
    """Whether `wrong` parting from `right` is state's order: sent after it ("first right, later wrong"), or `right`
    is a resend sent alone after the run and `wrong` the run's own record ("alone right, in the run wrong")."""
    return _sent_after(wrong, right) or (bool(right.resent) and not wrong.resent)


def _sent_after(later: Observation, first: Observation) -> bool:
    """Whether `later` went out after `first` in the run's send order; True where either record has no order."""
    return later.sent is None or first.sent is None or later.sent > first.sent


def send_order_unknown(c: Obs) -> bool:
    """Whether the candidate's records of a sample lack their send order (a journal from before it was recorded)."""
    return any(o.sent is None for o in _with_tokens(c))


def _answered_otherwise(a: Observation, b: Observation) -> bool:
    return a.content != b.content or answer_key(a.answer) != answer_key(b.answer)


def _same_request(a: Observation, b: Observation) -> bool:
    return surface_for(a.mode).name == surface_for(b.mode).name and a.prompt_tokens == b.prompt_tokens


def repeats_disagree(g: Obs, c: Obs) -> bool | None:
    m = repeats_modes(g, c)
    return None if m is None else bool(m)


TRANSFORM_TOL = 0.02
"""Relative residual within which one transform explains every token's logprob (rounding in transit)."""
LOGPROB_MOVED = 1e-3
SCALE_MIN = 0.05
"""A scale this far from 1 at least: run-to-run noise moves every value a little, never all by one factor this large."""


def _points(g: Observation, c: Observation) -> list[tuple[float, float]] | None:
    """(golden's, candidate's) logprob of each generated token whose golden value is not ~0, where the two records
    generated the same tokens; None where they did not (another generation: nothing to compare value by value)."""
    gt, ct = comparable(g.logprobs), comparable(c.logprobs)
    if not gt or len(gt) != len(ct) or any(a[1] != b[1] for a, b in zip(gt, ct)):
        return None
    return [(float(a[2]), float(b[2])) for a, b in zip(gt, ct)
            if isinstance(a[2], (int, float)) and isinstance(b[2], (int, float)) and abs(a[2]) > LOGPROB_MOVED]


def transform_points(g: Obs, c: Obs) -> list[tuple[float, float]]:
    """The value pairs of one record pair of the sample (the first with the same tokens): what compare pools over a
    suite's samples too short to measure alone (`one_transform` needs three values; a one-word answer has one or two).
    One pair per sample: a mode and its streamed twin report the same values, which are not more evidence."""
    for a, b in _pairs(g, c):
        pts = _points(a, b)
        if pts is not None:
            return pts
    return []


def one_transform(pairs: list[tuple[float, float]]) -> bool | None:
    """Every value moved and one monotone transform (a scale at least SCALE_MIN from 1, or exp) explains each new
    value: reported otherwise, computed the same. None: fewer than three values to tell."""
    if len(pairs) < 3:
        return None
    if all(abs(y - x) <= LOGPROB_MOVED for x, y in pairs):
        return False
    if sum(abs(y - x) > LOGPROB_MOVED for x, y in pairs) < 0.9 * len(pairs):
        return False  # some tokens kept their values: not one transform of every token
    scale = sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)
    by_scale = scale > 0 and abs(scale - 1) >= SCALE_MIN and all(abs(y - scale * x) <= TRANSFORM_TOL * max(abs(y), LOGPROB_MOVED) + 1e-6 for x, y in pairs)
    by_exp = all(abs(y - math.exp(x)) <= 1e-3 for x, y in pairs)
    return by_scale or by_exp


def _transformed(g: Observation, c: Observation) -> bool | None:
    """The same generated tokens, every logprob moved, and one monotone transform (a scale, or exp) explains every
    token's new value: the values are reported otherwise, the model computed the same. None: not measurable."""
    pts = _points(g, c)
    return None if pts is None else one_transform(pts)


def logprobs_transformed(g: Obs, c: Obs) -> bool | None:
    """Logprobs reported through a transform (processed instead of raw, probabilities in the field) on records
    whose generated tokens equal the golden's: reporting, not numerics."""
    measured = [x for x in (_transformed(a, b) for a, b in _pairs(g, c)) if x is not None]
    return any(measured) if measured else None


def logprobs_dropped(g: Obs, c: Obs) -> bool | None:
    """The golden's record of a mode returned logprobs and the candidate's same mode and epoch, with text, asked for
    them and returned none (the contract finding logprobs_ignored): a parameter the reference honoured, silently
    ignored (a gateway dropping logprobs / top_logprobs). A run that did not ask is not measured as ignoring."""
    measured = fired = False
    for a, b in _pairs(g, c):
        if a.logprobs and (b.content or "").strip():
            measured = True
            fired = fired or "logprobs_ignored" in b.findings
    return fired if measured else None


def cached_tokens_dropped(g: Obs, c: Obs) -> bool | None:
    """The golden's record of a mode reported its cached prompt tokens (`prompt_tokens_details.cached_tokens`, 0
    included: the engine counts them) and the candidate's same mode and epoch reported usage without that figure: a
    client billing or sizing its cache by it is told nothing. Presence, not the value: how much a prefix cache holds
    follows what was sent before (batching, eviction), whether the engine reports it does not."""
    measured = fired = False
    for a, b in _pairs(g, c):
        if a.cached_tokens is not None and b.prompt_tokens is not None:
            measured = True
            fired = fired or b.cached_tokens is None
    return fired if measured else None


def output_cut_short(g: Obs, c: Obs) -> bool | None:
    """The golden's record stopped; the candidate's same mode and epoch was cut for length with a strict prefix of the
    golden's text: the same generation ended early by a limit the request did not set (a server or gateway cap).
    Reads text only, so it holds where usage is missing (the contract finding output_capped needs the token count)."""
    measured = fired = False
    for a, b in _pairs(g, c):
        if a.finish_reason == "stop" and isinstance(a.content, str) and a.content.strip() and isinstance(b.content, str):
            measured = True
            fired = fired or (b.finish_reason == "length" and bool(b.content.strip()) and len(b.content) < len(a.content)
                              and a.content.startswith(b.content))
    return fired if measured else None


def stop_reason_changed(g: Obs, c: Obs) -> bool | None:
    """The golden's record was cut for length and the candidate's, with the same text, says it stopped: the
    truncation is invisible to a client (a translated `completed` / end_turn)."""
    measured = fired = False
    for a, b in _pairs(g, c):
        if a.finish_reason == "length" and isinstance(a.content, str) and a.content == b.content:
            measured = True
            fired = fired or b.finish_reason not in ("length", None)
    return fired if measured else None


# ----------------------------------------------------------------------------- numerics signals

def repetition(g: Obs, c: Obs) -> bool | None:
    """The candidate fell into a repetition loop where the golden did not (a numerics symptom)."""
    if not any(o.judged for o in c):
        return None
    return any(degenerate(o.content) for o in c) and not any(degenerate(o.content) for o in g)


# ----------------------------------------------------------------------------- the declarations

ENGINE_STATE = "engine state"
"""The component of a request answered differently on a repeat (diagnosis.COMPONENTS says where to look)."""

# The diagnosis component of new_findings is each new finding code's own (diagnosis.FINDINGS), not the signal's.
BY_FINDING_CODE = "<the finding codes' components>"


@dataclass(frozen=True)
class Signal:
    """One signal, declared once: everything compare, calibrate, explain and the diagnosis need to know of it."""

    name: str
    """The event's name: the key of `signals`, evidence and checks in comparison.json, and of the margin
    `<suite>/signal:<name>`."""
    side: Literal["frontend", "numerics"]
    """frontend: weight-independent, fails the frontend verdict; numerics: judged candidate against golden
    (McNemar) on samples no frontend signal touched."""
    component: str | None
    """The component a failing frontend signal implicates (a diagnosis.COMPONENTS name; BY_FINDING_CODE for
    new_findings); None on the numerics side, which the diagnosis does not name."""
    meaning: str
    """One line for the diagnosis: what the event says about the server."""
    blame_modes: "frozenset[str] | ModesOf | None"
    """The wire modes a sample where it fired blames. None: the measure is asked again of each mode alone
    (against the golden's same mode). A set: a path-parity signal, which compares the chat path with these modes
    and blames them (it names no surface). A function: the signal tells the modes that moved itself."""
    measure: Measure
    """(golden's observations of one sample, candidate's) -> True fired / False measured, did not fire / None not
    measurable."""
    on_streams_only: tuple[str, str] | None = None
    """(component, meaning) when it fired on streamed modes only (`<name>:stream` in the diagnosis)."""
    on_surface_only: tuple[str, str] | None = None
    """(component, meaning) when it fired on Responses / Messages modes only while the run's chat modes stayed put
    (`<name>:surface` in the diagnosis): the surface's own request translation."""
    structural_zero: bool = False
    """A healthy engine cannot produce the event: its margin is 0 by construction, calibrated or not."""
    touches_numerics: bool = True
    """Whether a sample where it fired is kept out of the numerics comparison."""
    reads_send_order: bool = False
    """It reads which repeat went out first (Observation.sent): where it fired on records without that order (an
    older journal) its evidence says it read them unordered."""
    reads_resends: bool = False
    """It reads the gate's resend step too (Observation.resent, from resends.jsonl) beside the candidate's records of
    the sample; every other signal reads the run's records only."""

    def __post_init__(self) -> None:
        if self.side == "frontend" and not self.component:
            raise ValueError(f"frontend signal {self.name} needs a component: the diagnosis names it")


def _fixed(*modes: str) -> frozenset[str]:
    return frozenset(modes)


# The order is the order of the evidence in comparison.json: the frontend signals, then the numerics ones.
SIGNALS: tuple[Signal, ...] = (
    Signal("new_findings", "frontend", BY_FINDING_CODE,
           "a contract finding the golden never had on this sample", None, new_findings,
           # its codes either block the record (it is then not clean) or leave the answer usable (usage_missing...),
           # and such a sample is still measurable
           touches_numerics=False),
    Signal("prompt_tokens_mismatch", "frontend", "chat template & tokenization",
           "prompt_tokens moved: the rendered prompt or its tokenization changed", None, prompt_tokens_mismatch,
           # on streamed records only while the non-streamed ones match: the template is shared by both paths
           on_streams_only=("response formatting & usage", "prompt_tokens differ on streamed records only (non-streamed "
                                                           "match the golden): usage reporting in streams, not the template"),
           on_surface_only=("surface translation", "prompt_tokens moved on Responses/Messages only: the surface renders "
                                                   "another prompt than chat")),
    Signal("stream_parity_mismatch", "frontend", "stream assembly",
           "streamed and non-streamed answers differ on the same tokens", _fixed("chat-stream"), stream_parity_mismatch),
    Signal("new_unsupported", "frontend", "API validation",
           "requests the golden served are now refused with a 4xx", None, new_unsupported),
    Signal("tool_call_id_format_changed", "frontend", "tool-call parser",
           "tool-call ids changed shape (clients parsing ids break)", None, tool_call_id_format_changed),
    Signal("dual_path_mismatch", "frontend", "chat template & tokenization",
           "chat path and client-rendered completions path disagree", _fixed("completions"), dual_path_mismatch),
    Signal("surface_parity_mismatch", "frontend", "surface translation",
           "chat, Responses and Messages answer the same sample differently", parity_modes, surface_parity_mismatch),
    Signal("decoding_changed", "frontend", "API validation",
           "greedy outputs part from the golden's where the model's distribution did not change: "
           "the decoding path changed (server-side sampling defaults or penalties, ignored temperature)",
           None, decoding_changed, structural_zero=True),  # a greedy engine never skips its own top token
    Signal("history_tokens_mismatch", "frontend", "conversation history",
           "a request replaying the same history as the golden's was rendered to other prompt tokens",
           None, history_tokens_mismatch,
           on_surface_only=("surface translation", "replayed history rendered to other prompt tokens on Responses/Messages "
                                                   "only: the surface's history translation")),
    Signal("followup_divergence", "frontend", "conversation history",
           "turn 1 matched the golden, a later turn (built on replayed history) did not", None, followup_divergence),
    Signal("tool_args_types_changed", "frontend", "tool-call parser",
           "tool calls with the golden's names and values in other JSON types (numbers or booleans as strings): "
           "the parser converted the arguments", None, tool_args_types_changed),
    Signal("stream_text_mismatch", "frontend", "stream assembly",
           "streamed text differs from the golden's streamed text while the non-streamed text equals the golden's "
           "(a duplicated event, a split character)", stream_text_modes, stream_text_mismatch),
    Signal("stream_tool_calls_dropped", "frontend", "tool-call parser",
           "streamed responses carry fewer tool calls than non-streamed ones (the golden's carried as many): "
           "the tool-call parser's streaming path", stream_calls_modes, stream_tool_calls_dropped),
    Signal("logprobs_transformed", "frontend", "response formatting & usage",
           "the same tokens with every logprob moved by one monotone transform (scaled, or probabilities): "
           "logprobs reported otherwise, not changed numerics", None, logprobs_transformed),
    Signal("logprobs_dropped", "frontend", "API validation",
           "no logprobs where the golden's same mode returned them: the logprobs parameter silently ignored "
           "(a gateway dropping it)", None, logprobs_dropped,
           # a missing logprob changes no answer: quality is still compared on the sample, only its drift is not
           # measured (numerics.drift needs both sides' logprobs)
           touches_numerics=False),
    Signal("output_cut_short", "frontend", "API validation",
           "outputs cut for length at a prefix of the golden's text where the golden stopped: a cap the request did "
           "not set", None, output_cut_short),
    Signal("stop_reason_changed", "frontend", "response formatting & usage",
           "the golden's text was cut for length; the candidate's same text says it stopped", None, stop_reason_changed,
           on_surface_only=("surface translation", "a cut reply reported as stopped on Responses/Messages only: the "
                                                   "surface's stop-reason translation")),
    Signal("tool_args_values_changed", "frontend", "tool-call parser",
           "tool calls with the golden's names and values reformatted (whitespace, underscores or case stripped in "
           "strings, numbers rewritten): the parser normalised the arguments", None, tool_args_values_changed),
    Signal("stream_tool_args_changed", "frontend", "tool-call parser",
           "streamed tool calls lost argument content the non-streamed calls kept, with the text channel intact: the "
           "tool-call parser's streaming path (several tokens in one delta)", stream_args_modes, stream_tool_args_changed),
    Signal("tool_calls_as_text", "frontend", "tool-call parser",
           "the golden's tool calls came back as text (no parsed call): the tool-call parser did not parse them, or a "
           "forcing tool_choice was not applied", None, tool_calls_as_text),
    Signal("cached_tokens_dropped", "frontend", "response formatting & usage",
           "usage without its cached-token figure (prompt_tokens_details.cached_tokens) on records whose golden reported "
           "it: usage accounting dropped the prefix cache's count", None, cached_tokens_dropped,
           touches_numerics=False),  # a usage figure changes no answer
    Signal("repeats_disagree", "frontend", ENGINE_STATE,
           "the candidate answered one greedy request two ways, parting at tokens the model was sure of, one of them the "
           "golden's, where the golden's repeats agreed: engine state (a prefix cache, speculative decoding, batching) "
           "changes answers", repeats_modes, repeats_disagree, reads_send_order=True, reads_resends=True),
    Signal("repetition", "numerics", None,
           "the candidate fell into a repetition loop where the golden did not", None, repetition),
)


# What the rest of the package reads: functions of the registry at call time, so every reader sees the same
# declarations (a test may add one).
def declared(side: str | None = None) -> tuple[Signal, ...]:
    """The declared signals in evidence order, of one side or both."""
    return tuple(s for s in SIGNALS if side is None or s.side == side)


def names(side: str | None = None) -> tuple[str, ...]:
    return tuple(s.name for s in declared(side))


def by_name() -> dict[str, Signal]:
    return {s.name: s for s in SIGNALS}


def fixed_blame_modes() -> dict[str, set[str]]:
    """Path-parity signals -> the wire modes they blame (compare's `signal_modes`)."""
    return {s.name: set(s.blame_modes) for s in SIGNALS if isinstance(s.blame_modes, frozenset)}


# Snapshots of the registry as shipped, for readers and tests (code reads the functions above).
FRONTEND_EVENTS = names("frontend")
NUMERICS_EVENTS = names("numerics")
EVENTS = FRONTEND_EVENTS + NUMERICS_EVENTS
STRUCTURAL_ZERO = frozenset(s.name for s in SIGNALS if s.structural_zero)
NOT_TOUCHING = frozenset(s.name for s in SIGNALS if not s.touches_numerics)


def evaluate(g: Obs, c: Obs, resent: Obs = ()) -> dict[str, bool | None]:
    """Every declared signal on one paired sample, by name; `resent`: the sample's records of the gate's resend step,
    read by the signals declared `reads_resends` beside the candidate's."""
    return {s.name: s.measure(g, with_resent(s, c, resent)) for s in SIGNALS}


def with_resent(s: Signal, c: Obs, resent: Obs) -> Obs:
    """The candidate's records a signal reads: the run's, and the resend step's where it is declared to read them."""
    return [*c, *resent] if s.reads_resends and resent else c


def touched_by_frontend(results: dict[str, bool | None]) -> bool:
    """Whether any frontend signal fired that changes what the numerics would measure: such a sample is kept
    out of the numerics comparison. Non-blocking findings alone do not (Signal.touches_numerics)."""
    return any(results[s.name] for s in declared("frontend") if s.touches_numerics)


def where_fired(g: Obs, c: Obs, results: dict[str, bool | None], resent: Obs = ()) -> dict[str, set[str]]:
    """For each signal that fired on this sample: the candidate's wire modes it fired on, so evidence can
    name a surface (Signal.blame_modes). A signal is asked again of each mode alone (against the golden's same
    mode); surface parity names the modes that moved; signals that need two modes (stream parity) name none."""
    out: dict[str, set[str]] = {}
    gm, cm = by_mode(g), by_mode(c)
    for s in SIGNALS:
        if not results.get(s.name):
            continue
        if isinstance(s.blame_modes, frozenset):
            out[s.name] = set()  # a path comparison: one mode alone has nothing to compare with
        elif s.blame_modes is not None:
            out[s.name] = s.blame_modes(g, with_resent(s, c, resent)) or set()
        else:
            out[s.name] = {m for m, co in cm.items() if s.measure(gm.get(m) or g, co)}
    return out
