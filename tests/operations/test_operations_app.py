"""The operations app at the bottom of the house: it imports no other app, no two apps import each other because of
lost work, the queues come from CELERY_TASK_ROUTES, `enqueue` records a refused message about its subject, and one
claim serves every kind of lost work."""

from __future__ import annotations

import pytest
from django.conf import settings
from kombu.exceptions import OperationalError as KombuOperationalError

from operations import broker
from operations.enqueue import enqueue
from operations.events import events_of, events_recent
from operations.models import OperationsEvent
from operations.watchdog import redispatch_claim, work_kinds
from scripts.import_graph import graph, layering_problems, module_cycles


def test_operations_imports_no_other_app_and_evaluation_and_submissions_do_not_import_each_other():
    counts, _ = graph()
    imported = {b for a, b, _ in counts if a == "operations" and b != "operations"}
    assert imported == set(), imported
    pairs = {(a, b) for a, b, _ in counts if a != b}
    assert not {("evaluation", "submissions"), ("submissions", "evaluation")} <= pairs
    assert not {b for a, b in pairs if a == "config"} - {
        "operations",
        "benchmarks",
        "evaluation",
        "leaderboard",
        "humans",
    }


def test_agents_builds_on_evaluation_which_finds_the_agent_mode_by_registry():
    """The agents app imports evaluation; evaluation never imports agents, not even inside a function: it asks the
    run-mode registry (evaluation/run_modes.py) that the agents app fills in its AppConfig.ready()."""
    from evaluation.run_modes import run_mode

    counts, modules = graph()
    pairs = {(a, b) for a, b, _ in counts if a != b}
    assert ("agents", "evaluation") in pairs
    assert ("evaluation", "agents") not in pairs, modules[("evaluation", "agents")]
    assert run_mode("agent").item_task == "evaluation.agents.tasks.item_agent"


def test_the_layers_hold_no_app_imports_config_or_another_that_imports_it_and_common_imports_nothing():
    """config above the apps, no two apps importing each other (function-level imports included), operations and
    then common at the bottom, no modules of one app importing each other round a loop (scripts/import_graph.py
    prints the same)."""
    assert layering_problems() == []


def test_modules_of_one_app_importing_each_other_round_a_loop_are_found(tmp_path):
    """What the layering test relies on: a loop through a function-level import and a package's facade is a cycle;
    an import for type checking only, and a module importing its own package, are not."""
    app = tmp_path / "shop"
    (app / "services").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "services" / "__init__.py").write_text("from shop.services.orders import order_place\n")
    (app / "services" / "orders.py").write_text("import shop\n\ndef order_place():\n    from shop import tasks\n")
    (app / "tasks.py").write_text("from shop import services\n")
    (app / "models.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shop import tasks\n")
    assert module_cycles(("shop",), root=tmp_path) == [["shop.services", "shop.services.orders", "shop.tasks"]]
    (app / "tasks.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shop import services\n"
    )
    assert module_cycles(("shop",), root=tmp_path) == []


def test_the_queues_are_those_of_the_task_routes():
    assert broker.queues_all() == ("llm", "sandbox", "gpu", "default")
    assert broker.task_queues(["evaluation.tasks.item_evaluate"]) == ("sandbox", "gpu")
    assert broker.task_queues(["submissions.tasks.revision_validate"]) == ("sandbox",)
    assert broker.task_queues(["evaluation.tasks.task_prepare"]) == ("sandbox", "gpu")  # a GPU task's on `gpu`
    assert broker.task_queues(["an.unrouted.task"]) == (settings.CELERY_TASK_DEFAULT_QUEUE,)


def test_every_kind_of_lost_work_is_registered_once():
    assert sorted(kind.name for kind in work_kinds()) == [
        "release downloads",
        "runs",
        "set validation papers",
        "task preparations",
        "validation reports",
    ]
    tasks = [name for kind in work_kinds() for name in kind.tasks]
    assert len(tasks) == len(set(tasks)) and set(tasks) <= set(settings.CELERY_TASK_ROUTES[1])


class _Refusing:
    def delay(self, *args):
        raise KombuOperationalError("connection refused")


class _Taking:
    def __init__(self):
        self.queued = []

    def delay(self, *args):
        self.queued.append(args)


@pytest.mark.django_db
def test_enqueue_queues_or_records_that_the_broker_refused(release):
    taking = _Taking()
    assert enqueue(taking, release.pk, subject=release, refused=lambda exc: f"no ({exc})")
    assert taking.queued == [(release.pk,)] and not OperationsEvent.objects.exists()

    assert not enqueue(_Refusing(), release.pk, subject=release, refused=lambda exc: f"refused ({exc})")
    event = events_of(subject=release).get()
    assert (event.kind, event.detail) == (OperationsEvent.Kind.BROKER_UNAVAILABLE, "refused (connection refused)")
    assert event.since is not None
    shown = events_recent()[0]
    assert shown.event == event and shown.subject.label == f"release {release.name}"
    assert shown.subject.url.endswith(f"/{release.name}/")


@pytest.mark.django_db
def test_one_watchdog_wins_the_claim_and_counts_it(release):
    releases = next(kind for kind in work_kinds() if kind.name == "release downloads")
    seen_by_two = [type(release).objects.get(pk=release.pk) for _ in range(2)]
    assert redispatch_claim(kind=releases, item=seen_by_two[0])
    assert not redispatch_claim(kind=releases, item=seen_by_two[1])
    release.refresh_from_db()
    assert release.redispatches == 1 and release.redispatched_at is not None
