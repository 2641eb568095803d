"""Paired comparison of two models on the same items: LoC-weighted difference of scaled pass@1, a paired
bootstrap interval clustered by paper, and an exact McNemar test (pure: no Django)."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

BOOTSTRAP_ITERATIONS = 1000


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def percentiles(values: list[float]) -> Interval:
    """The 95% percentile interval of bootstrap values (empty: 0..0)."""
    if not values:
        return Interval(0.0, 0.0)
    values = sorted(values)
    return Interval(values[int(0.025 * (len(values) - 1))], values[int(round(0.975 * (len(values) - 1)))])


@dataclass(frozen=True)
class PairedItem:
    """One item evaluated for both models; a and b are each model's pass@1 on it (share of samples passed, 0..1)."""
    item_id: str
    paper_id: str
    loc: int
    a: float
    b: float


@dataclass(frozen=True)
class Comparison:
    items: int
    difference: float  # scaled pass@1 of a minus b, in percentage points
    interval: Interval
    a_only: int  # McNemar b: items a passes and b fails
    b_only: int  # McNemar c: items b passes and a fails
    p_value: float


def scaled_difference(items: Sequence[PairedItem]) -> float:
    """LoC-weighted pass@1 of a minus that of b, in percentage points (no items or no LoC: 0)."""
    total = sum(i.loc for i in items)
    if not total:
        return 0.0
    return 100.0 * sum(i.loc * (i.a - i.b) for i in items) / total


def paired_bootstrap(items: Sequence[PairedItem], *, iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0,
                     ) -> Interval:
    """95% interval of the difference, resampling whole papers with replacement (a paper's snippets are correlated)."""
    by_paper: dict[str, list[PairedItem]] = defaultdict(list)
    for item in items:
        by_paper[item.paper_id].append(item)
    papers = [by_paper[p] for p in sorted(by_paper)]
    if not papers:
        return Interval(0.0, 0.0)
    # Per paper: (LoC, LoC-weighted a minus b), so a resample is two sums.
    sums = [(sum(i.loc for i in rows), sum(i.loc * (i.a - i.b) for i in rows)) for rows in papers]
    rng = random.Random(seed)
    values = []
    for _ in range(iterations):
        drawn = rng.choices(range(len(sums)), k=len(sums))
        loc = sum(sums[d][0] for d in drawn)
        values.append(100.0 * sum(sums[d][1] for d in drawn) / loc if loc else 0.0)
    return percentiles(values)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial(b + c, 1/2), twice the smaller tail, at most 1."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def passed(value: float) -> bool:
    """An item counts as passed for McNemar when most of its samples pass (exact for one sample)."""
    return value > 0.5


def compare(items: Sequence[PairedItem], *, iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0) -> Comparison:
    a_only = sum(1 for i in items if passed(i.a) and not passed(i.b))
    b_only = sum(1 for i in items if passed(i.b) and not passed(i.a))
    return Comparison(items=len(items), difference=scaled_difference(items),
                      interval=paired_bootstrap(items, iterations=iterations, seed=seed),
                      a_only=a_only, b_only=b_only, p_value=mcnemar_exact(a_only, b_only))
