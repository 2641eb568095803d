"""Infrastructure failures are retried, then reported as errors: never scored against the model."""

from __future__ import annotations

import pytest

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.outcomes import Verdict
from evaluation.pipeline import provider_wait
from evaluation.tasks import item_evaluate, item_generate
from sandbox import backend_get
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


@pytest.fixture
def engine_gone(monkeypatch, tmp_path, executor_backend):
    """A docker backend whose engine socket does not exist, as when the engine died."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    executor_backend(backend_get("docker", cache_dir=tmp_path))
    yield


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
        services.outcome_record(run=run, snippet=other, sample=0, verdict=Verdict("passed", "", ""))
    for task in version.tasks.exclude(pk=snippet.task_id):
        for other in task.snippets.all():
            services.outcome_record(run=run, snippet=other, sample=0, verdict=Verdict("passed", "", ""))
    services.run_maybe_finish(run=run)
    score = RunScore.objects.get(run=run, paper=None, split="")
    assert score.errors == 1 and score.pass_rate == 100.0


def test_provider_rate_limit_makes_calls_wait(settings):
    settings.LLM_RATE_LIMITS = {"rcbtest": "2"}
    assert provider_wait("rcbtest") == 0 and provider_wait("rcbtest") == 0
    assert 0 < provider_wait("rcbtest") <= 60.1
    assert provider_wait("unlimited") == 0


@pytest.fixture
def task_file_lost(media_root, settings, tmp_path):
    """A published demo version whose first task has lost a file from storage, on a worker with an empty cache."""
    from django.core.files.storage import default_storage

    from benchmarks.models import Blob
    from evaluation import taskfiles

    version = pset_import(root=DEMO_PSET, version_name="infra-1.0.1", publish=True).version
    snippet = version.tasks.first().snippets.first()
    settings.SANDBOX_CACHE_DIR = tmp_path / "empty-cache"
    taskfiles._task_files.cache_clear()
    lost = Blob.objects.get(sha256=snippet.task.files[snippet.file_path])
    default_storage.delete(lost.storage_name)
    yield version, snippet, lost.sha256
    taskfiles._task_files.cache_clear()


@pytest.mark.parametrize("model", ["reference", "litellm"])
def test_a_task_file_missing_from_storage_is_an_error_after_retries(task_file_lost, model):
    version, snippet, lost = task_file_lost
    if model == "litellm":  # the prompt cannot be built, so the model is never called
        entry = services.model_register(
            name="unreachable",
            display_name="Unreachable",
            litellm_model="openai/none",
            api_base="http://127.0.0.1:9/v1",
        )
    else:
        entry = ModelEntry.objects.get(name="reference")
    run = services.run_start(model=entry, version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")

    (item_generate if model == "litellm" else item_evaluate).apply(args=(run.pk, snippet.pk, 0))

    outcome = Outcome.objects.get(run=run, snippet=snippet)
    assert (outcome.status, outcome.category) == ("error", "infrastructure")
    assert f"task file {lost} cannot be read from storage" in outcome.detail
