"""Parity of a model run both ways: the platform's own agent runs against imported Harbor jobs on one release, in the
fields of Harbor's `parity_experiment.json` (Harbor 0.26's adapter template, harbor/cli/template-adapter).

Both sides are completed runs of the model on the release in one paper setting, scored by the platform (an imported
job's answers are scored again; Harbor's rewards are never read here), compared on the public split, the only one a
Harbor job covers. Each side is its runs' mean ± sample standard error of the mean (Harbor's "sample SEM",
sqrt(sum((x - mean)^2) / (n (n - 1))), undefined below two runs, so each side needs at least two). Harbor's criterion
of parity is that the two sides' run-score ranges [min, max] overlap; whether the mean ± SEM ranges overlap is given
beside it. One entry per Harbor scaffold (agent name and version) the imported jobs ran under.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from django.db.models import QuerySet

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion
from common.errors import ApplicationError
from evaluation.harbor.export import ORG
from evaluation.models import SCAFFOLD_PLATFORM, EvaluationRun, ModelEntry, RunScore

RUNS_MIN = 2  # a standard error needs two runs
# (the metric's name in the report, the public-split RunScore field it is read from)
METRICS = (("scaled pass@1", "scaled_pass_rate"), ("pass@1", "pass_rate"))


class ParityError(ApplicationError):
    """A parity report that cannot be made (too few runs on a side), saying what is missing."""

    code = "parity_unavailable"


@dataclass(frozen=True)
class Side:
    runs: list[EvaluationRun]
    scores: dict[str, list[float]]  # metric -> one public-split score per run, in run order

    def mean(self, metric: str) -> float:
        return statistics.fmean(self.scores[metric])

    def sem(self, metric: str) -> float:
        values = self.scores[metric]
        return statistics.stdev(values) / math.sqrt(len(values))


def _text(mean: float, sem: float) -> str:
    return f"{mean:.2f}% +/- {sem:.2f}%"


def _overlap(low_a: float, high_a: float, low_b: float, high_b: float) -> bool:
    return low_a <= high_b and low_b <= high_a


def parity_runs(*, model: ModelEntry, version: BenchmarkVersion, with_paper: bool = True) -> QuerySet[EvaluationRun]:
    """The model's completed agent runs on the release in the setting, the platform's and imported Harbor jobs."""
    return EvaluationRun.objects.filter(
        model=model, version=version, with_paper=with_paper, mode="agent", status=EvaluationRun.Status.COMPLETED
    ).order_by("pk")


def parity_releases(*, model: ModelEntry, runs: QuerySet[EvaluationRun]) -> list[str]:
    """The releases on which the model has a completed imported Harbor job among `runs` (newest first)."""
    return list(
        runs.filter(model=model, mode="agent", status=EvaluationRun.Status.COMPLETED, params__harbor__isnull=False)
        .order_by("-version__published_at")
        .values_list("version__name", flat=True)
        .distinct()
    )


def _side(runs: list[EvaluationRun]) -> Side:
    rows = {row.run_id: row for row in RunScore.objects.filter(run__in=runs, paper=None, split=RunScore.Split.PUBLIC)}
    kept = [run for run in runs if run.pk in rows]  # a run with no public item scored has nothing to compare
    return Side(kept, {metric: [getattr(rows[r.pk], field) for r in kept] for metric, field in METRICS})


def parity_sides(
    *, model: ModelEntry, version: BenchmarkVersion, with_paper: bool = True, runs: QuerySet | None = None
) -> tuple[Side, dict[str, Side]]:
    """The platform's side (its own agent loop) and, per Harbor scaffold, the imported jobs' side; of `runs` only
    (when given) those `parity_runs` chooses."""
    chosen = parity_runs(model=model, version=version, with_paper=with_paper)
    if runs is not None:  # the runs a viewer may see
        chosen = chosen.filter(pk__in=runs.values("pk"))
    platform = [run for run in chosen if run.scaffold == SCAFFOLD_PLATFORM and not run.is_upload]
    harbor: dict[str, list[EvaluationRun]] = {}
    for run in chosen:
        if isinstance(run.params.get("harbor"), dict):
            harbor.setdefault(run.scaffold, []).append(run)
    return _side(platform), {scaffold: _side(group) for scaffold, group in sorted(harbor.items())}


def _missing(side: Side, what: str) -> str:
    return f"{what}: {len(side.runs)} completed run(s) with public items scored; at least {RUNS_MIN} are needed"


def parity_report(
    *, model: ModelEntry, version: BenchmarkVersion, with_paper: bool = True, runs: QuerySet | None = None
) -> list[dict]:
    """The parity experiment as Harbor's `parity_experiment.json` holds it: one entry per Harbor scaffold, the
    platform's agent runs as "original", the imported jobs as "harbor". ParityError says which side lacks runs."""
    platform, harbors = parity_sides(model=model, version=version, with_paper=with_paper, runs=runs)
    setting = "with the paper" if with_paper else "without the paper"
    problems = []
    if len(platform.runs) < RUNS_MIN:
        problems.append(_missing(platform, f"the platform's agent runs of {model.name} on {version.name} {setting}"))
    if not harbors:
        problems.append(f"no imported Harbor job of {model.name} on {version.name} {setting} is completed")
    problems += [
        _missing(side, f"the Harbor jobs under {scaffold}")
        for scaffold, side in harbors.items()
        if len(side.runs) < RUNS_MIN
    ]
    if problems:
        raise ParityError("; ".join(problems))
    size = visibility.items_public(version=version).count()
    entries = []
    for scaffold, harbor in harbors.items():
        name, _, agent_version = scaffold.partition(" ")
        metrics = []
        for metric, _field in METRICS:
            original = (platform.mean(metric), platform.sem(metric))
            imported = (harbor.mean(metric), harbor.sem(metric))
            a, b = platform.scores[metric], harbor.scores[metric]
            metrics.append(
                {
                    "benchmark_name": f"ResearchCodeBench {version.name}",
                    "metric": metric,
                    "original": _text(*original),
                    "harbor": _text(*imported),
                    "original_runs": [round(value, 4) for value in a],
                    "harbor_runs": [round(value, 4) for value in b],
                    # Harbor's criterion: the run-score ranges [min, max] of the two sides overlap.
                    "ranges_overlap": _overlap(min(a), max(a), min(b), max(b)),
                    "sem_ranges_overlap": _overlap(
                        original[0] - original[1],
                        original[0] + original[1],
                        imported[0] - imported[1],
                        imported[0] + imported[1],
                    ),
                }
            )
        finished = max(run.finished_at for run in platform.runs + harbor.runs if run.finished_at)
        entries.append(
            {
                "adapter_name": ORG,
                "agent": f"{name}@{agent_version}" if agent_version else name,
                "model": model.litellm_model or model.name,
                "date": finished.date().isoformat(),
                "adapted_benchmark_size": size,
                "parity_benchmark_size": size,
                "number_of_runs": len(harbor.runs),
                "notes": (
                    f"original: {len(platform.runs)} run(s) of the platform's own agent loop "
                    f"({', '.join(f'#{r.pk}' for r in platform.runs)}); harbor: {len(harbor.runs)} imported Harbor "
                    f"job(s) ({', '.join(f'#{r.pk}' for r in harbor.runs)}), every answer scored again by the "
                    f"platform; release {version.name}, public split, {setting}; scores in percent"
                ),
                "original_parity_repo": None,
                "adapter_pr": [],
                "dataset_pr": [],
                "parity_pr": [],
                "metrics": metrics,
            }
        )
    return entries
