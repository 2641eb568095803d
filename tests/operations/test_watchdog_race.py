"""The watchdog asks the broker and the workers what is queued and held, one question after another, each waiting
out the workers' replies (a second); work that moves on between two questions must not read as lost. A message a
worker takes between the queues and the workers is held (the queues are read first: a CI run re-dispatched a
validation twice when they were read last); a task that starts between two questions to the workers is running
(they are asked in the order a task moves: a CI run queued a set validation's paper a second time)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from celery.app.control import Inspect
from django.contrib.auth.models import User
from django.core.files.storage import default_storage

from benchmarks.models import Blob
from benchmarks.paper2code.pset import read_pset
from operations import broker, watchdog
from operations.enqueue import task_named
from operations.events import Kind, events_of
from submissions import services, validation
from submissions.models import SetValidation, SetValidationPaper
from tests.conftest import demo_papers, polled
from tests.submissions.conftest import fill_draft

pytestmark = pytest.mark.django_db(transaction=True)


def _taken_by_a_worker_while_the_workers_are_asked(monkeypatch) -> list[int]:
    """After the workers answer (nothing held: none listens on the sandbox queue), the validation's message leaves
    its queue, as when a worker takes it in the seconds the question lasts."""
    from config.celery import app

    asked = broker.tasks_held
    taken: list[int] = []

    def held_then_taken(*args, **kwargs):
        answer = asked(*args, **kwargs)
        with app.connection_for_write() as conn:
            message = conn.default_channel.basic_get(queue="sandbox", no_ack=True)
            taken.append(message is not None)
        return answer

    monkeypatch.setattr(broker, "tasks_held", held_then_taken)
    return taken


def test_a_message_taken_while_the_workers_are_asked_is_not_queued_again(celery_worker_factory, monkeypatch, settings):
    worker = celery_worker_factory(queues="default")  # answers the watchdog; takes nothing from the sandbox queue
    polled(lambda: broker.tasks_held() is not None, timeout=120, what="the worker to answer", worker=worker)
    author = User.objects.create_user("ada", password="pw-ada-12345")
    report = services.submission_submit(
        submission=fill_draft(services.submission_create(author=author), author), actor=author
    ).report
    assert broker.queues_waiting(("sandbox",)) == {"sandbox": 1}
    settings.RUN_REDISPATCH_SECONDS = 0  # idle at once: only what the broker and the workers say decides
    taken = _taken_by_a_worker_while_the_workers_are_asked(monkeypatch)

    assert watchdog.lost_work_redispatch() == 0
    assert taken == [True], "the message was in its queue when the workers were asked"
    assert not events_of(subject=report, kinds=[Kind.VALIDATION_REDISPATCHED]).exists()


class Gate:
    """A paper whose task, once started, waits until the test opens its gate: its first stored file is a named pipe
    (reading it waits for a writer) and its second is gone, so once let on its task ends at once, as an error."""

    def __init__(self, paper):
        first, second = (Blob(sha256=digest, size=0).storage_name for _, digest in sorted(paper.files.items())[:2])
        self.fifo = Path(default_storage.path(first))
        self.fifo.unlink()
        os.mkfifo(self.fifo)
        default_storage.delete(second)

    def reader_let_on(self) -> bool:
        """Let the task waiting to read the pipe on (it reads it empty); False while nobody reads it (ENXIO)."""
        try:
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True


def _held_by_the_worker(stage: str, paper_id: int) -> bool:
    """Whether the worker says it holds `paper_id`'s task in `stage` (active, reserved, scheduled)."""
    replies = getattr(broker.celery_app().control.inspect(timeout=1.0), stage)() or {}
    for tasks in replies.values():
        for task in tasks:
            if list(task.get("request", task).get("args") or ())[:1] == [paper_id]:
                return True
    return False


def test_a_task_that_starts_while_the_workers_are_asked_is_not_queued_again(
    celery_worker_factory, media_root, monkeypatch, settings, tmp_path
):
    """A paper's task waits reserved in a worker busy with another (a copy queued again after a broker restart is
    prefetched so) and starts between two of the watchdog's questions to the workers. A CI run queued such a paper a
    second time ('lost and queued again 2 times'): asked which tasks run, then a second later which wait reserved,
    the worker had it in neither answer."""
    # A worker of one process, without a watchdog of its own: this test's look is the only one.
    worker = celery_worker_factory(queues="sandbox", RUN_WATCH_SECONDS="0", SANDBOX_BACKEND="local")
    polled(lambda: broker.tasks_held() is not None, timeout=120, what="the worker to answer", worker=worker)
    run = validation.pset_validation_create(
        packages=read_pset(demo_papers(tmp_path, "dampnest", "trimmed-infonce")), source="the race"
    )
    SetValidation.objects.filter(pk=run.pk).update(on_workers=True)
    busy, started = run.papers.order_by("paper")
    gated = [digest for paper in (busy, started) for _, digest in sorted(paper.files.items())[:2]]
    assert len(set(gated)) == 4, "the papers' gates share no file"
    busy_gate, started_gate = Gate(busy), Gate(started)
    task = task_named(validation.SET_PAPER_VALIDATE)
    try:
        # Queued with a countdown first, it is fetched at once and counts outside the worker's one prefetched task:
        # it waits scheduled, the busy paper's task is taken and runs, and when the countdown ends it waits reserved.
        task.apply_async((started.pk,), countdown=8)
        polled(lambda: _held_by_the_worker("scheduled", started.pk), timeout=60, what="the paper to be scheduled")
        task.delay(busy.pk)
        polled(lambda: _held_by_the_worker("active", busy.pk), timeout=60, what="the busy paper's task to run")
        polled(lambda: _held_by_the_worker("reserved", started.pk), timeout=60, what="the other paper to wait")
        settings.RUN_REDISPATCH_SECONDS = 0  # idle at once: only what the broker and the workers say decides

        asked = Inspect._request
        questions: list[str] = []

        def then_started(self, command, **kwargs):
            answer = asked(self, command, **kwargs)
            questions.append(command)
            if len(questions) == 1:  # the worker is free after the first question: the waiting paper starts
                monkeypatch.setattr(Inspect, "_request", asked)  # the test's own questions are not the watchdog's
                polled(busy_gate.reader_let_on, timeout=60, what="the busy paper's task to read its files")
                polled(lambda: _held_by_the_worker("active", started.pk), timeout=60, what="the paper to start")
                monkeypatch.setattr(Inspect, "_request", then_started)
            return answer

        monkeypatch.setattr(Inspect, "_request", then_started)
        watchdog.lost_work_redispatch()
        monkeypatch.undo()
    finally:
        for gate in (busy_gate, started_gate):
            gate.reader_let_on()

    assert len(questions) == 3, questions
    assert SetValidationPaper.objects.get(pk=started.pk).redispatches == 0, f"asked {questions}"
    assert not events_of(subject=run, kinds=[Kind.VALIDATION_REDISPATCHED]).exists()
