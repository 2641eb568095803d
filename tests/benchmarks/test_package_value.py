"""The task package as one value: every holder of a package (a task, a revision, a set validation paper) stores
the same fields, and `package_store` then `package_load` gives the package back, whichever holds it."""

from __future__ import annotations

import pytest

from benchmarks.models import PACKAGE_FIELDS, package_fields_json
from benchmarks.paper2code.pset import read_pset
from benchmarks.selectors import package_load
from benchmarks.services.task_storage import package_store, task_store
from submissions.models import Revision, SetValidationPaper
from submissions.packages import draft_metadata
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


def test_every_holder_gives_the_package_back(media_root):
    for package in read_pset(DEMO_PSET):
        fields = package_store(package=package)
        assert set(fields) == set(PACKAGE_FIELDS)
        task, _ = task_store(package=package)
        holders = [
            task,
            Revision(**fields, metadata=draft_metadata(package)),
            SetValidationPaper(**fields, paper=package.id),
        ]
        for holder in holders:
            loaded = package_load(holder)
            assert holder.package_fields() == {**fields, "requirements": holder.requirements}
            assert dict(loaded.files) == dict(package.files) and loaded.file_hashes == package.file_hashes
            assert (loaded.paper_path, loaded.annotated_paths, loaded.context_paths) == (
                package.paper_path,
                package.annotated_paths,
                package.context_paths,
            )
            assert loaded.annotated == package.annotated and loaded.test_entry_point == "paper2code_test.py"
            assert loaded.id == package.id
        assert not package.extra  # so a revision, which keeps no extra keys, holds the whole entry too
        assert package_load(task).content_hash == package_load(holders[1]).content_hash == package.content_hash


def test_a_draft_keeps_the_fields_as_json_with_their_defaults():
    assert package_fields_json(
        {"files": {"a.py": "0" * 64}, "paper_path": "paper2code_paper.md", "metadata": {"id": "x"}}
    ) == {
        "files": {"a.py": "0" * 64},
        "paper_path": "paper2code_paper.md",
        "annotated_paths": [],
        "context_paths": [],
        "requirements": "",
    }
