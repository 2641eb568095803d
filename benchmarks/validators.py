"""Django validators over the format library's rules, for model and form fields."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.exceptions import ValidationError

from benchmarks.paper2code.links import link_problem


def link_validate(value: str) -> None:
    """A URL the site renders as a link: absolute http(s) only, so no `javascript:` href ever reaches a page."""
    problem = link_problem(value)
    if problem:
        raise ValidationError(f"%(value)s {problem}", code="invalid", params={"value": repr(value[:100])})


AGENT_BUDGETS = ("turns", "tokens", "seconds", "cost")  # agents/budget.py spends them


def agent_seconds_ceiling() -> float | None:
    """The most wall seconds an agent item may have: half the broker's visibility timeout, the other half left for
    scoring, so an item still running is never redelivered (None: the broker redelivers on no timeout)."""
    timeout = (getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}).get("visibility_timeout")
    return timeout / 2 if timeout else None


def agent_seconds_problem(seconds: float) -> str:
    """Why an agent budget of `seconds` is too long ("" if it is not)."""
    ceiling = agent_seconds_ceiling()
    if ceiling is not None and seconds > ceiling:
        return (
            f"agent budget seconds {seconds:g} is above {ceiling:g} s, half the broker's visibility timeout "
            f"(an item running longer would be delivered again while it runs)"
        )
    return ""


def agent_budget_max_validate(value: object) -> None:
    """A release's agent budget maximums: any of turns, tokens, seconds, cost, each a positive finite number (a NaN
    passes every comparison)."""
    if not isinstance(value, dict):
        raise ValidationError('agent budget maximums must be an object, e.g. {"turns": 30}', code="agent_budget")
    for name, number in value.items():
        if name not in AGENT_BUDGETS:
            raise ValidationError(
                f"unknown agent budget {name!r}; budgets are {', '.join(AGENT_BUDGETS)}", code="agent_budget"
            )
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) or number <= 0:
            raise ValidationError(
                f"agent budget {name} must be a positive number (got {number!r})", code="agent_budget"
            )
        if name == "seconds" and (problem := agent_seconds_problem(number)):
            raise ValidationError(problem, code="agent_budget")
