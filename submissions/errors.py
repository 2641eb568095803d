"""The submissions app's error types, apart from the services that raise them, so that any module may name them."""

from __future__ import annotations

from common.errors import ApplicationError


class TransitionError(ApplicationError):
    """A transition the state machine does not allow, with the states named."""
