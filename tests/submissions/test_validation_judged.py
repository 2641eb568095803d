"""Validation scores the reference as evaluation will (issue 35, item 1): each snippet's reference is spliced in as an
answer and judged twice by evaluation's own step (answer policy, runtime guard, sealed replay); a reference that
would be flagged, or whose verdict changes between the two runs, fails validation with the reason."""

from __future__ import annotations

import pytest

from benchmarks.paper2code import parse
from evaluation.outcomes import Verdict
from submissions import services
from submissions.models import Submission, ValidationReport
from submissions.tasks import revision_validate
from submissions.validation import reference_judgement
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db

CLIP = "        rho = np.minimum(rho, self.rho_max)\n"
CLIP_BY_EVAL = '        rho = np.minimum(rho, eval("self.rho_max"))\n'


def test_a_reference_evaluation_would_flag_fails_validation_naming_the_rule_and_line(draft, author, sandbox):
    files = demo_files()
    source = files["optimizer.py"].decode()
    assert CLIP in source
    files["optimizer.py"] = source.replace(CLIP, CLIP_BY_EVAL).encode()  # the same value, read through eval
    fill_draft(draft, author, files=services.draft_files_store(files))
    revision = services.submission_submit(submission=draft, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    report = ValidationReport.objects.get(pk=revision.report.pk)

    checks = {c.key: c for c in report.checks.all()}
    failed = {key for key, c in checks.items() if c.status != "passed"}
    # Every check validation had before judging passes: the tests, masks, no-ops and sealing all accept this code.
    # Judging fails the snippet and the two snippets holding it, whose references hold the same line.
    holding = {
        f"judged:optimizer.py:{s.index}"
        for s in parse(files["optimizer.py"].decode(), "optimizer.py").snippets
        if "eval(" in s.code
    }
    assert len(holding) == 3 and failed == holding, failed
    judged = checks[next(key for key in failed if "clip" in checks[key].label)]
    line = source.splitlines().index(CLIP.rstrip("\n")) + 1
    assert 'evaluation would not pass the reference of "clip damping ratio at rho_max"' in judged.detail
    assert "run 1: flagged" in judged.detail and "run 2: flagged" in judged.detail
    assert f"line {line}: [dynamic-code, static]" in judged.detail, judged.detail
    assert [run["status"] for run in judged.result["runs"]] == ["flagged", "flagged"]
    assert report.status == "failed"
    assert Submission.objects.get(pk=draft.pk).state == Submission.State.INVALID


def test_a_verdict_that_changes_between_the_two_runs_fails_with_both_runs_named():
    finding = {"kind": "dynamic-code", "rule": "dynamic-code", "line": 7, "detail": "eval", "source": "runtime"}
    passed = Verdict("passed", "passed", "")
    flagged = Verdict("flagged", "passed", "flagged for review (dynamic-code)", findings=(finding,), measured="passed")
    status, detail = reference_judgement("clip", [passed, flagged])
    assert status == "failed"
    assert detail.startswith('evaluation would not pass the reference of "clip": its verdict changed between runs')
    assert "run 1: passed, passed, 0 finding(s); run 2: flagged, passed, 1 finding(s)" in detail
    assert "run 2 findings:\nline 7: [dynamic-code, runtime] eval" in detail

    # Two passes whose failing category differs are a change too, never "passed".
    status, detail = reference_judgement("clip", [Verdict("failed", "wrong", "x"), Verdict("failed", "timeout", "y")])
    assert status == "failed" and "changed between runs" in detail

    status, detail = reference_judgement("clip", [passed, passed])
    assert (status, detail) == ("passed", "judged as an answer 2 times: passed each time, no finding")
