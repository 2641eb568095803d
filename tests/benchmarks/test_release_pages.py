"""Release pages: maintainers curate a draft, publish and deprecate through forms (with or without htmx); the public
version page shows notes, changelog, manifest hash and downloads; held-out tasks show as titles and counts only."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from benchmarks.models import BenchmarkVersion, Snippet, VersionTask
from benchmarks.services.curation import version_draft_create
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from tests.conftest import DEMO_PSET, download_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def first(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


@pytest.fixture
def draft(first, maintainer):
    return version_draft_create(name="1.1.0", actor=maintainer)


def test_new_draft_form_is_for_maintainers(client, first, author, maintainer):
    url = reverse("version-new")
    response = client.post(url, {"name": "1.1.0"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(author)
    assert client.post(url, {"name": "1.1.0"}).status_code == 403
    assert 'action="/versions/new/"' not in client.get(reverse("home")).content.decode()
    client.force_login(maintainer)
    assert 'action="/versions/new/"' in client.get(reverse("home")).content.decode()
    response = client.post(url, {"name": "1.1.0"})
    assert response.status_code == 302 and response["Location"] == reverse("version-curate", args=["1.1.0"])
    assert BenchmarkVersion.objects.get(name="1.1.0").tasks.count() == 3
    refused = client.post(url, {"name": "not a version"}, follow=True).content.decode()
    assert "is not a semantic version name" in refused


def test_curation_is_for_maintainers_only(client, draft, author, other_author):
    urls = [reverse("version-curate", args=["1.1.0"])]
    task = draft.tasks.first()
    snippet = task.snippets.first()
    posts = [
        (reverse("version-task-split", args=["1.1.0", task.pk]), {"split": "held_out"}),
        (reverse("version-task-drop", args=["1.1.0", task.pk]), {}),
        (reverse("version-snippet-retire", args=["1.1.0", snippet.pk]), {"reason": "flaky"}),
        (reverse("version-publish", args=["1.1.0"]), {"notes": "x"}),
    ]
    for url in urls:
        assert "/accounts/login/" in client.get(url)["Location"]
    for url, data in posts:
        assert "/accounts/login/" in client.post(url, data)["Location"]
    for user in (author, other_author):
        client.force_login(user)
        for url, data in posts:
            assert client.post(url, data).status_code in (403, 404)
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.tasks.count() == 3 and not draft.retirements.exists()
    assert set(draft.memberships.values_list("split", flat=True)) == {"public"}


def test_maintainer_sets_split_retires_drops_and_adds_with_or_without_htmx(client, draft, maintainer, tmp_path):
    client.force_login(maintainer)
    page = client.get(reverse("version-curate", args=["1.1.0"])).content.decode()
    damp = draft.tasks.get(paper__slug="dampnest")
    assert f'hx-post="{reverse("version-task-split", args=["1.1.0", damp.pk])}"' in page
    assert "<noscript>" in page and "Every accepted task revision is in this draft." in page

    response = client.post(reverse("version-task-split", args=["1.1.0", damp.pk]), {"split": "held_out"})
    assert response.status_code == 302
    assert draft.memberships.get(task=damp).split == VersionTask.Split.HELD_OUT

    snippet = damp.snippets.first()
    swapped = client.post(
        reverse("version-snippet-retire", args=["1.1.0", snippet.pk]),
        {"reason": "flaky test"},
        headers={"HX-Request": "true"},
        follow=True,
    )
    assert "Retired" in swapped.content.decode()
    assert draft.retirements.get(snippet=snippet).reason == "flaky test"
    # The pages show both: the retired item with its reason, the held-out task with its badge.
    page = client.get(reverse("version-curate", args=["1.1.0"])).content.decode()
    assert '<span class="badge failed">retired</span> <span class="muted">flaky test</span>' in page
    page = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    row = page[page.index(f'href="{reverse("paper-detail", args=["1.1.0", "dampnest"])}"') :]
    assert row[: row.index("</tr>")].count('<span class="badge held_out">held out</span>') == 1
    assert (
        "needs a reason"
        in client.post(
            reverse("version-snippet-retire", args=["1.1.0", damp.snippets.last().pk]), {"reason": " "}, follow=True
        ).content.decode()
    )

    pool = draft.tasks.get(paper__slug="topk-attention-pool")
    client.post(reverse("version-task-drop", args=["1.1.0", pool.pk]))
    assert not draft.tasks.filter(pk=pool.pk).exists()
    page = client.get(reverse("version-curate", args=["1.1.0"])).content.decode()
    assert f'<option value="{pool.pk}">topk-attention-pool r{pool.revision}' in page
    client.post(reverse("version-task-add", args=["1.1.0"]), {"task": pool.pk, "split": "public"})
    assert draft.memberships.get(task=pool).split == "public"
    # A task id that is no number is refused with a message (it was a ValueError, a 500 once ApplicationError was
    # what the release actions catch).
    refused = client.post(reverse("version-task-add", args=["1.1.0"]), {"task": "abc", "split": "public"}, follow=True)
    assert refused.status_code == 200 and "&#x27;abc&#x27; is not a task id" in refused.content.decode()

    changed = Path(shutil.copytree(DEMO_PSET, tmp_path / "pset"))
    code = changed / "trimmed-infonce" / "contrastive.py"
    code.write_text(code.read_text() + "\n")
    newer = pset_import(root=changed, version_name="staging").tasks_created[0]
    client.post(reverse("version-task-add", args=["1.1.0"]), {"task": newer.pk, "split": "public"})
    assert draft.tasks.get(paper__slug="trimmed-infonce") == newer, "a newer revision replaces the older one"


def test_publish_and_deprecate_through_the_version_page(client, draft, maintainer, author):
    damp = draft.tasks.get(paper__slug="dampnest")
    VersionTask.objects.filter(version=draft, task=damp).update(split="held_out")
    client.force_login(maintainer)
    page = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    assert f'action="{reverse("version-publish", args=["1.1.0"])}"' in page
    response = client.post(
        reverse("version-publish", args=["1.1.0"]), {"notes": "DampNest goes held out.", "confirm": "yes"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("version-detail", args=["1.1.0"])
    draft.refresh_from_db()
    assert draft.status == "published" and draft.notes == "DampNest goes held out." and draft.manifest_hash
    assert client.post(reverse("version-publish", args=["1.1.0"]), follow=True).status_code == 200  # refused politely

    client.force_login(author)
    assert client.post(reverse("version-deprecate", args=["1.1.0"]), {"note": "no"}).status_code == 403
    client.force_login(maintainer)
    assert (
        "needs a note"
        in client.post(reverse("version-deprecate", args=["1.1.0"]), {"note": ""}, follow=True).content.decode()
    )
    client.post(reverse("version-deprecate", args=["1.1.0"]), {"note": "Use 1.2.0."})
    draft.refresh_from_db()
    assert draft.status == "deprecated" and draft.deprecation_note == "Use 1.2.0."
    client.logout()
    assert "Use 1.2.0." in client.get(reverse("version-detail", args=["1.1.0"])).content.decode()


def test_public_version_page_has_notes_changelog_hash_and_downloads(client, draft, maintainer):
    pool = draft.tasks.get(paper__slug="topk-attention-pool")
    draft.memberships.filter(task=pool).delete()
    version = version_publish(version=draft, actor=maintainer, notes="Pooling paper removed.", downloads_inline=True)
    body = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    assert "Pooling paper removed." in body and version.manifest_hash in body
    assert "removed</span> topk-attention-pool" in body and "since 1.0.0" in body
    for kind, info in version.downloads.items():
        assert info["sha256"] in body and info["filename"] in body
        response = client.get(reverse("version-download", args=["1.1.0", kind]))
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="{info["filename"]}"'
        assert hashlib.sha256(download_body(response)).hexdigest() == info["sha256"]
    assert client.get(reverse("version-download", args=["1.1.0", "secrets"])).status_code == 404


def test_held_out_tasks_show_as_counts_only(client, draft, maintainer):
    damp = draft.tasks.get(paper__slug="dampnest")
    VersionTask.objects.filter(version=draft, task=damp).update(split="held_out")
    version_publish(version=draft, actor=maintainer)
    body = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
    assert "1 held-out paper" in body and f'<td class="num">{damp.snippets.count()}</td>' in body
    assert damp.paper.title not in body and "dampnest" not in body
    assert reverse("paper-detail", args=["1.1.0", "dampnest"]) not in body
    assert client.get(reverse("paper-detail", args=["1.1.0", "dampnest"])).status_code == 404
    for snippet in Snippet.objects.filter(task=damp, loc__gte=3):
        line = next(
            ln.strip() for ln in snippet.reference_code.splitlines() if ln.strip() and not ln.strip().startswith("#")
        )
        assert escape(line) not in body
    client.force_login(maintainer)
    assert client.get(reverse("paper-detail", args=["1.1.0", "dampnest"])).status_code == 200


def test_frozen_versions_are_not_curated(client, first, maintainer):
    client.force_login(maintainer)
    assert client.get(reverse("version-curate", args=["1.0.0"])).status_code == 404
    task = first.tasks.first()
    client.post(reverse("version-task-drop", args=["1.0.0", task.pk]))
    assert first.tasks.filter(pk=task.pk).exists()


def split_counts(body: str) -> str:
    return re.sub(r"\s+", " ", body.split('data-testid="split-counts">', 1)[1].split("</span>", 1)[0])


def test_the_release_page_counts_its_held_out_papers_and_snippets_for_everyone_who_sees_it(
    client, draft, author, maintainer
):
    damp = draft.tasks.get(paper__slug="dampnest")
    VersionTask.objects.filter(version=draft, task=damp).update(split="held_out")
    version_publish(version=draft, actor=maintainer)
    public = [m.task for m in draft.memberships.filter(split="public").select_related("task")]
    public_snippets = Snippet.objects.filter(task__in=public).count()
    said = (
        f"(public: {len(public)} papers, {public_snippets} snippets; "
        f"held out: 1 paper, {damp.snippets.count()} snippets)"
    )
    for viewer in (None, author, maintainer):
        if viewer is not None:
            client.force_login(viewer)
        body = client.get(reverse("version-detail", args=["1.1.0"])).content.decode()
        assert split_counts(body) == said, viewer
    client.logout()
    body = client.get(reverse("version-detail", args=["1.0.0"])).content.decode()
    assert split_counts(body) == "(all public, none held out)"
