"""The one base of the errors a service raises to refuse a request, with a message written for the person who made it.

Pages show it as a message (the views catch `ApplicationError`, never a broad `ValueError`, so that a bug's
ValueError stays a bug); the API answers it with a 400 in `config.api.exception_handler` (subclasses with a status
of their own are mapped there first). It is a ValueError still, so that callers written against that keep working.
"""

from __future__ import annotations


class ApplicationError(ValueError):
    """A refusal the user can act on: its text says what was refused and why."""
