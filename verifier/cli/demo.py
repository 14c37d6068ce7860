"""`verifier demo`: the whole loop on the embedded default, no network."""

from __future__ import annotations

import argparse
from pathlib import Path

# Package data, so a non-editable install (`pip install .`) has it too; the checkout's goldens/demo-smoke links here.
DEMO_GOLDEN = Path(__file__).resolve().parent.parent / "goldens" / "demo-smoke"
DEMO_TOOLS_GOLDEN = DEMO_GOLDEN.parent / "demo-bfcl"
"""The bfcl smoke subset answered by the test server with its ground-truth tool calls (chat, chat-stream)."""
TOOL_FAULT = "tool_args_invalid_json"


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("demo", help="the whole loop on the embedded default (no network)")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-demo)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    """Gate a healthy endpoint, the same one behind a reasoning-parser fault, and behind a tool-call-parser fault:
    exit 0, then 10 and 10, each failure with the component it names."""
    from verifier.app.collect import EndpointSpec, default_run_dir
    from verifier.app.spec import GateSpec
    from ..errors import UsageError
    from ..testbed.proxy import Proxy
    from ..testbed.server import Script, TestServer, arithmetic
    from .gate import run_gate

    for golden in (DEMO_GOLDEN, DEMO_TOOLS_GOLDEN):
        if not (golden / "golden.json").exists():
            raise UsageError(f"demo golden not found at {golden}; the installation is incomplete (reinstall verifier)")
    root = Path(a.out) if a.out else default_run_dir("demo")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; pass another --out")
    codes, components = {}, {}
    with TestServer(Script(arithmetic)) as srv:
        with Proxy(srv.url, ["answer_in_reasoning"], seed=0) as broken, Proxy(srv.url, [TOOL_FAULT], seed=0) as broken_tools:
            for name, golden, url in (("healthy", DEMO_GOLDEN, srv.url), ("faulty-frontend", DEMO_GOLDEN, broken.url),
                                      ("faulty-tool-parser", DEMO_TOOLS_GOLDEN, broken_tools.url)):
                print(f"== gate {name} endpoint against {golden.name}", flush=True)
                spec = GateSpec(golden=golden, endpoint=EndpointSpec(base_url=url, model="demo"), out=root / name, quiet=a.quiet)
                doc = run_gate(spec)
                codes[name] = doc.exit_code
                components[name] = doc.diagnosis[0].component if doc.diagnosis else None
    expected = {"healthy": 0, "faulty-frontend": 10, "faulty-tool-parser": 10}
    ok = codes == expected
    for name, code in codes.items():
        blamed = f", blamed on the {components[name]}" if components[name] else ""
        print(f"demo: {name} endpoint exit {code} (expected {expected[name]}){blamed}")
    print(f"runs, comparisons and reports under {root}")
    return 0 if ok else 1
