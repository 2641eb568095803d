"""Curating a draft release: creating it, its tasks and their splits, retiring snippets."""

from __future__ import annotations

import re

from django.db import transaction

from benchmarks.errors import CurationError
from benchmarks.models import (
    BenchmarkVersion,
    Snippet,
    SnippetRetirement,
    Task,
    VersionTask,
)
from benchmarks.services.maintainers import maintainer_require

SEMVER_RE = re.compile(r"^(?:[a-z][a-z0-9-]*-)?\d+\.\d+\.\d+$")


def draft_require(version: BenchmarkVersion) -> None:
    if version.is_frozen:
        raise CurationError(f"release {version.name} is {version.status} and frozen")


@transaction.atomic
def version_draft_create(*, name: str, actor=None, notes: str = "") -> BenchmarkVersion:
    """A new draft starting from the latest published release's tasks, splits and retirements."""
    maintainer_require(actor)
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
    maintainer_require(actor)
    draft_require(version)
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
    maintainer_require(actor)
    draft_require(version)
    version.memberships.filter(task=task).delete()
    version.retirements.filter(snippet__task=task).delete()


@transaction.atomic
def snippet_retire(*, version: BenchmarkVersion, snippet: Snippet, reason: str, actor=None) -> SnippetRetirement:
    """Leave one snippet out of a draft, with a reason that the changelog and manifest keep."""
    maintainer_require(actor)
    draft_require(version)
    if not reason.strip():
        raise CurationError("retiring a snippet needs a reason")
    if not version.memberships.filter(task=snippet.task).exists():
        raise CurationError(f"snippet {snippet.name} is not in release {version.name}")
    retirement, _ = SnippetRetirement.objects.update_or_create(
        version=version, snippet=snippet, defaults={"reason": reason.strip(), "retired_by": actor}
    )
    return retirement
