"""Peak RSS and wall time of whole `verifier` commands against the hostile server (issue #22), each in a fresh
process. Too slow for the fast tier (tests/test_wire_hostile_endpoints.py measures the read paths in one child instead):

    python bench/perf/hostile_memory.py

Rows: a 1 GiB gzip bomb on GET /models (`run`), 8 M `data:{}` events at --concurrency 1 and 4 (`run`), four
concurrent 62 MB bodies (`run`, journal and scoring included), and `score` of a ~160 MB journal (80 records of
2 MB) against `score` of a one-record run. Exits 1 if any peak is 500 MB or more, or scoring grows by 40 MB or more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from hostile_server import HostileServer  # noqa: E402

SCRIPT = ("import json, resource, sys\nfrom verifier.cli import main\ncode = main(sys.argv[1:])\n"
          "print(json.dumps({'code': code, 'rss_mb': int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))")


def cli(*args: object) -> tuple[int, float, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if not p.stdout.strip():
        raise SystemExit(p.stderr[-2000:])
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    return doc["code"], doc["rss_mb"], time.monotonic() - t0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hostile-memory-"))
    run = ["run", "--suite", "smoke", "--smoke", "--model", "m", "--quiet", "--max-retries", "0"]
    rows, ok = [], True
    cases = [("1 GiB gzip bomb on /models", "models_bomb", ["--limit", "1"]),
             ("8 M events, 1 stream", "tiny_events", ["--limit", "1", "--mode", "chat-stream"]),
             ("8 M events, 4 concurrent", "tiny_events", ["--limit", "4", "--mode", "chat-stream", "--concurrency", "4"]),
             ("4 concurrent 62 MB bodies", "padded", ["--limit", "4", "--concurrency", "4"])]
    for i, (what, behaviour, extra) in enumerate(cases):
        with HostileServer(behaviour) as srv:
            code, rss, wall = cli(*run, "--base-url", srv.url, "--out", tmp / f"r{i}", *extra)
        rows.append((what, code, rss, wall))
        ok &= code == 0 and rss < 500
    with HostileServer("padded", pad_mb=2) as srv:
        cli(*run, "--base-url", srv.url, "--out", tmp / "big", "--epochs", "4", "--concurrency", "4", "--limit", "20")
        cli(*run, "--base-url", srv.url, "--out", tmp / "small", "--limit", "1")
    size = (tmp / "big" / "responses.jsonl").stat().st_size / 2**20
    _, base, _ = cli("score", tmp / "small")
    code, rss, wall = cli("score", tmp / "big")
    rows.append((f"score a {size:.0f} MB journal (one-record run: {base:.0f} MB)", code, rss, wall))
    ok &= code == 0 and rss - base < 40
    for what, code, rss, wall in rows:
        print(f"{what:<50} exit {code}  peak RSS {rss:6.0f} MB  {wall:5.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("hostile_memory"):  # the figures go to bench/results/hostile_memory.md
        sys.exit(main())
