"""Paired comparison statistics against hand-computed cases."""

import pytest

from benchmarks.paper2code.comparison import (
    Interval,
    PairedItem,
    compare,
    holm,
    mcnemar_exact,
    paired_bootstrap,
    pairwise_tests,
    scaled_difference,
    significance_ranks,
)


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


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> kept monotone at 0.06.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped
    assert holm([]) == []


def three_models():
    """A passes all 12 items, B items 0-5, C items 0-4."""
    return {
        "A": {str(i): 1.0 for i in range(12)},
        "B": {str(i): float(i < 6) for i in range(12)},
        "C": {str(i): float(i < 5) for i in range(12)},
    }


def test_pairwise_tests_by_hand():
    tests = {(t.better, t.worse): t for t in pairwise_tests(three_models())}
    ab, ac, bc = tests[("A", "B")], tests[("A", "C")], tests[("B", "C")]
    assert (ab.better_only, ab.worse_only, ab.p_value) == (6, 0, pytest.approx(2 / 2**6))
    assert (ac.better_only, ac.worse_only, ac.p_value) == (7, 0, pytest.approx(2 / 2**7))
    assert (bc.better_only, bc.worse_only, bc.p_value) == (1, 0, 1.0)
    # Holm over 3 pairs: A-C 3 x 1/64 = 0.047 <= 0.05 (significant); A-B 2 x 1/32 = 0.0625 (not); B-C 1.
    assert ac.adjusted == pytest.approx(3 / 64) and ac.significant
    assert ab.adjusted == pytest.approx(2 / 32) and not ab.significant
    assert not bc.significant


def test_ranks_admit_ties():
    # Only C is beaten (by A): A and B share rank 1, although A passes more; uncorrected, B would be 2nd.
    assert significance_ranks(three_models()) == {"A": 1, "B": 1, "C": 2}
    assert significance_ranks({"solo": {"1": 1.0}}) == {"solo": 1}
    assert significance_ranks({}) == {}


def test_ranks_need_the_same_items():
    with pytest.raises(ValueError, match="not the same"):
        significance_ranks({"A": {"1": 1.0, "2": 0.0}, "B": {"1": 1.0}})


def test_one_paper_gets_no_interval_and_says_why():
    # Resampling one cluster only repeats it: the old degenerate interval [40, 40] said nothing true.
    result = compare([item(1, "p", 2, 1.0, 0.0), item(2, "p", 3, 0.0, 0.0)])
    assert result.interval is None and result.papers == 1 and result.difference == pytest.approx(40.0)
    assert "one paper is a single cluster" in result.interval_note
    assert compare([]).interval is None and "no items" in compare([]).interval_note
