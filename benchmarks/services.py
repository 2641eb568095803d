"""Functions that change benchmark state: storing task packages, importing problem sets, publishing versions."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from benchmarks.models import Blob, BenchmarkVersion, Paper, Snippet, Task
from benchmarks.paper2code import PackageError, Problem
from benchmarks.paper2code.pset import PaperPackage, read_pset_with_warnings, write_pset
from benchmarks.selectors import task_package, version_tasks


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def environment_hash(requirements: str) -> str:
    """Hash of the requirement lines that matter, so reordering or comments don't rebuild an environment."""
    lines = sorted({ln.strip() for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("#")})
    return sha256_hex("\n".join(lines))


def blob_store(*, content: bytes) -> Blob:
    """Store content once under its sha256 (idempotent)."""
    digest = sha256_hex(content)
    blob, created = Blob.objects.get_or_create(sha256=digest, defaults={"size": len(content)})
    if created or not default_storage.exists(blob.storage_name):
        if default_storage.exists(blob.storage_name):
            default_storage.delete(blob.storage_name)
        default_storage.save(blob.storage_name, ContentFile(content))
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
    paper, created = Paper.objects.get_or_create(slug=package.id, defaults=fields)
    if not created and any(getattr(paper, k) != v for k, v in fields.items()):
        for key, value in fields.items():
            setattr(paper, key, value)
        paper.full_clean()
        paper.save()
    return paper


def task_content_hash(*, package: PaperPackage, requirements: str) -> str:
    return sha256_hex(f"{package.content_hash}\n{sha256_hex(requirements)}")


def task_store(*, package: PaperPackage, shared_requirements: str = "") -> tuple[Task, bool]:
    """The Task for this package's content, created as the paper's next revision if the content is new."""
    requirements = "\n".join(part for part in (shared_requirements.strip(), package.requirements.strip()) if part)
    paper = _paper_upsert(package=package)
    content_hash = task_content_hash(package=package, requirements=requirements)
    existing = Task.objects.filter(paper=paper, content_hash=content_hash).first()
    if existing:
        return existing, False
    files = {path: blob_store(content=data).sha256 for path, data in package.files.items()}
    last = paper.tasks.order_by("-revision").values_list("revision", flat=True).first() or 0
    task = Task.objects.create(
        paper=paper,
        revision=last + 1,
        content_hash=content_hash,
        files=files,
        paper_path=package.paper_path,
        annotated_paths=list(package.annotated_paths),
        context_paths=list(package.context_paths),
        test_entry_point=package.test_entry_point,
        requirements=requirements,
        environment_hash=environment_hash(requirements),
        extra_metadata=_jsonable(dict(package.extra)),
    )
    _snippets_create(task=task, package=package)
    return task, True


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
    *, root: Path, version_name: str, shared_requirements: str = "", publish: bool = False
) -> ImportResult:
    """Import a problem set into a version: all or nothing; the same content twice changes nothing."""
    packages, warnings = read_pset_with_warnings(root)
    version, _ = BenchmarkVersion.objects.get_or_create(name=version_name)
    result = ImportResult(version=version, warnings=warnings)
    for package in packages:
        task, created = task_store(package=package, shared_requirements=shared_requirements)
        (result.tasks_created if created else result.tasks_unchanged).append(task)
    new_tasks = result.tasks_created + result.tasks_unchanged
    current = set(version.tasks.values_list("pk", flat=True))
    replaced = set(version.tasks.filter(paper__in=[t.paper for t in new_tasks]).values_list("pk", flat=True))
    wanted = (current - replaced) | {t.pk for t in new_tasks}
    if wanted != current:
        if version.is_frozen:
            raise PackageError(
                [Problem(file=str(root), line=0, message=f"version {version.name} is {version.status} and frozen; "
                         "import into a new version name instead")]
            )
        version.tasks.set(wanted)
    if publish and not version.is_frozen:
        result.version = version_publish(version=version)
    return result


def version_manifest(*, version: BenchmarkVersion) -> dict:
    """The frozen content of a version: every task and snippet by content hash."""
    tasks = version.tasks.select_related("paper").prefetch_related("snippets").order_by("paper__slug")
    return {
        "version": version.name,
        "tasks": [
            {
                "paper": task.paper.slug,
                "revision": task.revision,
                "content_hash": task.content_hash,
                "environment_hash": task.environment_hash,
                "snippets": [
                    {"file": s.file_path, "name": s.name, "loc": s.loc, "code_hash": s.code_hash}
                    for s in task.snippets.all()
                ],
            }
            for task in tasks
        ],
    }


@transaction.atomic
def version_publish(*, version: BenchmarkVersion) -> BenchmarkVersion:
    """Freeze a draft version: from now on its manifest hash identifies exactly what was evaluated."""
    version = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
    if version.status != BenchmarkVersion.Status.DRAFT:
        raise ValueError(f"version {version.name} is already {version.status}")
    if not version.tasks.exists():
        raise ValueError(f"version {version.name} has no tasks to publish")
    version.manifest = version_manifest(version=version)
    version.manifest_hash = sha256_hex(json.dumps(version.manifest, sort_keys=True, separators=(",", ":")))
    version.status = BenchmarkVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    version.full_clean()
    version.save()
    return version


def version_export(*, version: BenchmarkVersion, root: Path) -> list[PaperPackage]:
    """Write a version's tasks as a problem set in the FORMAT.md layout."""
    packages = [task_package(task=task) for task in version_tasks(version=version)]
    write_pset(root, packages)
    return packages
