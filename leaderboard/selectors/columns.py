"""The one list of leaderboard columns: the page, the JSON API and the CSV download all read it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from evaluation.models import AWAITING_REVIEW_LABEL, AWAITING_REVIEW_SAID
from evaluation.provenance import row_provenance
from leaderboard.selectors.table import LeaderboardRow


@dataclass(frozen=True)
class LeaderboardColumn:
    """One leaderboard column: its API and CSV field, its value type, and its page header if the page shows it."""

    key: str
    kind: str  # int, float, str, bool, date or decimal
    value: Callable[[LeaderboardRow], object]
    label: str = ""  # blank: in the API and CSV only (the page folds it into another cell)
    sort: str = ""  # the page's sort key (LEADERBOARD_SORTS) of this header
    nullable: bool = False
    toggled: bool = False  # on the page only when asked for (cols=): the key columns fit a 1280 px screen
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
    LeaderboardColumn(
        "errors",
        "int",
        _score("errors"),
        "Errors",
        "errors",
        toggled=True,
        title="Items the platform could not score (infrastructure errors): left out of the score",
    ),
    LeaderboardColumn(
        "flagged",
        "int",
        _score("flagged"),
        AWAITING_REVIEW_LABEL,
        "flags",
        toggled=True,
        title=AWAITING_REVIEW_SAID,
    ),
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


# The home page's short leaderboard: a subset of the one column list, read by the same cell tag.
LEADERBOARD_SUMMARY_COLUMNS = tuple(
    c for c in LEADERBOARD_PAGE_COLUMNS if c.key in ("rank", "display_name", "mode", "provenance", "scaled_pass_rate")
)
