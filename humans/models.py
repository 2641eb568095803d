"""The human baseline: a person's attempt at one public item under a model's conditions, timed on the server,
whether they are listed by name on the release's Humans page, and the tasks whose reference code they chose to see."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks.models import BenchmarkVersion, Snippet, Task
from evaluation.models import EvaluationRun


class Attempt(models.Model):
    """One person, one item: opened, maybe paused and resumed, then submitted once (pass@1) or abandoned.

    The clock is the server's: `active_seconds` is submitted - opened - paused time. The answer is scored by its own
    run (mode `human`) through the evaluation pipeline, like any uploaded answer."""

    class State(models.TextChoices):
        OPEN = "open"
        PAUSED = "paused"
        SUBMITTED = "submitted"
        ABANDONED = "abandoned"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="human_attempts")
    version = models.ForeignKey(BenchmarkVersion, on_delete=models.PROTECT, related_name="human_attempts")
    snippet = models.ForeignKey(Snippet, on_delete=models.PROTECT, related_name="human_attempts")
    with_paper = models.BooleanField(default=True, help_text="The prompt held the paper (False: the ablation).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField()
    paused_at = models.DateTimeField(null=True, blank=True, help_text="When the current pause began.")
    paused_seconds = models.FloatField(default=0.0, help_text="Time spent paused, not counted.")
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Submitted or abandoned.")
    active_seconds = models.FloatField(null=True, blank=True, help_text="Working time: open, less the pauses.")
    body = models.TextField(blank=True, help_text="The snippet body as submitted.")
    run = models.OneToOneField(
        EvaluationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="human_attempt"
    )
    # What the page's editor saw (never the text of other windows): null when the page sent none (no JavaScript).
    keystrokes = models.PositiveIntegerField(null=True, blank=True)
    pastes = models.JSONField(
        default=list, blank=True, help_text="Paste events: seconds after opening (working time) and characters."
    )
    fast_paste = models.BooleanField(
        default=False, help_text="The body came in one paste within HUMAN_FAST_PASTE_SECONDS of opening."
    )
    excluded_reason = models.TextField(blank=True, help_text="A maintainer's reason to leave it out of the figures.")
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    excluded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            # pass@1: a person sees an item's prompt once, whatever the release it is offered in.
            models.UniqueConstraint(fields=["user", "snippet"], name="human_attempt_one_per_item"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.pk}: user {self.user_id} on item {self.snippet_id} ({self.state})"

    @property
    def is_live(self) -> bool:
        return self.state in (self.State.OPEN, self.State.PAUSED)

    @property
    def minutes(self) -> float | None:
        return None if self.active_seconds is None else self.active_seconds / 60


class Listing(models.Model):
    """A person's choice to have their results shown by name on the Humans pages (private unless they opt in)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="human_listing")
    listed = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"user {self.user_id}: {'listed' if self.listed else 'private'}"


class ReferenceSeen(models.Model):
    """A person chose to see a task's reference code on its paper page: its items are no longer offered to them
    (humans.selectors.REFERENCE_RULE)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="references_seen")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="+")
    seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "task"], name="reference_seen_once")]

    def __str__(self) -> str:
        return f"user {self.user_id} saw the reference of task {self.task_id}"
