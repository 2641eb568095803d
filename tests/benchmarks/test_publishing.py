"""Publishing with a net (issue 37): the form says what publishing freezes and asks first (a box to tick without
JavaScript, a dialog with it); publishing starts the release's calibration runs by itself; the release's page says
when its reference lines are ready, and the home page switches to the release once they are."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.services.curation import version_draft_create
from benchmarks.services.publishing import PUBLISH_FREEZES
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.outcomes import Verdict
from tests.conftest import page_text
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db


def finish(run: EvaluationRun, *, passed: bool) -> None:
    """Score a queued calibration run's items as a worker would record them (the pipeline has its own tests)."""
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    verdict = Verdict("passed", "", "") if passed else Verdict("failed", "wrong_result", "assertion failed")
    for snippet in Snippet.objects.filter(task__versions=run.version).select_related("task"):
        generation = services.calibration_generation(run=run, snippet=snippet, sample=0)
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)


def test_publish_says_what_it_freezes_and_asks_first(client, release, maintainer):
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    client.force_login(maintainer)
    page = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    form = page[page.index('id="publish-title"') : page.index("</form>", page.index('id="publish-title"'))]
    assert escape(PUBLISH_FREEZES) in form and "cannot be undone" in form
    assert re.search(rf'hx-confirm="Publish 1\.1\.0\? [^"]*{re.escape(escape(PUBLISH_FREEZES))}"', form), "a dialog"
    assert 'name="confirm" value="yes" required' in form, "a box the browser requires without JavaScript"
    assert 'href="/guides/submitting/#10-publishing-a-release"' in form

    refused = client.post(reverse("version-publish", args=["1.1.0"]), {"notes": "x"}, follow=True).content.decode()
    draft.refresh_from_db()
    assert draft.status == BenchmarkVersion.Status.DRAFT, "a POST without the box ticked publishes nothing"
    assert "confirm that 1.1.0 is to be frozen" in refused
    client.post(reverse("version-publish", args=["1.1.0"]), {"notes": "x", "confirm": "yes"})
    draft.refresh_from_db()
    assert draft.status == BenchmarkVersion.Status.PUBLISHED


def test_publishing_starts_the_reference_lines_and_the_home_page_follows_them(
    client, release, maintainer, django_capture_on_commit_callbacks, settings
):
    settings.RELEASE_CALIBRATE_ON_PUBLISH = True  # off for the rest of the suite (tests/conftest.py)
    calibrate(release, "reference", passed=True)
    calibrate(release, "placeholder", passed=False)
    calibrate(release, "strong", passed=True)
    version_draft_create(name="1.1.0", actor=maintainer)
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        client.post(reverse("version-publish", args=["1.1.0"]), {"confirm": "yes"})
    callbacks[-1]()  # the announcement; the runs' own dispatch waits for a commit a test never makes
    started = EvaluationRun.objects.filter(version__name="1.1.0").select_related("model")
    assert sorted(r.model.kind for r in started) == ["placeholder", "reference"]
    assert all(r.mode == "single" and r.status == "queued" and r.total_items == 33 for r in started)
    callbacks[-1]()
    assert started.count() == 2, "an announcement delivered twice starts nothing more"

    client.logout()
    page = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    lines = page[page.index('id="reference-lines"') : page.index("</section>", page.index('id="reference-lines"'))]
    assert "Reference lines not ready yet" in lines and 'hx-trigger="every 5s"' in lines
    for run in started:
        assert f"{run.model.display_name}:" in lines and f'href="/runs/{run.pk}/">run {run.pk}</a>' in lines
    assert "0 of 33 items scored" in lines
    home = client.get("/").content.decode()
    assert "Release 1.0.0" in home, "an empty release is not shown while its reference lines are computed"
    assert 'href="/versions/1.1.0/leaderboard/">1.1.0</a>, has no results yet' in home

    reference = started.get(model__kind=ModelEntry.Kind.REFERENCE)
    finish(reference, passed=True)
    assert "Release 1.0.0" in client.get("/").content.decode(), "one line of two is not ready"
    finish(started.get(model__kind=ModelEntry.Kind.PLACEHOLDER), passed=False)

    page = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    lines = page[page.index('id="reference-lines"') : page.index("</section>", page.index('id="reference-lines"'))]
    assert "Reference lines ready since" in lines and "hx-trigger" not in lines
    home = client.get("/").content.decode()
    assert "Release 1.1.0" in home and "data-newer-release" not in home
    assert "No model has a completed run on this release yet" in home, "its reference lines, and room for models"
    assert client.get("/leaderboard/")["Location"] == "/versions/1.1.0/leaderboard/"


def _section(page: str, start: str, end: str) -> str:
    begin = page.index(start)
    return page[begin : page.index(end, begin)]


def test_a_draft_shows_the_changelog_it_would_be_published_with_and_warns_when_nothing_changed(
    client, release, maintainer
):
    """The draft's page said "the changelog below is computed at publish" with none below, and publishing a draft
    identical to the last release was not warned."""
    from benchmarks.services.release_settings import version_settings_set

    draft = version_draft_create(name="1.1.0", actor=maintainer)
    client.force_login(maintainer)
    url = reverse("version-detail", args=["1.1.0"])
    page = client.get(url).content.decode()
    changes = page_text(_section(page, 'id="changes-title"', "</ul>"))
    assert "Changes since 1.0.0, if published now" in changes and "No changes." in changes
    assert "1.1.0 will be published with this changelog, computed again" in changes
    warning = "No changes since 1.0.0: publishing 1.1.0 freezes the same papers, splits, snippets and settings as 1.0.0"
    publish = _section(page, 'id="publish-title"', "</form>")
    assert warning in page_text(_section(publish, 'id="publish-unchanged"', "</p>")), "said above the form"
    assert f'hx-confirm="Publish 1.1.0? {warning}' in publish and escape(PUBLISH_FREEZES) in publish, "and asked"
    assert "computed at publish" not in page

    version_settings_set(version=draft, actor=maintainer, time_limit_seconds=120)
    page = client.get(url).content.decode()
    assert 'id="publish-unchanged"' not in page and "No changes since" not in page
    changes = page_text(_section(page, 'id="changes-title"', "</ul>"))
    assert "setting time limit: 300 s → 120 s" in changes, changes
    from benchmarks.services.publishing import release_publish_preview

    expected = release_publish_preview(version=draft).changelog
    client.post(reverse("version-publish", args=["1.1.0"]), {"confirm": "yes"})
    draft.refresh_from_db()
    assert draft.status == BenchmarkVersion.Status.PUBLISHED and draft.changelog == expected, "what the draft showed"
    published = client.get(url).content.decode()
    assert "if published now" not in published and "Changes since 1.0.0" in published
