"""The evaluation app's error types, apart from the services that raise them, so that any module may name them."""

from __future__ import annotations

from common.errors import ApplicationError


class EvaluationError(ApplicationError):
    """A request that cannot be carried out, with a message for the person who made it."""


class BudgetRefused(EvaluationError):
    """An agent budget the release does not allow: `problems` (the API's details) names each bad budget and says
    why, so that a form shows every one beside its field."""

    def __init__(self, problems: dict[str, str]):
        self.problems = self.details = problems
        super().__init__("; ".join(problems.values()))
