"""Set validation at the speed of the set (issue 36 item 3): the masked and no-op runs stop at the first failing
test, and what validation reports of real packages is what full runs of the same variants say, check by check; the
papers go to the workers longest first."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.paper2code import mask, noop, splice
from benchmarks.paper2code.pset import read_pset
from benchmarks.services.blobs import environment_hash
from evaluation.executor import limits_default, package_test
from submissions.models import SetValidation, SetValidationPaper
from submissions.validation import dispatch_order, variant_checks
from tests.conftest import DEMO_PSET
from tests.submissions.test_validate_pset import legacy_pset

pytestmark = pytest.mark.django_db


def demo_paper(root, paper_id):
    shutil.copytree(DEMO_PSET / paper_id, root / paper_id)
    entries = (DEMO_PSET / "papers.yaml").read_text().split("\n- id: ")
    (root / "papers.yaml").write_text("- id: " + next(e for e in entries if e.startswith(paper_id)))


def package_run(package, requirements: str):
    """Run the package's tests on `files` in the sandbox, as validation does."""

    def test(files, limits=None, guard=None):
        return package_test(
            files=files,
            test_entry_point="paper2code_test.py",
            environment_hash=environment_hash(requirements),
            requirements=requirements,
            limits=limits,
            guard=guard,
        )

    return test


def full_run_checks(package, requirements: str, settings) -> dict[str, tuple[str, str]]:
    """Each snippet's masked and no-op check as validation made them before: every test run to its end."""
    limits = limits_default()
    limits = type(limits)(**{**limits.__dict__, "wall_seconds": settings.SUBMISSION_TEST_SECONDS})
    test = package_run(package, requirements)
    checks = {}
    for path, parsed in package.annotated.items():
        for s in parsed.snippets:
            for kind, text in (("masked", mask(parsed, s)), ("noop", splice(parsed, s, noop(s)))):
                run = test({**package.files, path: text.encode("utf-8")}, limits)
                passed = run.verdict.status == "passed"
                checks[f"{kind}:{path}:{s.index}"] = (
                    SetValidation.Status.FAILED if passed else SetValidation.Status.PASSED,
                    run.verdict.category,
                )
    return checks


@pytest.mark.parametrize("paper", ["trimmed-infonce", "legacy-sum"])
def test_variant_checks_report_what_full_runs_say(paper, tmp_path, sandbox, media_root, settings):  # noqa: F811
    """trimmed-infonce: six tests of the demo set, sub-tests over seeds, every snippet covered (each variant's run
    stops at its first failure); legacy-sum: a snippet its tests never reach (its variants pass every test, which
    runs them all, and fail the check)."""
    root = tmp_path / "pset"
    if paper == "legacy-sum":
        requirements = legacy_pset(root).read_text()
        (package,) = read_pset(root, shared_environment=True)
    else:
        demo_paper(root, paper)
        (package,) = read_pset(root)
        requirements = package.requirements
    checks = {
        c.key: (c.status, c.detail)
        for c in variant_checks(
            files=dict(package.files), annotated=dict(package.annotated), test=package_run(package, requirements)
        )
    }
    full = full_run_checks(package, requirements, settings)
    assert checks.keys() == full.keys() and len(full) == 2 * sum(len(f.snippets) for f in package.annotated.values())
    for key, (status, category) in full.items():
        assert checks[key][0] == status, key
        if status == SetValidation.Status.PASSED:
            assert checks[key][1] == f"failed as it should ({category})", key
        else:
            assert "they do not cover this snippet" in checks[key][1], key
    if paper == "legacy-sum":
        assert sorted(k for k, (status, _) in checks.items() if status == SetValidation.Status.FAILED) == [
            "masked:calc.py:0",
            "noop:calc.py:0",
        ]


def test_papers_with_the_most_snippets_are_dispatched_first():
    validation = SetValidation.objects.create(source="a set")
    counts = {"short": 2, "long": 11, "middle": 5, "also-middle": 5}
    papers = {
        name: SetValidationPaper.objects.create(
            validation=validation,
            position=position,
            paper=name,
            snippets=[{"file": "m.py", "index": i, "name": f"s{i}"} for i in range(count)],
            files={},
        )
        for position, (name, count) in enumerate(counts.items())
    }
    order = {paper.pk: name for name, paper in papers.items()}
    assert [order[pk] for pk in dispatch_order(validation=validation)] == ["long", "middle", "also-middle", "short"]
