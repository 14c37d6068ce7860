"""OpenAI-compatible client that keeps exact wire bytes.

The SDK is used with raw-response access so nothing is normalized away
(`reasoning_content`, unknown finish reasons, extra fields). The SDK's own
retries are disabled: we need to count attempts, classify errors and bound the
total, so retries live here.

Wire modes are plain async functions in `MODES`; adding Anthropic Messages or
OpenAI Responses later means adding one function and one dict entry.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import openai

try:  # openai >= 3 runs on httpx2; its errors and Response class are the ones we see
    import httpx2 as hx
except ImportError:  # pragma: no cover - older SDKs
    hx = httpx  # type: ignore[no-redef]

TRANSPORT_ERRORS = tuple({httpx.TransportError, httpx.StreamError, hx.TransportError, hx.StreamError})
TIMEOUTS = tuple({httpx.TimeoutException, hx.TimeoutException})
CONNECT_ERRORS = tuple({httpx.ConnectError, hx.ConnectError})

RETRYABLE_STATUS = {429, 500, 502, 503, 504}


@dataclass(frozen=True)
class EndpointConfig:
    base_url: str
    model: str
    api_key: str | None = None
    """Read from the environment by the CLI; never written anywhere."""
    headers: dict[str, str] = field(default_factory=dict)
    concurrency: int = 8
    timeout_s: float = 600.0
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0


@dataclass
class Attempt:
    status: int | None
    body: str | None = None
    chunks: list[str] | None = None
    error: str | None = None
    retry_after_s: float | None = None


@dataclass
class Result:
    status: int | None
    body: str | None
    chunks: list[str] | None
    error: str | None
    latency_ms: float
    attempts: int


def redact_url(url: str) -> str:
    """Drop userinfo and blank out query values: URLs sometimes carry keys."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = urlencode([(k, "REDACTED") for k, _ in parse_qsl(parts.query)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _classify(exc: BaseException) -> str:
    if isinstance(exc, (openai.APITimeoutError, *TIMEOUTS)):
        return "timeout"
    if isinstance(exc, CONNECT_ERRORS):
        return "connect_error"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, CONNECT_ERRORS):
            return "connect_error"
        return "read_error"
    if isinstance(exc, TRANSPORT_ERRORS):
        return "read_error"
    return "client_error:" + type(exc).__name__


def _status_attempt(e: openai.APIStatusError) -> Attempt:
    """An HTTP error is a result: keep its body and any Retry-After."""
    return Attempt(e.status_code, body=e.response.text, retry_after_s=parse_retry_after(e.response.headers.get("retry-after")))


# The SDK's low-level `post` with a raw Response cast: the body goes out byte-for-byte as the
# journal records it (no TypedDict transform, which also cost ~25% of client CPU), and the
# exact response text comes back; auth, base URL and error types are still the SDK's.
async def _post(client: openai.AsyncOpenAI, path: str, body: dict[str, Any]) -> Attempt:
    try:
        raw = await client.post(path, cast_to=hx.Response, body=body)
        return Attempt(raw.status_code, body=raw.text)
    except openai.APIStatusError as e:
        return _status_attempt(e)


async def _chat(client: openai.AsyncOpenAI, body: dict[str, Any]) -> Attempt:
    return await _post(client, "/chat/completions", body)


async def _chat_stream(client: openai.AsyncOpenAI, body: dict[str, Any]) -> Attempt:
    chunks: list[str] = []
    try:
        resp = await client.post("/chat/completions", cast_to=hx.Response, body=body, stream=True, stream_cls=None)
        try:
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    chunks.append(line[5:].strip())
        finally:
            await resp.aclose()
        status = resp.status_code
    except openai.APIStatusError as e:
        return _status_attempt(e)
    except (openai.APIConnectionError, *TRANSPORT_ERRORS) as e:
        # A stream that dies mid-way keeps what arrived, for the journal.
        return Attempt(None, chunks=chunks, error=_classify(e))
    if not chunks or chunks[-1] != "[DONE]":
        return Attempt(status, chunks=chunks, error="stream_truncated")
    return Attempt(status, chunks=chunks)


async def _completions(client: openai.AsyncOpenAI, body: dict[str, Any]) -> Attempt:
    return await _post(client, "/completions", body)


MODES: dict[str, Callable[[openai.AsyncOpenAI, dict[str, Any]], Awaitable[Attempt]]] = {
    "chat": _chat,
    "chat-stream": _chat_stream,
    # The dual path: the chat template rendered client-side (verifier/dualpath.py), sent as a raw prompt.
    "completions": _completions,
}


class Endpoint:
    """One pooled client and one semaphore for a whole run."""

    def __init__(self, cfg: EndpointConfig, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.cfg = cfg
        self._sleep = sleep
        # The SDK's aiohttp transport: httpx's own pool serializes badly at high concurrency
        # (measured here: 128 requests of 200 ms at concurrency 64 took 6 s with httpx, 0.6 s with aiohttp).
        self._http = openai.DefaultAioHttpClient(
            limits=hx.Limits(max_connections=cfg.concurrency, max_keepalive_connections=cfg.concurrency),
            timeout=hx.Timeout(cfg.timeout_s, connect=min(cfg.timeout_s, 30.0)),
        )
        self.client = openai.AsyncOpenAI(
            base_url=cfg.base_url,
            api_key=cfg.api_key or "EMPTY",
            max_retries=0,
            timeout=cfg.timeout_s,
            default_headers=cfg.headers or None,
            http_client=self._http,
        )
        self._sem = asyncio.Semaphore(cfg.concurrency)

    async def aclose(self) -> None:
        await self.client.close()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.cfg.backoff_max_s)
        # Full jitter: spreads retries so a recovering server is not hit in lockstep.
        return random.uniform(0, min(self.cfg.backoff_max_s, self.cfg.backoff_base_s * 2 ** (attempt - 1)))

    async def send(self, mode: str, body: dict[str, Any]) -> Result:
        fn = MODES[mode]
        async with self._sem:
            attempts = 0
            while True:
                attempts += 1
                t0 = time.perf_counter()
                try:
                    a = await fn(self.client, body)
                except Exception as e:  # transport failures of the non-stream path
                    a = Attempt(None, error=_classify(e))
                latency = (time.perf_counter() - t0) * 1000
                if a.error is None and a.status in RETRYABLE_STATUS:
                    a.error = f"http_{a.status}"
                retryable = a.error is not None and not a.error.startswith("client_error")
                if not retryable or attempts > self.cfg.max_retries:
                    return Result(a.status, a.body, a.chunks, a.error, round(latency, 3), attempts)
                await self._sleep(self._backoff(attempts, a.retry_after_s))

    async def unreachable(self, timeout_s: float = 5.0) -> str | None:
        """None if something answers at the base URL, else a one-line reason; through this client's own pool."""
        try:
            await self._http.get(self.cfg.base_url.rstrip("/") + "/models", timeout=timeout_s)
            return None
        except (httpx.HTTPError, hx.HTTPError) as e:
            return f"cannot reach endpoint {redact_url(self.cfg.base_url)}: {type(e).__name__}"

    async def server_info(self) -> dict[str, Any]:
        """What the server says about itself; each probe is optional."""
        root = self.cfg.base_url.rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        headers = dict(self.cfg.headers)
        if self.cfg.api_key:
            headers["Authorization"] = f"Bearer {self.cfg.api_key}"
        info: dict[str, Any] = {}
        probes = {"models": self.cfg.base_url.rstrip("/") + "/models", "props": root + "/props", "version": root + "/version"}
        for name, url in probes.items():
            try:
                r = await self._http.get(url, headers=headers, timeout=10.0)
            except (httpx.HTTPError, hx.HTTPError):
                continue
            if r.status_code == 200:
                try:
                    info[name] = r.json()
                except ValueError:
                    continue
        props = info.get("props")
        if isinstance(props, dict):
            # The chat template is kept (the dual path renders it); nothing else large.
            info["props"] = {k: v for k, v in props.items() if k in ("chat_template", "model_path", "build_info", "total_slots", "default_generation_settings", "modalities", "bos_token", "eos_token")}
            dgs = info["props"].get("default_generation_settings")
            if isinstance(dgs, dict):
                info["props"]["default_generation_settings"] = {k: dgs[k] for k in ("n_ctx",) if k in dgs}
        return info


async def reachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """None if something answers at base_url, else a one-line reason."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as c:
            await c.get(base_url.rstrip("/") + "/models")
        return None
    except httpx.HTTPError as e:
        return f"cannot reach endpoint {redact_url(base_url)}: {type(e).__name__}"
