"""Reads for evaluation: the items of a run, what is missing, prompts, progress."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
    prefetch_related_objects,
)
from django.utils import timezone

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Paper, Snippet
from benchmarks.paper2code.markers import is_marker, split_lines
from benchmarks.paper2code.pset import TEST_ENTRY_POINT
from benchmarks.selectors import (
    papers_as_released,
    protocol_get,
    snippet_prompt,
    tasks_as_released,
    user_is_maintainer,
    version_snippets,
)
from common.highlight import answer_diff
from evaluation.agents.models import AgentTrajectory
from evaluation.analysis import ITEM_STATISTICS, leaderboard_rank
from evaluation.harbor.rewards import NO_REWARD, harbor_reward
from evaluation.models import (
    HUMAN_MODE,
    RUN_MODES,
    EvaluationRun,
    Generation,
    ModelEntry,
    Outcome,
    ProvenanceChange,
    RunScore,
    TaskPreparation,
)
from evaluation.provenance import row_provenance
from evaluation.scoring import SIZE_BUCKETS
from evaluation.taskfiles import task_annotated, task_files
from operations.broker import queue_consumers
from operations.events import Kind, events_of
from sandbox.harness import CHILD_SOURCE, status_lines_removed

# Runs: which items a run covers, and who sees its answers and outcomes (the visibility rules of evaluation's own data;
# benchmarks.visibility holds those of releases, tasks and items).

# Call parameters a model not registered by a maintainer may carry on a held-out run: sampling only, so nothing
# can send the prompt anywhere else or ask the provider to keep it for the key's owner.
HELD_OUT_SAFE_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
    }
)


def _maintainer_owned(model: ModelEntry) -> bool:
    return model.owner is not None and user_is_maintainer(user=model.owner)


def _endpoint_trusted_with_held_out(*, model: ModelEntry, provider: str, api_base: str, params: dict) -> bool:
    """Whether held-out prompts may go to `model` called with this provider, api_base and parameters.

    Calibration models never leave the platform; a model registered by a maintainer is the maintainers' call;
    any other model only on a provider of HELD_OUT_PROVIDERS, at the provider's own address (never the owner's
    api_base) and with sampling parameters only (nothing like `store` that asks the provider to keep the prompt for
    the key's owner).
    """
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        return True
    if model.kind != ModelEntry.Kind.LITELLM:
        return False
    if _maintainer_owned(model):
        return True
    return provider in settings.HELD_OUT_PROVIDERS and not api_base and set(params) <= HELD_OUT_SAFE_PARAMS


def model_trusted_with_held_out(*, model: ModelEntry) -> bool:
    """Whether held-out prompts may go to this model as it is set up now: only endpoints maintainers trust."""
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params=model.default_params
    )


def run_covers_held_out(*, model: ModelEntry, params: dict | None = None, uploaded: bool = False) -> bool:
    """Whether a new run evaluates held-out items too; uploads and runs of untrusted models cover the public split
    only (a run's own parameters are held to the same sampling-only rule as the model's)."""
    if uploaded:
        return False
    return _endpoint_trusted_with_held_out(
        model=model, provider=model.provider, api_base=model.api_base, params={**model.default_params, **(params or {})}
    )


def run_sends_held_out(*, run: EvaluationRun) -> bool:
    """Whether a held-out prompt of `run` may leave now: asked again before each one, against the endpoint the run
    snapshot at its start (what it really calls), with today's trust (a maintainer's role, HELD_OUT_PROVIDERS)."""
    return run.covers_held_out and _endpoint_trusted_with_held_out(
        model=run.model, provider=run.provider, api_base=run.api_base, params=run.call_params
    )


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
    outcomes = Outcome.objects.filter(run=run)
    if visibility.user_sees_held_out(user=user):
        return outcomes
    return outcomes.filter(
        snippet__task__memberships__version=run.version_id, snippet__task__memberships__split=visibility.PUBLIC
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
    counts.update(Outcome.objects.filter(run=run).values_list("status").annotate(n=Count("id")).order_by())
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


def repeat_runs(*, run: EvaluationRun) -> list[int]:
    """The ids of the runs started together with `run` (its repeat group), oldest first; [] for a run started
    alone."""
    if run.repeat_group is None:
        return []
    return list(EvaluationRun.objects.filter(repeat_group=run.repeat_group).order_by("pk").values_list("pk", flat=True))


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


def leaderboard_ranking_chart(*, rows: list[LeaderboardRow]) -> list[dict]:
    """The bar chart's bars: every row's scaled pass@1 with its interval, best first."""
    return [
        {
            "label": f"{r.run.model.display_name} ({'reference line' if r.calibration else r.setting})",
            "value": r.score.scaled_pass_rate,
            "low": r.score.scaled_ci_low,
            "high": r.score.scaled_ci_high,
        }
        for r in sorted(rows, key=lambda r: -r.score.scaled_pass_rate)
    ]


def leaderboard_over_time(*, rows: list[LeaderboardRow]) -> dict:
    """The score-over-time chart's points: each ranked row's scaled pass@1 (with its interval) at its model's
    knowledge cut-off, oldest first; rows whose cut-off is unknown are counted, not drawn."""
    dated = [(r, cutoff) for r in rows if not r.calibration and (cutoff := r.run.model.knowledge_cutoff)]
    points = [
        {
            "label": f"{r.run.model.display_name} ({r.setting})",
            "date": cutoff.isoformat(),
            "value": r.score.scaled_pass_rate,
            "low": r.score.scaled_ci_low,
            "high": r.score.scaled_ci_high,
            "provenance": r.run.provenance,
        }
        for r, cutoff in sorted(dated, key=lambda pair: (pair[1], -pair[0].score.scaled_pass_rate))
    ]
    return {"points": points, "undated": sum(1 for r in rows if not r.calibration) - len(points)}


# The cost-against-score view: a server-rendered SVG (no script needed), its numbers also given as a table.
SCATTER_WIDTH, SCATTER_HEIGHT = 640, 360
SCATTER_MARGIN = {"left": 64, "right": 24, "top": 16, "bottom": 48}


@dataclass(frozen=True)
class CostPoint:
    row: LeaderboardRow
    cost: Decimal  # USD per item (a repeat group's mean)
    score: float  # scaled pass@1 (a repeat group's mean)
    x: float = 0.0
    y: float = 0.0
    pareto: bool = False  # no other row is as cheap or cheaper and scores as high or higher

    @property
    def label(self) -> str:
        return f"{self.row.run.model.display_name} ({self.row.setting})"

    @property
    def label_anchor(self) -> str:
        """A label runs rightwards where it fits, else leftwards where it fits, else towards the wider side (and is
        shortened there): it stays inside the drawing, whose every label a phone shows scaled down, never cut."""
        right, left = SCATTER_WIDTH - self.x - 8, self.x - 8
        if _label_width(self.label) <= right:
            return "start"
        return "end" if _label_width(self.label) <= left or left > right else "start"

    @property
    def label_x(self) -> float:
        return self.x - 8 if self.label_anchor == "end" else self.x + 8

    @property
    def label_text(self) -> str:
        """The label as drawn: whole where it fits, else shortened with an ellipsis (its title has it whole)."""
        room = self.x - 8 if self.label_anchor == "end" else SCATTER_WIDTH - self.x - 8
        if _label_width(self.label) <= room:
            return self.label
        return self.label[: max(1, int(room / SCATTER_CHAR_WIDTH) - 1)].rstrip() + "…"


SCATTER_CHAR_WIDTH = 6.6  # a generous mean advance of an 11 px sans-serif character, in the drawing's units


def _label_width(text: str) -> float:
    return len(text) * SCATTER_CHAR_WIDTH


def _pareto(points: list[CostPoint]) -> set[int]:
    """Indexes of the points no other point dominates (cheaper or as cheap, and better or as good, one strictly)."""
    return {
        i
        for i, p in enumerate(points)
        if not any(
            q.cost <= p.cost and q.score >= p.score and (q.cost < p.cost or q.score > p.score)
            for j, q in enumerate(points)
            if j != i
        )
    }


def leaderboard_cost_scatter(*, rows: list[LeaderboardRow]) -> dict:
    """Each ranked row with a known cost as a point: cost per item (x; a log scale when the costs are all above 0
    and span more than a factor of 10) against scaled pass@1 (y), with the Pareto front marked; rows whose cost is
    unavailable are counted, not drawn."""
    ranked = [r for r in rows if not r.calibration]
    points = [
        CostPoint(row=r, cost=r.cost_per_item, score=r.scaled_mean) for r in ranked if r.cost_per_item is not None
    ]
    left, top = SCATTER_MARGIN["left"], SCATTER_MARGIN["top"]
    inner_w = SCATTER_WIDTH - left - SCATTER_MARGIN["right"]
    inner_h = SCATTER_HEIGHT - top - SCATTER_MARGIN["bottom"]
    costs = [float(p.cost) for p in points]
    log = bool(costs) and min(costs) > 0 and max(costs) / min(costs) > 10
    if log:
        low, high = math.floor(math.log10(min(costs))), math.ceil(math.log10(max(costs)))
        high = high if high > low else low + 1
        ticks = [10.0**e for e in range(low, high + 1)]

        def position(cost: float) -> float:
            return (math.log10(cost) - low) / (high - low)

    else:
        top_cost = max(costs, default=0.0) or 1.0
        ticks = [top_cost * i / 4 for i in range(5)]

        def position(cost: float) -> float:
            return cost / top_cost

    front = _pareto(points)
    placed = [
        CostPoint(
            row=p.row,
            cost=p.cost,
            score=p.score,
            x=round(left + inner_w * position(float(p.cost)), 1),
            y=round(top + inner_h * (1 - p.score / 100), 1),
            pareto=i in front,
        )
        for i, p in enumerate(points)
    ]
    on_front = sorted((p for p in placed if p.pareto), key=lambda p: p.x)
    return {
        "points": placed,
        "front": " ".join(f"{p.x},{p.y}" for p in on_front),
        "unavailable": len(ranked) - len(points),
        "log": log,
        "x_ticks": [{"x": round(left + inner_w * position(t), 1), "cost": t} for t in ticks],
        "y_ticks": [{"y": round(top + inner_h * (1 - v / 100), 1), "value": v} for v in (0, 25, 50, 75, 100)],
        "width": SCATTER_WIDTH,
        "height": SCATTER_HEIGHT,
        "left": left,
        "right": SCATTER_WIDTH - SCATTER_MARGIN["right"],
        "top": top,
        "bottom": top + inner_h,
    }


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


CALIBRATION_KINDS = (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER)


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


def calibration_models() -> QuerySet[ModelEntry]:
    """The built-in calibration models whose runs are every release's reference lines (made by a migration)."""
    return ModelEntry.objects.filter(kind__in=CALIBRATION_KINDS, owner__isnull=True).order_by("kind", "name")


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


def outcome_tests(*, outcome: Outcome, task_visible: bool) -> list[dict]:
    """The tests the harness counted for a visible outcome: id, outcome, passed, why not; each failing test's
    traceback tail only where the viewer may see the task's files (it quotes them), as for the reference code."""
    return [
        {
            "id": row.get("id", ""),
            "outcome": row.get("outcome", ""),
            "passed": bool(row.get("passed")),
            "problem": row.get("problem", ""),
            "subtests": dict(zip(("passed", "run"), row.get("subtests", [0, 0]), strict=True)),
            "detail": row.get("detail", "") if task_visible else "",
        }
        for row in outcome.tests
    ]


_FRAME_PATH = re.compile(r'File "(/[^"]+)"')
# The harness's test process runs compiled from a string (sandbox/programs/child.py): its frames read
# `File "<string>", line N, in called_body`, the harness's own wrapping and nothing of the answer's or the paper's.
_HARNESS_FUNCTIONS = frozenset(re.findall(r"^\s*(?:async\s+)?def (\w+)", CHILD_SOURCE, re.MULTILINE))
_STRING_FRAME = re.compile(r'^ *File "<string>", line \d+, in (\w+)\n', re.MULTILINE)
# Installed packages and the standard library, wherever the environment or the interpreter lives.
_PACKAGES = re.compile(r'"/[^"]*/(?:site|dist)-packages/')
_STDLIB = re.compile(r'"/[^"]*/lib/python3\.\d+/')


def paths_shown(text: str, *, file_path: str) -> str:
    """A traceback as a reader of the paper's code needs it: the paper's files relative to its folder, installed
    packages under <env>/, the standard library under <python>/ and anything else (the harness, the sandbox's and
    the host's folders) as <harness>/ and its file name: where the platform keeps things is nobody's business. The
    frames of the harness's test process, compiled from a string, are left out: they are none of the test's."""
    own = tuple("/" + name.lstrip("/") for name in (file_path, TEST_ENTRY_POINT))
    roots = {path[: -len(end)] for path in _FRAME_PATH.findall(text) for end in own if path.endswith(end)}
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(root + "/", "")
    text = _STDLIB.sub('"<python>/', _PACKAGES.sub('"<env>/', text))
    text = _STRING_FRAME.sub(lambda m: "" if m[1] in _HARNESS_FUNCTIONS else m[0], text)
    return _FRAME_PATH.sub(lambda m: f'File "<harness>/{m[1].rsplit("/", 1)[-1]}"', text)


@dataclass
class RunItem:
    outcome: Outcome
    show_reference: bool
    answer_label: str = "model's answer"  # whose code the diff's "+++" side is: a person's attempt names its person

    @property
    def tests(self) -> list[dict]:
        tests = outcome_tests(outcome=self.outcome, task_visible=self.show_reference)
        return [{**test, "detail": self._paths(test["detail"])} for test in tests]

    def _paths(self, text: str) -> str:
        return paths_shown(text, file_path=self.outcome.snippet.file_path)

    @property
    def harbor_reward(self) -> dict | None:
        """An imported Harbor trial's own reward ({"value": a number or None}), to show beside the platform's
        verdict (never used for it); None for any other run."""
        value = harbor_reward(
            params=self.outcome.run.params, snippet_id=self.outcome.snippet_id, sample=self.outcome.sample
        )
        return None if value is NO_REWARD else {"value": value}

    @property
    def code(self) -> str | None:
        """The code the test ran: extracted from the answer, or uploaded as is (None without a stored answer)."""
        return self.outcome.generation.extracted_code if self.outcome.generation else None

    @property
    def diff(self) -> str:
        """Reference to the answer's code, for a viewer who may see the reference; "" otherwise or when equal."""
        if not self.show_reference or self.code is None:
            return ""
        # Nested snippets' markers are comments the reference carries and an answer need not: not a difference.
        reference, answer = (
            ("".join(line for line in split_lines(text) if not is_marker(line)))
            for text in (self.outcome.snippet.reference_code, self.code)
        )
        return answer_diff(reference=reference, answer=answer, labels=("reference", self.answer_label))

    @property
    def traceback_tail(self) -> str:
        """The last traceback the test printed (stderr, else stdout), for a viewer who may see the task's tests;
        "" when none or when the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        for text in (self.outcome.stderr_tail, status_lines_removed(self.outcome.stdout_tail)):
            if (start := text.rfind("Traceback (most recent call last)")) >= 0:
                return _last_lines(self._paths(text[start:]), OUTPUT_TAIL_LINES)
        return ""

    @property
    def error_line(self) -> int | None:
        """The line of the snippet's file the last traceback frame in it names (a syntax error's line too), for a
        viewer who may see the traceback; None when there is none."""
        path = "/" + self.outcome.snippet.file_path.lstrip("/")
        lines = [
            int(line)
            for file, line in re.findall(r'File "([^"]+)", line (\d+)', self.traceback_tail or self.output_tail)
            if ("/" + file.lstrip("/")).endswith(path)
        ]
        return lines[-1] if lines else None

    @property
    def output_tail(self) -> str:
        """The last lines of what the test printed (stdout and stderr), for a viewer who may see the task's tests;
        "" when it printed nothing or the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        printed = (status_lines_removed(self.outcome.stdout_tail), self.outcome.stderr_tail)
        parts = [text.rstrip() for text in printed if text.strip()]
        return _last_lines(self._paths("\n".join(parts)), OUTPUT_TAIL_LINES)


OUTPUT_TAIL_LINES = 40


def _last_lines(text: str, count: int) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join((["…"] if len(lines) > count else []) + lines[-count:]) + "\n"


RUN_PAGE_ITEMS = 100


def run_outcomes_ordered(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """The run's outcomes the user may see, in item order, read along the (run, snippet, sample) unique index: a
    page costs its own rows, not a sort of the whole run (snippet ids follow the order items were imported in)."""
    return outcomes_visible(run=run, user=user).order_by("snippet_id", "sample")


def run_item_page(*, run: EvaluationRun, user, page: str | int | None) -> Page:
    """One page of the items the user may see with the model's answer, and reference code where the user may see
    the task."""
    visible_tasks = set(visibility.tasks_visible(version=run.version, user=user).values_list("pk", flat=True))
    outcomes = run_outcomes_ordered(run=run, user=user).select_related("snippet__task__paper", "generation")
    current = Paginator(outcomes, RUN_PAGE_ITEMS).get_page(page)
    # The ignore: the page keeps its paginator's counts of outcomes and shows each one as a RunItem.
    current.object_list = [
        RunItem(outcome=o, show_reference=o.snippet.task_id in visible_tasks)  # type: ignore[misc]
        for o in current.object_list
    ]
    return current


def run_item(*, run: EvaluationRun, outcome_pk: int, user) -> RunItem | None:
    """One item of a run with its answer (and the reference where the user may see the task), or None when the
    user may not see that outcome: the same rule as the run page's list."""
    outcome = (
        outcomes_visible(run=run, user=user)
        .filter(pk=outcome_pk)
        .select_related("snippet__task__paper", "generation")
        .first()
    )
    if outcome is None:
        return None
    tasks_as_released(version=run.version, tasks=[outcome.snippet.task])
    return RunItem(
        outcome=outcome,
        show_reference=visibility.task_visible(version=run.version, task=outcome.snippet.task, user=user),
    )


def run_flags(*, run: EvaluationRun) -> list[Outcome]:
    """Outcomes of the run the audit flagged, awaiting review or reviewed, with their evidence (for maintainers)."""
    return list(
        Outcome.objects.filter(Q(status=Outcome.Status.FLAGGED) | ~Q(review=""), run=run)
        .select_related("snippet__task__paper", "generation", "reviewed_by")
        .order_by("snippet__task__paper__slug", "snippet__file_path", "snippet__position", "sample")
    )


@dataclass(frozen=True)
class RunForkServer:
    """What the fork server did for a run: items warm and cold, each start with its reason, and where it went cold."""

    items_warm: int
    items_cold: int
    starts: list[dict]
    cold: list[dict]

    @property
    def start_reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for start in self.starts:
            counts[start["reason"]] = counts.get(start["reason"], 0) + 1
        return counts

    def as_dict(self, *, details: bool) -> dict:
        """For the manifest; without `details`, only each event's reason and time: its detail can name a held-out
        task's imports, and its environment hash confirm a guess at a held-out task's requirements."""

        def shown(event: dict) -> dict:
            return event if details else {k: v for k, v in event.items() if k in ("reason", "at")}

        return {
            "items_warm": self.items_warm,
            "items_cold": self.items_cold,
            "start_reasons": self.start_reasons,
            "starts": [shown(s) for s in self.starts],
            "cold": [shown(c) for c in self.cold],
        }


def run_forkserver(*, run: EvaluationRun) -> RunForkServer:
    counts = dict(run.outcomes.exclude(forked=None).values_list("forked").annotate(n=Count("pk")))
    events = events_of(subject=run, kinds=[Kind.FORKSERVER_STARTED, Kind.FORKSERVER_COLD]).order_by("created_at", "pk")
    starts, cold = [], []
    for event in events:
        where, _, what = event.detail.partition(": ")
        if event.kind == Kind.FORKSERVER_STARTED:
            starts.append(
                {
                    "worker": event.worker,
                    "environment": where,
                    "reason": what.split(":", 1)[0],
                    "detail": what,
                    "at": event.created_at.isoformat(),
                }
            )
        else:
            cold.append(
                {"worker": event.worker, "environment": where, "detail": what, "at": event.created_at.isoformat()}
            )
    return RunForkServer(items_warm=counts.get(True, 0), items_cold=counts.get(False, 0), starts=starts, cold=cold)


def runs_forkserver_recent(*, limit: int = 10) -> list[tuple[EvaluationRun, RunForkServer]]:
    """The latest runs whose items went through a fork server, with what it did, for the operations page."""
    runs = (
        EvaluationRun.objects.filter(outcomes__forked__isnull=False)
        .distinct()
        .select_related("model", "version")
        .order_by("-pk")[:limit]
    )
    return [(run, run_forkserver(run=run)) for run in runs]


def runs_stalled(*, seconds: int | None = None) -> QuerySet[EvaluationRun]:
    """Running runs with no new result for longer than RUN_STALL_SECONDS."""
    limit = timezone.now() - timedelta(seconds=seconds if seconds is not None else settings.RUN_STALL_SECONDS)
    return (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, last_progress_at__lt=limit)
        .select_related("model", "version")
        .order_by("last_progress_at")
    )


PREPARING = (TaskPreparation.Status.QUEUED, TaskPreparation.Status.RUNNING)


@dataclass(frozen=True)
class ReleasePreparation:
    """How far a release's tasks are prepared, for its page."""

    tasks: int
    prepared: int
    pending: int  # queued or running
    failed: list[tuple[str, str]]  # (paper, why), for maintainers

    @property
    def done(self) -> bool:
        return self.pending == 0


def release_preparation(*, version: BenchmarkVersion) -> ReleasePreparation | None:
    """The release's preparation; None when none was ever asked for (RELEASE_PREPARE off, or before it existed)."""
    preparations = TaskPreparation.objects.filter(task__memberships__version=version)
    if not preparations.exists():
        return None
    ready = {"test_manifest__isnull": False, "recording__isnull": False}
    failed = (
        preparations.filter(status=TaskPreparation.Status.FAILED)
        .exclude(**{f"task__{k}": v for k, v in ready.items()})
        .order_by("task__paper__slug")
        .values_list("task__paper__slug", "detail")
    )
    return ReleasePreparation(
        tasks=version.tasks.count(),
        prepared=version.tasks.filter(**ready).count(),
        pending=preparations.filter(status__in=PREPARING).count(),
        failed=list(failed),
    )
