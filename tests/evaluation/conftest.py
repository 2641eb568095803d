"""Fixtures shared by the evaluation tests."""

from __future__ import annotations

import pytest

# The backends that isolate: the attack suite (test_sandbox_attacks.py) holds each to it, and every sandbox test runs on
# each; `local` isolates nothing and is held only to the contract (test_backend_conformance.py).
ISOLATING_BACKENDS = ("bwrap", "docker")


@pytest.fixture(scope="module", params=ISOLATING_BACKENDS)
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
