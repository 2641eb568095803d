"""`make run`'s embedded worker prepares a release's tasks once `import_pset --publish` committed it."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmarks.models import BenchmarkVersion, Task
from evaluation.models import TaskPreparation
from tests.conftest import DEMO_PSET, polled, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_the_embedded_worker_prepares_an_imported_release(settings, media_root, sandbox_cache, tmp_path, client):
    """kombu's filesystem broker and a worker on every queue, as `make run` starts them after `import_pset`."""
    from tests.conftest import embedded_worker

    sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.RELEASE_PREPARE = True
    env = {"MEDIA_ROOT": str(media_root), "SANDBOX_CACHE_DIR": str(sandbox_cache), "SANDBOX_BACKEND": "bwrap"}
    with embedded_worker(tmp_path, queues="default,llm,sandbox", env=env) as (worker, _):
        call_command("import_pset", str(DEMO_PSET), version="1.0.0", publish=True, verbosity=0)
        version = BenchmarkVersion.objects.get(name="1.0.0")
        assert TaskPreparation.objects.count() == 3  # queued with the import, before any worker took them

        def prepared() -> bool:
            return not TaskPreparation.objects.exclude(status=TaskPreparation.Status.PREPARED).exists()

        polled(prepared, timeout=300, what="the embedded worker to prepare the release's tasks", worker=worker)
    for task in Task.objects.filter(versions=version):
        assert task.test_manifest["tests"] and task.recording["snippets"], task
    page = client.get(reverse("version-detail", args=["1.0.0"])).content.decode()
    section = page.split('<section id="preparation"')[1].split("</section>")[0]
    assert "3 of 3 tasks prepared." in section and "hx-trigger" not in section  # done: the page stops polling


@pytest.mark.own_broker
def test_a_preparation_the_broker_lost_is_queued_again_by_the_watchdog(
    settings, own_redis, celery_worker_factory, media_root, sandbox_cache
):
    from benchmarks.services.psets import pset_import
    from operations.models import OperationsEvent
    from tests.outages import WATCH

    sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.RELEASE_PREPARE = True
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    assert TaskPreparation.objects.filter(status=TaskPreparation.Status.QUEUED).count() == 3
    own_redis.kill()  # no worker has taken them yet: their messages are gone with the broker
    own_redis.start()
    worker = celery_worker_factory(queues="sandbox,default", **{**WATCH, "SANDBOX_BACKEND": "bwrap"})

    def prepared() -> bool:
        return not TaskPreparation.objects.exclude(status=TaskPreparation.Status.PREPARED).exists()

    polled(prepared, timeout=300, what="the watchdog to queue the preparations again", worker=worker)
    # Each lost one queued again (a copy queued twice finds it done and does nothing).
    events = OperationsEvent.objects.filter(kind=OperationsEvent.Kind.PREPARATION_REDISPATCHED)
    assert all("queued again" in e.detail and e.worker for e in events)
    for task in TaskPreparation.objects.values_list("task_id", flat=True):
        assert any(f"the preparation of task {task} was queued" in e.detail for e in events), task
