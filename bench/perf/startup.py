"""Time to first request: `verifier run` start to the test server seeing the first sample request, per suite.

    python bench/perf/startup.py [--only gsm8k,structured] [--data-root DIR] [--repeat N]

Each suite runs as `python -m verifier run --suite S ... --limit 5` in its own fresh process (so every import is
paid), against the test server running in this process. The clock starts just before the process is spawned and
stops when the server receives the first chat request that is not a preflight ping (CLOCK_MONOTONIC is shared by
both processes' view of time). Target: under 2 s for every suite. The machine's load average is printed with the
figures: on a shared 2-core machine they move with it. Suites whose data is not under --data-root use their
built-in smoke subset.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the repository; bench/ for benchlib

from verifier.testbed.server import Reply, Script, TestServer  # noqa: E402

from benchlib import machine  # noqa: E402  (bench/ is on the path, above)

TARGET_S = 2.0
# suite -> path under the data root passed as --data (None: the suite's own built-in data).
DATA: dict[str, str | None] = {
    "smoke": None, "multiturn": None, "gsm8k": "gsm8k/test.jsonl", "gsm8k_cot": "gsm8k/test.jsonl",
    "structured": "jsonschemabench", "bfcl": "bfcl", "vision": "easy_vqa", "replay": "k2vv/format_example.json",
}

# multiturn's follow-up turns are not in a --limit selection (the journal check refuses them): its 20 items run.
NO_LIMIT = {"multiturn"}


class FirstRequest(Script):
    """Records when the first sample request arrives (preflight pings never reach `next`)."""

    def __init__(self) -> None:
        super().__init__(lambda req: Reply(content="The final answer is 1"))
        self.first: float | None = None

    def next(self, req: dict[str, Any]) -> Reply:
        if self.first is None:
            self.first = time.monotonic()
        return super().next(req)


def time_suite(suite: str, data_root: Path) -> tuple[float | None, float, int]:
    """(seconds to the first sample request or None, seconds for the whole run, exit code)."""
    rel = DATA.get(suite)
    data = ["--data", str(data_root / rel)] if rel and (data_root / rel).exists() else ([] if rel is None else ["--smoke"])
    with TestServer(FirstRequest()) as srv, tempfile.TemporaryDirectory() as d:
        limit = [] if suite in NO_LIMIT else ["--limit", "5"]
        cmd = [sys.executable, "-m", "verifier", "run", "--suite", suite, *data, *limit,
               "--base-url", srv.url, "--model", "m", "--out", str(Path(d) / "run"), "--quiet"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=300)
        total = time.monotonic() - t0
        first = srv.script.first
    if proc.returncode != 0:
        print(f"  {suite}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return (None if first is None else first - t0), total, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated suites (default: every built-in suite)")
    ap.add_argument("--data-root", default=os.environ.get("VERIFIER_SHARED_DATA", str(ROOT.parent / "shared" / "data")),
                    help="folder with gsm8k/, bfcl/, jsonschemabench/, easy_vqa/ (default $VERIFIER_SHARED_DATA, else ../shared/data beside the repo)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per suite; the minimum is reported")
    a = ap.parse_args()
    suites = a.only.split(",") if a.only else list(DATA)
    print(machine())
    print(f"{'suite':<12} {'first request':>14} {'whole run':>10}")
    worst = 0.0
    for suite in suites:
        runs = [time_suite(suite, Path(a.data_root)) for _ in range(max(1, a.repeat))]
        firsts = [f for f, _, _ in runs if f is not None]
        first = min(firsts) if firsts else None
        worst = max(worst, first if first is not None else float("inf"))
        shown = f"{first:.2f} s" if first is not None else "none"
        print(f"{suite:<12} {shown:>14} {min(t for _, t, _ in runs):>8.2f} s")
    print(f"load average now {os.getloadavg()[0]:.1f}; target: first request < {TARGET_S:.0f} s for every suite: "
          + ("met" if worst < TARGET_S else "NOT met"))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("startup"):  # the figures go to bench/results/startup.md
        main()
