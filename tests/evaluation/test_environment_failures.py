"""A failed environment build is remembered per hash with its log: the run's other items of that environment are
infrastructure errors at once, and a maintainer retries it from the operations page."""

from __future__ import annotations

import time

import pytest

from benchmarks.models import Task
from benchmarks.services.blobs import environment_hash
from benchmarks.services.psets import pset_import
from evaluation import environments, services
from evaluation.models import EnvironmentFailure, EvaluationRun, ModelEntry, Outcome
from evaluation.tasks import item_evaluate
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db

BROKEN = "this-package-does-not-exist-rcb==1.0\n"


@pytest.fixture
def builds(tmp_path, monkeypatch, executor_backend):
    """The worker's real bwrap backend, counting its environment builds."""
    backend = sandbox_backend_or_missing("bwrap", tmp_path / "cache")
    calls: list[str] = []
    real = backend.environment_build

    def counted(**kwargs):
        calls.append(kwargs["env_hash"])
        return real(**kwargs)

    monkeypatch.setattr(backend, "environment_build", counted)
    executor_backend(backend)
    return calls


@pytest.fixture
def broken_run(media_root):
    """A running run of `reference` on the demo version, whose first task's requirements cannot be installed."""
    version = pset_import(root=DEMO_PSET, version_name="envfail-1.0.0", publish=True).version
    task = version.tasks.first()
    Task.objects.filter(pk=task.pk).update(requirements=BROKEN, environment_hash=environment_hash(BROKEN))
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    return run, Task.objects.get(pk=task.pk)


def test_the_other_items_of_a_failed_environment_fail_at_once_without_rebuilding(broken_run, builds):
    run, task = broken_run
    snippets = list(task.snippets.all())
    assert len(snippets) >= 3

    started = time.monotonic()
    item_evaluate.apply(args=(run.pk, snippets[0].pk, 0))
    first = time.monotonic() - started
    started = time.monotonic()
    for snippet in snippets[1:]:
        item_evaluate.apply(args=(run.pk, snippet.pk, 0))
    rest = time.monotonic() - started

    assert builds == [task.environment_hash], "built once, for the first item only"
    failure = EnvironmentFailure.objects.get(environment_hash=task.environment_hash)
    assert "No matching distribution found for this-package-does-not-exist-rcb==1.0" in failure.message
    assert "this-package-does-not-exist-rcb" in failure.log and failure.backend == "bwrap"
    outcomes = Outcome.objects.filter(run=run, snippet__task=task)
    assert outcomes.count() == len(snippets)
    assert set(outcomes.values_list("status", "category")) == {("error", "infrastructure")}
    assert all(
        o.detail.startswith(environments.ENVIRONMENT_FAILED) and "No matching distribution" in o.detail
        for o in outcomes
    )
    assert rest / (len(snippets) - 1) < max(first, 1.0), (first, rest)


def test_a_maintainer_sees_the_failure_and_retries_it(client, maintainer, author, broken_run, builds):
    run, task = broken_run
    snippets = list(task.snippets.all())
    for snippet in snippets:
        item_evaluate.apply(args=(run.pk, snippet.pk, 0))
    failure = EnvironmentFailure.objects.get(environment_hash=task.environment_hash)

    client.force_login(author)
    assert client.post(f"/operations/environments/{failure.pk}/retry/").status_code == 403
    client.force_login(maintainer)
    page = client.get("/operations/").content.decode()
    assert f'data-failed-environment="{task.environment_hash}"' in page
    assert "No matching distribution found" in page and "this-package-does-not-exist-rcb" in page

    response = client.post(f"/operations/environments/{failure.pk}/retry/", follow=True)

    assert "1 run(s) resumed" in response.content.decode()
    assert not EnvironmentFailure.objects.filter(environment_hash=task.environment_hash).exists()
    assert not Outcome.objects.filter(run=run, snippet__task=task).exists(), "its items are evaluated again"
    assert EvaluationRun.objects.get(pk=run.pk).status == "running"
    item_evaluate.apply(args=(run.pk, snippets[0].pk, 0))
    assert builds == [task.environment_hash, task.environment_hash], "the retry built it again"
    assert EnvironmentFailure.objects.filter(environment_hash=task.environment_hash).exists()
