"""Functions that change benchmark state: storing task packages, importing problem sets, publishing versions."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from benchmarks.duplicates import (
    Match,
    changelog_duplicates,
    duplicate_acceptance_record,
    matches_text,
    package_fingerprint_store,
    release_matches,
)
from benchmarks.errors import CurationError
from benchmarks.models import (
    BenchmarkVersion,
    Blob,
    Paper,
    PromptProtocol,
    Snippet,
    SnippetRetirement,
    Task,
    VersionTask,
)
from benchmarks.paper2code import PackageError, Problem, Protocol, parse, prompt_template
from benchmarks.paper2code.pset import PAPERS_YAML, PaperPackage, papers_yaml_dump, read_pset_with_warnings, write_pset
from benchmarks.paper2code.requirements import requirements_problems
from benchmarks.selectors import (
    blob_open,
    blob_read,
    package_load,
    protocol_get,
    snippet_masked,
    user_is_maintainer,
    version_tasks,
)
from benchmarks.visibility import held_out_once_public, items_public, tasks_public
from operations.enqueue import enqueue
from operations.events import Kind, event_record

logger = logging.getLogger(__name__)
DOWNLOADS_PREPARE = "benchmarks.tasks.release_downloads_prepare"  # queued by name: that module imports this one


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def environment_hash(requirements: str) -> str:
    """Hash of the requirement lines that matter, so reordering or comments don't rebuild an environment."""
    lines = sorted({ln.strip() for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("#")})
    return sha256_hex("\n".join(lines))


def blob_store(*, content: bytes) -> Blob:
    """Store content once under its sha256 (idempotent)."""
    return _blob_save(sha256_hex(content), len(content), ContentFile(content))


def blob_store_file(*, file: BinaryIO) -> Blob:
    """Store an open file's content once under its sha256, reading it in chunks (never whole in memory)."""
    digest, size = hashlib.sha256(), 0
    file.seek(0)
    for chunk in iter(lambda: file.read(1024 * 1024), b""):
        digest.update(chunk)
        size += len(chunk)
    file.seek(0)
    return _blob_save(digest.hexdigest(), size, File(file))


def _blob_save(digest: str, size: int, content: File) -> Blob:
    blob, created = Blob.objects.get_or_create(sha256=digest, defaults={"size": size})
    if created or not default_storage.exists(blob.storage_name):
        if default_storage.exists(blob.storage_name):
            default_storage.delete(blob.storage_name)
        default_storage.save(blob.storage_name, content)
    return blob


def _paper_upsert(*, package: PaperPackage) -> Paper:
    fields = {
        "title": package.title,
        "arxiv_abs": package.arxiv_abs or "",
        "arxiv_date": package.arxiv_date,
        "arxiv_v1_date": package.arxiv_v1_date,
        "github_url": package.github_url or "",
        "first_commit_date": package.first_commit_date,
        "last_commit_date": package.last_commit_date,
        "venue": package.venue or "",
    }
    paper = Paper.objects.filter(slug=package.id).first() or Paper(slug=package.id)
    if paper.pk and all(getattr(paper, k) == v for k, v in fields.items()):
        return paper
    for key, value in fields.items():
        setattr(paper, key, value)
    try:
        paper.full_clean(exclude=["slug"])  # ids follow the format's own rule (dots allowed), checked when read
    except ValidationError as exc:
        raise PackageError(
            [
                Problem(PAPERS_YAML, 0, f"paper {package.id}: {field}: {' '.join(messages)}")
                for field, messages in exc.message_dict.items()
            ]
        ) from exc
    paper.save()
    return paper


def package_store(*, package: PaperPackage, requirements: str | None = None) -> dict[str, object]:
    """The package's stored fields (a TaskPackage's, or a draft's JSON), its files stored by content hash; with
    `package_load`, the one pair between the two. `requirements`: what its tests run in, when not its own
    requirements file (a shared environment)."""
    return {
        "files": {path: blob_store(content=data).sha256 for path, data in sorted(package.files.items())},
        "paper_path": package.paper_path,
        "annotated_paths": list(package.annotated_paths),
        "context_paths": list(package.context_paths),
        "requirements": package.requirements if requirements is None else requirements,
    }


def task_content_hash(*, package: PaperPackage, requirements: str) -> str:
    return sha256_hex(f"{package.content_hash}\n{sha256_hex(requirements)}")


def task_store(
    *,
    package: PaperPackage,
    shared_requirements: str = "",
    environment: str | None = None,
    environment_file: str = "",
    test_manifest: dict | None = None,
    recording: dict | None = None,
) -> tuple[Task, bool]:
    """The Task for this package's content, created as the paper's next revision if the content is new.

    With `environment` (a legacy set's one shared environment, read from `environment_file`), the task is built
    from it alone; the package's own requirements file stays among its files, verbatim, never read.
    `test_manifest`: what its validation's reference run completed (FORMAT.md 7.5); without one, the first item
    tested makes it; `recording` likewise, the reference's recorded calls (evaluation/judging/sealed.py)."""
    requirements = (
        environment.strip()
        if environment is not None
        else "\n".join(part for part in (shared_requirements.strip(), package.requirements.strip()) if part)
    )
    paper = _paper_upsert(package=package)
    content_hash = task_content_hash(package=package, requirements=requirements)
    existing = Task.objects.filter(paper=paper, content_hash=content_hash).first()
    if existing:
        if existing.test_manifest is None and test_manifest is not None:
            Task.objects.filter(pk=existing.pk, test_manifest__isnull=True).update(test_manifest=test_manifest)
            existing.refresh_from_db(fields=["test_manifest"])
        if existing.recording is None and recording is not None:
            Task.objects.filter(pk=existing.pk, recording__isnull=True).update(recording=recording)
            existing.refresh_from_db(fields=["recording"])
        return existing, False
    last = paper.tasks.order_by("-revision").values_list("revision", flat=True).first() or 0
    task = Task.objects.create(
        **package_store(package=package, requirements=requirements),
        paper=paper,
        revision=last + 1,
        content_hash=content_hash,
        environment_hash=environment_hash(requirements),
        environment_file=environment_file[:300] if environment is not None else "",
        extra_metadata=_jsonable(dict(package.extra)),
        test_manifest=test_manifest,
        recording=recording,
    )
    _snippets_create(task=task, package=package)
    package_fingerprint_store(package=package)  # made once here, where the files are in memory
    return task, True


def snippet_mutations_record(*, task: Task, mutations: dict[tuple[str, int], dict]) -> int:
    """Keep the mutation score validation measured for each snippet of `task` ((file, position) -> result), which
    its pages and the API show; how many snippets it updated."""
    updated = 0
    for snippet in task.snippets.all():
        result = mutations.get((snippet.file_path, snippet.position))
        if result is not None:
            Snippet.objects.filter(pk=snippet.pk).update(mutation=result)
            updated += 1
    return updated


def _jsonable(value: object) -> object:
    return json.loads(json.dumps(value, default=str))


def _snippets_create(*, task: Task, package: PaperPackage) -> None:
    for path in package.annotated_paths:
        annotated = package.annotated[path]
        rows: dict[int, Snippet] = {}
        for snip in annotated.snippets:
            rows[snip.index] = Snippet.objects.create(
                task=task,
                file_path=path,
                name=snip.name,
                position=snip.index,
                start_line=snip.start_line,
                end_line=snip.end_line,
                parent=rows[snip.parent] if snip.parent is not None else None,
                depth=snip.depth,
                loc=snip.loc,
                code_hash=sha256_hex(snip.code),
                reference_code=snip.code,
            )


@dataclass
class ImportResult:
    version: BenchmarkVersion
    tasks_created: list[Task] = field(default_factory=list)
    tasks_unchanged: list[Task] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


@transaction.atomic
def pset_import(
    *,
    root: Path,
    version_name: str,
    shared_requirements: str = "",
    publish: bool = False,
    release_settings: dict | None = None,
    environment: str | None = None,
    environment_file: str = "",
    prepare: bool = True,
    duplicate_reason: str = "",
    actor=None,
) -> ImportResult:
    """Import a problem set into a version: all or nothing; the same content twice changes nothing.

    A paper that matches another paper of a release (benchmarks/duplicates.py: another paper id, drafts included) is
    refused, every match named, unless `duplicate_reason` says why it is imported anyway: the changelog keeps it.

    `prepare`: once committed, the workers make its tasks' test manifests and recordings (`release_prepare_wanted`),
    so its first run does not.

    `environment` (the text of `environment_file`): every task runs in this one shared environment, and the papers'
    own requirements files are files, never read as requirements (a legacy set: FORMAT.md's import of the original).

    `release_settings` (keys of RELEASE_SETTINGS) are set on the draft; a published version must already have them.
    """
    problems = [
        *requirements_problems(shared_requirements, file="shared requirements"),
        *requirements_problems(environment or "", file="shared environment"),
    ]
    try:
        packages, warnings = read_pset_with_warnings(root, shared_environment=environment is not None)
    except PackageError as exc:
        raise PackageError([*problems, *exc.problems]) from exc
    if problems:
        raise PackageError(problems)
    version, _ = BenchmarkVersion.objects.get_or_create(name=version_name)
    changed = {k: v for k, v in (release_settings or {}).items() if version_settings(version=version).get(k) != v}
    if changed and version.is_frozen:
        raise PackageError(
            [
                Problem(
                    file=str(root),
                    line=0,
                    message=(
                        f"release {version.name} is {version.status} with "
                        f"{', '.join(f'{k} {version_settings(version=version).get(k)}' for k in changed)}; "
                        "its settings are frozen: "
                        "import into a new version name instead"
                    ),
                )
            ]
        )
    if changed:
        try:
            version = version_settings_set(version=version, **changed)
        except ValueError as exc:
            raise PackageError([Problem(file=str(root), line=0, message=str(exc))]) from exc
    result = ImportResult(version=version, warnings=warnings)
    duplicates: dict[Task, list[Match]] = {}
    for package in packages:
        task, created = task_store(
            package=package,
            shared_requirements=shared_requirements,
            environment=environment,
            environment_file=environment_file,
        )
        (result.tasks_created if created else result.tasks_unchanged).append(task)
        if matches := _import_matches(package=package, task=task, created=created):
            duplicates[task] = matches
    if duplicates and not duplicate_reason.strip():
        raise PackageError(
            [
                Problem(
                    PAPERS_YAML,
                    0,
                    f"paper {task.paper.slug} matches {matches_text(matches)}; import it anyway only with "
                    "--duplicate-reason saying why (the release's changelog keeps it)",
                )
                for task, matches in duplicates.items()
            ]
        )
    new_tasks = result.tasks_created + result.tasks_unchanged
    current = set(version.tasks.values_list("pk", flat=True))
    replaced = set(version.tasks.filter(paper__in=[t.paper for t in new_tasks]).values_list("pk", flat=True))
    wanted = (current - replaced) | {t.pk for t in new_tasks}
    if wanted != current:
        if version.is_frozen:
            raise PackageError(
                [
                    Problem(
                        file=str(root),
                        line=0,
                        message=f"release {version.name} is {version.status} and frozen; "
                        "import into a new version name instead",
                    )
                ]
            )
        for task in new_tasks:
            version_task_set(version=version, task=task)
    for task, matches in duplicates.items():  # each new to every release: the version is a draft, or refused above
        duplicate_acceptance_record(
            version=version, task=task, matches=matches, reason=duplicate_reason, actor=actor, source="import_pset"
        )
    if publish and not version.is_frozen:
        result.version = version_publish(version=version, downloads_inline=True, prepare=prepare)
    elif prepare:
        release_prepare_wanted.send(sender=BenchmarkVersion, version=version)
    return result


def _import_matches(*, package: PaperPackage, task: Task, created: bool) -> list[Match]:
    """The release papers of other ids an imported package matches; none for a task some release holds already (it
    was checked when it came in: the set imported again)."""
    if not created and task.memberships.exists():
        return []
    return release_matches(
        fingerprint=package_fingerprint_store(package=package), title=package.title, papers_excluded=[package.id]
    )


SEMVER_RE = re.compile(r"^(?:[a-z][a-z0-9-]*-)?\d+\.\d+\.\d+$")

# Sent after a version is published; evaluation queues the continuously evaluated models on it.
version_published = Signal()
# Sent when a version's tasks are imported or published: evaluation has the workers make their test manifests and
# recordings once the transaction commits (evaluation/preparation.py).
release_prepare_wanted = Signal()


# A release's evaluation settings: the default prompt protocol and the limits of one test run.
RELEASE_SETTINGS = ("protocol", "time_limit_seconds", "memory_mb", "cpus", "mutation_score_min", "agent_budget_max")


def version_settings(*, version: BenchmarkVersion) -> dict:
    settings = {
        "protocol": version.protocol_id,
        "time_limit_seconds": version.time_limit_seconds,
        "memory_mb": version.memory_mb,
        "cpus": version.cpus,
    }
    if version.agent_budget_max:  # pinned in the manifest once set; a release without keeps its manifest as it was
        settings["agent_budget_max"] = version.agent_budget_max
    return settings


@transaction.atomic
def version_settings_set(*, version: BenchmarkVersion, actor=None, **changes) -> BenchmarkVersion:
    """Change a draft's evaluation settings (None: this site's limit at publish); a release's never change."""
    _require_maintainer(actor)
    _require_draft(version)
    unknown = set(changes) - set(RELEASE_SETTINGS)
    if unknown:
        raise CurationError(
            f"unknown release setting(s) {', '.join(sorted(unknown))}; known: {', '.join(RELEASE_SETTINGS)}"
        )
    if "protocol" in changes:  # UnknownProtocol lists the known ones
        changes["protocol_id"] = protocol_get(name=changes.pop("protocol")).name
    for field_name, value in changes.items():
        setattr(version, field_name, value)
    try:
        version.full_clean()
    except ValidationError as exc:
        raise CurationError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
    version.save()
    return version


def _settings_pin(version: BenchmarkVersion) -> None:
    """At publish, a limit left blank takes this site's current setting, so the release records every value."""
    from django.conf import settings

    if version.time_limit_seconds is None:
        version.time_limit_seconds = max(1, math.ceil(settings.SANDBOX_WALL_SECONDS))
    if version.memory_mb is None:
        version.memory_mb = settings.SANDBOX_MEMORY_MB
    if version.cpus is None:
        version.cpus = settings.SANDBOX_CPUS


def version_manifest(*, version: BenchmarkVersion) -> dict:
    """The frozen content of a version: every task (with its split) and live snippet by content hash."""
    memberships = version.memberships.select_related("task__paper").order_by("task__paper__slug")
    retired = set(version.retirements.values_list("snippet_id", flat=True))
    snippets: dict[int, list[Snippet]] = {}
    for snippet in Snippet.objects.filter(task__memberships__version=version).order_by("file_path", "position"):
        if snippet.pk not in retired:
            snippets.setdefault(snippet.task_id, []).append(snippet)
    return {
        "version": version.name,
        "settings": version_settings(version=version),
        "tasks": [
            {
                "paper": m.task.paper.slug,
                "revision": m.task.revision,
                "content_hash": m.task.content_hash,
                "environment_hash": m.task.environment_hash,
                "split": m.split,
                "metadata": _manifest_metadata(m.task),
                "snippets": [
                    {"id": s.pk, "file": s.file_path, "name": s.name, "loc": s.loc, "code_hash": s.code_hash}
                    for s in snippets.get(m.task_id, [])
                ],
            }
            for m in memberships
        ],
        "retired": [
            {"id": r.snippet_id, "name": r.snippet.name, "paper": r.snippet.task.paper.slug, "reason": r.reason}
            for r in version.retirements.select_related("snippet__task__paper").order_by("snippet_id")
        ],
    }


def _manifest_metadata(task: Task) -> dict[str, object]:
    """The task's papers.yaml fields as the release freezes them (dates as ISO text): a paper's row holds only its
    latest values, so a later changelog reads the earlier ones here."""
    entry = {k: v for k, v in {**task.package_entry(), **task.package_extra()}.items() if k != "id"}
    return json.loads(json.dumps(entry, default=str))


def _metadata_changes(old: dict | None, new: dict | None) -> list[dict]:
    """Which papers.yaml fields changed, old -> new (none when a release was frozen before manifests kept them)."""
    if old is None or new is None:
        return []
    return [
        {"field": key, "from": old.get(key), "to": new.get(key)}
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def release_changelog(*, previous: dict | None, manifest: dict) -> dict:
    """Papers added, removed and changed (new task content and its papers.yaml fields, or snippets retired or
    restored) since `previous`."""
    before = {t["paper"]: t for t in (previous or {}).get("tasks", [])}
    after = {t["paper"]: t for t in manifest["tasks"]}
    changed = []
    for paper in sorted(set(before) & set(after)):
        old, new = before[paper], after[paper]
        metadata = _metadata_changes(old.get("metadata"), new.get("metadata"))
        if metadata or (old["content_hash"], old["split"], [s["code_hash"] for s in old["snippets"]]) != (
            new["content_hash"],
            new["split"],
            [s["code_hash"] for s in new["snippets"]],
        ):
            changed.append(
                {
                    "paper": paper,
                    "from_revision": old["revision"],
                    "to_revision": new["revision"],
                    "snippets_before": len(old["snippets"]),
                    "snippets_after": len(new["snippets"]),
                    "from_split": old["split"],
                    "split": new["split"],
                    "metadata_changed": metadata,
                }
            )
    _changelog_files(changed)
    # Releases frozen before settings were in the manifest have none to compare with.
    old_settings = (previous or {}).get("settings")
    settings_changed = [
        {"setting": key, "from": old_settings.get(key), "to": value}
        for key, value in manifest.get("settings", {}).items()
        if old_settings is not None and old_settings.get(key) != value
    ]
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": changed,
        "settings": settings_changed,
    }


def _changelog_files(changed: list[dict]) -> None:
    """Name the files a new revision changed, added and removed (a task's revisions are immutable, so their file
    maps are read once, when the changelog is frozen)."""
    revised = [c for c in changed if c["from_revision"] != c["to_revision"]]
    if not revised:
        return
    wanted = Q()
    for change in revised:
        wanted |= Q(paper__slug=change["paper"], revision__in=(change["from_revision"], change["to_revision"]))
    files = {
        (slug, revision): mapping
        for slug, revision, mapping in Task.objects.filter(wanted).values_list("paper__slug", "revision", "files")
    }
    for change in revised:
        old = files.get((change["paper"], change["from_revision"]), {})
        new = files.get((change["paper"], change["to_revision"]), {})
        change["files_changed"] = sorted(p for p in old.keys() & new.keys() if old[p] != new[p])
        change["files_added"] = sorted(new.keys() - old.keys())
        change["files_removed"] = sorted(old.keys() - new.keys())


def _require_maintainer(actor) -> None:
    """`actor` None is the operator on the command line."""
    if actor is not None and not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers curate and publish versions")


def maintainer_grant(*, user) -> None:
    """Make `user` a maintainer: they review submissions and curate versions."""
    from django.conf import settings
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get_or_create(name=settings.MAINTAINERS_GROUP)[0])


def maintainer_ensure(*, username: str, email: str, password: str) -> tuple[object, bool]:
    """The maintainer account `username`, created with `password` if missing; an existing password is kept,
    so a password changed on the site survives restarts. Returns (user, created)."""
    from django.contrib.auth import get_user_model

    with transaction.atomic():
        user, created = get_user_model().objects.get_or_create(username=username, defaults={"email": email})
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
        maintainer_grant(user=user)
    return user, created


def _require_draft(version: BenchmarkVersion) -> None:
    if version.is_frozen:
        raise CurationError(f"release {version.name} is {version.status} and frozen")


@transaction.atomic
def version_draft_create(*, name: str, actor=None, notes: str = "") -> BenchmarkVersion:
    """A new draft starting from the latest published release's tasks, splits and retirements."""
    _require_maintainer(actor)
    if not SEMVER_RE.match(name):
        raise CurationError(f"{name!r} is not a semantic version name (like 1.2.0 or demo-1.2.0)")
    if BenchmarkVersion.objects.filter(name=name).exists():
        raise CurationError(f"a release named {name} exists already")
    latest = BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.PUBLISHED).order_by("-published_at").first()
    # The new draft keeps the latest release's settings until a maintainer changes them.
    pinned = (
        {
            "protocol_id": latest.protocol_id,
            "time_limit_seconds": latest.time_limit_seconds,
            "memory_mb": latest.memory_mb,
            "cpus": latest.cpus,
        }
        if latest
        else {}
    )
    version = BenchmarkVersion.objects.create(name=name, notes=notes, **pinned)
    if latest:
        VersionTask.objects.bulk_create(
            [VersionTask(version=version, task_id=m.task_id, split=m.split) for m in latest.memberships.all()]
        )
        SnippetRetirement.objects.bulk_create(
            [
                SnippetRetirement(version=version, snippet_id=r.snippet_id, reason=r.reason, retired_by=r.retired_by)
                for r in latest.retirements.all()
            ]
        )
    return version


@transaction.atomic
def version_task_set(
    *, version: BenchmarkVersion, task: Task, split: str = VersionTask.Split.PUBLIC, actor=None, replaced_by: str = ""
) -> VersionTask:
    """Put a task into a draft (replacing another revision of the same paper) with a split. `replaced_by`: who put
    it in place of its paper's task when it is no proposed revision of it (the changelog names them)."""
    _require_maintainer(actor)
    _require_draft(version)
    if split not in VersionTask.Split.values:
        raise CurationError(f"unknown split {split!r}")
    version.memberships.filter(task__paper=task.paper).exclude(task=task).delete()
    defaults = {
        "split": split,
        **({"replaced_by": replaced_by[:200]} if replaced_by else {}),
    }  # a split change keeps it
    membership, _ = VersionTask.objects.update_or_create(version=version, task=task, defaults=defaults)
    return membership


@transaction.atomic
def version_task_remove(*, version: BenchmarkVersion, task: Task, actor=None) -> None:
    _require_maintainer(actor)
    _require_draft(version)
    version.memberships.filter(task=task).delete()
    version.retirements.filter(snippet__task=task).delete()


@transaction.atomic
def snippet_retire(*, version: BenchmarkVersion, snippet: Snippet, reason: str, actor=None) -> SnippetRetirement:
    """Leave one snippet out of a draft, with a reason that the changelog and manifest keep."""
    _require_maintainer(actor)
    _require_draft(version)
    if not reason.strip():
        raise CurationError("retiring a snippet needs a reason")
    if not version.memberships.filter(task=snippet.task).exists():
        raise CurationError(f"snippet {snippet.name} is not in release {version.name}")
    retirement, _ = SnippetRetirement.objects.update_or_create(
        version=version, snippet=snippet, defaults={"reason": reason.strip(), "retired_by": actor}
    )
    return retirement


# What publishing freezes, as the publish form, its confirmation and the guide say it.
PUBLISH_FREEZES = (
    "Publishing cannot be undone. It freezes the release: its papers and their splits (public or held out), its "
    "snippets and retirements, its evaluation settings (prompt protocol, time limit, memory, CPUs, mutation score "
    "minimum, agent budget), its manifest and hash, and its changelog. A worker then builds its downloads, which "
    "never change either, and the calibration runs that draw its reference lines start by themselves."
)


def release_previous(*, version: BenchmarkVersion) -> BenchmarkVersion | None:
    """The release a draft's changelog is computed against: the latest published or deprecated one."""
    return (
        BenchmarkVersion.objects.filter(
            status__in=[BenchmarkVersion.Status.PUBLISHED, BenchmarkVersion.Status.DEPRECATED]
        )
        .exclude(pk=version.pk)
        .order_by("-published_at")
        .first()
    )


CHANGELOG_ENTRIES = ("added", "removed", "changed", "settings")


@dataclass(frozen=True)
class PublishPreview:
    """What publishing a draft now would freeze as its changelog, against the release it would be compared with."""

    version: BenchmarkVersion
    previous: BenchmarkVersion | None
    changelog: dict

    @property
    def unchanged(self) -> bool:
        """Nothing differs from the previous release: publishing would freeze a copy of it under a new name."""
        return self.previous is not None and not any(self.changelog.get(key) for key in CHANGELOG_ENTRIES)

    @property
    def warning(self) -> str:
        """What the publish form and its confirmation say when nothing changed; "" otherwise."""
        if not self.unchanged or self.previous is None:
            return ""
        return (
            f"No changes since {self.previous.name}: publishing {self.version.name} freezes the same papers, splits, "
            f"snippets and settings as {self.previous.name} under a new name."
        )


def _changelog_notes(*, version: BenchmarkVersion, changelog: dict) -> None:
    """What a draft's changelog says besides its manifests' differences, in its preview and when published: tasks
    that replaced their paper id's task (not as its revision), papers accepted although they match another paper
    and why, held-out papers once public."""
    replaced = dict(version.memberships.exclude(replaced_by="").values_list("task__paper__slug", "replaced_by"))
    for change in changelog["changed"]:
        if change["paper"] in replaced and change["from_revision"] != change["to_revision"]:
            change["replaced_by"] = replaced[change["paper"]]
    if duplicates := changelog_duplicates(version=version):
        changelog["duplicates"] = duplicates  # accepted although each matches another paper: why
    if once_public := held_out_once_public(version=version):
        changelog["held_out_once_public"] = once_public  # publishing is allowed; the warning is kept


def release_publish_preview(*, version: BenchmarkVersion) -> PublishPreview:
    """A draft's changelog as `version_publish` would compute it now (its blank limits taking this site's settings,
    as publishing pins them); publishing computes it again from the draft as it is then."""
    previous = release_previous(version=version)
    pinned = BenchmarkVersion.objects.get(pk=version.pk)  # a copy: pinning is publish's, not the draft's
    _settings_pin(pinned)
    changelog = release_changelog(
        previous=previous.manifest if previous else None, manifest=version_manifest(version=pinned)
    )
    _changelog_notes(version=version, changelog=changelog)  # the preview is what publishing will freeze
    return PublishPreview(version=version, previous=previous, changelog=changelog)


@transaction.atomic
def version_publish(
    *,
    version: BenchmarkVersion,
    actor=None,
    notes: str | None = None,
    downloads_inline: bool = False,
    prepare: bool = True,
) -> BenchmarkVersion:
    """Freeze a draft: manifest and its hash, changelog against the latest release; then announce it. Its downloads
    are built by a worker once this commits (a large release takes minutes, too long for a request), or here with
    `downloads_inline` (the import command, which has no request to answer). With `prepare`, the workers make the
    test manifests and recordings its tasks still lack (`release_prepare_wanted`)."""
    _require_maintainer(actor)
    version = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
    if version.status != BenchmarkVersion.Status.DRAFT:
        raise CurationError(f"release {version.name} is already {version.status}")
    if not SEMVER_RE.match(version.name):
        raise CurationError(f"{version.name!r} is not a semantic version name (like 1.2.0 or demo-1.2.0)")
    if not version.memberships.exists():
        raise CurationError(f"release {version.name} has no tasks to publish")
    previous = release_previous(version=version)
    _settings_pin(version)
    version.manifest = version_manifest(version=version)
    version.manifest_hash = sha256_hex(json.dumps(version.manifest, sort_keys=True, separators=(",", ":")))
    version.previous = previous
    version.changelog = release_changelog(previous=previous.manifest if previous else None, manifest=version.manifest)
    _changelog_notes(version=version, changelog=version.changelog)
    if notes is not None:
        version.notes = notes
    version.status = BenchmarkVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    version.downloads = release_downloads_build(version=version) if downloads_inline else {}
    version.downloads_failed = ""
    version.full_clean()
    version.save()
    if not downloads_inline:
        transaction.on_commit(lambda: release_downloads_queue(version=version))
    if prepare:
        release_prepare_wanted.send(sender=BenchmarkVersion, version=version)
    transaction.on_commit(lambda: version_published.send(sender=BenchmarkVersion, version=version))  # the last word
    return version


def release_downloads_queue(*, version: BenchmarkVersion) -> None:
    """Have a worker build a release's downloads (the `default` queue). A broker that refuses, or loses the task,
    leaves it to the workers' watchdog, which queues it again (operations/watchdog.py)."""
    BenchmarkVersion.objects.filter(pk=version.pk).update(downloads_queued_at=timezone.now())
    enqueue(
        DOWNLOADS_PREPARE,
        version.pk,
        subject=version,
        refused=lambda exc: (
            f"the downloads of release {version.name} could not be queued ({exc}); the watchdog "
            f"queues them once the broker answers"
        ),
    )


def releases_downloads_pending() -> list[BenchmarkVersion]:
    """Published or deprecated releases whose downloads are neither built nor failed (being prepared)."""
    return [
        v
        for v in BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT).only(
            "pk",
            "name",
            "status",
            "downloads",
            "downloads_failed",
            "published_at",
            "downloads_queued_at",
            "redispatched_at",
            "redispatches",
        )
        if v.downloads_status == "preparing"
    ]


def release_downloads_requeue(version: BenchmarkVersion, *, idle_seconds: float, worker: str = "") -> int:
    """Queue again the build of downloads whose task was lost (no worker holds it, none waits), once the watchdog
    claimed it."""
    event_record(
        kind=Kind.DOWNLOADS_REDISPATCHED,
        subject=version,
        worker=worker,
        detail=f"the downloads of release {version.name} were being prepared with no queued or running task "
        f"after {idle_seconds:.0f} s; their build was queued again",
    )
    enqueue(
        DOWNLOADS_PREPARE,
        version.pk,
        subject=version,
        refused=lambda exc: (
            f"the downloads of release {version.name} could not be queued again ({exc}); the "
            f"watchdog queues them once the broker answers"
        ),
    )
    return 1


def release_downloads_prepare(*, version_id: int) -> dict:
    """Build and keep a published release's downloads unless they exist (a redelivered task builds nothing)."""
    version = BenchmarkVersion.objects.get(pk=version_id)
    if version.downloads_status == "ready" or not version.is_frozen:
        return version.downloads
    downloads = release_downloads_build(version=version)
    with transaction.atomic():  # another app's download (the Harbor dataset) may be stored meanwhile: keep it
        locked = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
        locked.downloads = {**locked.downloads, **downloads}
        locked.downloads_failed = ""
        locked.save(update_fields=["downloads", "downloads_failed"])
    return locked.downloads


def release_downloads_fail(*, version_id: int, error: Exception) -> None:
    """The build failed for good (after the task's retries): the release's page and API say why."""
    logger.error("the downloads of release %s could not be built: %s", version_id, error)
    if BenchmarkVersion.objects.get(pk=version_id).downloads_status != "ready":
        BenchmarkVersion.objects.filter(pk=version_id).update(
            downloads_failed=f"{type(error).__name__}: {error}"[:2000]
        )


def release_downloads_retry(*, version: BenchmarkVersion, actor) -> None:
    """A maintainer has the downloads whose build failed prepared again."""
    _require_maintainer(actor)
    if version.downloads_status != "failed":
        raise CurationError(
            f"the downloads of {version.name} are {version.downloads_status or 'not built for a draft'}; "
            "only failed ones are prepared again"
        )
    BenchmarkVersion.objects.filter(pk=version.pk).update(downloads_failed="")
    release_downloads_queue(version=version)


@transaction.atomic
def version_deprecate(*, version: BenchmarkVersion, actor=None, note: str) -> BenchmarkVersion:
    _require_maintainer(actor)
    if version.status != BenchmarkVersion.Status.PUBLISHED:
        raise CurationError(f"only published releases can be deprecated; {version.name} is {version.status}")
    version.status = BenchmarkVersion.Status.DEPRECATED
    version.deprecated_at = timezone.now()
    version.deprecation_note = note
    version.save(update_fields=["status", "deprecated_at", "deprecation_note"])
    return version


DOWNLOAD_CHUNK = 1024 * 1024


def release_downloads_build(*, version: BenchmarkVersion) -> dict:
    """The public problem set as a zip and its live items as JSONL (masked prompt only), stored with their hashes;
    held-out tasks are in neither. Both are written to temporary files a file and a line at a time."""
    downloads = {}
    builds = (
        ("pset", f"{version.name}-problem-set.zip", lambda out: release_pset_zip_write(version=version, out=out)),
        (
            "items",
            f"{version.name}-items.jsonl",
            lambda out: release_items_write(
                version=version, protocol=protocol_get(name=version.protocol_name), out=out
            ),
        ),
    )
    for kind, name, write in builds:
        with tempfile.TemporaryFile() as out:
            write(out)
            blob = blob_store_file(file=out)
        downloads[kind] = {"filename": name, "sha256": blob.sha256, "size": blob.size}
    return downloads


def release_pset_zip_write(*, version: BenchmarkVersion, out: BinaryIO) -> None:
    """The public tasks in the problem-set layout (FORMAT.md) as a zip, under a folder named after the version;
    each file is copied from storage in chunks, never all at once."""
    tasks = list(tasks_public(version=version))
    members = {
        f"{version.name}/{task.paper.slug}/{path}": digest for task in tasks for path, digest in task.files.items()
    }
    listing = f"{version.name}/{PAPERS_YAML}"
    papers_yaml = papers_yaml_dump(package_load(t, with_files=False) for t in tasks).encode("utf-8")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted([*members, listing]):
            info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))  # equal content, equal bytes
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o600 << 16
            with archive.open(info, "w") as member:
                if name == listing:
                    member.write(papers_yaml)
                    continue
                with blob_open(sha256=members[name]) as source:
                    shutil.copyfileobj(source, member, DOWNLOAD_CHUNK)


def release_items_write(*, version: BenchmarkVersion, protocol: Protocol, out: BinaryIO) -> None:
    """Every live public item as JSON lines, in `protocol`, never reference code; held-out items never leave the
    platform. What a paper's items share is written once, in a `paper` line before them: its text and its
    `prompt_template` (the protocol's template with the paper's context files laid out); an item line holds its
    masked file and fields once, and its prompt is `prompt_fill(prompt_template, {**paper, **item})`
    (benchmarks.paper2code.items, docs/LEADERBOARD.md). One task's files are in memory at a time."""
    task_id, files, annotated = None, {}, {}
    for snippet in items_public(version=version).iterator(chunk_size=500):
        task = snippet.task
        if task.pk != task_id:  # items come paper by paper: only the current task's files are kept
            task_id = task.pk
            files = {p: blob_read(sha256=d) for p, d in task.files.items()}
            annotated = {p: parse(files[p].decode("utf-8"), p) for p in task.annotated_paths}
            template = prompt_template(
                protocol=protocol, context_files=[(p, files[p].decode("utf-8")) for p in task.context_paths]
            )
            _json_line(
                out,
                {
                    "type": "paper",
                    "paper": task.paper.slug,
                    "paper_text": files[task.paper_path].decode("utf-8"),
                    "prompt_template": template,
                },
            )
        masked = snippet_masked(snippet=snippet, files=files, protocol=protocol, annotated=annotated[snippet.file_path])
        _json_line(
            out,
            {
                "type": "item",
                "id": str(snippet.pk),
                "paper": task.paper.slug,
                "file": snippet.file_path,
                "snippet": snippet.name,
                "loc": snippet.loc,
                "protocol": protocol.name,
                "masked_code": masked,
            },
        )


def _json_line(out: BinaryIO, record: dict) -> None:
    out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")


def release_items_in_protocol(*, version: BenchmarkVersion, protocol: Protocol) -> str:
    """The sha256 of the release's items JSONL in another protocol, built once: releases and protocols never change."""
    from django.core.cache import cache

    key = f"release-items-public:{version.pk}:{version.manifest_hash}:{protocol.name}"  # never an older key's file
    digest = cache.get(key)
    if digest is None or not Blob.objects.filter(sha256=digest).exists():
        with tempfile.TemporaryFile() as out:
            release_items_write(version=version, protocol=protocol, out=out)
            digest = blob_store_file(file=out).sha256
        cache.set(key, digest, timeout=None)
    return digest


def version_export(*, version: BenchmarkVersion, root: Path) -> list[PaperPackage]:
    """Write a version's tasks as a problem set in the FORMAT.md layout."""
    packages = [package_load(task) for task in version_tasks(version=version)]
    write_pset(root, packages)
    return packages


@transaction.atomic
def protocol_add(
    *,
    name: str,
    template: str,
    template_without_paper: str = "",
    masking: str = "standard",
    masked_header: bool = True,
    context_join: str = "standard",
) -> PromptProtocol:
    """Add a prompt protocol; an existing one is never changed, since runs and releases name it."""
    if PromptProtocol.objects.filter(name=name).exists():
        raise CurationError(f"a prompt protocol named {name!r} exists already; protocols never change: pick a new name")
    row = PromptProtocol(
        name=name,
        template=template,
        template_without_paper=template_without_paper,
        masking=masking,
        masked_header=masked_header,
        context_join=context_join,
    )
    problems = row.as_protocol().problems()
    if problems:
        raise CurationError(f"prompt protocol {name!r} is not usable: " + "; ".join(problems))
    row.full_clean()
    row.save()
    return row
