"""The suites. Adding one: write a module ending in `SUITE = Suite(...)`, then add one line below."""

from __future__ import annotations

from verifier.types import Suite

from . import smoke
from . import bfcl, replay

SUITES: dict[str, Suite] = {
    smoke.SUITE.name: smoke.SUITE,
    bfcl.SUITE.name: bfcl.SUITE,
    replay.SUITE.name: replay.SUITE,
}
