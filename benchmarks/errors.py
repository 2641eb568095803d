"""The benchmarks app's error types, apart from the services that raise them, so that any module may name them."""

from __future__ import annotations

from common.errors import ApplicationError


class CurationError(ApplicationError):
    """A refusal of a release's curation, settings or protocols, said to the maintainer who asked."""
