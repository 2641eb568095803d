"""Fixtures shared by the evaluation tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def backend_name(request) -> str:
    """Each sandbox backend that isolates, once per module (the fork server's tests hold a warm session per backend)."""
    return request.param


@pytest.fixture
def celery_inline():
    """Tasks queued by a task run in this process at once (an agent item's chain of turns, tools and scoring,
    followed inline by `item_agent.apply`); the real-worker tests cover the queues."""
    from config.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved
