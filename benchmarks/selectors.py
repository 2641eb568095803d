"""Reads of benchmark data used by pages, commands and workers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, TypedDict

from django.core.files import File
from django.core.files.storage import default_storage
from django.db.models import Count, QuerySet, Sum
from django.shortcuts import get_object_or_404

from benchmarks.models import (
    PROTOCOL_NAME_RE,
    BenchmarkVersion,
    Blob,
    Paper,
    PromptProtocol,
    Snippet,
    Task,
    TaskPackage,
)
from benchmarks.paper2code import AnnotatedFile, Protocol, build_prompt, parse, protocol_mask
from benchmarks.paper2code.pset import PaperPackage, requirements_file
from common.errors import ApplicationError

if TYPE_CHECKING:  # a lint dependency (django-stubs), not the platform's
    from django_stubs_ext import WithAnnotations


def blob_read(*, sha256: str) -> bytes:
    with blob_open(sha256=sha256) as handle:
        return handle.read()


def blob_open(*, sha256: str) -> File:
    """The stored content as a file to read in chunks (downloads are never read whole)."""
    return default_storage.open(Blob(sha256=sha256, size=0).storage_name, "rb")


def task_kept_requirements(*, task: Task) -> tuple[str, str] | None:
    """(path, text) of the requirements file a task run in a shared environment keeps as a file, never installed."""
    path = requirements_file(task.files) if task.environment_file else None
    if path is None:
        return None
    return path, blob_read(sha256=task.files[path]).decode("utf-8", "replace")


def task_sources(*, task: Task) -> list[tuple[str, str]]:
    """(path, text) of what a paper page shows of a task: its paper text, then each annotated file."""
    return [
        (path, blob_read(sha256=task.files[path]).decode("utf-8", "replace"))
        for path in [task.paper_path, *task.annotated_paths]
        if path in task.files
    ]


def versions_visible(*, user) -> QuerySet[BenchmarkVersion]:
    """Published and deprecated versions for everyone; drafts too for maintainers."""
    versions = BenchmarkVersion.objects.annotate(task_count=Count("tasks"))
    if user_is_maintainer(user=user):
        return versions
    return versions.exclude(status=BenchmarkVersion.Status.DRAFT)


def user_is_maintainer(*, user) -> bool:
    from django.conf import settings

    return bool(
        user.is_authenticated and (user.is_superuser or user.groups.filter(name=settings.MAINTAINERS_GROUP).exists())
    )


def version_get(*, name: str, user) -> BenchmarkVersion:
    return get_object_or_404(versions_visible(user=user), name=name)


class TaskTotals(TypedDict):
    """What `version_tasks` annotates each task with."""

    snippet_count: int
    total_loc: int | None  # None: a task without snippets


def version_tasks(*, version: BenchmarkVersion) -> QuerySet[WithAnnotations[Task, TaskTotals]]:
    """The version's tasks with their paper, snippet count and total lines of code."""
    return (
        version.tasks.select_related("paper")
        .annotate(snippet_count=Count("snippets"), total_loc=Sum("snippets__loc"))
        .order_by("paper__slug")
    )


def version_snippets(*, version: BenchmarkVersion, split: str | None = None) -> QuerySet[Snippet]:
    """The version's benchmark items: snippets of its tasks, less those retired from it."""
    snippets = Snippet.objects.filter(task__memberships__version=version).exclude(retirements__version=version)
    if split:
        snippets = snippets.filter(task__memberships__version=version, task__memberships__split=split)
    return snippets.select_related("task", "task__paper").order_by("task__paper__slug", "file_path", "position")


class UnknownProtocol(ApplicationError):
    """A prompt protocol name that no protocol has; the message lists the known ones."""

    code = "unknown_protocol"


def protocol_get(*, name: str) -> Protocol:
    """The prompt protocol of that name (UnknownProtocol listing the known ones if there is none)."""
    # A name no protocol can have (e.g. with a NUL, which PostgreSQL refuses in a query) is unknown without asking.
    possible = len(name) <= 20 and re.match(PROTOCOL_NAME_RE, name)
    row = PromptProtocol.objects.filter(name=name).first() if possible else None
    if row is None:
        known = ", ".join(protocol_names())
        raise UnknownProtocol(f"unknown prompt protocol {name!r}; known: {known}")
    return row.as_protocol()


def protocol_names() -> list[str]:
    return list(PromptProtocol.objects.values_list("name", flat=True))


def snippet_masked(
    *, snippet: Snippet, files: dict[str, bytes], protocol: Protocol, annotated: AnnotatedFile | None = None
) -> str:
    """The annotated file as a model sees it with this snippet masked (FORMAT.md section 5), in the protocol's style.

    `annotated`: the snippet's file already parsed (a caller building many prompts parses each file once)."""
    if annotated is None:
        annotated = parse(files[snippet.file_path].decode("utf-8"), snippet.file_path)
    return protocol_mask(protocol, annotated, annotated.snippets[snippet.position])


def snippet_prompt(
    *,
    snippet: Snippet,
    files: dict[str, bytes],
    with_paper: bool,
    protocol: Protocol,
    annotated: AnnotatedFile | None = None,
) -> str:
    """The prompt for one snippet (FORMAT.md 5-6): paper unless the ablation, context files, the masked file."""
    task = snippet.task
    masked = snippet_masked(snippet=snippet, files=files, protocol=protocol, annotated=annotated)
    context = [(path, files[path].decode("utf-8")) for path in task.context_paths]
    paper = files[task.paper_path].decode("utf-8") if with_paper else None
    return build_prompt(
        protocol=protocol,
        paper_text=paper,
        context_files=context,
        masked_path=snippet.file_path,
        masked_code=masked,
        name=snippet.name,
        loc=snippet.loc,
    )


def version_settings_text(*, version: BenchmarkVersion) -> str:
    """A release's evaluation settings in one line; a draft's blank limit is this site's setting at publish."""
    unset = "this site's at publish"
    time_limit = f"{version.time_limit_seconds} s" if version.time_limit_seconds else unset
    memory = f"{version.memory_mb} MB" if version.memory_mb else unset
    cpus = f"{version.cpus:g}" if version.cpus else unset
    return f"protocol {version.protocol_id}, time limit per test {time_limit}, memory {memory}, CPUs {cpus}"


def version_task_for_paper(*, version: BenchmarkVersion, slug: str) -> Task:
    task = get_object_or_404(version.tasks.select_related("paper"), paper__slug=slug)
    tasks_as_released(version=version, tasks=[task])
    return task


def papers_as_released(*, version: BenchmarkVersion, papers: Iterable[Paper]) -> list[Paper]:
    """The one rule for which papers.yaml fields release `version` shows of each paper: those its manifest froze
    (a Paper row holds only a paper's latest values, which a later accept or import changes). A draft, or a release
    frozen before manifests kept them, shows the row. The papers returned are copies, for display only."""
    frozen = {t["paper"]: t["metadata"] for t in (version.manifest or {}).get("tasks", []) if "metadata" in t}
    shown = []
    for paper in papers:
        metadata = frozen.get(paper.slug)
        if metadata is None:
            shown.append(paper)
            continue
        fields = {name: metadata.get(name, getattr(paper, name)) or "" for name in _TEXT_FIELDS}
        dates = {name: _date(metadata.get(name, getattr(paper, name))) for name in _DATE_FIELDS}
        shown.append(Paper(pk=paper.pk, slug=paper.slug, created_at=paper.created_at, **fields, **dates))
    return shown


def task_titles_as_released(*, tasks: Iterable[Task]) -> dict[int, str]:
    """Each task's title as the latest release holding it froze it (`papers_as_released`), the Paper row's when
    no release froze one: a task id -> title."""
    tasks = list(tasks)
    frozen: dict[tuple[str, int], str] = {}
    for manifest in (
        BenchmarkVersion.objects.filter(memberships__task__in=tasks, manifest__isnull=False)
        .distinct()
        .order_by("published_at")
        .values_list("manifest", flat=True)
    ):
        for entry in (manifest or {}).get("tasks", []):
            if "title" in (entry.get("metadata") or {}):
                frozen[(entry["paper"], entry["revision"])] = entry["metadata"]["title"]
    return {t.pk: frozen.get((t.paper.slug, t.revision), t.paper.title) for t in tasks}


def tasks_as_released(*, version: BenchmarkVersion, tasks: Iterable[Task]) -> None:
    """Give each task (of `version`) its paper as the release froze it (`papers_as_released`)."""
    tasks = list(tasks)
    for task, paper in zip(tasks, papers_as_released(version=version, papers=[t.paper for t in tasks]), strict=True):
        task.paper = paper


def version_snippet_get(*, version: BenchmarkVersion, snippet_id: int) -> Snippet:
    snippet = get_object_or_404(Snippet.objects.select_related("task__paper"), pk=snippet_id, task__versions=version)
    tasks_as_released(version=version, tasks=[snippet.task])
    return snippet


@dataclass
class SnippetNode:
    snippet: Snippet
    children: list[SnippetNode] = field(default_factory=list)
    # Whether its answers get a sealed verdict, and why not (None: its task has no recording yet).
    sealing: dict | None = None


def snippet_sealing(*, task: Task, snippet: Snippet) -> dict | None:
    """The snippet's entry in its task's recording (evaluation/judging/sealed.py): sealed, and the reason if not."""
    if not task.recording:
        return None
    entry = task.recording.get("snippets", {}).get(f"{snippet.file_path}#{snippet.position}")
    return {"sealed": bool(entry.get("sealed")), "reason": str(entry.get("reason", ""))} if entry else None


def tasks_sealed_share(*, tasks: Iterable[Task]) -> tuple[int, int] | None:
    """(sealed snippets, snippets of tasks with a recording) over `tasks`; None when none has a recording yet."""
    recorded = [t.recording.get("snippets", {}) for t in tasks if t.recording]
    if not recorded:
        return None
    entries = [entry for snippets in recorded for entry in snippets.values()]
    return sum(bool(entry.get("sealed")) for entry in entries), len(entries)


def snippet_tree(*, task: Task) -> dict[str, list[SnippetNode]]:
    """Annotated file path -> its top-level snippets, each with its nested children."""
    nodes = {
        s.pk: SnippetNode(s, sealing=snippet_sealing(task=task, snippet=s))
        for s in task.snippets.order_by("file_path", "position")
    }
    tree: dict[str, list[SnippetNode]] = {path: [] for path in task.annotated_paths}
    for node in nodes.values():
        parent_id = node.snippet.parent_id
        (nodes[parent_id].children if parent_id else tree.setdefault(node.snippet.file_path, [])).append(node)
    return tree


def snippet_masked_file(*, snippet: Snippet, protocol: Protocol) -> str:
    """The masked file, reading only that file from storage."""
    path = snippet.file_path
    return snippet_masked(snippet=snippet, files={path: blob_read(sha256=snippet.task.files[path])}, protocol=protocol)


def package_load(row: TaskPackage, *, with_files: bool = True) -> PaperPackage:
    """A stored package (a task's, a revision's, a set validation paper's) as a PaperPackage, byte for byte; without
    files, its papers.yaml entry only. With `package_store`, the one pair between the two."""
    files = {path: blob_read(sha256=digest) for path, digest in sorted(row.files.items())} if with_files else {}
    entry = row.package_entry()
    return PaperPackage(
        id=entry["id"],  # type: ignore[arg-type]
        **{key: entry.get(key, "") for key in _TEXT_FIELDS},  # type: ignore[arg-type]
        **{key: _date(entry.get(key)) for key in _DATE_FIELDS},  # type: ignore[arg-type]
        paper_path=row.paper_path,
        annotated_paths=tuple(row.annotated_paths),
        context_paths=tuple(row.context_paths),
        requirements_path=row.package_requirements_path(),
        files=files,
        annotated={
            path: parse(files[path].decode("utf-8", "replace"), path) for path in row.annotated_paths if path in files
        },
        extra=row.package_extra(),
    )


_TEXT_FIELDS = ("title", "arxiv_abs", "github_url", "venue")
_DATE_FIELDS = ("arxiv_date", "arxiv_v1_date", "first_commit_date", "last_commit_date")


def _date(value: object) -> date | None:
    if not value:
        return None
    return value if isinstance(value, date) else date.fromisoformat(str(value))
