"""Fixtures shared by the evaluation tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def backend_name(request) -> str:
    """Each sandbox backend that isolates, once per module (the fork server's tests hold a warm session per backend)."""
    return request.param
