"""What the benchmark scripts share: a free port (the test bed's), waiting for a server process to answer, the machine line
printed beside every figure (figures on a shared 2-core machine move with its load), and the raw-socket ceiling
a client figure is read against."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for the test bed's own helpers
from verifier.testbed.engines import free_port  # noqa: E402,F401 - re-exported for the bench scripts


def wait_http(url: str, proc: subprocess.Popen, deadline_s: float = 60.0) -> None:
    """Poll `url` until it answers; fail at once if `proc` dies, or at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"server did not start at {url}") from None
            time.sleep(0.05)


def machine() -> str:
    info = Path("/proc/cpuinfo")
    cpu = next((line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "?") if info.exists() else "?"
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}"


async def _raw_worker(host: str, port: int, request: bytes, left: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while left[0] > 0:
            left[0] -= 1
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:80]
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
    finally:
        writer.close()


def raw_ceiling(base_url: str, path: str, body: dict, n: int, concurrency: int) -> float:
    """Wall seconds for n keep-alive POSTs of `body` at `concurrency` by the leanest client Python allows (one socket
    per worker, a prepared request, the response read by Content-Length and dropped): what any client can reach
    against this server on this machine, so a client's figure can be read against the server's own ceiling."""
    u = urllib.parse.urlsplit(base_url)
    data = json.dumps(body).encode()
    request = (f"POST {u.path.rstrip('/')}{path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\n\r\n").encode() + data

    async def run() -> float:
        left = [n]
        t0 = time.perf_counter()
        await asyncio.gather(*(_raw_worker(u.hostname, u.port, request, left) for _ in range(concurrency)))
        return time.perf_counter() - t0

    return asyncio.run(run())
