"""`verifier testbed serve`: the scripted OpenAI-compatible test endpoint, so every command can be tried without a model.

It prints its base URL on stdout (one line, flushed) once it accepts connections, and serves until
Ctrl-C or SIGTERM. Flags are declared here so `--help` does not load aiohttp; tests/test_cli_commands.py
checks they match verifier/testbed/server.py's.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

RESPONDER_NAMES = ("arithmetic", "echo")  # = sorted(testbed.server.RESPONDERS); a test checks it


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("testbed", help="local test endpoints: `verifier testbed serve` starts a scripted OpenAI-compatible server")
    tsub = p.add_subparsers(dest="testbed_cmd", required=True)
    s = tsub.add_parser("serve", help="serve the scripted test endpoint on 127.0.0.1 and print its base URL",
                        description="Serve the scripted OpenAI-compatible test endpoint on 127.0.0.1. The first stdout line "
                                    "is its base URL, e.g. http://127.0.0.1:8080/v1; Ctrl-C stops it.")
    add_arguments(s)
    s.add_argument("--fault", action="append", default=[], metavar="NAME[:RATE]",
                   help="serve through the fault-injection proxy with this fault (repeatable; see verifier proxy --list-faults)")
    s.add_argument("--seed", type=int, default=0, help="with --fault: the proxy's selection seed (default 0)")
    s.set_defaults(fn=handle)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 = any free port)")
    ap.add_argument("--script", help="JSON file: {responder, rules: [{match, reply}], queue: [reply...]}")
    ap.add_argument("--responder", choices=RESPONDER_NAMES, default="arithmetic",
                    help="arithmetic (default: right answers to the smoke suite) or echo")
    ap.add_argument("--delay", type=float, default=0.0, help="latency added to every reply, seconds")
    ap.add_argument("--honour-sampling", action="store_true", help="validate and apply temperature/top_p/max_tokens like a real engine")
    ap.add_argument("--bfcl-data", metavar="DIR", help="BFCL data dir whose samples (single- and multi-turn) are answered with their "
                    "ground-truth tool calls (default: $VERIFIER_BFCL_DATA, and always the built-in bfcl smoke subset)")


def handle(a: argparse.Namespace) -> int:
    import contextlib

    from ..errors import UsageError
    from ..testbed.proxy import Proxy
    from ..testbed.server import ServerConfig, TestServer, long_running_script

    config = ServerConfig(port=a.port, script=a.script, responder=a.responder, delay=a.delay, honour_sampling=a.honour_sampling,
                          bfcl_data=a.bfcl_data)
    try:
        script = long_running_script(config)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise UsageError(f"--script {a.script}: {e}" if a.script else str(e)) from None
    def cannot_listen(e: OSError) -> UsageError:
        return UsageError(f"cannot listen on 127.0.0.1:{a.port} ({e.strerror}); pass another --port (0 = any free port)")

    with contextlib.ExitStack() as stack:
        # --port is where the endpoint asked for listens: with --fault that is the faulty proxy, and the healthy
        # server behind it takes any free port (said on stderr, for a side-by-side gate).
        try:
            srv = stack.enter_context(TestServer(script, port=0 if a.fault else a.port))
        except OSError as e:
            raise cannot_listen(e) from None
        url = srv.url
        if a.fault:
            try:
                url = stack.enter_context(Proxy(srv.url, a.fault, seed=a.seed, port=a.port)).url
            except ValueError as e:
                raise UsageError(str(e)) from None
            except OSError as e:
                raise cannot_listen(e) from None
        print(url, flush=True)
        behind = f"; the healthy server behind it: {srv.url}" if a.fault else ""
        print(f"serving the scripted test endpoint ({'script ' + a.script if a.script else a.responder + ' responder'}"
              f"{', faults ' + ', '.join(a.fault) if a.fault else ''}) at {url}{behind}; try:\n"
              f"  verifier run --suite smoke --smoke --base-url {url} --model test --out runs/try\n"
              f"  verifier gate --golden goldens/demo-smoke --base-url {url} --model test\n"
              "Ctrl-C stops it.", file=sys.stderr, flush=True)
        wait_for_stop()
    return 0


def wait_for_stop() -> None:
    """Block until Ctrl-C or SIGTERM (both end the command cleanly, exit 0)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):  # a timed wait, so SIGTERM's handler gets to run promptly
            pass
    except KeyboardInterrupt:
        pass
