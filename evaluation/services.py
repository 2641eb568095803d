"""Functions that change evaluation state: register models, start, cancel and resume runs, record results."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, F, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code import body_reindent, code_indent, extract_code, has_code_block, indent_width, prompt_hash
from benchmarks.permissions import user_may_change
from benchmarks.selectors import UnknownProtocol, protocol_get, snippet_prompt, user_is_maintainer
from common.addresses import AddressRefused, host_addresses_check
from common.errors import ApplicationError
from evaluation.models import EnvironmentLock, EvaluationRun, Generation, ModelEntry, Outcome, ProvenanceChange
from evaluation.outcomes import Verdict, tail
from evaluation.provenance import provenance_at_start
from evaluation.reproducibility import canonical_hash
from evaluation.sandbox import ExecResult, Limits
from evaluation.scoring import run_outcomes_state, run_scores_compute, run_scores_store, run_scores_write
from evaluation.selectors import item_prompt, run_covers_held_out, run_feed_order, run_snippets
from evaluation.taskfiles import task_annotated, task_files
from operations.enqueue import enqueue
from operations.events import Kind, event_record

if TYPE_CHECKING:
    from evaluation.llm import ModelCall

MAX_SAMPLES = 20

logger = logging.getLogger(__name__)


class EvaluationError(ApplicationError):
    """A request that cannot be carried out, with a message for the person who made it."""


def user_pays_platform(*, user) -> bool:
    """Whether `user` (None: the platform itself, a command or the scheduler) may spend the platform's provider
    keys and reach private addresses (local inference servers): maintainers only."""
    return user is None or user_is_maintainer(user=user)


def model_endpoint_check(*, model: ModelEntry, api_key: str | None, platform_pays: bool | None = None) -> None:
    """Whether the platform may call `model` with `api_key` (its own key, or None) as its owner set it up.

    A user's model brings its own key and an https api_base at a public address; only maintainers' models
    (or the platform's, without owner) use private addresses, and the platform's keys where `platform_pays`
    (default: the owner is a maintainer; at run start: the one starting it is). ValidationError names the
    field at fault.
    """
    from evaluation.llm import api_base_problem, own_key_problem, params_problems, provider_problem  # litellm: heavy

    if model.kind == ModelEntry.Kind.UPLOADED:
        if model.api_base or api_key:
            raise ValidationError(
                {
                    "api_base"
                    if model.api_base
                    else "api_key": "a model of uploaded generations is never called: it takes no api_base or api_key"
                }
            )
        if problems := params_problems(model.default_params, where="default_params"):
            raise ValidationError({"default_params": problems})
        return
    if model.kind != ModelEntry.Kind.LITELLM:
        raise ValidationError({"kind": f"{model.kind} models are built in; register 'litellm' or 'uploaded' models"})
    if not model.litellm_model:
        raise ValidationError({"litellm_model": "litellm_model is required, e.g. 'openai/gpt-4o-mini'"})
    if problems := params_problems(model.default_params, where="default_params"):
        raise ValidationError({"default_params": problems})
    platform = user_pays_platform(user=model.owner)
    if not api_key and not (platform if platform_pays is None else platform_pays):
        raise ValidationError(
            {
                "api_key": "api_key is required: a model without a key of its own would be called "
                "with the platform's provider keys, which only maintainers' models use "
                "(to score answers made elsewhere, register kind 'uploaded')"
            }
        )
    if model.api_base and not platform:
        if problem := api_base_problem(model.api_base):
            raise ValidationError({"api_base": problem})
        parts = urlsplit(model.api_base)
        try:
            host_addresses_check(
                parts.hostname or "",
                parts.port or 443,
                what="api_base host",
                allowed_hosts=settings.MODEL_API_ALLOWED_HOSTS,
            )
        except AddressRefused as exc:
            raise ValidationError({"api_base": str(exc)}) from None
    api_base = model.api_base or None
    problem = (
        own_key_problem(model=model.litellm_model, api_base=api_base, api_key=api_key)
        if api_key
        else provider_problem(model=model.litellm_model, api_base=api_base)
    )
    if problem:
        raise ValidationError({"litellm_model": problem})


@transaction.atomic
def model_register(
    *,
    name: str,
    display_name: str,
    litellm_model: str = "",
    api_base: str = "",
    api_key: str | None = None,
    organization: str = "",
    knowledge_cutoff: date | None = None,
    open_weights: bool = False,
    default_params: dict | None = None,
    owner=None,
    kind: str = ModelEntry.Kind.LITELLM,
) -> ModelEntry:
    """Register a model owned by `owner` (who registers it; None: the platform): see model_endpoint_check."""
    model = ModelEntry(
        name=name,
        display_name=display_name,
        litellm_model=litellm_model,
        api_base=api_base,
        organization=organization,
        knowledge_cutoff=knowledge_cutoff,
        open_weights=open_weights,
        default_params={} if default_params is None else default_params,
        owner=owner,
        kind=kind,
    )
    model.full_clean()
    model_endpoint_check(model=model, api_key=api_key)
    model.api_key_set(api_key)
    model.save()
    return model


MODEL_EDITABLE_FIELDS = (
    "display_name",
    "organization",
    "litellm_model",
    "api_base",
    "knowledge_cutoff",
    "open_weights",
    "default_params",
)
# What a run snapshots at its start: these cannot change while a run of the model is queued or running.
MODEL_ENDPOINT_FIELDS = ("litellm_model", "api_base", "default_params")


class ModelInUse(EvaluationError):
    """A change to a model's endpoint while a run of it is queued or running."""

    status = 409
    code = "model_in_use"


def model_endpoint_unchanged_check(*, model: ModelEntry, changes: dict) -> None:
    """Refuse a change of the model's endpoint (model string, api_base, default parameters) while any run of it is
    queued or running, naming the runs. Callers hold the model's row lock, which run_start takes too."""
    changed = [field for field in MODEL_ENDPOINT_FIELDS if field in changes and changes[field] != getattr(model, field)]
    if not changed:
        return
    active = list(
        EvaluationRun.objects.filter(
            model=model, status__in=(EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if active:
        runs = ", ".join(f"#{pk}" for pk in active)
        raise ModelInUse(
            f"{', '.join(changed)} of model {model.name} cannot change while run{'s' if len(active) > 1 else ''}"
            f" {runs} {'are' if len(active) > 1 else 'is'} queued or running: each run calls the "
            f"endpoint it started with; cancel {'them' if len(active) > 1 else 'it'} or wait until "
            f"{'they finish' if len(active) > 1 else 'it finishes'}, then change the model"
        )


@transaction.atomic
def model_update(
    *, model: ModelEntry, api_key: str | None = None, clear_api_key: bool = False, **changes
) -> ModelEntry:
    """Change a model's description or call settings; its name (the id runs refer to) never changes, nor its
    endpoint while a run of it is active (model_endpoint_unchanged_check)."""
    unknown = set(changes) - set(MODEL_EDITABLE_FIELDS)
    if unknown:
        raise EvaluationError(f"cannot change {', '.join(sorted(unknown))} of a model")
    model = ModelEntry.objects.select_for_update().get(pk=model.pk)
    model_endpoint_unchanged_check(model=model, changes=changes)
    for field, value in changes.items():
        setattr(model, field, value)
    if api_key or clear_api_key:
        model.api_key_set(api_key)
    model.full_clean()
    model_endpoint_check(model=model, api_key=model.api_key_get())
    model.save()
    return model


def run_protocol(*, version: BenchmarkVersion, protocol: str | None) -> str:
    """The protocol a run on `version` uses: the one named (it must exist), else the release's."""
    protocol = protocol or version.protocol_id
    try:
        return protocol_get(name=protocol).name
    except UnknownProtocol as exc:
        raise EvaluationError(str(exc)) from exc


def model_call(*, run: EvaluationRun) -> ModelCall:
    """How the run's model is called: the model string, endpoint and parameters the run snapshot at its start, with
    the model's own key only, unless maintainers run it on the platform's keys.

    Checked again here, where the call happens, since owners, keys and maintainers change after run start.
    """
    from evaluation.llm import ModelCall

    model = run.model
    api_key = model.api_key_get()
    if not api_key and not user_pays_platform(user=run.created_by):
        raise EvaluationError(
            f"model {model.name} has no API key of its own, and only maintainers run models on the platform's keys"
        )
    try:
        return ModelCall(
            model=run.litellm_model,
            api_base=run.api_base or None,
            api_key=api_key,
            params=run.call_params,
            platform_key=not api_key,
            private_addresses=user_pays_platform(user=model.owner),
            exempt_hosts=tuple(settings.MODEL_API_ALLOWED_HOSTS),
        )
    except ValueError as exc:  # settings stored before they were checked
        raise EvaluationError(f"run {run.pk} cannot call model {model.name}: {exc}") from None


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
) -> EvaluationRun:
    """Create a run (in the release's protocol unless another is named) and dispatch its items after commit.

    `mode` "agent": the model works on each item in a sandbox within `budget` (evaluation/agents/start.py)."""
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise EvaluationError(f"version {version.name} is a draft; runs are pinned to published versions")
    run_quota_check(user=user)
    if not 1 <= samples <= MAX_SAMPLES:
        raise EvaluationError(f"samples must be between 1 and {MAX_SAMPLES}, got {samples}")
    protocol = run_protocol(version=version, protocol=protocol)
    if model.kind == ModelEntry.Kind.UPLOADED:
        raise EvaluationError(f"model {model.name} has uploaded generations; it cannot be called")
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
    from evaluation.agents.start import run_mode_settings

    agent_budget = run_mode_settings(model=model, version=version, mode=mode, budget=budget)
    run = EvaluationRun(
        mode=mode,
        agent_budget=agent_budget,
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


def run_dispatch(*, run: EvaluationRun) -> int:
    """(Re)start feeding the run from its first item: items already done are skipped, and only the run's share is
    queued now (run_feed); the rest follows as items finish. Returns how many were queued now."""
    run_done_recount(run=run)
    # Nothing of the run is presumed in flight any more: what was lost is fed again, what is done is skipped, and
    # what is still on the broker belongs to the earlier feed and is dropped (else each resume added a share).
    EvaluationRun.objects.filter(pk=run.pk).update(
        feed_cursor=0, fed_items=F("done_items"), feed_epoch=F("feed_epoch") + 1
    )
    EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.QUEUED).update(
        status=EvaluationRun.Status.RUNNING, started_at=timezone.now(), last_progress_at=timezone.now()
    )
    queued = run_feed(run=run)
    if not queued:
        run_maybe_finish(run=run)
    return queued


def run_share(*, run: EvaluationRun) -> int:
    """How many of the run's items may be in flight at once: RUN_ITEMS_IN_FLIGHT per share, 1 + priority shares."""
    return settings.RUN_ITEMS_IN_FLIGHT * (1 + max(0, run.priority))


def _in_flight(runs) -> int:
    totals = runs.aggregate(fed=Coalesce(Sum("fed_items"), 0), done=Coalesce(Sum("done_items"), 0))
    return max(0, totals["fed"] - totals["done"])


def run_feed(*, run: EvaluationRun) -> int:
    """Top the run's items in flight up to its share (and its creator's, USER_ITEMS_IN_FLIGHT over all their runs;
    the platform's own runs, calibration among them, have their own), in feed order; returns how many were queued.

    The row lock is taken with skip_locked and held only to move the cursor: a feeder that finds it taken leaves
    the top-up to the one holding it. A message the broker refuses stays counted as in flight: the watchdog's
    lost-work rule (nothing queued or held for the run) feeds it again."""
    from evaluation import tasks

    active = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)
    with transaction.atomic():
        locked = (
            EvaluationRun.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("model")
            .filter(pk=run.pk, status=EvaluationRun.Status.RUNNING)
            .first()
        )
        if locked is None:
            return 0
        room = run_share(run=locked) - max(0, locked.fed_items - locked.done_items)
        if locked.created_by_id is not None and not user_pays_platform(user=locked.created_by):
            mine = EvaluationRun.objects.filter(created_by_id=locked.created_by_id, status__in=active)
            room = min(room, settings.USER_ITEMS_IN_FLIGHT - _in_flight(mine))
        if room <= 0:
            return 0
        order = run_feed_order(locked)
        cursor, batch = locked.feed_cursor, []
        while len(batch) < room and cursor < len(order):
            window = order[cursor : cursor + room - len(batch)]
            done = set(
                Outcome.objects.filter(run=locked, snippet_id__in={s for s, _ in window}).values_list(
                    "snippet_id", "sample"
                )
            )
            batch += [item for item in window if item not in done]
            cursor += len(window)
        EvaluationRun.objects.filter(pk=locked.pk).update(feed_cursor=cursor, fed_items=F("fed_items") + len(batch))
    task = tasks.item_generate if locked.model.kind == ModelEntry.Kind.LITELLM else tasks.item_evaluate
    if locked.mode == "agent":
        from evaluation.agents.tasks import item_agent as task
    for queued, (snippet_id, sample) in enumerate(batch):
        # The broker is down: the watchdog feeds the run again once it answers.
        if not enqueue(
            task,
            locked.pk,
            snippet_id,
            sample,
            locked.feed_epoch,
            subject=locked,
            refused=lambda exc, queued=queued: (
                f"run {locked.pk}: the broker refused new tasks ({exc}); {queued} of "
                f"{len(batch)} item(s) queued, the watchdog feeds the rest once it answers"
            ),
        ):
            return queued
    return len(batch)


def runs_feed() -> int:
    """One feeder pass: every running run topped up in turn, higher priority first, then oldest; returns how many
    items were queued."""
    runs = (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING)
        .select_related("model", "created_by")
        .order_by("-priority", "created_at")
    )
    return sum(run_feed(run=run) for run in runs)


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


def forkserver_events_record(
    *, run: EvaluationRun, worker: str, environment_hash: str, backend: str, starts: Iterable = (), cold: str = ""
) -> None:
    """The fork server starts an item of `run` caused (each with its reason), and its turning cold for good, which
    the run page warns maintainers of."""
    where = f"environment {environment_hash[:12]} ({backend})"
    for start in starts:
        event_record(kind=Kind.FORKSERVER_STARTED, subject=run, worker=worker, detail=f"{where}: {start}")
    if cold:
        event_record(
            kind=Kind.FORKSERVER_COLD,
            subject=run,
            worker=worker,
            detail=f"{where}: the fork server is off on this worker, every item starts cold: {cold}",
        )


RUN_ACTIVE = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING)


def runs_unfinished() -> QuerySet[EvaluationRun]:
    """Queued and running runs: the watchdog's to look after (operations.watchdog, registered in apps.py)."""
    return (
        EvaluationRun.objects.filter(status__in=RUN_ACTIVE)
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
    also drops the outcomes of its failed model calls, so those items are asked again."""
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
        if run.status == EvaluationRun.Status.COMPLETED:
            raise EvaluationError(f"run {run.pk} is already completed")
        if run.status == EvaluationRun.Status.CANCELLED:  # active again: it counts as a new one would
            run_quota_check(user=run.created_by)
        if run.pause_reason:
            failed = Generation.objects.filter(run=run).exclude(error="")
            Outcome.objects.filter(run=run, generation__in=failed).delete()
            failed.delete()
        run.status = EvaluationRun.Status.RUNNING
        run.finished_at = None
        run.pause_reason = ""
        run.save(update_fields=["status", "finished_at", "pause_reason"])
    return run_dispatch(run=run)


def _failure_kind(error: str) -> str:
    """A model call's error without what changes from call to call (request ids, counts), to tell "the same way"."""
    return re.sub(r"[0-9a-f]{8,}|\d{4,}|gave up after \d+ attempts: ", "#", error.lower())


def run_pause_if_failing(*, run: EvaluationRun) -> bool:
    """Pause (cancel, saying why) an active run whose last RUN_PAUSE_AFTER_FAILURES model calls all failed the same
    way: every queued item would fail like them. Its queued items are then skipped when they reach a worker."""
    count = settings.RUN_PAUSE_AFTER_FAILURES
    if count < 1:
        return False
    errors = list(
        Generation.objects.filter(run=run, attempts__gt=0)
        .order_by("-created_at", "-pk")
        .values_list("error", flat=True)[:count]
    )
    if len(errors) < count or not errors[0] or len({_failure_kind(error) for error in errors}) != 1:
        return False
    reason = f"API calls are failing: {errors[0]}"
    paused = EvaluationRun.objects.filter(
        pk=run.pk, status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]
    ).update(status=EvaluationRun.Status.CANCELLED, finished_at=timezone.now(), pause_reason=reason[:4000])
    if paused:
        logger.warning("run %s paused after %d failed model calls in a row: %s", run.pk, count, errors[0])
    return bool(paused)


def calibration_answer(*, model: ModelEntry, snippet: Snippet) -> str:
    """What a calibration model answers: the reference code, or only the masked placeholder lines."""
    if model.kind == ModelEntry.Kind.REFERENCE:
        return f"```python\n{snippet.reference_code}```"
    indent = code_indent(snippet.reference_code)
    return (
        f'```python\n{indent}# TODO: Implement block "{snippet.name}"\n'
        f"{indent}# Approximately {snippet.loc} line(s) of code.\n```"
    )


def generation_record(
    *,
    run: EvaluationRun,
    snippet: Snippet,
    sample: int,
    prompt: str,
    raw_answer: str = "",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    latency: float | None = None,
    cost: float | Decimal | None = None,
    attempts: int = 1,
    error: str = "",
    code: str | None = None,
) -> Generation:
    """Store the answer for an item once; a second call (a redelivered task) returns the first.

    `code`, when given, is the snippet body itself (an upload's `code` field, re-indented), used instead of extracted.
    """
    extracted = extract_code(raw_answer) if code is None else code
    defaults = dict(
        prompt_hash=prompt_hash(prompt),
        raw_answer=raw_answer,
        extracted_code=extracted,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency=latency,
        cost=None if cost is None else Decimal(str(cost)).quantize(Decimal("0.000001")),
        attempts=attempts,
        error=error,
    )
    try:
        with transaction.atomic():
            generation, _ = Generation.objects.get_or_create(run=run, snippet=snippet, sample=sample, defaults=defaults)
    except IntegrityError:
        generation = Generation.objects.get(run=run, snippet=snippet, sample=sample)
    return generation


def calibration_generation(*, run: EvaluationRun, snippet: Snippet, sample: int) -> Generation:
    prompt = item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol)
    return generation_record(
        run=run,
        snippet=snippet,
        sample=sample,
        prompt=prompt,
        latency=0.0,
        cost=0,
        raw_answer=calibration_answer(model=run.model, snippet=snippet),
    )


def environment_lock_record(*, environment_hash: str, backend: str, lock: dict, worker: str = "") -> EnvironmentLock:
    """The stored lock of an environment as a worker found it; the same content is stored once."""
    lock_hash = canonical_hash(lock)
    try:
        with transaction.atomic():
            record, _ = EnvironmentLock.objects.get_or_create(
                environment_hash=environment_hash,
                backend=backend,
                lock_hash=lock_hash,
                defaults={"lock": lock, "worker": worker[:200]},
            )
    except IntegrityError:
        record = EnvironmentLock.objects.get(environment_hash=environment_hash, backend=backend, lock_hash=lock_hash)
    return record


def _environment_lock_id(*, environment_hash: str, backend: str, lock: dict, worker: str) -> int:
    """The stored lock's id: one plain read when it is stored already (every item but an environment's first), so
    no savepoint per item."""
    found = (
        EnvironmentLock.objects.filter(
            environment_hash=environment_hash, backend=backend, lock_hash=canonical_hash(lock)
        )
        .values_list("pk", flat=True)
        .first()
    )
    if found is not None:
        return found
    return environment_lock_record(environment_hash=environment_hash, backend=backend, lock=lock, worker=worker).pk


def outcome_record(
    *,
    run: EvaluationRun,
    snippet: Snippet,
    sample: int,
    verdict: Verdict,
    generation: Generation | None = None,
    result: ExecResult | None = None,
    backend: str = "",
    worker: str = "",
    limits: Limits | None = None,
    environment_lock: dict | None = None,
    forked: bool | None = None,
) -> tuple[Outcome, bool]:
    """Store the outcome of an item exactly once (unique per run, snippet, sample); returns (outcome, created)."""
    lock_id = None
    if environment_lock is not None:
        lock_id = _environment_lock_id(
            environment_hash=snippet.task.environment_hash, backend=backend, lock=environment_lock, worker=worker
        )
    defaults = dict(
        generation=generation,
        status=verdict.status,
        category=verdict.category,
        detail=verdict.detail[:2000],
        exit_code=result.exit_code if result else None,
        duration=result.duration if result else None,
        stdout_tail=tail(result.stdout) if result else "",
        stderr_tail=tail(result.stderr) if result else "",
        environment_hash=snippet.task.environment_hash,
        sandbox_backend=backend,
        worker=worker[:200],
        environment_lock_id=lock_id,
        limits=asdict(limits) if limits else {},
        findings=list(verdict.findings),
        measured_status=verdict.measured,
        tests=list(verdict.tests),
        forked=forked,
    )
    try:
        # The outcome and its count in one transaction: a connection lost between them never skips the count.
        # A plain insert (a redelivered item's second one fails on the unique constraint): no read first.
        with transaction.atomic():
            outcome, created = Outcome.objects.create(run=run, snippet=snippet, sample=sample, **defaults), True
            EvaluationRun.objects.filter(pk=run.pk).update(
                last_progress_at=timezone.now(), done_items=F("done_items") + 1
            )
    except IntegrityError:
        outcome, created = Outcome.objects.get(run=run, snippet=snippet, sample=sample), False
    return outcome, created


@transaction.atomic
def outcome_review(*, outcome: Outcome, reviewer, decision: str) -> Outcome:
    """A maintainer's decision on a flagged outcome: confirmed tampering fails it, cleared restores what the test
    said; a completed run's stored scores are recomputed either way."""
    if not user_is_maintainer(user=reviewer):
        raise EvaluationError("only maintainers review flagged outcomes")
    outcome = Outcome.objects.select_for_update().get(pk=outcome.pk)
    if outcome.status != Outcome.Status.FLAGGED:
        raise EvaluationError(f"outcome {outcome.pk} is not flagged (it is {outcome.status})")
    if decision == Outcome.Review.CONFIRMED:
        outcome.status, outcome.category = Outcome.Status.FAILED, Outcome.Category.TAMPERING
    elif decision == Outcome.Review.CLEARED:
        if outcome.measured_status not in (Outcome.Status.PASSED, Outcome.Status.FAILED):
            raise EvaluationError(f"outcome {outcome.pk} has no measured verdict to restore")
        outcome.status = outcome.measured_status
    else:
        raise EvaluationError(f"unknown review decision {decision!r}: choose confirmed or cleared")
    outcome.review, outcome.reviewed_by, outcome.reviewed_at = decision, reviewer, timezone.now()
    outcome.detail = f"{outcome.detail}\n{Outcome.Review(decision).label} by {reviewer.get_username()}"[:2000]
    outcome.save(update_fields=["status", "category", "review", "reviewed_by", "reviewed_at", "detail"])
    if outcome.run.status == EvaluationRun.Status.COMPLETED:
        run_scores_store(run=outcome.run)
    return outcome


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


def generation_reusable(*, run: EvaluationRun, snippet: Snippet, sample: int, prompt: str) -> Generation | None:
    """An earlier answer of the same model to exactly this prompt under the same settings, if there is one."""
    # The same endpoint too: an answer of the owner's own api_base must never become one of the provider's.
    return (
        Generation.objects.filter(
            run__model=run.model,
            run__protocol=run.protocol,
            run__params=run.params,
            run__litellm_model=run.litellm_model,
            run__api_base=run.api_base,
            run__model_params=run.model_params,
            run__provenance=run.provenance,
            sample=sample,
            prompt_hash=prompt_hash(prompt),
            error="",
        )
        .exclude(run=run)
        .order_by("-created_at")
        .first()
    )


class UploadError(ApplicationError):
    """A generations file that cannot be taken; `problems` lists every bad line as 'line N: ...'."""

    code = "invalid_upload"
    summary = "the upload was rejected; nothing was stored"

    def __init__(self, problems: list[str]):
        self.problems = self.details = problems
        super().__init__("; ".join(problems[:20]) + (f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""))


MAX_ANSWER_CHARS = 200_000
UPLOAD_FIELDS = ("answer", "code")
# A release's worth of answers at the longest answer allowed is far below this; a bigger file is not an upload.
UPLOAD_MAX_BYTES = 64 * 1024 * 1024
UPLOAD_FORMAT = (
    'JSONL, one object per line: {"id": item id, "sample": 0, "answer": "..."} or {"id": ..., "sample": ..., '
    '"code": "..."}. Exactly one of the two: "answer" is a raw model response, from which the run\'s protocol '
    "extracts the last fenced python block (```python ... ```) and splices it into the file unchanged, as the "
    "original harness did, so its lines must carry the file's indentation (the indentation of the item's TODO "
    'lines in masked_code); a line whose answer is indented less is stored and warned about. "code" is the '
    "snippet body given directly, at any consistent indentation: it is re-indented to the snippet's "
    "indentation (tabs count as Python reads them, to the next multiple of 8 columns). "
    'An "answer" with no fenced python block is refused with its line number (it would extract nothing and '
    "score 0). Every item of the release needs a line for each sample; a file with any bad line is refused "
    "whole and nothing is stored."
)


def upload_bytes(file) -> bytes:
    """The content of an uploaded generations file (page or API), refused before reading when it is too big."""
    if file.size > UPLOAD_MAX_BYTES:
        from django.template.defaultfilters import filesizeformat

        raise UploadError([f"the file is {filesizeformat(file.size)}; at most {filesizeformat(UPLOAD_MAX_BYTES)}"])
    return file.read()


@dataclass(frozen=True)
class UploadedAnswer:
    snippet: Snippet
    sample: int
    answer: str  # the raw model response ("" when the line gave `code`)
    code: str | None  # the snippet body re-indented to the snippet's indentation, or None: extract it from `answer`
    warning: str = ""  # what will likely go wrong with an answer that is stored anyway


def answer_indent_warning(*, answer: str, snippet: Snippet, protocol: str) -> str:
    """Why an answer's extracted code will likely fail: lines indented less than the snippet, which the protocol
    splices unchanged (FORMAT.md 7); "" when every line is at the snippet's indentation or deeper."""
    depth = indent_width(code_indent(snippet.reference_code))
    short = [
        n
        for n, line in enumerate(extract_code(answer).split("\n"), start=1)
        if line.strip() and indent_width(line) < depth
    ]
    if not depth or not short:
        return ""
    lines = ", ".join(map(str, short[:5])) + (f" and {len(short) - 5} more" if len(short) > 5 else "")
    return (
        f"item {snippet.pk}: the answer's code is indented less than the snippet ({depth} columns) on its "
        f"line(s) {lines}; protocol {protocol} splices an answer unchanged, so it will likely fail with an "
        'IndentationError. Indent the code as it stands in the file, or send the snippet body as "code", '
        "which is re-indented"
    )


def upload_line_parse(
    row, *, snippets: dict[str, Snippet], version: BenchmarkVersion, protocol: str
) -> UploadedAnswer | str:
    """One JSONL line of an upload, or what is wrong with it (the caller adds the line number).

    A line gives exactly one of `answer` (a raw model response, from which the run's protocol extracts the last
    fenced python block, spliced unchanged) or `code` (the snippet body, re-indented to the snippet's indentation).
    An `answer` without a fenced python block is refused rather than scored: extraction would find nothing and the
    item would silently fail. An answer indented less than the snippet is taken with a warning: the protocol's
    treatment of answers is the benchmark's, not the upload's to change.
    """
    if not isinstance(row, dict):
        return 'expected an object with "id", "sample" and one of "answer" or "code"'
    item, sample = str(row.get("id", "")), row.get("sample", 0)
    if item not in snippets:
        return f"unknown item id {item!r} in version {version.name}"
    if not isinstance(sample, int) or isinstance(sample, bool) or not 0 <= sample < MAX_SAMPLES:
        return f"sample must be an integer from 0 to {MAX_SAMPLES - 1}"
    given = [field for field in UPLOAD_FIELDS if field in row]
    if len(given) != 1:
        return (
            'give either "answer" (a raw model response) or "code" (the snippet body), not both'
            if given
            else 'no "answer" (a raw model response) or "code" (the snippet body)'
        )
    field, text = given[0], row[given[0]]
    if not isinstance(text, str):
        return f"{field} must be a string"
    if len(text) > MAX_ANSWER_CHARS:
        return f"{field} is {len(text)} characters; at most {MAX_ANSWER_CHARS}"
    if field == "answer" and not has_code_block(text):
        return (
            f"answer has no fenced python block (```python ... ```), so protocol {protocol} would extract "
            'nothing; wrap the code in one, or send the snippet body as "code"'
        )
    snippet = snippets[item]
    if field == "code":
        return UploadedAnswer(
            snippet=snippet, sample=sample, answer="", code=body_reindent(text, code_indent(snippet.reference_code))
        )
    return UploadedAnswer(
        snippet=snippet,
        sample=sample,
        answer=text,
        code=None,
        warning=answer_indent_warning(answer=text, snippet=snippet, protocol=protocol),
    )


@transaction.atomic
def run_from_upload(
    *,
    model: ModelEntry,
    version: BenchmarkVersion,
    data: bytes,
    user=None,
    with_paper: bool = True,
    protocol: str | None = None,
) -> EvaluationRun:
    """Score uploaded generations (JSONL, see `upload_line_parse`) like the platform's own; all or nothing.

    An upload answers the public split only: held-out prompts never leave the platform, so nobody could answer
    them honestly, and a held-out id is as unknown here as any other. The returned run's `upload_warnings` lists,
    as 'line N: ...', what will likely fail in lines that were taken (answers indented less than their snippet).
    """
    import json

    if version.status == BenchmarkVersion.Status.DRAFT:
        raise EvaluationError(f"version {version.name} is a draft; uploads are scored on published versions")
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        # A reference line must stay what the platform made it, never someone's file.
        raise EvaluationError(f"model {model.name} is a calibration model: the platform makes its answers")
    run_quota_check(user=user)
    protocol = run_protocol(version=version, protocol=protocol)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UploadError([f"the file is not UTF-8 text (byte {exc.start})"]) from exc
    snippets = {str(s.pk): s for s in visibility.items_public(version=version)}
    problems: list[str] = []
    rows: list[UploadedAnswer] = []
    warnings: list[str] = []
    seen: set[tuple[str, int]] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            parsed = upload_line_parse(json.loads(line), snippets=snippets, version=version, protocol=protocol)
        except json.JSONDecodeError as exc:
            parsed = f"not JSON ({exc.msg})"
        if isinstance(parsed, str):
            problems.append(f"line {number}: {parsed}")
        elif (str(parsed.snippet.pk), parsed.sample) in seen:
            problems.append(f"line {number}: item {parsed.snippet.pk} sample {parsed.sample} appears twice")
        else:
            seen.add((str(parsed.snippet.pk), parsed.sample))
            rows.append(parsed)
            if parsed.warning:
                warnings.append(f"line {number}: {parsed.warning}")
    if not rows and not problems:
        problems.append("the file holds no generations")
    samples = 1 + max((row.sample for row in rows), default=0)
    missing = [f"{i}/{s}" for i in snippets for s in range(samples) if (i, s) not in seen]
    if missing and not problems:
        problems.append(f"{len(missing)} item(s) have no answer, e.g. {', '.join(missing[:5])}")
    if problems:
        raise UploadError(problems)
    run = EvaluationRun.objects.create(
        model=model,
        version=version,
        with_paper=with_paper,
        samples=samples,
        created_by=user,
        total_items=len(rows),
        params={"uploaded": True},
        protocol=protocol,
        provenance=EvaluationRun.Provenance.SELF_REPORTED,
    )
    upload_generations_store(run=run, rows=rows)
    transaction.on_commit(lambda: run_dispatch_later(run=run))
    run.upload_warnings = warnings
    return run


UPLOAD_BATCH = 1000


def upload_generations_store(*, run: EvaluationRun, rows: list[UploadedAnswer]) -> None:
    """Store an upload's answers in bulk; each snippet's prompt is built (and hashed) once for all its samples."""
    protocol = protocol_get(name=run.protocol)
    hashes: dict[int, str] = {}
    generations = []
    for row in rows:
        if row.snippet.pk not in hashes:
            prompt = snippet_prompt(
                snippet=row.snippet,
                files=task_files(row.snippet.task),
                with_paper=run.with_paper,
                protocol=protocol,
                annotated=task_annotated(row.snippet.task, row.snippet.file_path),
            )
            hashes[row.snippet.pk] = prompt_hash(prompt)
        generations.append(
            Generation(
                run=run,
                snippet=row.snippet,
                sample=row.sample,
                prompt_hash=hashes[row.snippet.pk],
                raw_answer=row.answer,
                extracted_code=extract_code(row.answer) if row.code is None else row.code,
                latency=0.0,
                cost=None,
                attempts=1,
            )
        )  # what the uploader paid is unknown, not zero
    Generation.objects.bulk_create(generations, batch_size=UPLOAD_BATCH)


def run_dispatch_later(*, run: EvaluationRun) -> None:
    """Queue the run's items from a worker (Celery task `run_dispatch`), not inside the web request."""
    from evaluation import tasks

    # Stored already: the watchdog dispatches the queued run once the broker answers.
    enqueue(
        tasks.run_dispatch,
        run.pk,
        subject=run,
        refused=lambda exc: (
            f"run {run.pk}: the broker refused its dispatch ({exc}); the watchdog dispatches it once the broker answers"
        ),
    )


MAX_REASON_CHARS = 2000


@transaction.atomic
def run_pin(*, run: EvaluationRun, actor) -> EvaluationRun:
    """The model's owner (or a maintainer) makes a completed run the model's leaderboard row for its release and
    setting: later runs and uploads are listed on the model page and never replace it until the pin moves or is
    lifted (selectors.leaderboard_choose is the rule)."""
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


def run_verify(*, run: EvaluationRun, actor, reason: str) -> EvaluationRun:
    """A maintainer vouches for a self-reported upload (e.g. reproduced its answers): it becomes a verified upload,
    recorded with who checked it and why."""
    if not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers may verify a run")
    reason = reason.strip()
    if not reason:
        raise EvaluationError("say why the run is verified (e.g. how its answers were checked)")
    if len(reason) > MAX_REASON_CHARS:
        raise EvaluationError(f"the reason is {len(reason)} characters; at most {MAX_REASON_CHARS}")
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    if run.provenance != EvaluationRun.Provenance.SELF_REPORTED:
        raise EvaluationError(
            f"run {run.pk} is {run.get_provenance_display()}; only self-reported runs can be verified"
        )
    if run.api_base:
        raise EvaluationError(
            f"run {run.pk} was generated at its owner's own endpoint, not uploaded: only uploads "
            "are verified (a run at the provider's own address is verified by itself)"
        )
    if run.status != EvaluationRun.Status.COMPLETED:
        raise EvaluationError(f"run {run.pk} is {run.status}; verify it once it has completed")
    ProvenanceChange.objects.create(
        run=run,
        from_provenance=run.provenance,
        to_provenance=EvaluationRun.Provenance.VERIFIED_UPLOAD,
        actor=actor,
        reason=reason,
    )
    run.provenance = EvaluationRun.Provenance.VERIFIED_UPLOAD
    run.save(update_fields=["provenance"])
    return run
