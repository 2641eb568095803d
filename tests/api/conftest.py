"""Fixtures of the API tests: a published release, clients for each kind of caller, and no real dispatch."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.conftest import cache_empty, client_for


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    """Throttle counts live in the cache; each test starts with none."""
    cache_empty()
    yield
    cache_empty()


@pytest.fixture(autouse=True)
def dispatched(monkeypatch) -> list[int]:
    """Runs queued by a resume, recorded instead of published: these tests have no broker or worker."""
    from evaluation import services

    calls: list[int] = []
    monkeypatch.setattr(services.runs, "run_dispatch", lambda *, run: calls.append(run.pk) or 0)
    return calls


@pytest.fixture
def clients(author, other_author, maintainer) -> dict[str, APIClient]:
    """One client per caller: `author` owns what the tests create, `other` does not, `maintainer` may do all."""
    return {
        "anonymous": client_for(None),
        "owner": client_for(author),
        "other": client_for(other_author),
        "maintainer": client_for(maintainer),
    }


def reference_answers(version) -> bytes:
    """The JSONL of a perfect upload: every item of the version answered with its reference code."""
    import json

    from benchmarks.selectors import version_snippets

    return "".join(
        json.dumps({"id": str(s.pk), "sample": 0, "answer": f"```python\n{s.reference_code}```"}) + "\n"
        for s in version_snippets(version=version)
    ).encode()
