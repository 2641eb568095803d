"""import_pset: the demo set imports; import is atomic, idempotent, revision-aware and frozen-version-safe."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import BenchmarkVersion, Blob, Paper, Snippet, Task
from benchmarks.paper2code import PackageError
from benchmarks.selectors import blob_read
from benchmarks.services.psets import pset_import
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db


@pytest.fixture
def pset(tmp_path: Path) -> Path:
    """A writable copy of the demo problem set."""
    return Path(shutil.copytree(DEMO_PSET, tmp_path / "pset"))


def test_demo_imports_every_paper_snippet_and_file():
    result = pset_import(root=DEMO_PSET, version_name="v1")

    assert Paper.objects.count() == 3
    assert {t.paper.slug for t in result.tasks_created} == {"dampnest", "topk-attention-pool", "trimmed-infonce"}
    assert result.version.tasks.count() == 3
    for task in Task.objects.all():
        assert task.snippets.count() >= 6
        assert task.snippets.filter(depth__gt=0).exists(), "demo snippets are nested"
        for path, digest in task.files.items():
            assert blob_read(sha256=digest) == (DEMO_PSET / task.paper.slug / path).read_bytes()
    pooling = Task.objects.get(paper__slug="topk-attention-pool")
    assert pooling.annotated_paths == ["src/pooling.py"] and pooling.context_paths == ["src/utils.py"]
    assert pooling.paper_path == "paper2code_paper.tex"


def test_snippet_rows_keep_the_tree_and_reference_code():
    pset_import(root=DEMO_PSET, version_name="v1")
    for snippet in Snippet.objects.filter(parent__isnull=False):
        assert snippet.depth == snippet.parent.depth + 1
        assert snippet.parent.start_line < snippet.start_line < snippet.end_line < snippet.parent.end_line
        assert snippet.reference_code in snippet.parent.reference_code


def test_same_content_twice_creates_nothing(capsys):
    call_command("import_pset", str(DEMO_PSET), version="v1")
    counts = (Task.objects.count(), Snippet.objects.count(), Blob.objects.count(), Paper.objects.count())
    out = StringIO()
    call_command("import_pset", str(DEMO_PSET), version="v1", stdout=out)
    assert (Task.objects.count(), Snippet.objects.count(), Blob.objects.count(), Paper.objects.count()) == counts
    assert "0 new task revision(s), 3 unchanged" in out.getvalue()


def test_changed_content_becomes_a_new_revision_in_the_version(pset: Path):
    first = pset_import(root=pset, version_name="v1")
    old = Task.objects.get(paper__slug="dampnest")
    code = pset / "dampnest" / "optimizer.py"
    code.write_text(code.read_text() + "\n# a trailing comment changes the content\n")

    second = pset_import(root=pset, version_name="v1")

    new = Task.objects.get(paper__slug="dampnest", revision=2)
    assert [t.pk for t in second.tasks_created] == [new.pk]
    assert set(first.version.tasks.all()) == set(Task.objects.exclude(pk=old.pk))
    assert Task.objects.filter(pk=old.pk).exists(), "old revisions stay for runs pinned to them"


def test_one_bad_paper_imports_nothing_and_names_paper_file_and_line(pset: Path):
    code = pset / "trimmed-infonce" / "contrastive.py"
    lines = code.read_text().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if "</paper2code" in line)
    del lines[end]
    code.write_text("".join(lines))

    with pytest.raises(CommandError) as error:
        call_command("import_pset", str(pset), version="v1")

    message = str(error.value)
    assert "nothing imported" in message
    assert "trimmed-infonce" in message and "contrastive.py:" in message
    assert (Paper.objects.count(), Task.objects.count(), BenchmarkVersion.objects.count()) == (0, 0, 0)


def test_published_version_is_frozen(pset: Path):
    pset_import(root=pset, version_name="1.0.0", publish=True)
    paper = pset / "dampnest" / "paper2code_paper.md"
    paper.write_text(paper.read_text() + "\nAn erratum.\n")

    with pytest.raises(PackageError, match="1.0.0 is published and frozen"):
        pset_import(root=pset, version_name="1.0.0")
    assert Task.objects.count() == 3, "the rejected import left nothing behind"


def test_shared_requirements_are_added_to_every_task(tmp_path: Path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("scipy==1.14.1\n")
    call_command("import_pset", str(DEMO_PSET), version="v1", requirements=str(requirements))
    for task in Task.objects.all():
        assert task.requirements.startswith("scipy==1.14.1")
    assert "numpy" in Task.objects.get(paper__slug="dampnest").requirements


def test_missing_requirements_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(CommandError, match="nope.txt: cannot read requirements"):
        call_command("import_pset", str(DEMO_PSET), version="v1", requirements=str(tmp_path / "nope.txt"))


def test_missing_folder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(CommandError, match="papers.yaml"):
        call_command("import_pset", str(tmp_path / "absent"), version="v1")
