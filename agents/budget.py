"""What an agent may spend on one item: turns, tokens, wall seconds and cost, within its release's maximums.

One place decides a run's budget (`budget_for_run`) and one says what is left and which budget ran out
(`Usage.exhausted`): the loop, the prompts and the pages all read them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

from django.conf import settings

from benchmarks.validators import agent_seconds_problem
from common.money import usd

BUDGETS = ("turns", "tokens", "seconds", "cost")
UNITS = {"turns": "turns", "tokens": "tokens", "seconds": "s", "cost": "USD"}
NOT_GIVEN = "not given (uploaded)"  # an uploaded run or trajectory that did not say its budget


# How the run form and every refusal name each budget.
LABELS = {"turns": "Turns", "tokens": "Tokens", "seconds": "Wall time", "cost": "Cost"}


class BudgetError(ValueError):
    """A requested budget the release does not allow; `problems` says, in plain words, what is wrong with each
    budget asked for (by name; "" for a budget of no known name), all at once."""

    def __init__(self, problems: dict[str, str]):
        self.problems = problems
        super().__init__("; ".join(problems.values()))


def budget_amount(name: str, value: float) -> str:
    """A budget's amount in its unit: "50", "100000", "600 s", "2 USD"."""
    return {"seconds": f"{value:g} s", "cost": f"{value:g} USD"}.get(name, f"{value:g}")


@dataclass(frozen=True)
class Budget:
    turns: int
    tokens: int
    seconds: float
    cost: float

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, data: dict) -> Budget:
        return cls(
            turns=int(data["turns"]),
            tokens=int(data["tokens"]),
            seconds=float(data["seconds"]),
            cost=float(data["cost"]),
        )


def release_maximums(version) -> Budget:
    """The release's per-item maximums; a key it leaves out is the site's AGENT_BUDGET_MAXIMUMS."""
    return Budget.of({**settings.AGENT_BUDGET_MAXIMUMS, **(version.agent_budget_max or {})})


def budget_for_run(*, version, requested: dict | None) -> Budget:
    """The budget of a run: the release's maximums, lowered where the run asks for less (never raised)."""
    maximums = release_maximums(version)
    requested = dict(requested or {})
    problems: dict[str, str] = {}
    if unknown := sorted(set(requested) - set(BUDGETS)):
        problems[""] = f"unknown budget {', '.join(unknown)}; budgets are {', '.join(BUDGETS)}"
    values = maximums.as_dict()
    for name, value in requested.items():
        if name not in values:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems[name] = f"{LABELS[name]}: must be a positive number (got {value!r})"
        elif value > values[name]:
            problems[name] = (
                f"{LABELS[name]}: at most {budget_amount(name, values[name])} per item in this release "
                f"(asked for {value:g})"
            )
        else:
            values[name] = value
    if "seconds" not in problems and (problem := agent_seconds_problem(values["seconds"])):
        problems["seconds"] = f"{LABELS['seconds']}: {problem}"
    if problems:
        raise BudgetError(problems)
    return Budget.of(values)


@dataclass
class Usage:
    """What an item has used so far; cost None until a turn was priced and once any turn's cost was unknown (the
    cost budget then can't bind): a model whose every call failed cost an unknown amount, never a shown $0."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cost: Decimal | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add_turn(self, *, prompt_tokens: int | None, completion_tokens: int | None, cost: float | None) -> None:
        first = not self.turns
        self.turns += 1
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        if cost is None or (self.cost is None and not first):
            self.cost = None
        else:
            self.cost = (self.cost or Decimal(0)) + Decimal(str(cost))

    def left(self, budget: Budget) -> dict:
        return {
            "turns": budget.turns - self.turns,
            "tokens": budget.tokens - self.tokens,
            "seconds": round(budget.seconds - self.seconds, 1),
            "cost": None if self.cost is None and self.turns else round(budget.cost - float(self.cost or 0), 6),
        }

    def exhausted(self, budget: Budget) -> str:
        """The first budget that ran out ("" while none has), in the order BUDGETS names them."""
        left = self.left(budget)
        for name in BUDGETS:
            if left[name] is not None and left[name] <= 0:
                return name
        return ""


def amount_text(name: str, value: float | None) -> str:
    """One budget as a page says it: "8 turns", "1,000,000 tokens", "600 s", "$0.50" (the site's money format)."""
    if name == "cost":
        return usd(value)
    if value is None:
        return "unavailable"
    if name == "seconds":
        return f"{value:,.0f} s"
    count = int(value)
    return f"{count:,} {UNITS[name] if count != 1 else UNITS[name].removesuffix('s')}"


def budget_text(budget: dict | None) -> str:
    """A budget as pages say it, from the budgets it gives (an upload may give some or none: the rest is said not
    given, never guessed)."""
    given = [amount_text(name, (budget or {})[name]) for name in BUDGETS if name in (budget or {})]
    if not given:
        return NOT_GIVEN
    missing = [UNITS[name] if name != "seconds" else "wall time" for name in BUDGETS if name not in (budget or {})]
    return ", ".join(given) + (f" ({', '.join(missing)} not given)" if missing else "")


def left_text(left: dict) -> str:
    """What is left, as the model reads it every turn."""
    cost = "unknown (the model's price is not known)" if left["cost"] is None else usd(left["cost"])
    return (
        f"{amount_text('turns', left['turns'])}, {amount_text('tokens', left['tokens'])}, "
        f"{max(0.0, left['seconds']):,.0f} s of wall time, cost {cost}"
    )
