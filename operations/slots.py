"""How many items the live workers run at once, per queue: each worker's watchdog says so every few seconds, and the
run feeder keeps about that many items in flight, so that what it queues next is what runs next."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from operations.models import WorkerSlots


def worker_slots_record(*, hostname: str, queues: list[str], slots: int) -> None:
    """This worker is alive with `slots` processes taking `queues` (the watchdog, on each look)."""
    WorkerSlots.objects.update_or_create(
        hostname=hostname, defaults={"queues": sorted(queues), "slots": slots, "seen_at": timezone.now()}
    )


def worker_slots_forget(*, hostname: str) -> None:
    WorkerSlots.objects.filter(hostname=hostname).delete()


def queue_slots(*queues: str) -> int | None:
    """The slots of the workers taking any of `queues` that were seen lately; None when no such worker was (none
    started yet, or none says so)."""
    feed, watch = settings.RUN_FEED_SECONDS, settings.RUN_WATCH_SECONDS
    # Three looks missed: the worker is gone (a killed worker leaves its row behind).
    fresh = timezone.now() - timedelta(seconds=3 * max(1, min(feed, watch) if feed > 0 else watch))
    rows = WorkerSlots.objects.filter(seen_at__gte=fresh).values_list("queues", "slots")
    return sum(slots for taken, slots in rows if set(queues) & set(taken)) or None
