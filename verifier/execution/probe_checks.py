"""The pure checks of the probe catalogue (probes.py): what came back -> (passed, detail[, value]).

Each check reads `Answer`s: status, the raw body or SSE payloads (scrubbed), and the answer reassembled in the
one `Parsed` shape of every surface. A check never sees the network. A measured `value` (prompt tokens, packet
sizes) is compared with the reference's by the probe's comparator when the two are judged (probe_results.judge).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from verifier.jsonsafe import loads_bounded
from verifier.judge.parse import MalformedBody, parse_surface
from verifier.surfaces.registry import by_name
from verifier.types import Parsed


@dataclass(frozen=True)
class Answer:
    """One probe request's outcome."""

    status: int | None
    body: str | None
    chunks: list[str] | None
    error: str | None
    surface: str
    parsed: Parsed | None = None
    """The reassembled answer; None unless the request got a 200 that parses."""
    sent: dict[str, Any] = field(default_factory=dict)
    """The body as sent (for checks that compare with the request)."""

    @property
    def ok(self) -> bool:
        return self.parsed is not None

    def json(self) -> Any:
        try:
            return loads_bounded(self.body or "")
        except ValueError:
            return None

    def why(self) -> str:
        return f"HTTP {self.status}" + (f" ({self.error})" if self.error else "")


@dataclass(frozen=True)
class Seen:
    passed: bool
    detail: str
    value: Any = None


def answer(surface: str, mode: str, status: int | None, body: str | None, chunks: list[str] | None, error: str | None,
           sent: dict[str, Any]) -> Answer:
    parsed = None
    if status == 200 and error is None:
        try:
            parsed = parse_surface(mode, body, chunks)
        except MalformedBody:
            parsed = None
    return Answer(status, body, chunks, error, surface, parsed, sent)


def _short(text: str | None, n: int = 40) -> str:
    return repr((text or "")[:n])


def refused(a: list[Answer]) -> Seen:
    s = a[0].status
    return Seen(s is not None and 400 <= s < 500, f"HTTP {s}")


def one_token(a: list[Answer]) -> Seen:
    p = a[0].parsed
    if p is None:
        return Seen(False, a[0].why())
    ok = p.finish_reason == "length" and (p.completion_tokens in (None, 1, 2) or len(p.content or "") <= 12)
    return Seen(ok, f"finish_reason={p.finish_reason} completion_tokens={p.completion_tokens} text={_short(p.content)}")


def same_text(a: list[Answer]) -> Seen:
    bad = [x for x in a if not x.ok]
    if bad:
        return Seen(False, f"a request failed: {bad[0].why()}")
    texts = {x.parsed.content for x in a}  # type: ignore[union-attr]
    return Seen(len(texts) == 1, f"{len(texts)} distinct outputs from {len(a)} identical requests")


def neutral_same_as_none(a: list[Answer]) -> Seen:
    r = same_text(a)
    none, neutral = a[0].parsed, a[1].parsed
    if not r.passed and none is not None and neutral is not None:  # both answered (Answer.ok)
        return Seen(False, f"neutral values sent explicitly change the output: {_short(neutral.content)} vs "
                           f"none sent {_short(none.content)} (a server default applies when they are absent)")
    return r


def repeats(text: str | None) -> int:
    """How many words of the text repeat the word before them ("1 1 2 2" has 2)."""
    words = (text or "").split()
    return sum(1 for x, y in zip(words, words[1:]) if x == y)


def neutral_same_on_repeats(a: list[Answer]) -> Seen:
    """The output asked to repeat tokens is the same with and without explicit neutral values; the detail counts
    the repeats each kept (a default penalty drops them from the request that sets none)."""
    r = neutral_same_as_none(a)
    if not (a[0].ok and a[1].ok):
        return r
    none_sent, neutral = repeats(a[0].parsed.content), repeats(a[1].parsed.content)  # type: ignore[union-attr]
    return Seen(r.passed, f"{r.detail}; {none_sent} repeated word(s) without the neutral values, {neutral} with them")


def forced_schema(a: list[Answer]) -> Seen:
    p = a[0].parsed
    if p is None:
        return Seen(False, a[0].why())
    try:
        ok = loads_bounded(p.content or "") == {"probe_code": 777}
    except ValueError:
        ok = False
    return Seen(ok, f"output {_short(p.content, 60)}")


def json_object(a: list[Answer]) -> Seen:
    p = a[0].parsed
    if p is None:
        return Seen(False, a[0].why())
    try:
        ok = isinstance(loads_bounded(p.content or ""), dict)
    except ValueError:
        ok = False
    return Seen(ok, f"output {_short(p.content, 60)}" + ("" if ok else ": not a JSON object"))


def key_order(want: list[str]) -> Callable[[list[Answer]], Seen]:
    def check(a: list[Answer]) -> Seen:
        p = a[0].parsed
        if p is None:
            return Seen(False, a[0].why())
        try:
            value = loads_bounded(p.content or "")
        except ValueError:
            return Seen(False, f"not JSON: {_short(p.content, 60)}")
        keys = list(value) if isinstance(value, dict) else None
        return Seen(keys == want, f"keys {keys} (schema order {want})")

    return check


def _calls(x: Answer) -> list[dict[str, Any]]:
    return list(x.parsed.tool_calls or []) if x.parsed else []


def _names(x: Answer) -> list[str]:
    return [str((c.get("function") or {}).get("name")) for c in _calls(x)]


def no_call(a: list[Answer]) -> Seen:
    if not a[0].ok:
        return Seen(False, a[0].why())
    n = _names(a[0])
    return Seen(not n, f"tool calls {n} under tool_choice none" if n else f"no tool call; text {_short(a[0].parsed.content)}")  # type: ignore[union-attr]


def some_call(a: list[Answer]) -> Seen:
    if not a[0].ok:
        return Seen(False, a[0].why())
    n = _names(a[0])
    return Seen(bool(n), f"tool calls {n}" if n else f"no tool call under a required tool choice; text {_short(a[0].parsed.content)}")  # type: ignore[union-attr]


def named_call(name: str) -> Callable[[list[Answer]], Seen]:
    def check(a: list[Answer]) -> Seen:
        if not a[0].ok:
            return Seen(False, a[0].why())
        n = _names(a[0])
        return Seen(bool(n) and all(x == name for x in n), f"tool calls {n} (named: {name})")

    return check


def at_most_one_call(a: list[Answer]) -> Seen:
    if not a[0].ok:
        return Seen(False, a[0].why())
    n = _names(a[0])
    return Seen(len(n) <= 1, f"{len(n)} tool call(s) {n} with parallel_tool_calls false")


def declared_only(declared: set[str]) -> Callable[[list[Answer]], Seen]:
    def check(a: list[Answer]) -> Seen:
        if not a[0].ok:
            return Seen(False, a[0].why())
        n = _names(a[0])
        bad = [x for x in n if x not in declared]
        return Seen(not bad, f"undeclared tool(s) called: {bad}" if bad else f"tool calls {n}, all declared")

    return check


def stop_honoured(stop: str) -> Callable[[list[Answer]], Seen]:
    def check(a: list[Answer]) -> Seen:
        full, cut = a
        if not (full.ok and cut.ok):
            return Seen(False, f"a request failed: {(cut if full.ok else full).why()}")
        f, c = full.parsed.content or "", cut.parsed.content or ""  # type: ignore[union-attr]
        if stop not in f:
            return Seen(False, f"the output without stop never contains {stop!r}: {_short(f)}")
        if stop in c:
            return Seen(False, f"the stop string is in the output: {_short(c)}")
        expected = f[: f.find(stop)]
        ok = c.strip() == expected.strip() and cut.parsed.finish_reason == "stop"  # type: ignore[union-attr]
        return Seen(ok, f"stopped text {_short(c)} (expected {_short(expected)}), finish_reason={cut.parsed.finish_reason}")  # type: ignore[union-attr]

    return check


def n_choices(n: int) -> Callable[[list[Answer]], Seen]:
    def check(a: list[Answer]) -> Seen:
        x = a[0]
        if x.status is not None and 400 <= x.status < 500:
            return Seen(True, f"refused with HTTP {x.status}")
        body = x.json()
        choices = body.get("choices") if isinstance(body, dict) else None
        if x.status != 200 or not isinstance(choices, list):
            return Seen(False, x.why())
        return Seen(len(choices) == n, f"{len(choices)} choice(s) for n={n}" + ("" if len(choices) == n else ": silently fewer"))

    return check


def effect_or_refusal(a: list[Answer]) -> Seen:
    plain, biased = a
    if biased.status is not None and 400 <= biased.status < 500:
        return Seen(True, f"refused with HTTP {biased.status}")
    if not (plain.ok and biased.ok):
        return Seen(False, f"a request failed: {(biased if plain.ok else plain).why()}")
    p, b = plain.parsed.content, biased.parsed.content  # type: ignore[union-attr]
    return Seen(p != b, f"with logit_bias {_short(b)}, without {_short(p)}" + ("" if p != b else ": no effect"))


def _chat_events(chunks: list[str]) -> list[dict[str, Any]]:
    out = []
    for c in chunks:
        try:
            d = loads_bounded(c)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def usage_last_only(a: list[Answer]) -> Seen:
    plain, streamed = a
    if not plain.ok or streamed.chunks is None or streamed.error:
        return Seen(False, f"a request failed: {(streamed if plain.ok else plain).why()}")
    events = _chat_events(streamed.chunks)
    with_usage = [i for i, e in enumerate(events) if isinstance(e.get("usage"), dict)]
    if not with_usage:
        return Seen(False, "no usage in any chunk (stream_options.include_usage ignored)")
    if with_usage != [len(events) - 1]:
        return Seen(False, f"usage in {len(with_usage)} of {len(events)} chunks, not only the last")
    u, ref = events[-1]["usage"], plain.parsed.usage or {}  # type: ignore[union-attr]
    same = all(u.get(k) == ref.get(k) for k in ("prompt_tokens", "completion_tokens"))
    return Seen(same, f"streamed usage {u.get('prompt_tokens')}/{u.get('completion_tokens')} vs non-streamed "
                      f"{ref.get('prompt_tokens')}/{ref.get('completion_tokens')} (prompt/completion)")


def reasoning_apart(a: list[Answer]) -> Seen:
    x = a[0]
    if x.chunks is None or x.error:
        return Seen(False, x.why())
    mixed = 0
    for e in _chat_events(x.chunks):
        for ch in e.get("choices") or []:
            d = ch.get("delta") or {} if isinstance(ch, dict) else {}
            r = d.get("reasoning_content", d.get("reasoning"))
            if isinstance(r, str) and r and isinstance(d.get("content"), str) and d["content"]:
                mixed += 1
    return Seen(mixed == 0, f"{mixed} delta(s) carry reasoning and content together" if mixed else "reasoning and content in separate deltas")


def text_deltas(surface: str, chunks: list[str]) -> list[str]:
    """The content pieces of a stream as the surface sent them (chat deltas, output_text deltas, text_delta blocks)."""
    adapter = by_name(surface)
    return [x for e in _chat_events(chunks) for x in adapter.text_deltas(e) if x]


def packet_sizes(a: list[Answer]) -> Seen:
    x = a[0]
    if x.chunks is None or x.error:
        return Seen(False, x.why())
    sizes = [len(t) for t in text_deltas(x.surface, x.chunks)]
    if not sizes:
        return Seen(False, "no content deltas")
    value = {"count": len(sizes), "median": statistics.median(sizes), "max": max(sizes), "chars": sum(sizes)}
    return Seen(True, f"{len(sizes)} content deltas, median {value['median']} chars, max {value['max']}", value)


def _mean_packet(v: Any) -> float:
    """Characters per content packet (an older result without `chars`: its median)."""
    return float(v["chars"]) / v["count"] if isinstance(v.get("chars"), (int, float)) and v["count"] else float(v["median"])


def packet_sizes_within(cand: Any, ref: Any) -> tuple[bool, str]:
    """Packets per token like the reference's: none larger than twice its largest (+8 chars), and a mean size within
    4x of its mean (+2 chars). Not their number: a model that writes less sends fewer packets of the same size
    (measured: a KV-quantized server wrote 6 deltas where the reference wrote 48, each a token); a buffering layer
    sends larger ones."""
    try:
        c_mean, r_mean = _mean_packet(cand), _mean_packet(ref)
        ok = cand["max"] <= 2 * ref["max"] + 8 and r_mean / 4 <= c_mean <= 4 * r_mean + 2
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return False, "packet sizes not comparable"
    return ok, (f"packets: {cand['count']} of mean {c_mean:.3g} chars, up to {cand['max']}, vs the reference's "
                f"{ref['count']} of mean {r_mean:.3g}, up to {ref['max']}")


def thinking_off(a: list[Answer]) -> Seen:
    p = a[0].parsed
    if p is None:
        return Seen(False, a[0].why())
    leaked = "<think>" in (p.content or "")
    ok = not p.reasoning and not leaked
    return Seen(ok, "no reasoning with thinking off" if ok else f"reasoning with thinking off: {_short(p.reasoning or p.content)}")


def thinking_on(a: list[Answer]) -> Seen:
    p = a[0].parsed
    if p is None:
        return Seen(False, a[0].why())
    return Seen(bool(p.reasoning), f"reasoning {_short(p.reasoning)}" if p.reasoning else "no reasoning with thinking on")


def effort_orders(a: list[Answer]) -> Seen:
    low, high = a
    if not (low.ok and high.ok):
        return Seen(False, f"a request failed: {(high if low.ok else low).why()}")
    lo, hi = len(low.parsed.reasoning or ""), len(high.parsed.reasoning or "")  # type: ignore[union-attr]
    return Seen(lo < hi, f"reasoning {lo} chars at low effort, {hi} at high" + ("" if lo < hi else ": effort has no effect"))


def prompt_tokens_value(a: list[Answer]) -> Seen:
    """Each request's prompt tokens (None where refused); passes when the text prompts were measured."""
    values = [x.parsed.prompt_tokens if x.parsed else None for x in a]
    measured = [v for v in values if v is not None]
    return Seen(bool(measured), f"prompt_tokens {values}", values)


def equal_where_measured(cand: Any, ref: Any) -> tuple[bool, str]:
    """Every prompt the reference measured measures the same on the candidate."""
    if not isinstance(cand, list) or not isinstance(ref, list) or len(cand) != len(ref):
        return False, f"prompt_tokens {cand} not comparable with the reference's {ref}"
    moved = [f"#{i}: {c} vs {r}" for i, (c, r) in enumerate(zip(cand, ref)) if r is not None and c != r]
    return not moved, (f"prompt_tokens moved from the reference's ({'; '.join(moved)})" if moved else f"prompt_tokens {cand} as the reference's")


def more_prompt_tokens(a: list[Answer]) -> Seen:
    """The second request (with a system prompt / stored history) counts more prompt tokens than the first."""
    base, more = a[0], a[-1]
    if not (base.ok and more.ok):
        return Seen(False, f"a request failed: {(more if base.ok else base).why()}")
    b, m = base.parsed.prompt_tokens, more.parsed.prompt_tokens  # type: ignore[union-attr]
    if b is None or m is None:
        return Seen(False, "no usage.prompt_tokens to compare")
    return Seen(m > b, f"prompt_tokens {m} with it, {b} without" + ("" if m > b else ": it never reached the prompt"))


def longer_system_more_tokens(a: list[Answer]) -> Seen:
    """The request with the longer system prompt counts more prompt tokens than the one with the short system prompt
    (a template's own default system prompt, inserted when none is given, is replaced in both)."""
    short, long_ = a[0], a[-1]
    if not (short.ok and long_.ok):
        return Seen(False, f"a request failed: {(long_ if short.ok else short).why()}")
    s, m = short.parsed.prompt_tokens, long_.parsed.prompt_tokens  # type: ignore[union-attr]
    if s is None or m is None:
        return Seen(False, "no usage.prompt_tokens to compare")
    return Seen(m > s, f"prompt_tokens {m} with the longer system prompt, {s} with the short one"
                + ("" if m > s else ": the system prompt never reached the prompt"))


def same_prompt_tokens(a: list[Answer]) -> Seen:
    x, y = a
    if not (x.ok and y.ok):
        return Seen(False, f"a request failed: {(y if x.ok else x).why()}")
    px, py = x.parsed.prompt_tokens, y.parsed.prompt_tokens  # type: ignore[union-attr]
    return Seen(px is not None and px == py, f"prompt_tokens {py} with system blocks, {px} with the same system string")


def count_tokens_match(a: list[Answer]) -> Seen:
    msg, counted = a
    if not msg.ok:
        return Seen(False, f"the Messages request failed: {msg.why()}")
    body = counted.json()
    n = body.get("input_tokens") if isinstance(body, dict) and counted.status == 200 else None
    if not isinstance(n, int):
        return Seen(False, f"count_tokens: {counted.why()}")
    used = msg.parsed.prompt_tokens  # type: ignore[union-attr]  # input + cache read + cache creation
    return Seen(n == used, f"count_tokens {n}, usage {used}")


def _response_id(x: Answer) -> str | None:
    body = x.json()
    rid = body.get("id") if isinstance(body, dict) else None
    return rid if isinstance(rid, str) else None


def previous_kept(a: list[Answer]) -> Seen:
    first, follow, alone = a
    if _response_id(first) is None:
        return Seen(False, f"the first response has no id: {first.why()}")
    if not follow.ok:
        return Seen(False, f"previous_response_id refused: {follow.why()}")
    return more_prompt_tokens([alone, follow])


def store_false_refused(a: list[Answer]) -> Seen:
    first, follow = a
    if _response_id(first) is None:
        return Seen(False, f"the first response has no id: {first.why()}")
    s = follow.status
    ok = s is not None and 400 <= s < 500
    return Seen(ok, f"previous_response_id of a store:false response: HTTP {s}" + ("" if ok else " (it was stored)"))


def round_trip(a: list[Answer]) -> Seen:
    call, answer_ = a
    if not _calls(call):
        return Seen(False, f"no tool call to answer: {call.why() if not call.ok else _short(call.parsed.content)}")  # type: ignore[union-attr]
    if not answer_.ok:
        return Seen(False, f"the tool result was refused: {answer_.why()}")
    text = answer_.parsed.content  # type: ignore[union-attr]
    pt = answer_.parsed.prompt_tokens  # type: ignore[union-attr]  # the result in the prompt (compared with the reference's)
    return Seen(bool(text) and not _calls(answer_), f"after the tool result: text {_short(text)}, calls {_names(answer_)}, "
                                                   f"prompt_tokens {pt}", [pt])


def terminal_event(a: list[Answer]) -> Seen:
    x = a[0]
    if x.chunks is None:
        return Seen(False, x.why())
    kinds = [e.get("type") for e in _chat_events(x.chunks)]
    ends = [k for k in kinds if k in by_name(x.surface).terminal_events]
    ok = len(ends) == 1 and kinds and kinds[-1] == ends[0] and not x.error
    return Seen(bool(ok), f"terminal events {ends}, last event {kinds[-1] if kinds else None}" + (f" ({x.error})" if x.error else ""))


SURE_LOGPROB = math.log(0.6)
"""A token given at least this probability is never flipped by batch-shape noise (signals.SURE_LOGPROB)."""


def _parting(a: Parsed, b: Parsed) -> tuple[Any, Any] | None:
    """The two records' logprobs at the first token where they part (None: no tokens to tell, or no parting)."""
    la = [t for t in a.logprobs or [] if isinstance(t, dict)]
    lb = [t for t in b.logprobs or [] if isinstance(t, dict)]
    if not la or not lb:
        return None
    for x, y in zip(la, lb):
        if x.get("token") != y.get("token"):
            return x.get("logprob"), y.get("logprob")
    return None


def _cold_against_warm(cold: Answer, warm: Answer) -> Seen:
    """One question's answer asked cold and asked again warm: one text. Where they part, the tokens tell a near-tie
    (batch shape flips it) from a token the model was sure of (state the engine kept: a stale prefix-cache block, a
    speculative decoder's accepted token, a batch's shared-prefix state)."""
    if not (cold.ok and warm.ok):
        return Seen(False, f"a request failed: {(warm if cold.ok else cold).why()}")
    c, w = cold.parsed.content, warm.parsed.content  # type: ignore[union-attr]
    if c == w:
        return Seen(True, f"cold and warm answers equal: {_short(c)}")
    at = _parting(cold.parsed, warm.parsed)  # type: ignore[arg-type]
    if at is not None:
        sure = [v for v in at if isinstance(v, (int, float))]
        if sure and max(sure) < SURE_LOGPROB:
            return Seen(True, f"cold {_short(c)} and warm {_short(w)} part at a near-tie (logprobs {at})")
    return Seen(False, f"the warm answer {_short(w)} differs from the cold one {_short(c)}"
                       + (f" at a token the model was sure of (logprobs {at})" if at else ""))


def cold_equals_warm(a: list[Answer]) -> Seen:
    """The first question's answer asked cold and asked again after another question warmed the shared prefix."""
    cold, _, warm = a
    return _cold_against_warm(cold, warm)


def cold_equals_warm_in_batch(a: list[Answer]) -> Seen:
    """The first question asked cold and alone, then again, twice, in one batch with other questions sharing its prefix
    (sent at once): every warm answer is the cold one's. The request after the cold one is the first of the batch; the
    first question's resends are the answers whose request equals the cold one's."""
    cold = a[0]
    warm = [x for x in a[1:] if x.sent.get("messages") == cold.sent.get("messages")]
    if not warm:
        return Seen(False, "no resend of the first question was answered")
    seen = [_cold_against_warm(cold, w) for w in warm]
    bad = next((x for x in seen if not x.passed), None)
    if bad is not None:
        return Seen(False, f"in the concurrent batch: {bad.detail}")
    return Seen(True, f"{len(warm)} warm answers in the concurrent batch: " + "; ".join(x.detail for x in seen))


CACHED_KEYS = (("prompt_tokens", "prompt_tokens_details"), ("input_tokens", "input_tokens_details"))


def _cached(p: Parsed) -> tuple[Any, Any]:
    """(prompt tokens, cached tokens) as the usage reports them (chat's or Responses' spelling; None where absent)."""
    u = p.usage or {}
    for total, details in CACHED_KEYS:
        if total in u:
            d = u.get(details)
            return u.get(total), d.get("cached_tokens") if isinstance(d, dict) else None
    return None, None


def cached_tokens_counted(a: list[Answer]) -> Seen:
    """No send reports more cached tokens than its prompt has; the value is what the repeat reports cached."""
    bad = [x for x in a if not x.ok]
    if bad:
        return Seen(False, f"a request failed: {bad[0].why()}")
    figures = [_cached(x.parsed) for x in a]  # type: ignore[arg-type]
    over = [f"#{i}: cached {c} > prompt {t}" for i, (t, c) in enumerate(figures)
            if isinstance(t, int) and isinstance(c, int) and not isinstance(c, bool) and c > t]
    repeat = figures[-1][1] if isinstance(figures[-1][1], int) else None
    if over:
        return Seen(False, f"more tokens cached than the prompt has ({'; '.join(over)})", repeat)
    return Seen(True, f"cached_tokens {[c for _, c in figures]} of prompt_tokens {[t for t, _ in figures]}", repeat)


def cached_where_reference_cached(cand: Any, ref: Any) -> tuple[bool, str]:
    """Where the reference's engine reported cached tokens on the repeat, the candidate reports some too."""
    if not isinstance(ref, int) or ref <= 0:
        return True, f"the reference reported no cached tokens on the repeat (candidate: {cand})"
    ok = isinstance(cand, int) and cand > 0
    return ok, f"cached_tokens on the repeat: {cand} vs the reference's {ref}"
