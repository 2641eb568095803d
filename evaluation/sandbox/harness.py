"""The harness that runs a task's test entry point inside every sandbox and proves the test ran to its end.

A completion can end the process early with exit status 0 (os._exit, sys.exit on import, killing the parent);
the pass rule alone would then see a clean run. The harness reads a one-time nonce from a file it deletes
before the test starts, runs the test, and prints the nonce with the real exit status as its last line. A run
without that line did not finish; a SystemExit raised outside the entry point and unittest's runner is early.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

NONCE_FILE = ".rcb-nonce"
HARNESS_FILE = ".rcb-harness.py"

HARNESS_SOURCE = r'''
import os, runpy, sys, traceback
nonce = open(".rcb-nonce").read().strip()
os.remove(".rcb-nonce")
os.remove(".rcb-harness.py")
entry = sys.argv[1]
sys.argv = [entry]
sys.path.insert(0, os.getcwd())
status, code = "completed", 0
try:
    runpy.run_path(entry, run_name="__main__")
except SystemExit as exc:
    tb, origin = exc.__traceback__, None
    while tb is not None:
        origin, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    normal = origin is None or os.path.basename(origin) == os.path.basename(entry) or origin.endswith(
        os.path.join("unittest", "main.py"))
    if not normal:
        status = "early-exit"
        print(f"Early exit: SystemExit({exc.code!r}) raised in {origin}, before the test finished", file=sys.stderr)
    code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if not isinstance(exc.code, (int, type(None))):
        print(exc.code, file=sys.stderr)
except BaseException:
    traceback.print_exc()
    code = 1
sys.stdout.flush()
sys.stderr.flush()
os.write(1, f"\n{nonce} {status} {code}\n".encode())
os._exit(code if status == "completed" else 1)
'''


@dataclass(frozen=True)
class HarnessVerdict:
    """Whether the test reached its end, and the output with the harness line removed."""

    completed: bool
    stdout: str
    reason: str


def nonce_new() -> str:
    return "rcb-done-" + secrets.token_hex(16)


def harness_files(nonce: str) -> dict[str, bytes]:
    return {NONCE_FILE: nonce.encode(), HARNESS_FILE: HARNESS_SOURCE.encode()}


def harness_command(python: str, entry_point: str) -> list[str]:
    return [python, "-B", HARNESS_FILE, entry_point]


def harness_verdict(stdout: str, nonce: str) -> HarnessVerdict:
    """Find the harness's own last line; anything else means the test did not run to its end."""
    match = None
    for match in re.finditer(rf"\n{re.escape(nonce)} (\S+) (-?\d+)\n?", stdout):
        pass
    if match is None:
        return HarnessVerdict(False, stdout, "the test did not run to its end (the process exited or was killed early)")
    cleaned = stdout[: match.start()] + stdout[match.end():]
    if match.group(1) != "completed":
        return HarnessVerdict(False, cleaned, "the code exited before the test finished")
    return HarnessVerdict(True, cleaned, "")
