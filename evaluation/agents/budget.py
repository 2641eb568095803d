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

BUDGETS = ("turns", "tokens", "seconds", "cost")
UNITS = {"turns": "turns", "tokens": "tokens", "seconds": "s", "cost": "USD"}


class BudgetError(ValueError):
    """A requested budget the release does not allow."""


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
    if unknown := sorted(set(requested) - set(BUDGETS)):
        raise BudgetError(f"unknown budget {', '.join(unknown)}; budgets are {', '.join(BUDGETS)}")
    values = maximums.as_dict()
    for name, value in requested.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise BudgetError(f"budget {name} must be a positive number (got {value!r})")
        if value > values[name]:
            raise BudgetError(
                f"budget {name} {value:g} is above the release's maximum of {values[name]:g} {UNITS[name]} per item"
            )
        values[name] = value
    if problem := agent_seconds_problem(values["seconds"]):
        raise BudgetError(problem)
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


def left_text(left: dict) -> str:
    """What is left, as the model reads it every turn."""
    cost = "unknown (the model's price is not known)" if left["cost"] is None else f"{left['cost']:.4f} USD"
    return (
        f"{left['turns']} turn(s), {left['tokens']} token(s), {max(0.0, left['seconds']):.0f} s of wall time, "
        f"cost {cost}"
    )
