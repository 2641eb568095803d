"""The watchdog asks the broker and the workers what is queued and held; a message a worker takes between the two
questions must not read as lost. A CI run re-dispatched a validation twice (two events, the validation run twice):
the workers were asked first, for seconds (their replies are waited for), and the queue read after."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from operations import broker, watchdog
from operations.events import Kind, events_of
from submissions import services
from tests.conftest import polled
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
