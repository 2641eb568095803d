"""The leaderboard's breakdowns: per paper, by snippet size, with against without the paper, after the cut-off."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Sum,
)

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Paper
from benchmarks.selectors import (
    papers_as_released,
)
from evaluation.models import (
    ModelEntry,
    RunScore,
)
from evaluation.scoring import SIZE_BUCKETS
from evaluation.selectors.runs import split_scores_itemized
from leaderboard.analysis import ITEM_STATISTICS
from leaderboard.selectors.table import LeaderboardRow


@dataclass
class PaperHeatMap:
    papers: list[Paper]
    rows: list[tuple[LeaderboardRow, list[RunScore | None]]]


def leaderboard_paper_heatmap(*, version: BenchmarkVersion, rows: list[LeaderboardRow], user) -> PaperHeatMap:
    """Models x papers the user may see one by one, each cell the run's stored per-paper score (None: no scored
    item of that paper)."""
    papers = papers_as_released(
        version=version, papers=visibility.papers_visible(version=version, user=user).order_by("slug")
    )
    scores = {
        (s.run_id, s.paper_id): s
        for s in RunScore.objects.filter(run__in=[r.run for r in rows], paper__isnull=False).defer(*ITEM_STATISTICS)
    }
    return PaperHeatMap(papers=papers, rows=[(row, [scores.get((row.run.pk, p.pk)) for p in papers]) for row in rows])


def leaderboard_size_buckets(*, rows: list[LeaderboardRow], user) -> list[tuple[LeaderboardRow, list[dict | None]]]:
    """Pass rate per snippet-size bucket per run over the items the user may see (a bucket of a few held-out items
    would tell their outcomes), from the runs' stored aggregates (errors not scored, flags not passed)."""
    stored = dict(split_scores_itemized(runs=[r.run for r in rows], user=user).values_list("run_id", "size_buckets"))

    def cell(counts: dict | None) -> dict | None:
        return counts and {**counts, "rate": 100.0 * counts["passed"] / counts["items"]}

    return [(row, [cell(stored.get(row.run.pk, {}).get(label)) for label, _, _ in SIZE_BUCKETS]) for row in rows]


@dataclass
class PaperAblation:
    model: ModelEntry
    with_paper: LeaderboardRow
    without_paper: LeaderboardRow

    @property
    def difference(self) -> float:
        return self.with_paper.score.scaled_pass_rate - self.without_paper.score.scaled_pass_rate


def leaderboard_paper_ablation(*, rows: list[LeaderboardRow]) -> list[PaperAblation]:
    """Models evaluated both with and without the paper: what reading it is worth."""
    by_model: dict[tuple[int, str], dict[bool, LeaderboardRow]] = {}
    for row in rows:
        by_model.setdefault((row.run.model_id, row.run.mode), {})[row.run.with_paper] = row
    pairs = [
        PaperAblation(model=both[True].run.model, with_paper=both[True], without_paper=both[False])
        for both in by_model.values()
        if len(both) == 2
    ]
    return sorted(pairs, key=lambda p: -p.difference)


@dataclass
class ContaminationRow:
    row: LeaderboardRow
    papers_kept: int
    papers_total: int
    scaled_pass_rate: float | None  # None: the cut-off is unknown, or no paper is newer than it


def leaderboard_contamination(
    *,
    version: BenchmarkVersion,
    rows: list[LeaderboardRow],
    user,
) -> list[ContaminationRow]:
    """Scaled pass rate over only the papers (those the user may see one by one) whose code appeared after the
    model's knowledge cut-off.

    Per-paper stored rates are weighted by each paper's live lines of code, so the result matches the scaled
    rate a run restricted to those papers would have.
    """
    loc: dict[int | None, int] = dict(  # a score's paper_id is never None here: the scores are of these papers
        visibility.items_visible(version=version, user=user)
        .order_by()
        .values("task__paper_id")
        .annotate(total=Sum("loc"))
        .values_list("task__paper_id", "total")
    )
    scores = (
        RunScore.objects.filter(run__in=[r.run for r in rows], paper__in=list(loc))
        .select_related("paper")
        .only("run_id", "paper__first_commit_date", "scaled_pass_rate", "paper_id")
    )
    by_run: dict[int, list[RunScore]] = {}
    for score in scores:
        by_run.setdefault(score.run_id, []).append(score)
    result = []
    for row in rows:
        cutoff = row.run.model.knowledge_cutoff
        kept = [
            s
            for s in by_run.get(row.run.pk, [])
            if cutoff and s.paper and s.paper.first_commit_date and s.paper.first_commit_date > cutoff
        ]
        weight = sum(loc.get(s.paper_id, 0) for s in kept)
        rate = sum(s.scaled_pass_rate * loc.get(s.paper_id, 0) for s in kept) / weight if weight else None
        result.append(ContaminationRow(row=row, papers_kept=len(kept), papers_total=len(loc), scaled_pass_rate=rate))
    return result
