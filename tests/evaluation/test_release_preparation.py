"""A release's import has the workers make its tasks' test manifests and recordings (evaluation/preparation.py), so
its first run does not; the release page says how far they got and, to maintainers, which failed and why."""

from __future__ import annotations

import shutil

import pytest
from django.urls import reverse

from benchmarks.models import Task
from benchmarks.services.psets import pset_import
from evaluation.models import TaskPreparation
from evaluation.preparation import release_prepare
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db

BROKEN = """

class TestBrokenOnPurpose(unittest.TestCase):
    def test_the_reference_fails(self):
        raise AssertionError("broken on purpose by the test")
"""


def test_an_import_prepares_its_tasks_and_the_page_says_which_failed_and_why(
    settings,
    media_root,
    sandbox,
    celery_inline,
    django_capture_on_commit_callbacks,
    tmp_path,
    client,
    maintainer,
):
    settings.RELEASE_PREPARE = True
    root = tmp_path / "pset"
    shutil.copytree(DEMO_PSET, root)
    test = root / "trimmed-infonce" / "paper2code_test.py"
    head, main = test.read_text().split('\nif __name__ == "__main__":')
    test.write_text(f'{head}{BROKEN}\nif __name__ == "__main__":{main}')

    with django_capture_on_commit_callbacks(execute=True):
        version = pset_import(root=root, version_name="1.0.0", publish=True).version

    tasks = {t.paper.slug: t for t in Task.objects.filter(versions=version).select_related("paper", "preparation")}
    good = [tasks["dampnest"], tasks["topk-attention-pool"]]
    broken = tasks["trimmed-infonce"]
    for task in good:
        assert task.test_manifest is not None and task.test_manifest["tests"], task.paper.slug
        assert task.recording is not None and task.recording["snippets"], task.paper.slug
        assert (task.preparation.status, task.preparation.backend) == (TaskPreparation.Status.PREPARED, "bwrap")
    assert (broken.test_manifest, broken.recording) == (None, None)
    assert broken.preparation.status == TaskPreparation.Status.FAILED
    assert broken.preparation.detail.startswith("its reference does not pass its own tests")
    assert "TestBrokenOnPurpose.test_the_reference_fails failed" in broken.preparation.detail

    page = client.get(reverse("version-detail", args=[version.name])).content.decode()
    assert "2 of 3 tasks prepared, 1 failed." in page
    assert "TestBrokenOnPurpose" not in page  # what a reference's tests do is for maintainers
    client.force_login(maintainer)
    page = client.get(reverse("version-detail", args=[version.name])).content.decode()
    assert "trimmed-infonce" in page and "TestBrokenOnPurpose.test_the_reference_fails failed" in page

    # The same content in another release: the prepared tasks are its too; only the failed one is tried again.
    with django_capture_on_commit_callbacks(execute=False):
        again = pset_import(root=root, version_name="1.0.1", prepare=False).version
    assert release_prepare(version=again) == 1
    assert TaskPreparation.objects.get(task=broken).status == TaskPreparation.Status.FAILED


def test_an_import_queues_nothing_when_preparation_is_off(
    settings, media_root, django_capture_on_commit_callbacks, client
):
    settings.RELEASE_PREPARE = False  # the test suite's own setting (tests/conftest.py), said here
    with django_capture_on_commit_callbacks(execute=True):
        version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    assert not TaskPreparation.objects.exists()
    assert 'id="preparation"' not in client.get(reverse("version-detail", args=[version.name])).content.decode()

    settings.RELEASE_PREPARE = True
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        pset_import(root=DEMO_PSET, version_name="1.0.1", prepare=False)
    assert callbacks == []  # the argument alone skips it (a script importing many releases)
