"""Pages for authors (sign up, the submission form in steps, their submissions) and maintainers (queue, review)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.forms import ModelForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, push_url, replace_url, retarget

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.pset import EXAMPLE_SCRIPT_KEY
from benchmarks.permissions import maintainer_required
from benchmarks.selectors import blob_read, user_is_maintainer, version_get
from benchmarks.visibility import HELD_OUT_MATCH, matches_visible
from common.errors import ApplicationError
from common.htmx import HtmxHttpRequest
from common.intake import IntakeError, archive_files, git_files, limits_default
from common.pages import refusal_redirect
from common.ratelimit import rate_limited, rate_limited_response
from submissions import answers, duplicates, forms, proposed, selectors, services, validation
from submissions.models import Submission
from submissions.packages import PAPER_FILES, draft_problems, draft_requirements
from submissions.quotas import QuotaExceeded

STEPS = [("details", "Paper details"), ("paper", "Paper text"), ("code", "Code"), ("files", "Files and tests")]


NAME_HELP = "Optional: an accepted paper's page credits its author by name, else by username."


class SignupForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        fields = ("username", "first_name", "last_name", "email")
        help_texts = {"first_name": NAME_HELP}


class AccountNameForm(ModelForm):
    class Meta:
        model = User
        fields = ("first_name", "last_name")
        help_texts = {"first_name": NAME_HELP}


@login_required
def account_name(request: HttpRequest) -> HttpResponse:
    """The name the site credits a person by (submissions/selectors.user_display_name); sign-up asks for it too."""
    form = AccountNameForm(request.POST or None, instance=request.user)
    if request.method == "POST" and form.is_valid():
        form.save()
        shown = selectors.user_display_name(user=request.user)
        messages.success(request, f"Your name is saved: the site credits you as {shown}.")
        return redirect("account-name")
    return render(request, "registration/account_name.html", {"form": form})


def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    if request.method == "POST" and rate_limited(
        request, action="signup", rate=settings.SIGNUP_RATE, account=request.POST.get("email", "")
    ):
        return rate_limited_response(request, what="sign-ups")
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(
            request,
            "Welcome! Submit a paper here, or, as a model developer, register a model under My models to start "
            "runs or upload results.",
        )
        return redirect("submission-list")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def submission_list(request: HttpRequest) -> HttpResponse:
    return render(request, "submissions/list.html", {"submissions": selectors.submissions_of(user=request.user)})


@login_required
def submission_new(request: HtmxHttpRequest) -> HttpResponse:
    """The form's first step; the submission is created when it is first saved, so an opened form costs nothing."""
    form = forms.MetadataForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        submission = services.submission_create(author=request.user, values=form.draft_values())
        return _step_next(request, submission, "details", created=True)
    return _step_page(request, _step_context(submission=None, step="details", form=form))


def _go(request: HtmxHttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _step_skip(submission: Submission | None, step: str) -> dict | None:
    """The link past `step` and what skipping it leaves, in the author's words; None where the step cannot be
    skipped. Only the paper text's step can: the code of step 3 may bring the text with it (its
    paper2code_paper.tex or .md, or a problem set's), and submitting asks for it whichever step gave it."""
    if submission is None or step != "paper":
        return None
    url = reverse("submission-step", args=[submission.pk, "code"])
    saved = submission.draft.get("paper_path")
    if saved and saved in (submission.draft.get("files") or {}):
        return {"url": url, "words": f"Skip this step and keep the paper text saved before ({saved})."}
    return {
        "url": url,
        "words": f"Skip this step: add the paper text with the code instead, as {' or '.join(PAPER_FILES)} in the "
        "archive or repository of step 3 (the example archive holds one). Without it, the submission cannot be "
        "submitted.",
    }


def _step_context(*, submission: Submission | None, step: str, form) -> dict:
    draft = submission.draft if submission else {}
    return {
        "skip": _step_skip(submission, step),
        "submission": submission,
        "form": form,
        "step": step,
        "steps": STEPS,
        "files": sorted(draft.get("files") or {}),
        "intake": draft.get("intake"),
        "post_url": reverse("submission-step", args=[submission.pk, step]) if submission else reverse("submission-new"),
    }


def _step_page(request: HtmxHttpRequest, context: dict) -> HttpResponse:
    """A step's page; to the form's own htmx request, the step's form alone (a history restore gets the page)."""
    partial = request.htmx and not request.htmx.history_restore_request
    return render(request, "submissions/_step.html" if partial else "submissions/step.html", context)


def _step_next(request: HtmxHttpRequest, submission: Submission, step: str, *, created: bool = False) -> HttpResponse:
    """After `step` is saved: the following step at its own address (the submission's page after the last). To htmx
    the step comes in the same answer with its address for the history, so the address bar, a reload and a shared
    link follow the step (walk 4); the address of the new-paper form is replaced, so going back never offers a
    second copy of the submission just created."""
    names = [name for name, _ in STEPS]
    if step == names[-1]:
        return _go(request, reverse("submission-detail", args=[submission.pk]))
    following = names[names.index(step) + 1]
    url = reverse("submission-step", args=[submission.pk, following])
    if not request.htmx:
        return redirect(url)
    submission.refresh_from_db()  # the draft as the step saved it
    context = _step_context(submission=submission, step=following, form=_step_form(following, submission))
    response = render(request, "submissions/_wizard.html", {**context, "title_swap": True})
    retarget(response, "#wizard")
    response["HX-Reswap"] = "outerHTML show:window:top"  # the new step read from its top
    return replace_url(response, url) if created else push_url(response, url)


def _step_form(step: str, submission: Submission, request: HttpRequest | None = None):
    """The step's form, bound to the request's data when it posts one."""
    draft = submission.draft
    data, uploads = (request.POST, request.FILES) if request is not None and request.method == "POST" else (None, None)
    if step == "details":
        return forms.MetadataForm(data, initial=draft.get("metadata"))
    if step == "paper":
        return forms.PaperForm(data, uploads)
    if step == "code":
        source = draft.get("source") or {}
        return forms.CodeForm(
            data,
            uploads,
            initial={
                "source": source.get("kind", "archive"),
                "git_url": source.get("url", ""),
                "commit": source.get("commit", ""),
            },
        )
    return forms.FilesForm(
        data,
        files=draft.get("files") or {},
        initial={
            "annotated_paths": draft.get("annotated_paths"),
            "context_paths": draft.get("context_paths"),
            "requirements": draft_requirements(draft.get("files") or {}),
            "example_script": (draft.get("metadata") or {}).get(EXAMPLE_SCRIPT_KEY, ""),
        },
    )


def _step_save(step: str, submission: Submission, form, user) -> None:
    """Raises IntakeError or PackageError for code that cannot be taken."""
    data = form.cleaned_data
    if step == "details":
        kept = submission.draft.get("metadata") or {}
        services.draft_update(submission=submission, actor=user, values=form.draft_values(kept))
    elif step == "paper":
        services.draft_paper_save(
            submission=submission, actor=user, paper_path=data["paper_path"], text=data["paper_text"]
        )
    elif step == "code":
        if data["source"] == "git":
            files = git_files(data["git_url"], data["commit"], limits=limits_default())
            source = {"kind": "git", "url": data["git_url"], "commit": data["commit"]}
        else:
            upload = data["archive"]
            files = archive_files(upload, filename=upload.name, limits=limits_default())
            source = {"kind": "archive", "name": upload.name, "size": upload.size}
        services.draft_code_save(submission=submission, actor=user, files=files, source=source)
    else:
        services.draft_files_choose(
            submission=submission,
            actor=user,
            annotated_paths=data["annotated_paths"],
            context_paths=data["context_paths"],
            requirements=data["requirements"],
            example_script=data["example_script"],
        )


@login_required
def submission_step(request: HtmxHttpRequest, pk: int, step: str) -> HttpResponse:
    submission = selectors.submission_get(pk=pk, user=request.user)
    if submission.author_id != request.user.pk:
        raise PermissionDenied("only the author edits a submission")
    if step not in dict(STEPS):
        return redirect("submission-step", pk=pk, step="details")
    if submission.state not in services.EDITABLE:
        messages.info(request, f"This submission is {submission.get_state_display()} and cannot be edited now.")
        return redirect("submission-detail", pk=pk)
    form = _step_form(step, submission, request)
    if request.method == "POST" and form.is_valid():
        try:
            _step_save(step, submission, form, request.user)
        except IntakeError as exc:
            form.add_error("archive" if form.cleaned_data.get("source") == "archive" else "git_url", str(exc))
        except PackageError as exc:
            form.add_error("archive", "The problem set in the archive is not valid:\n" + str(exc))
        except QuotaExceeded as exc:
            form.add_error(None, str(exc))
        else:
            return _step_next(request, submission, step)
    return _step_page(request, _step_context(submission=submission, step=step, form=form))


def _detail_context(submission: Submission, user) -> dict:
    revision = submission.latest_revision
    revisions = list(submission.revisions.order_by("number"))
    return {
        "submission": submission,
        "revision": revision,
        "revisions": revisions,
        "revision_rows": selectors.submission_revision_rows(submission=submission),
        "report": getattr(revision, "report", None) if revision else None,
        "report_rows": selectors.report_check_rows(report=getattr(revision, "report", None) if revision else None),
        "report_superseded": selectors.report_superseded(submission=submission),
        "tree": selectors.revision_snippet_tree(revision=revision) if revision else {},
        "history": submission.history.select_related("actor"),
        "comments": submission.comments.select_related("author"),
        "is_author": user.pk == submission.author_id,
        "is_maintainer": user_is_maintainer(user=user),
        "draft_problems": draft_problems(submission.draft),
        "comment_form": forms.CommentForm(),
        "changes_requested": selectors.changes_requested(submission=submission),
        "intake": submission.draft.get("intake"),
        "releases": selectors.submission_releases(submission=submission),
        **_try_context(revision, author_reads=user.pk == submission.author_id),
    }


def _try_context(revision, form=None, *, author_reads: bool = True) -> dict:
    """The try-an-answer section: its form once the revision's reference passed validation, and its tried answers."""
    if revision is None:
        return {"tried_answers": [], "try_form": None}
    form = form or (
        forms.TryAnswerForm(snippets=selectors.revision_snippet_choices(revision=revision))
        if revision.test_manifest is not None
        else None
    )
    tried = selectors.tried_answers_of(revision=revision)
    return {
        "tried_answers": tried,
        "tried_earlier": selectors.tried_answers_earlier(revision=revision),
        "tried_active": any(t.is_active for t in tried),
        "try_form": form,
        "proposed_tests": proposed.proposed_tests_offers(revision=revision, author_reads=author_reads),
        "tests_proposed_from": proposed.tests_proposed_from(revision=revision),
    }


@login_required
def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = selectors.submission_get(pk=pk, user=request.user)
    context = _detail_context(submission, request.user)
    matches = duplicates.submission_matches(submission=submission)  # not in the polled report
    context["matches"] = matches_visible(matches=matches, user=request.user)
    context["match_decision"] = selectors.match_decision(submission=submission) if matches else None
    return render(request, "submissions/detail.html", context)


@login_required
def submission_revision(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """One revision of a submission, read-only (its author, maintainers): what it held, its note and its report."""
    submission = selectors.submission_get(pk=pk, user=request.user)
    revision = get_object_or_404(submission.revisions.select_related("report"), number=number)
    context = {
        "submission": submission,
        "revision": revision,
        "latest": not submission.revisions.filter(number__gt=number).exists(),
        "report": getattr(revision, "report", None),
        "report_rows": selectors.report_check_rows(report=getattr(revision, "report", None)),
        "revision_page": True,
        "paper_details": forms.metadata_labelled(revision.metadata),
        "tree": selectors.revision_snippet_tree(revision=revision),
    }
    return render(request, "submissions/revision.html", context)


@login_required
def submission_report(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The validation report alone, polled by htmx while validation runs; then the whole page reloads once."""
    submission = selectors.submission_get(pk=pk, user=request.user)
    response = render(request, "submissions/_report.html", _detail_context(submission, request.user))
    if request.htmx and submission.state not in (Submission.State.SUBMITTED, Submission.State.VALIDATING):
        response["HX-Refresh"] = "true"  # the state and the author's actions changed with the verdict
    return response


@refusal_redirect(lambda request, pk, action: reverse("submission-detail", args=[pk]))
@login_required
@require_POST
def submission_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    submission = selectors.submission_get(pk=pk, user=request.user)
    reason = request.POST.get("reason", "").strip()
    if action == "submit":
        services.submission_submit(submission=submission, actor=request.user, note=reason)
        messages.success(request, "Submitted: validation has started.")
        if matches := duplicates.submission_matches(submission=submission):
            messages.warning(request, _matches_message(matches, user=request.user))
    elif action == "withdraw":
        services.submission_withdraw(submission=submission, actor=request.user, reason=reason)
        messages.success(request, "Withdrawn.")
    elif action == "edit":
        services.submission_edit(submission=submission, actor=request.user)
        return redirect("submission-step", pk=pk, step="details")
    elif action == "revise":
        revision = services.submission_revise(submission=submission, actor=request.user)
        messages.success(request, "A new revision of the accepted task: edit it, then submit it for validation.")
        return redirect("submission-step", pk=revision.pk, step="details")
    else:
        raise PermissionDenied(f"unknown action {action}")
    return redirect("submission-detail", pk=pk)


def _matches_message(matches: list, *, user) -> str:
    shown = matches_visible(matches=matches, user=user)
    named = [str(m) for m in shown if m.vague != HELD_OUT_MATCH]
    return (
        (f"This paper matches {'; '.join(named)}. " if named else "")
        + ("A maintainer will look at a possible match. " if len(named) < len(shown) else "")
        + "A maintainer accepts it only with a reason why it is not a duplicate: say in a comment how it differs."
    )


@login_required
@require_POST
def comment_create(request: HttpRequest, pk: int) -> HttpResponse:
    submission = selectors.submission_get(pk=pk, user=request.user)
    form = forms.CommentForm(request.POST)
    if form.is_valid():
        file, _, name = form.cleaned_data["snippet"].partition("::")
        services.comment_add(
            submission=submission,
            actor=request.user,
            body=form.cleaned_data["body"],
            snippet_file=file,
            snippet_name=name,
        )
    else:
        messages.error(request, "A comment cannot be empty.")
    target = (
        "review-detail"
        if user_is_maintainer(user=request.user) and request.user.pk != submission.author_id
        else "submission-detail"
    )
    return redirect(target, pk=pk)


@login_required
@require_POST
def answer_try(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Try an alternative body for a snippet of the submission's latest revision (its author or a maintainer). Posted
    with htmx, the answer is the tried answers' list, which polls itself until the verdict is in; else a redirect."""
    submission = get_object_or_404(Submission, pk=pk)
    answers.answer_tryer_check(submission=submission, user=request.user)
    back = (
        "review-detail"
        if user_is_maintainer(user=request.user) and request.user.pk != submission.author_id
        else "submission-detail"
    )
    revision = submission.latest_revision
    if revision is None:
        messages.error(request, "Nothing to try answers on: this submission has no revision yet.")
        return redirect(back, pk=pk)
    form = forms.TryAnswerForm(request.POST, snippets=selectors.revision_snippet_choices(revision=revision))
    refused = ""
    if not form.is_valid():
        refused = "Not tried: " + "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
    else:
        file, index = form.target()
        try:
            tried = answers.answer_try(
                revision=revision,
                actor=request.user,
                snippet_file=file,
                snippet_index=index,
                code=form.cleaned_data["code"],
                note=form.cleaned_data["note"],
            )
        except ApplicationError as exc:
            refused = f"Not tried: {exc}"
    said = refused or f'Trying your answer for "{tried.snippet_name}": its verdict appears below. {tried.placed}'
    said = said.strip()
    if request.htmx:
        context = {"submission": submission, **_try_context(revision), "try_said": said, "try_refused": bool(refused)}
        return render(request, "submissions/_tried_list.html", context)
    (messages.error if refused else messages.success)(request, said)
    return redirect(f"{reverse(back, args=[pk])}#tried-answers")


@login_required
def tried_answers(request: HttpRequest, pk: int) -> HttpResponse:
    """The latest revision's tried answers alone, polled by htmx while one is being judged (its author, maintainers)."""
    submission = get_object_or_404(Submission, pk=pk)
    answers.answer_tryer_check(submission=submission, user=request.user)
    revision = submission.latest_revision
    return render(request, "submissions/_tried_list.html", {"submission": submission, **_try_context(revision)})


@login_required
def proposed_tests(request: HttpRequest, pk: int) -> HttpResponse:
    """Its latest revision's proposed replay tests, a zip (submissions/proposed.py): for its author and maintainers."""
    submission = selectors.submission_get(pk=pk, user=request.user)
    revision = submission.latest_revision
    if revision is None:
        raise Http404("this submission has no revision yet")
    source = request.GET.get("from", "tests")
    offer = next((o for o in proposed.proposed_tests_offers(revision=revision) if o.source == source), None)
    if offer is None:
        raise Http404(f"this revision offers no proposed tests from {source!r}")
    response = HttpResponse(
        proposed.proposed_tests_archive(revision=revision, source=source), content_type="application/zip"
    )
    response["Content-Disposition"] = f'attachment; filename="{offer.filename}"'
    return response


@maintainer_required
def review_queue(request: HtmxHttpRequest) -> HttpResponse:
    state = request.GET.get("state") or None
    older = request.GET.get("older_than_days")
    queue = selectors.review_queue(state=state, older_than_days=int(older) if older and older.isdigit() else None)
    context = {"queue": queue, "states": Submission.State.choices, "state": state, "older": older or ""}
    template = "submissions/_queue_table.html" if request.htmx else "submissions/queue.html"
    return render(request, template, context)


@maintainer_required
def review_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = selectors.submission_get(pk=pk, user=request.user)
    existing = services.release_paper_existing(submission=submission)
    matches = duplicates.submission_matches(submission=submission)
    form = forms.DecisionForm(request.POST or None, existing=existing, matches=matches)
    if request.method == "POST" and form.is_valid():
        decision = form.cleaned_data["decision"]
        decisions: dict[str, Callable[..., object]] = {
            "accept": services.submission_accept,
            "reject": services.submission_reject,
            "request_changes": services.submission_request_changes,
        }
        decide = decisions[decision]
        extra = (
            {
                "replace_confirmed": form.cleaned_data.get("replace_confirmed", False),
                "duplicate_reason": form.cleaned_data.get("duplicate_reason", ""),
            }
            if decision == "accept"
            else {}
        )
        try:
            decide(submission=submission, actor=request.user, reason=form.cleaned_data["reason"], **extra)
        except services.TransitionError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Decision recorded: {form.cleaned_data['decision'].replace('_', ' ')}.")
            return redirect("review-detail", pk=pk)
    context = _detail_context(submission, request.user)
    revision = context["revision"]
    compared = selectors.revision_compared_with(submission=submission, revision=revision) if revision else None
    base = compared.revision if compared else None
    context.update(
        form=form,
        existing=existing,
        matches=matches,
        match_decision=selectors.match_decision(submission=submission) if matches else None,
        can_decide=submission.state == Submission.State.AWAITING_REVIEW and submission.author_id != request.user.pk,
        paper_details=forms.metadata_labelled(context["revision"].metadata) if context["revision"] else [],
        diff=selectors.revision_diff(old=base, new=revision) if base else [],
        previous_revision=base,
        compared_said=compared.said if compared else "",
        metadata_diff=selectors.revision_metadata_diff(old=base, new=revision) if base else [],
        paper_text=blob_read(sha256=context["revision"].files[context["revision"].paper_path]).decode(
            "utf-8", "replace"
        )[:3000]
        if context["revision"]
        else "",
    )
    return render(request, "submissions/review.html", context)


def paper_submitted_by(*, version, user, task) -> dict:
    """A paper page's credit to the person who submitted it (registered with benchmarks.pages)."""
    author = selectors.task_submitted_by(task=task)
    if author is None:
        return {}
    return {"submitted_by": selectors.user_display_name(user=author), "submitted_by_you": author.pk == user.pk}


def version_validation_section(*, version, user) -> dict:
    """A draft release's validation section for maintainers (registered with benchmarks.pages)."""
    if version.is_frozen or not user_is_maintainer(user=user):
        return {}
    return selectors.version_validation_view(version=version)


@refusal_redirect(lambda request, name: reverse("version-detail", args=[name]))
@require_POST
@maintainer_required
def version_validate(request: HttpRequest, name: str) -> HttpResponse:
    """Start the checks of every paper of a draft version on the workers."""
    version = version_get(name=name, user=request.user)
    started = validation.version_validation_start(version=version, actor=request.user)
    messages.success(request, f"Validating {started.papers.count()} paper(s) of {version.name} on the workers.")
    return redirect("version-detail", name=version.name)


@maintainer_required
def version_validation(request: HttpRequest, name: str) -> HttpResponse:
    """The validation section of a draft version's page, polled while it runs."""
    version = version_get(name=name, user=request.user)
    return render(
        request,
        "submissions/_set_validation.html",
        {"version": version, **selectors.version_validation_view(version=version)},
    )
