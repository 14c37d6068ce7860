"""Pure statistics. No randomness without an explicit seed, so outputs are reproducible."""

from __future__ import annotations

import math
import random
from typing import Sequence

Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval: stays inside [0, 1] and behaves near 0% and 100%."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 and n the bound is exactly 0 (or 1); computed, it comes out as ±1e-18, which a strict
    # comparison against a zero margin would read as evidence.
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0, 1, 0.0, 1.0) for v in values)


def mean_ci(values: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """Mean with a 95% interval: Wilson for 0/1 data, normal approximation otherwise."""
    n = len(values)
    if n == 0:
        return (float("nan"), (float("nan"), float("nan")))
    m = sum(values) / n
    if is_binary(values):
        return (m, wilson(sum(values), n))
    if n == 1:
        return (m, (m, m))
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    lo, hi = m - half, m + half
    if all(0 <= v <= 1 for v in values):  # a rate: its interval cannot leave [0, 1]
        lo, hi = max(0.0, lo), min(1.0, hi)
    return (m, (lo, hi))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on discordant pairs b (golden right, run wrong) and c (the reverse)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n  # n > 0 here: 2**n is an int
    return min(1.0, 2 * tail)


def fisher_greater(a: int, n1: int, b: int, n2: int) -> float:
    """One-sided Fisher exact p-value that the second rate (b of n2) exceeds the first (a of n1)."""
    if not (0 <= a <= n1 and 0 <= b <= n2) or n1 + n2 == 0:
        raise ValueError(f"counts out of range: {a}/{n1}, {b}/{n2}")
    k, n = a + b, n1 + n2
    tail = sum(math.comb(n2, x) * math.comb(n1, k - x) for x in range(b, min(k, n2) + 1) if k - x <= n1)
    return min(1.0, tail / math.comb(n, k))


def paired_bootstrap(golden: Sequence[float], run: Sequence[float], iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of mean(run - golden) over resampled pairs (seeded: reproducible)."""
    import numpy as np

    n = len(golden)
    if n == 0:
        return (float("nan"), float("nan"))
    diffs = np.asarray(run, dtype=float) - np.asarray(golden, dtype=float)
    if np.all(diffs == diffs[0]):
        return (float(diffs[0]), float(diffs[0]))
    rng = np.random.default_rng(seed)
    means = np.empty(iters)
    step = max(1, 2_000_000 // n)  # bounded memory for large n
    for i in range(0, iters, step):
        k = min(step, iters - i)
        means[i : i + k] = diffs[rng.integers(0, n, size=(k, n))].mean(axis=1)
    means.sort()
    return (float(means[int(0.025 * iters)]), float(means[min(iters - 1, int(0.975 * iters))]))


def rnd(x: float | None, digits: int = 6) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), digits)


def samples_needed(spread: float, distance: float, z: float = Z95) -> int | None:
    """About how many paired samples make a 95% interval of half-width `distance` when the per-sample
    differences have standard deviation `spread` (normal approximation); None when no sample size can
    (a zero distance: a margin of 0 on a noisy metric is never cleared by sampling)."""
    if distance <= 0:
        return None
    if spread <= 0:
        spread = 0.5  # no spread seen yet: assume the worst case of a 0/1 metric
    return max(1, math.ceil((z * spread / distance) ** 2))


def sd(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


EXACT_MW_BYTES = 200_000_000
"""Work bound of the exact Mann-Whitney p (bytes of integer arithmetic, about a second at most): past it the normal
approximation is used, which is good there (both groups large)."""


def mann_whitney_greater(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """One-sided Mann-Whitney U p-value that `candidate` values are stochastically larger than `reference` values.

    Exact (the permutation distribution of the rank sum, ties kept as mid-ranks) where the work is small: that is
    where it matters, since with few samples or many ties (a bit-stable engine gives many exact zeros) the normal
    approximation is far off both ways (one value above 10 tied ones: 0.002 by the approximation, 1/11 exactly; one
    above 20 distinct ones: 0.058, 1/21 exactly). Otherwise the normal approximation with the tie correction and a
    continuity correction of 1/2. 1.0 when either side is empty or every value is tied."""
    n1, n2 = len(reference), len(candidate)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in reference] + [(v, 1) for v in candidate], key=lambda t: t[0])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    exact = _rank_sum_tail(ranks, [side for _, side in pooled])
    if exact is not None:
        return exact
    u = sum(r for r, (_, side) in zip(ranks, pooled) if side == 1) - n2 * (n2 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    return min(1.0, max(0.0, 0.5 * math.erfc(z / math.sqrt(2))))


def _rank_sum_tail(ranks: Sequence[float], sides: Sequence[int]) -> float | None:
    """P(rank sum of side 1 >= observed) over all equally likely assignments of the sides to the pooled (mid-)ranks;
    None when that costs more than EXACT_MW_BYTES. Counted by a polynomial over doubled ranks (integers), each
    coefficient a fixed-width field of one Python integer, so a step is one shift and one add."""
    n, k = len(ranks), sum(sides)
    doubled = [round(2 * r) for r in ranks]
    observed = sum(d for d, s in zip(doubled, sides) if s == 1)
    total = math.comb(n, k)
    width = total.bit_length() + 1
    terms = 2 * n * k + 1
    if n * k * terms * width // 8 > EXACT_MW_BYTES:
        return None
    ways = [0] * (k + 1)
    ways[0] = 1
    for idx, d in enumerate(doubled):
        for j in range(min(k, idx + 1), 0, -1):
            ways[j] += ways[j - 1] << (d * width)
    tail = ways[k] >> (observed * width)
    mask = (1 << width) - 1
    count = 0
    while tail:
        count += tail & mask
        tail >>= width
    return min(1.0, count / total)
