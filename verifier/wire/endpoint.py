"""OpenAI-compatible client that keeps exact wire bytes.

Requests go through one pooled aiohttp `ClientSession` (its C HTTP parser, its connection pool), read as raw bytes
so nothing is normalized away (`reasoning_content`, unknown finish reasons, extra fields). No SDK and no request
layer above aiohttp: the SDK's follows redirects and reads error bodies whole, and we need a capped read of every
byte (the httpx-style Request/Response layer we had over aiohttp cost CPU on every request and ~0.1 s of imports).
Retries live here: we count attempts, classify errors and bound the total.

The server is not trusted. Every response is read with a cap on its decoded size (a gzip bomb is stopped as
it inflates), every request has a total deadline covering all attempts and the whole stream, redirects are
recorded, never followed (a POST must not turn into a GET to another host carrying our headers), and the API
key goes only where it was configured.

Wire modes are entries in `MODES` (path, streamed), derived from the surface registry (verifier/surfaces/); each
surface's adapter gives its headers and its terminal-event rule: every stream goes through the same SSE reader.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import random
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiohttp
from multidict import CIMultiDict

from verifier.wire.bodyread import TRANSIENT_CLIENT_CODES, MAX_STREAM_EVENTS, STREAM_REFUSED, TOO_MANY_EVENTS, TooLarge, UnknownCharset, _read_sse, read_capped, sse_text  # noqa: F401 - public names of this module
from verifier.wire import serving_adapters
from verifier.errors import UsageError
from verifier.jsonsafe import TooDeep, dumps_strict, loads_bounded
from verifier.surfaces.registry import MODES as MODE_NAMES, REFERENCE_MODE, mode_of, surface_for

HTTP_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError,)
"""Everything the client raises for a failed request (a response it could not read included)."""
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)
"""The connection failed, broke, or went silent: the network's fault or the server's, worth a retry."""
CONNECT_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""No connection was made: nothing was sent."""

# Retried, then infra if they persist: the transient 4xx (bodyread.is_refusal's exceptions, the same rule an error
# event inside a stream follows) and the 5xx a gateway or an overloaded server sends.
RETRYABLE_STATUS = TRANSIENT_CLIENT_CODES | {500, 502, 503, 504}
# Errors a retry cannot fix: the same server gives the same redirect or the same oversized body.
# A refusal sent inside a 200 stream is a refusal, like the 4xx it names.
FINAL_ERRORS = ("client_error", "redirect", "response_too_large", TOO_MANY_EVENTS, STREAM_REFUSED)

_WIRE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # json.dumps(**kw) builds one per call
MAX_INFO_BYTES = 4 * 2**20
MAX_ERROR_BODY = 256 * 1024


@dataclass(frozen=True)
class EndpointConfig:
    base_url: str
    model: str
    api_key: str | None = None
    """Read from the environment by the CLI; never written anywhere. Not sent when `headers` has its own Authorization."""
    headers: dict[str, str] = field(default_factory=dict)
    concurrency: int = 8
    timeout_s: float = 600.0
    """Per read (connect capped at 30 s): how long the server may stay silent."""
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    max_response_bytes: int = 64 * 2**20
    """Cap on one response's decoded size (stream included, decompression counted)."""
    max_stream_events: int = MAX_STREAM_EVENTS
    """Cap on the `data:` lines of one stream: past it the stream is cut, `stream_too_many_events`."""
    request_deadline_s: float | None = None
    """Total wall time for one request, all attempts and the whole stream included; None: 10 x timeout_s."""
    info_deadline_s: float = 10.0
    """Total wall time for the start-up server-info calls (/models, /props, /version)."""
    serving_adapter: str | None = None
    """A serving adapter's name (serving_adapters.ADAPTERS): its rewrite is applied to every chat-completions body
    this client sends, after the journal recorded it. None: bodies go out as built."""

    @property
    def deadline_s(self) -> float:
        return self.request_deadline_s if self.request_deadline_s else 10 * self.timeout_s


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
    timed_out: str | None = None
    """For error `timeout`, which limit ended it and what had arrived (a TIMEOUTS key; the console's words, never
    journaled: the journal's class stays `timeout`)."""


def redact_url(url: str) -> str:
    """Drop userinfo and blank out query values: URLs sometimes carry keys."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = urlencode([(k, "REDACTED") for k, _ in parse_qsl(parts.query)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def endpoint_url(base_url: str, path: str, root: bool = False) -> str:
    """The URL of `path` under the base URL, built from its parsed parts: the path joined to the base's path, the
    base's query kept as the query (`http://h/v1?api_key=K` + `/models` is `http://h/v1/models?api_key=K`, not
    `http://h/v1?api_key=K/models`). `root`: under the server root (the base's path without a final `/v1`), where
    llama-server answers /props and /version."""
    parts = urlsplit(base_url)
    base_path = parts.path.rstrip("/")
    if root and base_path.endswith("/v1"):
        base_path = base_path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, base_path + path, parts.query, ""))


def check_base_url(url: str | None) -> None:
    """An http(s) URL with a host and a valid port, and no `user:password@` (it would be sent, and logged)."""
    if not url:
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        # Not the parser's message: it quotes the port text, where a mistyped URL may hold the key.
        raise UsageError("--base-url is not a valid URL (its port is not a number from 0 to 65535, or its host is malformed)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--base-url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UsageError("--base-url must not contain credentials (user:password@); pass the key with --api-key-env or --header")


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


# Transport error classes a person can act on, each with its hint. A failed connect is told apart by its cause
# chain (a refused port, an unknown host, a TLS handshake) before its aiohttp class.
TRANSPORT_HINTS = {
    "connect_refused": "nothing listens there; is the server up and the port right?",
    "dns_error": "the host name does not resolve; check the host in the base URL",
    "tls_error": "the TLS handshake failed; is it https on a plain-http port, or an untrusted certificate?",
    "connect_timeout": "no answer to the connection attempt; a wrong host, a firewall dropping packets, or a saturated server",
    "connect_error": "the connection failed",
    "timeout": "the server accepted the request but sent nothing within --timeout",
    "read_error": "the connection broke while reading the answer",
}
TIMEOUTS = {
    "nothing": TRANSPORT_HINTS["timeout"],
    "stalled": "the stream sent events, then nothing more within --timeout",
    "deadline": "no complete answer before --request-deadline (the whole request, retries included)",
    "deadline_streaming": "the stream was still sending when --request-deadline ended it",
}
"""Error `timeout`, told apart for the console: which limit fired (a read's --timeout or the request's deadline) and
whether a stream had been sending. A stream cut while it was sending is no server that "sent nothing"."""


def timed_out(expired: bool, chunks: list[str] | None) -> str:
    """The TIMEOUTS key of a timeout: `expired` the request deadline (else a read's --timeout), `chunks` what arrived."""
    if expired:
        return "deadline_streaming" if chunks else "deadline"
    return "stalled" if chunks else "nothing"


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 16 and all(e is not x for x in out):
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _refused(e: BaseException) -> bool:
    # A host with several addresses all refusing comes back as one OSError "Multiple exceptions", errno kept.
    return isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED)


DECODING_ERROR = "client_error:DecodingError"
"""A body whose Content-Encoding does not decode (not gzip though it says gzip): the same bytes fail the same way on
a retry. The class name the journals have carried for it."""


def _classify(exc: BaseException) -> str:
    """The error class of a failed attempt: its cause chain first (refused, DNS, TLS), then aiohttp's class."""
    chain = _chain(exc)
    names = {c.__name__ for x in chain for c in type(x).__mro__}
    if any(_refused(x) for x in chain):
        return "connect_refused"
    if any(isinstance(x, socket.gaierror) for x in chain) or "ClientConnectorDNSError" in names:
        return "dns_error"
    if any(isinstance(x, ssl.SSLError) for x in chain) or isinstance(exc, aiohttp.ClientSSLError):
        return "tls_error"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "connect_timeout"
    if isinstance(exc, TimeoutError):  # aiohttp's read timeout (a ServerTimeoutError) or the deadline's
        return "timeout"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return DECODING_ERROR if "ContentEncodingError" in names else "read_error"
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientHttpProxyError)):
        # Nothing read yet: the connection failed, or closed before the status line (a server restarting).
        return "connect_error"
    return "client_error:" + type(exc).__name__


def describe_error(error: str | None) -> str:
    """The infra error class with its hint, for the console; `timeout/<TIMEOUTS key>` names which limit fired."""
    cls, _, how = (error or "").partition("/")
    hint = TIMEOUTS.get(how) if cls == "timeout" and how else TRANSPORT_HINTS.get(cls)
    return f"{cls}: {hint}" if hint else str(error)


def auth_headers(cfg: EndpointConfig) -> dict[str, str]:
    """The headers every call sends: the env key only where no Authorization header was configured."""
    h: dict[str, str] = {}
    if cfg.api_key and not any(k.lower() == "authorization" for k in cfg.headers):
        h["Authorization"] = f"Bearer {cfg.api_key}"
    h.update(cfg.headers)
    return h


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, with NO_PROXY honoured), or
    None. Read once per client, not per request; aiohttp's own `trust_env` would also send ~/.netrc credentials
    as an Authorization we did not configure."""
    from urllib.request import getproxies, proxy_bypass

    proxies = getproxies()
    if not proxies:
        return None
    parts = urlsplit(url)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    return proxies.get(parts.scheme.lower()) or proxies.get("all")


def _tls(base_url: str, proxy: str | None) -> ssl.SSLContext | bool:
    """A context that trusts nothing for a plain-http endpoint without a proxy: a stray https URL then fails closed
    (`tls_error`) instead of going anywhere unverified. Otherwise (https, or a proxy that may be https) the default
    verifying context, the system's trust store (SSL_CERT_FILE / SSL_CERT_DIR honoured)."""
    if urlsplit(base_url).scheme.lower() == "http" and proxy is None:
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class _Post(NamedTuple):
    """One POST, built once and re-sent as-is by every retry."""
    url: str
    data: bytes
    headers: CIMultiDict[str]


MODES: dict[str, tuple[str, bool]] = {m: (mode_of(m).path, mode_of(m).stream) for m in MODE_NAMES}
"""Every wire mode: (path, streamed), from the surface registry."""


class Endpoint:
    """One pooled client and one semaphore for a whole run. Built inside the event loop that uses it."""

    def __init__(self, cfg: EndpointConfig, sleep: Any = asyncio.sleep):
        self.cfg = cfg
        self._sleep = sleep
        self._proxy = env_proxy(cfg.base_url)
        # aiohttp's pool, one connection per concurrent request, kept alive between them (httpx's own pool
        # serialized badly at high concurrency: 128 requests of 200 ms at concurrency 64 took 6 s, aiohttp 0.6 s).
        # Timeouts per call: the connect (at most 30 s) and each read; the total is the deadline in `send`.
        # Cookies a server sets come back on the next request (sticky sessions), IP-address hosts included.
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=cfg.concurrency, keepalive_timeout=5.0, ssl=_tls(cfg.base_url, self._proxy)),
            timeout=aiohttp.ClientTimeout(total=None, connect=cfg.timeout_s, sock_connect=min(cfg.timeout_s, 30.0),
                                          sock_read=cfg.timeout_s),
            cookie_jar=aiohttp.CookieJar(unsafe=True),
        )
        self._headers = auth_headers(cfg)
        self._sem = asyncio.Semaphore(cfg.concurrency)
        self._post_headers = self._merged(None)
        self._urls: dict[str, str] = {}

    async def aclose(self) -> None:
        await self._http.close()

    def _merged(self, extra_headers: dict[str, str] | None) -> CIMultiDict[str]:
        """Our headers, then the call's own, then the JSON Content-Type; a later name replaces an earlier one
        whatever its case. aiohttp adds Host, Content-Length, Accept, Accept-Encoding and User-Agent."""
        h = CIMultiDict(self._headers)
        if extra_headers:
            h.update(extra_headers)
        h["Content-Type"] = "application/json"
        return h

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.cfg.backoff_max_s)
        # Full jitter: spreads retries so a recovering server is not hit in lockstep.
        return random.uniform(0, min(self.cfg.backoff_max_s, self.cfg.backoff_base_s * 2 ** (attempt - 1)))

    def _request(self, path: str, body: dict[str, Any], extra_headers: dict[str, str] | None = None) -> _Post:
        """The POST for one body, built once and re-sent as-is by every retry."""
        # The body goes out byte-for-byte as the journal records it (strict JSON: no bare NaN on the wire), as one
        # Content-Length body, not chunked.
        try:
            content = _WIRE.encode(body).encode()
        except ValueError:  # NaN/Infinity: null, as the journal writes it
            content = dumps_strict(body, ensure_ascii=False, separators=(",", ":")).encode()
        url = self._urls.get(path) or self._urls.setdefault(path, endpoint_url(self.cfg.base_url, path))
        return _Post(url, content, self._merged(extra_headers) if extra_headers else self._post_headers)

    async def _attempt(self, stream: bool, chunks: list[str], req: _Post, mode: str = REFERENCE_MODE) -> Attempt:
        async with self._http.post(req.url, data=req.data, headers=req.headers, allow_redirects=False,
                                   proxy=self._proxy) as resp:
            status = resp.status
            limit = self.cfg.max_response_bytes
            if 300 <= status < 400:
                try:
                    text: str | None = await read_capped(resp, min(limit, MAX_ERROR_BODY))
                except TooLarge:
                    text = None  # what matters is the redirect, not its page
                return Attempt(status, body=text, error=f"redirect_{status}")
            if status >= 400 or not stream:
                text = await read_capped(resp, limit)
                return Attempt(status, body=text, retry_after_s=parse_retry_after(resp.headers.get("retry-after")))
            if "json" in resp.headers.get("content-type", "").lower():
                text = await read_capped(resp, limit)
                if text.lstrip().startswith("{"):
                    # `stream: true` ignored, one JSON answer: kept as a body and judged as the frontend fault it is
                    # (`stream_ignored`), not retried and not lost as a truncated stream.
                    return Attempt(status, body=text)
                # SSE under a JSON Content-Type: read as the SDK reads it, whatever the header says.
                return Attempt(status, chunks=chunks, error=sse_text(text, chunks, mode, self.cfg.max_stream_events))
            err = await _read_sse(resp, limit, chunks, mode, self.cfg.max_stream_events)
            return Attempt(status, chunks=chunks, error=err)

    async def send(self, mode: str, body: dict[str, Any], extra_headers: dict[str, str] | None = None,
                   path: str | None = None, retries: int | None = None) -> Result:
        """One request of `mode` (its route, or `path` on the same surface, e.g. /messages/count_tokens). `retries`:
        instead of the configured max_retries (0 for a request that asks whether a feature exists: an error is the answer)."""
        max_retries = self.cfg.max_retries if retries is None else retries
        route, stream = MODES[mode]
        path = path or route
        async with self._sem:
            attempts = 0
            deadline = time.monotonic() + self.cfg.deadline_s
            body = serving_adapters.apply(self.cfg.serving_adapter, path, body)  # in front of the endpoint, like a proxy
            req = self._request(path, body, {**surface_for(mode).headers(self.cfg), **(extra_headers or {})} or None)
            while True:
                attempts += 1
                t0 = time.perf_counter()
                chunks: list[str] = []
                expired = False
                cm = asyncio.timeout(max(0.0, deadline - time.monotonic()))
                try:
                    async with cm:
                        a = await self._attempt(stream, chunks, req, mode)
                except TooLarge:
                    a = Attempt(None, chunks=chunks if stream else None, error="response_too_large")
                except Exception as e:  # transport failures; a stream that dies mid-way keeps what arrived
                    expired = cm.expired()  # the total deadline, whatever the exception it surfaced as
                    a = Attempt(None, chunks=chunks if stream else None, error="timeout" if expired else _classify(e))
                latency = (time.perf_counter() - t0) * 1000
                if a.error is None and a.status in RETRYABLE_STATUS:
                    a.error = f"http_{a.status}"
                wait = self._backoff(attempts, a.retry_after_s)
                retryable = (a.error is not None and not a.error.startswith(FINAL_ERRORS) and not expired
                             and time.monotonic() + wait < deadline)
                if not retryable or attempts > max_retries:
                    how = timed_out(expired, a.chunks) if a.error == "timeout" else None
                    return Result(a.status, a.body, a.chunks, a.error, round(latency, 3), attempts, how)
                await self._sleep(wait)

    async def _get(self, url: str, deadline_s: float, limit: int | None = MAX_INFO_BYTES,
                   strict_charset: bool = True) -> tuple[int, str | None]:
        """(status, body) of one GET: the body read with the chat reader's cap (`limit`; None reads none), the whole
        call under one total deadline (a server that drips a byte per read timeout must not stall start-up).
        Raises TimeoutError, TooLarge or an HTTP error for the caller to judge."""
        async with asyncio.timeout(deadline_s):
            async with self._http.get(url, headers=self._headers, allow_redirects=False, proxy=env_proxy(url)) as resp:
                return resp.status, (await read_capped(resp, limit, strict_charset) if limit is not None else None)

    async def _info_one(self, url: str) -> Any:
        try:
            status, text = await self._get(url, self.cfg.info_deadline_s)
            return loads_bounded(text or "") if status == 200 else None
        except HTTP_ERRORS + (TooLarge, TimeoutError, ValueError):
            return None

    async def get(self, url: str) -> tuple[int | None, Any]:
        """(status, parsed JSON body or None) of one GET through this client, capped in size and bounded by
        `info_deadline_s`; status None when nothing answered in time."""
        try:
            status, text = await self._get(url, self.cfg.info_deadline_s)
        except HTTP_ERRORS + (TooLarge, TimeoutError):
            return None, None
        except UnknownCharset as e:  # the model list cannot be read as the server says it is written
            raise UsageError(f"GET {redact_url(url)}: {e}") from None
        try:
            return status, loads_bounded(text or "")
        except (ValueError, TooDeep):
            return status, None

    async def unreachable(self, timeout_s: float = 5.0) -> str | None:
        """None if something answers at the base URL, else a one-line reason; through this client's own pool.
        Only the status line is waited for (at most `timeout_s` in all): the body of /models is not read here."""
        try:
            await self._get(endpoint_url(self.cfg.base_url, "/models"), min(timeout_s, self.cfg.info_deadline_s), limit=None)
            return None
        except HTTP_ERRORS as e:  # before TimeoutError: aiohttp's connect and read timeouts are TimeoutErrors too
            return f"cannot reach endpoint {redact_url(self.cfg.base_url)}: {describe_error(_classify(e))}"
        except TimeoutError:
            return f"cannot reach endpoint {redact_url(self.cfg.base_url)}: no answer within {min(timeout_s, self.cfg.info_deadline_s):g} s"

    async def server_info(self) -> dict[str, Any]:
        """What the server says about itself, allow-listed and scrubbed; each probe is optional, all
        three together get `info_deadline_s` (a slow /props must not stall start-up)."""
        from verifier.redact import Redactor
        from verifier.wire.serverinfo import allowlist

        base = self.cfg.base_url
        probes = {"models": endpoint_url(base, "/models"), "props": endpoint_url(base, "/props", root=True),
                  "version": endpoint_url(base, "/version", root=True)}
        tasks = {name: asyncio.ensure_future(self._info_one(url)) for name, url in probes.items()}
        done, pending = await asyncio.wait(tasks.values(), timeout=self.cfg.info_deadline_s)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        info = {name: t.result() for name, t in tasks.items() if t in done and t.result() is not None}
        return allowlist(info, Redactor.from_config(self.cfg))
