"""Releases: curation of a draft, publishing with manifest, changelog and downloads, splits, retirement."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied

from benchmarks.models import BenchmarkVersion, Snippet, VersionTask
from benchmarks.selectors import blob_read, version_snippets
from benchmarks.services.curation import snippet_retire, version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_deprecate, version_publish
from tests.conftest import DEMO_PSET, items_read

pytestmark = pytest.mark.django_db


@pytest.fixture
def first(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


def test_a_new_draft_starts_from_the_latest_release_and_publishes_a_changelog(first, tmp_path, maintainer):
    changed = Path(shutil.copytree(DEMO_PSET, tmp_path / "pset"))
    code = changed / "dampnest" / "optimizer.py"
    code.write_text(code.read_text() + "\n")
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    assert draft.tasks.count() == 3
    new_task = pset_import(root=changed, version_name="staging").tasks_created[0]
    version_task_set(version=draft, task=new_task, actor=maintainer)
    pooling = draft.tasks.get(paper__slug="topk-attention-pool")
    draft.memberships.filter(task=pooling).delete()

    published = version_publish(version=draft, actor=maintainer, notes="Fresh DampNest code.")

    assert published.previous == first and published.notes == "Fresh DampNest code."
    assert published.changelog["removed"] == ["topk-attention-pool"] and published.changelog["added"] == []
    assert [c["paper"] for c in published.changelog["changed"]] == ["dampnest"]
    assert published.changelog["changed"][0]["to_revision"] == 2


def test_held_out_tasks_and_their_prompts_are_never_downloadable(first, maintainer):
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    held = draft.tasks.get(paper__slug="trimmed-infonce")
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    published = version_publish(version=draft, actor=maintainer, downloads_inline=True)

    archive = zipfile.ZipFile(io.BytesIO(blob_read(sha256=published.downloads["pset"]["sha256"])))
    names = archive.namelist()
    assert any(n.startswith("1.1.0/dampnest/") for n in names)
    assert not any("trimmed-infonce" in n for n in names), "held-out code never leaves the platform"
    assert "trimmed-infonce" not in archive.read("1.1.0/papers.yaml").decode()
    items = items_read(blob_read(sha256=published.downloads["items"]["sha256"]))
    held = Snippet.objects.filter(task__paper__slug="trimmed-infonce", task__versions=published)
    assert len(items) == 33 - held.count() and {i["paper"] for i in items} == {"dampnest", "topk-attention-pool"}
    public_item = items[0]
    assert "TODO: Implement block" in public_item["masked_code"] and public_item["prompt"].count("## ") >= 1


def test_the_items_file_holds_each_paper_once_and_every_prompt_as_the_api_gives_it(first):
    """Each paper's text is written once, in its own line; every item's prompt rebuilt from it is the API's."""
    from rest_framework.test import APIClient

    data = blob_read(sha256=first.downloads["items"]["sha256"])
    records = [json.loads(line) for line in data.decode().splitlines()]
    papers = [r for r in records if r["type"] == "paper"]
    assert sorted(r["paper"] for r in papers) == ["dampnest", "topk-attention-pool", "trimmed-infonce"]
    for paper in papers:
        assert data.decode().count(json.dumps(paper["paper_text"], ensure_ascii=False)[1:-1][:200]) == 1
    items = items_read(data)  # asserts too that no paper's line comes twice
    assert len(items) == version_snippets(version=first).count() == 33
    client = APIClient()
    for item in items:
        assert "prompt" not in json.loads(
            next(line for line in data.decode().splitlines() if f'"id": "{item["id"]}"' in line)
        )
        api = client.get(f"/api/v1/releases/1.0.0/items/{item['id']}/").json()
        assert item["prompt"] == api["prompt"] and item["masked_code"] == api["masked_code"], item["snippet"]


def test_the_items_file_holds_each_masked_file_once_and_the_documented_reader_rebuilds_every_prompt(first, tmp_path):
    """An item line holds its masked file once (no prompt text of its own); the reader printed in
    docs/LEADERBOARD.md, run as it is, gives the API's prompt for every item."""
    data = blob_read(sha256=first.downloads["items"]["sha256"])
    for line in data.decode().splitlines():
        record = json.loads(line)
        if record["type"] == "item":
            assert set(record) == {"type", "id", "paper", "file", "snippet", "loc", "protocol", "masked_code"}
            assert line.count(json.dumps(record["masked_code"], ensure_ascii=False)[1:-1]) == 1
    guide = (Path(__file__).resolve().parents[2] / "docs" / "LEADERBOARD.md").read_text()
    reader = guide.split("The items file holds JSON lines of two types")[1].split("```python\n")[1].split("```")[0]
    (tmp_path / "demo-1.0.0-items.jsonl").write_bytes(data)  # the name the guide's reader opens
    scope: dict = {"json": json, "open": lambda name, **kw: open(tmp_path / name, **kw)}  # noqa: SIM115 (the guide's `with`)
    exec(reader, scope)  # noqa: S102 - the documentation's own code, as a reader copies it
    assert scope["prompts"] == {item["id"]: item["prompt"] for item in items_read(data)}
    from rest_framework.test import APIClient

    some = next(iter(scope["prompts"]))
    assert scope["prompts"][some] == APIClient().get(f"/api/v1/releases/1.0.0/items/{some}/").json()["prompt"]


def test_the_problem_set_zip_reads_back_as_the_tasks_it_was_built_from(first, tmp_path):
    """Built member by member from storage, the zip is still the problem set: read back, every paper has its
    task's content hash."""
    from benchmarks.paper2code.pset import read_pset
    from benchmarks.selectors import package_load

    zipfile.ZipFile(io.BytesIO(blob_read(sha256=first.downloads["pset"]["sha256"]))).extractall(tmp_path)
    packages = {p.id: p for p in read_pset(tmp_path / "1.0.0")}
    assert {slug: p.content_hash for slug, p in packages.items()} == {
        t.paper.slug: package_load(t).content_hash for t in first.tasks.select_related("paper")
    }


def test_the_upgrade_rewrites_old_items_files_without_held_out_prompts(first, maintainer):
    """Releases published before held-out items became private have every item in their JSONL: the data migration
    keeps only the public ones, under a new sha256 that the download serves."""
    import importlib

    from django.apps import apps

    from benchmarks.selectors import protocol_get, snippet_prompt
    from benchmarks.services.blobs import blob_store

    migration = importlib.import_module("benchmarks.migrations.0004_items_download_public_only")
    VersionTask.objects.filter(version=first, task__paper__slug="trimmed-infonce").update(split="held_out")
    old = "".join(
        json.dumps(
            {
                "id": str(s.pk),
                "paper": s.task.paper.slug,
                "prompt": snippet_prompt(
                    snippet=s,
                    files={p: blob_read(sha256=d) for p, d in s.task.files.items()},
                    with_paper=False,
                    protocol=protocol_get(name="rcb-v1"),
                ),
            }
        )
        + "\n"
        for s in version_snippets(version=first)
    ).encode()
    blob = blob_store(content=old)
    first.downloads = {
        **first.downloads,
        "items": {**first.downloads["items"], "sha256": blob.sha256, "size": blob.size},
    }
    first.save()
    migration.forwards(apps, None)
    first.refresh_from_db()
    entry = first.downloads["items"]
    lines = [json.loads(line) for line in blob_read(sha256=entry["sha256"]).decode().splitlines()]
    assert entry["sha256"] != blob.sha256 and entry["size"] == len(blob_read(sha256=entry["sha256"]))
    assert {line["paper"] for line in lines} == {"dampnest", "topk-attention-pool"}
    assert len(lines) == version_snippets(version=first, split="public").count()
    migration.forwards(apps, None)  # twice changes nothing
    first.refresh_from_db()
    assert first.downloads["items"] == entry


def test_retired_snippets_leave_the_items_and_are_listed_with_their_reason(first, maintainer):
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    snippet = version_snippets(version=draft).first()
    snippet_retire(version=draft, snippet=snippet, reason="flaky on some BLAS builds", actor=maintainer)
    published = version_publish(version=draft, actor=maintainer)
    assert version_snippets(version=published).count() == 32
    assert published.manifest["retired"][0]["reason"] == "flaky on some BLAS builds"
    assert [c["snippets_after"] for c in published.changelog["changed"]] == [
        c["snippets_before"] - 1 for c in published.changelog["changed"]
    ]


def test_published_versions_never_change(first, maintainer):
    with pytest.raises(ValueError, match="frozen"):
        version_task_set(version=first, task=first.tasks.first(), actor=maintainer)
    with pytest.raises(ValueError, match="frozen"):
        snippet_retire(version=first, snippet=version_snippets(version=first).first(), reason="x", actor=maintainer)
    deprecated = version_deprecate(version=first, actor=maintainer, note="superseded by 1.1.0")
    assert deprecated.status == BenchmarkVersion.Status.DEPRECATED


def test_names_must_be_semantic_versions_and_curation_is_for_maintainers(first, author, maintainer):
    with pytest.raises(ValueError, match="not a semantic version"):
        version_draft_create(name="next", actor=maintainer)
    with pytest.raises(PermissionDenied):
        version_draft_create(name="2.0.0", actor=author)


def test_an_unknown_split_is_refused_and_changes_nothing(first, maintainer):
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    task = draft.tasks.get(paper__slug="trimmed-infonce")
    with pytest.raises(ValueError, match="unknown split 'secret'"):
        version_task_set(version=draft, task=task, split="secret", actor=maintainer)
    assert draft.memberships.get(task=task).split == VersionTask.Split.PUBLIC


def test_holding_out_a_task_public_in_an_earlier_release_is_warned_of_on_the_curate_page_and_at_publish(
    first, maintainer, author
):
    """A task public in 1.0.0 and held out in 1.1.0 hides nothing (its code and prompts are already out): the
    maintainer is told which task and in which release it was public, may still publish, and the changelog keeps it."""
    from django.test import Client
    from django.urls import reverse

    from benchmarks.visibility import changelog_visible

    draft = version_draft_create(name="1.1.0", actor=maintainer)
    held = draft.tasks.order_by("paper__slug").first()
    client = Client()
    client.force_login(maintainer)
    curate = reverse("version-curate", args=[draft.name])
    assert "Held out but public before" not in client.get(curate).content.decode()  # nothing held out yet
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    page = client.get(curate).content.decode()
    assert "Held out but public before" in page and f"{held.paper.slug} (public in 1.0.0)" in page
    response = client.post(reverse("version-publish", args=[draft.name]), {"confirm": "yes"}, follow=True)
    assert f"Warning: {held.paper.slug} is held out but was public in 1.0.0." in response.content.decode()
    published = BenchmarkVersion.objects.get(name="1.1.0")
    assert published.status == BenchmarkVersion.Status.PUBLISHED
    assert published.changelog["held_out_once_public"] == [{"paper": held.paper.slug, "public_in": "1.0.0"}]
    # Only maintainers read it: to others it would name the held-out paper.
    assert "held_out_once_public" not in changelog_visible(version=published, user=author)
