"""A release's leaderboard rows: which runs, their scores and usage, ranked among the entries the filters keep, sorted
as asked; a fixed number of queries whatever the number of runs and outcomes."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db.models import (
    Count,
    F,
    Prefetch,
    Sum,
    prefetch_related_objects,
)

from agents.models import AgentTrajectory
from benchmarks import visibility
from benchmarks.models import BenchmarkVersion
from evaluation.models import (
    HUMAN_MODE,
    RUN_MODES,
    EvaluationRun,
    Outcome,
    ProvenanceChange,
    RunScore,
)
from evaluation.selectors.runs import leaderboard_choose
from leaderboard.analysis import ITEM_STATISTICS, item_statistics_load, leaderboard_rank

_NEVER = datetime.min.replace(tzinfo=UTC)  # a run's date when it has none


LEADERBOARD_SORTS = {
    # Ascending is rank 1 first (dir says the order of the numbers shown), ties by score, unranked rows last.
    "rank": lambda r: (r.rank if r.rank is not None else float("inf"), -r.score.scaled_pass_rate),
    "score": lambda r: r.score.scaled_pass_rate,
    "model": lambda r: r.run.model.display_name.lower(),
    "organization": lambda r: r.run.model.organization.lower(),
    "open_weights": lambda r: r.run.model.open_weights,
    "cutoff": lambda r: r.run.model.knowledge_cutoff or date.min,
    "provenance": lambda r: r.run.provenance,
    "mode": lambda r: r.run.mode,
    "scaffold": lambda r: r.run.scaffold,
    "date": lambda r: r.run.finished_at or _NEVER,
    "pass": lambda r: r.score.pass_rate,
    "held_out": lambda r: r.held_out.scaled_pass_rate if r.held_out else -1.0,
    "items": lambda r: r.score.items,
    "errors": lambda r: r.score.errors,
    "flags": lambda r: r.score.flagged,
    "gaming": lambda r: r.gaming,
    "tokens": lambda r: (r.tokens is not None, r.tokens or 0),  # unknown apart from a known 0, as cost
    "cost": lambda r: (r.cost is not None, r.cost or 0),
    "agent_turns": lambda r: (r.agent is not None, r.agent.turns if r.agent else 0.0),
}


def repeat_mean(values: list[float]) -> float:
    return statistics.fmean(values)


def repeat_standard_error(values: list[float]) -> float | None:
    """The standard error of the mean across repeated runs (sample standard deviation / sqrt(n)); None for fewer
    than two runs, where it is not defined."""
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


@dataclass(frozen=True)
class AgentUsage:
    """What an agent row's items used, as means per item over its trajectories (a repeat group's: over every run's)."""

    turns: float
    tokens: float
    seconds: float


def agent_usage_per_item(*, version: BenchmarkVersion, groups: dict[int, list[int]]) -> dict[int, AgentUsage]:
    """By a row's run id, the per-item means of its runs' trajectories (`groups`: row run -> its runs) over the
    public split's items, as the row's rank is (a held-out item's usage is not told apart from the rest), in one
    query; rows without trajectories (results uploaded without them) are absent."""
    owner = {pk: row for row, pks in groups.items() for pk in pks}
    totals: dict[int, list[float]] = {}
    trajectories = AgentTrajectory.objects.filter(run__in=owner, snippet__in=visibility.items_public(version=version))
    for t in trajectories.values("run").annotate(
        n=Count("pk"),
        turns=Sum("turns"),
        tokens_total=Sum(F("prompt_tokens") + F("completion_tokens")),
        seconds=Sum("seconds"),
    ):
        total = totals.setdefault(owner[t["run"]], [0, 0, 0, 0])
        for i, value in enumerate((t["n"], t["turns"], t["tokens_total"], t["seconds"])):
            total[i] += value or 0
    return {row: AgentUsage(turns / n, tokens / n, seconds / n) for row, (n, turns, tokens, seconds) in totals.items()}


def _no_usage(overall: RunScore) -> RunScore:
    """A run with no public item whose usage is withheld: nothing spent to show, and no cost known."""
    return RunScore(run_id=overall.run_id, items=0, prompt_tokens=0, completion_tokens=0, cost=None)


@dataclass
class LeaderboardRow:
    """A run's place: ranked by its public split's score (what every run covers; the overall score where a version
    has no public item), with the held-out split's aggregate beside it when the run covered it."""

    run: EvaluationRun
    score: RunScore
    overall: RunScore
    held_out: RunScore | None = None
    # The aggregate whose tokens and cost the row shows: the overall one, or the public split's where the run covers
    # held-out items (visibility.usage_withheld: their usage tells the hidden prompts' size).
    usage: RunScore | None = None
    rank: int | None = None  # None: a calibration model's reference line, or not comparable (rank_note says why)
    rank_note: str = ""
    # The runs of the row's repeat group (started together, `repeat`), the row's own run first: each one's ranking
    # score and the score whose tokens and cost it shows (as `usage`). Empty: a run started alone.
    repeats: list[tuple[RunScore, RunScore]] = field(default_factory=list)
    agent: AgentUsage | None = None  # an agent row's means per item; None for single-shot rows and agent uploads

    # without trajectories
    @property
    def gaming(self) -> int:
        """Items whose tests passed while the sealed replay disagreed with the reference: a measured test-gaming
        count, stored with the run's aggregates."""
        return self.overall.test_gaming

    @property
    def gaming_rate(self) -> float:
        return 100.0 * self.gaming / self.overall.items if self.overall.items else 0.0

    @property
    def owner_endpoint_failed(self) -> int:
        """Scored items failed because the model's own endpoint failed (outcomes.model_call_failed), said beside the
        score: counted as not passed, so an endpoint failing the items its model cannot solve gains nothing."""
        if not self.run.calls_owner_endpoint:
            return 0
        return self.score.categories.get(Outcome.Category.OWNER_ENDPOINT, 0)

    @property
    def spent(self) -> RunScore:
        return self.usage or self.overall

    @property
    def tokens(self) -> int | None:
        return self.spent.tokens

    @property
    def runs_count(self) -> int:
        return len(self.repeats) or 1

    @property
    def repeat_runs(self) -> list[int]:
        """The ids of the group's runs in the order they were started (the row's own run is one of them)."""
        return sorted(score.run_id for score, _ in self.repeats)

    @property
    def scaled_mean(self) -> float:
        return repeat_mean([s.scaled_pass_rate for s, _ in self.repeats] or [self.score.scaled_pass_rate])

    @property
    def scaled_se(self) -> float | None:
        return repeat_standard_error([s.scaled_pass_rate for s, _ in self.repeats])

    @property
    def pass_mean(self) -> float:
        return repeat_mean([s.pass_rate for s, _ in self.repeats] or [self.score.pass_rate])

    @property
    def pass_se(self) -> float | None:
        return repeat_standard_error([s.pass_rate for s, _ in self.repeats])

    @property
    def cost(self) -> Decimal | None:
        """The run's total cost in USD (a repeat group's: the mean per run); None, never 0, when any item's cost is
        unknown (a model litellm has no price for, a published result)."""
        costs = [spent.cost for _, spent in self.repeats] or [self.spent.cost]
        known = [cost for cost in costs if cost is not None]
        if len(known) < len(costs):
            return None
        return sum(known, Decimal(0)) / len(known)

    @property
    def cost_per_item(self) -> Decimal | None:
        cost = self.cost
        items = self.run.total_items if self.usage is None or self.usage is self.overall else self.usage.items
        return None if cost is None or not items else cost / items

    @property
    def setting(self) -> str:
        """The row's setting beside a model's name where no Mode column says the mode (charts, breakdowns): a
        single-shot row is the default, so only its paper setting is named."""
        return self.run.setting_label if self.run.mode == "agent" else self.run.paper_label

    @property
    def calibration(self) -> bool:
        return self.run.is_calibration


@dataclass(frozen=True)
class LeaderboardFilters:
    """Filters narrow the ranked entries; calibration models' reference lines follow the setting filters (mode,
    paper, scaffold) and are kept whatever model the others pick."""

    open_weights: bool = False
    paper: str = ""  # "", "with" or "without"
    provenance: str = ""  # "" or an EvaluationRun.Provenance value
    mode: str = ""  # "" (all), "single" or "agent"
    scaffold: str = ""  # "" (all) or a scaffold's name as rows show it (EvaluationRun.scaffold)
    q: str = ""
    sort: str = "rank"
    descending: bool = False  # rank ascending: 1 first

    @property
    def any(self) -> bool:
        return bool(self.open_weights or self.paper or self.provenance or self.mode or self.scaffold or self.q)

    @classmethod
    def from_query(cls, params) -> LeaderboardFilters:
        sort = params.get("sort", "rank")
        sort = sort if sort in LEADERBOARD_SORTS else "rank"
        paper = params.get("paper", "")
        provenance = params.get("provenance", "")
        mode = params.get("mode", "")
        return cls(
            open_weights=params.get("open") in ("1", "on", "true"),
            paper=paper if paper in ("with", "without") else "",
            provenance=provenance if provenance in EvaluationRun.Provenance.values else "",
            mode=mode if mode in RUN_MODE_VALUES else "",
            scaffold=params.get("scaffold", "").strip()[:100],
            q=params.get("q", "").strip()[:100],
            sort=sort,
            descending=params.get("dir", "asc") == "desc",
        )


RUN_MODE_VALUES = tuple(value for value, _ in RUN_MODES)


# Who verified an upload, and why: its row's provenance statement says it (one query for all such rows).
_VERIFICATIONS = Prefetch("provenance_changes", queryset=ProvenanceChange.objects.select_related("actor"))


def leaderboard_runs(*, version: BenchmarkVersion) -> tuple[list[EvaluationRun], dict[int, list[int]]]:
    """Each (model, mode, with/without paper)'s leaderboard run on the version (leaderboard_choose says which), and
    for a chosen run of a repeat group the completed runs of its group (its own first), by the chosen run's id."""
    runs = list(
        EvaluationRun.objects.filter(version=version, status=EvaluationRun.Status.COMPLETED)
        .exclude(mode=HUMAN_MODE)  # people have their own row (humans/), from their attempts
        .select_related("model")
        .order_by("model_id", "mode", "with_paper", "pk")
    )
    chosen = list(leaderboard_choose(runs).values())
    verified_uploads = [run for run in chosen if run.provenance == EvaluationRun.Provenance.VERIFIED_UPLOAD]
    prefetch_related_objects(verified_uploads, _VERIFICATIONS)  # no query when the release has none
    groups: dict[object, list[int]] = {}
    for run in runs:
        if run.repeat_group is not None:
            groups.setdefault(run.repeat_group, []).append(run.pk)
    repeats = {
        run.pk: [run.pk] + [pk for pk in groups[run.repeat_group] if pk != run.pk]
        for run in chosen
        if run.repeat_group is not None and len(groups[run.repeat_group]) > 1
    }
    return chosen, repeats


def _leaderboard_keep(run: EvaluationRun, filters: LeaderboardFilters) -> bool:
    """Whether a row is one of the entries the filters rank (the name search is applied after ranking)."""
    if filters.mode and run.mode != filters.mode:  # a reference line of the other mode is no reference for this one
        return False
    if filters.scaffold and run.scaffold != filters.scaffold:
        return False
    if filters.paper and run.with_paper != (filters.paper == "with"):  # so is a reference line of the other setting
        return False
    if run.is_calibration:  # the yardstick of the setting shown, whoever's models the other filters pick
        return True
    return (not filters.open_weights or run.model.open_weights) and (
        not filters.provenance or run.provenance == filters.provenance
    )


def _leaderboard_found(run: EvaluationRun, filters: LeaderboardFilters) -> bool:
    needle = filters.q.lower()
    return (
        run.is_calibration
        or not needle
        or needle in run.model.display_name.lower()
        or needle in run.model.name.lower()
        or needle in run.model.organization.lower()
    )


def leaderboard_rows(*, version: BenchmarkVersion, filters: LeaderboardFilters | None = None) -> list[LeaderboardRow]:
    """Calibration reference lines (unranked) first, then the other entries, ranked with ties by paired tests among
    the entries the filters keep (mode, paper, provenance, open weights: `?mode=agent` ranks the agent rows among
    themselves, so ranks and their "no entry is significantly better" marks read within the view), then narrowed by
    the name search (which finds rows and keeps their ranks), then sorted as asked (best rank first, ties by scaled
    pass@1); scores come from the stored aggregates."""
    filters = filters or LeaderboardFilters()
    runs, repeats = leaderboard_runs(version=version)
    members = [pk for group in repeats.values() for pk in group]
    scores = {
        (s.run_id, s.split): s
        for s in RunScore.objects.filter(run__in=[r.pk for r in runs] + members, paper__isnull=True).defer(
            *ITEM_STATISTICS
        )
    }

    usage = agent_usage_per_item(
        version=version, groups={r.pk: repeats.get(r.pk) or [r.pk] for r in runs if r.mode == "agent"}
    )

    def ranking(pk: int) -> RunScore:
        return scores.get((pk, "public")) or scores[(pk, "")]

    by_pk = {r.pk: r for r in EvaluationRun.objects.filter(pk__in=members).only("pk", "covers_held_out", "version")}
    by_pk.update((r.pk, r) for r in runs)
    # A completed run over held-out items has their aggregate: without one, the release holds nothing out.
    holds_out = any(split == RunScore.Split.HELD_OUT for _, split in scores)

    def spent(pk: int) -> RunScore:
        """The leaderboard is every visitor's: a run's held-out usage is never in it."""
        withheld = visibility.usage_withheld(run=by_pk[pk], user=None, version_holds_out=holds_out)
        return scores.get((pk, "public")) or _no_usage(scores[(pk, "")]) if withheld else scores[(pk, "")]

    rows = sorted(
        (
            LeaderboardRow(
                run=r,
                score=ranking(r.pk),
                overall=scores[(r.pk, "")],
                held_out=scores.get((r.pk, "held_out")),
                usage=spent(r.pk),
                repeats=[(ranking(pk), spent(pk)) for pk in repeats.get(r.pk, []) if (pk, "") in scores],
                agent=usage.get(r.pk),
            )
            for r in runs
            if (r.pk, "") in scores
        ),
        key=lambda row: (-row.score.scaled_pass_rate, row.run.model.display_name.lower()),
    )
    rows = [row for row in rows if _leaderboard_keep(row.run, filters)]
    # Deferred above: read for the rows at an owner's endpoint only, whose failed calls the score cell names.
    item_statistics_load(scores=[row.score for row in rows if row.run.calls_owner_endpoint], fields=("categories",))
    leaderboard_rank(version=version, rows=rows)
    rows = [row for row in rows if _leaderboard_found(row.run, filters)]
    calibration = [row for row in rows if row.calibration]
    ranked = sorted(
        (row for row in rows if not row.calibration), key=LEADERBOARD_SORTS[filters.sort], reverse=filters.descending
    )
    return calibration + ranked
