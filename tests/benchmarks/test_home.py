"""The home page: the current release's leaderboard top (verified, self-reported and calibration marked), counts,
the release's changelog and the three paths in; a bounded number of queries whatever the number of models."""

from __future__ import annotations

import pytest

from benchmarks.services import pset_import
from evaluation.models import EvaluationRun
from tests.conftest import DEMO_PSET
from tests.evaluation.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


def test_home_shows_the_leaderboard_top_counts_and_paths(client, release):
    calibrate(release, "reference", passed=True)
    calibrate(release, "placeholder", passed=False)
    strong = calibrate(release, "strong", passed=True)
    weak = calibrate(release, "weak", passed=False)
    EvaluationRun.objects.filter(pk=weak.pk).update(provenance=EvaluationRun.Provenance.SELF_REPORTED)
    body = client.get("/").content.decode()
    top = body[body.index('id="home-leaderboard"'):body.index("</table>", body.index('id="home-leaderboard"'))]
    assert top.count('class="calibration"') == 2 and top.count(">calibration</span>") == 2
    assert ">verified</span>" in top and ">self-reported</span>" in top
    assert top.index("Strong") < top.index("Weak"), "ranked by the leaderboard's own order"
    assert f'href="/runs/{strong.pk}/"' in top
    snippets = sum(t.snippets.count() for t in release.tasks.all())
    assert f"<strong>{release.tasks.count()}</strong> papers" in body and f"<strong>{snippets}</strong> snippets" in body
    assert "<strong>2</strong> models" in body and "<strong>2</strong> completed runs" in body  # calibration not counted
    assert "Changes in 1.0.0" in body and "added</span> dampnest" in body
    for path, label in (("/leaderboard/", "Browse the leaderboard"), ("/guides/submitting/", "Contribute a paper"),
                        ("/models/new/", "Evaluate your model")):
        assert f'href="{path}"><strong>{label}</strong>' in body


def test_home_without_runs_explains_how_to_get_on_it(client, release):
    body = client.get("/").content.decode()
    assert "No model has a completed run on this release yet" in body


def test_home_without_a_release_still_shows_the_paths(client, db):
    response = client.get("/")
    assert response.status_code == 200 and "Contribute a paper" in response.content.decode()


def test_home_queries_stay_bounded(client, release, django_assert_max_num_queries):
    for index in range(6):
        calibrate(release, f"model-{index}", passed=index % 2 == 0)
    with django_assert_max_num_queries(10):
        assert client.get("/").status_code == 200
