"""How exact is the sweep's performance probe? Prints its figures against a test server told a fixed TTFT and
inter-token latency, and against the server's own record of when each event left.

    python bench/perf/perf_probe.py [--delay 0.4] [--itl 0.05] [--tokens 32] [--concurrency 1,8,32]

The server runs in this process (its event loop in a thread), so on a busy machine both sides slow down; run it on
a quiet one. The latest figures: bench/results/perf_probe.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]  # the repository; bench/ for benchlib

from benchlib import machine  # noqa: E402
from verifier.execution import perf  # noqa: E402
from verifier.testbed.server import Reply, Script, TestServer  # noqa: E402
from verifier.testbed.server import _usage as usage_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.4, help="seconds before the first event")
    ap.add_argument("--itl", type=float, default=0.05, help="seconds between events")
    ap.add_argument("--tokens", type=int, default=32, help="words (tokens) per answer")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    words = " ".join(f"w{i}" for i in range(a.tokens))
    reply = Reply(content=words, delay_s=a.delay, chunk_delay_s=a.itl)
    tokens = usage_of(reply, {})["completion_tokens"]
    script = Script(lambda req: reply)
    levels = tuple(int(x) for x in a.concurrency.split(","))
    spec = perf.PerfSpec(concurrencies=levels, prompt_tokens=(64,), output_tokens=tokens, repeats=a.repeats, warmup=1)
    print(machine())
    with TestServer(script) as srv:
        doc = perf.probe(srv.url, "m", spec)
    told_ttft, told_lat = a.delay + a.itl, a.delay + (a.tokens + 3) * a.itl
    start = 0
    for lv in doc["levels"]:
        n = 1 + lv["rounds"] * lv["requests_per_round"]
        times = script.stream_times[start + 1:start + n]
        start += n
        did_ttft = sum(t["frames"][1] - t["arrival"] for t in times) / len(times)
        did_lat = sum(t["frames"][-1] - t["arrival"] for t in times) / len(times)
        f = lv["figures"]
        print(f"c={lv['concurrency']:>3}: TTFT p50 {f['ttft_p50_s']['mean'] * 1000:7.1f} ms (told {told_ttft * 1000:.0f}, "
              f"server did {did_ttft * 1000:.1f}: {100 * (f['ttft_p50_s']['mean'] / did_ttft - 1):+.1f}%), "
              f"ITL {f['itl_mean_s']['mean'] * 1000:.2f} ms (told {a.itl * 1000:.0f}), "
              f"latency p50 {f['latency_p50_s']['mean']:.3f} s (told {told_lat:.3f}, server did {did_lat:.3f}: "
              f"{100 * (f['latency_p50_s']['mean'] / did_lat - 1):+.1f}%), aggregate {f['aggregate_tokens_per_s']['mean']:.1f} tok/s, "
              f"client {lv['client']['cpu_ms_per_request']:.2f} ms CPU/request, {100 * lv['client']['core_share']:.1f}% of a core")
    for w in doc["warnings"]:
        print("warning:", w)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("perf_probe"):  # the figures go to bench/results/perf_probe.md
        main()
