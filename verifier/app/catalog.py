"""Which suites exist: the built-in ones plus plugins (entry-point group `verifier.suites`), by name."""

from __future__ import annotations

from verifier.errors import UsageError, did_you_mean
from verifier.types import Suite

__all__ = ["get_suites", "resolve_suites", "suite_named", "suite_origin"]


def get_suites() -> dict[str, Suite]:
    """Built-in suites plus those installed plugins add through the `verifier.suites` entry points."""
    from suites import all_suites

    return all_suites()


def suite_origin(name: str) -> str:
    """`builtin`, or the name of the installed distribution whose entry point adds the suite."""
    from suites import origin

    return origin(name)


def suite_named(name: str) -> Suite:
    from suites import lookup

    suite = lookup(name)
    if suite is None:
        raise UsageError(f"unknown suite {name!r}; {did_you_mean(name, get_suites())}known: {', '.join(sorted(get_suites()))}")
    return suite


def resolve_suites(names: tuple[str, ...]) -> list[Suite]:
    table = get_suites()
    out = []
    for n in names:
        if n.startswith("lm_eval:"):  # lm-eval's own client collects these; verifier cannot resend them
            task = n.split(":", 1)[1]
            raise UsageError(f"suite {n} is an imported lm-eval run: collect it with `verifier lm-eval --tasks {task} "
                             "--model_args base_url=...,model=... --out RUN`, then `verifier compare RUN --golden G`")
        if n not in table:
            raise UsageError(f"unknown suite {n!r}; {did_you_mean(n, table)}known: {', '.join(sorted(table))}")
        out.append(table[n])
    if not out:
        raise UsageError("no suite given")
    return out
