"""export_pset writes the FORMAT.md layout back; import -> export -> import keeps every content hash."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import BenchmarkVersion, Task
from benchmarks.paper2code.pset import read_pset
from benchmarks.services.psets import pset_import
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


def test_round_trip_keeps_content_hashes_and_bytes(tmp_path: Path):
    pset_import(root=DEMO_PSET, version_name="v1")
    hashes = {t.paper.slug: t.content_hash for t in Task.objects.all()}

    call_command("export_pset", str(tmp_path / "out"), version="v1")
    result = pset_import(root=tmp_path / "out", version_name="v2")

    assert result.tasks_created == []
    assert {t.paper.slug: t.content_hash for t in result.tasks_unchanged} == hashes
    original = {p.id: p.content_hash for p in read_pset(DEMO_PSET)}
    assert {p.id: p.content_hash for p in read_pset(tmp_path / "out")} == original
    for path in (DEMO_PSET / "dampnest").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert (
                tmp_path / "out" / "dampnest" / path.relative_to(DEMO_PSET / "dampnest")
            ).read_bytes() == path.read_bytes()


def test_export_refuses_a_non_empty_folder(tmp_path: Path):
    pset_import(root=DEMO_PSET, version_name="v1")
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="not an empty folder"):
        call_command("export_pset", str(tmp_path), version="v1")
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_export_of_unknown_version_names_it(tmp_path: Path):
    with pytest.raises(CommandError, match="no benchmark version named 'v9'"):
        call_command("export_pset", str(tmp_path / "out"), version="v9")


def test_publish_freezes_a_manifest_with_its_hash():
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    version.refresh_from_db()
    assert version.status == BenchmarkVersion.Status.PUBLISHED and len(version.manifest_hash) == 64
    snippets = sum(len(t["snippets"]) for t in version.manifest["tasks"])
    assert snippets == sum(t.snippets.count() for t in version.tasks.all())
    again = pset_import(root=DEMO_PSET, version_name="1.1.0", publish=True).version
    assert again.manifest_hash != version.manifest_hash, "the manifest names its version"
