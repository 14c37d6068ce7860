"""Fault-injection reverse proxy: mutation testing for the verifier.

    verifier proxy --upstream http://host:8000/v1 --port 8089 --fault answer_in_reasoning:0.5 --seed 7
    verifier proxy --list-faults

It forwards every request to the upstream and applies named frontend faults from the catalogue
(faults.py) to `/chat/completions`, `/responses` and `/messages` traffic (the last two by translation,
surface_faults.py): request faults edit the body before it is sent, response faults edit a JSON body,
stream faults rewrite SSE `data:` payloads as they pass (a few hold the tool-call deltas back until the
choice finishes, because their mutation needs the whole arguments string). Every other path is forwarded
byte for byte. If the verifier is any good, each fault shows up as the signal named in its `catches` field.

This module is only the aiohttp plumbing: `Proxy` (a context manager like
server.TestServer), and `ProxyConfig` + `serve` for the command line. What a fault does
to a body is decided by the pure catalogue, which is tested without sockets.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, TextIO

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from ..redact import Redactor
from .faults import ALL_FAULTS, FAULTS, Chain, Fault, StreamMutator, parse_fault_spec, selected
from .surface_faults import PATHS, on_surface, sse_frame, surface_for
from .surface_render import to_chat_request
from .. import jsonsafe

# Hop-by-hop and framing headers are the proxy's own business; everything else (Authorization
# included) goes through untouched. Accept-Encoding is dropped so bodies arrive rewritable.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "accept-encoding", "content-encoding"}


BATCH_WINDOW_S = 0.05
"""How long a request a Fault.with_shared_prefix fault may act on is held before it is forwarded: requests sent at once
are all in flight together by then, whatever the machine's load, as in an engine's scheduler batching them."""

MAX_RESPONSE_BYTES = 64 * 2**20
"""What the proxy buffers to rewrite one response (`--max-response-mb`, the client's default cap): a larger body
or SSE line is forwarded as it came, unmutated, without being held whole (a 400 MB body once cost 1.7 GB here)."""

# Request headers whose values are credentials: a mutation's before/after excerpt (an upstream may echo them in
# a body) never carries them into the log.
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.I)


def _filter_headers(h: Any) -> CIMultiDict[str]:
    return CIMultiDict((k, v) for k, v in h.items() if k.lower() not in _HOP)


def _chat_view(surface: str, body: dict[str, Any]) -> dict[str, Any]:
    """A Responses or Messages request as the chat request it means (what Fault.when and Fault.on_repeat read); a
    body too odd to translate is read as it came."""
    try:
        return to_chat_request(surface, body)
    except (AttributeError, TypeError, ValueError, KeyError):
        return body


class Proxy:
    """The reverse proxy. As a context manager it runs on its own thread and loop, like TestServer.

    `faults`: "NAME[:RATE]" strings, (name, rate) or (Fault, rate) pairs. `log`: a text stream or a path
    for JSON lines; None keeps mutations in `.mutations` only. `surfaces`: where faults apply
    (chat, responses, messages; default all), to break one surface and leave the others healthy.
    """

    def __init__(self, upstream: str, faults: Iterable[str | tuple[str, float]] = (), seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0, log: TextIO | str | Path | None = None, connections: int = 100,
                 surfaces: Iterable[str] | None = None, max_response_bytes: int = MAX_RESPONSE_BYTES):
        self.faults: list[tuple[Fault, float]] = []
        for spec in faults:
            if not isinstance(spec, str) and isinstance(spec[0], Fault):  # a fault outside the catalogue
                self.faults.append((spec[0], float(spec[1])))
                continue
            name, rate = parse_fault_spec(spec) if isinstance(spec, str) else (spec[0], float(spec[1]))
            if name not in ALL_FAULTS:
                raise ValueError(f"unknown fault {name!r}; see --list-faults")
            self.faults.append((ALL_FAULTS[name], rate))
        self.upstream_root = upstream.rstrip("/").removesuffix("/v1")
        self.surfaces = set(surfaces) if surfaces is not None else None
        self.seed = seed
        self.host = host
        self._port = port
        self.port = 0
        self.connections = connections
        self.max_response_bytes = max_response_bytes
        self.mutations: list[dict[str, Any]] = []
        self.requests = 0
        self._seen: dict[str, int] = {}
        self._prompts: dict[str, int] = {}
        # Requests in flight by first message: (request number, prompt hash) of each; and the request numbers that met
        # another prompt sharing their first message while in flight (what Fault.with_shared_prefix reads).
        self._in_flight: dict[str, dict[int, str]] = {}
        self._met_shared_prefix: set[int] = set()
        self._batch_keys: dict[int, str | None] = {}
        self._redactors: dict[int, Redactor] = {}  # per request number, while it is in flight
        self._numbers: dict[int, int] = {}
        self._log_arg = log
        self._log: TextIO | None = None
        self._owns_log = False
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- selection and logging --

    def _key(self, raw: bytes) -> str:
        # Identical bodies are interchangeable, so "the nth copy of this body" is reproducible
        # under any concurrency; a request counter would not be.
        h = hashlib.sha256(raw).hexdigest()[:16]
        n = self._seen.get(h, 0)
        self._seen[h] = n + 1
        return f"{h}:{n}"

    def _prompt_seen(self, chat_request: dict[str, Any]) -> int:
        """How many times the same prompt (messages and tools, as chat spells them) was sent before this request,
        whatever its mode or surface: what a fault of engine state (Fault.on_repeat) reads."""
        prompt = {k: chat_request.get(k) for k in ("messages", "tools")}
        h = hashlib.sha256(json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]
        n = self._prompts.get(h, 0)
        self._prompts[h] = n + 1
        return n

    @staticmethod
    def _digest(x: Any) -> str:
        return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]

    def _enter_batch(self, n: int, chat_request: dict[str, Any]) -> str | None:
        """Register request `n` as in flight under its first message; mark it, and every request in flight with the same
        first message and another prompt, as having met a shared prefix. Returns the key to leave with."""
        messages = chat_request.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        prefix = self._digest(messages[0])
        prompt = self._digest({k: chat_request.get(k) for k in ("messages", "tools")})
        others = self._in_flight.setdefault(prefix, {})
        met = [m for m, p in others.items() if p != prompt]
        if met:
            self._met_shared_prefix.update(met + [n])
        others[n] = prompt
        return prefix

    def _leave_batch(self, n: int, prefix: str | None) -> None:
        if prefix is not None:
            others = self._in_flight.get(prefix, {})
            others.pop(n, None)
            if not others:
                self._in_flight.pop(prefix, None)
        self._met_shared_prefix.discard(n)

    def _record(self, fault: Fault, path: str, n: int, stream: bool, before: str, after: str, count: int) -> None:
        r = self._redactors.get(n)
        if r:
            before, after = r.text(before), r.text(after)
        rec = {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"), "fault": fault.name, "path": path,
               "request": n, "stream": stream, "changes": count, "before": before, "after": after}
        self.mutations.append(rec)
        if self._log is not None:
            self._log.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self._log.flush()

    # -- the handler --

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._forward(request)
        finally:
            n = self._numbers.pop(id(request), 0)
            self._redactors.pop(n, None)
            self._leave_batch(n, self._batch_keys.pop(n, None))

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        raw = await request.read()
        path = request.path
        active: list[Fault] = []
        n = 0
        # The verifier's preflight ping checks route, key and model: faults are for the run's samples.
        sample = not request.headers.get("X-Verifier-Preflight")
        surface = surface_for(path) if sample and request.method == "POST" else None
        if surface is not None and (self.surfaces is None or surface in self.surfaces):
            try:
                body = jsonsafe.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # a hostile body is passed on as it came
                body = None
            if isinstance(body, dict):
                self.requests += 1
                n = self.requests
                self._numbers[id(request)] = n
                self._redactors[n] = Redactor(v for k, v in request.headers.items() if _SECRET_HEADER.search(k))
                key = self._key(raw)
                chat_view = body if surface == "chat" else _chat_view(surface, body)
                repeat = self._prompt_seen(chat_view) > 0
                active = [on_surface(f, surface) for f, rate in self.faults if selected(self.seed, f.name, key, rate)
                          and (f.when is None or f.when(chat_view)) and (repeat or not f.on_repeat)]
                body, changed = self._apply(active, "request", body, path, n, bool(body.get("stream")))
                if changed:
                    raw = json.dumps(body, ensure_ascii=False).encode()
                if any(f.with_shared_prefix for f, _ in self.faults):
                    # A batch window, as an engine's scheduler waits to batch requests: those sent at once meet here
                    # (every request is registered, whether the fault was drawn for it or not: it is in the batch).
                    self._batch_keys[n] = self._enter_batch(n, chat_view)
                    await asyncio.sleep(BATCH_WINDOW_S)
                    active = [f for f in active if not f.with_shared_prefix or n in self._met_shared_prefix]
        try:
            up = await self._session.request(request.method, self.upstream_root + request.path_qs, data=raw,
                                             headers=_filter_headers(request.headers), allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            return web.json_response({"error": {"message": f"proxy: upstream failed: {type(e).__name__}", "type": "proxy_error"}}, status=502)
        async with up:
            headers = _filter_headers(up.headers)
            ctype = up.headers.get("Content-Type", "")
            if up.status == 200 and "text/event-stream" in ctype:
                mutators = [(f, f.stream()) for f in active if f.stream]
                if mutators:
                    return await self._stream(request, up, headers, mutators, path, n)
            elif up.status == 200 and "json" in ctype and any(f.response for f in active):
                return await self._body(request, up, headers, [f for f in active if f.response], path, n)
            return await self._passthrough(request, up, headers)

    def _apply(self, faults: list[Fault], kind: str, body: dict[str, Any], path: str, n: int, stream: bool) -> tuple[dict[str, Any], bool]:
        """Run each fault's `request` or `response` mutation in turn, logging every change."""
        changed = False
        for f in faults:
            fn = getattr(f, kind)
            ch = fn(body) if fn else None
            if ch is not None:
                body, changed = ch.value, True
                self._record(f, path, n, stream, ch.before, ch.after, ch.count)
        return body, changed

    async def _passthrough(self, request: web.Request, up: aiohttp.ClientResponse, headers: CIMultiDict[str],
                           head: bytes = b"") -> web.StreamResponse:
        """The upstream's answer as it comes (after `head`, what was already read of it), never held whole."""
        resp = web.StreamResponse(status=up.status, reason=up.reason, headers=headers)
        await resp.prepare(request)
        try:
            if head:
                await resp.write(head)
            async for data in up.content.iter_any():
                await resp.write(data)
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError):
            pass  # either side went away; nothing to tell anyone
        return resp

    async def _body(self, request: web.Request, up: aiohttp.ClientResponse, headers: CIMultiDict[str], faults: list[Fault],
                    path: str, n: int) -> web.StreamResponse:
        cap = self.max_response_bytes
        if up.content_length is not None and up.content_length > cap:
            return await self._passthrough(request, up, headers)
        buf = bytearray()
        async for piece in up.content.iter_any():
            buf += piece
            if len(buf) > cap:  # too large to rewrite: on as it came (the client's own cap judges it)
                return await self._passthrough(request, up, headers, bytes(buf))
        data = bytes(buf)
        try:
            body = jsonsafe.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # a hostile body is passed on as it came
            body = None
        if isinstance(body, dict):
            body, changed = self._apply(faults, "response", body, path, n, False)
            if changed:
                data = json.dumps(body, ensure_ascii=False).encode()
        return web.Response(status=up.status, body=data, headers=headers)

    async def _stream(self, request: web.Request, up: aiohttp.ClientResponse, headers: CIMultiDict[str],
                      mutators: list[tuple[Fault, StreamMutator]], path: str, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, reason=up.reason, headers=headers)
        await resp.prepare(request)
        chain = Chain([m for _, m in mutators])

        surface = surface_for(path)

        def frame(payloads: list[str]) -> bytes:
            return b"".join(sse_frame(surface, p) for p in payloads)

        logged = False

        def log_once() -> None:
            nonlocal logged
            if not logged:
                logged = True
                for f, m in mutators:
                    if m.changes:
                        self._record(f, path, n, True, m.changes[0][0], m.changes[0][1], len(m.changes))

        buf = bytearray()  # amortized appends: a long line arriving in small pieces is not copied once per piece
        seen, cap = 0, self.max_response_bytes
        try:
            async for data in up.content.iter_any():
                seen += len(data)
                if seen > cap or len(buf) + len(data) > cap:
                    # Past the cap (what the client would accept): what the mutators hold goes out, then the rest of
                    # the stream as it comes, unmutated; nothing more is held.
                    log_once()
                    await resp.write(frame(chain.flush()) + bytes(buf) + data)
                    async for more in up.content.iter_any():
                        await resp.write(more)
                    await resp.write_eof()
                    return resp
                if b"\n" not in data:
                    buf += data
                    continue
                buf += data
                *lines, rest = bytes(buf).split(b"\n")
                buf = bytearray(rest)
                out = []
                for line in lines:
                    text = line.decode("utf-8", errors="replace").rstrip("\r")
                    if text.startswith("data:"):
                        out.append(frame(chain.feed(text[5:].strip())))
                    elif text and not (surface != "chat" and text.startswith("event:")):
                        out.append((text + "\n").encode())  # id:, comments (and chat's event:) as they came; surfaces' event: lines are re-framed
                if out:
                    await resp.write(b"".join(out))
            tail = bytes(buf).decode("utf-8", errors="replace").strip()
            out = frame(chain.feed(tail[5:].strip())) if tail.startswith("data:") else b""
            await resp.write(out + frame(chain.flush()))
            log_once()  # before the end of the body, so a client that saw the end sees the log too
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError):
            pass  # a cut upstream or a gone client: the client sees the cut, as it would without us
        finally:
            log_once()
        return resp

    # -- lifecycle --

    async def _start(self) -> None:
        if isinstance(self._log_arg, (str, Path)):
            self._log = open(self._log_arg, "a", encoding="utf-8")
            self._owns_log = True
        else:
            self._log = self._log_arg
        # One pooled session for the proxy's life; no per-request client construction.
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=256 * 1024**2)  # image requests are large
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()
        if self._session:
            await self._session.close()
        if self._owns_log and self._log:
            self._log.close()

    def start(self) -> "Proxy":
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "Proxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ----------------------------------------------------------------------------------------------
# A typed config and a foreground server: verifier/cli/proxy.py builds the one and calls the other
# ----------------------------------------------------------------------------------------------


class ConfigError(ValueError):
    """Bad proxy settings or a port that cannot be bound: one line for the user (exit 2)."""


@dataclass(frozen=True)
class ProxyConfig:
    """What `verifier proxy` serves (verifier/cli/proxy.py builds it from the flags); `check` validates it."""

    upstream: str
    """OpenAI-compatible base URL to forward to."""
    faults: tuple[str, ...] = ()
    """Fault specs, "NAME[:RATE]"."""
    seed: int = 0
    """Selection seed: same seed and requests, same mutations."""
    host: str = "127.0.0.1"
    port: int = 8089
    log: str | None = None
    """JSON-lines file for the mutation log; None logs to stderr."""
    surfaces: tuple[str, ...] | None = None
    """API surfaces the faults apply on (chat, responses, messages); None: every one."""
    max_response_bytes: int = MAX_RESPONSE_BYTES
    """Largest response body or stream the proxy rewrites; larger ones pass unmutated, never buffered whole."""

    def check(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise ConfigError("--upstream must be an http:// or https:// URL")
        if self.surfaces is not None:
            known = sorted(set(PATHS.values()))
            unknown = [x for x in self.surfaces if x not in known]
            if unknown or not self.surfaces:
                raise ConfigError(f"--surface: unknown surface {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, got {self.port}")
        try:
            for spec in self.faults:
                parse_fault_spec(spec)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if self.log:
            try:
                Path(self.log).open("a", encoding="utf-8").close()
            except OSError as e:
                raise ConfigError(f"--log {self.log}: {e.strerror}") from None


def serve(config: ProxyConfig) -> int:
    """Run the proxy in the foreground until Ctrl-C (exit 0). ConfigError if it cannot listen."""
    proxy = Proxy(config.upstream, config.faults, seed=config.seed, host=config.host, port=config.port,
                  log=config.log or sys.stderr, surfaces=config.surfaces, max_response_bytes=config.max_response_bytes)
    try:
        asyncio.run(_serve(proxy, config))
    except KeyboardInterrupt:
        pass
    return 0


async def _serve(proxy: "Proxy", config: ProxyConfig) -> None:
    from verifier.wire.endpoint import redact_url

    try:
        await proxy._start()
    except OSError as e:
        await proxy._stop()
        raise ConfigError(f"cannot listen on {config.host}:{config.port}: {e.strerror}") from None
    names = ", ".join(f"{f.name}:{r:g}" for f, r in proxy.faults) or "none (pass-through)"
    where = ",".join(config.surfaces) if config.surfaces is not None else "every surface"
    print(f"verifier proxy: {proxy.url} -> {redact_url(config.upstream)}  faults: {names} on {where}  seed: {config.seed}",
          file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await proxy._stop()
