"""`verifier proxy --upstream URL --fault NAME[:RATE]`: the fault-injection reverse proxy.

The flags live only here: the handler builds a ProxyConfig and imports the proxy (aiohttp) on use, so `--help` stays cheap.
"""

from __future__ import annotations

import argparse

import verifier.cli.types as T
from verifier.surfaces.registry import SURFACE_NAMES


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("proxy", help="fault-injection reverse proxy in front of any OpenAI-compatible endpoint")
    add_arguments(p)
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", help="OpenAI-compatible base URL to forward to, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8089, help="port to listen on (default 8089; 0 = any free port)")
    p.add_argument("--fault", action="append", default=[], metavar="NAME[:RATE]",
                   help="fault to inject (repeatable; RATE in [0,1], default 1.0); see --list-faults")
    p.add_argument("--seed", type=int, default=0, help="selection seed: same seed and requests, same mutations (default 0)")
    p.add_argument("--log", metavar="FILE.jsonl", help="append one JSON line per mutation here (default stderr); headers are never logged")
    p.add_argument("--surface", metavar=",".join(SURFACE_NAMES), action=T.CommaList,
                   help="apply the faults only on these API surfaces, comma-separated (default: every surface); other traffic passes through")
    p.add_argument("--max-response-mb", type=T.positive_float, default=64.0,
                   help="largest response the proxy buffers to rewrite, MiB (default 64, the client's cap); larger ones pass unmutated")
    p.add_argument("--list-faults", action="store_true", help="describe every fault and exit")


def handle(a: argparse.Namespace) -> int:
    from ..errors import UsageError
    from .args import names
    from ..testbed.faults import list_faults
    from ..testbed.proxy import ConfigError, ProxyConfig, serve

    if a.list_faults:
        print(list_faults())
        return 0
    if not a.upstream:
        raise UsageError("proxy needs --upstream URL (or --list-faults)")
    try:
        config = ProxyConfig(a.upstream, names(",".join(a.fault)), seed=a.seed, host=a.host, port=a.port, log=a.log,
                             surfaces=names(a.surface) if a.surface is not None else None,
                             max_response_bytes=int(a.max_response_mb * 2**20))
        config.check()
        return serve(config)  # a port that cannot be bound is a ConfigError too
    except ConfigError as e:
        raise UsageError(str(e)) from None
