"""Per-author limits: the bytes their submissions keep in storage, and the environments their revisions need.

Maintainers are not limited (they import whole problem sets). Both limits are checked before anything is stored
or built, and a refusal says how much is used, the limit, and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from benchmarks.models import Blob, Task
from benchmarks.selectors import user_is_maintainer
from benchmarks.services.blobs import environment_hash, sha256_hex
from common.errors import ApplicationError
from common.sizes import size_text
from evaluation.models import EvaluationRun
from submissions.models import Revision, Submission, TriedAnswer

_CHUNK = 500  # hashes per query, below every database's limit of bound parameters


class QuotaExceeded(ApplicationError):
    """An author's submissions would go over one of their limits; the message says which and what to do."""


def stored_bytes_check(*, submission: Submission, new: Mapping[str, bytes], kept: Iterable[str]) -> None:
    """Refuse if, with this draft's files becoming `new` (contents) plus `kept` (sha256 of files it keeps), the
    author's submissions would keep more than SUBMISSION_USER_MAX_BYTES (files stored once count once)."""
    author = submission.author
    if user_is_maintainer(user=author):
        return
    sizes = {sha256_hex(data): len(data) for data in new.values()}
    hashes = set(sizes) | set(kept)
    for draft in Submission.objects.filter(author=author).exclude(pk=submission.pk).values_list("draft", flat=True):
        hashes.update((draft or {}).get("files", {}).values())
    for files in Revision.objects.filter(submission__author=author).values_list("files", flat=True):
        hashes.update(files.values())
    stored = sorted(hashes - set(sizes))
    for start in range(0, len(stored), _CHUNK):
        sizes.update(Blob.objects.filter(sha256__in=stored[start : start + _CHUNK]).values_list("sha256", "size"))
    total, limit = sum(sizes.values()), settings.SUBMISSION_USER_MAX_BYTES
    if total > limit:
        raise QuotaExceeded(
            f"your submissions would keep {size_text(total)} of files, over the limit of "
            f"{size_text(limit)} per author; withdraw submissions you no longer need, or ask a "
            f"maintainer to raise the limit"
        )


def environments_check(*, submission: Submission, requirements: str) -> None:
    """Refuse a revision whose requirements would make the author's submissions need more than
    SUBMISSION_USER_MAX_ENVIRONMENTS environments (distinct requirement sets of their revisions since
    SANDBOX_ENVIRONMENT_UNUSED_DAYS; the benchmark's own task environments and "no requirements" are free)."""
    author = submission.author
    if user_is_maintainer(user=author):
        return
    free = {environment_hash("")} | set(Task.objects.values_list("environment_hash", flat=True).distinct())
    wanted = environment_hash(requirements)
    if wanted in free:
        return
    since = timezone.now() - timedelta(days=settings.SANDBOX_ENVIRONMENT_UNUSED_DAYS)
    used = {
        environment_hash(text)
        for text in Revision.objects.filter(submission__author=author, created_at__gte=since).values_list(
            "requirements", flat=True
        )
    } - free
    limit = settings.SUBMISSION_USER_MAX_ENVIRONMENTS
    if wanted not in used and len(used) >= limit:
        raise QuotaExceeded(
            f"your submissions already need {len(used)} different environments (distinct "
            f"requirements), the limit per author is {limit}: reuse the requirements of an earlier "
            f"revision, or withdraw submissions you no longer need"
        )


def answer_try_quota_check(*, user) -> None:
    """An answer tried on a submission is sandbox work like an evaluation item: a user (maintainers exempt) has at most
    RUNS_ACTIVE_PER_USER runs and tried answers queued or running at once, counted together."""
    if user_is_maintainer(user=user):
        return
    limit = settings.RUNS_ACTIVE_PER_USER
    runs = EvaluationRun.objects.filter(
        created_by=user, status__in=(EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
    ).count()
    tries = TriedAnswer.objects.filter(tried_by=user, status__in=TriedAnswer.ACTIVE).count()
    if runs + tries >= limit:
        raise QuotaExceeded(
            f"you have {tries} tried answer(s) and {runs} run(s) queued or running, the most one user may have at "
            f"once ({limit}): try this one when one of them has finished"
        )
