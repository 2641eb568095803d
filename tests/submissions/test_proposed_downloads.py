"""The proposed tests' downloads on the author's page (walk 4, item 1): the replay of the tests' calls and the replay of
the example script's calls are told apart by their labels, their zips' names and their test files' names (so both
unpack in one folder, neither overwriting the other); one is offered when both recorded the same calls, and where the
proposed tests are the package's own tests, only those, under the name the package gives them."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.services.blobs import blob_store
from submissions import services
from submissions.models import Revision
from submissions.proposed import EXAMPLE_TEST_FILE, TEST_FILE, TESTS_PROPOSED_FROM, proposed_tests_files
from tests.conftest import page_text

pytestmark = pytest.mark.django_db

KEY = "optimizer.py:DampNest.step"


def recorded(calls: list[float], **extra) -> dict:
    """A recording of DampNest.step's calls (its stored inputs and outputs stand for what a run recorded)."""
    inputs = blob_store(content=json.dumps([f"in {c}" for c in calls]).encode()).sha256
    outputs = blob_store(content=json.dumps([f"out {c}" for c in calls]).encode()).sha256
    target = {"key": KEY, "file": "optimizer.py", "qualname": "DampNest.step", "sealed": True}
    return {
        "targets": {KEY: {**target, "inputs": inputs, "outputs": outputs}},
        "tolerance": {"rtol": 1e-5, "atol": 1e-8},
        **extra,
    }


def validated(draft, author, *, tests: list[float], example: list[float]) -> Revision:
    revision = services.submission_submit(submission=draft, actor=author)  # validation is not run: its recording is set
    recording = {**recorded(tests), "example": recorded(example, script="scripts/example.py")}
    Revision.objects.filter(pk=revision.pk).update(recording=recording)
    return Revision.objects.get(pk=revision.pk)


def downloads(client: Client, pk: int) -> list[str]:
    page = client.get(reverse("submission-detail", args=[pk])).content.decode()
    section = page.split('data-testid="proposed-tests">', 1)[1].split("</div>", 1)[0]
    return [page_text(p) for p in section.split("<p>")[1:]]


def unpacked(client: Client, pk: int, source: str) -> tuple[str, dict[str, bytes]]:
    response = client.get(reverse("proposed-tests", args=[pk]), {"from": source})
    assert response.status_code == 200, response.content[:300]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    return response["Content-Disposition"], {name: archive.read(name) for name in archive.namelist()}


def test_the_two_replays_are_told_apart_and_unpack_side_by_side(client, draft, author):
    validated(draft, author, tests=[1.0, 2.0], example=[3.0])
    client.force_login(author)
    tests_said, example_said = downloads(client, draft.pk)
    assert tests_said.startswith("Download the replay of your tests' calls (dampnest-r1-replay-of-your-tests.zip:")
    assert example_said.startswith(  # one pair of brackets after the label (walk 5: it had two)
        "Download the replay of the calls of your example script scripts/example.py "
        "(dampnest-r1-replay-of-scripts-example.zip:"
    )
    assert "useful beside your tests" in tests_said and "useful where the script reaches inputs" in example_said
    assert f"run python {TEST_FILE}" in tests_said and f"run python {EXAMPLE_TEST_FILE}" in example_said
    assert "install the package's requirements first (what its requirements file lists, e.g. numpy)" in tests_said
    # Under their own heading, before the tried answers (walk 5: they sat under "Tried answers").
    page = client.get(reverse("submission-detail", args=[draft.pk])).content.decode()
    heading, listed = page.index(">Proposed tests</h2>"), page.index('data-testid="proposed-tests"')
    assert heading < listed < page.index(">Tried answers<")

    tests_name, tests_files = unpacked(client, draft.pk, "tests")
    example_name, example_files = unpacked(client, draft.pk, "example")
    assert 'filename="dampnest-r1-replay-of-your-tests.zip"' in tests_name
    assert 'filename="dampnest-r1-replay-of-scripts-example.zip"' in example_name
    shared = set(tests_files) & set(example_files)
    assert shared == {f"rcb_replay/{name}.py" for name in ("__init__", "snapshot", "compare", "attributes")}
    assert all(tests_files[name] == example_files[name] for name in shared)  # the helpers alone, the same bytes
    assert TEST_FILE in tests_files and EXAMPLE_TEST_FILE in example_files


def test_a_maintainer_reviewing_reads_the_authors_tests_not_yours(client, draft, author, maintainer):
    validated(draft, author, tests=[1.0, 2.0], example=[3.0])
    client.force_login(maintainer)
    page = client.get(reverse("review-detail", args=[draft.pk])).content.decode()
    section = page.split('data-testid="proposed-tests">', 1)[1].split("</div>", 1)[0]
    tests_said, example_said = [page_text(p) for p in section.split("<p>")[1:]]
    assert tests_said.startswith("Download the replay of the author's tests' calls (")
    assert example_said.startswith("Download the replay of the calls of the author's example script scripts/example.py")
    assert " your " not in tests_said + example_said  # the zip keeps its name, the words are the reviewer's


def test_one_download_when_the_example_script_made_the_same_calls(client, draft, author):
    validated(draft, author, tests=[1.0, 2.0], example=[1.0, 2.0])
    client.force_login(author)
    [said] = downloads(client, draft.pk)
    assert said.startswith(
        "Download the replay of your tests' calls (your example script scripts/example.py made the same calls)"
    )
    assert client.get(reverse("proposed-tests", args=[draft.pk]), {"from": "example"}).status_code == 404


def test_proposed_tests_that_are_the_packages_tests_are_offered_once_under_the_packages_name(client, draft, author):
    revision = validated(draft, author, tests=[3.0], example=[3.0])
    made = proposed_tests_files(
        recording=revision.recording["example"], paper="dampnest", test_file="paper2code_test.py"
    )
    files = {**revision.files, **{path: blob_store(content=data).sha256 for path, data in made.items()}}
    source = {**revision.source, TESTS_PROPOSED_FROM: "scripts/example.py"}
    Revision.objects.filter(pk=revision.pk).update(files=files, source=source)
    client.force_login(author)
    [said] = downloads(client, draft.pk)
    assert said.startswith(
        "Download the package's tests, proposed from scripts/example.py "
        "(dampnest-r1-paper2code_test-proposed-from-scripts-example.zip:"
    )
    assert "run python paper2code_test.py" in said
    name, unzipped = unpacked(client, draft.pk, "package")
    assert 'filename="dampnest-r1-paper2code_test-proposed-from-scripts-example.zip"' in name
    assert unzipped == made  # what validation made and judges with
    for other in ("tests", "example"):
        assert client.get(reverse("proposed-tests", args=[draft.pk]), {"from": other}).status_code == 404
