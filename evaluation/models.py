"""Registered models, evaluation runs, and per item (run, snippet, sample) one generation and one outcome."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks.models import BenchmarkVersion, Paper, Snippet
from benchmarks.validators import link_validate
from evaluation.crypto import secret_decrypt, secret_encrypt
from operations.models import Redispatchable


class ModelEntry(models.Model):
    """A model that can be evaluated: a litellm model string, or a built-in calibration model."""

    class Kind(models.TextChoices):
        LITELLM = "litellm", "Called through litellm"
        REFERENCE = "reference", "Calibration: answers with the reference code"
        PLACEHOLDER = "placeholder", "Calibration: answers with the masked placeholder only"
        UPLOADED = "uploaded", "Generations uploaded by its developers"
        REPORTED = "reported", "Published results only (imported, never called)"
        HUMAN = "human", "People attempting items on the platform (humans/)"

    name = models.SlugField(max_length=100, unique=True)
    display_name = models.CharField(max_length=200)
    organization = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.LITELLM)
    litellm_model = models.CharField(max_length=200, blank=True, help_text='e.g. "openai/gpt-4o-mini"')
    api_base = models.URLField(max_length=500, blank=True, validators=[link_validate])
    api_key_encrypted = models.TextField(blank=True, editable=False)
    knowledge_cutoff = models.DateField(null=True, blank=True)
    open_weights = models.BooleanField(default=False)
    default_params = models.JSONField(default=dict, blank=True, help_text='e.g. {"max_tokens": 2048}')
    continuous = models.BooleanField(default=False, help_text="Evaluate on every new published version.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def api_key_set(self, plain: str | None) -> None:
        self.api_key_encrypted = secret_encrypt(plain) if plain else ""

    def api_key_get(self) -> str | None:
        return secret_decrypt(self.api_key_encrypted) if self.api_key_encrypted else None

    @property
    def provider(self) -> str:
        return self.litellm_model.split("/", 1)[0] if "/" in self.litellm_model else self.kind


SCAFFOLD_PLATFORM = "researchcodebench-agent"  # the platform's own agent loop (the agents app), as ATIF names it
RUN_MODES = [("single", "single-shot"), ("agent", "agent")]  # the agents app runs the second
# One person's answer to one item (humans/), scored like an upload; never a model's leaderboard row.
HUMAN_MODE = "human"
RUN_RECORD_MODES = [*RUN_MODES, (HUMAN_MODE, "human")]  # what a stored run can be; RUN_MODES what a user starts


class EvaluationRun(Redispatchable):
    """One model on one published version under one setting; its items are snippets x samples."""

    # Not a field: what run_from_upload says of the upload, on the run it returns (pages and API show it once).
    upload_warnings: list[str]

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        CANCELLED = "cancelled"

    class Provenance(models.TextChoices):
        # What the platform vouches for; evaluation/provenance.py decides a run's and says it in full.
        VERIFIED = "verified", "verified"  # the platform called a provider at its own address, or a calibration model
        VERIFIED_UPLOAD = "verified_upload", "verified upload"  # uploaded answers a maintainer checked
        SELF_REPORTED = "self_reported", "self-reported"  # uploaded, or generated at the owner's own endpoint
        REPORTED = "reported", "reported"  # published results imported as published

    model = models.ForeignKey(ModelEntry, on_delete=models.PROTECT, related_name="runs")
    version = models.ForeignKey(BenchmarkVersion, on_delete=models.PROTECT, related_name="runs")
    protocol = models.CharField(max_length=20, default="rcb-v1", help_text="Prompt template version.")
    with_paper = models.BooleanField(default=True)
    samples = models.PositiveSmallIntegerField(default=1)
    covers_held_out = models.BooleanField(
        default=False, help_text="Evaluates the held-out split too (only runs of models maintainers trust)."
    )
    params = models.JSONField(default=dict, blank=True, help_text="Generation parameters, e.g. temperature.")
    # What the run calls, fixed at its start: every item's generation and held-out check read these, never the
    # model's current settings, so editing the model after the start changes nothing the run sends anywhere.
    litellm_model = models.CharField(
        max_length=200, blank=True, help_text="The model string called, as the model had it at the run's start."
    )
    api_base = models.CharField(
        max_length=500,
        blank=True,
        help_text="The endpoint called, as at the run's start; empty: the provider's own address.",
    )
    model_params = models.JSONField(
        default=dict,
        blank=True,
        help_text="The model's default parameters at the run's start (`params` override them).",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    provenance = models.CharField(max_length=20, choices=Provenance.choices, default=Provenance.VERIFIED)
    total_items = models.PositiveIntegerField(default=0)
    source = models.TextField(blank=True, help_text="Where reported results were published (reported runs).")
    done_items = models.PositiveIntegerField(
        default=0, help_text="Outcomes recorded, counted as they come: a cheap test of whether the run may be done."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    # The feeder (services.run_feed, called by operations/watchdog.py) keeps a bounded number of a run's items on
    # the broker, never all at once.
    priority = models.SmallIntegerField(
        default=0, help_text="Set by maintainers: a run of priority p keeps 1 + p shares of items in flight (0-10)."
    )
    feed_cursor = models.PositiveIntegerField(
        default=0, help_text="How far the feeder went through the run's items in feed order (environment, paper)."
    )
    fed_items = models.PositiveIntegerField(
        default=0, help_text="Items queued by the feeder, counted with done_items: fed - done are in flight."
    )
    feed_epoch = models.PositiveIntegerField(
        default=0,
        help_text="Which feed the run's messages belong to: each (re)dispatch starts a new one, and a "
        "message of an earlier feed is dropped when it reaches a worker.",
    )
    pause_reason = models.TextField(
        blank=True,
        help_text="Why the run stopped itself (its model calls kept failing the same way); cleared on resume.",
    )
    asked_again = models.JSONField(
        default=list,
        blank=True,
        help_text="Items ([snippet id, sample]) a resume asked again after their model call failed: failing again, "
        "they end as any failed call does and never pause the run again.",
    )
    # The owner's pick of the model's leaderboard row for this release and setting: a later run never replaces it.
    pinned_at = models.DateTimeField(
        null=True, blank=True, help_text="When the run was pinned as its model's leaderboard run in its setting."
    )
    pinned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Single-shot: one prompt, one answer. Agent: the model works in a sandbox workspace over many turns within
    # `agent_budget` per item (the agents app).
    mode = models.CharField(max_length=10, choices=RUN_RECORD_MODES, default="single")
    agent_budget = models.JSONField(
        default=dict, blank=True, help_text="Agent runs: the per-item budget, {turns, tokens, seconds, cost}."
    )
    # Runs started together by one `repeat` request: the leaderboard shows them as one row (mean and standard
    # error across the runs), each run still its own page.
    repeat_group = models.UUIDField(
        null=True, blank=True, db_index=True, help_text="Shared by the runs one start with repeat > 1 made."
    )

    class Meta:
        ordering = ["-created_at"]
        # Active runs are looked up by status on every watchdog pass and per user by the run quota.
        indexes = [models.Index(fields=["status", "created_by"], name="run_status_created_by")]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "version", "mode", "with_paper"],
                condition=models.Q(pinned_at__isnull=False),
                name="run_one_pin_per_setting",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk}: {self.model} on {self.version}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def status_label(self) -> str:
        """Its status as pages say it: a run that paused itself is stored cancelled, with the reason, and reads
        Paused."""
        return "Paused" if self.pause_reason and self.status == self.Status.CANCELLED else self.get_status_display()

    @property
    def is_calibration(self) -> bool:
        return self.model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER)

    @property
    def is_upload(self) -> bool:
        """Whether the run's answers were made elsewhere and uploaded (services.run_from_upload marks its params):
        the platform called no model for them, and its pages say so."""
        return bool((self.params or {}).get("uploaded"))

    @property
    def calls_owner_endpoint(self) -> bool:
        """Whether the run's model calls go to an endpoint its model's owner runs (the api_base snapshot at its
        start), not to a provider the platform configures: a failure there is the owner's (outcomes.model_call_failed),
        as what it answers is (provenance: self-reported)."""
        return bool(self.api_base)

    @property
    def paper_label(self) -> str:
        return "with paper" if self.with_paper else "without paper"

    @property
    def scaffold(self) -> str:
        """What ran the agent: an upload's scaffold as it named itself (a Harbor agent's name and version), the
        platform's own agent loop for its agent runs, "" for single-shot runs (no scaffold)."""
        given = (self.params or {}).get("scaffold")
        if isinstance(given, dict) and given.get("name"):
            return f"{given['name']} {given.get('version') or ''}".strip()
        return SCAFFOLD_PLATFORM if self.mode == "agent" else ""

    @property
    def setting_label(self) -> str:
        """Its mode and paper setting as every page names them, e.g. "agent, with paper"."""
        return f"{self.get_mode_display()}, {self.paper_label}"

    @property
    def provider(self) -> str:
        """The provider the run calls, from its snapshot (like ModelEntry.provider)."""
        return self.litellm_model.split("/", 1)[0] if "/" in self.litellm_model else self.model.kind

    @property
    def call_params(self) -> dict:
        """The generation parameters every item is sent with: the snapshot's defaults, overridden by the run's."""
        return {**self.model_params, **self.params}


class ProvenanceChange(models.Model):
    """The audit record of a maintainer changing a run's provenance (e.g. verifying an upload), and why."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="provenance_changes")
    from_provenance = models.CharField(max_length=20, choices=EvaluationRun.Provenance.choices)
    to_provenance = models.CharField(max_length=20, choices=EvaluationRun.Provenance.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.from_provenance} -> {self.to_provenance}"


class EnvironmentLock(models.Model):
    """What an environment held when a worker first used it: installed distributions, or the image id."""

    environment_hash = models.CharField(max_length=64)
    backend = models.CharField(max_length=20)
    lock_hash = models.CharField(max_length=64, help_text="sha256 of the canonical JSON of `lock`.")
    lock = models.JSONField(help_text='{"python": ..., "distributions": {name: version}} or {"image_id": ...}')
    worker = models.CharField(max_length=200, blank=True, help_text="The worker that recorded it first.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["environment_hash", "backend", "lock_hash"], name="environmentlock_unique")
        ]

    def __str__(self) -> str:
        return f"{self.backend} {self.environment_hash[:12]}"


class Generation(models.Model):
    """The model's answer for one item, with what it cost."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="generations")
    snippet = models.ForeignKey(Snippet, on_delete=models.PROTECT, related_name="+")
    sample = models.PositiveSmallIntegerField(default=0)
    prompt_hash = models.CharField(max_length=64)
    raw_answer = models.TextField(blank=True)
    extracted_code = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency = models.FloatField(null=True, blank=True, help_text="Seconds.")
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True, help_text="USD; null: unknown.")
    attempts = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True, help_text="Why no answer could be had (not the model's fault).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "snippet", "sample"], name="generation_unique_item")]

    def __str__(self) -> str:
        return f"run {self.run_id}, snippet {self.snippet_id}, sample {self.sample}"


# The maintainers' review queue (/review/flags/, its count), one rule: a flagged outcome whose score a review can
# still move. A flag on an answer whose tests failed is not in it: the item scores 0 whatever the review says
# (confirmed: failed; cleared: what the tests said, failed), so the flag shows on the item's page and holds up no one.
# `Outcome.awaiting_review` reads it on one outcome.
AWAITING_REVIEW = models.Q(status="flagged") & ~models.Q(measured_status="failed")
# What scores and counts take an outcome for: its status, but a flag awaiting no review as what its tests said
# (failed), never among the items the leaderboard and the run page say await review.
SCORED_STATUS = models.Case(
    models.When(models.Q(status="flagged") & ~AWAITING_REVIEW, then=models.F("measured_status")),
    default=models.F("status"),
    output_field=models.CharField(),
)
# How every page names the count of AWAITING_REVIEW (the run page's scores and progress, the leaderboard's column
# and badge): headed "Flagged", a newcomer read it as every flag, those on failed answers too.
AWAITING_REVIEW_LABEL = "Awaiting review"
AWAITING_REVIEW_SAID = (
    "Items awaiting a maintainer's review (flagged answers, infrastructure errors after an agent's commands), counted "
    "as not passed until reviewed; a flag on an answer whose tests failed awaits none (it counts as failed)"
)


class Outcome(models.Model):
    """What the tests said about one item; errors are infrastructure problems, never scored."""

    class Status(models.TextChoices):
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"
        # The answer did something a genuine snippet has no reason to do: not passed until a maintainer clears it.
        FLAGGED = "flagged"

    class Review(models.TextChoices):
        CONFIRMED = "confirmed", "Confirmed: tampering, scored as failed"
        CLEARED = "cleared", "Cleared: the measured verdict stands"

    class Category(models.TextChoices):
        NONE = "", "passed"
        SYNTAX = "syntax", "Syntax error"
        NAME_IMPORT = "name_import", "Name or import error"
        RUNTIME = "runtime", "Runtime error"
        WRONG_RESULT = "wrong_result", "Wrong result"
        TIMEOUT = "timeout", "Timeout"
        MEMORY = "memory", "Memory"
        FORBIDDEN = "forbidden", "Uses hidden test or reference code"
        TAMPERING = "tampering", "Tampers with its test"
        INFRASTRUCTURE = "infrastructure", "Infrastructure"
        # The model's endpoint refused or could not be reached (a wrong key, a provider down): the model's failure.
        MODEL_CALL = "model_call", "Model call failed"
        # The same at an endpoint the model's owner runs (EvaluationRun.calls_owner_endpoint): it can fail exactly
        # the items its model cannot solve, so the item is failed, never left out of the score.
        OWNER_ENDPOINT = "owner_endpoint", "The model's own endpoint failed"
        # An upload says its item ended in an error (a Harbor trial's exception): the platform cannot tell it from
        # the agent's own failure, so it is not passed, never left out of the score as the platform's errors are.
        REPORTED_ERROR = "reported_error", "Error the upload reports"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="outcomes")
    snippet = models.ForeignKey(Snippet, on_delete=models.PROTECT, related_name="+")
    sample = models.PositiveSmallIntegerField(default=0)
    generation = models.OneToOneField(Generation, null=True, blank=True, on_delete=models.CASCADE)
    status = models.CharField(max_length=10, choices=Status.choices)
    category = models.CharField(max_length=20, choices=Category.choices, blank=True)
    detail = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True, help_text="Seconds the test ran.")
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    environment_hash = models.CharField(max_length=64, blank=True)
    sandbox_backend = models.CharField(max_length=20, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="Host name of the worker that ran it.")
    forked = models.BooleanField(
        null=True,
        blank=True,
        help_text=(
            "Run in a fork of the warm fork server (True) or started cold although the worker's fork server is on "
            "(False); empty where there is none (its backend has none, or SANDBOX_FORKSERVER is off)."
        ),
    )
    environment_lock = models.ForeignKey(
        EnvironmentLock, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    limits = models.JSONField(default=dict, blank=True, help_text="The sandbox limits the test ran under.")
    findings = models.JSONField(
        default=list, blank=True, help_text="Audit findings (static and runtime): kind, line, detail, source."
    )
    tests = models.JSONField(
        default=list,
        blank=True,
        help_text="The tests the harness counted: id, outcome, passed, problem, traceback tail.",
    )
    measured_status = models.CharField(
        max_length=10, blank=True, help_text="What the test said (passed/failed) before the outcome was flagged."
    )
    review = models.CharField(max_length=10, choices=Review.choices, blank=True)
    review_reason = models.TextField(blank=True, help_text="The reviewer's reason (required for a person's attempt).")
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "snippet", "sample"], name="outcome_unique_item")]
        # The maintainers' queue of flagged answers, newest first, and its count in their navigation.
        indexes = [models.Index(fields=["-created_at"], condition=AWAITING_REVIEW, name="outcome_awaiting_review")]

    def __str__(self) -> str:
        return f"run {self.run_id}, snippet {self.snippet_id}, sample {self.sample}: {self.status}"

    @property
    def was_flagged(self) -> bool:
        return bool(self.findings)

    @property
    def shown_status(self) -> str:
        """The status its badge shows: a flag on an answer that failed its tests shows it failed (it counts so
        whatever a review says), the flag beside it."""
        return self.Status.FAILED if self.flagged_failed else self.status

    @property
    def shown_status_label(self) -> str:
        return "Failed (flagged)" if self.flagged_failed else self.get_status_display()

    @property
    def flagged_failed(self) -> bool:
        return self.status == self.Status.FLAGGED and self.measured_status == self.Status.FAILED

    @property
    def awaiting_review(self) -> bool:
        """In the maintainers' review queue: AWAITING_REVIEW, read on this outcome."""
        return self.status == self.Status.FLAGGED and self.measured_status != self.Status.FAILED

    @property
    def error_held(self) -> bool:
        """An infrastructure error held as not passed for review: after its agent's commands (evaluation.outcomes.
        agent_error_held) or an answer the platform could not judge or record (judging_failed), the only verdicts
        whose measured status is an error."""
        return self.measured_status == self.Status.ERROR

    @property
    def error_after_agent(self) -> bool:
        """A held error after its agent's commands (its finding's source is the agent)."""
        return self.error_held and any(finding.get("source") == "agent" for finding in self.findings)

    @property
    def error_held_said(self) -> str:
        """What a held error is, in words."""
        if self.error_after_agent:
            return "an infrastructure error after the agent's commands"
        return "an answer the platform could not judge or record"

    @property
    def review_said(self) -> str:
        """The review's decision in words (a held error is counted or set aside: no tampering)."""
        if not self.review or not self.error_held:
            return self.get_review_display()
        if self.review == self.Review.CONFIRMED:
            return f"Counted: the {'agent' if self.error_after_agent else 'answer'}'s doing, not passed"
        return "Set aside: the platform's error, not scored"

    @property
    def tests_summary(self) -> str:
        """ "3 of 4 tests passed", from the harness's own count ("" when it counted none)."""
        if not self.tests:
            return ""
        passed = sum(1 for row in self.tests if row.get("passed"))
        return f"{passed} of {len(self.tests)} test{'s' if len(self.tests) != 1 else ''} passed"


class RunScore(models.Model):
    """Aggregates of a finished run, so pages never recompute: overall (paper null, split ""), per split
    (paper null, split set) and per paper (split "")."""

    class Split(models.TextChoices):
        ALL = "", "all"
        PUBLIC = "public"
        HELD_OUT = "held_out", "held out"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="scores")
    paper = models.ForeignKey(Paper, null=True, blank=True, on_delete=models.CASCADE)
    split = models.CharField(max_length=10, choices=Split.choices, blank=True, default="")
    items = models.PositiveIntegerField()
    passed = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()
    errors = models.PositiveIntegerField()
    flagged = models.PositiveIntegerField(default=0, help_text="Items awaiting a maintainer's review, not scored.")
    test_gaming = models.PositiveIntegerField(
        default=0, help_text="Items whose tests passed while the sealed replay disagreed (measured, reviewed or not)."
    )
    pass_rate = models.FloatField()
    pass_rate_std = models.FloatField()
    scaled_pass_rate = models.FloatField()
    scaled_pass_rate_std = models.FloatField()
    scaled_ci_low = models.FloatField()
    scaled_ci_high = models.FloatField()
    pass_rate_ci_low = models.FloatField()
    pass_rate_ci_high = models.FloatField()
    pass_at_k = models.JSONField(default=dict, blank=True, help_text="k -> pass@k (percent), when samples > 1.")
    size_buckets = models.JSONField(
        default=dict,
        blank=True,
        help_text=("Snippet-size bucket -> {items, passed} of the scored outcomes; on overall and split rows."),
    )
    # None: unknown (an answer's count is, as an upload's: evaluation.scoring.usage_totals), never shown as 0.
    prompt_tokens = models.PositiveBigIntegerField(null=True, blank=True, default=0)
    completion_tokens = models.PositiveBigIntegerField(null=True, blank=True, default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # Item-level aggregates of the split rows (paper null), so ranks and item difficulty never read outcomes.
    item_passes = models.JSONField(
        default=dict, blank=True, help_text="Item id -> share of its scored samples that passed (split rows)."
    )
    categories = models.JSONField(
        default=dict,
        blank=True,
        help_text='Scored answers per outcome category, e.g. {"passed": 3, "syntax": 1} (split rows).',
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "paper"], name="runscore_unique_paper", condition=models.Q(paper__isnull=False)
            ),
            models.UniqueConstraint(
                fields=["run", "split"], name="runscore_unique_split", condition=models.Q(paper__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        paper = f"paper {self.paper_id}" if self.paper_id else "all papers"
        return f"run {self.run_id}, {paper}, split {self.split or 'all'}"

    @property
    def tokens(self) -> int | None:
        """Tokens in and out; None when either is unknown."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


class EnvironmentFailure(models.Model):
    """An environment whose build failed, with its log: items needing it fail at once until a maintainer retries."""

    environment_hash = models.CharField(max_length=64, unique=True)
    requirements = models.TextField(blank=True)
    backend = models.CharField(max_length=20, blank=True)
    message = models.TextField()
    log = models.TextField(blank=True)
    failed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"environment {self.environment_hash[:12]} failed on {self.backend}"


class TaskPreparation(Redispatchable):
    """A task revision's test manifest and recording being made on a worker when a release that holds it is
    imported, validated or published, so no run makes them on its first item (a run still does when they are not
    there yet). One per task revision: the manifest and recording are the revision's, whatever release holds it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PREPARED = "prepared", "Prepared"
        FAILED = "failed", "Failed"

    task = models.OneToOneField("benchmarks.Task", on_delete=models.CASCADE, related_name="preparation")
    version = models.ForeignKey(
        BenchmarkVersion,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The release whose import, validation or publish asked for it: its limits are the reference's.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    detail = models.TextField(blank=True, help_text="Why it failed: the reference's failure or the platform's.")
    backend = models.CharField(max_length=20, blank=True)
    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"preparation of task {self.task_id}"
