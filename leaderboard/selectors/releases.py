"""Which release a visitor sees first, the home page's top of its leaderboard, and a release's reference lines."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Exists,
    OuterRef,
    QuerySet,
)
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from benchmarks.selectors import (
    version_snippets,
)
from evaluation.models import (
    HUMAN_MODE,
    EvaluationRun,
    ModelEntry,
)
from evaluation.selectors.items import Progress, run_progress
from evaluation.selectors.runs import CALIBRATION_KINDS, calibration_models
from leaderboard.selectors.table import LeaderboardRow, leaderboard_rows


def release_runs_scoring(*, version: BenchmarkVersion) -> list[EvaluationRun]:
    """The platform's own runs (models nobody owns: the calibration reference lines, the demo's sample upload) still
    queued or running on the release, oldest first: the home page says they are on their way until they finish."""
    return list(
        EvaluationRun.objects.filter(
            version=version,
            model__owner__isnull=True,
            status__in=(EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING),
        )
        .select_related("model")
        .order_by("pk")
    )


@dataclass(frozen=True)
class SiteCounts:
    """What the home page says beside the release's leaderboard top, counted from the rows the leaderboard has."""

    papers: int  # in the release
    snippets: int  # benchmark items of the release
    models: int  # with a ranked row (calibration models are reference lines)
    ranked: int  # ranked rows: one per model and setting (single-shot or agent, with or without the paper)
    lines: int  # calibration reference lines


@dataclass(frozen=True)
class LeaderboardTop:
    calibration: list[LeaderboardRow]
    ranked: list[LeaderboardRow]  # the best `limit`
    counts: SiteCounts


def leaderboard_top(*, version: BenchmarkVersion, limit: int = 10) -> LeaderboardTop:
    """The calibration reference lines and the `limit` best ranked rows of the version's leaderboard, with the
    counts of what the whole leaderboard holds (so "1 ranked row, 2 reference lines" stands beside three rows)."""
    rows = leaderboard_rows(version=version)
    calibration, ranked = [r for r in rows if r.calibration], [r for r in rows if not r.calibration]
    counts = SiteCounts(
        papers=version.tasks.count(),
        snippets=version_snippets(version=version).count(),
        models=len({r.run.model_id for r in ranked}),
        ranked=len(ranked),
        lines=len(calibration),
    )
    return LeaderboardTop(calibration=calibration, ranked=ranked[:limit], counts=counts)


def _results() -> QuerySet[EvaluationRun]:
    """Completed runs that put a ranked row on their release (calibration runs are reference lines)."""
    return (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.COMPLETED)
        .exclude(model__kind__in=CALIBRATION_KINDS)
        .exclude(mode=HUMAN_MODE)
    )


def release_with_results_before(*, version: BenchmarkVersion) -> BenchmarkVersion | None:
    """The newest published release before `version` with a ranked row: where a visitor finds results while
    `version`'s table is still empty."""
    return (
        BenchmarkVersion.objects.filter(
            status=BenchmarkVersion.Status.PUBLISHED, published_at__lt=version.published_at or timezone.now()
        )
        .filter(Exists(_results().filter(version=OuterRef("pk"))))
        .order_by("-published_at")
        .first()
    )


def latest_published_version() -> BenchmarkVersion | None:
    return BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.PUBLISHED).order_by("-published_at").first()


def _calibration_done() -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.filter(
        status=EvaluationRun.Status.COMPLETED,
        mode="single",
        model__kind__in=CALIBRATION_KINDS,
        model__owner__isnull=True,
    )


@dataclass(frozen=True)
class CalibrationLine:
    model: ModelEntry
    run: EvaluationRun | None  # the newest not cancelled single-shot run on the release, None if never started
    progress: Progress | None  # of a run still going

    @property
    def ready(self) -> bool:
        return self.run is not None and self.run.status == EvaluationRun.Status.COMPLETED


@dataclass(frozen=True)
class ReleaseCalibration:
    """Where a release's reference lines are: started at publish (services.calibration_runs_start), ready once
    every calibration model's run completed; the home page shows the release from then on."""

    lines: list[CalibrationLine]

    @property
    def ready(self) -> bool:
        return bool(self.lines) and all(line.ready for line in self.lines)

    @property
    def ready_at(self) -> datetime | None:
        return max((line.run.finished_at for line in self.lines if line.run and line.run.finished_at), default=None)


def release_calibration(*, version: BenchmarkVersion) -> ReleaseCalibration:
    lines = []
    for model in calibration_models():
        runs = model.runs.filter(version=version, mode="single").exclude(status=EvaluationRun.Status.CANCELLED)
        run = (
            runs.filter(status=EvaluationRun.Status.COMPLETED).order_by("-finished_at").first()
            or runs.order_by("-created_at").first()
        )
        going = run is not None and run.is_active
        lines.append(CalibrationLine(model=model, run=run, progress=run_progress(run) if run and going else None))
    return ReleaseCalibration(lines=lines)


def leaderboard_releases() -> tuple[BenchmarkVersion | None, BenchmarkVersion | None]:
    """The release a visitor is shown first and the newest published one, in one query. The first is the newest
    published release whose reference lines are ready (or, one published before they started by themselves, with a
    ranked result), else the newest: a release just published has an empty table until its calibration runs
    complete, so the home page switches to it when they have."""
    line_missing = calibration_models().exclude(
        Exists(_calibration_done().filter(version=OuterRef(OuterRef("pk")), model=OuterRef("pk")))
    )
    published = list(
        BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.PUBLISHED)
        .annotate(
            has_results=Exists(_results().filter(version=OuterRef("pk"))),
            line_missing=Exists(line_missing),
        )
        .order_by("-published_at")
    )
    newest = published[0] if published else None
    shown = (v for v in published if v.has_results or not v.line_missing)
    return next(shown, newest), newest
