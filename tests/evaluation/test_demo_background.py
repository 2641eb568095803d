"""`make run` answers its first page before the demo is scored (issue 37, item 8): `demo_populate --background`
only queues the reference, placeholder and sample runs for the worker `make run` starts next, and the home page says
they are scoring, naming each with its progress, until they finish."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.outcomes import Verdict
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


def finish(run: EvaluationRun) -> None:
    """What the worker does to each of the run's items (every answer scored as passed here), then the run's end."""
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    for snippet in Snippet.objects.filter(task__versions=run.version):
        generation = Generation.objects.filter(
            run=run, snippet=snippet, sample=0
        ).first() or services.calibration_generation(run=run, snippet=snippet, sample=0)
        services.outcome_record(
            run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""), generation=generation
        )
    assert services.run_maybe_finish(run=run)


def test_the_demo_scores_in_the_background_and_the_home_page_says_so_until_it_is_done(client, media_root, author):
    release = pset_import(root=DEMO_PSET, version_name="demo-1.0.0", publish=True).version
    owned = ModelEntry.objects.create(name="mine", display_name="Mine", litellm_model="openai/x", owner=author)
    services.run_start(model=owned, version=release, dispatch=False)  # a user's run: not the demo's to announce
    output = StringIO()

    call_command("demo_populate", version="demo-1.0.0", background=True, stdout=output)

    demo = list(EvaluationRun.objects.filter(version=release, model__owner__isnull=True).select_related("model"))
    assert sorted(r.model.name for r in demo) == ["placeholder", "reference", "sample-upload"], output.getvalue()
    assert all(r.is_active for r in demo) and not Outcome.objects.exists(), "nothing is scored in the command"
    assert output.getvalue().count("queued for the worker") == 3
    body = client.get("/").content.decode()
    notice = body.split('id="release-scoring"')[1].split("</p>")[0]
    for run in demo:
        assert f'href="/runs/{run.pk}/"' in notice and run.model.display_name in notice
        assert f"0 of {run.total_items} items" in notice
    assert "Mine" not in notice

    for run in demo:
        finish(run)
    body = client.get("/").content.decode()
    assert 'id="release-scoring"' not in body, "the notice goes once the runs finish"
    assert "Reference (calibration)" in body.split('id="home-leaderboard"')[1], "and the reference line shows"
