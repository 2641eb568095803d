"""Fixtures of the human baseline's tests: a published demo release with one paper held out, people, and scoring run
in this process (the attempt's run goes through the real pipeline and sandbox, its tasks applied at once)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from benchmarks import visibility
from benchmarks.models import Snippet, VersionTask
from benchmarks.services.psets import pset_import
from tests.conftest import DEMO_PSET

HELD_OUT_PAPER = "trimmed-infonce"


@pytest.fixture
def held_release(media_root):
    """The demo set published as 1.0.0 with one paper's task in the held-out split."""
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    VersionTask.objects.filter(version=version, task__paper__slug=HELD_OUT_PAPER).update(
        split=VersionTask.Split.HELD_OUT
    )
    return version


@pytest.fixture
def held_out_items(held_release) -> list[Snippet]:
    items = list(Snippet.objects.filter(task__versions=held_release, task__paper__slug=HELD_OUT_PAPER))
    assert items, "the demo's held-out paper has items"
    return items


@pytest.fixture
def public_items(held_release) -> list[Snippet]:
    return list(visibility.items_public(version=held_release).order_by("pk"))


@pytest.fixture
def people(db) -> list[User]:
    return [User.objects.create_user(f"person{n}", password="pw") for n in range(1, 4)]


@pytest.fixture
def scoring_inline():
    """The attempt's dispatch and item tasks run in this process when queued, as a worker would run them."""
    from config.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


def dampnest_item(version, name: str = "remember gradient for next step") -> Snippet:
    return Snippet.objects.get(task__versions=version, task__paper__slug="dampnest", name=name)
