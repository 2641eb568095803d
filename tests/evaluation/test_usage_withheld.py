"""What a run spent, as non-maintainers see it (issue 37): withheld only where the run's scope holds held-out items,
and a withheld value in the API told apart from an unknown one."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.models import VersionTask
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from tests.conftest import page_text

SCORE = dict(
    passed=0, failed=2, errors=0, pass_rate=0.0, pass_rate_std=0.0, scaled_pass_rate=0.0, scaled_pass_rate_std=0.0,
    scaled_ci_low=0.0, scaled_ci_high=0.0, pass_rate_ci_low=0.0, pass_rate_ci_high=0.0,
)  # fmt: skip


@pytest.fixture
def spent_run(release):
    """A completed run covering the held-out split on the demo release (none of whose items is held out), which
    spent 30 tokens in and 12 out on its public items."""
    model = ModelEntry.objects.create(name="frugal", display_name="Frugal", litellm_model="openai/frugal")
    run = EvaluationRun.objects.create(
        model=model, version=release, covers_held_out=True, status=EvaluationRun.Status.COMPLETED
    )
    for split in ("public", ""):
        RunScore.objects.create(run=run, split=split, items=2, prompt_tokens=30, completion_tokens=12, cost=0, **SCORE)
    return run


@pytest.mark.django_db
def test_a_run_with_nothing_held_out_shows_what_it_spent_to_everyone(spent_run):
    page = page_text(Client().get(reverse("run-detail", kwargs={"pk": spent_run.pk})).content.decode())
    assert "withheld" not in page and "Held-out usage" not in page
    score = Client().get(reverse("api-run-detail", kwargs={"pk": spent_run.pk})).json()["score"]
    assert (score["prompt_tokens"], score["completion_tokens"], score["tokens"]) == (30, 12, 42)
    assert score["cost"] == 0 and score["usage_withheld"] is False


@pytest.mark.django_db
def test_a_run_over_held_out_items_withholds_their_usage_and_says_so(spent_run):
    """The check above can fail: once the release holds an item out, the same run's total is withheld, and the API
    says it is withheld rather than unknown."""
    VersionTask.objects.filter(version=spent_run.version).update(split=VersionTask.Split.HELD_OUT)
    page = page_text(Client().get(reverse("run-detail", kwargs={"pk": spent_run.pk})).content.decode())
    assert "withheld" in page
    score = Client().get(reverse("api-run-detail", kwargs={"pk": spent_run.pk})).json()["score"]
    assert score["tokens"] is None and score["cost"] is None and score["usage_withheld"] is True
