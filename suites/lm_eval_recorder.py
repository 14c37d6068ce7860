"""A recording pass-through between lm-eval's client and the endpoint under test.

lm-eval's `local-chat-completions` keeps only the generated text, so an import had to synthesize usage,
latency and finish_reason, and the frontend signals were blind on lm-eval runs. `verifier lm-eval` puts
this recorder in front of the endpoint: lm-eval talks to 127.0.0.1, every request is forwarded unchanged,
and the exact request body, status, response body and latency are kept, so the imported run carries the
real wire bytes. Header values (the API key) are forwarded, never recorded.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recorded:
    """One round trip as lm-eval's client made it."""

    request: dict[str, Any]
    """The JSON body sent."""
    status: int
    """HTTP status of the endpoint's answer (0 when the endpoint could not be reached)."""
    body: str
    """The response body, verbatim."""
    latency_ms: float
    """Time from forwarding the request to the end of the response body."""


def messages_key(messages: Any) -> str:
    """How a recording is found again for an lm-eval sample: its chat messages, canonically serialized."""
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


@dataclass
class Recorder:
    """Context manager: `.url` is the base URL to give lm-eval; `.by_messages()` the recordings afterwards."""

    upstream: str
    """The endpoint's base URL, e.g. http://host:8080/v1."""
    timeout_s: float = 600.0
    records: list[Recorded] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: Any = None
        self._session: Any = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: Any) -> Any:
        from aiohttp import ClientError, web

        raw = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length", "accept-encoding"}}
        t0 = time.perf_counter()
        try:
            async with self._session.request(request.method, self.upstream.rstrip("/") + request.rel_url.path_qs,
                                             data=raw, headers=headers) as resp:
                body, status, ctype = await resp.read(), resp.status, resp.headers.get("Content-Type", "application/json")
        except (ClientError, asyncio.TimeoutError) as e:
            body, status, ctype = json.dumps({"error": f"{type(e).__name__}"}).encode(), 0, "application/json"
        latency = (time.perf_counter() - t0) * 1000
        try:
            sent = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            sent = {}
        if isinstance(sent, dict):
            with self._lock:
                self.records.append(Recorded(sent, status, body.decode("utf-8", "replace"), round(latency, 3)))
        return web.Response(body=body, status=status or 502, headers={"Content-Type": ctype})

    async def _start(self) -> None:
        import aiohttp
        from aiohttp import web

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s), auto_decompress=True)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        await self._runner.cleanup()
        await self._session.close()

    def __enter__(self) -> "Recorder":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def by_messages(self) -> dict[str, Recorded]:
        """{messages key: the last answered recording} (lm-eval retries failures; the last attempt is what it used)."""
        out: dict[str, Recorded] = {}
        for r in self.records:
            if "messages" in r.request:
                key = messages_key(r.request["messages"])
                if r.status == 200 or key not in out:
                    out[key] = r
        return out
