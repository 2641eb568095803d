"""Whole-set validation on real Celery workers in bwrap: `validate_pset --workers` and a draft version's page give
the same per-paper, per-snippet results as the inline command; only maintainers start it, one at a time per
version, and the set's untrusted tests run only in the sandbox."""

from __future__ import annotations

import io
import json
import textwrap
import time

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from submissions import validation
from submissions.models import SetValidation
from tests.submissions.test_validate_pset import legacy_pset

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
EXPECTED = {
    "papers": {
        "legacy-sum": {
            "reference_passed": True,
            "warnings": [],
            "snippets": {
                "print the values when debugging": {"masked_fails": False, "noop_fails": False},
                "add the values": {"masked_fails": True, "noop_fails": True},
            },
        }
    }
}


def _draft(tmp_path, name: str = "0.9.0") -> BenchmarkVersion:
    environment = legacy_pset(tmp_path / "pset")
    return pset_import(root=tmp_path / "pset", version_name=name, environment=environment.read_text()).version


def _without_reference(report: dict) -> dict:
    """The report, less the reference's repeated runs (their durations vary), which it checks."""
    reference = report["papers"]["legacy-sum"].pop("reference")
    assert reference["runs"] == reference["passed"] == 2 and reference["flaky"] is False, reference
    return report


def _wait_finished(run: SetValidation, seconds: float = 240) -> SetValidation:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if not run.is_active:
            return run
        time.sleep(0.5)
    raise AssertionError(f"validation {run.pk} still {run.status} after {seconds} s")


def test_validate_pset_on_the_workers_gives_the_inline_results(tmp_path, celery_worker_factory, sandbox_cache):
    environment = legacy_pset(tmp_path / "pset")
    worker = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SUBMISSION_REFERENCE_RUNS="2")
    out, err = io.StringIO(), io.StringIO()
    from django.core.management import CommandError

    with pytest.raises(CommandError, match=r"2 problem\(s\) in 1 of 1 paper\(s\)"):
        call_command(
            "validate_pset",
            str(tmp_path / "pset"),
            environment=str(environment),
            workers=True,
            timeout=240,
            json_out=str(tmp_path / "report.json"),
            stdout=out,
            stderr=err,
        )
    assert _without_reference(json.loads((tmp_path / "report.json").read_text())) == EXPECTED, worker.output()[-3000:]
    assert "legacy-sum: reference passed, 1/2 snippets covered" in out.getvalue()
    assert '"print the values when debugging" (calc.py) masked: the tests still pass' in out.getvalue()
    assert (
        "10/10" in err.getvalue()
    )  # the progress bar reached every check (each snippet: sealed, judged, masked, no-op)
    paper = SetValidation.objects.get().papers.get()
    assert paper.sandbox_backend == "bwrap" and "set_paper_validate" in worker.output()
    # A set validation judges each reference once (SET_VALIDATION_JUDGED_RUNS), a submission's twice.
    judged = [c for c in paper.checks if c["key"].startswith("judged:")]
    assert len(judged) == 2 and all(len(c["result"]["runs"]) == 1 for c in judged), judged


def test_a_draft_version_is_validated_from_its_page_by_the_workers(
    tmp_path, client, maintainer, celery_worker_factory, sandbox_cache
):
    version = _draft(tmp_path)
    celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SUBMISSION_REFERENCE_RUNS="2")
    client.force_login(maintainer)
    page = client.get(reverse("version-detail", args=[version.name])).content.decode()
    assert "Validate every paper" in page and 'id="set-validation"' in page
    response = client.post(reverse("version-validate", args=[version.name]), follow=True)
    assert "Validating 1 paper(s) of 0.9.0 on the workers." in response.content.decode()
    run = _wait_finished(SetValidation.objects.get(version=version))
    assert run.status == "failed" and run.started_by == maintainer
    # Its reference passed: the validation recorded the test manifest and the recording of the version's task, so
    # its first run makes neither.
    task = version.tasks.get()
    manifest = task.test_manifest
    assert manifest["runner"] == "unittest" and set(manifest["tests"].values()) == {"passed"}, manifest
    assert task.recording is not None and len(task.recording["snippets"]) == 2, task.recording
    partial = client.get(reverse("version-validation", args=[version.name])).content.decode()
    assert "hx-trigger" not in partial  # finished: the page stops polling
    # requirements, reference, and per snippet sealed, judged, masked, no-op and its mutants (a page runs them).
    assert "12 of 12 checks done (100%)" in partial and "1/2" in partial
    assert "<code>print the values when debugging</code>" in partial  # named as not covered
    assert "the tests still pass, they do not cover this snippet" in partial
    assert "0 of 4 wrong bodies caught" in partial and "9 of 9 wrong bodies caught" in partial
    assert "-&gt;  print(shown)</code>" in partial  # a surviving mutant, so the author knows what to test
    assert "mutation score 0% of &quot;print the values when debugging&quot; is below the minimum 60%" in partial
    assert "Validate every paper" in partial  # and may be run again
    from submissions.selectors import set_validation_json, set_validation_summaries

    report = _without_reference(set_validation_json(summaries=set_validation_summaries(validation=run)))
    paper = report["papers"]["legacy-sum"]
    mutation = {name: snippet.pop("mutation") for name, snippet in paper["snippets"].items()}
    warnings = paper.pop("warnings")
    assert len(warnings) == 1 and "is below the minimum 60%" in warnings[0], warnings
    assert report == {
        "papers": {"legacy-sum": {k: v for k, v in EXPECTED["papers"]["legacy-sum"].items() if k != "warnings"}}
    }
    assert mutation["print the values when debugging"]["score"] == 0.0
    assert mutation["print the values when debugging"]["survived"] == 4
    assert mutation["add the values"] == {
        "generated": 9,
        "killed": 9,
        "survived": 0,
        "score": 1.0,
        "survivors": [],
        "timeouts": [],
        "equivalent": 0,
        "equivalents": [],
        "killed_by": {"replay": 9, "tests": 0},  # each returns another sum on a recorded call: no test ran
    }


def test_only_maintainers_start_or_see_it(tmp_path, client, author, maintainer, media_root):
    version = _draft(tmp_path)
    start, show = reverse("version-validate", args=[version.name]), reverse("version-validation", args=[version.name])
    anonymous = client.post(start)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    client.force_login(author)
    assert client.post(start).status_code in (403, 404)
    assert client.get(show).status_code in (403, 404)
    assert "Validate every paper" not in client.get(reverse("home")).content.decode()
    assert not SetValidation.objects.exists()
    with pytest.raises(Exception, match="only maintainers"):
        validation.version_validation_start(version=version, actor=author)
    assert not SetValidation.objects.exists()


def test_one_validation_at_a_time_per_version_and_only_on_drafts(tmp_path, client, maintainer, admin, media_root):
    version = _draft(tmp_path)
    client.force_login(maintainer)
    start = reverse("version-validate", args=[version.name])
    assert client.post(start).status_code == 302  # no worker here: it stays queued
    refused = client.post(start, follow=True).content.decode()
    assert f"a validation of {version.name} is already running" in refused
    with pytest.raises(ValueError, match="already running"):
        validation.version_validation_start(version=version, actor=admin)
    assert SetValidation.objects.filter(version=version).count() == 1
    queued = client.get(reverse("version-validation", args=[version.name])).content.decode()
    assert 'hx-trigger="every 2s"' in queued and "Validate every paper" not in queued
    # The database holds the rule too, whatever path writes the row.
    with pytest.raises(IntegrityError), transaction.atomic():
        SetValidation.objects.create(version=version, source="a second one")
    version_publish(version=version, actor=maintainer)
    SetValidation.objects.update(status="passed")
    with pytest.raises(ValueError, match="only drafts"):
        validation.version_validation_start(version=version, actor=maintainer)


HOSTILE_TEST = """\
import pathlib
import unittest

from calc import total

CANARY = pathlib.Path({canary!r})


class TotalTest(unittest.TestCase):
    def test_total(self):
        try:  # an untrusted test reaching for the worker's host
            CANARY.parent.mkdir(parents=True, exist_ok=True)
            CANARY.write_text("the test ran on the host")
        except OSError:
            pass
        self.assertEqual(total([1, 2, 3]), 6)


if __name__ == "__main__":
    unittest.main()
"""


def test_the_sets_untrusted_tests_run_only_in_the_sandbox(
    tmp_path, client, maintainer, celery_worker_factory, sandbox_cache
):
    canary = tmp_path / "host" / "canary.txt"
    legacy_pset(tmp_path / "pset")
    (tmp_path / "pset" / "legacy-sum" / "paper2code_test.py").write_text(HOSTILE_TEST.format(canary=str(canary)))
    version = pset_import(
        root=tmp_path / "pset", version_name="0.9.1", environment=textwrap.dedent("# standard library only\n")
    ).version
    client.force_login(maintainer)
    client.post(reverse("version-validate", args=[version.name]))
    assert not canary.exists()  # the page only queues the work
    celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SUBMISSION_REFERENCE_RUNS="2")
    run = _wait_finished(SetValidation.objects.get(version=version))
    paper = run.papers.get()
    assert any(c["key"] == "reference" and c["status"] == "passed" for c in paper.checks), paper.checks
    assert not canary.exists() and not canary.parent.exists()
    assert paper.sandbox_backend == "bwrap"
