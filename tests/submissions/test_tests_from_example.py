"""A package without tests of its own (issue 35): "an author without tests of their own can start from a script that
calls their code". The demo's DampNest with no paper2code_test.py and an example script that calls it (asserting
nothing) is submitted; validation runs the script with the reference, records its calls, and the replay tests
proposed from them become the package's paper2code_test.py (with rcb_replay/ beside it, hidden). Every other check
runs them: the reference passes them, each snippet masked or replaced by a no-op fails them. The report and the review
page say the tests are proposed ones made from the example script, and acceptance keeps them as the task's tests.
A package with neither tests nor an example script is refused with a clear reason, at submit and in papers.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.paper2code import PackageError
from benchmarks.paper2code.pset import read_pset
from benchmarks.selectors import blob_read
from evaluation.taskfiles import task_hidden_files
from submissions import services
from submissions.packages import draft_problems, pset_archive_package
from submissions.tasks import revision_validate
from tests.conftest import page_text

pytestmark = pytest.mark.django_db
MUON = Path(__file__).parents[1] / "evaluation" / "packages" / "muon"
# An example script that reaches every snippet: gradients that flip sign (so the damping ratio passes rho_max and is
# clipped) and a small trust radius (so the update is rescaled). A script that reaches less leaves the snippets it
# never reaches uncovered, and validation says so ("the tests still pass with ... masked").
EXAMPLE = b"""import numpy as np

import optimizer

theta = np.linspace(-1.0, 1.0, 6)
opt = optimizer.DampNest(lr=0.05, weight_decay=0.05, rho_max=0.5, tau=0.05)
for step in range(6):
    theta = opt.step(theta, (-1.0) ** step * (2.0 * theta + 0.5))
print(theta)
"""


@pytest.fixture(scope="session")
def sandbox_cache(sandbox_cache_shared):
    """The Muon package's torch environment, built once for the run whichever parallel workers run this module and
    test_muon_package.py (tests/conftest.py: sandbox_cache_shared)."""
    return sandbox_cache_shared


def without_tests(draft, author, **metadata):
    files = {path: digest for path, digest in draft.draft["files"].items() if path != "paper2code_test.py"}
    files.update(services.draft_files_store({"example.py": EXAMPLE}))
    services.draft_update(
        submission=draft,
        actor=author,
        values={"files": files, "metadata": {**draft.draft["metadata"], **metadata}},
    )
    draft.refresh_from_db()
    return draft


def test_a_package_with_neither_tests_nor_an_example_script_is_refused_with_the_reason(draft, author):
    without_tests(draft, author)
    problems = draft_problems(draft.draft)
    assert any(
        "missing test entry point paper2code_test.py: write your tests there, or name an example script" in p
        for p in problems
    ), problems
    with pytest.raises(services.TransitionError, match="or name an example script"):
        services.submission_submit(submission=draft, actor=author)


def test_papers_yaml_takes_a_package_without_tests_only_where_validation_proposes_them(tmp_path):
    root = tmp_path / "set"
    shutil.copytree(MUON, root)
    (root / "muon" / "paper2code_test.py").unlink()
    # A submission's archive: the example script stands in for the tests (validation proposes them).
    files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    package = pset_archive_package(files)
    assert package is not None and "paper2code_test.py" not in package.files
    # A release's import (and validate_pset) needs the tests themselves: only validation on the site makes them.
    with pytest.raises(PackageError, match="become a package's tests only when it is submitted and validated"):
        read_pset(root)
    (root / "papers.yaml").write_text((root / "papers.yaml").read_text().replace("example_script: example.py", ""))
    with pytest.raises(PackageError, match="write your tests there, or name an example script"):
        read_pset(root, tests_proposed=True)


def test_the_tests_proposed_from_the_example_script_become_the_packages_tests(
    draft, author, maintainer, sandbox, client
):
    without_tests(draft, author, example_script="example.py")
    assert draft_problems(draft.draft) == []
    revision = services.submission_submit(submission=draft, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    revision.refresh_from_db()
    report = revision.report
    report.refresh_from_db()
    rows = {c.key: c for c in report.checks.all()}
    assert report.status == "passed", {k: (c.status, c.detail[:300]) for k, c in rows.items() if c.status != "passed"}
    # The report: the example script ran first and its proposed tests are the package's, said so.
    keys = [c.key for c in report.checks.order_by("position")]
    assert keys.index("example") < keys.index("reference")
    example = rows["example"]
    assert "No tests of its own" in example.label
    assert "the tests proposed from your example script are the package's tests" in example.detail
    assert "proposed tests, not yours" in example.detail
    assert "proposed tests" in rows["reference"].label
    # Every other check ran them: masking any snippet fails them.
    assert all(c.status == "passed" for k, c in rows.items() if k.startswith(("masked:", "noop:", "judged:")))
    # The revision holds them now: the test entry point and the recorded calls beside it.
    test_source = blob_read(sha256=revision.files["paper2code_test.py"]).decode()
    assert "while the example script example.py ran" in test_source and "TOLERANCES = {" in test_source
    assert any(path.startswith("rcb_replay/outputs/") for path in revision.files)
    assert revision.source["tests_proposed_from"] == "example.py"  # with where its code came from

    # The author's page and the review page say the tests are proposed ones.
    client.force_login(author)
    page = page_text(client.get(reverse("submission-detail", args=[draft.pk])).content.decode())
    assert "The package's tests are proposed ones" in page and "example script example.py" in page
    reviewer = Client()
    reviewer.force_login(maintainer)
    review = reviewer.get(reverse("review-detail", args=[draft.pk])).content.decode()
    assert 'data-testid="tests-proposed"' in review
    assert "its tests are proposed ones, made by validation from the example script example.py" in page_text(review)

    # Accepted, the task runs them, and their recorded calls are hidden from answers as its tests are.
    task = services.submission_accept(submission=draft, actor=maintainer, reason="tests proposed, read and kept")
    assert task.files["paper2code_test.py"] == revision.files["paper2code_test.py"]
    hidden = task_hidden_files(task)
    assert "paper2code_test.py" in hidden
    assert {p for p in task.files if p.startswith(("rcb_replay/inputs/", "rcb_replay/outputs/"))} <= hidden
