"""The example reports in reports/: what `verifier demo` writes, kept so a reviewer can open a report without running
anything. Regenerate after a change to the report templates or the comparison (tests/test_example_reports.py fails
until then):

    python scripts/example_reports.py

Runs `verifier demo` (the test server gated against the shipped golden `demo-smoke`, healthy and behind the
`answer_in_reasoning` fault) in a temporary directory with this checkout's code, and copies each gate's run
directory into reports/<example>/: the report, summary.md, junit.xml, samples.csv, comparison.json and the run
files the report is rendered from. The golden is recorded by name (it is package data), never by this machine's path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
GOLDEN = "demo-smoke"
# example directory -> the demo's gate directory, and the exit code the demo must have given it
EXAMPLES = {"demo-pass": ("healthy", 0), "demo-frontend-regression": ("faulty-frontend", 10)}


def portable(run_dir: Path, was: Path) -> None:
    """No path of this machine in the copy: the shipped golden is named by its packaged name, and the run directory
    the demo wrote (`was`, a temporary directory) by its place in the repository."""
    golden = str(ROOT / "verifier" / "goldens" / GOLDEN)
    here = str(run_dir.relative_to(ROOT))
    for name in ("comparison.json", "summary.md", "junit.xml"):
        f = run_dir / name
        f.write_text(f.read_text(encoding="utf-8").replace(golden, GOLDEN).replace(str(was), here), encoding="utf-8")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
        p = subprocess.run([sys.executable, "-m", "verifier", "demo", "--out", str(out), "--quiet"], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stdout[-2000:], p.stderr[-2000:], sep="\n", file=sys.stderr)
            return 1
        for name, (gate_dir, code) in EXAMPLES.items():
            src = out / gate_dir
            doc = json.loads((src / "comparison.json").read_text(encoding="utf-8"))
            assert doc["exit_code"] == code, (name, doc["exit_code"])
            dest = REPORTS / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".lock", "observations.jsonl"))  # sealed with this user's key: no one else's to read
            portable(dest, src)
            print(f"{dest.relative_to(ROOT)}: {doc['status']} (exit {code})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
