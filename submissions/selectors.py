"""Reads for submission pages: an author's list, the review queue, snippet trees and revision diffs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from benchmarks.paper2code import parse
from benchmarks.selectors import blob_read, user_is_maintainer
from submissions.models import Revision, Submission, ValidationCheck

OPEN_STATES = [Submission.State.SUBMITTED, Submission.State.VALIDATING, Submission.State.AWAITING_REVIEW,
               Submission.State.CHANGES_REQUESTED, Submission.State.INVALID]


def submissions_of(*, user) -> QuerySet[Submission]:
    return Submission.objects.filter(author=user).order_by("-updated_at")


def submission_get(*, pk: int, user) -> Submission:
    """The submission if the user is its author or a maintainer, else 404/403."""
    submission = get_object_or_404(Submission.objects.select_related("author"), pk=pk)
    if not user.is_authenticated or (user.pk != submission.author_id and not user_is_maintainer(user=user)):
        raise PermissionDenied("only the author and maintainers may see a submission")
    return submission


def review_queue(*, state: str | None = None, older_than_days: int | None = None) -> QuerySet[Submission]:
    queue = Submission.objects.select_related("author").exclude(state=Submission.State.DRAFT)
    queue = queue.filter(state=state) if state else queue.filter(state__in=OPEN_STATES)
    if older_than_days:
        queue = queue.filter(updated_at__lte=timezone.now() - timedelta(days=older_than_days))
    return queue.order_by("updated_at")


@dataclass
class SnippetView:
    file: str
    name: str
    loc: int
    depth: int
    code: str
    uncovered: bool = False
    children: list[SnippetView] = field(default_factory=list)


def revision_snippet_tree(*, revision: Revision) -> dict[str, list[SnippetView]]:
    """Annotated file -> top-level snippets with children; `uncovered` when a masked or no-op check failed."""
    uncovered = set(ValidationCheck.objects.filter(report__revision=revision, status="failed",
                                                   snippet_name__gt="").values_list("snippet_file", "snippet_name"))
    tree: dict[str, list[SnippetView]] = {}
    for path in revision.annotated_paths:
        if path not in revision.files:
            continue
        parsed = parse(blob_read(sha256=revision.files[path]).decode("utf-8", "replace"), path)
        views = [SnippetView(path, s.name, s.loc, s.depth, s.code, (path, s.name) in uncovered)
                 for s in parsed.snippets]
        tree[path] = []
        for s, view in zip(parsed.snippets, views):
            (views[s.parent].children if s.parent is not None else tree[path]).append(view)
    return tree


def revision_diff(*, old: Revision, new: Revision) -> list[tuple[str, str]]:
    """(path, unified diff) for every file that differs between two revisions."""
    diffs = []
    for path in sorted(set(old.files) | set(new.files)):
        if old.files.get(path) == new.files.get(path):
            continue
        before = blob_read(sha256=old.files[path]).decode("utf-8", "replace") if path in old.files else ""
        after = blob_read(sha256=new.files[path]).decode("utf-8", "replace") if path in new.files else ""
        text = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                            f"r{old.number}/{path}", f"r{new.number}/{path}"))
        diffs.append((path, text or "(binary or whitespace-only change)"))
    return diffs
