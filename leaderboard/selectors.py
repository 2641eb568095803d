"""The leaderboard's reads: its rows and columns (the one list the page, the JSON API and the CSV read), filters and
sorts, breakdowns, the home page's top, a release's reference lines."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db.models import (
    Count,
    Exists,
    F,
    OuterRef,
    Prefetch,
    QuerySet,
    Sum,
    prefetch_related_objects,
)

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Paper
from benchmarks.selectors import (
    papers_as_released,
    version_snippets,
)
from evaluation.agents.models import AgentTrajectory
from evaluation.models import (
    HUMAN_MODE,
    RUN_MODES,
    EvaluationRun,
    ModelEntry,
    ProvenanceChange,
    RunScore,
)
from evaluation.provenance import row_provenance
from evaluation.scoring import SIZE_BUCKETS
from evaluation.selectors.items import Progress, run_progress
from evaluation.selectors.runs import CALIBRATION_KINDS, calibration_models, leaderboard_choose, split_scores_itemized
from leaderboard.analysis import ITEM_STATISTICS, leaderboard_rank

# Leaderboard reads: a fixed number of queries whatever the number of runs and outcomes.

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
class LeaderboardColumn:
    """One leaderboard column: its API and CSV field, its value type, and its page header if the page shows it."""

    key: str
    kind: str  # int, float, str, bool, date or decimal
    value: Callable[[LeaderboardRow], object]
    label: str = ""  # blank: in the API and CSV only (the page folds it into another cell)
    sort: str = ""  # the page's sort key (LEADERBOARD_SORTS) of this header
    nullable: bool = False
    toggled: bool = False  # on the page only when asked for (cols=): the key columns fit a 1366 px screen
    title: str = ""  # the header's tooltip
    agent: bool = False  # shown, not toggled, in the agent view (`mode=agent`)
    shows: tuple[str, ...] = ()  # the API-only fields the page folds into this column's cell (its CSV keeps them)
    folds: bool = False  # hidden on a phone until the column toggle opens: rank, model and score fit 390 px


def _score(field: str) -> Callable[[LeaderboardRow], object]:
    """A field of the public split's score (what ranks a row)."""
    return lambda row: getattr(row.score, field)


def _run_total(field: str) -> Callable[[LeaderboardRow], object]:
    """What the run spent (tokens, cost): over every item, or over the public split's where it covers held-out ones."""
    return lambda row: getattr(row.spent, field)


def _held_out(field: str) -> Callable[[LeaderboardRow], object]:
    """A field of the held-out split's aggregate; None for a run that covers the public split only."""
    return lambda row: getattr(row.held_out, field) if row.held_out else None


# The one list of leaderboard columns: the page, the JSON API and the CSV download all read it.
LEADERBOARD_COLUMNS = (
    LeaderboardColumn("rank", "int", lambda r: r.rank, "Rank", "rank", nullable=True, shows=("rank_note",)),
    LeaderboardColumn("rank_note", "str", lambda r: r.rank_note),  # why a row is unranked
    LeaderboardColumn("run", "int", lambda r: r.run.pk),
    LeaderboardColumn("model", "str", lambda r: r.run.model.name),
    LeaderboardColumn(
        "display_name", "str", lambda r: r.run.model.display_name, "Model", "model", shows=("model", "with_paper")
    ),
    # Single-shot or agent: each its own row, named on every row (the Model cell then names the paper setting only).
    LeaderboardColumn(
        "mode",
        "str",
        lambda r: r.run.mode,
        "Mode",
        "mode",
        folds=True,
        title="Single-shot: one prompt, one answer per item; agent: the model works in a sandbox over many turns",
    ),
    LeaderboardColumn(
        "scaffold",
        "str",
        lambda r: r.run.scaffold,
        "Scaffold",
        "scaffold",
        toggled=True,
        agent=True,
        title="What ran an agent row: the platform's own agent loop, or an uploaded run's scaffold (a Harbor agent's "
        "name and version); empty for single-shot rows",
    ),
    # The score beside the rank and the model: the rank is read against it.
    LeaderboardColumn(
        "scaled_pass_rate",
        "float",
        _score("scaled_pass_rate"),
        "Scaled pass@1 (95% CI)",
        "score",
        shows=("scaled_ci_low", "scaled_ci_high", "runs", "scaled_pass_rate_mean", "scaled_pass_rate_se"),
    ),
    LeaderboardColumn("scaled_ci_low", "float", _score("scaled_ci_low")),
    LeaderboardColumn("scaled_ci_high", "float", _score("scaled_ci_high")),
    # Repeated runs (started together with `repeat`): the mean and standard error across them, and how many.
    LeaderboardColumn("runs", "int", lambda r: r.runs_count),
    LeaderboardColumn("scaled_pass_rate_mean", "float", lambda r: r.scaled_mean),
    LeaderboardColumn("scaled_pass_rate_se", "float", lambda r: r.scaled_se, nullable=True),
    LeaderboardColumn(
        "pass_rate",
        "float",
        _score("pass_rate"),
        "pass@1 (95% CI)",
        "pass",
        folds=True,
        shows=("pass_rate_ci_low", "pass_rate_ci_high", "pass_rate_mean", "pass_rate_se"),
    ),
    LeaderboardColumn("pass_rate_ci_low", "float", _score("pass_rate_ci_low")),
    LeaderboardColumn("pass_rate_ci_high", "float", _score("pass_rate_ci_high")),
    LeaderboardColumn("pass_rate_mean", "float", lambda r: r.pass_mean),
    LeaderboardColumn("pass_rate_se", "float", lambda r: r.pass_se, nullable=True),
    # The cost of the run beside its score, so that single-shot and agent rows compare on both.
    LeaderboardColumn(
        "cost",
        "decimal",
        lambda r: r.cost,
        "Cost",
        "cost",
        nullable=True,
        folds=True,
        title="Total cost of the run, and per item",
        shows=("cost_per_item",),
    ),
    LeaderboardColumn("cost_per_item", "decimal", lambda r: r.cost_per_item, nullable=True),
    # An agent's work per item, beside its cost: shown in the agent view (`mode=agent`), toggled in the others.
    LeaderboardColumn(
        "turns_per_item",
        "float",
        lambda r: r.agent and round(r.agent.turns, 2),
        "Agent per item",
        "agent_turns",
        nullable=True,
        toggled=True,
        agent=True,
        shows=("tokens_per_item", "seconds_per_item"),
        title="An agent row's means per item of the public split: model turns, tokens in and out, and wall seconds "
        "from the item's start to its end (waits in the queues between turns included, as its time budget counts "
        "them)",
    ),
    LeaderboardColumn("tokens_per_item", "float", lambda r: r.agent and round(r.agent.tokens, 1), nullable=True),
    LeaderboardColumn("seconds_per_item", "float", lambda r: r.agent and round(r.agent.seconds, 2), nullable=True),
    LeaderboardColumn(
        "organization", "str", lambda r: r.run.model.organization, "Organization", "organization", toggled=True
    ),
    LeaderboardColumn(
        "open_weights", "bool", lambda r: r.run.model.open_weights, "Open weights", "open_weights", toggled=True
    ),
    LeaderboardColumn(
        "knowledge_cutoff",
        "date",
        lambda r: r.run.model.knowledge_cutoff,
        "Knowledge cut-off",
        "cutoff",
        nullable=True,
        toggled=True,
    ),
    LeaderboardColumn(
        "provenance",
        "str",
        lambda r: row_provenance(r.run).value,  # what the badge says: "calibration" for a reference line
        "Provenance",
        "provenance",
        folds=True,
        shows=("provenance_statement", "calibration"),
    ),
    LeaderboardColumn("provenance_statement", "str", lambda r: row_provenance(r.run).statement),  # the badge's words
    LeaderboardColumn("source", "str", lambda r: r.run.source),  # where a reported run's results were published
    LeaderboardColumn(
        "finished_on",
        "date",
        lambda r: r.run.finished_at and r.run.finished_at.date(),
        "Date",
        "date",
        nullable=True,
        folds=True,
        title="The day the run completed",
    ),
    LeaderboardColumn("pinned", "bool", lambda r: r.run.pinned_at is not None),  # the owner's pick, not the latest
    LeaderboardColumn("calibration", "bool", lambda r: r.calibration),
    LeaderboardColumn("with_paper", "bool", lambda r: r.run.with_paper),
    LeaderboardColumn("samples", "int", lambda r: r.run.samples),
    LeaderboardColumn(
        "held_out_scaled_pass_rate",
        "float",
        _held_out("scaled_pass_rate"),
        "Held-out scaled pass@1",
        "held_out",
        nullable=True,
        toggled=True,
        shows=("held_out_pass_rate", "held_out_items"),
    ),
    LeaderboardColumn("held_out_pass_rate", "float", _held_out("pass_rate"), nullable=True),
    LeaderboardColumn("held_out_items", "int", _held_out("items"), nullable=True),
    LeaderboardColumn("items", "int", _score("items"), "Items", "items", toggled=True),
    LeaderboardColumn("passed", "int", _score("passed")),
    LeaderboardColumn("errors", "int", _score("errors"), "Errors", "errors", toggled=True),
    LeaderboardColumn("flagged", "int", _score("flagged"), "Flags", "flags", toggled=True),
    LeaderboardColumn(
        "test_gaming",
        "int",
        lambda r: r.gaming,
        "Test gaming",
        "gaming",
        toggled=True,
        title="Items whose tests passed while the answer's sealed replay disagreed with the reference",
    ),
    LeaderboardColumn("prompt_tokens", "int", _run_total("prompt_tokens"), nullable=True),
    LeaderboardColumn("completion_tokens", "int", _run_total("completion_tokens"), nullable=True),
    LeaderboardColumn("tokens", "int", lambda r: r.tokens, "Tokens", "tokens", nullable=True, toggled=True),
)
LEADERBOARD_PAGE_COLUMNS = tuple(c for c in LEADERBOARD_COLUMNS if c.label)
LEADERBOARD_KEY_COLUMNS = tuple(c for c in LEADERBOARD_PAGE_COLUMNS if not c.toggled)
LEADERBOARD_TOGGLED_COLUMNS = tuple(c for c in LEADERBOARD_PAGE_COLUMNS if c.toggled)


def leaderboard_columns_chosen(params) -> tuple[str, ...]:
    """The toggled columns a page asks for with `cols=` (repeated, or comma-separated keys), in the list's order;
    unknown keys are ignored."""
    asked = {key.strip() for value in params.getlist("cols") for key in value.split(",")}
    return tuple(c.key for c in LEADERBOARD_TOGGLED_COLUMNS if c.key in asked)


def leaderboard_page_columns(*, chosen: Iterable[str] = (), agent_view: bool = False) -> tuple[LeaderboardColumn, ...]:
    """The page's columns: the key ones always, then the toggled ones chosen (the agent ones too in the agent
    view, where every ranked row is an agent's; the key columns with them fit a 1366 px screen only there)."""
    chosen = set(chosen)
    return LEADERBOARD_KEY_COLUMNS + tuple(
        c for c in LEADERBOARD_TOGGLED_COLUMNS if c.key in chosen or (agent_view and c.agent)
    )


def leaderboard_export_keys(*, chosen: Iterable[str] = (), agent_view: bool = False) -> tuple[str, ...]:
    """The CSV fields of a page's table: the row's run, then each column the page shows with the fields its cell
    folds in, in the page's order (the CSV of every field is the one asked without `cols`)."""
    keys = ["run"]
    for column in leaderboard_page_columns(chosen=chosen, agent_view=agent_view):
        keys += [column.key, *column.shows]
    return tuple(keys)


def leaderboard_record(row: LeaderboardRow) -> dict:
    """A row as the API and the CSV give it: one field per column."""
    return {column.key: column.value(row) for column in LEADERBOARD_COLUMNS}


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
    leaderboard_rank(version=version, rows=rows)
    rows = [row for row in rows if _leaderboard_found(row.run, filters)]
    calibration = [row for row in rows if row.calibration]
    ranked = sorted(
        (row for row in rows if not row.calibration), key=LEADERBOARD_SORTS[filters.sort], reverse=filters.descending
    )
    return calibration + ranked


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


# The home page's short leaderboard: a subset of the one column list, read by the same cell tag.
LEADERBOARD_SUMMARY_COLUMNS = tuple(
    c for c in LEADERBOARD_PAGE_COLUMNS if c.key in ("rank", "display_name", "mode", "provenance", "scaled_pass_rate")
)


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
