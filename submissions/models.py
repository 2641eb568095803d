"""An author's proposal of a task: a submission, its immutable revisions, their validation, and the review."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks.models import TaskPackage
from operations.models import Redispatchable

# A draft's key for the revision it was last submitted as, dropped by its first change (services.draft_update).
DRAFT_SUBMITTED_AS = "submitted_as"


class Submission(models.Model):
    """One paper proposed by an author; `draft` keeps what the form holds until it is submitted."""

    class State(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        VALIDATING = "validating"
        INVALID = "invalid"
        AWAITING_REVIEW = "awaiting_review", "Awaiting review"
        CHANGES_REQUESTED = "changes_requested", "Changes requested"
        ACCEPTED = "accepted"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions")
    title = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT, db_index=True)
    draft = models.JSONField(default=dict, blank=True, help_text="The form's current content, step by step.")
    task = models.ForeignKey(
        "benchmarks.Task",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="submissions",
        help_text="Set when accepted.",
    )
    revises = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="revisions_proposed",
        help_text="The accepted submission whose task this one proposes a new revision of.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"submission {self.pk}"

    @property
    def latest_revision(self) -> Revision | None:
        return self.revisions.order_by("-number").first()


class Revision(TaskPackage):
    """An immutable snapshot of a submission: metadata and its package, every file by content hash."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    metadata = models.JSONField(help_text="The papers.yaml entry of the paper.")
    source = models.JSONField(default=dict, help_text="Where the code came from: git URL and commit, or archive.")
    note = models.TextField(blank=True, help_text="The author's answer to the review, for this revision.")
    test_manifest = models.JSONField(
        null=True, blank=True, help_text="The tests the reference completed when this revision was validated."
    )
    recording = models.JSONField(
        null=True, blank=True, help_text="The reference's recorded calls when validated (the sealed replay's)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["submission", "number"]
        constraints = [models.UniqueConstraint(fields=["submission", "number"], name="revision_unique_number")]

    def __str__(self) -> str:
        return f"{self.submission} r{self.number}"

    def package_entry(self) -> dict[str, object]:
        return self.metadata  # the extra keys of an uploaded set stay here: a revision has no column for them


class ValidationReport(Redispatchable):
    """The automated checks of FORMAT.md section 9 for one revision."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"
        SKIPPED = "skipped"
        ERROR = "error"

    revision = models.OneToOneField(Revision, on_delete=models.CASCADE, related_name="report")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    sandbox_backend = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"report of revision {self.revision_id}: {self.status}"


class ValidationCheck(models.Model):
    """One check of a report, turning from pending to passed or failed as validation runs."""

    report = models.ForeignKey(ValidationReport, on_delete=models.CASCADE, related_name="checks")
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=300)
    label = models.CharField(max_length=500)
    status = models.CharField(
        max_length=10, choices=ValidationReport.Status.choices, default=ValidationReport.Status.PENDING
    )
    detail = models.TextField(blank=True)
    duration = models.FloatField(null=True, blank=True)
    snippet_file = models.CharField(max_length=300, blank=True)
    snippet_name = models.CharField(max_length=300, blank=True)
    result = models.JSONField(
        null=True,
        blank=True,
        help_text="What the check measured: the reference's runs (flaky, durations), a snippet's mutation score.",
    )
    warning = models.TextField(blank=True, help_text="Worth the author's attention, never a failure.")

    class Meta:
        ordering = ["report", "position"]
        constraints = [models.UniqueConstraint(fields=["report", "key"], name="check_unique_key")]

    def __str__(self) -> str:
        return f"{self.key}: {self.status}"

    @property
    def badge(self) -> tuple[str, str]:
        """The status as the report shows it: a passed check with a warning (a low mutation score) reads Warning, not
        a green Passed."""
        if self.status == ValidationReport.Status.PASSED and self.warning:
            return "warning", "Warning"
        return self.status, self.get_status_display()


class Comment(models.Model):
    """A maintainer's or author's remark on a submission, or on one snippet of a revision."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="comments")
    revision = models.ForeignKey(Revision, null=True, blank=True, on_delete=models.SET_NULL)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    snippet_file = models.CharField(max_length=300, blank=True)
    snippet_name = models.CharField(max_length=300, blank=True)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"comment {self.pk} on submission {self.submission_id}"


class StateChange(models.Model):
    """The audit record of every transition: who, when, from what to what, and why."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="history")
    from_state = models.CharField(max_length=20, choices=Submission.State.choices)
    to_state = models.CharField(max_length=20, choices=Submission.State.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"submission {self.submission_id}: {self.from_state} -> {self.to_state}"


class SetValidation(models.Model):
    """The section 9 checks of every paper of a problem set (a folder, or a draft version's tasks), one paper per
    worker task; started by `validate_pset` or by a maintainer on a draft version's page."""

    Status = ValidationReport.Status

    version = models.ForeignKey(
        "benchmarks.BenchmarkVersion",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="validations",
        help_text="Blank: a problem set read from a folder.",
    )
    source = models.CharField(max_length=500, help_text="The folder or the version validated.")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    on_workers = models.BooleanField(
        default=False,
        help_text="Its papers were queued for the workers, whose watchdog "
        "queues a lost one again (inline: the command's own).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["version"],
                condition=models.Q(status__in=["pending", "running"]),
                name="setvalidation_one_active_per_version",
            )
        ]

    def __str__(self) -> str:
        return f"validation of {self.source}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)


class SetValidationPaper(Redispatchable, TaskPackage):
    """One paper of a set validation: its package by content hash, and its checks as they finish."""

    Status = ValidationReport.Status

    validation = models.ForeignKey(SetValidation, on_delete=models.CASCADE, related_name="papers")
    position = models.PositiveIntegerField()
    paper = models.CharField(max_length=100, help_text="The paper's id in papers.yaml.")
    snippets = models.JSONField(default=list, help_text="[{file, index, name}] of every snippet, in check order.")
    checks = models.JSONField(default=list, help_text="[{key, status, detail, duration}] of the finished checks.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    sandbox_backend = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    mutants = models.PositiveIntegerField(default=0, help_text="Mutants per snippet to run (0: no mutation score).")
    mutation_score_min = models.FloatField(null=True, blank=True, help_text="Warn below this mutation score.")

    class Meta:
        ordering = ["validation", "position"]
        constraints = [models.UniqueConstraint(fields=["validation", "paper"], name="setvalidationpaper_unique")]

    def __str__(self) -> str:
        return f"{self.paper} in {self.validation}"

    def package_entry(self) -> dict[str, object]:
        return {"id": self.paper}  # what the checks need is the package itself: its details stay with its set

    @property
    def checks_total(self) -> int:
        """requirements, reference, sealed, judged, masked and no-op per snippet, and its mutation score when asked
        (as `sandbox_checks` yields them)."""
        return 2 + (5 if self.mutants else 4) * len(self.snippets)


class TriedAnswer(models.Model):
    """An alternative body for one snippet of a revision, tried by its author or a maintainer through evaluation's
    judging step: which correct alternatives the tests accept (and which wrong ones they reject), kept with the
    revision so its reviewers see them."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"
        FLAGGED = "flagged"
        ERROR = "error"

    ACTIVE = (Status.PENDING, Status.RUNNING)

    revision = models.ForeignKey(Revision, on_delete=models.CASCADE, related_name="tried_answers")
    snippet_file = models.CharField(max_length=300)
    snippet_index = models.PositiveIntegerField(help_text="The snippet's position in its file.")
    snippet_name = models.CharField(max_length=300)
    code = models.TextField(help_text="The body tried in place of the snippet's reference.")
    note = models.CharField(max_length=300, blank=True, help_text="What the body changes, in the author's words.")
    reindented = models.CharField(
        max_length=200, blank=True, help_text="What was done to the body's indentation ('' for nothing), for its list."
    )
    tried_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tried_answers")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    category = models.CharField(max_length=40, blank=True)
    detail = models.TextField(blank=True)
    tests = models.JSONField(default=list, blank=True, help_text="The per-test rows of its run.")
    findings = models.JSONField(default=list, blank=True, help_text="What the answer policy and the guard found.")
    sandbox_backend = models.CharField(max_length=20, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # What trying it did to the pasted body's indentation, said once when it is tried (answers.answer_try): not stored.
    placed = ""

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"answer tried for {self.snippet_name} of {self.revision}: {self.status}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE
