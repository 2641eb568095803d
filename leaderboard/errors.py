"""The leaderboard app's error types, apart from the reads that raise them, so that any module may name them."""

from __future__ import annotations

from common.errors import ApplicationError


class ComparisonError(ApplicationError):
    """The two runs cannot be compared (the message says why)."""
