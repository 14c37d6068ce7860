"""The suites. Adding one here: write a module ending in `SUITE = Suite(...)`, then add one line to BUILTIN.

Adding one from outside (no edit to this package): an installed distribution declares an entry point in
the group `verifier.suites` whose object is a `Suite`, a dict of them, or a function returning either:

    [project.entry-points."verifier.suites"]
    mysuite = "my_package.my_module:SUITE"

Entry points are looked up on first use (not at import: `verifier --help` stays cheap) and loaded once.
A built-in name always wins over a plugin's; a plugin that fails to load is reported on stderr and skipped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from verifier.types import Suite

from . import bfcl, bfcl_multi_turn, gsm8k, lm_eval_import, multiturn, replay, smoke, structured, vision

ENTRY_POINT_GROUP = "verifier.suites"
BUILTIN_ORIGIN = "builtin"

BUILTIN: dict[str, Suite] = {
    smoke.SUITE.name: smoke.SUITE,
    structured.SUITE.name: structured.SUITE,
    vision.SUITE.name: vision.SUITE,
    bfcl.SUITE.name: bfcl.SUITE,
    replay.SUITE.name: replay.SUITE,
    multiturn.SUITE.name: multiturn.SUITE,
    bfcl_multi_turn.SUITE.name: bfcl_multi_turn.SUITE, bfcl_multi_turn.CHAINED.name: bfcl_multi_turn.CHAINED,
    **gsm8k.SUITES, lm_eval_import.SUITE.name: lm_eval_import.SUITE,
}


def _as_suites(obj: object) -> list[Suite]:
    if callable(obj) and not isinstance(obj, Suite):
        obj = obj()
    if isinstance(obj, Suite):
        return [obj]
    if isinstance(obj, Mapping) and all(isinstance(v, Suite) for v in obj.values()):
        return list(obj.values())
    raise TypeError(f"expected a Suite, a dict of Suites or a function returning one, got {type(obj).__name__}")


def discovery_path() -> list[str]:
    """sys.path without the current directory: `python -m verifier` puts the current directory first on sys.path,
    and a `*.dist-info` planted there (a downloaded repository, a shared folder) would name a module to import. A
    plugin is an installed distribution (site-packages, a `--target` or PYTHONPATH directory), never whatever sits
    in the directory the command runs from."""
    here = os.path.realpath(os.getcwd()) if _cwd_exists() else None
    return [p for p in sys.path if p and (here is None or os.path.realpath(p) != here)]


def _cwd_exists() -> bool:
    try:
        os.getcwd()
    except OSError:  # the directory was removed
        return False
    return True


def _entry_points() -> list[Any]:
    """The `verifier.suites` entry points of the distributions on discovery_path(), first distribution of a name
    only (as importlib.metadata.entry_points() dedups)."""
    from importlib.metadata import distributions

    seen: set[str] = set()
    out: list[Any] = []
    for dist in distributions(path=discovery_path()):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-").replace(".", "-")
        if name in seen:
            continue
        seen.add(name)
        out.extend(dist.entry_points.select(group=ENTRY_POINT_GROUP))
    return out


@lru_cache(maxsize=1)
def plugins() -> dict[str, tuple[Suite, str]]:
    """{suite name: (suite, distribution name)} from the `verifier.suites` entry points."""
    found: dict[str, tuple[Suite, str]] = {}
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else ep.value.split(":")[0]
        try:
            loaded = _as_suites(ep.load())
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: a plugin's import must not
            # end the command (a `sys.exit(0)` at import made every gate exit 0 with no run and no request sent)
            print(f"verifier: warning: suite plugin {ep.name!r} from {dist} not loaded: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        for s in loaded:
            if s.name in BUILTIN or s.name in found:
                owner = BUILTIN_ORIGIN if s.name in BUILTIN else found[s.name][1]
                print(f"verifier: warning: suite {s.name!r} from {dist} ignored: the name belongs to {owner}", file=sys.stderr)
                continue
            found[s.name] = (s, dist)
    return found


def all_suites() -> dict[str, Suite]:
    """Built-in suites, then installed plugins' suites."""
    return {**BUILTIN, **{name: s for name, (s, _) in plugins().items()}}


def origin(name: str) -> str:
    """Where a suite comes from: `builtin` or the distribution that provides it."""
    return BUILTIN_ORIGIN if name in BUILTIN else plugins()[name][1]


def lookup(name: str) -> Suite | None:
    """A suite by the name a run records; `lm_eval:<task>` runs are scored by the `lm_eval` suite."""
    table = all_suites() if name not in BUILTIN else BUILTIN
    return table.get(name) or table.get(name.split(":", 1)[0])
