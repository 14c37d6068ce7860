"""The context-truncation probe: the same long prompt at growing lengths, with the fact the answer needs at its very start.

A server that silently drops the start of a long prompt (a smaller context than the
reference, left truncation on, a gateway cutting bodies) answers without an error:
only `usage.prompt_tokens` (capped) or the lost answer shows it. Refusing a prompt
that does not fit (HTTP 400, llama.cpp's `exceed_context_size_error`) is honest: that
is `unsupported`, never a regression.

The candidate is sent exactly the lengths the golden was (a gate reads them from the
golden), so a smaller context cannot hide by probing less. A run of its own caps the
lengths at the context the server reports (llama.cpp's /props n_ctx).
"""

from __future__ import annotations

from typing import Any

from verifier.wire.endpoint import Endpoint
from verifier.judge.parse import MalformedBody, parse_body

from verifier.execution.layout import CONTEXT as FILE
"""Where a run keeps the probe's results; a golden keeps them as `context_probe`."""
LENGTHS = (1000, 2000, 4000, 8000)
"""Target prompt sizes in tokens (approximate: about one token per word or punctuation mark)."""
RESERVE = 128
"""Tokens left free below the server's context: the chat template's markup and the answer."""
MAX_TOKENS = 16
CODE_WORD = "PELICAN"
FACT = f"Remember this: the secret code word is {CODE_WORD}.\n\n"
FILLER = "The river flows past the old mill and the farmers bring their grain to town on market day. "
FILLER_TOKENS = 20
QUESTION = "\n\nQuestion: what is the secret code word given at the very start? Answer with the code word only."
CAPPED = 0.9
"""prompt_tokens below this fraction of the golden's for the same prompt: the server counted a cut prompt."""


def prompt(target_tokens: int) -> list[dict[str, str]]:
    """One user message of about `target_tokens` tokens: the fact, filler, the question."""
    reps = max(1, (target_tokens - 40) // FILLER_TOKENS)
    return [{"role": "user", "content": FACT + FILLER * reps + QUESTION}]


def lengths_for(n_ctx: int | None, lengths: tuple[int, ...] = LENGTHS) -> list[int]:
    """The probe lengths that fit a context of n_ctx tokens (all of them when unknown); the last one fills it."""
    if not n_ctx:
        return list(lengths)
    room = n_ctx - RESERVE
    fit = [x for x in lengths if x <= room]
    if len(fit) < len(lengths) and room > (fit[-1] if fit else 0):
        fit.append(room)  # e.g. 8000 does not fit 8192 with room to answer: probe at 8064 instead
    return fit


def n_ctx_of(server_info: dict[str, Any]) -> int | None:
    """The per-slot context llama.cpp reports in /props; None elsewhere."""
    props = server_info.get("props") if isinstance(server_info, dict) else None
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n if isinstance(n, int) and n > 0 else None


def _error_type(body: str | None) -> str | None:
    from verifier.jsonsafe import loads

    try:
        err = loads(body or "").get("error")
    except (ValueError, AttributeError):
        return None
    return err.get("type") if isinstance(err, dict) else None


def result(target: int, status: int | None, body: str | None) -> dict[str, Any]:
    """One length's outcome: status, prompt_tokens, whether the answer survived."""
    out: dict[str, Any] = {"target": target, "status": status, "prompt_tokens": None, "answered": None}
    if status != 200:
        out["error_type"] = _error_type(body)
        return out
    try:
        p = parse_body(body)
    except MalformedBody:
        out["status"] = None  # a broken 200 is an infra failure here, not an answer
        return out
    out["prompt_tokens"] = p.prompt_tokens
    out["answered"] = CODE_WORD.lower() in (p.content or "").lower()
    return out


async def run(ep: Endpoint, model: str, extra_body: dict[str, Any], lengths: list[int]) -> dict[str, Any]:
    """Send the probe at each length, shortest first; the document written to context.json."""
    results = []
    for n in lengths:
        body = {**extra_body, "model": model, "messages": prompt(n), "temperature": 0.0, "max_tokens": MAX_TOKENS}
        r = await ep.send("chat", body)
        results.append(result(n, r.status, r.body))
    return {"lengths": list(lengths), "max_tokens": MAX_TOKENS, "results": results}


def _classify(g: dict[str, Any], c: dict[str, Any]) -> str:
    """One length, golden vs candidate: ok | truncated | lost | unsupported | infra | no_reference."""
    if g.get("status") != 200:
        return "no_reference"
    if c.get("status") is not None and 400 <= c["status"] < 500:
        return "unsupported"
    if c.get("status") != 200:
        return "infra"
    gp, cp = g.get("prompt_tokens"), c.get("prompt_tokens")
    if isinstance(gp, int) and isinstance(cp, int) and cp < CAPPED * gp:
        return "truncated"
    if g.get("answered") and not c.get("answered"):
        return "lost"
    return "ok"


def verdict(candidate: dict[str, Any], golden: dict[str, Any] | None) -> dict[str, Any] | None:
    """The evidence item (signal `context_truncated`), or None when there is nothing to compare.

    Capped prompt_tokens is decisive. A lost answer alone is too (a model change seldom loses
    a fact at one length and every longer one while keeping it below), but only with that
    shape: lost everywhere, or here and there, looks like the model, and stays inconclusive.
    """
    if not golden or not golden.get("results"):
        return None
    gby = {r["target"]: r for r in golden["results"]}
    rows = [(c["target"], _classify(gby[c["target"]], c), c, gby[c["target"]]) for c in candidate.get("results", [])
            if c["target"] in gby]
    kinds = [k for _, k, _, _ in rows]
    start = next((i for i, k in enumerate(kinds) if k in ("truncated", "lost")), None)
    detail = "; ".join(f"{t}: {_words(k, c, g)}" for t, k, c, g in rows)
    if start is not None:
        tail = kinds[start:]
        decisive = "truncated" in kinds or (start > 0 and all(k in ("lost", "truncated", "unsupported") for k in tail))
        v = "fail" if decisive else "inconclusive"
        return {"signal": "context_truncated", "suite": "*", "verdict": v, "length": rows[start][0],
                "summary": f"context_truncated: long prompts silently cut from about {rows[start][0]} tokens ({detail})"}
    if "unsupported" in kinds:
        first = rows[kinds.index("unsupported")][0]
        return {"signal": "context_truncated", "suite": "*", "verdict": "pass", "length": None, "unsupported_from": first,
                "summary": f"context_truncated: none; prompts of about {first}+ tokens are refused (unsupported, not a regression) ({detail})"}
    v = "inconclusive" if "infra" in kinds else "pass"
    return {"signal": "context_truncated", "suite": "*", "verdict": v, "length": None,
            "summary": f"context_truncated: none at {', '.join(str(t) for t, *_ in rows)} tokens ({detail})"}


def _words(kind: str, c: dict[str, Any], g: dict[str, Any]) -> str:
    if kind == "unsupported":
        return f"HTTP {c['status']} {c.get('error_type') or ''}".strip()
    if kind in ("infra", "no_reference"):
        return f"HTTP {c.get('status')} (golden {g.get('status')})"
    return (f"prompt_tokens {c.get('prompt_tokens')} vs golden {g.get('prompt_tokens')}, "
            f"answer {'kept' if c.get('answered') else 'lost'}{'' if g.get('answered') else ' (golden lost it too)'}")
