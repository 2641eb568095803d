"""A mutation score of 0%, or below the release's minimum, is a warning the report shows as one, never a green
"Passed" (issue 37: a 0% score read "Passed" with no minimum set)."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string

from submissions.models import ValidationCheck
from submissions.validation import mutation_warning


@pytest.mark.parametrize(
    ("score", "score_min", "warns"),
    [(0.0, None, True), (0.0, 0.0, True), (0.5, 0.9, True), (0.9, 0.9, False), (1.0, None, False), (None, 0.9, False)],
)
def test_a_score_of_zero_or_below_the_minimum_warns(score, score_min, warns):
    warning = mutation_warning(name="step", score=score, score_min=score_min)
    assert bool(warning) == warns
    if warns:
        assert warning.startswith(f'mutation score {score:.0%} of "step"')


def test_a_passed_check_with_a_warning_wears_a_warning_badge_not_passed():
    warned = ValidationCheck(key="mutation:a.py:0", label="Mutation score of step", status="passed", warning="low")
    clean = ValidationCheck(key="mutation:a.py:1", label="Mutation score of other", status="passed")
    assert warned.badge == ("warning", "Warning") and clean.badge == ("passed", "Passed")
    html = render_to_string("submissions/_check_badge.html", {"check": warned})
    assert 'class="badge warning"' in html and "Passed" not in html
