"""An outcome's detail, shown on its item's page, says a flag is held for review only where one is: a flag on an
answer whose tests failed awaits none (models.AWAITING_REVIEW), while the page read "flagged for review"."""

from evaluation.models import Outcome
from evaluation.outcomes import Verdict, outcome_flag

FINDING = {"kind": "tampering", "line": 3, "detail": "assigns into numpy.mean", "source": "static"}


def test_a_flag_on_failed_tests_is_not_said_to_await_review():
    failed = Verdict(Outcome.Status.FAILED, Outcome.Category.RUNTIME, "4 tests raised an error")
    flagged = outcome_flag(failed, [FINDING])
    assert flagged.status == Outcome.Status.FLAGGED and flagged.measured == Outcome.Status.FAILED
    assert flagged.detail == "flagged (tampering); the test said: failed (4 tests raised an error)"


def test_a_flag_on_passed_tests_is_said_to_await_review():
    passed = Verdict(Outcome.Status.PASSED, "", "")
    assert outcome_flag(passed, [FINDING]).detail == "flagged for review (tampering); the test said: passed"
