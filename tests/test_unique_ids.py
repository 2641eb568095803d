"""Every page of the site, crawled as a visitor, a model owner and a maintainer, gives each element id once and binds
each label to a field of its own form (issue 37: the model page's run and upload forms shared `id_with_paper`,
`id_release` and `id_mode`, so the upload form's "made with the paper" label toggled the run form's checkbox)."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.urls import reverse

from evaluation import services
from evaluation.models import ModelEntry
from tests.leaderboard.test_leaderboard import evaluate

pytestmark = pytest.mark.django_db

# Not pages: downloads, the admin (Django's own), the API (its own docs page is crawled), signing out.
SKIPPED = ("/admin/", "/api/v1/", "/accounts/logout/", "/static/", "/media/")
MAX_PAGES = 250


class PageIds(HTMLParser):
    """The ids of a page with the form each sits in, and each label's target with its label's form."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[tuple[str, int | None]] = []
        self.labels: list[tuple[str, int | None]] = []
        self.links: list[str] = []
        self.form: int | None = None
        self.forms = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form":
            self.forms += 1
            self.form = self.forms
        if values.get("id"):
            self.ids.append((values["id"] or "", self.form))
        if tag == "label" and values.get("for"):
            self.labels.append((values["for"] or "", self.form))
        if tag == "a" and values.get("href") and "download" not in values:
            self.links.append(values["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form = None


def page_problems(body: str) -> tuple[list[str], list[str]]:
    """Ids given more than once, and labels whose field is missing or sits in another form."""
    page = PageIds()
    page.feed(body)
    counts = Counter(element_id for element_id, _ in page.ids)
    repeated = sorted(element_id for element_id, n in counts.items() if n > 1)
    where = dict(page.ids)
    unbound = [
        f"label for={target!r}"
        + (" (no such element)" if target not in where else f" in form {form}, its field in form {where[target]}")
        for target, form in page.labels
        if target not in where or (form is not None and where[target] != form)
    ]
    return repeated, unbound


def crawl(client, start: str = "/") -> dict[str, str]:
    """The site's HTML pages reached by links from `start`: one per path and set of query names (a sort link's
    values repeat a page already seen)."""
    pages: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = [start]
    while queue and len(pages) < MAX_PAGES:
        address = queue.pop(0)
        parts = urlsplit(address)
        key = (parts.path, frozenset(name for name, _ in parse_qsl(parts.query)))
        if parts.scheme or parts.netloc or not parts.path.startswith("/") or key in seen:
            continue
        seen.add(key)
        if parts.path.startswith(SKIPPED):
            continue
        response = client.get(address, follow=True)
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        body = response.content.decode()
        pages[address] = body
        parser = PageIds()
        parser.feed(body)
        queue += [link.split("#")[0] for link in parser.links if link.split("#")[0]]
    return pages


@pytest.fixture
def site(release, author):
    """A release with reference lines and a model of the author's with a run: the model page then holds both the run
    form and the upload form."""
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    evaluate(release, ModelEntry.objects.get(name="placeholder"), lambda s: False)
    mine = services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", api_key="sk-own", owner=author
    )
    evaluate(release, mine, lambda s: s.loc > 3)
    return release


def test_the_model_page_gives_its_two_forms_ids_of_their_own(client, site, author):
    client.force_login(author)
    body = client.get(reverse("model-detail", args=["mine"])).content.decode()
    assert 'action="/models/mine/runs/"' in body and 'action="/models/mine/uploads/"' in body
    assert page_problems(body) == ([], [])


@pytest.mark.parametrize("who", ["visitor", "author", "maintainer"])
def test_no_page_of_the_crawl_repeats_an_id_or_binds_a_label_to_another_form(client, site, request, who):
    if who != "visitor":
        client.force_login(request.getfixturevalue(who))
    pages = crawl(client)
    assert len(pages) > 20, sorted(pages)
    assert reverse("model-detail", args=["mine"]) in pages and reverse("leaderboard", args=[site.name]) in pages
    found = {address: problems for address, body in pages.items() if any(problems := page_problems(body))}
    assert found == {}
