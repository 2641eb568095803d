"""Papers, their task packages (content-addressed files), snippets and frozen benchmark versions."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from benchmarks.paper2code import CONTEXT_JOINS, MASKINGS, PROTOCOL, Protocol
from benchmarks.paper2code.pset import TEST_ENTRY_POINT, requirements_file
from benchmarks.validators import agent_budget_max_validate, link_validate
from operations.models import Redispatchable


class Paper(models.Model):
    """A research paper whose official code the benchmark draws tasks from."""

    slug = models.SlugField(max_length=100, unique=True, help_text="The paper's id in papers.yaml.")
    title = models.CharField(max_length=500)
    arxiv_abs = models.URLField(max_length=500, blank=True, validators=[link_validate])
    arxiv_date = models.DateField(null=True, blank=True)
    arxiv_v1_date = models.DateField(null=True, blank=True)
    github_url = models.URLField(max_length=500, blank=True, validators=[link_validate])
    first_commit_date = models.DateField(null=True, blank=True, help_text="For contamination analysis.")
    last_commit_date = models.DateField(null=True, blank=True)
    venue = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Blob(models.Model):
    """One file content, stored once in Django storage under its sha256."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveBigIntegerField()

    def __str__(self) -> str:
        return self.sha256[:12]

    @property
    def storage_name(self) -> str:
        return f"blobs/{self.sha256[:2]}/{self.sha256}"


class TaskPackage(models.Model):
    """A paper's task package as stored (FORMAT.md 1-3), its files by content hash: the fields every holder of a
    package shares (a task, a submission's revision, a paper of a set validation; a submission's draft keeps them as
    JSON), written once here. `selectors.package_load` and `services.package_store` are the one pair between them
    and the format library's PaperPackage; `package_fields` copies them from one holder (or a draft) to another."""

    files = models.JSONField(help_text="Relative path -> sha256 of every file of the package.")
    paper_path = models.CharField(max_length=300)
    annotated_paths = models.JSONField(default=list)
    context_paths = models.JSONField(default=list)
    requirements = models.TextField(
        blank=True,
        help_text="What its tests run in: its requirements file, or the "
        "shared environment it was imported or validated with.",
    )

    test_entry_point = TEST_ENTRY_POINT  # FORMAT.md 1: every task runs it, so it is a constant, never a column

    class Meta:
        abstract = True

    def package_fields(self) -> dict[str, object]:
        """Its package's fields, as another holder or a draft's JSON keeps them."""
        return {name: getattr(self, name) for name in PACKAGE_FIELDS}

    def package_entry(self) -> dict[str, object]:
        """Its papers.yaml entry but the paths: id, title, links, venue and dates (dates or ISO text)."""
        raise NotImplementedError

    def package_extra(self) -> dict[str, object]:
        """The other papers.yaml keys it keeps."""
        return {}

    def package_requirements_path(self) -> str | None:
        """Its requirements file, or None when it has none (or runs in a shared environment)."""
        return requirements_file(self.files)


PACKAGE_FIELDS = tuple(field.name for field in TaskPackage._meta.local_fields)


def package_fields_json(data: dict) -> dict[str, object]:
    """The package's fields kept in JSON (a submission's draft), each one missing there its field's default."""
    return {field.name: data.get(field.name, field.get_default()) for field in TaskPackage._meta.local_fields}


class Task(TaskPackage):
    """One paper's package at one revision: a new revision is made whenever its content changes."""

    paper = models.ForeignKey(Paper, on_delete=models.PROTECT, related_name="tasks")
    revision = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64, db_index=True)
    environment_hash = models.CharField(max_length=64, help_text="sha256 of the requirements.")
    environment_file = models.CharField(
        max_length=300,
        blank=True,
        help_text="The shared environment file a legacy set was imported with (--environment): the task runs in it "
        "and its own requirements file is only a file; empty when built from its own requirements.",
    )
    extra_metadata = models.JSONField(default=dict, blank=True, help_text="Other papers.yaml keys, kept.")
    test_manifest = models.JSONField(
        null=True,
        blank=True,
        help_text="The tests the reference completes, with each one's outcome (FORMAT.md 7.5); "
        "empty until the reference ran under the harness (validation or first use).",
    )
    recording = models.JSONField(
        null=True,
        blank=True,
        help_text="The reference's recorded calls of each snippet's function, for the sealed replay "
        "(evaluation/judging/sealed.py): which snippets are sealed and why not; inputs and outputs are blobs. "
        "Maintainers only; made with the test manifest.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["paper__slug", "-revision"]
        constraints = [
            models.UniqueConstraint(fields=["paper", "revision"], name="task_unique_revision"),
            models.UniqueConstraint(fields=["paper", "content_hash"], name="task_unique_content"),
        ]

    def __str__(self) -> str:
        return f"{self.paper.slug} r{self.revision}"

    def package_entry(self) -> dict[str, object]:
        paper = self.paper
        return {
            "id": paper.slug,
            "title": paper.title,
            "arxiv_abs": paper.arxiv_abs,
            "arxiv_date": paper.arxiv_date,
            "arxiv_v1_date": paper.arxiv_v1_date,
            "github_url": paper.github_url,
            "first_commit_date": paper.first_commit_date,
            "last_commit_date": paper.last_commit_date,
            "venue": paper.venue,
        }

    def package_extra(self) -> dict[str, object]:
        return dict(self.extra_metadata)

    def package_requirements_path(self) -> str | None:
        return None if self.environment_file else requirements_file(self.files)

    @property
    def needs_gpu(self) -> bool:
        """Its tests need a GPU (papers.yaml `gpu: true`): its items run only on a GPU worker (the `gpu` queue)."""
        return self.extra_metadata.get("gpu") is True


class Snippet(models.Model):
    """One benchmark item: a marked region of an annotated file that a model must write."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="snippets")
    file_path = models.CharField(max_length=300)
    name = models.CharField(max_length=300)
    position = models.PositiveIntegerField(help_text="Index of the snippet within its file, by start line.")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    depth = models.PositiveSmallIntegerField()
    loc = models.PositiveIntegerField(help_text="Lines of code, the snippet's weight (FORMAT.md section 4).")
    code_hash = models.CharField(max_length=64)
    reference_code = models.TextField()
    mutation = models.JSONField(
        null=True,
        blank=True,
        help_text="The mutation score of its tests (issue 24): "
        "generated, killed, survived, score, survivors (one-line diffs); null: not measured.",
    )

    class Meta:
        ordering = ["task", "file_path", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "file_path", "position"], name="snippet_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.task} {self.file_path}:{self.name}"


PROTOCOL_NAME_RE = r"^[a-z0-9][a-z0-9.-]*$"


class PromptProtocol(models.Model):
    """A prompt template with the layout of its code part; never edited, since published numbers depend on it."""

    name = models.CharField(
        max_length=20,
        unique=True,
        validators=[
            RegexValidator(
                PROTOCOL_NAME_RE, "lower-case letters, digits, dots and hyphens, starting with a letter or digit"
            )
        ],
    )
    template = models.TextField(help_text="string.Template text: $paper, $code, $name, $loc; $$ for a dollar.")
    template_without_paper = models.TextField(
        blank=True, help_text="For the ablation; blank: the template with $paper saying the paper is not given."
    )
    masking = models.CharField(max_length=20, default="standard", choices=[(m, m) for m in MASKINGS])
    masked_header = models.BooleanField(default=True, help_text='"## <path>" before the masked file.')
    context_join = models.CharField(max_length=20, default="standard", choices=[(c, c) for c in CONTEXT_JOINS])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def as_protocol(self) -> Protocol:
        return Protocol(
            name=self.name,
            template=self.template,
            template_without_paper=self.template_without_paper,
            masking=self.masking,
            masked_header=self.masked_header,
            context_join=self.context_join,
        )


class BenchmarkVersion(Redispatchable):
    """A set of tasks: curated while draft, frozen by a manifest hash once published."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        DEPRECATED = "deprecated"

    name = models.CharField(max_length=50, unique=True, help_text="A semantic version, e.g. 1.2.0 or demo-1.0.0.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    tasks = models.ManyToManyField(Task, through="VersionTask", related_name="versions", blank=True)
    notes = models.TextField(blank=True, help_text="Release notes.")
    previous = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The release the changelog is computed against.",
    )
    changelog = models.JSONField(null=True, blank=True, help_text="Tasks added, removed and changed.")
    manifest = models.JSONField(null=True, blank=True)
    manifest_hash = models.CharField(max_length=64, blank=True)
    downloads = models.JSONField(default=dict, blank=True, help_text="Download kind -> storage name and sha256.")
    downloads_failed = models.TextField(
        blank=True, help_text="Why the downloads could not be built (blank: built, or being prepared)."
    )
    downloads_queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker was last asked to build the downloads."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    deprecated_at = models.DateTimeField(null=True, blank=True)
    deprecation_note = models.TextField(blank=True)
    # Evaluation settings: set while draft; at publish blank limits take this site's settings and all are frozen.
    protocol = models.ForeignKey(
        PromptProtocol,
        to_field="name",
        db_column="protocol",
        default=PROTOCOL,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Runs' default protocol.",
    )
    time_limit_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 3600)],
        help_text="Wall-clock limit of one test run.",
    )
    memory_mb = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(64), MaxValueValidator(1024 * 1024)]
    )
    cpus = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.1), MaxValueValidator(256)])
    agent_budget_max = models.JSONField(
        default=dict,
        blank=True,
        validators=[agent_budget_max_validate],
        help_text='Agent runs: the largest per-item budget a run may set, e.g. {"turns": 30, '
        '"tokens": 500000, "seconds": 900, "cost": 2}; a key left out: the '
        "site's AGENT_BUDGET_MAXIMUMS.",
    )
    mutation_score_min = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Validation warns about a snippet whose tests kill a smaller share of its mutants (0-1; blank: the "
        "site's MUTATION_SCORE_MIN). A warning, never a refusal.",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def protocol_name(self) -> str:
        """The name of its runs' default protocol: the foreign key's own value (protocols are keyed by name)."""
        # django-stubs types the key of a to_field foreign key as optional; this one is not null.
        return self.protocol_id  # type: ignore[return-value]

    @property
    def is_frozen(self) -> bool:
        return self.status != self.Status.DRAFT

    @property
    def downloads_status(self) -> str:
        """ "ready", "preparing" (a worker builds them after publishing), "failed", or "" for a draft."""
        if not self.is_frozen:
            return ""
        ready = all(kind in self.downloads for kind in CORE_DOWNLOADS)
        return "ready" if ready else "failed" if self.downloads_failed else "preparing"


# The downloads every release's build makes (benchmarks.services.downloads.release_downloads_build); another app may
# add its own to a release's `downloads` later (evaluation/harbor/dataset.py: the Harbor dataset, built by a sandbox
# worker).
CORE_DOWNLOADS = ("pset", "items")


class VersionTask(models.Model):
    """A task's place in a version, with its split: public tasks can be downloaded, held-out ones never."""

    class Split(models.TextChoices):
        PUBLIC = "public"
        HELD_OUT = "held_out", "Held out"

    version = models.ForeignKey(BenchmarkVersion, on_delete=models.CASCADE, related_name="memberships")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="memberships")
    split = models.CharField(max_length=10, choices=Split.choices, default=Split.PUBLIC)
    replaced_by = models.CharField(
        max_length=200,
        blank=True,
        help_text="Set when the task took the place of its paper id's task in this version without being a proposed "
        "revision of it (e.g. 'submission 12 (another author)'): the changelog says so; a later draft starts empty.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "task"], name="versiontask_unique")]

    def __str__(self) -> str:
        return f"task {self.task_id} in version {self.version_id} ({self.split})"


class SnippetRetirement(models.Model):
    """A snippet left out of one version (e.g. its tests turned out flaky), with the maintainer's reason."""

    version = models.ForeignKey(BenchmarkVersion, on_delete=models.CASCADE, related_name="retirements")
    snippet = models.ForeignKey(Snippet, on_delete=models.CASCADE, related_name="retirements")
    reason = models.TextField()
    retired_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "snippet"], name="retirement_unique")]

    def __str__(self) -> str:
        return f"snippet {self.snippet_id} retired in version {self.version_id}"


class PackageFingerprint(models.Model):
    """A package's likeness fingerprint (paper2code/likeness.py), made once per package content and shared by every
    holder of that content (a task, a submission's revision), so a check against every paper reads no archive."""

    key = models.CharField(
        max_length=64,
        primary_key=True,
        help_text="sha256 of the fingerprint's version and the package's files, paper path and annotated files.",
    )
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"fingerprint {self.key[:12]}"


class DuplicateAcceptance(models.Model):
    """A paper let into a draft release although it matches another paper, with the maintainer's reason; the
    changelog of the release published with it keeps both."""

    version = models.ForeignKey(BenchmarkVersion, on_delete=models.CASCADE, related_name="duplicates_accepted")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+")
    matches = models.JSONField(help_text="[{paper, title, where, what}]: what it matched when it was accepted.")
    reason = models.TextField()
    accepted_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL)
    source = models.CharField(max_length=100, help_text='How it came in: "submission 12", or "import_pset".')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["version", "task"], name="duplicateacceptance_unique")]

    def __str__(self) -> str:
        return f"task {self.task_id} accepted as a duplicate into version {self.version_id}"
