"""Infrastructure failures are retried, then reported as errors: never scored against the model."""

from __future__ import annotations

import pytest

from benchmarks.services import pset_import
from evaluation import executor, services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.sandbox import backend_get
from evaluation.tasks import item_evaluate, provider_wait
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


@pytest.fixture
def engine_gone(monkeypatch, tmp_path):
    """A docker backend whose engine socket does not exist, as when the engine died."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    executor.sessions_close()
    executor._backend = backend_get("docker", cache_dir=tmp_path)
    yield
    executor.sessions_close()
    executor._backend = None


def test_a_dead_engine_is_an_error_after_retries_not_a_failure(media_root, engine_gone):
    version = pset_import(root=DEMO_PSET, version_name="infra-1.0.0", publish=True).version
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippet = version.tasks.first().snippets.first()

    item_evaluate.apply(args=(run.pk, snippet.pk, 0))

    outcome = Outcome.objects.get(run=run, snippet=snippet)
    assert (outcome.status, outcome.category) == ("error", "infrastructure")
    assert "sandbox failure" in outcome.detail
    for other in version.tasks.first().snippets.exclude(pk=snippet.pk):
        services.outcome_record(run=run, snippet=other, sample=0, verdict=services.Verdict("passed", "", ""))
    for task in version.tasks.exclude(pk=snippet.task_id):
        for other in task.snippets.all():
            services.outcome_record(run=run, snippet=other, sample=0, verdict=services.Verdict("passed", "", ""))
    services.run_maybe_finish(run=run)
    score = RunScore.objects.get(run=run, paper=None)
    assert score.errors == 1 and score.pass_rate == 100.0


def test_provider_rate_limit_makes_calls_wait(settings):
    settings.LLM_RATE_LIMITS = {"rcbtest": "2"}
    assert provider_wait("rcbtest") == 0 and provider_wait("rcbtest") == 0
    assert 0 < provider_wait("rcbtest") <= 60.1
    assert provider_wait("unlimited") == 0
