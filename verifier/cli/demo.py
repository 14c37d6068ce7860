"""`verifier demo`: the whole loop on the embedded default, no network."""

from __future__ import annotations

import argparse
from pathlib import Path

# Package data, so a non-editable install (`pip install .`) has it too; the checkout's goldens/demo-smoke links here.
DEMO_GOLDEN = Path(__file__).resolve().parent.parent / "goldens" / "demo-smoke"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the whole loop on the embedded default (no network)")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-demo)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    """Gate a healthy endpoint, then the same one behind a frontend fault: exit 0, then 10."""
    from verifier.app.collect import EndpointSpec, default_run_dir
    from verifier.app.gate import GateSpec
    from ..errors import UsageError
    from ..testbed.proxy import Proxy
    from ..testbed.server import Script, TestServer, arithmetic
    from .gate import run_gate

    if not (DEMO_GOLDEN / "golden.json").exists():
        raise UsageError(f"demo golden not found at {DEMO_GOLDEN}; the installation is incomplete (reinstall verifier)")
    root = Path(a.out) if a.out else default_run_dir("demo")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; pass another --out")
    codes = {}
    with TestServer(Script(arithmetic)) as srv:
        with Proxy(srv.url, ["answer_in_reasoning"], seed=0) as broken:
            for name, url in (("healthy", srv.url), ("faulty-frontend", broken.url)):
                print(f"== gate {name} endpoint against {DEMO_GOLDEN.name}", flush=True)
                spec = GateSpec(golden=DEMO_GOLDEN, endpoint=EndpointSpec(base_url=url, model="demo"), out=root / name, quiet=a.quiet)
                codes[name] = run_gate(spec).exit_code
    ok = codes == {"healthy": 0, "faulty-frontend": 10}
    print(f"demo: healthy endpoint exit {codes['healthy']} (expected 0), faulty frontend exit {codes['faulty-frontend']} (expected 10)")
    print(f"runs, comparisons and reports under {root}")
    return 0 if ok else 1
