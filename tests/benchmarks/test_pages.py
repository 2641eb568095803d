"""Public pages show versions, papers and snippet trees; only maintainers see masked files; no page leaks reference
code."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.services.psets import pset_import
from tests.conftest import DEMO_PSET, page_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def maintainer(client):
    user = User.objects.create_user("maya", password="pw-maintainer-1")
    user.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    return user


def test_home_says_what_the_platform_is_and_lists_published_versions(client, release):
    draft = BenchmarkVersion.objects.create(name="next-draft")
    response = client.get(reverse("home"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "living benchmark" in body and "lines of code" in body
    assert release.name in body
    assert draft.name not in body, "drafts are for maintainers"
    assert "htmx-2.0.11.min.js" in body


def test_version_page_lists_papers_with_snippet_counts(client, release):
    body = client.get(reverse("version-detail", args=[release.name])).content.decode()
    for task in release.tasks.all():
        assert task.paper.title in body
        assert f'<td class="num">{task.snippets.count()}</td>' in body
    total = Snippet.objects.filter(task__versions=release).count()
    assert f"{total} snippets" in body


def test_draft_version_page_is_hidden_from_the_public(client, maintainer):
    pset_import(root=DEMO_PSET, version_name="draft-1")
    assert client.get(reverse("version-detail", args=["draft-1"])).status_code == 404
    client.force_login(maintainer)
    assert client.get(reverse("version-detail", args=["draft-1"])).status_code == 200


def test_paper_page_shows_metadata_and_tree_but_no_reference_code(client, release):
    task = release.tasks.get(paper__slug="dampnest")
    response = client.get(reverse("paper-detail", args=[release.name, "dampnest"]))
    body = response.content.decode()
    assert task.paper.title in body and "2025-01-20" in body
    for snippet in task.snippets.all():
        assert snippet.name in body
    nested = task.snippets.filter(depth=2).first()
    assert nested is not None
    assert f'id="snippet-{nested.pk}"' in body
    # The snippet tree never shows reference code; since issue 22 the public task's annotated file, which holds it
    # (as the release download does), is on the page in its own folded section.
    tree = body[body.index("<h2>Snippets</h2>") :]
    for snippet in task.snippets.filter(loc__gte=3):
        assert snippet.reference_code.strip().splitlines()[0].strip() not in tree
    assert "masked view" not in body


def test_a_public_paper_page_folds_the_paper_text_and_annotated_code(client, release):
    task = release.tasks.get(paper__slug="dampnest")
    body = client.get(reverse("paper-detail", args=[release.name, "dampnest"])).content.decode()
    sources = body[body.index('id="sources"') : body.index("<h2>Snippets</h2>")]
    assert sources.count('<details class="source">') == 1 + len(task.annotated_paths)
    assert f"Paper text <code>{task.paper_path}</code>" in sources and "<details open" not in sources
    text = page_text(sources)
    paper = (DEMO_PSET / "dampnest" / task.paper_path).read_text().strip().splitlines()[0]
    assert paper.strip() in text
    reference = task.snippets.filter(loc__gte=3).first().reference_code.strip().splitlines()[0].strip()
    assert reference in text


def test_held_out_paper_text_and_code_are_for_maintainers_only(client, release, maintainer):
    from benchmarks import visibility
    from benchmarks.models import VersionTask

    VersionTask.objects.filter(version=release, task__paper__slug="dampnest").update(split=VersionTask.Split.HELD_OUT)
    task = release.tasks.get(paper__slug="dampnest")
    url = reverse("paper-detail", args=[release.name, "dampnest"])
    assert client.get(url).status_code == 404
    assert not visibility.task_sources_visible(version=release, task=task, user=client.get(url).wsgi_request.user)
    client.force_login(maintainer)
    body = client.get(url).content.decode()
    assert 'id="sources"' in body and "held out: shown to maintainers only" in body


def test_masked_view_is_for_maintainers_only(client, release, maintainer):
    snippet = Snippet.objects.filter(task__versions=release, depth=1).first()
    url = reverse("snippet-masked", args=[release.name, snippet.pk])
    assert client.get(url).status_code == 403
    client.force_login(User.objects.create_user("ann", password="pw-author-1"))
    assert client.get(url).status_code == 403

    client.force_login(maintainer)
    page = client.get(reverse("paper-detail", args=[release.name, snippet.task.paper.slug])).content.decode()
    assert f'hx-get="{url}"' in page
    partial = client.get(url, headers={"HX-Request": "true"})
    assert partial.status_code == 200
    body = partial.content.decode()
    assert "<html" not in body, "htmx gets the partial only"
    text = page_text(body)
    assert f'# TODO: Implement block "{snippet.name}"' in text
    assert f"# Approximately {snippet.loc} line" in text
    assert '<div class="highlight">' in body, "the masked file is highlighted"
    assert "paper2code" not in body, "no marker lines in what a model sees"
    assert "<html" in client.get(url).content.decode(), "without JavaScript the link opens a full page"


def test_unknown_version_paper_and_snippet_are_404(client, release):
    assert client.get(reverse("version-detail", args=["nope"])).status_code == 404
    assert client.get(reverse("paper-detail", args=[release.name, "nope"])).status_code == 404


def test_login_page_labels_its_inputs(client):
    body = client.get(reverse("login")).content.decode()
    assert '<label for="id_username">' in body and '<label for="id_password">' in body
