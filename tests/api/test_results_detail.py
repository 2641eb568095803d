"""Per-item results in the API carry the error detail the item's page shows, behind the same visibility rule: held-out
items' details reach maintainers only (tests/test_visibility_matrix.py scans every body for the held-out code)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import VersionTask
from evaluation.models import Outcome
from tests.conftest import client_for, page_text
from tests.evaluation.test_item_view import scored  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def test_a_failed_item_says_what_its_page_says(client, scored):  # noqa: F811
    run, changed = scored["run"], scored["changed"]
    outcome = Outcome.objects.get(run=run, snippet=changed)
    results = client_for(None).get(reverse("api-run-results", args=[run.pk])).json()["results"]
    row = next(r for r in results if r["item"] == changed.pk)
    assert (row["status"], row["category"], row["category_label"]) == ("failed", "runtime", "Runtime error")
    assert row["detail"] == "NameError: name 'zz' is not defined"
    assert row["page"] == f"http://testserver{reverse('run-item', args=[run.pk, outcome.pk])}"
    page = page_text(client.get(row["page"]).content.decode())
    assert row["detail"] in page and row["category_label"] in page
    assert all(r["detail"] == "" and r["category_label"] == "passed" for r in results if r["item"] != changed.pk)


def test_a_held_out_items_detail_reaches_maintainers_only(scored, maintainer, author):  # noqa: F811
    run, changed = scored["run"], scored["changed"]
    VersionTask.objects.filter(version=run.version, task=changed.task).update(split=VersionTask.Split.HELD_OUT)
    url = reverse("api-run-results", args=[run.pk])
    for who in (None, author):
        results = client_for(who).get(url).json()["results"]
        assert results and changed.pk not in {r["item"] for r in results}
        assert "zz" not in str(results)
    results = client_for(maintainer).get(url).json()["results"]
    assert next(r for r in results if r["item"] == changed.pk)["detail"] == "NameError: name 'zz' is not defined"
