"""Samples built on first access, so `--limit N` pays for N samples, not for the whole dataset.

The run takes its selection from what `Suite.load` returns: the first N by slicing, or the
whole list (shuffled with a seed, sharded, or picked by id). Building every sample first (rendering
1,319 lm-eval prompts, validating 6,598 JSON schemas) is what made start-up slow. A `LazySamples`
builds items in order only as far as an index or a slice needs; anything that needs the whole
list (`len`, a shuffle, a negative index, a slice without an end) builds it all, in the same
order. Either way the samples are exactly those of an eager load: only the moment of work moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from verifier.types import Sample


class LazySamples(Sequence[Sample]):
    """`head` (already built), then `make(item)` for each of `items`, in order; `make` returns the
    item's samples, possibly none (an item skipped, e.g. an unusable schema)."""

    def __init__(self, head: Iterable[Sample], items: Iterable[Any], make: Callable[[Any], Iterable[Sample]]):
        self._built: list[Sample] = list(head)
        self._items: Iterator[Any] | None = iter(items)
        self._make = make

    def _fill(self, n: int | None = None) -> None:
        """Build until at least `n` samples exist (all of them when `n` is None) or the items run out."""
        while self._items is not None and (n is None or len(self._built) < n):
            item = next(self._items, _END)
            if item is _END:
                self._items = None
                break
            self._built.extend(self._make(item))

    def __len__(self) -> int:
        self._fill()
        return len(self._built)

    @overload
    def __getitem__(self, i: int) -> Sample: ...

    @overload
    def __getitem__(self, i: slice) -> list[Sample]: ...

    def __getitem__(self, i: int | slice) -> Sample | list[Sample]:
        if isinstance(i, slice):
            forward = (i.step or 1) > 0 and (i.start is None or i.start >= 0)
            bounded = forward and i.stop is not None and i.stop >= 0
            self._fill(i.stop if bounded else None)
        else:
            self._fill(i + 1 if i >= 0 else None)
        return self._built[i]

    def __iter__(self) -> Iterator[Sample]:
        k = 0
        while True:
            self._fill(k + 1)
            if k >= len(self._built):
                return
            yield self._built[k]
            k += 1


_END = object()
