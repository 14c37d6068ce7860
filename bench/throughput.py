"""Client throughput, latency efficiency and memory, against the local test server.

    python bench/throughput.py

Prints: req/s at zero latency; wall time vs the ideal n*latency/concurrency at
200 ms, 1,000 requests, concurrency 64; peak RSS of `verifier run` for 10,000 requests.
The server runs in its own process so client and server do not share a GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from suites import SUITES
from verifier import runner
from verifier.endpoint import EndpointConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(delay: float):
    """The test server in its own process; yields its base URL."""
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "verifier.testbed.server", "--port", str(port), "--responder", "arithmetic", "--delay", str(delay)])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(200):
            try:
                httpx.get(url + "/models", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError("test server did not start")
        yield url
    finally:
        p.terminate()
        p.wait()


def collect(url: str, n: int, concurrency: int) -> float:
    suite = SUITES["smoke"]
    samples = suite.load(None, True)
    cfg = EndpointConfig(url, "bench", concurrency=concurrency, max_retries=0)
    sampling = {"defaults": runner.DEFAULT_SAMPLING, "overrides": {}}
    work = runner.plan([(suite, samples)], "bench", sampling, {}, epochs=(n + len(samples) - 1) // len(samples), modes=["chat"])[:n]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        stats = asyncio.run(runner.execute(Path(d), work, cfg, quiet=True))
        wall = time.perf_counter() - t0
    assert stats["errors"] == 0, stats
    return wall


def main() -> None:
    with server(0.0) as url:
        collect(url, 200, 64)  # warm-up
        n = 3000
        wall = collect(url, n, 64)
        print(f"zero latency: {n} requests, concurrency 64: {n / wall:.0f} req/s (target >= 500)")

    with server(0.2) as url:
        n, c = 1000, 64
        wall = collect(url, n, c)
        ideal = n * 0.2 / c
        print(f"200 ms latency: {n} requests, concurrency {c}: wall {wall:.2f} s vs ideal {ideal:.2f} s = {100 * ideal / wall:.1f}% of ideal (target >= 95%)")

    with server(0.0) as url, tempfile.TemporaryDirectory() as d:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "verifier", "run", "--suite", "smoke", "--epochs", "500", "--concurrency", "64",
                            "--base-url", url, "--model", "bench", "--out", str(Path(d) / "r"), "--quiet"], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        assert r.returncode == 0, r.stderr
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"10,000 requests via `verifier run` (collect + score): {wall:.1f} s, peak RSS {max(peak, before) / 1024:.0f} MB (target < 300 MB)")


if __name__ == "__main__":
    main()
