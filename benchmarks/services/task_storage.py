"""A paper package stored as a `Task` with its snippets, manifest, recording and mutants."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError

from benchmarks.duplicates import (
    package_fingerprint_store,
)
from benchmarks.models import (
    Paper,
    Snippet,
    Task,
)
from benchmarks.paper2code import PackageError, Problem
from benchmarks.paper2code.pset import PAPERS_YAML, PaperPackage
from benchmarks.services.blobs import blob_store, environment_hash, sha256_hex


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
