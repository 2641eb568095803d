"""Paired comparison statistics against hand-computed cases."""

import pytest

from benchmarks.paper2code.comparison import (Interval, PairedItem, compare, mcnemar_exact, paired_bootstrap,
                                              scaled_difference)


def item(n, paper, loc, a, b):
    return PairedItem(item_id=str(n), paper_id=paper, loc=loc, a=a, b=b)


def test_mcnemar_b7_c2_by_hand():
    # n = 9, P(X <= 2) = (C(9,0) + C(9,1) + C(9,2)) / 2^9 = (1 + 9 + 36) / 512; two-sided doubles it.
    assert mcnemar_exact(7, 2) == pytest.approx(92 / 512)
    assert mcnemar_exact(2, 7) == pytest.approx(92 / 512)


def test_mcnemar_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # doubled tail above 1 is capped
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 2)


def test_compare_counts_discordant_items():
    items = [item(i, "p", 1, 1.0, 0.0) for i in range(7)] + [item(10 + i, "p", 1, 0.0, 1.0) for i in range(2)]
    items += [item(20, "p", 1, 1.0, 1.0), item(21, "p", 1, 0.0, 0.0)]  # concordant ones do not count
    result = compare(items)
    assert (result.a_only, result.b_only) == (7, 2)
    assert result.p_value == pytest.approx(92 / 512)
    assert result.difference == pytest.approx(100 * 5 / 11)


def test_difference_is_loc_weighted():
    items = [item(1, "p1", 3, 1.0, 0.0), item(2, "p1", 1, 0.0, 1.0), item(3, "p2", 4, 0.5, 0.0)]
    assert scaled_difference(items) == pytest.approx(100 * (3 - 1 + 2) / 8)
    assert scaled_difference([]) == 0.0


def test_bootstrap_resamples_papers_not_items():
    # Paper x: a wins all 10 LoC; paper y: a tie. Resamples are {x,x}: 100, {x,y}: 50, {y,y}: 0, each
    # extreme with probability 1/4, so the 2.5th and 97.5th percentiles of 1000 draws are 0 and 100.
    items = [item(i, "x", 1, 1.0, 0.0) for i in range(10)] + [item(10 + i, "y", 1, 0.0, 0.0) for i in range(10)]
    assert paired_bootstrap(items, seed=3) == Interval(0.0, 100.0)


def test_bootstrap_degenerate_and_properties():
    one_paper = [item(1, "p", 2, 1.0, 0.0), item(2, "p", 3, 0.0, 0.0)]
    assert paired_bootstrap(one_paper) == Interval(40.0, 40.0)
    same = [item(1, "p", 2, 1.0, 0.0), item(2, "q", 5, 1.0, 0.0)]
    assert paired_bootstrap(same) == Interval(100.0, 100.0)
    assert paired_bootstrap([]) == Interval(0.0, 0.0)
    mixed = [item(i, f"p{i % 5}", 1 + i % 3, (i * 7 % 10) / 10, (i * 3 % 10) / 10) for i in range(40)]
    interval = paired_bootstrap(mixed, seed=1)
    assert interval.low <= scaled_difference(mixed) <= interval.high
    assert interval.low < interval.high
    assert paired_bootstrap(mixed, seed=1) == interval  # fixed seed, same interval
