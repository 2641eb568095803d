"""The home page: the current release's leaderboard top (verified, self-reported and calibration marked), counts,
the release's changelog and the three paths in; a bounded number of queries whatever the number of models."""

from __future__ import annotations

import pytest

from benchmarks.services.psets import pset_import
from evaluation.models import EvaluationRun
from evaluation.selectors.runs import calibration_models
from tests.conftest import DEMO_PSET, page_text
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db


def test_home_shows_the_leaderboard_top_counts_and_paths(client, release):
    calibrate(release, "reference", passed=True)
    calibrate(release, "placeholder", passed=False)
    strong = calibrate(release, "strong", passed=True)
    weak = calibrate(release, "weak", passed=False)
    EvaluationRun.objects.filter(pk=weak.pk).update(provenance=EvaluationRun.Provenance.SELF_REPORTED)
    body = client.get("/").content.decode()
    top = body[body.index('id="home-leaderboard"') : body.index("</table>", body.index('id="home-leaderboard"'))]
    assert top.count('class="calibration"') == 2 and top.count(">calibration</span>") == 2
    assert ">verified</span>" in top and ">self-reported</span>" in top
    assert top.index("Strong") < top.index("Weak"), "ranked by the leaderboard's own order"
    assert f'href="/runs/{strong.pk}/"' in top
    snippets = sum(t.snippets.count() for t in release.tasks.all())
    assert (
        f"<strong>{release.tasks.count()}</strong> papers" in body and f"<strong>{snippets}</strong> snippets" in body
    )
    # calibration not counted among models: the counts are those of the rows listed
    assert "<strong>2</strong> models with results" in body
    assert "<strong>2</strong> ranked rows and <strong>2</strong> reference lines on 1.0.0" in body
    assert "data-newer-release" not in body
    assert "Changes in 1.0.0" in body and "added</span> dampnest" in body
    for path, label in (
        ("/leaderboard/", "Browse the leaderboard"),
        ("/guides/submitting/", "Contribute a paper"),
        ("/models/new/", "Evaluate your model"),
    ):
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
    with django_assert_max_num_queries(11):  # the 11th: the release's own runs still scoring (none here)
        assert client.get("/").status_code == 200


def test_after_a_publish_the_default_leaderboard_is_the_newest_release_with_results(client, release):
    """A newly published release has no results until its runs complete: the visitor is shown the newest one that
    has, told so and linked to the newest; the home page's counts are those of the release it lists."""
    strong = calibrate(release, "strong", passed=True)
    calibrate(release, "reference", passed=True)
    services_import = pset_import(root=DEMO_PSET, version_name="2.0.0", publish=True).version
    calibrate(services_import, "reference", passed=True)  # reference lines alone are no results
    response = client.get("/leaderboard/")
    assert response.status_code == 302 and response["Location"] == "/versions/1.0.0/leaderboard/"
    page = client.get(response["Location"]).content.decode()
    notice = page[page.index("data-newer-release") :].split("</p>")[0]
    assert "the newest with results" in notice and 'href="/versions/2.0.0/leaderboard/">2.0.0</a>' in notice
    home = client.get("/").content.decode()
    assert "Release 1.0.0" in home and f'href="/runs/{strong.pk}/"' in home
    notice = home[home.index("data-newer-release") :].split("</p>")[0]
    assert 'href="/versions/2.0.0/leaderboard/">2.0.0</a>, has no results yet' in notice
    assert "<strong>1</strong> model with results" in home
    assert "<strong>1</strong> ranked row and <strong>1</strong> reference line on 1.0.0" in home
    assert "No model has a completed run on this release yet" not in home

    calibrate(services_import, "strong", passed=False)
    assert client.get("/leaderboard/")["Location"] == "/versions/2.0.0/leaderboard/"
    assert "data-newer-release" not in client.get("/").content.decode()


def test_home_counts_the_rows_it_shows_and_names_each_rows_mode(client, release):
    """Issue 37: "1 completed run" stood beside three rows (two reference lines, one model), and a model's agent row
    looked like a second single-shot row with no Mode column."""
    calibrate(release, "reference", passed=True)
    calibrate(release, "placeholder", passed=False)
    coder = calibrate(release, "coder", passed=True)
    agent = calibrate(release, "coder", passed=False)
    EvaluationRun.objects.filter(pk=agent.pk).update(mode="agent")
    body = client.get("/").content.decode()
    top = body[body.index('id="home-leaderboard"') : body.index("</table>", body.index('id="home-leaderboard"'))]
    assert top.count("<tr") == 1 + 4, "a header, two reference lines, the coder's single-shot and agent rows"
    assert ">Mode</th>" in top and top.count('<span class="badge mode agent">agent</span>') == 1
    assert f'href="/runs/{coder.pk}/"' in top and f'href="/runs/{agent.pk}/"' in top
    assert "<strong>1</strong> model with results" in body
    assert "<strong>2</strong> ranked rows and <strong>2</strong> reference lines on 1.0.0" in body
    assert 'href="/guides/leaderboard/#scaled-pass1"' in top and 'aria-label="What scaled pass@1 means"' in top


def test_a_release_whose_reference_lines_are_ready_but_has_no_ranked_row_shows_the_latest_ranked_rows(client, release):
    """The walk: a release published with only its calibration runs done is the one shown (its reference lines are
    ready), with "0 models with results"; the home page and its leaderboard name the newest release that has. Walk 4:
    the home page pointed there from an empty row only; it now says so above the board and lists the latest ranked
    rows under the release that has them, until a model's run on the new release completes."""
    strong = calibrate(release, "strong", passed=True)
    calibrate(release, "reference", passed=True)
    newer = pset_import(root=DEMO_PSET, version_name="2.0.0", publish=True).version
    for model in calibration_models():
        calibrate(newer, model.name, passed=model.name == "reference")
    home = client.get("/").content.decode()
    assert "Release 2.0.0" in home and "No model has a completed run on this release yet" in home
    assert "data-with-results>1.0.0</a>" in home
    notice = page_text(home[home.index("data-no-ranked-rows") :].split("</p>")[0])
    assert "No model is ranked on 2.0.0 yet (it has its reference lines)" in notice, notice
    assert "The latest ranked rows are those of release 1.0.0, shown below." in notice
    current = home[home.index('id="home-leaderboard"') : home.index("</table>", home.index('id="home-leaderboard"'))]
    assert f'href="/runs/{strong.pk}/"' not in current
    earlier = home[home.index('id="home-earlier-leaderboard"') :].split("</table>")[0]
    assert f'href="/runs/{strong.pk}/"' in earlier and "Scored on 1.0.0, not on 2.0.0: 1 ranked row." in earlier
    assert "The latest ranked rows: release 1.0.0" in page_text(home)
    page = client.get("/versions/2.0.0/leaderboard/").content.decode()
    assert 'href="/versions/1.0.0/leaderboard/">1.0.0</a>' in page[page.index("data-with-results") :]
    assert "data-with-results" not in client.get("/versions/1.0.0/leaderboard/").content.decode()

    calibrate(newer, "strong", passed=False)  # a model's run on the new release: its own board, nothing beside it
    home = client.get("/").content.decode()
    assert "data-no-ranked-rows" not in home and "home-earlier-leaderboard" not in home
