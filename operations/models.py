"""The event log and the re-dispatchable row: what every app's lost work is made of.

An event names what it is about by subject (the model's label and the row's id), not by foreign keys, so this app
needs no other app; the app that owns the subject says how to show it (operations.registry)."""

from __future__ import annotations

from django.db import models


class OperationsEvent(models.Model):
    """Something the platform went through and recovered from by itself (a service down, lost work queued again),
    kept for the operations page."""

    class Kind(models.TextChoices):
        BROKER_UNAVAILABLE = "broker_unavailable", "Broker unavailable"
        DATABASE_UNAVAILABLE = "database_unavailable", "Database unavailable"
        ITEMS_REDISPATCHED = "items_redispatched", "Items re-dispatched"
        VALIDATION_REDISPATCHED = "validation_redispatched", "Validation re-dispatched"
        VALIDATION_ABANDONED = "validation_abandoned", "Validation given up"
        DOWNLOADS_REDISPATCHED = "downloads_redispatched", "Downloads re-dispatched"
        PREPARATION_REDISPATCHED = "preparation_redispatched", "Task preparation re-dispatched"
        FORKSERVER_STARTED = "forkserver_started", "Fork server started"
        FORKSERVER_COLD = "forkserver_cold", "Fork server off: items start cold"

    kind = models.CharField(max_length=30, choices=Kind.choices)
    detail = models.TextField()
    worker = models.CharField(max_length=200, blank=True)
    subject_kind = models.CharField(
        max_length=100,
        blank=True,
        help_text="What the event is about: a model's label, e.g. evaluation.evaluationrun "
        "(blank: the platform as a whole).",
    )
    subject_id = models.PositiveBigIntegerField(null=True, blank=True)
    items = models.PositiveIntegerField(default=0, help_text="Items queued again (re-dispatch events).")
    since = models.DateTimeField(null=True, blank=True, help_text="When the outage began, where known.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["-created_at"], name="operations_event_recent"),
            models.Index(fields=["subject_kind", "subject_id"], name="operations_event_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.detail[:80]}"


class Redispatchable(models.Model):
    """A row whose background work a fault can lose: the watchdog claims it by `redispatched_at` (one watchdog wins
    when several look at once) and counts how often, so work lost again and again can be given up."""

    redispatched_at = models.DateTimeField(null=True, blank=True, help_text="When the watchdog last queued it again.")
    redispatches = models.PositiveIntegerField(default=0, help_text="How often the watchdog queued it again.")

    class Meta:
        abstract = True


class WorkerSlots(models.Model):
    """A worker's slots (its pool's processes) and the queues it takes, as its watchdog last said: the run feeder
    keeps about as many items in flight as the live workers have slots (operations/slots.py)."""

    hostname = models.CharField(max_length=200, unique=True)
    queues = models.JSONField(default=list)
    slots = models.PositiveIntegerField()
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname}: {self.slots} slot(s) on {', '.join(self.queues)}"
