"""What a failed test said, beside its name in a list of tests (evaluation.outcomes.failure_said): the exception's
own lines from the traceback tail the harness keeps, as a unittest sub-test's failure leaves them."""

from __future__ import annotations

import io
import unittest

from evaluation.outcomes import failure_said


def test_the_assertion_of_a_failed_sub_test_is_said_and_a_detail_without_a_traceback_says_nothing():
    class Replay(unittest.TestCase):  # defined here, so that pytest does not collect it as a test of its own
        def test_recorded_calls(self):
            for call in (1, 2):
                with self.subTest(call=call):
                    if call == 2:
                        self.fail(
                            "DampNest.step, recorded call 2, at args[1]['v']: 6 of 6 values differ: 0.25 where ..."
                        )

    result = unittest.TextTestRunner(stream=io.StringIO()).run(unittest.TestSuite([Replay("test_recorded_calls")]))
    [(_, traceback)] = result.failures
    assert failure_said(traceback) == (
        "AssertionError: DampNest.step, recorded call 2, at args[1]['v']: 6 of 6 values differ: 0.25 where ..."
    )
    assert failure_said("skipped: no GPU") == "" and failure_said("") == ""
    assert failure_said(traceback, limit=20).endswith("…") and len(failure_said(traceback, limit=20)) == 20
