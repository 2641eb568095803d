"""The guides are the repository's docs/ files rendered in the site, linked from the navigation and the README."""

from __future__ import annotations

import re

import pytest

from config.guides import GUIDES
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


def test_format_guide_renders_the_repository_file(client):
    body = client.get("/guides/format/").content.decode()
    text = (REPO / "docs" / "FORMAT.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert len(headings) > 5
    for heading in headings:
        assert heading.replace("`", "").split()[-1] in body  # rendered (code spans become <code>)
    assert '<h1 id="the-task-package-format-researchcodebench-compatible">' in body
    assert '<div class="highlight"><pre>' in body, "fenced blocks render as highlighted code"


def test_leaderboard_guide_says_the_token_scheme(client):
    body = client.get("/guides/leaderboard/").content.decode()
    assert "Getting a model on the leaderboard" in body and "Authorization: Token" in body
    assert 'aria-current="page">Getting on the leaderboard' in body


def test_unknown_guide_is_a_404_and_paths_cannot_escape(client):
    assert client.get("/guides/nope/").status_code == 404
    assert client.get("/guides/..%2Fconfig%2Fsettings/").status_code == 404


def test_guides_are_linked_from_the_navigation_and_the_readme(client):
    nav = client.get("/").content.decode().split("</nav>")[0]
    assert 'href="/guides/format/">Guides</a>' in nav and 'href="/api/v1/docs/">API</a>' in nav
    readme = (REPO / "README.md").read_text()
    for filename, _ in GUIDES.values():
        assert f"(docs/{filename})" in readme
