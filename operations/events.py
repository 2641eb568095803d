"""The event log: recording what the platform recovered from, and reading it (the operations page, a run's page, a
release's manifest, a validation's state all read events here).

A subject is any saved row (its model's label and pk); the app that owns the model registers how its subjects are
shown on the operations page (`subjects_register`), so this module never imports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import models
from django.db.models import QuerySet
from django.db.models.signals import post_delete

from operations.models import OperationsEvent

Kind = OperationsEvent.Kind


def subject_key(subject: models.Model) -> tuple[str, int]:
    """(kind, id) of a row an event is about."""
    return subject._meta.label_lower, subject.pk


def event_record(
    *,
    kind: str,
    detail: str,
    worker: str = "",
    subject: models.Model | None = None,
    items: int = 0,
    since: datetime | None = None,
) -> OperationsEvent:
    """Remember something the platform recovered from by itself, for the operations page."""
    subject_kind, subject_id = subject_key(subject) if subject is not None else ("", None)
    return OperationsEvent.objects.create(
        kind=kind,
        detail=detail[:4000],
        worker=worker[:200],
        items=items,
        since=since,
        subject_kind=subject_kind,
        subject_id=subject_id,
    )


def events_of(
    *,
    subject: models.Model | None = None,
    subject_kind: str = "",
    subject_ids: Iterable[int] = (),
    kinds: Iterable[str] = (),
) -> QuerySet[OperationsEvent]:
    """The events about one row (`subject`), or about some rows of one model; newest first; only `kinds` if given."""
    if subject is not None:
        subject_kind, subject_ids = subject_key(subject)[0], [subject.pk]
    events = OperationsEvent.objects.filter(subject_kind=subject_kind, subject_id__in=list(subject_ids))
    kinds = list(kinds)
    return events.filter(kind__in=kinds) if kinds else events


@dataclass(frozen=True)
class Subject:
    """How an event's subject is shown: its name, and its page (blank: none)."""

    label: str
    url: str = ""


# model label -> (ids -> {id: Subject}); one query per model for a whole page of events.
_describers: dict[str, Callable[[list[int]], dict[int, Subject]]] = {}


def subjects_register(model: type[models.Model], describe: Callable[[list[int]], dict[int, Subject]]) -> None:
    """Say how events about rows of `model` are shown (called from the owning app's AppConfig.ready()); a row's
    events go with it when it is deleted, as they did with a foreign key."""
    _describers[model._meta.label_lower] = describe
    post_delete.connect(_events_forget, sender=model, weak=False, dispatch_uid=f"operations.events:{model._meta.label}")


def _events_forget(sender, instance: models.Model, **kwargs) -> None:
    OperationsEvent.objects.filter(subject_kind=sender._meta.label_lower, subject_id=instance.pk).delete()


@dataclass(frozen=True)
class EventShown:
    event: OperationsEvent
    subject: Subject | None  # None: about the platform as a whole, or a row since deleted


def events_recent(limit: int = 50) -> list[EventShown]:
    """The latest things the platform recovered from by itself, newest first, with what each is about."""
    # The fork server's starts are not faults: the operations page shows them per run, beside its cold items.
    events = list(OperationsEvent.objects.exclude(kind=Kind.FORKSERVER_STARTED)[:limit])
    by_kind: dict[str, set[int]] = {}
    for event in events:
        if event.subject_kind and event.subject_id is not None:
            by_kind.setdefault(event.subject_kind, set()).add(event.subject_id)
    described = {kind: _describers[kind](sorted(ids)) if kind in _describers else {} for kind, ids in by_kind.items()}
    return [
        EventShown(event, described.get(event.subject_kind, {}).get(event.subject_id) if event.subject_id else None)
        for event in events
    ]
