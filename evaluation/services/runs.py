"""The run lifecycle: start, dispatch and feed a run's items, cancel, resume, pause and prioritise it, finish it,
and pin the run that stands for its model."""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from benchmarks.permissions import user_may_change
from benchmarks.selectors import UnknownProtocol, protocol_get, user_is_maintainer
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.provenance import provenance_at_start
from evaluation.routing import GPU_QUEUE, ITEM_EVALUATE, ITEM_GENERATE
from evaluation.run_modes import run_mode_get, run_mode_restart, run_mode_settings
from evaluation.scoring import run_outcomes_state, run_scores_compute, run_scores_write
from evaluation.selectors.held_out import run_covers_held_out
from evaluation.selectors.items import run_feed_order, run_snippets
from evaluation.services.models import EvaluationError, model_endpoint_check, user_pays_platform
from operations import broker
from operations.enqueue import enqueue
from operations.events import Kind, event_record
from operations.slots import queue_slots

MAX_SAMPLES = 20
MAX_REPEAT = 10  # runs of one setting started together (the published agent adaptation reports 3)

logger = logging.getLogger(__name__)


def run_protocol(*, version: BenchmarkVersion, protocol: str | None) -> str:
    """The protocol a run on `version` uses: the one named (it must exist), else the release's."""
    try:
        return protocol_get(name=protocol or version.protocol_name).name
    except UnknownProtocol as exc:
        raise EvaluationError(str(exc)) from exc


class RunQuotaExceeded(EvaluationError):
    """The user already has as many active runs as one user may have."""

    status = 429
    code = "too_many_runs"


def run_quota_check(*, user) -> None:
    """A user (maintainers and the platform exempt) has at most RUNS_ACTIVE_PER_USER runs queued or running: the
    workers are shared, and each run is up to samples x items sandbox evaluations."""
    if user_pays_platform(user=user):
        return
    limit = settings.RUNS_ACTIVE_PER_USER
    active = list(
        EvaluationRun.objects.filter(
            created_by=user,
            status__in=(EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING),
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if len(active) >= limit:
        raise RunQuotaExceeded(
            f"you have {len(active)} run{'s' if len(active) != 1 else ''} queued or running "
            f"({', '.join(f'#{pk}' for pk in active)})"
            f", the most one user may have at once ({limit}): start this one when one of them "
            "has finished, or cancel one"
        )


@transaction.atomic
def run_start(
    *,
    model: ModelEntry,
    version: BenchmarkVersion,
    with_paper: bool = True,
    samples: int = 1,
    params: dict | None = None,
    protocol: str | None = None,
    user=None,
    dispatch: bool = True,
    mode: str = "single",
    budget: dict | None = None,
    repeat_group: uuid.UUID | None = None,
) -> EvaluationRun:
    """Create a run (in the release's protocol unless another is named) and dispatch its items after commit.

    `mode` "agent": the model works on each item in a sandbox within `budget` (the agents app, through
    evaluation/run_modes.py)."""
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise EvaluationError(f"release {version.name} is a draft; runs are pinned to published versions")
    run_quota_check(user=user)
    if not 1 <= samples <= MAX_SAMPLES:
        raise EvaluationError(f"samples must be between 1 and {MAX_SAMPLES}, got {samples}")
    protocol = run_protocol(version=version, protocol=protocol)
    if model.kind == ModelEntry.Kind.UPLOADED:
        raise EvaluationError(f"model {model.name} has uploaded generations; it cannot be called")
    if model.kind == ModelEntry.Kind.HUMAN:
        raise EvaluationError(f"model {model.name} stands for people's attempts (humans/); it cannot be run")
    from evaluation.llm import params_problems

    if problems := params_problems(params or {}):
        raise ValidationError({"params": problems})
    # Locked so that no edit of the model's endpoint slips between this snapshot and the run's commit.
    model = ModelEntry.objects.select_for_update().get(pk=model.pk)
    if model.kind == ModelEntry.Kind.LITELLM:
        if not model.has_api_key and not user_pays_platform(user=user):
            raise EvaluationError(
                f"model {model.name} has no API key of its own: only maintainers run it, on the platform's keys"
            )
        model_endpoint_check(model=model, api_key=model.api_key_get(), platform_pays=user_pays_platform(user=user))
    calls = model.kind == ModelEntry.Kind.LITELLM
    agent_budget = run_mode_settings(model=model, version=version, mode=mode, budget=budget)
    run = EvaluationRun(
        mode=mode,
        agent_budget=agent_budget,
        repeat_group=repeat_group,
        model=model,
        version=version,
        with_paper=with_paper,
        samples=samples,
        params=params or {},
        protocol=protocol,
        created_by=user,
        litellm_model=model.litellm_model if calls else "",
        api_base=model.api_base if calls else "",
        model_params=dict(model.default_params) if calls else {},
        provenance=provenance_at_start(model=model, api_base=model.api_base if calls else ""),
        covers_held_out=run_covers_held_out(model=model, params=params),
    )
    run.full_clean()
    run.save()
    run.total_items = run_snippets(run=run).count() * samples
    run.save(update_fields=["total_items"])
    if dispatch:
        transaction.on_commit(lambda: run_dispatch(run=run))
    return run


@transaction.atomic
def runs_start(*, repeat: int = 1, **run_settings) -> list[EvaluationRun]:
    """`repeat` runs of one model, release and setting (run_start's arguments), started together: they share a
    repeat group, which the leaderboard shows as one row with the mean and standard error across the runs."""
    if not 1 <= repeat <= MAX_REPEAT:
        raise EvaluationError(f"repeat must be between 1 and {MAX_REPEAT}, got {repeat}")
    group = uuid.uuid4() if repeat > 1 else None
    return [run_start(repeat_group=group, **run_settings) for _ in range(repeat)]


def run_dispatch(*, run: EvaluationRun) -> int:
    """(Re)start feeding the run from its first item: items already done are skipped, and only what its share allows
    is queued now (run_feed); the rest follows as items finish. Returns how many of its items were queued now."""
    run_done_recount(run=run)
    # Nothing of the run is presumed in flight any more: what was lost is fed again, what is done is skipped, and
    # what is still on the broker belongs to the earlier feed and is dropped (else each resume added a share).
    EvaluationRun.objects.filter(pk=run.pk).update(
        feed_cursor=0, fed_items=F("done_items"), feed_epoch=F("feed_epoch") + 1
    )
    now = timezone.now()
    EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.QUEUED).update(
        status=EvaluationRun.Status.RUNNING, last_progress_at=now
    )
    # Here, not only when it leaves QUEUED: a run resumed before its first dispatch (an upload whose dispatch the
    # broker refused, then cancelled) is RUNNING already and still starts now.
    EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.RUNNING, started_at__isnull=True).update(
        started_at=now
    )
    queued = run_feed(run=run)
    if not queued:
        run_maybe_finish(run=run)
    return queued


def run_share(*, run: EvaluationRun) -> int:
    """How many of the run's items may be in flight at once: RUN_ITEMS_IN_FLIGHT per share (AGENT_ITEMS_IN_FLIGHT
    for an agent run, whose items mostly wait on the model, holding no sandbox slot meanwhile), 1 + priority shares.
    A user's model-calling runs stay within USER_ITEMS_IN_FLIGHT together (run_feed): a hostile endpoint can make
    every turn a slot-holding command, so only the platform's own and maintainers' agent runs get the larger share
    whole. Runs tested straight away share the sandbox workers' slots besides (runs_share_feed)."""
    share = settings.AGENT_ITEMS_IN_FLIGHT if run.mode == "agent" else settings.RUN_ITEMS_IN_FLIGHT
    return share * (1 + max(0, run.priority))


def _in_flight(runs) -> int:
    totals = runs.aggregate(fed=Coalesce(Sum("fed_items"), 0), done=Coalesce(Sum("done_items"), 0))
    return max(0, totals["fed"] - totals["done"])


def run_shares_slots(run: EvaluationRun) -> bool:
    """Whether the run's items go straight to the sandbox workers (uploads, calibration), whose slots the runs of
    that kind share fairly (runs_share_feed); a model-calling run's items wait on its model first."""
    return run.model.kind != ModelEntry.Kind.LITELLM and run.mode != "agent"


SLOT_SHARING = Q(status=EvaluationRun.Status.RUNNING) & ~Q(model__kind=ModelEntry.Kind.LITELLM) & ~Q(mode="agent")


def run_feed(*, run: EvaluationRun) -> int:
    """Top the run up: a run whose items go straight to the sandbox takes its turn in the fair share of the workers'
    slots (runs_share_feed); a model-calling run's items in flight are topped up to its share (and its creator's,
    USER_ITEMS_IN_FLIGHT over all their runs; the platform's own runs have their own), in feed order. Returns how
    many of the run's items were queued."""
    if run_shares_slots(run):
        return runs_share_feed().get(run.pk, 0)
    active = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
    with transaction.atomic():
        locked = _run_locked(run.pk, skip_locked=True)
        if locked is None:
            return 0
        room = run_share(run=locked) - max(0, locked.fed_items - locked.done_items)
        if locked.created_by_id is not None and not user_pays_platform(user=locked.created_by):
            mine = EvaluationRun.objects.filter(created_by_id=locked.created_by_id, status__in=active)
            room = min(room, settings.USER_ITEMS_IN_FLIGHT - _in_flight(mine))
        batch = _run_batch(locked, room)
    return _run_enqueue(locked, batch)


def _run_locked(pk: int, *, skip_locked: bool) -> EvaluationRun | None:
    """The running run's row, locked for moving its cursor; None when it is not running (or, with skip_locked, when
    another feeder holds it and tops it up)."""
    return (
        EvaluationRun.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .select_related("model")
        .filter(pk=pk, status=EvaluationRun.Status.RUNNING)
        .first()
    )


def _run_batch(locked: EvaluationRun, room: int) -> list[tuple[int, int]]:
    """The run's next `room` items without an outcome, in feed order, counted as fed (inside the row's lock)."""
    if room <= 0:
        return []
    cursor = locked.feed_cursor
    batch: list[tuple[int, int]] = []
    # The window to queue; when it held finished items (a resume), the rest of the order at once, not window by
    # window.
    for count in (room, None):
        window = run_feed_order(locked, start=cursor, count=count)
        done = set(
            Outcome.objects.filter(run=locked, snippet_id__in={s for s, _ in window}).values_list(
                "snippet_id", "sample"
            )
        )
        for item in window:
            if len(batch) == room:
                break
            cursor += 1
            if item not in done:
                batch.append(item)
        if len(batch) == room or not window:
            break
    EvaluationRun.objects.filter(pk=locked.pk).update(feed_cursor=cursor, fed_items=F("fed_items") + len(batch))
    return batch


def _run_enqueue(locked: EvaluationRun, batch: list[tuple[int, int]]) -> int:
    """Queue the batch (after its rows' commit). A message the broker refuses stays counted as in flight: the
    watchdog's lost-work rule (nothing queued or held for the run) feeds it again."""
    task = ITEM_GENERATE if locked.model.kind == ModelEntry.Kind.LITELLM else ITEM_EVALUATE
    if (mode := run_mode_get(locked.mode)) is not None:
        task = mode.item_task
    for queued, (snippet_id, sample) in enumerate(batch):

        def refused(exc: Exception, queued: int = queued) -> str:
            return (
                f"run {locked.pk}: the broker refused new tasks ({exc}); {queued} of "
                f"{len(batch)} item(s) queued, the watchdog feeds the rest once it answers"
            )

        # The broker is down: the watchdog feeds the run again once it answers.
        if not enqueue(task, locked.pk, snippet_id, sample, locked.feed_epoch, subject=locked, refused=refused):
            return queued
    return len(batch)


@dataclass(frozen=True)
class RunLoad:
    """What the fair share needs of a running run: whose it is, how much is in flight, left to feed and left to do."""

    pk: int
    owner: str  # "calibration", "platform" or "user:<id>": whose share the run draws on
    in_flight: int
    unfed: int
    remaining: int
    cap: int  # run_share: a run's own ceiling (1 + priority shares)
    done: int = 0
    priority: int = 0
    created_at: datetime | None = None
    last_progress_at: datetime | None = None  # its last item's end (or its start)


def run_owner(run: EvaluationRun) -> str:
    """Whose share a run draws on: calibration apart (the release's reference lines), then the platform's own runs,
    then each person's (maintainers' too)."""
    if run.is_calibration:
        return "calibration"
    return "platform" if run.created_by_id is None else f"user:{run.created_by_id}"


def shares_plan(
    runs: list[RunLoad], *, slots: int, now: datetime | None = None, starved_after: float | None = None
) -> dict[int, int]:
    """How many items of each run to queue into the free ones of `slots`, one slot at a time. The owner with the
    least left to do over its runs (shortest remaining first) takes every slot its runs' shares allow when that is at
    most half of what any other owner has left, else up to half the slots; every other slot goes to the owner with the
    fewest items in flight (per 1 + the priority of its runs), ties to the one whose runs did the fewest items so
    far, then to the least left to do. Within an owner, its run
    with the least left to do (higher priority first). So a person with one small run, whatever other people's runs
    wait, has the workers to itself, and owners with loads alike share them. Since a stream of small runs could then
    hold every slot for ever, an owner with nothing in flight whose runs made no progress for `starved_after`
    seconds (at `now`) first gets one slot, the longest waiting first: every run progresses, however busy."""
    plan: dict[int, int] = {}
    owners: dict[str, list[RunLoad]] = {}
    for run in runs:
        owners.setdefault(run.owner, []).append(run)
    half = -(-slots // 2)

    def feedable(owner: str) -> list[RunLoad]:
        return [r for r in owners[owner] if plan.get(r.pk, 0) < r.unfed and r.in_flight + plan.get(r.pk, 0) < r.cap]

    def in_flight(owner: str) -> int:
        return sum(r.in_flight + plan.get(r.pk, 0) for r in owners[owner])

    def left(owner: str) -> tuple:
        return (sum(r.remaining for r in owners[owner]), min(_created(r) for r in owners[owner]), owner)

    def fewest_in_flight(owner: str) -> tuple:
        weight = 1 + max(r.priority for r in feedable(owner))
        return (in_flight(owner) / weight, sum(r.done for r in owners[owner]), *left(owner))

    free = max(0, slots - sum(run.in_flight for run in runs))
    for owner in _starved_owners(owners, now=now, starved_after=starved_after)[:free]:
        run = min(feedable(owner), key=lambda r: (-r.priority, r.remaining, _created(r), r.pk))
        plan[run.pk] = 1
    for _ in range(free - len(plan)):
        open_owners = [owner for owner in owners if feedable(owner)]
        if not open_owners:
            break
        owner = min(open_owners, key=left)
        others = [left(other)[0] for other in owners if other != owner]
        much_shorter = not others or 2 * left(owner)[0] <= min(others)
        if not much_shorter and in_flight(owner) >= half:
            owner = min(open_owners, key=fewest_in_flight)
        run = min(feedable(owner), key=lambda r: (-r.priority, r.remaining, _created(r), r.pk))
        plan[run.pk] = plan.get(run.pk, 0) + 1
    return plan


def _starved_owners(
    owners: dict[str, list[RunLoad]], *, now: datetime | None, starved_after: float | None
) -> list[str]:
    """The owners with nothing in flight, an item to feed and no progress of any run for `starved_after` seconds,
    the longest waiting first."""
    if now is None or starved_after is None:
        return []
    waited: dict[str, float] = {}
    for owner, runs in owners.items():
        if any(r.in_flight for r in runs) or not any(r.unfed and r.cap for r in runs):
            continue
        last = max((r.last_progress_at or r.created_at or now) for r in runs)
        if (now - last).total_seconds() >= starved_after:
            waited[owner] = (now - last).total_seconds()
    return sorted(waited, key=lambda owner: (-waited[owner], owner))


def _created(run: RunLoad) -> float:
    return run.created_at.timestamp() if run.created_at else 0.0


# One feeder at a time decides who gets the free slots (PostgreSQL; SQLite writes one at a time anyway).
FEEDER_LOCK = 0x7263625F66656564  # "rcb_feed"


def _feeder_lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [FEEDER_LOCK])


def slots_for_runs() -> int:
    """How many items of the slot-sharing runs may be in flight: the live sandbox and GPU workers' slots (as their
    watchdogs say), or a run's share while no worker has said (none started yet)."""
    return queue_slots("sandbox", GPU_QUEUE) or settings.RUN_ITEMS_IN_FLIGHT


def _gpu_items_waiting() -> int:
    """Items waiting on the `gpu` queue: no slot runs them (maybe no GPU worker is registered), so they leave the
    sandbox slots to others while they wait (each run still keeps within its share)."""
    return (broker.queues_waiting((GPU_QUEUE,)) or {}).get(GPU_QUEUE, 0)


def runs_share_feed() -> dict[int, int]:
    """Fill the sandbox workers' free slots with items of the running runs tested straight away, shared by
    shares_plan; returns how many items of each run were queued. The queue then holds about what the workers run,
    so what is queued next runs next."""
    batches: list[tuple[EvaluationRun, list[tuple[int, int]]]] = []
    with transaction.atomic():
        _feeder_lock()
        rows = list(
            EvaluationRun.objects.filter(SLOT_SHARING)
            .select_related("model")
            .only(
                "pk",
                "created_by_id",
                "priority",
                "fed_items",
                "done_items",
                "total_items",
                "created_at",
                "last_progress_at",
                "mode",
                "model",
                "model__kind",
            )
        )
        loads = [
            RunLoad(
                pk=r.pk,
                owner=run_owner(r),
                in_flight=max(0, r.fed_items - r.done_items),
                unfed=max(0, r.total_items - max(r.fed_items, r.done_items)),
                remaining=max(0, r.total_items - r.done_items),
                cap=run_share(run=r),
                done=r.done_items,
                priority=max(0, r.priority),
                created_at=r.created_at,
                last_progress_at=r.last_progress_at,
            )
            for r in rows
        ]
        slots = slots_for_runs()
        if sum(load.in_flight for load in loads) >= slots:
            slots += _gpu_items_waiting()
        plan = shares_plan(loads, slots=slots, now=timezone.now(), starved_after=settings.RUN_STARVED_SECONDS)
        for pk, count in plan.items():
            locked = _run_locked(pk, skip_locked=False)
            if locked is not None:
                batches.append((locked, _run_batch(locked, count)))
    return {locked.pk: _run_enqueue(locked, batch) for locked, batch in batches}


def runs_feed() -> int:
    """One feeder pass: the workers' free slots shared among the runs tested straight away, then every
    model-calling run topped up in turn, higher priority first, then oldest; returns how many items were queued."""
    queued = sum(runs_share_feed().values())
    runs = (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING)
        .exclude(SLOT_SHARING)
        .select_related("model", "created_by")
        .order_by("-priority", "created_at")
    )
    return queued + sum(run_feed(run=run) for run in runs)


RUN_PRIORITY_MAX = 10


@transaction.atomic
def run_priority_set(*, run: EvaluationRun, priority: int, actor) -> EvaluationRun:
    """A maintainer gives a run more shares of the workers (priority p: 1 + p shares) or the default (0)."""
    if not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers set a run's priority")
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= RUN_PRIORITY_MAX:
        raise EvaluationError(f"priority must be a whole number from 0 to {RUN_PRIORITY_MAX}, got {priority!r}")
    EvaluationRun.objects.filter(pk=run.pk).update(priority=priority)
    run.refresh_from_db()
    return run


RUN_ACTIVE = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)


def runs_unfinished() -> QuerySet[EvaluationRun]:
    """Queued and running runs: the watchdog's to look after (operations.watchdog, registered in apps.py). A running
    run with nothing in flight and items left waits its turn for a slot (the feeder gives it one): nothing of it can
    be lost."""
    waiting = Q(status=EvaluationRun.Status.RUNNING, fed_items__lte=F("done_items"), done_items__lt=F("total_items"))
    return (
        EvaluationRun.objects.filter(status__in=RUN_ACTIVE)
        .exclude(waiting)
        .select_related("model", "version")
        .defer("version__manifest", "version__changelog")
    )


def run_requeue(run: EvaluationRun, *, idle_seconds: float, worker: str = "") -> int:
    """Queue again the items of an active run that have no outcome while no task of the run is queued or held by a
    worker (the broker lost them, or their worker died), once the watchdog claimed it."""
    queued = run_dispatch(run=run)
    if queued:
        event_record(
            kind=Kind.ITEMS_REDISPATCHED,
            subject=run,
            items=queued,
            worker=worker,
            detail=f"run {run.pk}: {queued} item(s) without an outcome and without a queued or running task "
            f"after {idle_seconds:.0f} s without progress were re-dispatched",
        )
    return queued


@transaction.atomic
def run_cancel(*, run: EvaluationRun) -> EvaluationRun:
    """Stop a run: queued items are skipped when they reach a worker; results so far stay."""
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_active:
        raise EvaluationError(f"run {run.pk} is {run.status}; only queued or running runs can be cancelled")
    run.status = EvaluationRun.Status.CANCELLED
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])
    return run


def run_resume(*, run: EvaluationRun) -> int:
    """Continue a cancelled or stalled run: only items without an outcome are dispatched. A run that paused itself
    also drops the outcomes of its failed model calls, so those items are asked again; they are remembered as asked
    again (`asked_again`), so an endpoint that fails the same items again ends them rather than pausing the run on
    every resume (run_pause_if_failing)."""
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
        if run.status == EvaluationRun.Status.COMPLETED:
            raise EvaluationError(f"run {run.pk} is already completed")
        if run.status == EvaluationRun.Status.CANCELLED:  # active again: it counts as a new one would
            run_quota_check(user=run.created_by)
        if run.pause_reason:
            failed = Generation.objects.filter(run=run).exclude(error="")
            items = list(failed.values_list("snippet_id", "sample"))
            run_mode_restart(run=run, items=items)
            Outcome.objects.filter(run=run, generation__in=failed).delete()
            failed.delete()
            run.asked_again = sorted({*(tuple(item) for item in run.asked_again), *items})
        run.status = EvaluationRun.Status.RUNNING
        run.finished_at = None
        run.pause_reason = ""
        run.save(update_fields=["status", "finished_at", "pause_reason", "asked_again"])
    return run_dispatch(run=run)


def _failure_kind(error: str) -> str:
    """A model call's error without what changes from call to call (request ids, counts), to tell "the same way"."""
    return re.sub(r"[0-9a-f]{8,}|\d{4,}|gave up after \d+ attempts: ", "#", error.lower())


# How a client library says it never reached the provider (no answer at all, not an error the provider gave).
_UNREACHABLE = re.compile(r"connection error|apiconnectionerror|connecterror|connection refused|name resolution", re.I)


def _failure_said(error: str) -> str:
    """What a paused run's failing calls have in common, in words: a provider not reached is not its error."""
    if _UNREACHABLE.search(error):
        return "The model's provider could not be reached (no connection to its address)"
    return "API calls are failing"


def run_pause_if_failing(*, run: EvaluationRun) -> bool:
    """Pause (cancel, saying why) an active run whose last RUN_PAUSE_AFTER_FAILURES model calls all failed the same
    way: every queued item would fail like them. Its queued items are then skipped when they reach a worker. Items a
    resume asked again (`asked_again`) are not counted: an endpoint that fails the same items every time would
    otherwise pause the run again on every resume, and it could never finish; failing again, they end as failed
    calls do (outcomes.model_call_failed), while a failure of items asked for the first time still pauses it."""
    count = settings.RUN_PAUSE_AFTER_FAILURES
    if count < 1:
        return False
    again = {tuple(item) for item in run.asked_again}
    calls = (
        Generation.objects.filter(run=run, attempts__gt=0)
        .order_by("-created_at", "-pk")
        .values_list("snippet_id", "sample", "error")[: count + len(again)]
    )
    errors = [error for snippet_id, sample, error in calls if (snippet_id, sample) not in again][:count]
    if len(errors) < count or not errors[0] or len({_failure_kind(error) for error in errors}) != 1:
        return False
    reason = f"{_failure_said(errors[0])}: {errors[0]}"
    paused = EvaluationRun.objects.filter(
        pk=run.pk, status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]
    ).update(status=EvaluationRun.Status.CANCELLED, finished_at=timezone.now(), pause_reason=reason[:4000])
    if paused:
        logger.warning("run %s paused after %d failed model calls in a row: %s", run.pk, count, errors[0])
    return bool(paused)


def run_done_recount(*, run: EvaluationRun) -> None:
    """Set the run's counter of outcomes from the outcomes themselves (after some were deleted)."""
    # In the UPDATE itself, so an outcome recorded meanwhile is counted, never lost (too high only delays the end).
    done = Outcome.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(n=Count("pk")).values("n")
    EvaluationRun.objects.filter(pk=run.pk).update(done_items=Coalesce(Subquery(done), 0))


def run_maybe_finish(*, run: EvaluationRun) -> bool:
    """Complete the run and store its scores when its last item is in; exactly one caller does it.

    Called after every item: one unlocked read of the counter; at the end, scores computed without a lock and the
    row lock held only to check the count and write them."""
    if not EvaluationRun.objects.filter(
        pk=run.pk, status=EvaluationRun.Status.RUNNING, done_items__gte=F("total_items")
    ).exists():
        return False
    # Computed before the row lock (seconds on a large run), written under it only if the outcomes are unchanged.
    state = run_outcomes_state(run=run)
    scores = run_scores_compute(run=run)
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
        if run.status != EvaluationRun.Status.RUNNING:
            return False
        now = run_outcomes_state(run=run)
        if now[0] < run.total_items:
            return False
        run_scores_write(run=run, scores=scores if now == state else run_scores_compute(run=run))
        run.status = EvaluationRun.Status.COMPLETED
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "finished_at"])
    return True


def continuous_runs_start(*, version: BenchmarkVersion, **signal_kwargs) -> list[EvaluationRun]:
    """Queue every model marked for continuous evaluation on a newly published version."""
    runs = []
    for model in ModelEntry.objects.filter(continuous=True, kind=ModelEntry.Kind.LITELLM):
        runs.append(run_start(model=model, version=version))
    return runs


def calibration_runs_start(*, version: BenchmarkVersion, **signal_kwargs) -> list[EvaluationRun]:
    """On publish, the release's reference lines: a single-shot run of each built-in calibration model (the
    reference code, the placeholder lines), queued like any run; a model with a queued, running or completed one
    on the release gets none (a signal sent twice, or `demo_populate` first, starts nothing more). Off with
    RELEASE_CALIBRATE_ON_PUBLISH (the test suite, whose releases are published by the dozen)."""
    from evaluation.selectors.runs import calibration_models

    if not settings.RELEASE_CALIBRATE_ON_PUBLISH:
        return []
    runs = []
    for model in calibration_models():
        held = model.runs.filter(version=version, mode="single").exclude(status=EvaluationRun.Status.CANCELLED)
        if not held.exists():
            runs.append(run_start(model=model, version=version))
    return runs


@transaction.atomic
def run_pin(*, run: EvaluationRun, actor) -> EvaluationRun:
    """The model's owner (or a maintainer) makes a completed run the model's leaderboard row for its release and
    setting: later runs and uploads are listed on the model page and never replace it until the pin moves or is
    lifted (selectors.runs.leaderboard_choose is the rule)."""
    if not user_may_change(user=actor, owner_id=run.model.owner_id):
        raise PermissionDenied(
            f"only the owner of model {run.model.name} or a maintainer may choose its leaderboard run"
        )
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().select_related("model").get(pk=run.pk)
        if run.status != EvaluationRun.Status.COMPLETED:
            raise EvaluationError(f"run {run.pk} is {run.status}; only a completed run can be the leaderboard run")
        (
            EvaluationRun.objects.filter(
                model=run.model_id,
                version=run.version_id,
                mode=run.mode,
                with_paper=run.with_paper,
                pinned_at__isnull=False,
            )
            .exclude(pk=run.pk)
            .update(pinned_at=None, pinned_by=None)
        )
        run.pinned_at, run.pinned_by = timezone.now(), actor
        run.save(update_fields=["pinned_at", "pinned_by"])
    return run


def run_unpin(*, run: EvaluationRun, actor) -> EvaluationRun:
    """Lift a pin: the model's row in that setting is the latest completed run again."""
    if not user_may_change(user=actor, owner_id=run.model.owner_id):
        raise PermissionDenied(
            f"only the owner of model {run.model.name} or a maintainer may choose its leaderboard run"
        )
    EvaluationRun.objects.filter(pk=run.pk).update(pinned_at=None, pinned_by=None)
    run.refresh_from_db()
    return run
