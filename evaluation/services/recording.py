"""Recording an item's results: its generation, its outcome (with the environment lock and fork server events a
worker reports), and a maintainer's review of a flagged outcome."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from benchmarks.models import Snippet
from benchmarks.paper2code import code_indent, extract_code, prompt_hash
from benchmarks.selectors import user_is_maintainer
from common.canonical import canonical_hash
from evaluation.models import EnvironmentLock, EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.outcomes import Verdict, agent_error_held, tail
from evaluation.scoring import run_scores_store
from evaluation.selectors.items import item_prompt
from evaluation.services.models import EvaluationError
from operations.events import Kind, event_record
from sandbox import ExecResult, Limits

MAX_REVIEW_REASON_CHARS = 2000


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
        prompt_tokens=0,  # no model is called: nothing spent, known
        completion_tokens=0,
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
    agent_acted: bool = False,
) -> tuple[Outcome, bool]:
    """Store the outcome of an item exactly once (unique per run, snippet, sample); returns (outcome, created).

    `agent_acted`: the item's agent ran a command or edited a file, so an infrastructure error counts as not passed
    until reviewed (`outcomes.agent_error_held`); every error path of an agent item says whether it did."""
    verdict = agent_error_held(verdict, agent_acted=agent_acted)
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
def outcome_review(*, outcome: Outcome, reviewer, decision: str, reason: str = "") -> Outcome:
    """A maintainer's decision on a flagged outcome, with their reason if they give one: confirmed tampering fails
    it, cleared restores what the test said; a completed run's stored scores are recomputed either way. For an error
    after an agent's commands, confirmed counts it as not passed (the agent's doing) and cleared sets it aside as the
    platform's error (left out of the score, as errors are)."""
    if not user_is_maintainer(user=reviewer):
        raise EvaluationError("only maintainers review flagged outcomes")
    reason = (reason or "").strip()
    if len(reason) > MAX_REVIEW_REASON_CHARS:
        raise EvaluationError(f"the reason is {len(reason)} characters; at most {MAX_REVIEW_REASON_CHARS}")
    outcome = Outcome.objects.select_for_update().get(pk=outcome.pk)
    if outcome.status != Outcome.Status.FLAGGED:
        raise EvaluationError(f"outcome {outcome.pk} is not flagged (it is {outcome.status})")
    if decision == Outcome.Review.CONFIRMED:
        outcome.status = Outcome.Status.FAILED
        if not outcome.error_held:  # a held error keeps its category: counted, not called tampering
            outcome.category = Outcome.Category.TAMPERING
    elif decision == Outcome.Review.CLEARED:
        if outcome.measured_status not in (Outcome.Status.PASSED, Outcome.Status.FAILED, Outcome.Status.ERROR):
            raise EvaluationError(f"outcome {outcome.pk} has no measured verdict to restore")
        outcome.status = outcome.measured_status
    else:
        raise EvaluationError(f"unknown review decision {decision!r}: choose confirmed or cleared")
    outcome.review, outcome.reviewed_by, outcome.reviewed_at = decision, reviewer, timezone.now()
    outcome.review_reason = reason
    outcome.detail = f"{outcome.detail}\n{outcome.review_said} (reviewed by {reviewer.get_username()})"[:2000]
    outcome.save(
        update_fields=["status", "category", "review", "review_reason", "reviewed_by", "reviewed_at", "detail"]
    )
    if outcome.run.status == EvaluationRun.Status.COMPLETED:
        run_scores_store(run=outcome.run)
    return outcome


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
