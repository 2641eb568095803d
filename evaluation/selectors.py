"""Reads for evaluation: the items of a run, what is missing, prompts, progress."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from benchmarks.models import Snippet
from benchmarks.selectors import snippet_prompt, version_snippets
from evaluation.models import EvaluationRun, Generation, Outcome
from evaluation.taskfiles import task_files


def run_snippets(run: EvaluationRun) -> QuerySet[Snippet]:
    return version_snippets(version=run.version).order_by("pk")


def run_items(run: EvaluationRun) -> list[tuple[int, int]]:
    """Every (snippet id, sample) of the run."""
    ids = list(run_snippets(run).values_list("pk", flat=True))
    return [(snippet_id, sample) for snippet_id in ids for sample in range(run.samples)]


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
    generated: int

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


def run_progress(run: EvaluationRun) -> Progress:
    outcomes = Outcome.objects.filter(run=run)
    counts = {s: 0 for s in Outcome.Status.values}
    for status in outcomes.values_list("status", flat=True):
        counts[status] += 1
    return Progress(total=run.total_items, done=sum(counts.values()), passed=counts["passed"],
                    failed=counts["failed"], errors=counts["error"],
                    generated=Generation.objects.filter(run=run).count())


def item_prompt(snippet: Snippet, *, with_paper: bool, protocol: str) -> str:
    """The prompt for one item, from the worker's cached task files."""
    return snippet_prompt(snippet=snippet, files=task_files(snippet.task), with_paper=with_paper, protocol=protocol)
