"""The performance probe: serving-benchmark figures measured from the client, as a provider's TTFT and
output-tokens/s ladders measure them.

One level of the ladder is (concurrency, prompt length). For each level the probe sends `warmup` requests it
does not count, then `repeats` rounds of `requests` streamed chat requests with exactly `concurrency` in flight.
Every request carries the same fixed prompt (a deterministic word list of about the asked length; the real count
comes back in `usage.prompt_tokens`), a fixed `max_tokens`, and `ignore_eos` (llama.cpp and vLLM honour it; a
server that does not simply stops earlier, and the measured output length is what the figures use).

Per request, from the client's clock:
    ttft        time to the first chunk that carries generated text (content, reasoning or a tool call)
    itl         (time of the last text chunk - time of the first) / (output tokens - 1)
    latency     time to the end of the stream
    output      usage.completion_tokens (include_usage), else the number of text chunks
Per round: aggregate output tokens/s (all output tokens / the round's wall time) and the latency percentiles.
Repeats give an interval: every figure is the mean over rounds with a 95% t interval, so "faster" can be decided
by intervals that do not overlap.

The harness must not be the bottleneck: the probe measures its own CPU time per request and the share of one
core it used, and says when a figure may be the client's (docs/sweeps.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

# Two-sided 95% Student t quantiles by degrees of freedom (repeats - 1); beyond 30 the normal's.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        15: 2.131, 20: 2.086, 30: 2.042}
MAX_LINE_BYTES = 1 << 20
"""One SSE line longer than this ends the request as an error (a hostile server cannot grow the client)."""
MAX_CHUNKS = 200_000
"""Events per streamed response before the request is cut (bounded work per request)."""

WORDS = ("river stone light garden window paper music silver morning harbor forest cloud market bridge letter "
         "orange winter lantern meadow copper").split()


@dataclass(frozen=True)
class PerfSpec:
    """What the probe sends; every field has a serving-benchmark default."""

    concurrencies: tuple[int, ...] = (1, 4, 16)
    """Requests in flight, one level each."""
    prompt_tokens: tuple[int, ...] = (256, 2048)
    """Approximate prompt lengths (the server's own count is reported)."""
    output_tokens: int = 128
    """max_tokens of every request."""
    requests: int = 0
    """Requests per round; 0 means 2 x concurrency (at least 4)."""
    repeats: int = 3
    """Rounds per level: the interval comes from their spread."""
    warmup: int = 2
    """Uncounted requests before each level."""
    ignore_eos: bool = True
    """Ask the server to generate exactly max_tokens."""
    timeout_s: float = 600.0
    """Per-request deadline, the whole stream included."""


@dataclass(frozen=True)
class Sample:
    """One measured request."""

    ok: bool
    ttft_s: float | None = None
    itl_s: float | None = None
    latency_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    error: str | None = None
    reconnects: int = 0
    """Attempts that failed before any response (a stale keep-alive connection) and were sent again."""
    ttft_cpu_s: float | None = None
    """This process's CPU from the send to the first generated text: the client's own share of the TTFT window (at
    concurrency above 1 it includes the other requests' work in that window, which can delay this one's first token)."""


STALE_RETRIES = 8
"""Re-sends of a request whose connection broke before the response began. llama-server closes a connection after a
streamed response without saying `Connection: close`, so every second request on a kept-alive connection failed
(ServerDisconnectedError, ClientOSError) and the sweep reported half its requests lost. The clock restarts for the
re-send; a failure once the response has begun is a failure."""


@dataclass
class _Round:
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0


def prompt_text(tokens: int) -> str:
    """A fixed, deterministic prompt of about `tokens` tokens (one common word is about one token)."""
    words = [WORDS[(i * 7 + i // len(WORDS)) % len(WORDS)] for i in range(max(1, tokens - 16))]
    return "Continue this list of words for as long as you can, one word at a time: " + " ".join(words)


def request_body(model: str, tokens: int, spec: PerfSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model, "messages": [{"role": "user", "content": prompt_text(tokens)}],
        "max_tokens": spec.output_tokens, "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
    }
    if spec.ignore_eos:
        body["ignore_eos"] = True
    return body


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def interval(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean of per-round values with a 95% t interval (a single round has no interval)."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return {"mean": None, "ci": None, "n": 0}
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return {"mean": _r(m), "ci": None, "n": len(xs)}
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    df = len(xs) - 1
    t = next((v for k, v in sorted(_T95.items()) if df <= k), 1.96)
    half = t * sd / math.sqrt(len(xs))
    # Every figure is a duration or a rate: its interval stops at zero.
    return {"mean": _r(m), "ci": [_r(max(0.0, m - half)), _r(m + half)], "n": len(xs)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _text_delta(obj: Any) -> bool:
    """Whether one chunk carries generated output (content, reasoning or a tool call)."""
    if not isinstance(obj, dict):
        return False
    for ch in obj.get("choices") or []:
        d = ch.get("delta") if isinstance(ch, dict) else None
        if isinstance(d, dict) and (d.get("content") or d.get("reasoning_content") or d.get("reasoning") or d.get("tool_calls")):
            return True
    return False


async def _one(session: Any, url: str, headers: Mapping[str, str], body: dict[str, Any], timeout_s: float) -> Sample:
    for attempt in range(STALE_RETRIES + 1):
        sample, began = await _attempt(session, url, headers, body, timeout_s)
        if sample.ok or began or attempt == STALE_RETRIES:
            return replace(sample, reconnects=attempt)
    raise AssertionError("unreachable")


async def _attempt(session: Any, url: str, headers: Mapping[str, str], body: dict[str, Any],
                   timeout_s: float) -> tuple[Sample, bool]:
    """One send; the flag says the outcome is final: the response began (a status line arrived), or it timed out."""
    import aiohttp

    began = False
    t0, cpu0 = time.perf_counter(), time.process_time()
    first = last = first_cpu = None
    chunks = 0
    usage: dict[str, Any] = {}
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, json=body, headers=dict(headers)) as resp:
                began = True
                if resp.status != 200:
                    return Sample(False, error=f"HTTP {resp.status}"), began
                buf = b""
                events = 0
                async for piece in resp.content.iter_any():
                    buf += piece
                    if len(buf) > MAX_LINE_BYTES and b"\n" not in buf:
                        return Sample(False, error="SSE line over the size cap"), began
                    *lines, buf = buf.split(b"\n")
                    now = time.perf_counter()
                    for line in lines:
                        line = line.strip()
                        if not line.startswith(b"data:"):
                            continue
                        events += 1
                        if events > MAX_CHUNKS:
                            return Sample(False, error="stream over the event cap"), began
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            continue
                        try:
                            obj = json.loads(payload)
                        except (ValueError, RecursionError):
                            continue
                        if _text_delta(obj):
                            chunks += 1
                            if first is None:
                                first, first_cpu = now, time.process_time()
                            last = now
                        if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
                            usage = obj["usage"]
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
        # Only a connection that broke before the response is worth a re-send: a timeout would just take as long again.
        return Sample(False, error=type(e).__name__), began or isinstance(e, asyncio.TimeoutError)
    end = time.perf_counter()
    if first is None:
        return Sample(False, latency_s=end - t0, error="no generated text in the stream"), began
    out = usage.get("completion_tokens")
    out = out if isinstance(out, int) and not isinstance(out, bool) and out > 0 else chunks
    pt = usage.get("prompt_tokens")
    itl = (last - first) / (out - 1) if out > 1 and last is not None else None
    return Sample(True, ttft_s=first - t0, itl_s=itl, latency_s=end - t0, output_tokens=out,
                  prompt_tokens=pt if isinstance(pt, int) and not isinstance(pt, bool) else None,
                  ttft_cpu_s=first_cpu - cpu0 if first_cpu is not None else None), began


async def _round(session: Any, url: str, headers: Mapping[str, str], body: dict[str, Any], n: int, concurrency: int,
                 timeout_s: float) -> _Round:
    queue = list(range(n))
    r = _Round()

    async def worker() -> None:
        while queue:
            queue.pop()
            r.samples.append(await _one(session, url, headers, body, timeout_s))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    r.wall_s = time.perf_counter() - t0
    return r


def _round_figures(r: _Round) -> dict[str, float | None]:
    ok = [s for s in r.samples if s.ok]
    lat = [s.latency_s for s in ok if s.latency_s is not None]
    ttft = [s.ttft_s for s in ok if s.ttft_s is not None]
    itl = [s.itl_s for s in ok if s.itl_s is not None]
    per_req = [s.output_tokens / s.latency_s for s in ok if s.latency_s]
    out_tokens = sum(s.output_tokens for s in ok)
    return {
        "ttft_p50_s": percentile(ttft, 50), "ttft_p90_s": percentile(ttft, 90),
        "itl_mean_s": sum(itl) / len(itl) if itl else None,
        "latency_p50_s": percentile(lat, 50), "latency_p90_s": percentile(lat, 90), "latency_p99_s": percentile(lat, 99),
        "request_tokens_per_s": sum(per_req) / len(per_req) if per_req else None,
        "aggregate_tokens_per_s": out_tokens / r.wall_s if r.wall_s > 0 and ok else None,
    }


FIGURES = ("ttft_p50_s", "ttft_p90_s", "itl_mean_s", "latency_p50_s", "latency_p90_s", "latency_p99_s",
           "request_tokens_per_s", "aggregate_tokens_per_s")
"""Every level reports each of these as {"mean", "ci", "n"} over its rounds."""

CLIENT_BUSY_WARN = 0.5
"""A client that used more than half a core while measuring may be what the figures measure."""
CLIENT_TTFT_SHARE_WARN = 0.05
"""The client's CPU in the TTFT window (send to first token, median) above 5% of the median TTFT: the TTFT may be
partly the client's. Not the whole request's CPU: on a VM every wake-up for a streamed token costs ~0.1 ms of CPU
even to a raw blocking socket (3.5-4.5 ms for a 32-token stream from llama-server, measured), which would flag any
client against a server whose TTFT is tens of milliseconds, though none of it happens before the first token."""


async def probe_async(base_url: str, model: str, spec: PerfSpec, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    import aiohttp

    from verifier.wire.endpoint import endpoint_url

    url = endpoint_url(base_url, "/chat/completions")  # the base's query (a key) stays the query
    levels = []
    conn = aiohttp.TCPConnector(limit=max(spec.concurrencies) + 1, force_close=False)
    async with aiohttp.ClientSession(connector=conn, trust_env=False) as session:
        for tokens in spec.prompt_tokens:
            body = request_body(model, tokens, spec)
            for c in spec.concurrencies:
                n = spec.requests or max(4, 2 * c)
                if spec.warmup:
                    await _round(session, url, headers or {}, body, spec.warmup, min(c, spec.warmup), spec.timeout_s)
                cpu0, wall0 = time.process_time(), time.perf_counter()
                rounds = [await _round(session, url, headers or {}, body, n, c, spec.timeout_s) for _ in range(spec.repeats)]
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                levels.append(_level(tokens, c, n, rounds, cpu, wall))
    return {"spec": _spec_dict(spec), "levels": levels, "warnings": [w for lv in levels for w in lv["warnings"]]}


def _level(tokens: int, c: int, n: int, rounds: list[_Round], cpu_s: float, wall_s: float) -> dict[str, Any]:
    samples = [s for r in rounds for s in r.samples]
    ok = [s for s in samples if s.ok]
    per_round = [_round_figures(r) for r in rounds]
    figures = {k: interval([f[k] for f in per_round if f[k] is not None]) for k in FIGURES}
    cpu_per_req = cpu_s / len(samples) if samples else None
    busy = cpu_s / wall_s if wall_s > 0 else None
    warnings = []
    ttft = figures["ttft_p50_s"]["mean"]
    if busy is not None and busy > CLIENT_BUSY_WARN:
        warnings.append(f"c={c} prompt~{tokens}: the client used {busy:.0%} of a core while measuring: the figures may be the client's")
    ttft_cpu = percentile([s.ttft_cpu_s for s in ok if s.ttft_cpu_s is not None], 50)
    if ttft_cpu is not None and ttft and ttft_cpu > CLIENT_TTFT_SHARE_WARN * ttft:
        warnings.append(f"c={c} prompt~{tokens}: client CPU before the first token {ttft_cpu * 1000:.2f} ms (median) is over "
                        f"{CLIENT_TTFT_SHARE_WARN:.0%} of the median TTFT ({ttft * 1000:.1f} ms): TTFT may be partly the client's")
    errors: dict[str, int] = {}
    for s in samples:
        if not s.ok:
            errors[s.error or "error"] = errors.get(s.error or "error", 0) + 1
    if errors:
        warnings.append(f"c={c} prompt~{tokens}: {len(samples) - len(ok)}/{len(samples)} requests failed ({', '.join(f'{k} x{v}' for k, v in sorted(errors.items()))})")
    pts = sorted({s.prompt_tokens for s in ok if s.prompt_tokens is not None})
    outs = [s.output_tokens for s in ok]
    return {
        "concurrency": c, "prompt_tokens_target": tokens, "prompt_tokens": pts[0] if len(pts) == 1 else pts or None,
        "requests_per_round": n, "rounds": len(rounds), "ok": len(ok), "failed": len(samples) - len(ok), "errors": errors,
        "reconnects": sum(s.reconnects for s in samples),
        "output_tokens_mean": _r(sum(outs) / len(outs)) if outs else None,
        "figures": figures,
        "client": {"cpu_ms_per_request": _r(cpu_per_req * 1000) if cpu_per_req is not None else None,
                   "ttft_cpu_ms": _r(ttft_cpu * 1000) if ttft_cpu is not None else None,
                   "core_share": _r(busy)},
        "warnings": warnings,
    }


def _spec_dict(spec: PerfSpec) -> dict[str, Any]:
    return {"concurrencies": list(spec.concurrencies), "prompt_tokens": list(spec.prompt_tokens),
            "output_tokens": spec.output_tokens, "requests": spec.requests, "repeats": spec.repeats,
            "warmup": spec.warmup, "ignore_eos": spec.ignore_eos}


def probe(base_url: str, model: str, spec: PerfSpec, api_key_env: str | None = None,
          headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run the ladder against one endpoint; the key is read from the named variable and never written."""
    h = dict(headers or {})
    key = os.environ.get(api_key_env) if api_key_env else None
    if key and not any(k.lower() == "authorization" for k in h):
        h["Authorization"] = f"Bearer {key}"
    return asyncio.run(probe_async(base_url, model, spec, h))


def headline(perf: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a sweep table shows: TTFT and per-request speed at the lightest level, aggregate throughput
    at the heaviest concurrency of the shortest prompt, latency percentiles at that level."""
    levels = perf.get("levels") or []
    if not levels:
        return {}
    shortest = min(lv["prompt_tokens_target"] for lv in levels)
    light = min((lv for lv in levels if lv["prompt_tokens_target"] == shortest), key=lambda lv: lv["concurrency"])
    heavy = max((lv for lv in levels if lv["prompt_tokens_target"] == shortest), key=lambda lv: lv["concurrency"])
    f, g = light["figures"], heavy["figures"]
    return {
        "light": {"concurrency": light["concurrency"], "prompt_tokens": light["prompt_tokens_target"]},
        "heavy": {"concurrency": heavy["concurrency"], "prompt_tokens": heavy["prompt_tokens_target"]},
        "ttft_p50_s": f["ttft_p50_s"], "itl_mean_s": f["itl_mean_s"], "request_tokens_per_s": f["request_tokens_per_s"],
        "aggregate_tokens_per_s": g["aggregate_tokens_per_s"], "latency_p50_s": g["latency_p50_s"],
        "latency_p90_s": g["latency_p90_s"], "latency_p99_s": g["latency_p99_s"],
        "client_cpu_ms_per_request": heavy["client"]["cpu_ms_per_request"],
    }
