"""Fair dispatch with a real worker and broker: a person's small run started behind many runs of many people takes the
worker's slot each time it frees, since the feeder keeps only what the workers run on the broker and gives the next
slot by owner, then run, shortest remaining first; and the feed order groups a run's items by environment and
paper."""

from __future__ import annotations

import base64
import json

import pytest

from benchmarks.selectors import version_snippets
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.selectors.items import run_feed_order
from tests.conftest import DEMO_PSET, demo_papers, polled
from tests.outages import WATCH

# Its tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = pytest.mark.own_broker

SAMPLES = 12
# The runs a worker runs: the demo's 11-item paper topk-attention-pool. Fairness here is between runs and
# owners, not papers, and the big runs' 18 x 2 x 11 items still keep the worker's slot busy past the small run.
PAPER, ITEMS = "topk-attention-pool", 11


def _upload_of_references(version, samples: int) -> bytes:
    return "".join(
        json.dumps({"id": str(s.pk), "sample": k, "code": s.reference_code}) + "\n"
        for k in range(samples)
        for s in version_snippets(version=version)
    ).encode()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_small_run_behind_many_runs_of_many_people_gets_the_workers_slot_each_time_it_frees(
    celery_worker_factory, media_root, maintainer, tmp_path
):
    """18 runs (a maintainer's 6, and 3 each of 4 people) keep a worker of one slot busy; a person's small run started
    behind them takes the slot every time it frees (the owner with the least left to do takes up to half the slots,
    at least one) until it is done, and the queue never holds more than the slot: its 11 outcomes come one after the
    other, right after what was in flight when it started."""
    from django.contrib.auth.models import User

    from operations.slots import queue_slots

    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="fair-1.0.0", publish=True).version
    worker = celery_worker_factory(queues="default,sandbox", **WATCH)
    polled(lambda: queue_slots("sandbox") == 1, timeout=120, what="the worker's slots", worker=worker)
    uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
    people = [maintainer] * 6 + [user for n in range(4) for user in [User.objects.create_user(f"p{n}")] * 3]
    big = [
        services.run_from_upload(model=uploader, version=version, data=_upload_of_references(version, 2), user=user)
        for user in people
    ]
    # Their dispatches (the default queue's tasks, taken in turn with items) are done: the small run's is next.
    running = EvaluationRun.objects.filter(pk__in=[r.pk for r in big], status=EvaluationRun.Status.RUNNING)
    polled(lambda: running.count() == len(big), timeout=300, what="the big runs' dispatch", worker=worker)

    small = services.run_from_upload(
        model=uploader, version=version, data=_upload_of_references(version, 1), user=User.objects.create_user("s")
    )
    before = Outcome.objects.count()
    polled(
        lambda: EvaluationRun.objects.get(pk=small.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=600,
        what="the small run to complete",
        worker=worker,
    )
    order = list(Outcome.objects.order_by("pk").values_list("run_id", flat=True))
    mine = [n for n, run in enumerate(order) if run == small.pk]
    assert len(mine) == small.total_items == ITEMS
    assert mine == list(range(mine[0], mine[0] + ITEMS)), "no other run's item between the small run's"
    # What was in flight then ends, and one more item may be fed before the worker takes the small run's dispatch.
    assert before > 0 and mine[0] <= before + 2, (mine[0], before)
    assert all(run.is_active for run in EvaluationRun.objects.filter(pk__in=[r.pk for r in big]))
    in_flight = [r.fed_items - r.done_items for r in EvaluationRun.objects.filter(pk__in=[r.pk for r in big])]
    assert sum(in_flight) <= 1, "the queue holds what the worker's one slot runs, no more"


@pytest.mark.django_db
def test_runs_share_by_owner_calibration_apart_maintainers_and_the_platform_among_the_owners(media_root, maintainer):
    from evaluation.services.runs import run_owner

    version = pset_import(root=DEMO_PSET, version_name="owners-1.0.0", publish=True).version
    uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
    reference = ModelEntry.objects.get(name="reference")
    calibration = services.run_start(model=reference, version=version, user=maintainer, dispatch=False)
    data = _upload_of_references(version, 1)
    assert run_owner(calibration) == "calibration"
    assert run_owner(services.run_from_upload(model=uploader, version=version, data=data)) == "platform"
    mine = services.run_from_upload(model=uploader, version=version, data=data, user=maintainer)
    assert run_owner(mine) == f"user:{maintainer.pk}"


@pytest.mark.django_db
def test_feed_order_groups_items_by_environment_and_paper(media_root):
    version = pset_import(root=DEMO_PSET, version_name="order-1.0.0", publish=True).version
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, samples=2, dispatch=False)
    order = run_feed_order(run)
    snippets = {s.pk: s for s in version_snippets(version=version)}
    keys = [(snippets[i].task.environment_hash, snippets[i].task.paper.slug) for i, _ in order]
    assert len(order) == run.total_items and len(set(order)) == len(order)
    assert keys == sorted(keys), "each environment's and paper's items come together"
    assert [sample for _, sample in order[:2]] == [0, 1], "a snippet's samples come together"


@pytest.mark.django_db
def test_the_feeder_reads_only_the_window_it_queues(media_root, django_capture_on_commit_callbacks):
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    version = pset_import(root=DEMO_PSET, version_name="window-1.0.0", publish=True).version
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, samples=3, dispatch=False)
    order = run_feed_order(run)
    windows = [(start, count) for start in range(0, len(order) + 2, 7) for count in (1, 2, 3, 4, 5, 40)]
    assert all(run_feed_order(run, start, count) == order[start : start + count] for start, count in windows)
    # One item ended, one to queue: the feeder reads a snippet's row, not the whole order of 99 items.
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=EvaluationRun.Status.RUNNING, feed_cursor=50, fed_items=settings.RUN_ITEMS_IN_FLIGHT - 1
    )
    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=False):
        assert services.run_feed(run=run) == 1
    ordered = [q["sql"] for q in queries.captured_queries if '"environment_hash" ASC' in q["sql"]]
    assert len(ordered) == 1 and "LIMIT 1 OFFSET 16" in ordered[0], ordered
    assert EvaluationRun.objects.get(pk=run.pk).feed_cursor == 51


@pytest.mark.django_db
def test_resuming_a_mostly_finished_run_reads_the_order_twice_not_window_by_window(
    media_root, django_capture_on_commit_callbacks
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    version = pset_import(root=DEMO_PSET, version_name="resume-1.0.0", publish=True).version
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, samples=3, dispatch=False)
    order = run_feed_order(run)
    Outcome.objects.bulk_create(
        Outcome(run=run, snippet_id=s, sample=k, status=Outcome.Status.PASSED) for s, k in order[:-2]
    )
    # A resume feeds from the start of the order again (feed_cursor 0): all but the last two items are done.
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=EvaluationRun.Status.RUNNING, feed_cursor=0, fed_items=0, done_items=len(order) - 2
    )
    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=False):
        assert services.run_feed(run=run) == 2
    assert len([q for q in queries.captured_queries if '"environment_hash" ASC' in q["sql"]]) == 2
    assert EvaluationRun.objects.get(pk=run.pk).feed_cursor == len(order)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_resuming_a_run_again_and_again_keeps_one_share_running(
    celery_worker_factory, worker_broker, media_root, settings, tmp_path
):
    """An owner resuming a running run over and over (the API answers each) puts a new share on the broker each
    time; only the newest feed's messages run, the others are dropped when they reach a worker."""
    import base64

    import redis

    settings.RUN_ITEMS_IN_FLIGHT = 2
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="resume-1.0.0", publish=True).version
    uploader = ModelEntry.objects.create(name="again", display_name="Again", kind=ModelEntry.Kind.UPLOADED)
    run = services.run_from_upload(model=uploader, version=version, data=_upload_of_references(version, 1))
    for _ in range(5):
        services.run_resume(run=run)
    # The attack's effect on the broker: five shares of two items wait there, not one.
    queued = [json.loads(m) for m in redis.Redis.from_url(worker_broker).lrange("sandbox", 0, -1)]
    feeds = [json.loads(base64.b64decode(m["body"]))[0][3] for m in queued]
    run.refresh_from_db()
    assert len(feeds) >= 5 * 2 and feeds.count(run.feed_epoch) == 2, feeds
    # At debug level: a dropped message is said there only (nothing is lost, the newest feed queues its item).
    worker = celery_worker_factory(queues="sandbox", loglevel="DEBUG", RUN_ITEMS_IN_FLIGHT="2", **WATCH)
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=600,
        what="the run to complete",
        worker=worker,
    )
    stale = len(feeds) - feeds.count(run.feed_epoch)
    assert worker.output().count("dropped (the run is on feed") == stale, worker.output()[-3000:]
    assert Outcome.objects.filter(run=run).count() == run.total_items


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_agent_run_gets_a_share_its_llm_slots_can_use_within_its_users_limit(
    celery_worker_factory, worker_broker, media_root, settings, author, other_author
):
    """An agent item waits on the model between tool calls: a share of RUN_ITEMS_IN_FLIGHT (8) kept 8 items of a
    20-turn agent run in flight behind 24 llm slots (scripts/bench_agent.py, part 3). An agent run is fed
    AGENT_ITEMS_IN_FLIGHT; a user's runs stay within USER_ITEMS_IN_FLIGHT together (the attacker's model answers
    every turn with commands that hold a sandbox slot); a single-shot run still gets 8."""
    import redis

    # The app publishes to this test's own broker (the factory points it there); no worker takes the messages.
    settings.RUN_ITEMS_IN_FLIGHT, settings.USER_ITEMS_IN_FLIGHT, settings.AGENT_ITEMS_IN_FLIGHT = 8, 12, 20
    version = pset_import(root=DEMO_PSET, version_name="share-1.0.0", publish=True).version
    reference = ModelEntry.objects.get(name="reference")
    platform = services.run_start(model=reference, version=version, mode="agent", budget={"turns": 4})
    users = services.run_start(model=reference, version=version, mode="agent", budget={"turns": 4}, user=author)
    single = services.run_start(model=reference, version=version, user=other_author)
    assert users.created_by == author and single.created_by == other_author and platform.created_by is None
    queued = [json.loads(m) for m in redis.Redis.from_url(worker_broker).lrange("sandbox", 0, -1)]
    runs = [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0][0]) for m in queued]
    agent_task = "evaluation.agents.tasks.item_agent"
    assert runs.count((agent_task, platform.pk)) == 20 < version_snippets(version=version).count()
    assert runs.count((agent_task, users.pk)) == 12, "the user's limit holds"
    assert runs.count(("evaluation.tasks.item_evaluate", single.pk)) == 8
