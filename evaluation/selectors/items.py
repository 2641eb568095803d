"""A run's items: which it covers, the order the feeder queues them, what is missing, the prompt, its progress."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Case,
    Count,
    Q,
    QuerySet,
    Value,
    When,
)

from benchmarks import visibility
from benchmarks.models import Snippet
from benchmarks.selectors import (
    protocol_get,
    snippet_prompt,
    version_snippets,
)
from evaluation.models import (
    HUMAN_MODE,
    SCORED_STATUS,
    EvaluationRun,
    Generation,
    Outcome,
)
from evaluation.taskfiles import task_annotated, task_files
from operations.broker import queue_consumers


def run_snippets(*, run: EvaluationRun) -> QuerySet[Snippet]:
    """The items a run evaluates (all splits when it covers held-out ones, the public split else), in item order; a
    person's attempt (mode human) evaluates the one item it answers."""
    if run.mode == HUMAN_MODE:
        return version_snippets(version=run.version, split=visibility.PUBLIC).filter(
            pk__in=Generation.objects.filter(run=run).values("snippet_id")
        )
    return version_snippets(version=run.version, split=None if run.covers_held_out else visibility.PUBLIC).order_by(
        "pk"
    )


def run_gpu_notice(*, run: EvaluationRun) -> str | None:
    """Why items of an active run wait: tasks that need a GPU while no worker consuming `gpu` answers (None: none
    waits for a GPU, or a GPU worker is there)."""
    from evaluation.routing import GPU_QUEUE

    if not run.is_active:
        return None
    waiting = (
        run_snippets(run=run)
        .filter(task__extra_metadata__gpu=True)
        .exclude(pk__in=Outcome.objects.filter(run=run).values("snippet_id"))
    )
    tasks = waiting.values("task_id").distinct().count()
    if not tasks:
        return None
    workers = queue_consumers(GPU_QUEUE)
    need = f"{tasks} task{'s' if tasks != 1 else ''} need{'s' if tasks == 1 else ''} a GPU"
    if workers is None:
        return f"{need}; whether a GPU worker is registered cannot be told (the workers do not answer)"
    if not workers:
        return f"{need}; no GPU worker is registered: their items wait on the `gpu` queue until one starts"
    return None


def run_items(run: EvaluationRun) -> list[tuple[int, int]]:
    """Every (snippet id, sample) of the run."""
    ids = list(run_snippets(run=run).values_list("pk", flat=True))
    return [(snippet_id, sample) for snippet_id in ids for sample in range(run.samples)]


def run_feed_order(run: EvaluationRun, start: int = 0, count: int | None = None) -> list[tuple[int, int]]:
    """Every (snippet id, sample) of the run in the order the feeder queues them: grouped by environment, then
    paper and file, each snippet's samples together, so a worker's fork server sees few import sets at a time. Items
    of tasks that need a GPU come last: they wait on the `gpu` queue, and fed first they would hold the run's whole
    share in flight while no GPU worker takes them.

    `start` and `count`: only that window of the order, read as such from the database (the feeder tops a run up by
    an item or two after each item ends; reading the whole order each time grew with the run's size)."""
    needs_gpu = Case(When(task__extra_metadata__gpu=True, then=Value(1)), default=Value(0))
    ids = (
        run_snippets(run=run)
        .order_by(needs_gpu, "task__environment_hash", "task__paper__slug", "file_path", "pk")
        .values_list("pk", flat=True)
    )
    first = start // run.samples
    ids = ids[first:] if count is None else ids[first : -(-(start + count) // run.samples)]
    items = [(snippet_id, sample) for snippet_id in ids for sample in range(run.samples)]
    skip = start - first * run.samples
    return items[skip:] if count is None else items[skip : skip + count]


def run_items_missing(run: EvaluationRun) -> list[tuple[int, int]]:
    """Items without an outcome yet: what a resume dispatches."""
    done = set(Outcome.objects.filter(run=run).values_list("snippet_id", "sample"))
    return [item for item in run_items(run) if item not in done]


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    passed: int
    failed: int
    errors: int
    generated: int  # answers the model gave (a failed call is no answer)
    flagged: int = 0
    call_failures: int = 0

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


def run_progress(run: EvaluationRun) -> Progress:
    # Polled every few seconds while a run goes: count in the database, not row by row here.
    counts = {s: 0 for s in Outcome.Status.values}
    scored = Outcome.objects.filter(run=run).annotate(scored=SCORED_STATUS)
    counts.update(scored.values_list("scored").annotate(n=Count("id")).order_by())
    return Progress(
        total=run.total_items,
        done=sum(counts.values()),
        passed=counts["passed"],
        failed=counts["failed"],
        errors=counts["error"],
        flagged=counts["flagged"],
        **Generation.objects.filter(run=run).aggregate(
            generated=Count("id", filter=Q(error="")), call_failures=Count("id", filter=~Q(error=""))
        ),
    )


def item_prompt(snippet: Snippet, *, with_paper: bool, protocol: str) -> str:
    """The prompt for one item in the named protocol, from the worker's cached task files."""
    return snippet_prompt(
        snippet=snippet,
        files=task_files(snippet.task),
        with_paper=with_paper,
        protocol=protocol_get(name=protocol),
        annotated=task_annotated(snippet.task, snippet.file_path),
    )
