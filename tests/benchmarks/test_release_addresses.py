"""Every release page has one address, /versions/<name>/...; the /releases/<name>/... form of each redirects to it
permanently (config/release_addresses.py), so a guide or a saved link under either prefix reaches the page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from benchmarks.models import Snippet
from benchmarks.services.curation import version_draft_create

pytestmark = pytest.mark.django_db


def release_pages() -> list[tuple[str, list[str]]]:
    """(url name, its parameters) of every route under versions/<str:name>/, read from the URLconf."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route)
            elif isinstance(p, URLPattern) and route.startswith("versions/<str:name>/") and p.name:
                found.append((p.name, list(p.pattern.converters)))

    walk(get_resolver().url_patterns, "")
    return found


def test_the_walk_finds_the_pages_of_both_former_prefixes():
    names = {name for name, _ in release_pages()}
    assert {"version-detail", "leaderboard", "paper-detail", "release-humans", "release-compare"} <= names
    assert {"release-difficulty", "attempt-open", "reference-show", "version-curate"} <= names


def test_every_release_page_answers_under_one_prefix_and_the_other_redirects_to_it(release, maintainer):
    snippet = Snippet.objects.filter(task__versions=release).first()
    values = {
        "name": release.name,
        "slug": snippet.task.paper.slug,
        "task_id": snippet.task_id,
        "snippet_id": snippet.pk,
        "kind": "items",
    }
    client = Client()
    client.force_login(maintainer)
    pages = release_pages()
    version_draft_create(name="1.1.0")  # the curation pages are a draft's
    for url_name, params in pages:
        kwargs = {p: values[p] for p in params}
        page = reverse(url_name, kwargs=kwargs)
        answers = {client.get(reverse(url_name, kwargs={**kwargs, "name": n})).status_code for n in ("1.0.0", "1.1.0")}
        assert page.startswith("/versions/") and answers - {301, 404}, (page, answers)
        old = page.replace("/versions/", "/releases/", 1)
        moved = client.get(f"{old}?mode=agent")
        assert (moved.status_code, moved["Location"]) == (301, f"{page}?mode=agent"), old
        assert client.get(old.rstrip("/"))["Location"] == page, "the slash is appended as for any address"
        posted = client.post(old, {"x": "1"})
        assert (posted.status_code, posted["Location"]) == (308, page), "a form's post keeps its method"
    assert len(pages) >= 20


def test_the_prefixes_alone_are_the_release_list_and_an_unknown_page_is_not_found(release):
    client = Client()
    for address in ("/releases/", "/versions/"):
        answer = client.get(address)
        assert (answer.status_code, answer["Location"]) == (301, "/"), address
    assert client.get(f"/releases/{release.name}/no-such-page/").status_code == 404
    assert client.get(f"/versions/{release.name}/humans/").status_code == 200
    assert client.get(f"/releases/{release.name}/leaderboard/", follow=True).status_code == 200
