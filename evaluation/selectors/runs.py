"""Who sees which runs, outcomes and scores; which run is a model's leaderboard row; a user's models and runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import (
    Count,
    F,
    QuerySet,
)

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion
from benchmarks.selectors import (
    papers_as_released,
    user_is_maintainer,
)
from evaluation.models import (
    HUMAN_MODE,
    EvaluationRun,
    ModelEntry,
    Outcome,
    RunScore,
)


def runs_visible(*, user) -> QuerySet[EvaluationRun]:
    """Runs on versions the user may see (drafts have none, but the rule is the version's). A person's attempt's run
    is theirs alone: its result is shown on the attempt's page (humans/), never as a run."""
    runs = EvaluationRun.objects.exclude(mode=HUMAN_MODE)
    if user_is_maintainer(user=user):
        return runs
    return runs.exclude(version__status=BenchmarkVersion.Status.DRAFT)


def outcomes_visible(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """Per-item outcomes (status, detail, output tails) and their answers: public items for all, held-out for
    maintainers."""
    return outcomes_of_items_visible(outcomes=Outcome.objects.filter(run=run), user=user, version=run.version_id)


def outcomes_of_items_visible(*, outcomes: QuerySet[Outcome], user, version: int | None = None) -> QuerySet[Outcome]:
    """`outcomes` narrowed to those of items the user may see: public items for all, held-out for maintainers;
    `version` is the release whose split counts (None: each outcome's run's own, for outcomes across runs)."""
    if visibility.user_sees_held_out(user=user):
        return outcomes
    return outcomes.filter(
        snippet__task__memberships__version=F("run__version") if version is None else version,
        snippet__task__memberships__split=visibility.PUBLIC,
    )


def split_scores_itemized(*, runs: list[EvaluationRun], user) -> QuerySet[RunScore]:
    """The stored aggregate of each run whose finer breakdowns (e.g. by snippet size) the user may see: over every
    item for maintainers, over the public split for everyone else."""
    split = RunScore.Split.ALL if visibility.user_sees_held_out(user=user) else RunScore.Split.PUBLIC
    return RunScore.objects.filter(run__in=runs, paper__isnull=True, split=split)


def paper_scores_visible(*, run: EvaluationRun, user) -> list[RunScore]:
    """Per-paper scores of a run, each paper as its release froze it: a held-out paper's score is as fine-grained as
    its few items, so maintainers only."""
    scores = run.scores.filter(paper__isnull=False, split="").select_related("paper").order_by("paper__slug")
    if not visibility.user_sees_held_out(user=user):
        scores = scores.filter(paper__in=visibility.papers_visible(version=run.version, user=user))
    shown = list(scores)
    for score, paper in zip(
        shown, papers_as_released(version=run.version, papers=[s.paper for s in shown if s.paper]), strict=True
    ):
        score.paper = paper
    return shown


_NEVER = datetime.min.replace(tzinfo=UTC)  # a run's date when it has none


# Which run is a model's row, as the leaderboard, the hardest-snippets page and the model page say it.
LEADERBOARD_RUN_RULE = "the run its owner pinned, else the latest completed run"


def leaderboard_choose(runs: Iterable[EvaluationRun]) -> dict[tuple[int, int, str, bool, str], EvaluationRun]:
    """The one rule for a model's leaderboard row per (release, model, mode, with/without paper, scaffold): of the
    completed
    runs,
    the one its owner pinned, else the latest finished. So a new run or upload never replaces a pinned row; the
    model page lists every run with its score, and its owner moves the pin."""
    chosen: dict[tuple[int, int, str, bool, str], EvaluationRun] = {}
    for run in runs:
        if run.status != EvaluationRun.Status.COMPLETED:
            continue
        # An agent run is another setting of the model, never a newer row of its single-shot self; so is an agent
        # run under another scaffold (the platform's loop, a Harbor agent).
        key = (run.version_id, run.model_id, run.mode, run.with_paper, run.scaffold)
        held = chosen.get(key)
        if held is None or _preference(run) > _preference(held):
            chosen[key] = run
    return chosen


def _preference(run: EvaluationRun) -> tuple[bool, datetime, int]:
    return run.pinned_at is not None, run.finished_at or _NEVER, run.pk


def repeat_runs(*, run: EvaluationRun) -> list[int]:
    """The ids of the runs started together with `run` (its repeat group), oldest first; [] for a run started
    alone."""
    if run.repeat_group is None:
        return []
    return list(EvaluationRun.objects.filter(repeat_group=run.repeat_group).order_by("pk").values_list("pk", flat=True))


CALIBRATION_KINDS = (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER)


def calibration_models() -> QuerySet[ModelEntry]:
    """The built-in calibration models whose runs are every release's reference lines (made by a migration)."""
    return ModelEntry.objects.filter(kind__in=CALIBRATION_KINDS, owner__isnull=True).order_by("kind", "name")


@dataclass
class ModelRun:
    """One run of a model as its page lists it: the overall score, and whether it is the model's leaderboard row in
    its release and setting."""

    run: EvaluationRun
    score: RunScore | None
    on_leaderboard: bool


def model_runs(*, model: ModelEntry) -> list[ModelRun]:
    """A model's runs on visible (published or deprecated) versions, newest first, with the overall score and
    which of them are its leaderboard rows (the rule of leaderboard_choose)."""
    runs = list(
        model.runs.exclude(version__status=BenchmarkVersion.Status.DRAFT)
        .exclude(mode=HUMAN_MODE)  # a person's results are theirs (humans/)
        .select_related("version", "model")
    )
    scores = {s.run_id: s for s in RunScore.objects.filter(run__in=runs, paper__isnull=True, split="")}
    chosen = {run.pk for run in leaderboard_choose(runs).values()}
    return [ModelRun(run=run, score=scores.get(run.pk), on_leaderboard=run.pk in chosen) for run in runs]


def models_owned(*, user) -> QuerySet[ModelEntry]:
    """The models a user registered, with how many runs each has, newest first."""
    return ModelEntry.objects.filter(owner=user).annotate(run_count=Count("runs")).order_by("-pk")


def runs_started(*, user) -> list[tuple[EvaluationRun, RunScore | None]]:
    """The runs a user started or uploaded, newest first, with the overall score of those completed."""
    runs = list(EvaluationRun.objects.filter(created_by=user).select_related("model", "version"))
    scores = {s.run_id: s for s in RunScore.objects.filter(run__in=runs, paper__isnull=True, split="")}
    return [(run, scores.get(run.pk)) for run in runs]


def run_split_scores(*, run: EvaluationRun, user) -> list[RunScore]:
    """A run's aggregates per split (public, held out) and overall; aggregates are public, but what the held-out
    ones spent (tokens, cost) only where the user may see it (`usage_withheld` marks a row whose usage is blanked)."""
    order = {"public": 0, "held_out": 1, "": 2}
    return withhold_usage(
        run=run, scores=sorted(run.scores.filter(paper__isnull=True), key=lambda s: order[s.split]), user=user
    )


def withhold_usage(*, run: EvaluationRun, scores: list[RunScore], user) -> list[RunScore]:
    """The scores with the tokens and cost blanked (None, never 0) of those over held-out items (the held-out split's
    and the overall one) where visibility.usage_withheld says so; the public split's and its papers' stay."""
    if not visibility.usage_withheld(run=run, user=user):
        return scores
    for score in scores:
        if score.paper_id is None and score.split != RunScore.Split.PUBLIC:
            score.prompt_tokens = score.completion_tokens = score.cost = None
            score.usage_withheld = True  # type: ignore[attr-defined]
    return scores
