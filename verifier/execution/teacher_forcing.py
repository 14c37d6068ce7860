"""Teacher forcing through the serving API: the candidate's distribution at the golden's own output positions.

A gate's run ends with this pass (app/collect.py): for each greedy golden record it asks the endpoint for its top-k
distribution at the positions of the golden's output tokens, given the golden's own prefix, so the numerics are
compared on the tokens the reference produced, whatever the candidate's greedy path did (DESIGN.md, "Attribution";
docs/reference/attribution.md, "Teacher-forced distance"). The method is detected once per run, best first:

  prompt_logprobs  chat with the golden's output as the final assistant message, continued (vLLM
                   `continue_final_message`, `add_generation_prompt: false`), `prompt_logprobs: k`, `max_tokens: 1`:
                   one request per sample, every position.
  echo             completions with the rendered prompt plus the golden's output, `echo` + `logprobs: k`, `max_tokens: 1`.
  prefill          chat with the golden's output up to position i as the final assistant message, `max_tokens: 1`,
                   `top_logprobs: k`: K positions per sample (llama.cpp, whose completions return logprobs for
                   generated tokens only).
  none             `state: unavailable` with the reason; the numerics keep the other signals.

Everything sent and received is kept in teacher_forced.jsonl (scrubbed as every journal line is); what the
comparison reads of it is a pure function of that file (`read`), so a comparison can be made again offline.
Tokens must align: the candidate's tokenization of the golden's text must reproduce the golden's tokens (token
strings for prompt_logprobs and echo, prompt-token counts for prefill); a mismatch is recorded, never realigned.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from verifier import jsonsafe
from verifier import safewrite
from verifier.execution import layout
from verifier.judge.contract import comparable
from verifier.surfaces.registry import REFERENCE_MODE
from verifier.types import Exchange

if TYPE_CHECKING:
    from verifier.wire.endpoint import Endpoint

FILE = layout.TEACHER_FORCED
METHODS = ("prompt_logprobs", "echo", "prefill")
"""Best first: one request per sample for the first two, K for prefill."""
CHOICES = ("auto", "on", "off", *METHODS)
"""What `--teacher-forcing` accepts. auto (a gate's default): detect the best method when the golden holds
teacher-forced margins, else skip the pass (state `skipped`: nothing sent, the comparison as before, so goldens
calibrated before teacher forcing keep gating as they did); on (calibrate's default): detect and measure whatever the
golden holds (uncalibrated: judged against 0); off: no pass; a method name: insist on that method."""
DEFAULT_POSITIONS = 4
"""Prefill positions per sample. A greedy smoke record is ~5-20 tokens; each prefill request processes the tokens
since the previous position (the prefix cache keeps the rest) and decodes one, so 4 positions cost about one greedy
generation of the record in processed tokens, plus 4 small requests."""
TOP_K = 5
"""Alternatives asked for per position (observations.MAX_TOP: what a golden keeps)."""


@dataclass(frozen=True)
class Target:
    """One greedy golden record to force: which sample, and its output tokens."""

    suite: str
    sample_id: str
    tokens: tuple[str, ...]
    """The golden's comparable output tokens, in order: their concatenation is the text forced."""


@dataclass(frozen=True)
class Forcing:
    """What a gate's run forces: the golden's greedy records, how, and at how many prefill positions."""

    targets: tuple[Target, ...]
    method: str = "auto"
    """One of CHOICES."""
    calibrated: bool = False
    """The golden holds teacher-forced margins (`auto` measures only then)."""
    positions: int = DEFAULT_POSITIONS
    """Prefill positions per sample (the other methods read every position)."""


def targets_of(rows: Iterable[Any], greedy: bool) -> tuple[Target, ...]:
    """The golden's records to force: chat, epoch 0, with output tokens, from a greedy reference (temperature 0, or
    records that kept their alternatives, which observations keeps on greedy records only). A record whose tokens
    cannot be concatenated back into its text (a special token inside the output, a token that is not text) is left
    out: its positions would not be the golden's."""
    out = []
    for o in rows:
        if o.mode != REFERENCE_MODE or o.epoch != 0 or not o.logprobs or not (greedy or o.top_logprobs):
            continue
        kept = comparable(o.logprobs)
        if not kept or any(not isinstance(t, str) for _, t, _ in kept):
            continue
        if any(i != j for j, (i, _, _) in enumerate(kept)):
            continue  # a special token dropped inside the output: the concatenation is not the text generated
        out.append(Target(o.suite, o.sample_id, tuple(t for _, t, _ in kept)))
    return tuple(out)


def tokens_digest(tokens: Sequence[str]) -> str:
    """What a forced row records of the golden tokens it forced: a comparison against another golden (other tokens
    for the same sample) leaves the row out instead of reading it as a tokenizer change."""
    return hashlib.sha256(safewrite.canonical(list(tokens)).encode()).hexdigest()


def prefill_positions(n: int, k: int) -> list[int]:
    """K positions spread evenly over tokens 1..n-1, the last included (all of them when there are no more than k).
    Position 0 is left out: its prefix is an empty assistant message, which llama-server does not continue as it
    continues a non-empty one (measured: 4 prompt tokens fewer than the generation prompt, and an end token)."""
    if n < 2:
        return []
    if n - 1 <= k:
        return list(range(1, n))
    if k <= 1:
        return [n - 1]
    return sorted({1 + round(j * (n - 2) / (k - 1)) for j in range(k)})


# --------------------------------------------------------------------------- requests


def _base(chat_request: Mapping[str, Any]) -> dict[str, Any]:
    """The run's own chat request of this sample (its messages, tools and options), made a one-token greedy request.
    `response_format` is dropped: a grammar constrains generated tokens only and would restart at the forced prefix;
    the reference's reruns are forced the same way, so the calibrated margin carries whatever that changes."""
    body = {k: v for k, v in chat_request.items() if k not in ("stream", "stream_options", "n", "logprobs", "top_logprobs",
                                                               "max_tokens", "max_completion_tokens", "response_format")}
    body.update(temperature=0.0, max_tokens=1)
    return body


def prompt_logprobs_request(chat_request: Mapping[str, Any], text: str) -> dict[str, Any]:
    body = _base(chat_request)
    body["messages"] = [*chat_request.get("messages", []), {"role": "assistant", "content": text}]
    body.update(continue_final_message=True, add_generation_prompt=False, prompt_logprobs=TOP_K, logprobs=True, top_logprobs=1)
    return body


def prefill_request(chat_request: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    body = _base(chat_request)
    body["messages"] = [*chat_request.get("messages", []), {"role": "assistant", "content": prefix}]
    body.update(continue_final_message=True, add_generation_prompt=False, logprobs=True, top_logprobs=TOP_K)
    return body


def echo_request(completion_body: Mapping[str, Any], text: str) -> dict[str, Any]:
    body = _base(completion_body)
    body.update(prompt=str(completion_body.get("prompt", "")) + text, echo=True, logprobs=TOP_K)
    return body


# --------------------------------------------------------------------------- reading answers (pure)

Top = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Forced:
    """The candidate's distributions at one golden record's positions, as read from its exchanges."""

    suite: str
    sample_id: str
    method: str
    positions: tuple[int, ...] = ()
    """Indices into the golden's comparable tokens."""
    top: tuple[Top, ...] = ()
    """The candidate's listed alternatives at each position: (token, logprob)."""
    aligned: bool = True
    """Whether the candidate's tokenization of the golden's text reproduced the golden's tokens."""
    misaligned_at: int | None = None
    """The first position where it did not."""
    infra: str | None = None
    """An infra error or an unreadable answer: nothing measured for this record."""


def _body(ex: Mapping[str, Any]) -> Any:
    if ex.get("error") or ex.get("status") != 200 or not isinstance(ex.get("body"), str):
        return None
    try:
        return jsonsafe.loads(ex["body"])
    except (ValueError, RecursionError):
        return None


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _choice(doc: Any) -> Mapping[str, Any] | None:
    ch = doc.get("choices") if isinstance(doc, dict) else None
    return ch[0] if isinstance(ch, list) and ch and isinstance(ch[0], dict) else None


def _prompt_entries(doc: Any) -> list[Any] | None:
    """vLLM's `prompt_logprobs`: top level on chat, on the choice on completions."""
    pl = doc.get("prompt_logprobs") if isinstance(doc, dict) else None
    if pl is None:
        pl = (_choice(doc) or {}).get("prompt_logprobs")
    return pl if isinstance(pl, list) else None


def _vllm_top(entry: Any) -> tuple[Top, set[str]]:
    """One prompt_logprobs entry ({token_id: {logprob, rank, decoded_token}}): its alternatives and token strings."""
    if not isinstance(entry, dict):
        return (), set()
    kept = _pairs((v.get("decoded_token"), v.get("logprob")) for v in entry.values() if isinstance(v, dict))
    return kept, {t for t, _ in kept}


def _pairs(pairs: Iterable[tuple[Any, Any]]) -> Top:
    """(token, logprob) pairs with a string token and a finite logprob; the rest left out."""
    return tuple((t, float(lp)) for t, lp in pairs if isinstance(t, str) and _finite(lp))


def read_prompt_logprobs(doc: Any, tokens: Sequence[str]) -> tuple[list[Top], int | None] | None:
    """(per-position alternatives, first misaligned position) from a prompt_logprobs answer; None when the answer has no
    prompt logprobs covering the text (the method is not offered)."""
    entries = _prompt_entries(doc)
    n = len(tokens)
    if entries is None or len(entries) < n + 1:
        return None
    tail = entries[len(entries) - n:]
    tops: list[Top] = []
    bad = None
    for i, (entry, tok) in enumerate(zip(tail, tokens)):
        top, names = _vllm_top(entry)
        if bad is None and tok not in names:
            bad = i
        tops.append(top)
    return tops, bad


def read_echo(doc: Any, tokens: Sequence[str]) -> tuple[list[Top], int | None] | None:
    """The same from a completions answer with `echo` (OpenAI legacy logprobs: tokens, top_logprobs as dicts); the
    generated token (max_tokens 1) is the last entry."""
    lp = (_choice(doc) or {}).get("logprobs")
    if not isinstance(lp, dict):
        return None
    toks, tops = lp.get("tokens"), lp.get("top_logprobs")
    n = len(tokens)
    if not isinstance(toks, list) or not isinstance(tops, list) or len(toks) != len(tops) or len(toks) < n + 2:
        return None  # an engine that returns only the generated token's logprobs: not offered
    lo = len(toks) - 1 - n
    out: list[Top] = []
    bad = None
    for i in range(n):
        t, alts = toks[lo + i], tops[lo + i]
        if bad is None and t != tokens[i]:
            bad = i
        out.append(tuple((k, float(v)) for k, v in alts.items() if isinstance(k, str) and _finite(v)) if isinstance(alts, dict) else ())
    return out, bad


def read_prefill(doc: Any) -> tuple[Top, int | None] | None:
    """(the first generated token's alternatives, usage.prompt_tokens) of a prefill answer; None without logprobs."""
    ch = _choice(doc)
    content = ((ch or {}).get("logprobs") or {}).get("content") if isinstance((ch or {}).get("logprobs"), dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    alts = first.get("top_logprobs")
    if not isinstance(alts, list):
        return None
    top = _pairs((a.get("token"), a.get("logprob")) for a in alts if isinstance(a, dict))
    usage = doc.get("usage") if isinstance(doc, dict) else None
    pt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return top, pt if isinstance(pt, int) and not isinstance(pt, bool) else None


def forced_of(row: Mapping[str, Any], tokens: Sequence[str]) -> Forced:
    """One teacher_forced.jsonl row (a record's exchanges) -> what the candidate said at its positions."""
    suite, sid, method = str(row.get("suite")), str(row.get("sample_id")), str(row.get("method"))
    exchanges = [e for e in row.get("exchanges") or [] if isinstance(e, dict)]
    positions = [p for p in row.get("positions") or [] if isinstance(p, int) and 0 <= p < len(tokens)]
    if not exchanges:
        if method == "prefill" and row.get("positions") == []:
            return Forced(suite, sid, method)  # a one-token output: no prefill position to force, nothing measured
        return Forced(suite, sid, method, infra="no_exchange")
    for e in exchanges:
        if e.get("error") or e.get("status") != 200:
            return Forced(suite, sid, method, infra=str(e.get("error") or f"http_{e.get('status')}"))
    if method in ("prompt_logprobs", "echo"):
        doc = _body(exchanges[0])
        got = (read_prompt_logprobs if method == "prompt_logprobs" else read_echo)(doc, tokens)
        if got is None:
            return Forced(suite, sid, method, infra="unreadable")
        return Forced(suite, sid, method, tuple(range(len(tokens))), tuple(got[0]), got[1] is None, got[1])
    if method == "prefill":
        if len(positions) != len(exchanges):
            return Forced(suite, sid, method, infra="unreadable")
        tops: list[Top] = []
        counts: list[int | None] = []
        for e in exchanges:
            one = read_prefill(_body(e))
            if one is None:
                return Forced(suite, sid, method, infra="unreadable")
            tops.append(one[0])
            counts.append(one[1])
        # The prefix of position p is the golden's first p tokens: the prompt grows by exactly the tokens in between.
        bad = None
        if all(c is not None for c in counts):
            for j in range(1, len(positions)):
                if counts[j] - counts[0] != positions[j] - positions[0]:  # type: ignore[operator]
                    bad = positions[j]
                    break
        return Forced(suite, sid, method, tuple(positions), tuple(tops), bad is None, bad)
    return Forced(suite, sid, method, infra="unknown_method")


def read(run_dir: Path) -> Iterator[dict[str, Any]]:
    """teacher_forced.jsonl's rows, one at a time (memory follows one record, not the file); none when the run made
    no pass. Read through safeio like every file of a run."""
    return layout.read_jsonl(Path(run_dir) / FILE, within=Path(run_dir))


# --------------------------------------------------------------------------- the pass


@dataclass
class _Tally:
    requests: int = 0
    errors: int = 0
    records: int = 0
    fd: int | None = None
    """teacher_forced.jsonl, written a record at a time as each is forced (never the whole pass in memory)."""

    def write(self, row: dict[str, Any]) -> None:
        """One record's line, scrubbed of the run's secrets as every journal line is."""
        assert self.fd is not None
        data = (safewrite.scrubbed_line(row) + "\n").encode("utf-8", "backslashreplace")
        while data:
            data = data[os.write(self.fd, data):]
        self.records += 1


def _exchange(t: Target, mode: str, body: dict[str, Any], r: Any) -> dict[str, Any]:
    return Exchange(t.suite, t.sample_id, 0, mode, body, r.status, r.body, r.chunks, r.error, r.latency_ms, r.attempts).to_json()


async def _send(ep: "Endpoint", tally: _Tally, t: Target, mode: str, body: dict[str, Any], probing: bool) -> dict[str, Any]:
    r = await ep.send(mode, body, retries=0 if probing else None)  # detecting: an error is the answer, not retried
    tally.requests += 1
    tally.errors += r.error is not None
    return _exchange(t, mode, body, r)


async def _completion_body(chat_request: Mapping[str, Any], template: str | None) -> dict[str, Any] | None:
    if not template:
        return None
    from verifier.wire import dualpath

    try:
        return await asyncio.to_thread(dualpath.completion_body, dict(chat_request), template)
    except (ValueError, OSError):  # a template that does not render (TemplateUnavailable): echo is not available
        return None


async def _force(ep: "Endpoint", tally: _Tally, method: str, t: Target, request: Mapping[str, Any],
                 template: str | None, positions: int, probing: bool = False) -> dict[str, Any]:
    """One record's exchanges by `method`, as one teacher_forced.jsonl row."""
    text = "".join(t.tokens)
    row: dict[str, Any] = {"suite": t.suite, "sample_id": t.sample_id, "method": method, "tokens_sha256": tokens_digest(t.tokens)}
    if method == "prompt_logprobs":
        row["exchanges"] = [await _send(ep, tally, t, "chat", prompt_logprobs_request(request, text), probing)]
    elif method == "echo":
        cb = await _completion_body(request, template)
        row["exchanges"] = [] if cb is None else [await _send(ep, tally, t, "completions", echo_request(cb, text), probing)]
    else:
        pos = prefill_positions(len(t.tokens), positions)
        row["positions"] = pos
        exchanges = []
        for p in pos:  # in order: the engine's prefix cache makes each next position cheap
            exchanges.append(await _send(ep, tally, t, "chat", prefill_request(request, "".join(t.tokens[:p])), probing))
            if exchanges[-1]["error"] is not None:
                break
        row["exchanges"] = exchanges
    return row


def _offered(method: str, row: Mapping[str, Any], t: Target) -> str | None:
    """None when the answer shows the method works here, else why not (one phrase)."""
    ex = (row.get("exchanges") or [None])[0]
    if not isinstance(ex, dict):
        return "no chat template to render the prompt with" if method == "echo" else "not sent"
    if ex.get("error"):
        return f"infra error ({ex['error']})"
    if ex.get("status") != 200:
        return f"refused (HTTP {ex.get('status')})"
    f = forced_of(row, t.tokens)
    if f.infra is not None:
        return {"prompt_logprobs": "no prompt_logprobs in the answer", "echo": "no echoed prompt logprobs in the answer",
                "prefill": "no top_logprobs on the continued assistant message"}.get(method, f.infra)
    if not any(f.top):
        return "no alternatives (top_logprobs) at the forced positions"
    if method == "prefill":
        # A server that ignores the final assistant message (or closes it and starts a new turn) answers the question
        # afresh: the golden's next token is then rarely among its alternatives. Every position's prefix is a
        # non-empty start of the golden's output (prefill_positions), so each one is a check.
        hits = sum(any(tok == t.tokens[p] for tok, _ in top) for p, top in zip(f.positions, f.top))
        if hits * 2 < len(f.positions):
            return "the final assistant message is not continued (the golden's next token is not among the alternatives)"
    return None


async def run(ep: "Endpoint", forcing: Forcing, requests: Mapping[tuple[str, str], Mapping[str, Any]],
              template: str | None, run_dir: Path, quiet: bool = True) -> dict[str, Any]:
    """Detect the method on one target (the longest output), force every target, write teacher_forced.jsonl; returns run.json's
    `teacher_forcing` block (method, state, reason, requests, errors, records, positions, wall_s).

    `requests`: the run's own chat request per (suite, sample id) (epoch 0): the context forced is exactly the one
    this endpoint was sent."""
    t0 = time.perf_counter()
    tally = _Tally()
    targets = [t for t in forcing.targets if (t.suite, t.sample_id) in requests]
    block: dict[str, Any] = {"method": None, "state": "unavailable", "reason": None, "requests": 0, "errors": 0,
                             "records": 0, "positions": forcing.positions}
    if forcing.method == "off":
        return {**block, "state": "off", "reason": "--teacher-forcing off"}
    if forcing.method == "auto" and not forcing.calibrated:
        return {**block, "state": "skipped", "reason": "the golden holds no teacher-forced margins (calibrated before teacher forcing, "
                "or from reruns without the pass): `verifier calibrate GOLDEN --base-url ...` measures them; "
                "`--teacher-forcing on` measures anyway, judged uncalibrated"}
    if not targets:
        return {**block, "reason": "no greedy golden record with output tokens was sent in this run"}
    # Detection is decided on one record: the longest output (the first of equals), since a short one may leave a
    # method nothing to show (a one-token answer has no prefill position; greedy answers of a few digits are common).
    first = max(targets, key=lambda t: len(t.tokens))
    candidates = METHODS if forcing.method in ("auto", "on") else (forcing.method,)
    tried: list[str] = []
    method = None
    first_row = None
    for m in candidates:
        row = await _force(ep, tally, m, first, requests[(first.suite, first.sample_id)], template, forcing.positions, probing=True)
        why = _offered(m, row, first)
        if why is None:
            method, first_row = m, row
            break
        tried.append(f"{m}: {why}")
    if method is None or first_row is None:
        block.update(reason="; ".join(tried), requests=tally.requests, errors=tally.errors, wall_s=round(time.perf_counter() - t0, 3))
        return block
    async def force(t: Target) -> None:
        tally.write(await _force(ep, tally, method, t, requests[(t.suite, t.sample_id)], template, forcing.positions))

    path = Path(run_dir) / FILE
    if path.exists() or path.is_symlink():
        path.unlink()  # a pass of this run made before (a gate's earlier look): replaced, never appended to
    tally.fd = safewrite.create_new(path)
    try:
        tally.write(first_row)
        await asyncio.gather(*(force(t) for t in targets if t is not first))
    finally:
        os.close(tally.fd)
        tally.fd = None
    block.update(method=method, state="measured", reason="; ".join(tried) or None, requests=tally.requests,
                 errors=tally.errors, records=tally.records, wall_s=round(time.perf_counter() - t0, 3))
    if not quiet:
        import sys

        print(f"teacher forcing: {method}, {tally.records} records, {tally.requests} requests", file=sys.stderr)
    return block
