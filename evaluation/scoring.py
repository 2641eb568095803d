"""Scores of a run (FORMAT.md 8) with bootstrap confidence intervals and pass@k, stored when the run finishes."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal

from django.db import transaction

from benchmarks.models import VersionTask
from benchmarks.paper2code import ItemResult, Score, pass_at_k, score
from benchmarks.paper2code.comparison import Interval, percentiles
from benchmarks.paper2code.metrics import EVALUATED, item_status
from evaluation.models import SCORED_STATUS, EvaluationRun, Generation, Outcome, RunScore

BOOTSTRAP_ITERATIONS = 1000
# The leaderboard's snippet-size buckets: (label, fewest lines of code, most or None).
SIZE_BUCKETS = (("1-2", 1, 2), ("3-5", 3, 5), ("6-10", 6, 10), ("11+", 11, None))


def bootstrap_ci(
    results: Sequence[ItemResult],
    *,
    iterations: int = BOOTSTRAP_ITERATIONS,
    seed: int = 0,
) -> tuple[Interval, Interval]:
    """95% percentile intervals of (pass rate, scaled pass rate), resampling snippets with replacement.

    Each resample keeps all samples of a drawn snippet together and averages the rates over sample indices,
    as `score` does; errors stay out of numerators and denominators.
    """
    snippets = sorted({r.snippet_id for r in results})
    samples = sorted({r.sample for r in results})
    if not snippets:
        return Interval(0.0, 0.0), Interval(0.0, 0.0)
    index = {s: i for i, s in enumerate(snippets)}
    # Per sample index, per snippet: (evaluated, passed, evaluated LoC, passed LoC).
    table = {s: [(0, 0, 0, 0)] * len(snippets) for s in samples}
    for r in results:
        if r.status in EVALUATED:
            passed = r.status == "passed"
            table[r.sample][index[r.snippet_id]] = (1, int(passed), r.loc, r.loc if passed else 0)
    rng = random.Random(seed)
    rates: list[float] = []
    scaled: list[float] = []
    for _ in range(iterations):
        drawn = rng.choices(range(len(snippets)), k=len(snippets))
        per_sample = []
        for s in samples:
            rows = table[s]
            n = sum(rows[i][0] for i in drawn)
            if n:
                per_sample.append(
                    (
                        100.0 * sum(rows[i][1] for i in drawn) / n,
                        100.0 * sum(rows[i][3] for i in drawn) / (sum(rows[i][2] for i in drawn) or 1),
                    )
                )
        if per_sample:
            rates.append(sum(p for p, _ in per_sample) / len(per_sample))
            scaled.append(sum(q for _, q in per_sample) / len(per_sample))
    return percentiles(rates), percentiles(scaled)


def pass_at_ks(results: Sequence[ItemResult], samples: int) -> dict[str, dict[str, float]]:
    """Unbiased pass@k for k = 1..samples, plain and LoC-weighted, over snippets with enough evaluated samples."""
    if samples <= 1:
        return {}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in results:
        if r.status in EVALUATED:
            row = counts[r.snippet_id]
            row[0] += 1
            row[1] += r.status == "passed"
            row[2] = r.loc
    plain: dict[str, float] = {}
    scaled: dict[str, float] = {}
    for k in range(1, samples + 1):
        rows = [(pass_at_k(n, c, k), loc) for n, c, loc in counts.values() if n >= k]
        if rows:
            plain[str(k)] = 100.0 * sum(p for p, _ in rows) / len(rows)
            scaled[str(k)] = 100.0 * sum(p * loc for p, loc in rows) / (sum(loc for _, loc in rows) or 1)
    return {"pass@k": plain, "scaled_pass@k": scaled}


def run_item_results(run: EvaluationRun) -> dict[int | None, list[ItemResult]]:
    """Outcomes as ItemResults, overall (key None) and per paper id."""
    grouped: dict[int | None, list[ItemResult]] = defaultdict(list)
    rows = Outcome.objects.filter(run=run).values_list(
        "snippet_id", "snippet__loc", "sample", "status", "snippet__task__paper_id"
    )
    for snippet_id, loc, sample, status, paper_id in rows:
        item = ItemResult(snippet_id=str(snippet_id), loc=loc, sample=sample, status=item_status(status))
        grouped[None].append(item)
        grouped[paper_id].append(item)
    return grouped


def size_buckets(results: Sequence[ItemResult]) -> dict[str, dict[str, int]]:
    """Scored outcomes and passes per snippet-size bucket (errors are not scored; a flagged item is not passed)."""
    table: dict[str, dict[str, int]] = {}
    for r in results:
        label = next(
            (label for label, low, high in SIZE_BUCKETS if r.loc >= low and (high is None or r.loc <= high)), None
        )
        if r.status in EVALUATED and label is not None:
            cell = table.setdefault(label, {"items": 0, "passed": 0})
            cell["items"] += 1
            cell["passed"] += r.status == "passed"
    return table


# One outcome as scoring reads it: (snippet id, loc, sample, status, paper id, split).
OutcomeRow = tuple[int, int, int, str, int, str]
# One generation's usage: (paper id, split, prompt tokens, completion tokens, cost).
UsageRow = tuple[int, str, int | None, int | None, Decimal | None]


def size_buckets_by_split(outcomes: Sequence[OutcomeRow]) -> dict[str, dict[str, dict[str, int]]]:
    """The size buckets of a run's overall row (key "") and of each split's row (not in `score_rows`, whose rows
    an earlier migration stores whole in the RunScore of its time)."""
    groups: dict[str, list[ItemResult]] = defaultdict(list)
    for snippet_id, loc, sample, status, _paper_id, split in outcomes:
        item = ItemResult(snippet_id=str(snippet_id), loc=loc, sample=sample, status=item_status(status))
        groups[""].append(item)
        groups[split].append(item)
    return {split: size_buckets(results) for split, results in groups.items()}


def usage_of(usage: Sequence[UsageRow], *, split: str, paper_id: int | None) -> list[UsageRow]:
    """The usage rows of one aggregate: a split's ("" all) and, with `paper_id`, one paper's."""
    return [u for u in usage if (paper_id is None or u[0] == paper_id) and (not split or u[1] == split)]


def usage_totals(used: Sequence[UsageRow]) -> tuple[int | None, int | None, Decimal | None]:
    """Prompt tokens, completion tokens and cost of an aggregate, each None when any answer's is unknown (an upload,
    a provider that said none): an unknown total is said so, never shown as 0 or as an undercount."""

    def total(values: list, zero):
        return None if any(v is None for v in values) else sum(values, zero)

    return total([u[2] for u in used], 0), total([u[3] for u in used], 0), total([u[4] for u in used], Decimal(0))


def score_rows(*, outcomes: Sequence[OutcomeRow], usage: Sequence[UsageRow], samples: int, seed: int) -> list[dict]:
    """The RunScore fields of a run: overall, per split and per paper (plain data, so migrations can call it)."""
    groups: dict[tuple[str, int | None], list[ItemResult]] = defaultdict(list)
    for snippet_id, loc, sample, status, outcome_paper_id, split in outcomes:
        item = ItemResult(snippet_id=str(snippet_id), loc=loc, sample=sample, status=item_status(status))
        for key in (("", None), (split, None), ("", outcome_paper_id)):
            groups[key].append(item)
    rows = []
    for (split, paper_id), results in groups.items():
        summary: Score = score(results)
        rate_ci, scaled_ci = bootstrap_ci(results, seed=seed)
        prompt_tokens, completion_tokens, cost = usage_totals(usage_of(usage, split=split, paper_id=paper_id))
        rows.append(
            dict(
                paper_id=paper_id,
                split=split,
                items=summary.items,
                passed=summary.passed,
                failed=summary.failed,
                errors=summary.errors,
                flagged=summary.flagged,
                pass_rate=summary.pass_rate,
                pass_rate_std=summary.pass_rate_std,
                scaled_pass_rate=summary.scaled_pass_rate,
                scaled_pass_rate_std=summary.scaled_pass_rate_std,
                pass_rate_ci_low=rate_ci.low,
                pass_rate_ci_high=rate_ci.high,
                scaled_ci_low=scaled_ci.low,
                scaled_ci_high=scaled_ci.high,
                pass_at_k=pass_at_ks(results, samples),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost=cost,
            )
        )
    return rows


def run_score_inputs(*, run, outcome_model, generation_model, membership_model) -> tuple[list, list]:
    """Outcome and usage rows of a run, with each item's split in the run's version (models passed in, so a
    migration can give its historical ones)."""
    splits = dict(membership_model.objects.filter(version_id=run.version_id).values_list("task_id", "split"))
    outcomes = [
        (snippet_id, loc, sample, status, paper_id, splits.get(task_id, "public"))
        for snippet_id, loc, sample, status, paper_id, task_id in outcome_model.objects.filter(run=run)
        .annotate(scored=SCORED_STATUS)
        .values_list("snippet_id", "snippet__loc", "sample", "scored", "snippet__task__paper_id", "snippet__task_id")
    ]
    usage = [
        (paper_id, splits.get(task_id, "public"), prompt, completion, cost)
        for paper_id, task_id, prompt, completion, cost in generation_model.objects.filter(run=run).values_list(
            "snippet__task__paper_id", "snippet__task_id", "prompt_tokens", "completion_tokens", "cost"
        )
    ]
    return outcomes, usage


# One outcome as item statistics read it: (snippet id, status, category, split).
ItemOutcomeRow = tuple[int, str, str, str]
# A failed outcome without a category (e.g. reported results, which say only passed or failed).
UNCLASSIFIED = "unclassified"
# An answer awaiting review: not passed, and in a category of its own until a maintainer decides.
FLAGGED = "flagged"


def item_statistics(*, outcomes: Sequence[ItemOutcomeRow]) -> dict[str, dict]:
    """Per split ("" all, "public", "held_out"): each scored item's share of passed samples, and the scored
    answers per outcome category (passed or the failure's category); errors are not scored, a flag is
    scored as not passed."""
    counts: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    categories: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for snippet_id, status, category, split in outcomes:
        if status not in EVALUATED:
            continue
        if status == Outcome.Status.FLAGGED:
            label = FLAGGED
        else:
            label = "passed" if status == Outcome.Status.PASSED else category or UNCLASSIFIED
        for key in ("", split):
            counts[key][snippet_id][0] += 1
            counts[key][snippet_id][1] += status == Outcome.Status.PASSED
            categories[key][label] += 1
    return {
        key: {
            "item_passes": {str(i): passed / n for i, (n, passed) in sorted(items.items())},
            "categories": dict(categories[key]),
        }
        for key, items in counts.items()
    }


def run_item_inputs(*, run, outcome_model, membership_model) -> list[ItemOutcomeRow]:
    """The run's outcomes with each item's split (models passed in, so a migration can give its historical ones)."""
    splits = dict(membership_model.objects.filter(version_id=run.version_id).values_list("task_id", "split"))
    return [
        (snippet_id, status, category, splits.get(task_id, "public"))
        for snippet_id, status, category, task_id in outcome_model.objects.filter(run=run)
        .annotate(scored=SCORED_STATUS)
        .values_list("snippet_id", "scored", "category", "snippet__task_id")
    ]


def run_scores_compute(*, run: EvaluationRun) -> list[RunScore]:
    """The run's aggregates, computed (seconds on a 20,000-outcome run) but not stored: no lock is held meanwhile."""
    outcomes, usage = run_score_inputs(
        run=run, outcome_model=Outcome, generation_model=Generation, membership_model=VersionTask
    )
    rows = score_rows(outcomes=outcomes, usage=usage, samples=run.samples, seed=run.pk)
    buckets = size_buckets_by_split(outcomes)
    rows = [
        {**fields, "size_buckets": buckets.get(fields["split"], {}) if fields["paper_id"] is None else {}}
        for fields in rows
    ]
    if run.provenance == EvaluationRun.Provenance.REPORTED:  # published results say nothing of cost or tokens
        rows = [{**fields, "cost": None, "prompt_tokens": None, "completion_tokens": None} for fields in rows]
    items = item_statistics(outcomes=run_item_inputs(run=run, outcome_model=Outcome, membership_model=VersionTask))
    gaming = run_test_gaming(run=run)
    return [
        RunScore(
            run=run,
            **fields,
            **(items.get(fields["split"], {}) if fields["paper_id"] is None else {}),
            test_gaming=gaming.get(fields["split"], 0) if fields["paper_id"] is None else 0,
        )
        for fields in rows
    ]


def run_test_gaming(*, run: EvaluationRun) -> dict[str, int]:
    """Per split ("" all, "public", "held_out"): the run's items whose tests passed while the sealed replay disagreed
    (what was measured, reviewed or not), stored with its aggregates so no page reads outcomes for it."""
    from evaluation.judging.verdict import REPLAY_DISAGREES

    splits = dict(VersionTask.objects.filter(version_id=run.version_id).values_list("task_id", "split"))
    counts: dict[str, int] = defaultdict(int)
    rows = Outcome.objects.filter(run=run, measured_status=Outcome.Status.PASSED).values_list(
        "snippet__task_id", "findings"
    )
    for task_id, findings in rows:
        if any(isinstance(f, dict) and f.get("kind") == REPLAY_DISAGREES for f in findings or ()):
            for key in ("", splits.get(task_id, "public")):
                counts[key] += 1
    return counts


def run_scores_write(*, run: EvaluationRun, scores: list[RunScore]) -> RunScore | None:
    """Replace the run's stored aggregates with `scores`, in one short transaction; returns the overall score."""
    with transaction.atomic():
        RunScore.objects.filter(run=run).delete()
        stored = RunScore.objects.bulk_create(scores)
    return next((r for r in stored if r.paper_id is None and r.split == ""), None)


def run_outcomes_state(*, run: EvaluationRun) -> tuple:
    """What the aggregates depend on that can change after an outcome is stored (new outcomes, reviews): compared
    before computing and under the lock, so scores computed outside it are written only if still true."""
    from django.db.models import Count, Max

    state = Outcome.objects.filter(run=run).aggregate(n=Count("pk"), reviewed=Max("reviewed_at"))
    return state["n"], state["reviewed"]


def run_scores_store(*, run: EvaluationRun) -> RunScore | None:
    """Compute and store the run's aggregates, replacing earlier ones; returns the overall score."""
    return run_scores_write(run=run, scores=run_scores_compute(run=run))
