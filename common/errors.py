"""The one base of the errors a service raises to refuse a request, with a message written for the person who made it.

Each refusal declares how it is answered: `status` (400 unless the class says otherwise), the API's `code`, and for
the API a `summary` and `details` where its own text is not the whole answer. It is caught once for the API
(`common.api.exception_handler`) and once for pages (`common.pages.ApplicationErrorMiddleware`); views that show it
inside a form they re-render catch it themselves. It is a ValueError still, so that callers written against that
keep working; views never catch a broad ValueError, so that a bug's ValueError stays a bug.
"""

from __future__ import annotations

from typing import Any


class ApplicationError(ValueError):
    """A refusal the user can act on: its text says what was refused and why."""

    status: int = 400
    code: str = "invalid"
    # The API's message when the error's own text is not it (e.g. an upload's problems go in `details` instead).
    summary: str | None = None
    details: Any = None
