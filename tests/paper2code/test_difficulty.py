"""Per-item difficulty against hand-computed point-biserial correlations."""

import math

import pytest

from benchmarks.paper2code.difficulty import item_difficulty, point_biserial


def test_point_biserial_by_hand():
    # M1 = 70, M0 = 30, population sd sqrt(500), p = q = 1/2: 40 / sqrt(500) / 2 = 2 / sqrt(5).
    assert point_biserial([True, True, False, False], [80, 60, 40, 20]) == pytest.approx(2 / math.sqrt(5))
    # M1 = 90, M0 = 45, sd sqrt(600), p = 1/3: 45 / sqrt(600) * sqrt(2) / 3 = sqrt(3) / 2.
    assert point_biserial([True, False, False], [90, 30, 60]) == pytest.approx(math.sqrt(3) / 2)
    # Weak models passing what strong ones fail: negative.
    assert point_biserial([False, True], [90, 10]) == pytest.approx(-1.0)


def test_point_biserial_undefined_cases():
    assert point_biserial([True, True], [10, 20]) is None  # everyone passes
    assert point_biserial([False], [10]) is None
    assert point_biserial([True, False], [50, 50]) is None  # no spread of scores
    with pytest.raises(ValueError, match="2 pass values for 1 scores"):
        point_biserial([True, False], [1])


def test_item_difficulty():
    d = item_difficulty([True, False, False, False], [80, 20, 20, 20])
    assert (d.models, d.passed, d.pass_share) == (4, 1, 0.25) and d.point_biserial == pytest.approx(1.0)
    assert item_difficulty([], []).pass_share == 0.0
