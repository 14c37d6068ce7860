"""Errors any layer may raise. Only `verifier.cli.main` turns them into exit codes and stderr lines."""

from __future__ import annotations

from typing import Iterable, TypeVar

E = TypeVar("E", bound=BaseException)


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2, nothing half-written.

    `hints` are the ways out, each a clause that may name flags ("use --resume DIR"). The layer that raises
    does not know which command it serves, so the CLI prints only the hints whose flags that command has.
    """

    def __init__(self, message: str = "", hints: Iterable[str] = ()):
        super().__init__(message)
        self.hints = tuple(hints)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, which the CLI turns into the same) while a run collected: the run directory when one was
    created (its run.json written), else None; the command fills in `next_steps`, the commands that continue."""

    def __init__(self, run_dir: object = None):
        super().__init__()
        self.run_dir = run_dir
        self.next_steps: tuple[str, ...] = ()


def did_you_mean(word: str, options: Iterable[str]) -> str:
    """"did you mean X? " when one of `options` is close to `word` (a typo), else ""."""
    import difflib

    guesses = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"did you mean {guesses[0]}? " if guesses else ""


def hinted(exc: E, *hints: str) -> E:
    """`exc` carrying hints (for a ValueError or FileNotFoundError the app turns into a UsageError)."""
    exc.hints = tuple(getattr(exc, "hints", ())) + hints  # type: ignore[attr-defined]
    return exc
