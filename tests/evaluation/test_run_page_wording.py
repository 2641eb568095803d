"""A run's page says each thing once and as it is (walk 5): a provider that could not be reached is said so, not
as its "InternalServerError"; the pause's count agrees with the failures counted; a paused run has no finished
time; the provenance badge's word is not repeated by the sentence beside it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evaluation.models import EvaluationRun
from evaluation.services.runs import run_pause_if_failing
from tests.conftest import page_text
from tests.evaluation.test_item_view import scored  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

UNREACHABLE = "openai/rcb-local: InternalServerError: litellm.InternalServerError: OpenAIException - Connection error."


def test_a_run_paused_by_an_unreachable_provider_says_so_once(client, scored, author, settings):  # noqa: F811
    run = scored["run"]
    settings.RUN_PAUSE_AFTER_FAILURES = 3
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING, finished_at=None)
    run.generations.update(attempts=1, error=UNREACHABLE)
    assert run_pause_if_failing(run=run)
    run.refresh_from_db()
    assert run.pause_reason.startswith("The model's provider could not be reached (no connection to its address): ")

    client.force_login(author)
    text = " ".join(page_text(client.get(reverse("run-detail", args=[run.pk])).content.decode()).split())
    failed = run.generations.count()
    assert f"The run paused itself once 3 model calls in a row had failed this way ({failed} failed in all" in text
    assert f"{failed} model calls failed" in text
    assert "Finished — (paused)" in text
    assert "self-reported answers uploaded by the model's developers" in text
    assert "self-reported self-reported" not in text
