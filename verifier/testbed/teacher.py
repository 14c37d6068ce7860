"""A model's next-token distributions for the scripted server, and the three ways real engines expose them on the
golden's own tokens (teacher forcing, execution/teacher_forcing.py):

  prompt_logprobs  vLLM: chat with `prompt_logprobs: k` and the final assistant message continued
                   (`continue_final_message`, `add_generation_prompt: false`); top-level `prompt_logprobs`, one entry
                   per prompt token (the first null), each {token_id: {logprob, rank, decoded_token}}.
  echo             completions with `echo` + `logprobs: k`: the legacy logprobs block (tokens, token_logprobs,
                   top_logprobs as {token: logprob}, text_offset) over the prompt and the generated token.
  prefill          llama.cpp: a final assistant message is continued; `top_logprobs` on the one generated token.

Tokens are the server's stand-in tokenizer's (wire.py: whitespace-led pieces), so the golden's tokens align. The
distribution at a position depends on the context (the rendered prompt), the prefix and the position; the chosen
token's logprob is the one wire.logprobs_of reports (-0.01 * (i % 7)), the rest of the mass spread over four
alternatives and the tail by weights drawn from a hash. `numerics` perturbs those weights (a stand-in for changed
kernels or quantization: the distribution moves, greedy tokens stay), `batch_noise` moves the decode only (a stand-in
for another batch shape: greedy tokens part, the distribution on the golden's tokens stays), and `methods` says which
ways are offered.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

ALTERNATIVES = 4
NEAR_TIE_AT = 2
"""The token of a generated answer that batch_noise takes the other way (the answer's first near tie)."""
Dist = list[tuple[str, float]]


def pieces(text: str) -> list[str]:
    """The scripted server's tokens of a generated text (as wire.logprobs_of splits it)."""
    return re.findall(r"\s*\S+", text)


def render(messages: list[dict[str, Any]]) -> str:
    """The ChatML prompt of a conversation with the generation prompt (server.CHATML, in Python): the context key."""
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(f"<|im_start|>{m.get('role')}\n{c or ''}<|im_end|>\n")
    return "".join(out) + "<|im_start|>assistant\n"


def _unit(*parts: Any) -> float:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


@dataclass(frozen=True)
class Teacher:
    """The server's model: which teacher-forcing methods it offers and how far its numerics moved."""

    methods: tuple[str, ...] = ("prompt_logprobs", "echo", "prefill")
    numerics: float = 0.0
    """0: the reference's distributions. Larger: the alternatives' weights move by up to exp(±numerics) and the
    chosen token's probability drops (its logprob by 0.1 x numerics): a faithful stand-in for a numerics change."""
    preamble: str = ""
    """A stand-in for a wrong chat template: the server renders this before every conversation, so the context the
    model sees (its distributions) and usage.prompt_tokens are not the golden's, while the weights are."""

    split_words: bool = False
    """A stand-in for a changed tokenizer: a text the server is given (a continued assistant message, an echoed
    prompt) is tokenized with every piece over three characters split in two, so the golden's own text does not come
    back as the golden's tokens (and a prefix takes more prompt tokens)."""

    batch_noise: float = 0.0
    """A stand-in for a change of batch shape (more slots at concurrency): the decode's arithmetic moves, the model
    does not. A generated answer (not a forced request) takes its token NEAR_TIE_AT the other way (the runner-up
    alternative), so greedy outputs part from the golden's, and its reported logprobs drop by this much per token
    (drift on the shared prefix); requests forced on the golden's tokens still see the reference's distributions."""

    def decoded(self, context: str, text: str) -> str:
        """The text the decode generates where the model's own answer is `text`: with batch_noise, the near tie at
        NEAR_TIE_AT flipped to the runner-up."""
        toks = pieces(text)
        if not self.batch_noise or len(toks) <= NEAR_TIE_AT:
            return text
        runner_up = self.distribution(context, toks[:NEAR_TIE_AT], toks[NEAR_TIE_AT])[1][0]
        return "".join([*toks[:NEAR_TIE_AT], runner_up, *toks[NEAR_TIE_AT + 1:]])

    def tokens(self, text: str) -> list[str]:
        """How the server tokenizes a text it is given."""
        out = pieces(text)
        if self.split_words:
            out = [half for p in out for half in ((p[:len(p) // 2], p[len(p) // 2:]) if len(p.strip()) > 3 else (p,))]
        return out

    def context(self, messages: list[dict[str, Any]]) -> str:
        return self.preamble + render(messages)

    @property
    def preamble_tokens(self) -> int:
        return len(re.findall(r"\w+|[^\w\s]", self.preamble))

    def distribution(self, context: str, prefix: list[str], chosen: str) -> Dist:
        """The top of the next-token distribution after `prefix`, chosen token first, then the alternatives."""
        i = len(prefix)
        lp = -0.01 * (i % 7) - 0.1 * self.numerics
        rest = max(1.0 - math.exp(lp), 1e-6)  # position 0 is certain (logprob 0): a sliver of mass for the rest
        key = (context, "".join(prefix[-3:]), i)
        w = [0.5 + _unit(*key, j) for j in range(ALTERNATIVES + 1)]  # the last weight: the tail (the rest of the vocabulary)
        if self.numerics:
            w = [x * math.exp(self.numerics * (2 * _unit(*key, j, "numerics") - 1)) for j, x in enumerate(w)]
        total = sum(w)
        alts = [(f" alt{j}", math.log(rest * x / total)) for j, x in enumerate(w[:ALTERNATIVES])]
        alts.sort(key=lambda a: -a[1])
        return [(chosen, round(lp, 6)), *((t, round(v, 6)) for t, v in alts)]

    def entries(self, context: str, text: str, k: int) -> list[dict[str, Any]]:
        """`logprobs.content` of a generated text: each token with its logprob and the top k."""
        toks = pieces(text)
        out = []
        for i, t in enumerate(toks):
            d = self.distribution(context, toks[:i], t)
            d = [(a, round(v - self.batch_noise, 6)) if j == 0 else (a, v) for j, (a, v) in enumerate(d) if j == 0 or a != t]
            out.append({"token": t, "logprob": d[0][1], "top_logprobs": [{"token": a, "logprob": v} for a, v in d[:k]]})
        return out


def _k(x: Any, default: int = 0) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 20 else default


def _next_token(reply_text: str, prefix: list[str]) -> str:
    """What the model generates after `prefix`: its own answer's next token while the prefix's text is its answer's
    start (up to a token boundary of its own), whatever tokens the prefix was cut into."""
    text, at = "".join(prefix), ""
    for tok in pieces(reply_text):
        if at == text:
            return tok
        at += tok
        if not text.startswith(at):
            break
    return " end"


def chat_answer(teacher: Teacher, req: dict[str, Any], reply_text: Callable[[dict[str, Any]], str],
                prompt_tokens: Callable[[dict[str, Any]], int]) -> dict[str, Any] | None:
    """A chat request forced by prompt_logprobs or prefill, answered as vLLM / llama.cpp do; None when it is not one
    the teacher offers (the server then answers as ever: the flags are ignored, a final assistant message is not
    continued)."""
    msgs = req.get("messages") or []
    if not msgs or not isinstance(msgs[-1], dict) or msgs[-1].get("role") != "assistant":
        return None
    head = {**req, "messages": msgs[:-1]}
    context = teacher.context(msgs[:-1])
    prefix = teacher.tokens(str(msgs[-1].get("content") or ""))
    base = prompt_tokens(head) + teacher.preamble_tokens
    own = reply_text(head)
    nxt = _next_token(own, prefix)
    dist = teacher.distribution(context, prefix, nxt)
    body: dict[str, Any] = {"id": "chatcmpl-forced", "object": "chat.completion", "created": 0, "model": req.get("model", "test")}
    k = _k(req.get("top_logprobs"), 0)
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": nxt}, "finish_reason": "length"}
    if req.get("logprobs"):
        choice["logprobs"] = {"content": [{"token": nxt, "logprob": dist[0][1],
                                           "top_logprobs": [{"token": t, "logprob": v} for t, v in dist[:k]]}]}
    if req.get("prompt_logprobs") is not None and "prompt_logprobs" in teacher.methods:
        pk = _k(req.get("prompt_logprobs"), 1)
        entries: list[Any] = [None] + [{"1": {"logprob": -1.0, "rank": 1, "decoded_token": "x"}} for _ in range(base - 1)]
        for i, tok in enumerate(prefix):
            d = teacher.distribution(context, prefix[:i], _next_token(own, prefix[:i]))
            top = {str(1000 + j): {"logprob": v, "rank": j + 1, "decoded_token": t} for j, (t, v) in enumerate(d[:pk])}
            if tok not in {t for t, _ in d[:pk]}:  # the prompt's own token is always listed, with its rank
                top["999"] = {"logprob": -9.0, "rank": pk + 1, "decoded_token": tok}
            entries.append(top)
        body["prompt_logprobs"] = entries
    elif "prefill" not in teacher.methods:
        return None
    body["choices"] = [choice]
    body["usage"] = {"prompt_tokens": base + len(prefix), "completion_tokens": 1, "total_tokens": base + len(prefix) + 1}
    return body


def echo_answer(teacher: Teacher, req: dict[str, Any], reply_text: Callable[[dict[str, Any]], str]) -> dict[str, Any] | None:
    """A completions request with `echo` and `logprobs` over a ChatML prompt, answered with the legacy logprobs block
    over prompt and generated token; None when echo is not offered (or the prompt is not ChatML)."""
    prompt = req.get("prompt")
    if "echo" not in teacher.methods or not req.get("echo") or not isinstance(prompt, str):
        return None
    cut = prompt.rfind("<|im_start|>assistant\n")
    if cut < 0:
        return None
    cut += len("<|im_start|>assistant\n")
    context, text = teacher.preamble + prompt[:cut], prompt[cut:]
    head_tokens = re.findall(r"\w+|[^\w\s]", context) or ["<s>"]
    prefix = teacher.tokens(text)
    users = re.findall(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", context, re.S)
    own = reply_text({"model": req.get("model"), "messages": [{"role": "user", "content": users[-1] if users else ""}]})
    k = _k(req.get("logprobs"), 1)
    toks: list[str] = list(head_tokens)
    lps: list[float | None] = [None] + [-1.0] * (len(head_tokens) - 1)
    tops: list[dict[str, float] | None] = [None] + [{"x": -1.0}] * (len(head_tokens) - 1)
    for i, tok in enumerate(prefix + [_next_token(own, prefix)]):
        d = teacher.distribution(context, prefix[:i], _next_token(own, prefix[:i]))
        top = dict(d[:k])
        toks.append(tok)
        lps.append(top.get(tok, -9.0))
        tops.append({**top, **({} if tok in top else {tok: -9.0})})
    offsets, at = [], 0
    for t in toks:
        offsets.append(at)
        at += len(t)
    return {"id": "cmpl-forced", "object": "text_completion", "model": req.get("model", "test"),
            "choices": [{"index": 0, "text": prompt + toks[-1], "finish_reason": "length",
                         "logprobs": {"tokens": toks, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}}],
            "usage": {"prompt_tokens": len(toks) - 1, "completion_tokens": 1, "total_tokens": len(toks)}}
