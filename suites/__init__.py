"""The suites. Adding one: write a module ending in `SUITE = Suite(...)`, then add one line below."""

from __future__ import annotations

from verifier.types import Suite

from . import bfcl, gsm8k, lm_eval_import, replay, smoke, structured, vision

SUITES: dict[str, Suite] = {
    smoke.SUITE.name: smoke.SUITE,
    structured.SUITE.name: structured.SUITE,
    vision.SUITE.name: vision.SUITE,
    bfcl.SUITE.name: bfcl.SUITE,
    replay.SUITE.name: replay.SUITE,
    **gsm8k.SUITES, lm_eval_import.SUITE.name: lm_eval_import.SUITE,
}


def lookup(name: str) -> Suite | None:
    """A suite by the name a run records; `lm_eval:<task>` runs are scored by the `lm_eval` suite."""
    return SUITES.get(name) or SUITES.get(name.split(":", 1)[0])
