"""Reads for submission pages: an author's list, the review queue, snippet trees, revision diffs, set validations."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import BenchmarkVersion, DuplicateAcceptance
from benchmarks.paper2code import parse
from benchmarks.selectors import blob_read, user_is_maintainer
from submissions.models import (
    DRAFT_SUBMITTED_AS,
    Revision,
    SetValidation,
    SetValidationPaper,
    StateChange,
    Submission,
    TriedAnswer,
    ValidationCheck,
    ValidationReport,
)

OPEN_STATES = [
    Submission.State.SUBMITTED,
    Submission.State.VALIDATING,
    Submission.State.AWAITING_REVIEW,
    Submission.State.CHANGES_REQUESTED,
    Submission.State.INVALID,
]


def submissions_of(*, user) -> QuerySet[Submission]:
    """The person's submissions, each accepted one with the releases its task is in (`task.memberships`)."""
    return (
        Submission.objects.filter(author=user)
        .select_related("task")
        .prefetch_related("task__memberships__version")
        .order_by("-updated_at")
    )


def submission_get(*, pk: int, user) -> Submission:
    """The submission if the user is its author or a maintainer, else 404/403."""
    submission = get_object_or_404(Submission.objects.select_related("author"), pk=pk)
    if not user.is_authenticated or (user.pk != submission.author_id and not user_is_maintainer(user=user)):
        raise PermissionDenied("only the author and maintainers may see a submission")
    return submission


def user_display_name(*, user) -> str:
    """How the site names a person to others: their full name, else their username."""
    return user.get_full_name() or user.get_username()


def task_submitted_by(*, task):
    """The person whose accepted submission the task is (None for a task imported by maintainers)."""
    accepted = task.submissions.filter(state=Submission.State.ACCEPTED).select_related("author").first()
    return accepted.author if accepted else None


def tasks_written(*, user) -> QuerySet[Submission, int]:
    """The ids of the tasks the signed-in person submitted and saw accepted (their references are their own code)."""
    return Submission.objects.filter(state=Submission.State.ACCEPTED, author=user, task__isnull=False).values_list(
        "task_id", flat=True
    )


def submission_releases(*, submission: Submission) -> list[BenchmarkVersion]:
    """The releases (published, and the draft of the next) that hold the task the submission became, oldest first."""
    if submission.task_id is None:
        return []
    return list(BenchmarkVersion.objects.filter(memberships__task_id=submission.task_id).order_by("created_at"))


def release_named(release: BenchmarkVersion) -> str:
    """A release as an author reads it: a draft is the next release, not yet public."""
    if release.status == BenchmarkVersion.Status.DRAFT:
        return f"the draft of the next release, {release.name} (public once maintainers publish it)"
    return f"release {release.name}"


def report_superseded(*, submission: Submission) -> bool:
    """Whether the latest revision's validation report is about something other than what the author now edits:
    after "Revise before review" or a change request, once the author changed the draft, it is a next revision,
    validated only once submitted. Unchanged, the report is still about the draft."""
    latest = submission.revisions.order_by("-number").values_list("number", flat=True).first()
    return (
        submission.state in (Submission.State.DRAFT, Submission.State.CHANGES_REQUESTED)
        and latest is not None
        and submission.draft.get(DRAFT_SUBMITTED_AS) != latest
    )


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
    uncovered = set(
        ValidationCheck.objects.filter(
            report__revision=revision, status="failed", snippet_name__gt="", key__regex=r"^(masked|noop):"
        ).values_list("snippet_file", "snippet_name")
    )
    tree: dict[str, list[SnippetView]] = {}
    for path in revision.annotated_paths:
        if path not in revision.files:
            continue
        parsed = parse(blob_read(sha256=revision.files[path]).decode("utf-8", "replace"), path)
        views = [
            SnippetView(path, s.name, s.loc, s.depth, s.code, (path, s.name) in uncovered) for s in parsed.snippets
        ]
        tree[path] = []
        for s, view in zip(parsed.snippets, views, strict=False):
            (views[s.parent].children if s.parent is not None else tree[path]).append(view)
    return tree


def revision_snippet_choices(*, revision: Revision) -> list[tuple[str, str]]:
    """("file:index", its name indented by depth) of every snippet of the revision, for choosing one to try."""
    choices = []
    for path in revision.annotated_paths:
        if path not in revision.files:
            continue
        parsed = parse(blob_read(sha256=revision.files[path]).decode("utf-8", "replace"), path)
        choices += [(f"{path}:{s.index}", f"{path}: {'· ' * s.depth}{s.name}") for s in parsed.snippets]
    return choices


def tried_answers_of(*, revision: Revision) -> QuerySet[TriedAnswer]:
    return revision.tried_answers.select_related("tried_by").order_by("-created_at", "-pk")


def tried_answers_earlier(*, revision: Revision) -> QuerySet[TriedAnswer]:
    """The answers tried on the submission's earlier revisions (their code may differ: each says its revision), so
    that a reviewer of the latest still sees which alternatives the tests were shown to accept or reject."""
    return (
        TriedAnswer.objects.filter(revision__submission_id=revision.submission_id, revision__number__lt=revision.number)
        .select_related("tried_by", "revision")
        .order_by("-revision__number", "-created_at", "-pk")
    )


@dataclass
class CheckRow:
    """A check as the report lists it: a warning several checks share (a function's unsealed snippets) is said once,
    on the first of them, with how many share it; the others keep their Warning badge only."""

    check: ValidationCheck
    warning: str
    shared_by: int  # how many checks have this warning (1: its own), 0 on the ones after the first


def report_check_rows(*, report: ValidationReport | None) -> list[CheckRow]:
    if report is None:
        return []
    checks = list(report.checks.all())
    counts: dict[str, int] = {}
    for check in checks:
        if check.warning:
            counts[check.warning] = counts.get(check.warning, 0) + 1
    rows, said = [], set()
    for check in checks:
        first = bool(check.warning) and check.warning not in said
        said.add(check.warning)
        rows.append(CheckRow(check, check.warning if first else "", counts[check.warning] if first else 0))
    return rows


def report_mutations(*, report) -> dict[tuple[str, int], dict]:
    """(file, snippet index) -> the mutation score a report's validation measured."""
    found = {}
    for key, result in report.checks.filter(key__startswith="mutation:", result__isnull=False).values_list(
        "key", "result"
    ):
        path, _, index = key.removeprefix("mutation:").rpartition(":")
        found[(path, int(index))] = result
    return found


@dataclass
class ComparedWith:
    """The revision a review compares the latest one with, and why that one, in the reviewer's words."""

    revision: Revision
    said: str


def revision_compared_with(*, submission: Submission, revision: Revision) -> ComparedWith | None:
    """What a reviewer compares `revision` with (walk 38): the last earlier revision that passed validation, not
    merely the one before (a failed one in between hid the real changes behind "requirements added"); else the
    accepted revision of the task this submission revises; else the revision before; None for a first revision."""
    earlier = list(submission.revisions.filter(number__lt=revision.number).select_related("report").order_by("-number"))
    passed = next(
        (r for r in earlier if getattr(r, "report", None) and r.report.status == ValidationReport.Status.PASSED), None
    )
    if passed is not None:
        skipped = [r for r in earlier if r.number > passed.number]
        failed = ", ".join(f"r{r.number}" for r in reversed(skipped))
        verb = "failed it" if all(_failed(r) for r in skipped) else "did not pass it"
        return ComparedWith(
            passed,
            f"r{passed.number}, the last revision that passed validation" + (f" ({failed} {verb})" if skipped else ""),
        )
    revised = submission.revises.latest_revision if submission.revises_id and submission.revises else None
    if revised is not None and not earlier:
        return ComparedWith(revised, f"the accepted revision r{revised.number} of submission {submission.revises_id}")
    if earlier:
        return ComparedWith(earlier[0], f"r{earlier[0].number}, the revision before; no earlier one passed validation")
    return None


def _failed(revision: Revision) -> bool:
    report = getattr(revision, "report", None)
    return report is not None and report.status in (ValidationReport.Status.FAILED, ValidationReport.Status.ERROR)


def revision_diff(*, old: Revision, new: Revision) -> list[tuple[str, str]]:
    """(path, unified diff) for every file that differs between two revisions."""
    diffs = []
    for path in sorted(set(old.files) | set(new.files)):
        if old.files.get(path) == new.files.get(path):
            continue
        before = blob_read(sha256=old.files[path]).decode("utf-8", "replace") if path in old.files else ""
        after = blob_read(sha256=new.files[path]).decode("utf-8", "replace") if path in new.files else ""
        text = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                f"r{old.number}/{path}",
                f"r{new.number}/{path}",
            )
        )
        diffs.append((path, text or "(binary or whitespace-only change)"))
    return diffs


@dataclass
class RevisionRow:
    """One line of a submission's revisions list: the revision (None for a proposed one, a submission of its own)
    and what it is now, in words."""

    number: int | None
    created_at: datetime
    note: str
    status: str  # a badge class: draft, validating, passed, failed, accepted, superseded
    said: str
    url: str
    badge: str = ""  # for a row that is no revision yet: draft, or proposed (a submission of its own)


def submission_revision_rows(*, submission: Submission) -> list[RevisionRow]:
    """Its revisions, each marked by what it is now (validating, validated, failed validation, accepted or
    superseded), then a draft not yet submitted and the proposed new revisions of its accepted task."""
    revisions = list(submission.revisions.select_related("report").order_by("number"))
    rows = []
    for revision in revisions:
        report = getattr(revision, "report", None)
        latest = revision is revisions[-1]
        status = report.status if report else ""
        if latest and submission.state == Submission.State.ACCEPTED:
            status, said = "accepted", "accepted"
        elif status == ValidationReport.Status.PASSED:
            said = "validated"
        elif status in (ValidationReport.Status.PENDING, ValidationReport.Status.RUNNING):
            status, said = "validating", "proposed: validating" if latest else "not validated"
        else:
            status, said = "failed", "failed validation"
        if not latest:
            said += f", superseded by r{revisions[-1].number}"
            status = status if status == ValidationReport.Status.PASSED else "superseded"
        url = reverse("submission-revision", args=[submission.pk, revision.number])
        rows.append(RevisionRow(revision.number, revision.created_at, revision.note, status, said, url))
    editable = submission.state in (Submission.State.DRAFT, Submission.State.CHANGES_REQUESTED)
    if editable and (not revisions or report_superseded(submission=submission)):
        number = (revisions[-1].number + 1) if revisions else 1
        said = f"r{number}: draft, not submitted yet"
        url = reverse("submission-step", args=[submission.pk, "details"])
        rows.append(RevisionRow(None, submission.updated_at, "", "draft", said, url, badge="draft"))
    for proposed in submission.revisions_proposed.order_by("created_at"):
        said = f"proposed new revision (submission {proposed.pk}): {proposed.get_state_display().lower()}"
        url = reverse("submission-detail", args=[proposed.pk])
        rows.append(RevisionRow(None, proposed.created_at, "", proposed.state, said, url, badge="proposed"))
    return rows


@dataclass
class MetadataChange:
    """One field of a revision's package that differs from the previous revision, as the review page lists it."""

    label: str
    before: str
    after: str


def _snippet_names(revision: Revision) -> list[str]:
    return [name.replace("· ", "").strip() for _, name in revision_snippet_choices(revision=revision)]


def revision_metadata_diff(*, old: Revision, new: Revision) -> list[MetadataChange]:
    """What a reviewer asks of a new revision before its files: title, venue, links and dates, which files were added,
    removed or changed, which snippets came or went, and its requirements (only the fields that differ)."""
    changes = []
    for key in sorted(set(old.metadata) | set(new.metadata)):
        before, after = old.metadata.get(key), new.metadata.get(key)
        if before != after:
            changes.append(MetadataChange(key.replace("_", " "), str(before or "—"), str(after or "—")))
    added = sorted(set(new.files) - set(old.files))
    removed = sorted(set(old.files) - set(new.files))
    edited = sorted(p for p in set(old.files) & set(new.files) if old.files[p] != new.files[p])
    for label, paths in (("files added", added), ("files removed", removed), ("files changed", edited)):
        if paths:
            changes.append(MetadataChange(label, "", ", ".join(paths)))
    for label, field_name in (("annotated", "annotated_paths"), ("context", "context_paths")):
        if getattr(old, field_name) != getattr(new, field_name):
            before, after = getattr(old, field_name), getattr(new, field_name)
            changes.append(MetadataChange(label, ", ".join(before) or "—", ", ".join(after) or "—"))
    old_snippets, new_snippets = _snippet_names(old), _snippet_names(new)
    if old_snippets != new_snippets:
        gone = [n for n in old_snippets if n not in new_snippets]
        came = [n for n in new_snippets if n not in old_snippets]
        changes.append(
            MetadataChange(
                "snippets",
                "removed: " + ", ".join(gone) if gone else f"{len(old_snippets)} snippet(s)",
                "added: " + ", ".join(came) if came else f"{len(new_snippets)} snippet(s), reordered",
            )
        )
    if old.requirements.strip() != new.requirements.strip():
        changes.append(MetadataChange("requirements", old.requirements.strip() or "—", new.requirements.strip() or "—"))
    return changes


# Set validations (validate_pset and a draft version's page)

PASSED = SetValidation.Status.PASSED


@dataclass
class PaperValidationSummary:
    """One paper of a set validation as the command and the page show it."""

    paper: str
    status: str
    done: int
    total: int
    reference_passed: bool
    snippets: list[dict]  # {file, name, masked_fails, noop_fails, checked, mutation (None: not measured)}
    problems: list[str]
    redispatches: int = 0  # how often the watchdog queued it again after its task was lost
    warnings: list[str] = field(default_factory=list)  # never failures: a mutation score below the minimum
    reference: dict | None = None  # the reference's runs: runs, passed, flaky, durations, spread

    @property
    def covered(self) -> int:
        return sum(s["masked_fails"] and s["noop_fails"] for s in self.snippets)

    @property
    def uncovered(self) -> list[dict]:
        return [s for s in self.snippets if s["checked"] and not (s["masked_fails"] and s["noop_fails"])]

    @property
    def badge(self) -> tuple[str, str]:
        """The status as the page shows it: a passed paper with a warning (a low mutation score) reads Warning, not
        a green Passed."""
        if self.status == PASSED and self.warnings:
            return "warning", "warning"
        return self.status, self.status

    @property
    def line(self) -> str:
        scored = [s["mutation"] for s in self.snippets if s.get("mutation") and s["mutation"]["generated"]]
        killed = sum(m["killed"] for m in scored)
        counted = sum(m.get("counted", m["generated"]) for m in scored)
        equivalent = sum(m.get("equivalent", 0) for m in scored)
        mutation = f", {killed}/{counted} mutants killed ({killed / counted:.0%})" if counted else ""
        if equivalent:
            mutation += f", {equivalent} equivalent on the recorded inputs (not counted)"
        flaky = (
            f" (FLAKY: passed {self.reference['passed']} of {self.reference['runs']} runs)"
            if self.reference and self.reference.get("flaky")
            else ""
        )
        return (
            f"{self.paper}: reference {'passed' if self.reference_passed else 'FAILED'}{flaky}, "
            f"{self.covered}/{len(self.snippets)} snippets covered{mutation}"
        )


def set_paper_summary(*, paper: SetValidationPaper) -> PaperValidationSummary:
    """A paper's checks read back: which snippets its tests do not cover, and every problem in words."""
    by_key = {c["key"]: c for c in paper.checks}
    snippets, problems = [], []
    for s in paper.snippets:
        masked, noop = by_key.get(f"masked:{s['file']}:{s['index']}"), by_key.get(f"noop:{s['file']}:{s['index']}")
        mutation = by_key.get(f"mutation:{s['file']}:{s['index']}")
        snippets.append(
            {
                "file": s["file"],
                "name": s["name"],
                "checked": masked is not None and noop is not None,
                "masked_fails": bool(masked and masked["status"] == PASSED),
                "noop_fails": bool(noop and noop["status"] == PASSED),
                "mutation": mutation.get("result") if mutation else None,
                "warning": mutation.get("warning", "") if mutation else "",
            }
        )
    names = {f"{s['file']}:{s['index']}": s["name"] for s in paper.snippets}
    for check in paper.checks:
        if check["status"] == PASSED:
            continue
        kind, _, rest = check["key"].partition(":")
        if kind in ("masked", "noop"):
            problems.append(
                f'"{names[rest]}" ({rest.rpartition(":")[0]}) '
                f"{'masked' if kind == 'masked' else 'as a no-op'}: "
                "the tests still pass, they do not cover this snippet"
            )
        else:
            problems.append(f"{kind}: {check['detail'].strip().splitlines()[0] if check['detail'].strip() else ''}")
        if check.get("blocks"):
            problems.append(check["blocks"])
    reference = by_key.get("reference")
    finished = paper.status not in (SetValidation.Status.PENDING, SetValidation.Status.RUNNING)
    return PaperValidationSummary(
        paper=paper.paper,
        status=paper.status,
        total=paper.checks_total,
        done=paper.checks_total if finished else len(paper.checks),
        reference_passed=bool(reference and reference["status"] == PASSED),
        snippets=snippets,
        problems=problems,
        redispatches=paper.redispatches,
        warnings=[c["warning"] for c in paper.checks if c.get("warning")],
        reference=reference.get("result") if reference else None,
    )


def set_validation_summaries(*, validation: SetValidation) -> list[PaperValidationSummary]:
    return [set_paper_summary(paper=p) for p in validation.papers.order_by("position")]


def set_validation_json(*, summaries: list[PaperValidationSummary]) -> dict:
    """The report of `validate_pset --json` (issue 11): per paper, the reference and each snippet's checks."""
    return {
        "papers": {
            s.paper: {
                "reference_passed": s.reference_passed,
                "reference": s.reference,
                "snippets": {
                    n["name"]: {
                        "masked_fails": n["masked_fails"],
                        "noop_fails": n["noop_fails"],
                        **({"mutation": mutation_json(n["mutation"])} if n.get("mutation") else {}),
                    }
                    for n in s.snippets
                },
                "warnings": s.warnings,
            }
            for s in summaries
        }
    }


def mutation_json(result: dict) -> dict:
    """A snippet's mutation score as `validate_pset --json` and the API give it."""
    keys = ("generated", "killed", "survived", "score", "survivors", "timeouts", "equivalent", "equivalents")
    return {
        **{key: result.get(key) for key in keys},
        "killed_by": result.get("killed_by"),  # None: measured before the replay judged mutants
    }


def version_validation_view(*, version) -> dict:
    """The latest validation of a version with its progress and per-paper summaries, for its page."""
    latest = version.validations.select_related("started_by").order_by("-created_at", "-pk").first()
    if latest is None:
        return {"validation": None}
    summaries = set_validation_summaries(validation=latest)
    done, total = sum(s.done for s in summaries), sum(s.total for s in summaries)
    progress = {
        "done": done,
        "total": total,
        "percent": 100 * done / total if total else 0,
        "papers": len(summaries),
        "papers_done": sum(s.status not in ("pending", "running") for s in summaries),
    }
    return {"validation": latest, "summaries": summaries, "progress": progress}


def changes_requested(*, submission: Submission) -> StateChange | None:
    """The maintainer's request for changes the submission is answering now (None in any other state)."""
    if submission.state != Submission.State.CHANGES_REQUESTED:
        return None
    return (
        submission.history.filter(to_state=Submission.State.CHANGES_REQUESTED)
        .select_related("actor")
        .order_by("-created_at", "-pk")
        .first()
    )


@dataclass(frozen=True)
class MatchDecision:
    """What became of a submission that matches another paper: accepted with the maintainer's reason why it is no
    duplicate, rejected or withdrawn with the reason its state change gives."""

    state: str
    label: str
    actor: str
    reason: str
    decided_at: datetime


DECIDED_STATES = (Submission.State.ACCEPTED, Submission.State.REJECTED, Submission.State.WITHDRAWN)


def match_decision(*, submission: Submission) -> MatchDecision | None:
    """The decision on the submission once one is made (None while it is pending): the duplicate-paper advice is
    for a pending decision only."""
    if submission.state not in DECIDED_STATES:
        return None
    change = (
        submission.history.filter(to_state=submission.state).select_related("actor").order_by("-created_at", "-pk")
    ).first()
    reason = change.reason if change else ""
    if submission.state == Submission.State.ACCEPTED and submission.task_id:
        kept = (
            DuplicateAcceptance.objects.filter(task_id=submission.task_id, source=f"submission {submission.pk}")
            .order_by("-created_at", "-pk")
            .first()
        )
        reason = kept.reason if kept else reason  # why it is no duplicate, as the release's changelog keeps it
    return MatchDecision(
        state=submission.state,
        label=Submission.State(submission.state).label,
        actor=change.actor.username if change and change.actor else "",
        reason=reason,
        decided_at=change.created_at if change else submission.updated_at,
    )
