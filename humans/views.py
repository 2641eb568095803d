"""Pages of the human baseline: a release's Humans page (the row, score against time, listed people, the
maintainers' review), opening an attempt (an item or a random one), the attempt page (the item's prompt, the editor,
the clock, then the verdict) and its pause, resume, abandon and exclusion. Every form is a plain POST that redirects
(works without JavaScript); the page's script adds the editor, the ticking clock and the paste and keystroke counts."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion
from benchmarks.selectors import user_is_maintainer, version_get, version_task_for_paper
from common.pages import refusal_redirect
from evaluation.models import Outcome
from humans import selectors, services
from humans.models import Attempt
from humans.prompts import attempt_prompt


def _humans_page(request: HttpRequest, name: str, **_: object) -> str:
    return reverse("release-humans", args=[name])


def _attempt_page(request: HttpRequest, pk: int, **_: object) -> str:
    return reverse("attempt-detail", args=[pk])


def release_humans(request: HttpRequest, name: str) -> HttpResponse:
    version = version_get(name=name, user=request.user)
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise Http404("Drafts have no results.")
    curve, curve_total = selectors.time_curve(version=version)
    maintainer = user_is_maintainer(user=request.user)
    context = {
        "version": version,
        "humans": selectors.humans_row(version=version),
        "curve": curve,
        "curve_total": curve_total,
        "people": selectors.people_listed(version=version),
        "mine": selectors.attempts_of(user=request.user) if request.user.is_authenticated else [],
        "listed": selectors.user_listed(user=request.user),
        "review": selectors.attempts_for_review(version=version) if maintainer else None,
    }
    return render(request, "humans/release_humans.html", context)


@refusal_redirect(_humans_page)
@require_POST
@login_required
def attempt_open(request: HttpRequest, name: str) -> HttpResponse:
    """Open an attempt at the item posted (`item`), or at a random item the person has not attempted."""
    version = version_get(name=name, user=request.user)
    item = request.POST.get("item", "").strip()
    if item and not item.isdigit():
        raise services.AttemptNotFound(f"release {version.name} has no public item {item!r}")
    attempt = services.attempt_open(
        user=request.user,
        version=version,
        snippet_id=int(item) if item else None,
        with_paper=request.POST.get("without_paper") != "on",
    )
    return redirect("attempt-detail", pk=attempt.pk)


@refusal_redirect(_attempt_page)
@login_required
def attempt_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The attempt: while live, the item's prompt and the editor (a POST submits the body); after, the verdict."""
    attempt = selectors.attempt_get(pk=pk, user=request.user)
    if attempt is None:
        raise Http404("No such attempt of yours.")
    context: dict = {"attempt": attempt, "is_maintainer": user_is_maintainer(user=request.user)}
    status = 200
    if request.method == "POST":
        body = request.POST.get("body", "")
        try:
            services.attempt_submit(
                attempt=attempt,
                user=request.user,
                body=body,
                keystrokes=_whole(request.POST.get("keystrokes")),
                pastes=_json_list(request.POST.get("pastes")),
            )
        except services.AttemptRefused as exc:
            attempt.refresh_from_db()
            if attempt.state != Attempt.State.OPEN:
                raise  # not a problem of the form: the page says it as any refusal
            # The form again, with what was wrong beside the field and the body as it was sent: nothing is lost.
            context.update(body=body, body_error=str(exc))
            status = 400
        else:
            messages.success(request, "Submitted: your answer is being scored like a model's.")
            return redirect("attempt-detail", pk=attempt.pk)
    if attempt.state == Attempt.State.OPEN:
        context["prompt"] = attempt_prompt(attempt=attempt)
        context["empty_body"] = services.EMPTY_BODY
        context["elapsed"] = max(0.0, (timezone.now() - attempt.opened_at).total_seconds() - attempt.paused_seconds)
    elif attempt.state == Attempt.State.PAUSED and attempt.paused_at is not None:
        context["elapsed"] = max(0.0, (attempt.paused_at - attempt.opened_at).total_seconds() - attempt.paused_seconds)
    elif attempt.state == Attempt.State.SUBMITTED:
        context["item"] = item = selectors.attempt_result(attempt=attempt)
        context["verdict"] = item.outcome.status if item else None
    htmx = getattr(request, "htmx", None)  # django-htmx's middleware sets it
    if htmx and htmx.target == "attempt-result":
        # The polled result; once the verdict is in it also replaces the heading's badge (out of band).
        return render(request, "humans/_attempt_result.html", {**context, "badge_out_of_band": True})
    return render(request, "humans/attempt.html", context, status=status)


def _whole(value: str | None) -> int | None:
    """A form's count, or None when the page sent none (no JavaScript)."""
    value = (value or "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise services.AttemptRefused(f"keystrokes must be a whole number, got {value[:20]!r}")
    return int(value)


def _json_list(value: str | None) -> list | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise services.AttemptRefused(f"pastes is not JSON ({exc.msg})") from exc


def _attempt_action(service, done: str):
    @refusal_redirect(_attempt_page)
    @require_POST
    @login_required
    def view(request: HttpRequest, pk: int) -> HttpResponse:
        attempt = get_object_or_404(Attempt, pk=pk, user=request.user)
        service(attempt=attempt, user=request.user)
        messages.success(request, done)
        return redirect("attempt-detail", pk=pk)

    return view


attempt_pause = _attempt_action(services.attempt_pause, "Paused: the clock is stopped and the item hidden.")
attempt_resume = _attempt_action(services.attempt_resume, "Resumed: the clock runs again.")


@refusal_redirect(_attempt_page)
@require_POST
@login_required
def attempt_abandon(request: HttpRequest, pk: int) -> HttpResponse:
    """Abandon only as confirmed on the page (it cannot be undone): a bare post is refused, saying so."""
    attempt = get_object_or_404(Attempt, pk=pk, user=request.user)
    if request.POST.get("confirm") != "abandon":
        raise services.AttemptRefused("abandoning cannot be undone: confirm it on the attempt page (confirm=abandon)")
    services.attempt_abandon(attempt=attempt, user=request.user)
    messages.success(request, "Abandoned: nothing is scored for this item.")
    return redirect("attempt-detail", pk=pk)


@refusal_redirect(_attempt_page)
@require_POST
@login_required
def attempt_exclude(request: HttpRequest, pk: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt, pk=pk)
    services.attempt_exclude(attempt=attempt, actor=request.user, reason=request.POST.get("reason", ""))
    messages.success(request, f"Attempt {pk} is left out of the figures.")
    return redirect("release-humans", name=attempt.version.name)


@refusal_redirect(_attempt_page)
@require_POST
@login_required
def attempt_flag_review(request: HttpRequest, pk: int) -> HttpResponse:
    attempt = get_object_or_404(Attempt, pk=pk)
    decision = request.POST.get("decision", "")
    services.attempt_flag_review(
        attempt=attempt, actor=request.user, decision=decision, reason=request.POST.get("reason", "")
    )
    messages.success(request, f"Attempt {pk}: {Outcome.Review(decision).label}.")
    return redirect("attempt-detail", pk=pk)


@refusal_redirect(_humans_page)
@require_POST
@login_required
def listing_set(request: HttpRequest, name: str) -> HttpResponse:
    listing = services.listing_set(user=request.user, listed=request.POST.get("listed") == "on")
    messages.success(request, "You are listed by name." if listing.listed else "Your results are private.")
    return redirect("release-humans", name=name)


def leaderboard_humans(*, version: BenchmarkVersion, user) -> dict:
    """The leaderboard's Humans row (registered with benchmarks.pages)."""
    return {"humans": selectors.humans_row(version=version)}


def item_humans(*, version: BenchmarkVersion, snippet, user) -> dict:
    """A model's item page: the people's pass rate on that item beside the model's verdict."""
    return {"human_rates": selectors.humans_row(version=version, iterations=0).per_item, "human_thin": None}


def difficulty_humans(*, version: BenchmarkVersion, user, task=None) -> dict:
    """Per-item human pass rates for the difficulty tables; registered with benchmarks.pages."""
    if not version.is_frozen:
        return {}
    row = selectors.humans_row(version=version, iterations=0)
    return {"human_rates": row.per_item, "human_thin": row.thin_people}


def paper_humans(*, version: BenchmarkVersion, user, task) -> dict:
    """The paper page: its difficulty table's human rates, Try it yourself on the public items of a published release,
    the person's own attempts with their verdicts, and whether their reference code is withheld (REFERENCE_RULE)."""
    context = difficulty_humans(version=version, user=user)
    context["human_mine"] = selectors.attempts_mine_on_task(task=task, user=user)
    seen = selectors.references_seen(user=user)  # once for the page: each use below reads it
    context["reference_withheld"] = selectors.reference_withheld(task=task, user=user, seen=seen)
    context["reference_rule"] = selectors.REFERENCE_RULE
    if version.status == BenchmarkVersion.Status.PUBLISHED:
        # A signed-in person is offered the items they have not attempted; a visitor is asked to log in.
        offered = (
            selectors.items_offerable(version=version, user=user, seen=seen)
            if user.is_authenticated
            else visibility.items_public(version=version)
        )
        context["human_try"] = set(offered.filter(task=task).values_list("pk", flat=True))
        mine = context["human_mine"] or {}
        context["human_withdrawn"] = {pk: where for pk, where in seen.items() if pk not in mine}
    return context


def _paper_page(request: HttpRequest, name: str, slug: str, **_: object) -> str:
    return reverse("paper-detail", args=[name, slug])


@refusal_redirect(_paper_page)
@require_POST
@login_required
def reference_show(request: HttpRequest, name: str, slug: str) -> HttpResponse:
    """Show a paper's reference code to the person, withdrawing the offer of its items (REFERENCE_RULE)."""
    version = version_get(name=name, user=request.user)
    task = version_task_for_paper(version=version, slug=slug)
    if not visibility.task_visible(version=version, task=task, user=request.user):
        raise Http404("No such paper in this version.")
    services.reference_show(user=request.user, version=version, task=task)
    messages.success(
        request, "The reference code is shown; this paper's items you had not attempted are no longer offered."
    )
    return redirect(f"{reverse('paper-detail', args=[name, slug])}#sources")
