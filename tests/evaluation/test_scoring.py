"""Scores per FORMAT.md 8 with bootstrap intervals and pass@k; aggregates stored per run and per paper."""

from __future__ import annotations

import pytest

from benchmarks.paper2code import ItemResult
from evaluation.scoring import bootstrap_ci, pass_at_ks


def items(statuses: list[str], locs: list[int], sample: int = 0) -> list[ItemResult]:
    return [
        ItemResult(snippet_id=str(i), loc=loc, sample=sample, status=s)
        for i, (s, loc) in enumerate(zip(statuses, locs, strict=False))
    ]


def test_interval_contains_the_estimate_and_narrows_with_more_items():
    small = items(["passed", "failed"] * 5, [1, 3] * 5)
    large = items(["passed", "failed"] * 100, [1, 3] * 100)
    (_, scaled_small), (_, scaled_large) = bootstrap_ci(small), bootstrap_ci(large)
    assert scaled_small.low <= 25.0 <= scaled_small.high
    assert scaled_large.low <= 25.0 <= scaled_large.high
    assert scaled_large.high - scaled_large.low < scaled_small.high - scaled_small.low


def test_interval_is_degenerate_when_everything_passes():
    rate, scaled = bootstrap_ci(items(["passed"] * 8, [2] * 8))
    assert (rate.low, rate.high, scaled.low, scaled.high) == (100.0, 100.0, 100.0, 100.0)


def test_errors_never_count_against_the_model_in_intervals():
    rate, scaled = bootstrap_ci(items(["passed", "error", "passed", "error"], [5, 5, 5, 5]))
    assert rate.low == 100.0 and scaled.low == 100.0


def test_interval_is_reproducible_for_a_seed():
    results = items(["passed", "failed", "passed"] * 7, [1, 2, 7] * 7)
    assert bootstrap_ci(results, seed=3) == bootstrap_ci(results, seed=3)


def test_pass_at_k_over_samples():
    results = items(["passed", "failed"], [1, 3], sample=0) + items(["failed", "failed"], [1, 3], sample=1)
    ks = pass_at_ks(results, samples=2)
    assert ks["pass@k"]["1"] == pytest.approx(25.0)
    assert ks["pass@k"]["2"] == pytest.approx(50.0)
    assert ks["scaled_pass@k"]["2"] == pytest.approx(25.0)
    assert pass_at_ks(results, samples=1) == {}
