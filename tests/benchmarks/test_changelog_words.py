"""A release's changelog speaks words ("moved to held out", "time limit: 60 s → 120 s"), not stored values."""

from __future__ import annotations

import pytest
from django.test import Client

from benchmarks.models import VersionTask
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from benchmarks.templatetags.changelog import change_words, setting_words
from tests.conftest import DEMO_PSET, page_text

pytestmark = pytest.mark.django_db


def test_changes_in_words():
    moved = {
        "paper": "p",
        "from_revision": 1,
        "to_revision": 1,
        "snippets_before": 3,
        "snippets_after": 3,
        "from_split": "public",
        "split": "held_out",
    }
    assert change_words(moved) == "moved to held out"
    assert change_words({**moved, "to_revision": 2, "snippets_after": 4, "split": "public"}) == (
        "new revision (r1 → r2); 4 snippets instead of 3"
    )
    assert change_words({**moved, "split": "public"}) == "snippets retired, restored or edited"
    assert setting_words({"setting": "time_limit_seconds", "from": 60, "to": 120}) == "time limit: 60 s → 120 s"
    assert setting_words({"setting": "memory_mb", "from": None, "to": 2048}) == (
        "memory limit: this site's default → 2048 MB"
    )


def test_a_paper_moved_to_held_out_reads_so_on_the_release_page(media_root, maintainer):
    first = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    draft = version_draft_create(name="1.1.0")
    version_task_set(version=draft, task=first.tasks.get(paper__slug="dampnest"), split=VersionTask.Split.HELD_OUT)
    release = version_publish(version=draft)
    assert release.changelog["changed"][0]["from_split"] == "public"
    client = Client()
    client.force_login(maintainer)
    text = " ".join(page_text(client.get(f"/versions/{release.name}/").content.decode()).split())
    assert "changed dampnest: moved to held out" in text and "held_out)" not in text
    public = " ".join(page_text(Client().get(f"/versions/{release.name}/").content.decode()).split())
    assert "dampnest" not in public and "1 change to held-out papers" in public


def test_a_new_revision_names_its_files_changed_added_and_removed(media_root, tmp_path):
    import shutil
    from pathlib import Path

    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    changed = Path(shutil.copytree(DEMO_PSET, tmp_path / "pset", ignore=shutil.ignore_patterns("__pycache__")))
    code = changed / "dampnest" / "optimizer.py"
    code.write_text(code.read_text() + "\n")
    (changed / "dampnest" / "NOTES.md").write_text("notes\n")
    draft = version_draft_create(name="1.1.0")
    version_task_set(version=draft, task=pset_import(root=changed, version_name="staging").tasks_created[0])
    release = version_publish(version=draft)
    change = release.changelog["changed"][0]
    assert (change["files_changed"], change["files_added"], change["files_removed"]) == (
        ["optimizer.py"],
        ["NOTES.md"],
        [],
    )
    text = " ".join(page_text(Client().get(f"/versions/{release.name}/").content.decode()).split())
    assert "changed dampnest: new revision (r1 → r2): changed optimizer.py, added NOTES.md" in text


def test_file_names_in_words_and_old_changelogs_without_them():
    change = {
        "paper": "p",
        "from_revision": 1,
        "to_revision": 2,
        "snippets_before": 3,
        "snippets_after": 3,
        "files_changed": [f"f{i}.py" for i in range(7)],
        "files_added": [],
        "files_removed": ["old.py"],
    }
    assert change_words(change) == (
        "new revision (r1 → r2): changed f0.py, f1.py, f2.py, f3.py, f4.py and 2 more, removed old.py"
    )
    frozen_before = {k: v for k, v in change.items() if not k.startswith("files_")}
    assert change_words(frozen_before) == "new revision (r1 → r2)"


def test_a_changed_venue_is_named_with_its_old_and_new_value_on_every_surface(media_root, tmp_path):
    """A revision that only changes papers.yaml (venue DEMO2025 -> ICLR2026) says so on the release page, the home
    page and the API, and names no file it did not change."""
    import shutil
    from pathlib import Path

    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    changed = Path(shutil.copytree(DEMO_PSET, tmp_path / "pset", ignore=shutil.ignore_patterns("__pycache__")))
    papers = changed / "papers.yaml"
    papers.write_text(papers.read_text().replace("venue: DEMO2025", "venue: ICLR2026", 1))
    draft = version_draft_create(name="1.1.0")
    version_task_set(version=draft, task=pset_import(root=changed, version_name="staging").tasks_created[0])
    release = version_publish(version=draft)

    change = release.changelog["changed"][0]
    assert change["metadata_changed"] == [{"field": "venue", "from": "DEMO2025", "to": "ICLR2026"}]
    assert (change["files_changed"], change["files_added"], change["files_removed"]) == ([], [], [])
    words = "changed dampnest: new revision (r1 → r2); papers.yaml venue: DEMO2025 → ICLR2026"
    for address in (f"/versions/{release.name}/", "/"):
        assert words in " ".join(page_text(Client().get(address).content.decode()).split()), address
    api = Client().get("/api/v1/releases/").json()
    listed = api["results"] if isinstance(api, dict) else api
    shown = next(r for r in listed if r["name"] == release.name)["changelog"]["changed"][0]
    assert shown["metadata_changed"] == change["metadata_changed"]
