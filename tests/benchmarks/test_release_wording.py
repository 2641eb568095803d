"""One name for one thing (issue 37): the pages called a release "Version" here and "Release" there. User-facing
text says "release" (a draft is a "draft release"); the URLs keep /versions/."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from benchmarks.services.curation import version_draft_create
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db

# "version" of something else stays: a Python or package version, a paper's arXiv version, the semantic version name.
_OTHER_VERSIONS = re.compile(r"semantic version|python version|package version|version control", re.I)


def visible_text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_the_pages_say_release_not_version(client, release, maintainer):
    run = calibrate(release, "strong", passed=True)
    version_draft_create(name="1.1.0", actor=maintainer)
    client.force_login(maintainer)
    paper = release.tasks.first().paper.slug
    pages = [
        "/",
        reverse("version-detail", args=["1.0.0"]),
        reverse("version-detail", args=["1.1.0"]),
        reverse("version-curate", args=["1.1.0"]),
        reverse("version-new"),
        reverse("leaderboard", args=["1.0.0"]),
        reverse("paper-detail", args=["1.0.0", paper]),
        reverse("model-detail", args=[run.model.name]),
        reverse("operations"),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        text = _OTHER_VERSIONS.sub("", visible_text(response.content.decode()))
        said = re.findall(r".{0,30}\bversions?\b.{0,30}", text, flags=re.I)
        assert not said, f"{url} says: {said}"
    home = visible_text(client.get("/").content.decode())
    assert "Releases" in home and "Release 1.0.0" in home
    assert "Draft release 1.1.0" in visible_text(client.get(reverse("version-detail", args=["1.1.0"])).content.decode())
