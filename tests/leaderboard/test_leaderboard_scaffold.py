"""The scaffold of an agent row (the platform's own loop, or an uploaded run's Harbor agent): a column of its own, a
filter, and a row of its own per scaffold."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evaluation.models import SCAFFOLD_PLATFORM, EvaluationRun
from tests.conftest import client_for
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db
BOARD = "/api/v1/releases/1.0.0/leaderboard/"


def _agent(run: EvaluationRun, scaffold: dict | None = None) -> EvaluationRun:
    params = {**run.params, **({"scaffold": scaffold} if scaffold else {})}
    EvaluationRun.objects.filter(pk=run.pk).update(mode="agent", params=params)
    run.refresh_from_db()
    return run


def test_a_model_under_two_scaffolds_has_two_rows_named_by_scaffold_and_filtered(client, release):
    entry = model("coder")
    own = _agent(evaluate(release, entry, lambda s: True))
    harbor = _agent(evaluate(release, entry, lambda s: s.loc >= 3), {"name": "terminus-2", "version": "2.0.1"})
    rows = client_for().get(BOARD).json()
    ours = {row["run"]: row["scaffold"] for row in rows if row["model"] == "coder"}
    assert ours == {own.pk: SCAFFOLD_PLATFORM, harbor.pk: "terminus-2 2.0.1"}  # one row each, neither replaced
    only = client_for().get(BOARD, {"scaffold": "terminus-2 2.0.1"}).json()
    assert [row["run"] for row in only if not row["calibration"]] == [harbor.pk]
    page = client.get(reverse("leaderboard", args=["1.0.0"]), {"mode": "agent"}).content.decode()
    assert 'data-column="scaffold"' in page and "terminus-2 2.0.1" in page and 'name="scaffold"' in page


def test_without_scaffolds_a_later_agent_run_still_replaces_the_earlier_row(release):
    entry = model("coder")
    _agent(evaluate(release, entry, lambda s: True))
    later = _agent(evaluate(release, entry, lambda s: False))
    rows = [row for row in client_for().get(BOARD).json() if row["model"] == "coder"]
    assert [row["run"] for row in rows] == [later.pk] and rows[0]["scaffold"] == SCAFFOLD_PLATFORM
