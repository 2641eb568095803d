"""Paired comparison of two models on the same items: LoC-weighted difference of scaled pass@1, a paired
bootstrap interval clustered by paper, an exact McNemar test, and ranks with ties from those tests over many models
with Holm's correction (pure: no Django)."""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

BOOTSTRAP_ITERATIONS = 1000
# Below this many papers a paper-resampling interval is little more than the range of per-paper differences:
# comparisons on fewer say so beside the interval.
FEW_PAPERS = 5


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
    papers: int  # the bootstrap's clusters
    difference: float  # scaled pass@1 of a minus b, in percentage points
    interval: Interval | None  # None: fewer than two papers, nothing to resample (interval_note says so)
    a_only: int  # McNemar b: items a passes and b fails
    b_only: int  # McNemar c: items b passes and a fails
    p_value: float

    @property
    def interval_note(self) -> str:
        """What the interval can and cannot say, in a sentence (empty: enough papers)."""
        if self.interval is None:
            return (
                (
                    "no interval: the interval resamples papers, and one paper is a single cluster, so every "
                    "resample is the same paper"
                )
                if self.papers == 1
                else "no interval: no items to compare"
            )
        if self.papers < FEW_PAPERS:
            return (
                f"with {self.papers} papers the interval is little more than the range of per-paper "
                f"differences (an interval needs {FEW_PAPERS} or more papers to say much)"
            )
        return ""


def scaled_difference(items: Sequence[PairedItem]) -> float:
    """LoC-weighted pass@1 of a minus that of b, in percentage points (no items or no LoC: 0)."""
    total = sum(i.loc for i in items)
    if not total:
        return 0.0
    return 100.0 * sum(i.loc * (i.a - i.b) for i in items) / total


def paired_bootstrap(
    items: Sequence[PairedItem],
    *,
    iterations: int = BOOTSTRAP_ITERATIONS,
    seed: int = 0,
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


@functools.lru_cache(maxsize=65536)  # a leaderboard asks the same pairs on every view
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial(b + c, 1/2), twice the smaller tail, at most 1."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    # C(n, k + 1) = C(n, k) (n - k) / (k + 1), exactly, far faster than math.comb for each k.
    term = total = 1
    for k in range(min(b, c)):
        term = term * (n - k) // (k + 1)
        total += term
    return min(1.0, 2 * total / 2**n)


def passed(value: float) -> bool:
    """An item counts as passed for McNemar when most of its samples pass (exact for one sample)."""
    return value > 0.5


def compare(items: Sequence[PairedItem], *, iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0) -> Comparison:
    """Difference, interval (only from two papers or more: resampling one cluster only repeats it) and McNemar."""
    a_only = sum(1 for i in items if passed(i.a) and not passed(i.b))
    b_only = sum(1 for i in items if passed(i.b) and not passed(i.a))
    papers = len({i.paper_id for i in items})
    interval = paired_bootstrap(items, iterations=iterations, seed=seed) if papers >= 2 else None
    return Comparison(
        items=len(items),
        papers=papers,
        difference=scaled_difference(items),
        interval=interval,
        a_only=a_only,
        b_only=b_only,
        p_value=mcnemar_exact(a_only, b_only),
    )


# Ranks: the family-wise level of "significantly better" over all pairs of ranked models.
RANK_ALPHA = 0.05


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest is multiplied by (m - i + 1),
    kept monotone and capped at 1. Rejecting where adjusted <= alpha holds the family-wise error at alpha."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for position, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - position) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class PairTest:
    better: Hashable  # the entry passing more of the discordant items
    worse: Hashable
    better_only: int  # discordant items only `better` passes
    worse_only: int
    p_value: float
    adjusted: float  # Holm-adjusted over every pair of the family

    @property
    def significant(self) -> bool:
        return self.adjusted <= RANK_ALPHA and self.better_only != self.worse_only


def pairwise_tests(entries: Mapping[Hashable, Mapping[str, float]]) -> list[PairTest]:
    """An exact McNemar test for every pair of entries (entry -> item id -> pass value), Holm-adjusted together.

    Every entry must have a value for the same items: a paired test compares like with like (ValueError if not).
    """
    keys = list(entries)
    items = sorted(entries[keys[0]]) if keys else []
    for key in keys:
        if entries[key].keys() != set(items):
            raise ValueError(
                f"entry {key!r} covers {len(entries[key])} items, not the same {len(items)} as "
                f"{keys[0]!r}; rank only entries scored on the same items"
            )
    # A bit per item passed: discordant counts are two popcounts per pair, whatever the number of items.
    bits = {
        key: int("".join("1" if passed(entries[key][item]) else "0" for item in reversed(items)) or "0", 2)
        for key in keys
    }
    raw = []
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            a_only, b_only = (bits[a] & ~bits[b]).bit_count(), (bits[b] & ~bits[a]).bit_count()
            raw.append((a, b, a_only, b_only) if a_only >= b_only else (b, a, b_only, a_only))
    p_values = [mcnemar_exact(x, y) for _, _, x, y in raw]
    return [
        PairTest(better=a, worse=b, better_only=x, worse_only=y, p_value=p, adjusted=adj)
        for (a, b, x, y), p, adj in zip(raw, p_values, holm(p_values), strict=True)
    ]


def significance_ranks(entries: Mapping[Hashable, Mapping[str, float]]) -> dict[Hashable, int]:
    """Rank of each entry: 1 + the number of entries significantly better than it (McNemar, Holm at RANK_ALPHA).

    Entries no test separates share a rank, and ranks need not be consecutive (1, 1, 3: two tie, the third is
    beaten by both)."""
    better = {key: 0 for key in entries}
    for test in pairwise_tests(entries):
        if test.significant:
            better[test.worse] += 1
    return {key: 1 + count for key, count in better.items()}
