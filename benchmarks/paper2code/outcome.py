"""Decide whether a test run passed (FORMAT.md 7.4)."""

from __future__ import annotations

FAIL_STRINGS = ("Error:", "Exception:", "Traceback", "failed")


def passes(*, exit_code: int | None, stdout: str, stderr: str, timed_out: bool) -> bool:
    """Exit status 0 within the time limit and none of FAIL_STRINGS (case-sensitive) in either stream."""
    if timed_out or exit_code != 0:
        return False
    return not any(s in stdout or s in stderr for s in FAIL_STRINGS)
