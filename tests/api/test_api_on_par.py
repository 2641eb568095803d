"""The API on par with the site (issue 37): responses that match the schema for every parameter, pinning a run, a
paused run's state and reason, a failing item's traceback and line, one error body, numbers as numbers, named
fields, and the API docs at the address the guides give."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import EvaluationRun, Outcome
from tests.api.test_schema import api_schema  # noqa: F401 (a fixture)
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db


def test_items_without_the_masked_code_match_the_schema(api_schema, release):  # noqa: F811
    """Was: `masked_code` left out while the schema marks it required; it is now always there, null when not asked
    for."""
    from schemathesis.specs.openapi.checks import response_schema_conformance

    operation = api_schema["/api/v1/releases/{name}/items/"]["GET"]
    for flag in ("false", "true"):
        case = operation.Case(path_parameters={"name": release.name}, query={"masked_code": flag})
        response = case.call()
        assert response.status_code == 200
        case.validate_response(response, checks=[response_schema_conformance])
        masked = {item["masked_code"] is None for item in response.json()["results"]}
        assert masked == {flag == "false"}


@pytest.fixture
def owned_runs(release, author):
    mine = services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", api_key="sk-own", owner=author
    )
    return mine, evaluate(release, mine, lambda s: True), evaluate(release, mine, lambda s: False)


def test_the_owner_pins_and_unpins_a_run_through_the_api(clients, owned_runs, release):
    mine, older, newer = owned_runs
    url = f"/api/v1/runs/{older.pk}/"

    def row() -> dict:
        board = clients["anonymous"].get(f"/api/v1/releases/{release.name}/leaderboard/").json()
        return next(r for r in board if r["model"] == "mine")

    assert row()["run"] == newer.pk, "the latest completed run is the row"

    refused = clients["other"].patch(url, {"pinned": True}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert clients["anonymous"].patch(url, {"pinned": True}, format="json").status_code in (401, 403)

    pinned = clients["owner"].patch(url, {"pinned": True}, format="json")
    assert pinned.status_code == 200, pinned.content
    assert pinned.json()["pinned"] is True and pinned.json()["pinned_at"]
    assert row()["run"] == older.pk and row()["pinned"] is True

    unpinned = clients["owner"].patch(url, {"pinned": False}, format="json")
    assert unpinned.status_code == 200 and unpinned.json()["pinned"] is False
    assert row()["run"] == newer.pk

    bad = clients["owner"].patch(url, {"pinned": "perhaps"}, format="json")
    assert bad.status_code == 400 and "pinned" in bad.json()["error"]["details"]


def test_a_run_that_paused_itself_says_so_and_why(clients, release, author):
    mine = services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", api_key="sk-own", owner=author
    )
    run = services.run_start(model=mine, version=release, user=author, dispatch=False)
    reason = "5 model calls in a row failed: AuthenticationError: invalid key"
    EvaluationRun.objects.filter(pk=run.pk).update(status="cancelled", pause_reason=reason)
    body = clients["owner"].get(f"/api/v1/runs/{run.pk}/").json()
    assert body["status"] == "cancelled" and body["status_label"] == "Paused"
    assert body["paused"] is True and body["pause_reason"] == reason


def test_a_syntax_errors_traceback_and_line_are_in_the_results(clients, release, maintainer):
    run = evaluate(release, model("broken"), lambda s: False)
    outcome = Outcome.objects.filter(run=run).select_related("snippet").first()
    snippet: Snippet = outcome.snippet
    line = snippet.start_line + 1
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/work/tests/test_model.py", line 3, in <module>\n'
        "    import model\n"
        f'  File "/work/{snippet.file_path}", line {line}\n'
        "    x = (\n"
        "        ^\n"
        "SyntaxError: '(' was never closed\n"
    )
    Outcome.objects.filter(pk=outcome.pk).update(
        status="failed", category="syntax", detail="SyntaxError: '(' was never closed", stderr_tail=stderr, tests=[]
    )
    results = clients["maintainer"].get(f"/api/v1/runs/{run.pk}/results/").json()["results"]
    item = next(r for r in results if r["item"] == snippet.pk)
    assert item["category"] == "syntax" and item["tests"] == []
    assert "SyntaxError: '(' was never closed" in item["traceback"] and item["error_line"] == line


def test_a_tests_subtests_are_named(clients, release):
    run = evaluate(release, model("subtested"), lambda s: False)
    outcome = Outcome.objects.filter(run=run).first()
    Outcome.objects.filter(pk=outcome.pk).update(
        tests=[{"id": "t.T.test_x", "outcome": "failed", "passed": False, "problem": "", "subtests": [2, 3]}]
    )
    results = clients["anonymous"].get(f"/api/v1/runs/{run.pk}/results/").json()["results"]
    test = next(r for r in results if r["item"] == outcome.snippet_id)["tests"][0]
    assert test["subtests"] == {"passed": 2, "run": 3}


def test_errors_come_in_one_envelope(clients, owned_runs, release):
    _, older, newer = owned_runs
    refused = [
        clients["anonymous"].get(f"/api/v1/releases/{release.name}/compare/", {"a": older.pk, "b": older.pk}),
        clients["anonymous"].get("/api/v1/releases/9.9.9/leaderboard/"),
        clients["anonymous"].get("/api/v1/nothing-here/"),
        clients["other"].post(f"/api/v1/runs/{older.pk}/cancel/"),
    ]
    for response in refused:
        assert response.status_code >= 400
        body = response.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body


def test_the_api_docs_are_at_the_address_the_guides_give(client):
    response = client.get("/api/docs/", follow=True)
    assert response.status_code == 200 and response.redirect_chain[-1][0] == reverse("api-docs")
    assert 'id="swagger-ui"' in response.content.decode()
