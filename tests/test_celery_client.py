"""A Celery app a test builds for itself (the client of a worker it started) leaves the project's app current. The
project's tasks are looked up in the current app (shared_task): a client left current took every later publish of
the test process, on its broker and never eager, and after the next _pool_reset (which closes every pool in kombu's
registry, the client's too) each one failed with "Acquire on closed pool" (36 tests of a grouped run)."""

from __future__ import annotations

from celery import current_app

from config.celery import app
from operations.enqueue import task_named
from tests.conftest import _pool_reset, celery_client


def test_a_client_app_leaves_the_project_s_tasks_and_pools_to_the_tests_after_it():
    client = celery_client(broker="memory://")
    with client.producer_or_acquire():  # as its send_task does: its pool is now in kombu's registry
        pass
    _pool_reset(app)  # as the next test's own broker does, closing the client's pool

    assert current_app._get_current_object() is app
    task = task_named("evaluation.tasks.environments_prune")  # a shared_task, as services queue them
    assert task.app is app
    with task.app.producer_or_acquire():  # no "Acquire on closed pool"
        pass
