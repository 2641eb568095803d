"""The Celery pipeline with real workers, Redis and a real sandbox: calibration scores, worker death, cancel/resume."""

from __future__ import annotations

import signal
import time

import pytest
from django.conf import settings

from benchmarks.models import Task
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.selectors.monitoring import run_forkserver
from operations.models import OperationsEvent
from sandbox.forkserver import NO_CTYPES
from tests.conftest import demo_papers, polled, sandbox_backend_or_missing

# serialized_rollback restores the calibration models (data migration) that a transactional flush removes.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def run_and_wait(model_name: str, version, worker, *, samples: int = 1, timeout: float = 600) -> EvaluationRun:
    run = services.run_start(model=ModelEntry.objects.get(name=model_name), version=version, samples=samples)
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=timeout,
        worker=worker,
        what=f"{model_name} run to complete",
    )
    return EvaluationRun.objects.get(pk=run.pk)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_reference_scores_100_and_placeholder_0(backend, release, celery_worker_factory, sandbox_cache):
    sandbox_backend_or_missing(backend, sandbox_cache)
    worker = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND=backend)

    reference = run_and_wait("reference", release, worker)
    placeholder = run_and_wait("placeholder", release, worker)

    total = RunScore.objects.get(run=reference, paper=None, split="")
    assert (total.items, total.passed, total.errors, total.flagged, total.scaled_pass_rate) == (33, 33, 0, 0, 100.0)
    assert RunScore.objects.filter(run=reference, paper__isnull=False).count() == 3
    zero = RunScore.objects.get(run=placeholder, paper=None, split="")
    assert (zero.passed, zero.failed, zero.errors, zero.flagged, zero.scaled_pass_rate) == (0, 33, 0, 0, 0.0)
    # Neither calibration answer raises a finding, statically or at run time.
    assert not Outcome.objects.filter(run__in=[reference, placeholder]).exclude(findings=[]).exists()
    # Imported without test manifests (no validation ran): each task's first item made its own from the reference
    # (FORMAT.md 7.5), and the harness counted every test of every reference answer passed.
    manifests = {task.paper.slug: task.test_manifest for task in Task.objects.filter(versions=release)}
    assert {slug: (m["runner"], len(m["tests"]), set(m["tests"].values())) for slug, m in manifests.items()} == {
        "dampnest": ("unittest", 4, {"passed"}),
        "topk-attention-pool": ("unittest", 4, {"passed"}),
        "trimmed-infonce": ("unittest", 6, {"passed"}),
    }
    for outcome in Outcome.objects.filter(run=reference).select_related("snippet__task"):
        assert (
            outcome.tests_summary == f"{len(outcome.snippet.task.test_manifest['tests'])} of "
            f"{len(outcome.snippet.task.test_manifest['tests'])} tests passed"
        )
    assert all(not all(row["passed"] for row in o.tests) for o in Outcome.objects.filter(run=placeholder))
    assert set(Outcome.objects.filter(run=reference).values_list("sandbox_backend", flat=True)) == {backend}
    if backend == "bwrap":
        # The fork server is on by default: the numpy papers' items ran in its forks; trimmed-infonce imports nothing
        # that loads ctypes, so its environment runs cold, and the log says why.
        output = worker.output()
        assert "fork server for environment" in output
        cold = [line for line in output.splitlines() if "starts cold" in line or "runs cold" in line]
        assert cold and all("no preload loads ctypes" in line for line in cold), cold
        # Said on the run's page and in its manifest too: the starts of the items' first-use manifest runs count
        # (the first among them), and trimmed-infonce's environment's start says its items start cold.
        starts = run_forkserver(run=reference).starts
        infonce = Task.objects.get(versions=release, paper__slug="trimmed-infonce").environment_hash[:12]
        assert "first" in {s["reason"] for s in starts if infonce not in s["environment"]}, starts
        assert [s for s in starts if infonce in s["environment"]], starts
        assert all(NO_CTYPES in s["detail"] for s in starts if infonce in s["environment"]), starts


def _sessions_opened() -> int:
    """Connections ever opened to this database (PostgreSQL's statistics; a backend reports its own within 1 s)."""
    from django.db import connection

    time.sleep(1.5)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_a_worker_keeps_its_database_connection_across_items_and_replaces_one_killed(
    release, celery_worker_factory, sandbox_cache
):
    # Celery closes a worker's connection after every task unless told to reuse it: each item then forked a server
    # process of its own to connect (2 ms and more under load, on cores the tests need).
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("connections are kept on PostgreSQL only")
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        started = cursor.fetchone()[0]
    worker = celery_worker_factory(queues="sandbox,default", SANDBOX_BACKEND="bwrap")
    opened = _sessions_opened()
    run_and_wait("reference", release, worker)
    assert _sessions_opened() - opened <= 6  # the pool's process, the watchdog's thread: 33 items, not 33 connects
    with connection.cursor() as cursor:  # the database restarted between runs, as the worker sees it
        # Only the worker's connections, opened since this test began (not the session's live server's).
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_start > %s",
            [started],
        )
        assert cursor.fetchone()[0] >= 1
    placeholder = run_and_wait("placeholder", release, worker)
    assert set(Outcome.objects.filter(run=placeholder).values_list("status", flat=True)) == {"failed"}
    # Replaced before its task used it (Django's health check), not lost mid-task and waited out as an outage.
    outages = OperationsEvent.objects.filter(kind=OperationsEvent.Kind.DATABASE_UNAVAILABLE)
    assert not outages.exists(), worker.output()[-3000:]


def test_sigkill_of_the_worker_mid_run_still_scores_every_item_once(
    celery_worker_factory, sandbox_cache, media_root, tmp_path
):
    backend = "bwrap"
    sandbox_backend_or_missing(backend, sandbox_cache)
    # One paper of the demo, three samples (30 items): the kill after 10 outcomes is mid-run all the same, and the
    # demo's other 69 items only added time.
    version = pset_import(root=demo_papers(tmp_path, "trimmed-infonce"), version_name="1.0.0", publish=True).version
    options = dict(SANDBOX_BACKEND=backend, CELERY_VISIBILITY_TIMEOUT="5")
    first = celery_worker_factory(queues="sandbox", **options)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, samples=3)

    polled(lambda: Outcome.objects.filter(run=run).count() >= 10, timeout=300, worker=first, what="the first outcomes")
    first.kill(signal.SIGKILL)
    done_at_kill = Outcome.objects.filter(run=run).count()
    assert done_at_kill < run.total_items, "the worker must die mid-run for this test to mean anything"

    second = celery_worker_factory(queues="sandbox", **options)
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=300,
        worker=second,
        what="the run to complete after the restart",
    )

    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == run.total_items == 30
    assert outcomes.values("snippet", "sample").distinct().count() == 30
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert RunScore.objects.get(run=run, paper=None, split="").scaled_pass_rate == 100.0


def test_cancel_stops_dispatched_items_and_resume_finishes_only_the_missing(
    release, celery_worker_factory, worker_broker, sandbox_cache
):
    import re

    import redis

    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release)
    services.run_cancel(run=run)
    broker = redis.Redis.from_url(worker_broker)
    queued = broker.llen("sandbox")
    assert queued == settings.RUN_ITEMS_IN_FLIGHT, "the run's first share is on the broker when it is cancelled"
    worker = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="local")
    # The worker has taken every queued item and ended its task (acknowledged: none left on the broker, none unacked).
    ended = re.compile(r"Task evaluation\.tasks\.item_evaluate\[[^\]]+\] succeeded")
    polled(
        lambda: (
            len(ended.findall(worker.output())) == queued and not broker.llen("sandbox") and not broker.hlen("unacked")
        ),
        timeout=300,
        worker=worker,
        what="the worker to take the cancelled items",
    )
    assert Outcome.objects.filter(run=run).count() == 0, "a cancelled run's queued items are skipped"

    dispatched = services.run_resume(run=run)
    assert dispatched == 1 < 33, "what the worker's one slot runs now; the feeder queues the rest as items end"
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=300,
        worker=worker,
        what="the resumed run",
    )
    assert Outcome.objects.filter(run=run).count() == 33


def test_full_run_through_an_openai_compatible_server_records_tokens_latency_and_answers(
    release, celery_worker_factory, sandbox_cache
):
    import re

    from benchmarks.models import Snippet
    from evaluation.models import Generation
    from tests.evaluation.openai_server import openai_server

    references = {s.name: s.reference_code for s in Snippet.objects.filter(task__versions=release)}

    def answer_with_reference(prompt: str, body: dict) -> str:
        name = re.findall(r'# TODO: Implement block "([^"]+)"', prompt)[0]  # the example comes later
        return f"Here is the block.\n```python\n{references[name]}```\n"

    with openai_server(responder=answer_with_reference, failures=[429, 500]) as server:
        model = services.model_register(
            name="local-gpt",
            display_name="Local GPT",
            litellm_model="openai/rcb-local",
            api_base=server.base_url,
            api_key="sk-test-secret-123",
        )
        worker = celery_worker_factory(queues="llm,sandbox", SANDBOX_BACKEND="local")
        run = services.run_start(model=model, version=release)
        polled(
            lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=300,
            worker=worker,
            what="the model run",
        )
        auth = {r.headers["Authorization"] for r in server.chat_requests}

    generations = Generation.objects.filter(run=run)
    assert generations.count() == 33
    for generation in generations:
        assert generation.prompt_tokens > 100 and generation.completion_tokens > 0
        assert generation.latency > 0 and generation.raw_answer.startswith("Here is the block.")
        assert generation.extracted_code and len(generation.prompt_hash) == 64
        assert generation.cost is None, "a model unknown to the cost tables costs unknown, not zero"
    assert auth == {"Bearer sk-test-secret-123"}
    assert len(server.chat_requests) == 35, "two failures were retried"
    score = RunScore.objects.get(run=run, paper=None, split="")
    assert score.scaled_pass_rate == 100.0 and score.prompt_tokens > 0 and score.cost is None
    assert "sk-test-secret-123" not in worker.output()


def test_a_connection_a_task_left_inside_a_transaction_is_not_kept_for_the_next():
    # A raw BEGIN is invisible to Django (its autocommit flag stays on): kept, the next task would run inside that
    # transaction and lose its work with the connection.
    from types import SimpleNamespace

    from django.db import connection

    from config.celery import _connections_left_clean

    if connection.vendor != "postgresql":
        pytest.skip("connections are kept on PostgreSQL only")
    task = SimpleNamespace(request=SimpleNamespace(is_eager=False))
    connection.ensure_connection()
    _connections_left_clean(task=task)
    assert connection.connection is not None, "a connection left clean is kept"
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
    _connections_left_clean(task=task)
    assert connection.connection is None
    with connection.cursor() as cursor:  # the next task's first query: a new connection, outside any transaction
        cursor.execute("SELECT now() = statement_timestamp()")
        assert cursor.fetchone()[0]
