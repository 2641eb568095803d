"""Functions that change submissions: the state machine of DESIGN.md, each transition checked and audited."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from benchmarks.duplicates import duplicate_acceptance_record, matches_text
from benchmarks.models import BenchmarkVersion, Task, VersionTask, package_fields_json
from benchmarks.paper2code.pset import EXAMPLE_SCRIPT_KEY, requirements_file
from benchmarks.paper2code.requirements import requirements_text
from benchmarks.selectors import package_load, tasks_as_released, user_is_maintainer
from benchmarks.services.blobs import blob_store
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.task_storage import package_store, snippet_mutations_record, task_store
from common.links import site_link
from operations.enqueue import enqueue
from operations.events import Kind, event_record
from submissions.duplicates import revision_fingerprint, submission_matches
from submissions.errors import TransitionError
from submissions.models import (
    DRAFT_SUBMITTED_AS,
    Comment,
    Revision,
    StateChange,
    Submission,
    ValidationCheck,
    ValidationReport,
)
from submissions.quotas import environments_check, stored_bytes_check
from submissions.selectors import release_named, report_mutations, submission_releases

logger = logging.getLogger(__name__)
State = Submission.State

# (from, to) -> who may make it: the submission's author, a maintainer (never on their own submission), or the system.
TRANSITIONS: dict[tuple[str, str], str] = {
    (State.DRAFT, State.SUBMITTED): "author",
    (State.SUBMITTED, State.VALIDATING): "system",
    (State.VALIDATING, State.INVALID): "system",
    (State.VALIDATING, State.AWAITING_REVIEW): "system",
    (State.INVALID, State.DRAFT): "author",
    (State.AWAITING_REVIEW, State.DRAFT): "author",  # the author revises it before review: validated again
    (State.AWAITING_REVIEW, State.CHANGES_REQUESTED): "maintainer",
    (State.AWAITING_REVIEW, State.ACCEPTED): "maintainer",
    (State.AWAITING_REVIEW, State.REJECTED): "maintainer",
    (State.CHANGES_REQUESTED, State.VALIDATING): "author",
    **{
        (s, State.WITHDRAWN): "author"
        for s in (
            State.DRAFT,
            State.SUBMITTED,
            State.VALIDATING,
            State.INVALID,
            State.AWAITING_REVIEW,
            State.CHANGES_REQUESTED,
        )
    },
}
EDITABLE = (State.DRAFT, State.CHANGES_REQUESTED)


def _may(actor: AbstractBaseUser | None, role: str, submission: Submission) -> bool:
    if role == "system":
        return actor is None
    if actor is None or not actor.is_authenticated:
        return False
    if role == "author":
        return actor.pk == submission.author_id
    return user_is_maintainer(user=actor) and actor.pk != submission.author_id


def _transition(submission: Submission, to: str, *, actor, reason: str = "", notify: bool = True) -> Submission:
    """Move to `to` if the state machine and the actor's role allow it; record it and tell the author (unless
    `notify` is False: a state the submission leaves in the same transaction, which one mail of the next tells)."""
    submission = Submission.objects.select_for_update().get(pk=submission.pk)
    role = TRANSITIONS.get((submission.state, to))
    if role is None:
        raise TransitionError(
            f"a submission that is {submission.get_state_display()} cannot become {Submission.State(to).label}"
        )
    if not _may(actor, role, submission):
        raise PermissionDenied(
            f"only the {role} may move a submission from {submission.state} to {to}"
            + (" (authors never review their own submissions)" if role == "maintainer" else "")
        )
    StateChange.objects.create(
        submission=submission, from_state=submission.state, to_state=to, actor=actor, reason=reason
    )
    submission.state = to
    submission.save(update_fields=["state", "updated_at"])
    if notify:
        transaction.on_commit(lambda: _notify(submission.pk, to, reason))
    return submission


def _notify(submission_id: int, state: str, reason: str) -> None:
    submission = Submission.objects.select_related("author").get(pk=submission_id)
    if not submission.author.email:
        return
    label = Submission.State(state).label
    said = (
        "submitted: its validation has started, and you get a mail when it ends"
        if state == State.VALIDATING
        else f"now {label}"
    )
    releases = submission_releases(submission=submission) if state == State.ACCEPTED else []
    body = (
        f'Your submission "{submission}" is {said}.'
        + "".join(f"\n\nIts task is in {release_named(release)}." for release in releases)
        + (f"\n\nReason: {reason}" if reason else "")
        + f"\n\nSee it at {site_link('submission-detail', submission.pk)}"
    )
    send_mail(
        f"[research-code benchmark] {submission}: {label}",
        body,
        settings.DEFAULT_FROM_EMAIL,
        [submission.author.email],
        fail_silently=True,
    )


def _require_author(submission: Submission, actor) -> None:
    if not actor.is_authenticated or actor.pk != submission.author_id:
        raise PermissionDenied("only the submission's author may do this")


@transaction.atomic
def submission_create(*, author, values: dict | None = None) -> Submission:
    """A new submission; the form makes it on its first save (`values`: that step's draft values), so that opening
    the form leaves nothing behind."""
    if not author.is_authenticated:
        raise PermissionDenied("sign in to submit a paper")
    values = values or {}
    return Submission.objects.create(author=author, draft=values, title=values.get("metadata", {}).get("title", ""))


@transaction.atomic
def drafts_abandoned_remove(*, older_than: timedelta) -> int:
    """Delete drafts that were never submitted and hold no files, untouched for `older_than`; how many."""
    abandoned = Submission.objects.filter(
        state=State.DRAFT, revisions__isnull=True, updated_at__lt=timezone.now() - older_than
    )
    ids = [pk for pk, draft in abandoned.values_list("pk", "draft") if not (draft or {}).get("files")]
    Submission.objects.filter(pk__in=ids).delete()
    return len(ids)


@transaction.atomic
def draft_update(*, submission: Submission, actor, values: dict) -> Submission:
    """Keep what the author typed in one step of the form (state draft or changes requested)."""
    _require_author(submission, actor)
    submission = Submission.objects.select_for_update().get(pk=submission.pk)
    if submission.state not in EDITABLE:
        raise TransitionError(f"a submission that is {submission.get_state_display()} cannot be edited")
    edited = {**submission.draft, **values}
    if edited != submission.draft:  # a change since the revision it was submitted as (`report_superseded`)
        edited.pop(DRAFT_SUBMITTED_AS, None)
    submission.draft = edited
    submission.title = submission.draft.get("metadata", {}).get("title", submission.title)
    submission.save(update_fields=["draft", "title", "updated_at"])
    return submission


def draft_files_store(files: dict[str, bytes]) -> dict[str, str]:
    """Store uploaded or cloned files by content hash; path -> sha256 for the draft."""
    return {path: blob_store(content=data).sha256 for path, data in sorted(files.items())}


def _revision_create(submission: Submission, *, note: str = "") -> Revision:
    from submissions.packages import draft_problems, draft_requirements

    problems = draft_problems(submission.draft)
    if problems:
        raise TransitionError("the submission is incomplete: " + "; ".join(problems))
    draft = submission.draft
    requirements = draft_requirements(draft["files"])
    environments_check(submission=submission, requirements=requirements)
    number = (submission.revisions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    revision = Revision.objects.create(
        **{**package_fields_json(draft), "requirements": requirements},  # kept in the draft's requirements file
        submission=submission,
        number=number,
        metadata=draft["metadata"],
        source=draft.get("source", {}),
        note=note,
    )
    ValidationReport.objects.create(revision=revision)
    submission.draft = {**draft, DRAFT_SUBMITTED_AS: number}  # the draft is this revision until it is edited
    submission.save(update_fields=["draft"])
    try:  # made once, while its files are fresh: every match check reads it; a failure never loses the submission
        with transaction.atomic():
            revision_fingerprint(revision=revision)
    except Exception:  # noqa: BLE001 - the match check makes it again, and says so if it fails there
        logger.exception("fingerprint of submission %s r%s failed", submission.pk, revision.number)
    return revision


@transaction.atomic
def submission_submit(*, submission: Submission, actor, note: str = "") -> Revision:
    """Freeze the draft as a new revision and start its validation (also the answer to requested changes)."""
    submission = Submission.objects.select_for_update().get(pk=submission.pk)
    _require_author(submission, actor)
    if submission.state == State.DRAFT:
        _transition(submission, State.SUBMITTED, actor=actor, notify=False)  # one mail per submit: validating's
        revision = _revision_create(submission, note=note)
        _transition(submission, State.VALIDATING, actor=None)
    elif submission.state == State.CHANGES_REQUESTED:
        revision = _revision_create(submission, note=note)
        _transition(submission, State.VALIDATING, actor=actor, reason=note)
    else:
        raise TransitionError(f"a submission that is {submission.get_state_display()} cannot be submitted")
    report_id = revision.report.pk
    transaction.on_commit(lambda: _validation_start(report_id))
    return revision


def _validation_start(report_id: int) -> None:
    # The broker is down: the watchdog queues it once it answers.
    enqueue(
        "submissions.tasks.revision_validate",  # by name: the tasks module imports this one
        report_id,
        subject=ValidationReport(pk=report_id),
        refused=lambda exc: (
            f"validation report {report_id} could not be queued ({exc}); the watchdog queues it once the broker answers"
        ),
    )


def validations_unfinished() -> list[ValidationReport]:
    """Reports of the revisions that submissions now validating wait for, not yet finished."""
    reports = (
        ValidationReport.objects.filter(
            status__in=[ValidationReport.Status.PENDING, ValidationReport.Status.RUNNING],
            revision__submission__state=State.VALIDATING,
        )
        .select_related("revision__submission")
        .order_by("revision__submission", "-revision__number")
    )
    latest: dict[int, ValidationReport] = {}
    for report in reports:
        latest.setdefault(report.revision.submission_id, report)
    return list(latest.values())


def validation_requeue(report: ValidationReport, *, idle_seconds: float, worker: str = "") -> int:
    """Queue a validation again whose task was lost (no worker holds it, none waits), once the watchdog claimed it."""
    event_record(
        kind=Kind.VALIDATION_REDISPATCHED,
        subject=report,
        worker=worker,
        detail=f"validation of {report.revision.submission} (revision {report.revision.number}) was "
        f"{report.get_status_display().lower()} with no queued or running task; it was queued again",
    )
    _validation_start(report.pk)
    return 1


def validation_give_up(*, report: ValidationReport, worker: str = "") -> bool:
    """End a validation the workers lost more than VALIDATION_REDISPATCH_MAX times: its unfinished checks become
    errors of the platform and the submission becomes invalid, so its author can edit and submit it again."""
    Status = ValidationReport.Status
    lost = (
        f"the workers lost this validation {report.redispatches + 1} time(s) (a broker or "
        "worker failure); nothing is known about the submission: edit it and submit it again"
    )
    with transaction.atomic():
        if not ValidationReport.objects.filter(pk=report.pk, status__in=[Status.PENDING, Status.RUNNING]).update(
            status=Status.ERROR, finished_at=timezone.now()
        ):
            return False  # it finished meanwhile, or another watchdog gave it up
        if not report.checks.filter(status__in=[Status.PENDING, Status.RUNNING]).update(
            status=Status.ERROR, detail=lost
        ):
            ValidationCheck.objects.create(
                report=report,
                position=report.checks.count(),
                key="infrastructure",
                label="The workers ran the validation",
                status=Status.ERROR,
                detail=lost,
            )
        report.refresh_from_db()
        event_record(
            kind=Kind.VALIDATION_ABANDONED,
            subject=report,
            worker=worker,
            detail=f"validation of {report.revision.submission} (revision {report.revision.number}): {lost}",
        )
        validation_finish(report=report)
    return True


@transaction.atomic
def validation_finish(*, report: ValidationReport) -> Submission:
    """Move the submission on by its report: awaiting review when every check passed, else invalid."""
    submission = report.revision.submission
    passed = report.status == ValidationReport.Status.PASSED
    reason = "every check passed" if passed else failed_checks_said(report)
    return _transition(submission, State.AWAITING_REVIEW if passed else State.INVALID, actor=None, reason=reason)


# A Python exception's last line ("ModuleNotFoundError: No module named 'scipy'"), the reason a run failed.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")


def check_reason(detail: str) -> str:
    """A failed check's reason in one line: the last exception line of its output, else its first line."""
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    raised = [line for line in lines if EXCEPTION_LINE.match(line)]
    said = raised[-1] if raised else (lines[0] if lines else "")
    return said if len(said) <= 300 else said[:299] + "…"


def failed_checks_said(report: ValidationReport) -> str:
    """Why a validation failed, for the history and the author's mail (walk 38): the checks that failed, the first
    with its reason, never the ones skipped because of it (they are counted)."""
    Status = ValidationReport.Status
    checks = list(report.checks.all())
    failed = [c for c in checks if c.status in (Status.FAILED, Status.ERROR)]
    skipped = sum(c.status == Status.SKIPPED for c in checks)
    if not failed:
        return "validation did not pass" + (
            f"; {skipped} check{'s' if skipped != 1 else ''} not run" if skipped else ""
        )
    first, *others = failed
    reason = check_reason(first.detail)
    said = f"failed check{'s' if others else ''}: {first.label}" + (f" ({reason})" if reason else "")
    said += "".join(f"; {c.label}" for c in others[:9]) + (f"; and {len(others) - 9} more" if len(others) > 9 else "")
    if skipped:
        said += f"; {skipped} check{'s' if skipped != 1 else ''} not run until {'they pass' if others else 'it passes'}"
    return said


@transaction.atomic
def submission_edit(*, submission: Submission, actor) -> Submission:
    """Back to draft after a failed validation, or to revise it while it awaits review, keeping everything the author
    entered; submitting it again makes a new revision and validates it."""
    return _transition(submission, State.DRAFT, actor=actor)


OPEN_STATES = (
    State.DRAFT,
    State.SUBMITTED,
    State.VALIDATING,
    State.INVALID,
    State.AWAITING_REVIEW,
    State.CHANGES_REQUESTED,
)


@transaction.atomic
def submission_revise(*, submission: Submission, actor) -> Submission:
    """A new submission proposing a new revision of an accepted task, its draft filled with the accepted revision:
    the author edits it, it is validated and reviewed like any submission, and accepting it puts the new task
    revision into the current draft release (whose changelog names it at publish). The accepted one stays as it is."""
    submission = Submission.objects.select_for_update().get(pk=submission.pk)
    _require_author(submission, actor)
    if submission.state != State.ACCEPTED:
        raise TransitionError(
            f"only an accepted submission has a task to revise; this one is {submission.get_state_display()}"
            + (": edit it instead" if submission.state in (State.AWAITING_REVIEW, State.INVALID) else "")
        )
    pending = submission.revisions_proposed.filter(state__in=OPEN_STATES).first()
    if pending is not None:
        raise TransitionError(f"a revision of this task is already open: submission {pending.pk} ({pending})")
    revision = submission.latest_revision
    if revision is None:  # an accepted submission has its revisions: none is a broken row
        raise TransitionError(f"submission {submission.pk} has no revision to revise")
    fields = revision.package_fields()
    del fields["requirements"]  # a draft keeps them in its requirements file only
    draft = {**fields, "metadata": dict(revision.metadata), "source": dict(revision.source)}
    return Submission.objects.create(author=actor, draft=draft, title=submission.title, revises=submission)


@transaction.atomic
def submission_withdraw(*, submission: Submission, actor, reason: str = "") -> Submission:
    return _transition(submission, State.WITHDRAWN, actor=actor, reason=reason)


@transaction.atomic
def submission_request_changes(*, submission: Submission, actor, reason: str) -> Submission:
    _reason_required(reason)
    submission = _transition(submission, State.CHANGES_REQUESTED, actor=actor, reason=reason)
    Comment.objects.create(submission=submission, revision=submission.latest_revision, author=actor, body=reason)
    return submission


@transaction.atomic
def submission_reject(*, submission: Submission, actor, reason: str) -> Submission:
    _reason_required(reason)
    return _transition(submission, State.REJECTED, actor=actor, reason=reason)


def release_paper_existing(*, submission: Submission) -> tuple[BenchmarkVersion, Task] | None:
    """The task of the same paper id as the submission's latest revision that accepting it would replace: the
    current draft's, else the latest release's holding that id (a new draft starts from it, docs/SUBMITTING.md 8);
    None when the paper id is in no release."""
    revision = submission.latest_revision
    if revision is None:
        return None
    memberships = VersionTask.objects.filter(task__paper__slug=revision.metadata.get("id")).select_related(
        "version", "task__paper"
    )
    draft = BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.DRAFT).order_by("-created_at").first()
    # the draft's task, when there is one, is the one replaced; otherwise the newest release that holds the paper
    membership = (memberships.filter(version=draft).first() if draft else None) or memberships.exclude(
        version__status=BenchmarkVersion.Status.DRAFT
    ).order_by("-version__published_at").first()
    if membership is None or _revises_paper(submission, membership.task):
        return None  # a proposed revision of this very paper replaces its earlier revision by design
    tasks_as_released(version=membership.version, tasks=[membership.task])
    return membership.version, membership.task


@transaction.atomic
def submission_accept(
    *, submission: Submission, actor, reason: str, replace_confirmed: bool = False, duplicate_reason: str = ""
) -> Task:
    """Turn the last validated revision into a Task and add it to the current draft benchmark version; when a
    release (draft or published) holds the paper id and the submission is no proposed revision of it, only with the
    maintainer's explicit confirmation that it is replaced; when it matches another paper (submissions/duplicates.py),
    only with `duplicate_reason`, which the changelog keeps."""
    _reason_required(reason)
    existing = release_paper_existing(submission=submission)
    if existing and not replace_confirmed:
        version, task = existing
        where = "draft" if version.status == BenchmarkVersion.Status.DRAFT else "release"
        raise TransitionError(
            f"paper id {task.paper.slug} is already in {where} {version.name} (task revision "
            f'{task.revision}, "{task.paper.title}"); accepting replaces it: confirm the '
            "replacement to accept"
        )
    matches = submission_matches(submission=submission)
    if matches and not duplicate_reason.strip():
        raise TransitionError(
            f"submission {submission.pk} matches {matches_text(matches)}. Accept it only with a reason why it is "
            "not a duplicate (the release's changelog keeps it), or reject it"
        )
    submission = _transition(submission, State.ACCEPTED, actor=actor, reason=reason)
    revision = submission.latest_revision
    if revision is None:  # a submission is made with its first revision: none is a broken row
        raise TransitionError(f"submission {submission.pk} has no revision to accept")
    task, _ = task_store(
        package=package_load(revision), test_manifest=revision.test_manifest, recording=revision.recording
    )
    snippet_mutations_record(task=task, mutations=report_mutations(report=revision.report))
    draft = draft_version_current()
    version_task_set(version=draft, task=task, replaced_by=_replacer(submission, existing[1]) if existing else "")
    if matches:
        duplicate_acceptance_record(
            version=draft,
            task=task,
            matches=matches,
            reason=duplicate_reason,
            actor=actor,
            source=f"submission {submission.pk}",
        )
    submission.task = task
    submission.save(update_fields=["task", "updated_at"])
    return task


def _replacer(submission: Submission, replaced: Task) -> str:
    """How the changelog names a submission that replaced `replaced`, a task of its paper id it is no revision of."""
    theirs = Submission.objects.filter(task=replaced).values_list("author_id", flat=True).first()
    whose = "its author's, not as a revision" if theirs == submission.author_id else "another author"
    return f"submission {submission.pk} ({whose})"


def _revises_paper(submission: Submission, task: Task) -> bool:
    """Whether `submission` proposes a new revision of the accepted task of `task`'s paper."""
    revised = submission.revises.task if submission.revises_id and submission.revises else None
    return revised is not None and revised.paper_id == task.paper_id


def draft_version_current() -> BenchmarkVersion:
    """The newest draft version; when there is none, the next minor release after the latest one, as a draft."""
    version = BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.DRAFT).order_by("-created_at").first()
    if version:
        return version
    latest = BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT).order_by("-published_at").first()
    name = next_minor(latest.name) if latest else "0.1.0"
    while BenchmarkVersion.objects.filter(name=name).exists():
        name = next_minor(name)
    return version_draft_create(name=name)  # notes are the publisher's words, never a placeholder


def next_minor(name: str) -> str:
    """demo-1.2.3 -> demo-1.3.0."""
    prefix, _, number = name.rpartition("-") if "-" in name else ("", "", name)
    major, minor, _ = (int(x) for x in number.split("."))
    return f"{prefix + '-' if prefix else ''}{major}.{minor + 1}.0"


def _reason_required(reason: str) -> None:
    if not reason.strip():
        raise TransitionError("a decision needs a reason for the author")


@transaction.atomic
def comment_add(
    *,
    submission: Submission,
    actor,
    body: str,
    snippet_file: str = "",
    snippet_name: str = "",
) -> Comment:
    if not (actor.is_authenticated and (actor.pk == submission.author_id or user_is_maintainer(user=actor))):
        raise PermissionDenied("only the author and maintainers may comment")
    if not body.strip():
        raise TransitionError("a comment cannot be empty")
    return Comment.objects.create(
        submission=submission,
        revision=submission.latest_revision,
        author=actor,
        body=body.strip(),
        snippet_file=snippet_file,
        snippet_name=snippet_name,
    )


@transaction.atomic
def draft_paper_save(*, submission: Submission, actor, paper_path: str, text: str) -> Submission:
    """Put the paper's text into the draft as paper2code_paper.tex or .md (replacing any earlier one)."""
    from submissions.packages import PAPER_FILES

    files = {p: h for p, h in (submission.draft.get("files") or {}).items() if p not in PAPER_FILES}
    paper = {paper_path: text.encode("utf-8")}
    stored_bytes_check(submission=submission, new=paper, kept=files.values())
    files.update(draft_files_store(paper))
    return draft_update(submission=submission, actor=actor, values={"files": files, "paper_path": paper_path})


def _files_of(fields: dict[str, object]) -> dict[str, str]:
    files = fields["files"]
    return dict(files) if isinstance(files, dict) else {}


@transaction.atomic
def draft_code_save(*, submission: Submission, actor, files: dict[str, bytes], source: dict) -> Submission:
    """Replace the draft's code by these files (keeping the paper); a whole problem set fills every step, its paper
    details replacing those typed in step 1."""
    from submissions.packages import (
        PAPER_FILES,
        draft_metadata,
        intake_summary,
        metadata_archive_first,
        pset_archive_package,
    )

    whole = pset_archive_package(files)
    summary = intake_summary(files=files, source=source, draft=submission.draft, whole=whole)
    if whole is not None:
        # The archive's papers.yaml fills step 1, over what was typed there (the summary says what it replaced).
        metadata, _ = metadata_archive_first(
            typed=submission.draft.get("metadata") or {}, archive=draft_metadata(whole)
        )
        stored_bytes_check(submission=submission, new=dict(whole.files), kept=())
        fields = package_store(package=whole)
        del fields["requirements"]  # a draft keeps them in its requirements file only, the one place they are edited
        earlier = submission.draft.get("files") or {}
        if requirements_file(whole.files) is None and (typed := requirements_file(earlier)):
            fields["files"] = {**_files_of(fields), typed: earlier[typed]}  # kept, as below
        return draft_update(
            submission=submission,
            actor=actor,
            values={**fields, "metadata": metadata, "source": source, "intake": summary},
        )
    earlier = submission.draft.get("files") or {}
    kept = {p: h for p, h in earlier.items() if p in PAPER_FILES}
    # The requirements typed in step 4 stay when the new code brings no requirements file (walk 38): revising keeps
    # everything; a file of the new code wins (the intake summary says what it replaced).
    if requirements_file(files) is None and (typed := requirements_file(earlier)):
        kept[typed] = earlier[typed]
    stored_bytes_check(submission=submission, new=files, kept=kept.values())
    stored = {**draft_files_store(files), **kept}
    chosen = {
        key: [p for p in submission.draft.get(key) or [] if p in stored] for key in ("annotated_paths", "context_paths")
    }
    values = {"files": stored, "source": source, "intake": summary, **chosen}
    if not chosen["annotated_paths"]:  # preselect what holds markers; the files step shows it and why
        values["annotated_paths"] = [m["path"] for m in summary["markers"] if m["snippets"]]
    if submission.draft.get("paper_path") not in kept:
        values["paper_path"] = next((p for p in PAPER_FILES if p in stored), submission.draft.get("paper_path"))
    return draft_update(submission=submission, actor=actor, values=values)


@transaction.atomic
def draft_files_choose(
    *,
    submission: Submission,
    actor,
    annotated_paths: list[str],
    context_paths: list[str],
    requirements: str,
    example_script: str = "",
) -> Submission:
    """The annotated and context files picked from the tree, the requirements, kept as the requirements file, and the
    example script, kept in the paper's details as its papers.yaml key (none: the key is dropped)."""
    from submissions.packages import REQUIREMENTS_FILE, draft_requirements

    metadata = {k: v for k, v in (submission.draft.get("metadata") or {}).items() if k != EXAMPLE_SCRIPT_KEY}
    if example_script:
        metadata[EXAMPLE_SCRIPT_KEY] = example_script

    files = dict(submission.draft.get("files") or {})
    name = requirements_file(files) or REQUIREMENTS_FILE
    text = requirements_text(requirements)
    kept = requirements_text(draft_requirements(files)) if name in files else ""
    # The form's text of an untouched file differs from its bytes (line ends, last newline): keep its bytes.
    if (text or name in files) and text != kept:
        new = {name: text.encode("utf-8")}
        stored_bytes_check(submission=submission, new=new, kept=[h for p, h in files.items() if p not in new])
        files.update(draft_files_store(new))
    return draft_update(
        submission=submission,
        actor=actor,
        values={
            "annotated_paths": annotated_paths,
            "context_paths": context_paths,
            "files": files,
            "metadata": metadata,
        },
    )
