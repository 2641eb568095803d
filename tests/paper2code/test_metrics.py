"""Scores weight snippets by LoC, average over samples and never count infrastructure errors (FORMAT.md 8)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.paper2code.metrics import ItemResult, Score, item_status, pass_at_k, score


def test_single_sample_rates() -> None:
    s = score([ItemResult("a", 10, 0, "passed"), ItemResult("b", 30, 0, "failed"), ItemResult("c", 60, 0, "passed")])
    assert s == Score(
        items=3,
        samples=1,
        pass_rate=pytest.approx(200 / 3),
        scaled_pass_rate=70.0,
        pass_rate_std=0.0,
        scaled_pass_rate_std=0.0,
        passed=2,
        failed=1,
        errors=0,
    )


def test_errors_are_counted_but_never_against_the_model() -> None:
    s = score([ItemResult("a", 10, 0, "passed"), ItemResult("b", 90, 0, "error")])
    assert (s.pass_rate, s.scaled_pass_rate, s.errors, s.items) == (100.0, 100.0, 1, 2)


def test_samples_are_scored_separately_then_averaged() -> None:
    results = [
        ItemResult("a", 1, 0, "passed"),
        ItemResult("b", 3, 0, "failed"),
        ItemResult("a", 1, 1, "failed"),
        ItemResult("b", 3, 1, "passed"),
    ]
    s = score(results)
    assert (s.items, s.samples, s.passed, s.failed) == (2, 2, 2, 2)
    assert (s.pass_rate, s.pass_rate_std) == (50.0, 0.0)
    assert s.scaled_pass_rate == pytest.approx(np.mean([25.0, 75.0]))
    assert s.scaled_pass_rate_std == pytest.approx(np.std([25.0, 75.0]))


def test_a_sample_with_only_errors_is_left_out_of_the_means() -> None:
    s = score([ItemResult("a", 1, 0, "passed"), ItemResult("a", 1, 1, "error")])
    assert (s.samples, s.pass_rate, s.pass_rate_std, s.errors) == (2, 100.0, 0.0, 1)


def test_empty_input_scores_zero() -> None:
    assert score([]) == Score(0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0)
    assert score(iter([ItemResult("a", 0, 0, "error")])).scaled_pass_rate == 0.0


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_the_binomial_formula(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(10, 0, 3) == 0.0 and pass_at_k(10, 10, 1) == 1.0 and pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert 0.0 < pass_at_k(10_000, 1, 1) < 1e-3
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_a_stored_status_is_read_as_one_of_the_four_and_any_other_is_refused() -> None:
    for status in ("passed", "failed", "error", "flagged"):
        assert item_status(status) == status
    with pytest.raises(ValueError, match="not 'queued'"):
        item_status("queued")  # before: an item counted in `items` and in none of passed, failed, errors, flagged
