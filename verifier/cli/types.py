"""argparse `type=` validators: a meaningless value is refused at parse time (exit 2 with usage), never run.

`--limit 0` used to run every sample, `--timeout 0` meant no timeout and `--temperature nan` made every
request an infra error. Each validator raises argparse.ArgumentTypeError with the reason.
"""

from __future__ import annotations

import argparse
import math
import sys


def _whole_number(text: str, least: int, says: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if v < least:
        raise argparse.ArgumentTypeError(f"must be {says}, got {v}")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1 (--limit, --epochs, --concurrency, --looks, -k)."""
    return _whole_number(text, 1, "at least 1")


def nonneg_int(text: str) -> int:
    """An integer >= 0 (--max-retries: 0 means no retry)."""
    return _whole_number(text, 0, "0 or more")


def finite_float(text: str) -> float:
    """A finite number (--temperature, --top-p): NaN and infinities are refused."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0 (--timeout: 0 would mean no timeout)."""
    v = finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return v


def fraction(text: str) -> float:
    """A finite number in [0, 1] (--infra-budget)."""
    v = finite_float(text)
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text!r}")
    return v




class CommaList(argparse.Action):
    """A comma-separated list flag. Given twice, the last wins, as argparse does for every flag (a wrapper's defaults
    then the user's override), but never silently: `--mode chat --mode chat-stream` ran chat-stream only without a
    word. The notice goes to stderr and names the one spelling that gives both."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        if before is not None and before != self.default:
            print(f"verifier: {option_string} given more than once: the last wins ({values}); for several, give one "
                  f"comma-separated list: {option_string} {before},{values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


class SpacedList(argparse.Action):
    """A flag taking several values at once (`calibrate --runs A B`, `sweep --combine D E`). Given twice, the last
    wins as for CommaList, and stderr says so with the one spelling that gives every value."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        given = [str(v) for v in values] if isinstance(values, list) else [str(values)]
        if before is not None and before != self.default:
            print(f"verifier: {option_string} given more than once: the last wins ({' '.join(given)}); for several, "
                  f"give them once: {option_string} {' '.join([*map(str, before), *given])}", file=sys.stderr)
        setattr(namespace, self.dest, values)
