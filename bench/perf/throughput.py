"""Client throughput, latency efficiency and memory, against the local test server.

    python bench/perf/throughput.py [--only zero,latency,scale]

Prints:
- zero: req/s and the client's CPU per request at zero latency (3,000 requests, concurrency 64);
- latency: wall time vs the ideal n*latency/concurrency at 200 ms, 1,000 requests, concurrency 64 (target >= 95%),
  beside a raw-socket client's wall on the same server (the server's own ceiling), on the test server and on a
  lean fixed-latency server (bench/perf/lean_server.py);
- scale: `verifier run` for 10,000 requests at concurrency 256 and zero latency, in its own process: request-phase
  req/s (target >= 1,000), end-to-end wall time (start-up + requests + scoring) and that process's peak RSS
  (target < 300 MB); the journal is flushed per record as in every run.
The server runs in its own process so client and server do not share a GIL. The machine's load average is
printed with the figures: on a shared machine they move with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the repository; bench/ for benchlib

from suites import BUILTIN as SUITES  # noqa: E402
from verifier.execution import runner  # noqa: E402
from verifier.wire.endpoint import EndpointConfig  # noqa: E402

from benchlib import free_port, machine, raw_ceiling, wait_http  # noqa: E402  (bench/ is on the path: run as a script)

# Runs `verifier run` and reports its own peak RSS (RUSAGE_CHILDREN would mix in every earlier child).
RSS_WRAPPER = ("import resource, sys; from verifier.cli import main; rc = main(sys.argv[1:]); "
               "sys.stderr.write('\\nmaxrss_kb=%d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")


@contextlib.contextmanager
def server(delay: float, lean: bool = False):
    """The test server (or bench/perf/lean_server.py) in its own process; yields its base URL."""
    port = free_port()
    cmd = ([str(ROOT / "bench" / "perf" / "lean_server.py"), str(port), str(delay)] if lean else
           ["-m", "verifier.testbed.server", "--port", str(port), "--responder", "arithmetic", "--delay", str(delay)])
    p = subprocess.Popen([sys.executable, *cmd], cwd=ROOT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_http(url + "/models", p)
        yield url
    finally:
        p.terminate()
        p.wait()


def collect(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """(wall seconds, client CPU ms per request) for n smoke requests through runner.execute."""
    suite = SUITES["smoke"]
    samples = suite.load(None, True)
    cfg = EndpointConfig(url, "bench", concurrency=concurrency, max_retries=0)
    sampling = {"defaults": runner.DEFAULT_SAMPLING, "overrides": {}}
    work = runner.plan([(suite, samples)], "bench", sampling, {}, epochs=(n + len(samples) - 1) // len(samples), modes=["chat"])[:n]
    with tempfile.TemporaryDirectory() as d:
        t, t0 = os.times(), time.perf_counter()
        stats = asyncio.run(runner.execute(Path(d), work, cfg, quiet=True))
        wall, t2 = time.perf_counter() - t0, os.times()
    assert stats["errors"] == 0, stats
    return wall, 1000 * (t2.user - t.user + t2.system - t.system) / n


def zero_latency() -> None:
    import openai  # noqa: F401 - imported before the clock starts: this measures requests, not start-up

    with server(0.0) as url:
        collect(url, 200, 64)  # warm-up
        n = 3000
        wall, cpu = collect(url, n, 64)
        print(f"zero latency: {n} requests, concurrency 64: {n / wall:.0f} req/s, client CPU {cpu:.2f} ms/request", flush=True)


def latency() -> None:
    """Verifier against the 16-wave ideal, beside the raw-socket ceiling on the same server (what any client can
    reach there), on the project's test server and on bench/perf/lean_server.py (a server that adds no CPU of its own)."""
    import openai  # noqa: F401

    n, c = 1000, 64
    ideal = n * 0.2 / c
    waves = -(-n // c) * 0.2  # the last partial wave still takes one full latency
    sampling = {"defaults": runner.DEFAULT_SAMPLING, "overrides": {}}
    body = runner.build_request(SUITES["smoke"], SUITES["smoke"].load(None, True)[0], "bench", sampling, {}, "chat")
    print(f"200 ms latency, {n} requests, concurrency {c}: ideal {ideal:.3f} s (target >= 95%; "
          f"{100 * ideal / waves:.1f}% is the most {-(-n // c)} waves allow)", flush=True)
    for lean, name in ((False, "test server"), (True, "lean server")):
        with server(0.2, lean) as url:
            collect(url, 128, c)  # warm-up: connections and imports
            raw = raw_ceiling(url, "/chat/completions", body, n, c)
            wall, _ = collect(url, n, c)
        print(f"  {name}: verifier {wall:.2f} s = {100 * ideal / wall:.1f}% of ideal; raw-socket ceiling {raw:.2f} s = "
              f"{100 * ideal / raw:.1f}%; verifier reaches {100 * raw / wall:.1f}% of the ceiling", flush=True)


def scale(n: int = 10_000, c: int = 256) -> None:
    with server(0.0) as url, tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r"
        t0 = time.perf_counter()
        # Not --quiet: the progress line's final req/s is the request phase's own rate.
        r = subprocess.run([sys.executable, "-c", RSS_WRAPPER, "run", "--suite", "smoke", "--epochs", str(n // 20), "--concurrency", str(c),
                            "--base-url", url, "--model", "bench", "--out", str(out), "--max-retries", "0"],
                           capture_output=True, text=True, cwd=ROOT, env={**os.environ, "VERIFIER_PROGRESS_INTERVAL": "1"})
        wall = time.perf_counter() - t0
        assert r.returncode == 0, r.stderr[-2000:]
        lines = (out / "responses.jsonl").read_text().splitlines()
        assert len(lines) == n and all(json.loads(x)["error"] is None for x in lines)
        rates = re.findall(r"([\d.]+) req/s", r.stderr)
        rss_mb = int(re.search(r"maxrss_kb=(\d+)", r.stderr).group(1)) / 1024
        print(f"scale: {n:,} requests, concurrency {c}, zero latency, `verifier run` in its own process: request phase "
              f"{float(rates[-1]):.0f} req/s (target >= 1,000); end to end (start-up + requests + scoring) {wall:.1f} s = "
              f"{n / wall:.0f} req/s; peak RSS {rss_mb:.0f} MB (target < 300 MB); journal flushed per record", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="zero,latency,scale", help="comma-separated: zero, latency, scale")
    a = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    for name in a.only.split(","):
        {"zero": zero_latency, "latency": latency, "scale": scale}[name.strip()]()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
