"""The evaluation pipeline's steps for one item, which the Celery tasks (evaluation.tasks) run: load the item and
check its message is current, wait out a provider's rate limit, reuse an earlier answer, ask the model, test the
answer, map failures to outcomes, retry or record an infrastructure failure, and feed the run on.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import TypeGuard

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, DataError

from benchmarks import visibility
from benchmarks.models import Snippet
from evaluation import services
from evaluation.judging.step import item_judge
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome
from evaluation.outcomes import Verdict, judging_failed, model_call_failed
from evaluation.routing import GPU_QUEUE, ITEM_EVALUATE, ITEM_GENERATE
from evaluation.selectors.held_out import run_sends_held_out
from evaluation.selectors.items import item_prompt, run_snippets
from operations.enqueue import task_named
from sandbox import SandboxError

logger = logging.getLogger(__name__)
SANDBOX_RETRIES = 3


def item(run_id: int, snippet_id: int) -> tuple[EvaluationRun | None, Snippet]:
    # Not the release's manifest and changelog: they grow with the release and no item needs them.
    run = (
        EvaluationRun.objects.select_related("model", "version")
        .defer("version__manifest", "version__changelog")
        .filter(pk=run_id)
        .first()
    )
    return run, Snippet.objects.select_related("task", "task__paper").get(pk=snippet_id)


def provider_wait(provider: str) -> float:
    """Seconds to wait before the next call to this provider under LLM_RATE_LIMITS (calls per minute), or 0."""
    limit = settings.LLM_RATE_LIMITS.get(provider)
    if not limit:
        return 0.0
    window = int(time.time() // 60)
    key = f"llm-rate:{provider}:{window}"
    cache.add(key, 0, timeout=120)
    if cache.incr(key) <= int(limit):
        return 0.0
    return 60 - time.time() % 60 + 0.1


def retry_or_error(
    task,
    *,
    run: EvaluationRun,
    snippet: Snippet,
    sample: int,
    exc: SandboxError,
    generation: Generation | None = None,
    agent_acted: bool = False,
) -> None:
    """Retry an infrastructure failure with backoff; once retries are spent, record the item as an error (held as not
    passed when an agent's commands came first: `agent_acted`, see outcomes.agent_error_held)."""
    if task.request.retries < SANDBOX_RETRIES:
        logger.warning("sandbox failure on run %s item %s/%s, retrying: %s", run.pk, snippet.pk, sample, exc)
        raise task.retry(exc=exc, countdown=2**task.request.retries)
    verdict = Verdict(Outcome.Status.ERROR, Outcome.Category.INFRASTRUCTURE, f"sandbox failure: {exc}")
    services.outcome_record(
        run=run, snippet=snippet, sample=sample, verdict=verdict, generation=generation, agent_acted=agent_acted
    )
    item_ended(run)


def judging_failed_record(
    *, run: EvaluationRun, snippet: Snippet, sample: int, generation: Generation | None, exc: Exception
) -> None:
    logger.exception("run %s item %s/%s could not be judged or recorded", run.pk, snippet.pk, sample, exc_info=exc)
    services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=judging_failed(exc), generation=generation)


def item_current(run: EvaluationRun | None, epoch: int | None) -> TypeGuard[EvaluationRun]:
    """Whether a message for an item of `run` is still wanted: the run is active and the message is of its current
    feed (a message queued before a resume or a redispatch is a copy of one the new feed queues again). A message
    without an epoch was queued before epochs existed."""
    if run is None or not run.is_active:
        return False
    if epoch is not None and epoch != run.feed_epoch:
        # Debug: nothing is lost (the current feed queues the item again), and a redispatch leaves a run's share of
        # such messages, on every fresh `make run` too (the publish feeds its calibration runs, demo_populate again).
        logger.debug("run %s: a message of its feed %s dropped (the run is on feed %s)", run.pk, epoch, run.feed_epoch)
        return False
    return True


def item_ended(run: EvaluationRun) -> None:
    """An item of the run has its outcome: finish the run if it was the last, else feed the run its next item."""
    if not services.run_maybe_finish(run=run):
        services.run_feed(run=run)


def held_out_withdrawn(*, run: EvaluationRun, snippet: Snippet, sample: int) -> bool:
    """A held-out item the run covered at its start but may no longer send (a maintainer's role revoked,
    HELD_OUT_PROVIDERS changed): its prompt stays here and it ends as an error, never scored, so the run can still
    finish. True when so (the outcome recorded); single-shot and agent items ask before their first model call."""
    if (
        not run.covers_held_out
        or run_sends_held_out(run=run)
        or visibility.items_public(version=run.version).filter(pk=snippet.pk).exists()
    ):
        return False
    logger.error(
        "run %s may no longer send held-out item %s to %s; its prompt is not sent",
        run.pk,
        snippet.pk,
        run.api_base or run.provider,
    )
    verdict = Verdict(
        Outcome.Status.ERROR,
        Outcome.Category.INFRASTRUCTURE,
        "not sent: the run's endpoint is no longer trusted with held-out prompts",
    )
    services.outcome_record(run=run, snippet=snippet, sample=sample, verdict=verdict)
    services.run_maybe_finish(run=run)
    return True


def generate(task, run_id: int, snippet_id: int, sample: int, epoch: int | None = None) -> None:
    """Ask the model for one item, store the answer, and hand the item to the sandbox queue."""
    from evaluation.llm import ModelCallError, complete

    run, snippet = item(run_id, snippet_id)
    if not item_current(run, epoch):
        return
    if not run_snippets(run=run).filter(pk=snippet.pk).exists():
        logger.error("run %s does not cover item %s (held out?); its prompt is not sent", run.pk, snippet.pk)
        return
    if not Generation.objects.filter(run=run, snippet=snippet, sample=sample).exists():
        if held_out_withdrawn(run=run, snippet=snippet, sample=sample):
            return
        wait = provider_wait(run.provider)
        if wait:
            raise task.retry(countdown=wait)
        try:
            prompt = item_prompt(snippet, with_paper=run.with_paper, protocol=run.protocol)
        except SandboxError as exc:  # the task's files could not be read from storage
            retry_or_error(task, run=run, snippet=snippet, sample=sample, exc=exc)
            return
        earlier = services.generation_reusable(run=run, snippet=snippet, sample=sample, prompt=prompt)
        if earlier is not None:  # unchanged item on a new release: same model, settings and prompt
            services.generation_record(
                run=run,
                snippet=snippet,
                sample=sample,
                prompt=prompt,
                raw_answer=earlier.raw_answer,
                prompt_tokens=earlier.prompt_tokens,
                completion_tokens=earlier.completion_tokens,
                latency=earlier.latency,
                cost=earlier.cost,
                attempts=0,
            )
            task_named(ITEM_EVALUATE).delay(run_id, snippet_id, sample, epoch)
            return
        try:
            completion = complete(services.model_call(run=run), prompt)
        except (services.EvaluationError, ModelCallError) as exc:
            generation = services.generation_record(
                run=run, snippet=snippet, sample=sample, prompt=prompt, error=str(exc)
            )
            services.outcome_record(
                run=run,
                snippet=snippet,
                sample=sample,
                verdict=model_call_failed(str(exc), run=run),
                generation=generation,
            )
            if not services.run_pause_if_failing(run=run):
                item_ended(run)
            return
        services.generation_record(
            run=run,
            snippet=snippet,
            sample=sample,
            prompt=prompt,
            raw_answer=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency=completion.latency,
            cost=completion.cost,
            attempts=completion.attempts,
        )
    task_named(ITEM_EVALUATE).delay(run_id, snippet_id, sample, epoch)


def evaluate(task, run_id: int, snippet_id: int, sample: int, epoch: int | None = None) -> None:
    """Test one item's answer in the sandbox and record its outcome (once)."""
    run, snippet = item(run_id, snippet_id)
    if not item_current(run, epoch):
        return
    if Outcome.objects.filter(run=run, snippet=snippet, sample=sample).exists():
        item_ended(run)
        return
    generation = Generation.objects.filter(run=run, snippet=snippet, sample=sample).first()
    if generation is None and run.model.kind == ModelEntry.Kind.LITELLM:
        task_named(ITEM_GENERATE).delay(run_id, snippet_id, sample, epoch)
        return
    if snippet.task.needs_gpu and not settings.SANDBOX_GPU:
        # Misrouted (a worker consuming `gpu` without a GPU): back to a GPU worker, never failed here for lack of one.
        logger.warning(
            "item %s of run %s needs a GPU and worker %s has none (SANDBOX_GPU off); queued on `%s` again",
            snippet.pk,
            run.pk,
            task.request.hostname,
            GPU_QUEUE,
        )
        task_named(ITEM_EVALUATE).apply_async((run_id, snippet_id, sample, epoch), queue=GPU_QUEUE, countdown=30)
        return
    try:
        if generation is None:
            generation = services.calibration_generation(run=run, snippet=snippet, sample=sample)
        item_judge(
            run=run,
            snippet=snippet,
            sample=sample,
            generation=generation,
            worker=task.request.hostname or f"inline@{socket.gethostname()}",
        )
    except SandboxError as exc:
        retry_or_error(task, run=run, snippet=snippet, sample=sample, exc=exc, generation=generation)
        return
    except DataError as exc:
        # What the item stored was refused (it is the answer's, text or numbers the database cannot hold): held.
        judging_failed_record(run=run, snippet=snippet, sample=sample, generation=generation, exc=exc)
    except DatabaseError:
        raise  # an outage or a schema not yet migrated: the item is queued again (database_outage_outlasted)
    except Exception as exc:
        # Anything else would fail every delivery alike: the item is held for review rather than lost and queued
        # again forever (attack9: an answer's output the database refused held a worker slot for good).
        judging_failed_record(run=run, snippet=snippet, sample=sample, generation=generation, exc=exc)
    item_ended(run)
