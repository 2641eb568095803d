"""A test run passes only with exit status 0, in time, and no failure string in its output (FORMAT.md 7.4)."""

from __future__ import annotations

import pytest

from benchmarks.paper2code.outcome import FAIL_STRINGS, passes


def test_clean_run_passes() -> None:
    assert passes(exit_code=0, stdout="ok\nAll tests passed\n", stderr="", timed_out=False)


@pytest.mark.parametrize(("exit_code", "timed_out"), [(1, False), (None, False), (-9, False), (0, True), (None, True)])
def test_bad_exit_or_timeout_fails(exit_code: int | None, timed_out: bool) -> None:
    assert not passes(exit_code=exit_code, stdout="", stderr="", timed_out=timed_out)


@pytest.mark.parametrize("fail", FAIL_STRINGS)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_fail_string_in_either_stream_fails(fail: str, stream: str) -> None:
    output = {"stdout": "", "stderr": "", stream: f"x {fail} y"}
    assert not passes(exit_code=0, timed_out=False, **output)


def test_fail_strings_are_case_sensitive() -> None:
    assert passes(exit_code=0, stdout="error: none, FAILED 0, traceback off", stderr="exception:", timed_out=False)
