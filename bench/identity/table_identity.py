"""Byte identity of the matrix and the sweep across a refactor: what byte_identity.py's replay does not cover.

    python bench/identity/table_identity.py --base DIR [--keep DIR]

DIR is the base checkout (e.g. `git archive main | tar -x -C DIR`); the checkout this file sits in is the one under
test. In this process it starts the project's scripted test server (verifier/testbed, the `arithmetic` responder)
and the fault-injection proxy in front of it (healthy, and three frontend faults), then, each command in its own
process with one checkout first on the path:

- gates the shipped `demo-smoke` golden against the four endpoints with this checkout (one gate file, several
  endpoints), then runs `verifier matrix` over the four run directories with the base and with this checkout into
  the same output path, and compares matrix.json, matrix.md and matrix.html byte for byte, and the printed table;
- runs one sweep file (three configurations: a healthy endpoint claimed lossless, a faulty one, one where nothing
  listens) with each checkout against the same servers, and compares each configuration's config.json; then
  combines one set of configuration directories with each checkout and compares sweep.json, sweep.md and
  sweep.html, and the printed table (speed figures differ between two sweeps, never between two combines).

Exit 0 when everything is identical, 1 otherwise (the differing files are printed).
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT))

PROVIDERS = {"healthy": [], "reasoning-parser": ["answer_in_reasoning"], "no-finish-reason": ["finish_reason_missing"],
             "no-usage": ["usage_dropped"]}
PERF = ('[perf]\nconcurrency = [1, 2]\nprompt_tokens = [16]\noutput_tokens = 4\nrequests = 2\nrepeats = 2\n'
        'warmup = 0\n')


def verifier(checkout: Path, *args: object) -> tuple[int, str, str]:
    """`verifier ARGS` in its own process with `checkout` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    code = "import sys; from verifier.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                       cwd=checkout, timeout=1800)
    return p.returncode, p.stdout, p.stderr


def same(a: Path, b: Path, names: list[str], what: str) -> bool:
    diff = [n for n in names if not filecmp.cmp(a / n, b / n, shallow=False)]
    print(f"{what}: {'identical' if not diff else 'DIFFERENT: ' + ', '.join(diff)} ({len(names)} files)")
    return not diff


def matrix(base: Path, work: Path, urls: dict[str, str]) -> bool:
    golden = CHECKOUT / "goldens" / "demo-smoke"
    endpoints = "".join(f'\n[[endpoints]]\nname = "{n}"\nbase_url = "{u}"\nmodel = "m"\nmax_retries = 0\n'
                        for n, u in urls.items())
    (work / "gate.toml").write_text(f'golden = "{golden.as_posix()}"\n[budgets]\ninfra = 1.0\n[outputs]\n'
                                    f'dir = "{(work / "runs").as_posix()}"\n{endpoints}')
    code, _, err = verifier(CHECKOUT, "gate", "--config", work / "gate.toml")
    print(f"gate file, {len(urls)} endpoints: exit {code}")
    printed = {}
    for side, checkout in (("base", base), ("this", CHECKOUT)):
        printed[side] = verifier(checkout, "matrix", "--golden", golden, "--out", work / "matrix",
                                 *(f"{n}={work / 'runs' / n}" for n in urls))
        (work / "matrix").rename(work / f"matrix-{side}")
    print(f"matrix exit codes: base {printed['base'][0]}, this {printed['this'][0]}; printed table and stderr "
          f"{'identical' if printed['base'] == printed['this'] else 'DIFFERENT'}")
    return printed["base"] == printed["this"] and same(work / "matrix-base", work / "matrix-this",
                                                       ["matrix.json", "matrix.md", "matrix.html"], "matrix files")


def sweep(base: Path, work: Path, good: str, faulty: str) -> bool:
    from verifier.testbed.engines import free_port

    golden = CHECKOUT / "goldens" / "demo-smoke"
    text = f'golden = "{golden.as_posix()}"\n[gate]\ninfra_budget = 1.0\nmax_retries = 0\n{PERF}'
    configs = (("healthy", good, True), ("faulty", faulty, False), ("down", f"http://127.0.0.1:{free_port()}/v1", False))
    for name, url, lossless in configs:
        text += f'\n[[config]]\nname = "{name}"\nbase_url = "{url}"\nmodel = "m"\nlossless = {str(lossless).lower()}\n'
    (work / "sweep.toml").write_text(text)
    for side, checkout in (("base", base), ("this", CHECKOUT)):
        code, _, _ = verifier(checkout, "sweep", work / "sweep.toml", "--out", work / "sweep", "--quiet")
        print(f"sweep with the {side} checkout: exit {code}")
        (work / "sweep").rename(work / f"sweep-{side}")
    ok = all(same(work / "sweep-base" / n, work / "sweep-this" / n, ["config.json"], f"{n}/config.json")
             for n, _, _ in configs)
    printed = {}
    for side, checkout in (("base", base), ("this", CHECKOUT)):
        printed[side] = verifier(checkout, "sweep", "--combine", *(work / "sweep-this" / n for n, _, _ in configs),
                                 "--out", work / "combined")
        (work / "combined").rename(work / f"combined-{side}")
    print(f"sweep --combine exit codes: base {printed['base'][0]}, this {printed['this'][0]}; printed table "
          f"{'identical' if printed['base'] == printed['this'] else 'DIFFERENT'}")
    return (ok and printed["base"] == printed["this"]
            and same(work / "combined-base", work / "combined-this", ["sweep.json", "sweep.md", "sweep.html"],
                     "sweep files"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the base checkout, e.g. `git archive main | tar -x -C DIR`")
    ap.add_argument("--keep", help="keep the run, matrix and sweep directories here (default: a temporary directory)")
    a = ap.parse_args()
    from verifier.testbed.proxy import Proxy
    from verifier.testbed.server import Script, TestServer, arithmetic

    with contextlib.ExitStack() as stack:
        work = Path(a.keep) if a.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if a.keep:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
        srv = stack.enter_context(TestServer(Script(arithmetic)))
        urls = {n: stack.enter_context(Proxy(srv.url, faults, seed=0)).url for n, faults in PROVIDERS.items()}
        print(f"base {Path(a.base).resolve()}, this {CHECKOUT}")
        ok = matrix(Path(a.base).resolve(), work, urls)
        ok = sweep(Path(a.base).resolve(), work, urls["healthy"], urls["reasoning-parser"]) and ok
    print("identical" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
