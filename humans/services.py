"""Functions that change attempts: open one (an item chosen or a random one), pause, resume, abandon, submit (the
answer handed to evaluation's upload services and scored by its pipeline), exclude one, review its flag, a
person's listing and their choice to see a task's reference code."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks.models import BenchmarkVersion, Task
from benchmarks.selectors import user_is_maintainer
from common.errors import ApplicationError
from evaluation.models import HUMAN_MODE, EvaluationRun, ModelEntry
from evaluation.services import (
    outcome_review,
    run_dispatch_later,
    run_protocol,
    upload_generations_store,
    upload_line_parse,
)
from humans import selectors
from humans.models import Attempt, Listing, ReferenceSeen

MAX_PASTES = 1000  # paste events kept per attempt; a page sends one per paste
MAX_REASON_CHARS = 2000
FAST_PASTE_SHARE = 0.8  # a paste of at least this share of the body is the body arriving in one step
TYPING_CHARS_PER_SECOND = 15  # faster than a fast typist: the body was not typed in the time the attempt was open


class AttemptRefused(ApplicationError):
    """An attempt action the rules do not allow; the message says which rule."""

    code = "attempt_refused"


# Said beside the editor, by the server or (before posting) by the page's script.
EMPTY_BODY = "the snippet body is empty: write the code of the masked snippet, then submit"


class AttemptNotFound(AttemptRefused):
    """No such public item or attempt for this person: a held-out item is answered exactly as a missing one."""

    status = 404
    code = "not_found"


def humans_model() -> ModelEntry:
    """The model entry the attempts' runs are filed under: the one of kind human (humans/migrations/0002 makes it),
    never a model someone registered under the name."""
    return ModelEntry.objects.get(kind=ModelEntry.Kind.HUMAN)


@transaction.atomic
def attempt_open(*, user, version: BenchmarkVersion, snippet_id: int | None = None, with_paper: bool = True) -> Attempt:
    """Open (start the clock of) an attempt at a public item of a published release: the item named, else a random
    one the person has not attempted. A live attempt at that item is returned as it is (its clock kept); a finished
    one refuses: one attempt per item per person. Held-out items are never offered, to anyone."""
    if not user.is_authenticated:
        raise PermissionDenied("sign in to attempt an item")
    if version.status != BenchmarkVersion.Status.PUBLISHED:
        raise AttemptRefused(f"release {version.name} is {version.status}; items are attempted on published releases")
    if snippet_id is None:
        snippet = selectors.items_offerable(version=version, user=user).order_by("?").first()
        if snippet is None:
            raise AttemptRefused(
                f"no public item of release {version.name} is left to offer you: you attempted each, or saw its "
                "reference"
            )
    else:
        snippet = selectors.item_public(version=version, snippet_id=snippet_id)
        if snippet is None:
            raise AttemptNotFound(f"release {version.name} has no public item {snippet_id}")
    earlier = Attempt.objects.filter(user=user, snippet=snippet).first()
    if earlier is None and (where := selectors.references_seen(user=user).get(snippet.pk)):
        raise AttemptRefused(
            f"item {snippet.pk} is no longer offered to you: {where} (a person attempts an item without having "
            "seen its answer, as a model does)"
        )
    if earlier is not None:
        if earlier.is_live:
            return earlier
        raise AttemptRefused(
            f"you already {earlier.state} item {snippet.pk} (attempt {earlier.pk}): one attempt per item per person, "
            "as a model answers an item once for pass@1"
        )
    if live := selectors.attempts_revealed_by(user=user, snippet=snippet):
        raise AttemptRefused(
            f"item {snippet.pk}'s masked file shows the reference of item {live.snippet_id}, which you are attempting "
            f"(attempt {live.pk}): submit or abandon that attempt first"
        )
    try:
        with transaction.atomic():
            return Attempt.objects.create(
                user=user, version=version, snippet=snippet, with_paper=with_paper, opened_at=timezone.now()
            )
    except IntegrityError:  # the same person opened it twice at once: the first stands
        return Attempt.objects.get(user=user, snippet=snippet)


def _own_live(*, attempt: Attempt, user) -> Attempt:
    """The attempt locked for a change by its own person, refused unless it is still open or paused."""
    locked = Attempt.objects.select_for_update().filter(pk=attempt.pk, user_id=user.pk).first() if user.pk else None
    if locked is None:
        raise AttemptNotFound(f"you have no attempt {attempt.pk}")
    if not locked.is_live:
        raise AttemptRefused(f"attempt {locked.pk} is {locked.state} already")
    return locked


def _working_seconds(attempt: Attempt, now) -> float:
    return max(0.0, (now - attempt.opened_at).total_seconds() - attempt.paused_seconds)


@transaction.atomic
def attempt_pause(*, attempt: Attempt, user) -> Attempt:
    """Stop the clock; the page hides the item until it resumes."""
    attempt = _own_live(attempt=attempt, user=user)
    if attempt.state == Attempt.State.PAUSED:
        raise AttemptRefused(f"attempt {attempt.pk} is paused already")
    attempt.state, attempt.paused_at = Attempt.State.PAUSED, timezone.now()
    attempt.save(update_fields=["state", "paused_at"])
    return attempt


@transaction.atomic
def attempt_resume(*, attempt: Attempt, user) -> Attempt:
    """Start the clock again; the pause is not counted."""
    attempt = _own_live(attempt=attempt, user=user)
    if attempt.state != Attempt.State.PAUSED or attempt.paused_at is None:
        raise AttemptRefused(f"attempt {attempt.pk} is not paused")
    attempt.paused_seconds += (timezone.now() - attempt.paused_at).total_seconds()
    attempt.state, attempt.paused_at = Attempt.State.OPEN, None
    attempt.save(update_fields=["state", "paused_at", "paused_seconds"])
    return attempt


@transaction.atomic
def attempt_abandon(*, attempt: Attempt, user) -> Attempt:
    """Give the item up: nothing is scored, and the item cannot be attempted again (its prompt was seen)."""
    attempt = _own_live(attempt=attempt, user=user)
    now = timezone.now()
    if attempt.state == Attempt.State.PAUSED and attempt.paused_at is not None:
        attempt.paused_seconds += (now - attempt.paused_at).total_seconds()
    attempt.state, attempt.paused_at, attempt.ended_at = Attempt.State.ABANDONED, None, now
    attempt.active_seconds = _working_seconds(attempt, now)
    attempt.save(update_fields=["state", "paused_at", "paused_seconds", "ended_at", "active_seconds"])
    return attempt


def pastes_check(pastes) -> list[dict]:
    """The page's paste events as stored ({"at": seconds of working time, "chars": characters}), or a refusal
    saying which event is wrong."""
    if pastes is None:
        return []
    if not isinstance(pastes, list):
        raise AttemptRefused("pastes must be a list of {at, chars} objects")
    if len(pastes) > MAX_PASTES:
        raise AttemptRefused(f"pastes holds {len(pastes)} events; at most {MAX_PASTES}")
    checked = []
    for n, event in enumerate(pastes):
        at = event.get("at") if isinstance(event, dict) else None
        chars = event.get("chars") if isinstance(event, dict) else None
        if (
            not isinstance(at, (int, float))
            or isinstance(at, bool)
            or not math.isfinite(at)
            or at < 0
            or not isinstance(chars, int)
            or isinstance(chars, bool)
            or chars < 0
        ):
            raise AttemptRefused(f'pastes[{n}] must be {{"at": seconds >= 0, "chars": whole number >= 0}}')
        checked.append({"at": round(float(at), 3), "chars": chars})
    return checked


def fast_paste(*, body: str, pastes: list[dict], keystrokes: int | None, active_seconds: float) -> bool:
    """Whether the body arrived in one step soon after opening: one paste of most of it within
    HUMAN_FAST_PASTE_SECONDS, or (no events recorded, as from a plain form) a body submitted within that time."""
    limit = settings.HUMAN_FAST_PASTE_SECONDS
    size = len(body.strip())
    if any(p["at"] <= limit and p["chars"] >= FAST_PASTE_SHARE * size for p in pastes):
        return True
    if size > TYPING_CHARS_PER_SECOND * max(active_seconds, 1.0):
        return True  # faster than anyone types, whatever events the client reports (its own, so never trusted)
    return keystrokes is None and not pastes and active_seconds <= limit


@transaction.atomic
def attempt_submit(
    *, attempt: Attempt, user, body: str, keystrokes: int | None = None, pastes: list | None = None
) -> Attempt:
    """Stop the clock and hand the body to scoring, once: it is parsed as an upload line's `code` (re-indented to
    the snippet's indentation, the same limits), stored as the one answer of a run of mode `human`, and dispatched
    to the evaluation pipeline like any upload. No test result is shown before this."""
    attempt = _own_live(attempt=attempt, user=user)
    if attempt.state == Attempt.State.PAUSED:
        raise AttemptRefused(f"attempt {attempt.pk} is paused; resume it to submit")
    if not isinstance(body, str) or not body.strip():
        raise AttemptRefused(EMPTY_BODY)
    if keystrokes is not None and (not isinstance(keystrokes, int) or isinstance(keystrokes, bool) or keystrokes < 0):
        raise AttemptRefused("keystrokes must be a whole number >= 0")
    events = pastes_check(pastes)
    version, snippet = attempt.version, attempt.snippet
    protocol = run_protocol(version=version, protocol=None)
    row = {"id": str(snippet.pk), "sample": 0, "code": body}
    parsed = upload_line_parse(row, snippets={str(snippet.pk): snippet}, version=version, protocol=protocol)
    if isinstance(parsed, str):
        raise AttemptRefused(parsed)
    now = timezone.now()
    run = EvaluationRun.objects.create(
        model=humans_model(),
        version=version,
        with_paper=attempt.with_paper,
        samples=1,
        total_items=1,
        params={"human_attempt": attempt.pk},
        protocol=protocol,
        provenance=EvaluationRun.Provenance.SELF_REPORTED,
        mode=HUMAN_MODE,
    )
    upload_generations_store(run=run, rows=[parsed])
    transaction.on_commit(lambda: run_dispatch_later(run=run))
    attempt.state, attempt.ended_at, attempt.run = Attempt.State.SUBMITTED, now, run
    attempt.active_seconds = _working_seconds(attempt, now)
    attempt.body, attempt.keystrokes, attempt.pastes = body, keystrokes, events
    attempt.fast_paste = fast_paste(
        body=body, pastes=events, keystrokes=keystrokes, active_seconds=attempt.active_seconds
    )
    attempt.save()
    return attempt


@transaction.atomic
def attempt_exclude(*, attempt: Attempt, actor, reason: str) -> Attempt:
    """A maintainer leaves a submitted attempt out of the figures, saying why (kept, and shown with its reason)."""
    if not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers exclude attempts")
    reason = (reason or "").strip()
    if not reason:
        raise AttemptRefused("say why the attempt is excluded")
    if len(reason) > MAX_REASON_CHARS:
        raise AttemptRefused(f"the reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")
    attempt = Attempt.objects.select_for_update().get(pk=attempt.pk)
    if attempt.state != Attempt.State.SUBMITTED:
        raise AttemptRefused(f"attempt {attempt.pk} is {attempt.state}; only submitted attempts are scored")
    attempt.excluded_reason, attempt.excluded_by, attempt.excluded_at = reason, actor, timezone.now()
    attempt.save(update_fields=["excluded_reason", "excluded_by", "excluded_at"])
    return attempt


@transaction.atomic
def attempt_flag_review(*, attempt: Attempt, actor, decision: str, reason: str) -> Attempt:
    """A maintainer confirms or clears the audit's flag on a submitted attempt's verdict, saying why: the same review
    as a model's flagged outcome (evaluation's outcome_review), so cleared restores what the test said (counted as
    passed if it passed) and confirmed fails it."""
    if not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers review flagged attempts")
    reason = (reason or "").strip()
    if not reason:
        raise AttemptRefused("say why the flag is confirmed or cleared")
    outcome = selectors.attempt_outcome(attempt=attempt)
    if outcome is None:
        raise AttemptRefused(f"attempt {attempt.pk} has no verdict yet")
    outcome_review(outcome=outcome, reviewer=actor, decision=decision, reason=reason)
    return attempt


@transaction.atomic
def reference_show(*, user, version: BenchmarkVersion, task: Task) -> ReferenceSeen:
    """The person chooses to see the task's reference code on its paper page, which withdraws the offer of its items
    they have not attempted (selectors.REFERENCE_RULE); refused while one of their attempts at it is open."""
    if not user.is_authenticated:
        raise PermissionDenied("sign in first: visitors are offered no attempt, and see the reference as it is")
    live = Attempt.objects.filter(user=user, snippet__task=task, state__in=[Attempt.State.OPEN, Attempt.State.PAUSED])
    if (attempt := live.first()) is not None:
        raise AttemptRefused(
            f"your attempt {attempt.pk} at item {attempt.snippet_id} of this paper is {attempt.state}: submit or "
            "abandon it before you see the reference code"
        )
    seen, _ = ReferenceSeen.objects.get_or_create(user=user, task=task)
    return seen


@transaction.atomic
def listing_set(*, user, listed: bool) -> Listing:
    """A person's choice to be named on the Humans pages with their results (private by default)."""
    listing, _ = Listing.objects.update_or_create(user=user, defaults={"listed": bool(listed)})
    return listing
