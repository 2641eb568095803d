"""Django validators over the format library's rules, for model and form fields."""

from __future__ import annotations

import math

from django.core.exceptions import ValidationError

from benchmarks.paper2code.links import link_problem


def link_validate(value: str) -> None:
    """A URL the site renders as a link: absolute http(s) only, so no `javascript:` href ever reaches a page."""
    problem = link_problem(value)
    if problem:
        raise ValidationError(f"%(value)s {problem}", code="invalid", params={"value": repr(value[:100])})


AGENT_BUDGETS = ("turns", "tokens", "seconds", "cost")  # evaluation/agents/budget.py spends them


def agent_budget_max_validate(value: object) -> None:
    """A release's agent budget maximums: any of turns, tokens, seconds, cost, each a positive finite number (a NaN
    passes every comparison)."""
    if not isinstance(value, dict):
        raise ValidationError("agent budget maximums must be an object, e.g. {\"turns\": 30}", code="agent_budget")
    for name, number in value.items():
        if name not in AGENT_BUDGETS:
            raise ValidationError(f"unknown agent budget {name!r}; budgets are {', '.join(AGENT_BUDGETS)}",
                                  code="agent_budget")
        if (isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number)
                or number <= 0):
            raise ValidationError(f"agent budget {name} must be a positive number (got {number!r})",
                                  code="agent_budget")
