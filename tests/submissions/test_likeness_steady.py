"""The code-likeness figure of "One paper once" stays as it was at submission while a submission validates (walk 4,
item 2): when validation adds the tests it proposed from the example script (a package without tests of its own), the
files it writes (the proposed test file and rcb_replay/ with the platform's helpers) are the platform's, not the
author's, so they count in no likeness: neither on this submission's page nor where it is another's match."""

from __future__ import annotations

import json

import pytest

from benchmarks.services.blobs import blob_store
from submissions import services
from submissions.duplicates import submission_matches
from submissions.models import Revision
from submissions.proposed import TESTS_PROPOSED_FROM, proposed_tests_files
from tests.submissions.conftest import fill_draft
from tests.submissions.test_tests_from_example import without_tests

pytestmark = pytest.mark.django_db

KEY = "optimizer.py:DampNest.step"


def figures(submission) -> list[str]:
    return [match.what for match in submission_matches(submission=submission)]


def proposed_tests_added(revision: Revision) -> None:
    """What validation does for a package without tests (submissions/tasks.py): the proposed files join its files."""
    calls = blob_store(content=json.dumps(["recorded call"]).encode()).sha256
    target = {"key": KEY, "file": "optimizer.py", "qualname": "DampNest.step", "sealed": True}
    recording = {
        "targets": {KEY: {**target, "inputs": calls, "outputs": calls}},
        "tolerance": {"rtol": 1e-5, "atol": 1e-8},
    }
    made = proposed_tests_files(
        recording={**recording, "script": "example.py"}, paper="dampnest", test_file="paper2code_test.py"
    )
    files = {**revision.files, **{path: blob_store(content=data).sha256 for path, data in made.items()}}
    source = {**revision.source, TESTS_PROPOSED_FROM: "example.py"}
    Revision.objects.filter(pk=revision.pk).update(files=files, source=source)


def test_the_likeness_figures_do_not_move_when_validation_adds_the_proposed_tests(author, other_author, media_root):
    # The same paper twice, each without tests of its own and with an example script: validation proposes them.
    first = without_tests(
        fill_draft(services.submission_create(author=author), author), author, example_script="example.py"
    )
    second = fill_draft(services.submission_create(author=other_author), other_author)
    second = without_tests(second, other_author, example_script="example.py")
    services.submission_submit(submission=first, actor=author)
    services.submission_submit(submission=second, actor=other_author)
    before = figures(first), figures(second)
    assert before[0] and before[1], before  # each names the other

    proposed_tests_added(first.latest_revision)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (figures(first), figures(second)) == before
