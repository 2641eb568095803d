"""One paper once, for submissions (issue 37): the papers of every release (drafts included) and the other
submissions under review that a submission's latest revision matches. The likeness and its rule are
benchmarks/paper2code/likeness.py, the release side benchmarks/duplicates.py; accepting a submission with a match
needs a reason (`services.submission_accept`), which the release's changelog keeps."""

from __future__ import annotations

from copy import copy

from benchmarks.duplicates import Match, fingerprints_of, release_matches, strength
from benchmarks.paper2code.likeness import likeness
from submissions.models import Revision, Submission
from submissions.proposed import tests_made_paths

State = Submission.State
UNDER_REVIEW = (State.SUBMITTED, State.VALIDATING, State.AWAITING_REVIEW, State.CHANGES_REQUESTED)


def _as_submitted(revision: Revision) -> Revision:
    """The revision as its author submitted it, for its likeness: the files validation wrote into it (the proposed
    tests, the platform's code) left out, so its figures do not move while it validates and platform code never
    makes two papers alike."""
    made = tests_made_paths(revision=revision)
    if not made:
        return revision
    submitted = copy(revision)  # never saved: only its files differ
    submitted.files = {path: digest for path, digest in revision.files.items() if path not in made}
    return submitted


def revision_fingerprint(*, revision: Revision) -> dict:
    """The revision's fingerprint, made once (at submission) and stored with its content as submitted."""
    return fingerprints_of([_as_submitted(revision)])[0]


def submission_matches(*, submission: Submission) -> list[Match]:
    """What the submission's latest revision matches: papers of any release (but the paper it proposes a new
    revision of) and the latest revisions of other submissions under review, the most alike first."""
    revision = submission.latest_revision
    if revision is None:
        return []
    fingerprint = revision_fingerprint(revision=revision)
    title = str(revision.metadata.get("title") or "")
    revised = submission.revises.task if submission.revises_id and submission.revises else None
    matches = release_matches(
        fingerprint=fingerprint,
        title=title,
        papers_excluded=[revised.paper.slug] if revised else [],
        tasks_excluded=[submission.task_id] if submission.task_id else [],  # accepted: never a match of itself
    )
    others: dict[int, Revision] = {}
    for other in (
        Revision.objects.filter(submission__state__in=UNDER_REVIEW)
        .exclude(submission=submission)
        .select_related("submission")
        .defer("test_manifest", "recording")
        .order_by("submission", "-number")
    ):
        others.setdefault(other.submission_id, other)
    candidates = list(others.values())
    for other, print_ in zip(candidates, fingerprints_of([_as_submitted(c) for c in candidates]), strict=True):
        alike = likeness(
            candidate=fingerprint, title=title, other=print_, other_title=str(other.metadata.get("title") or "")
        )
        if alike.is_match:
            matches.append(
                Match(
                    paper=str(other.metadata.get("id") or ""),
                    title=str(other.metadata.get("title") or ""),
                    where=f"submission {other.submission_id} r{other.number} "
                    f"({other.submission.get_state_display().lower()})",
                    what=alike.words(),
                    strength=strength(alike),
                    submission=other.submission_id,
                )
            )
    return sorted(matches, key=lambda m: (-m.strength, m.paper))
