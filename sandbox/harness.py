"""The harness that runs a task's test entry point in every sandbox, proves the test ran to its end, and audits the
answer.

Threat model. The answer is spliced into a file the test imports, so it runs in the test's own process with the
same rights as any code there: it can read that process's memory (frames, the garbage collector, ctypes,
/proc/self/mem), replace functions, write to any file descriptor and end the process. No proof made inside that
process is unforgeable, so the harness splits the run in two and makes cheating leave evidence:

- The supervisor (programs/supervisor.py, started by the sandbox) reads a one-time nonce from a file it deletes,
  makes itself non-dumpable (so no other process of the same user can read its memory or /proc files) and starts the
  test in a fresh interpreter. Under the fork server (RCB_WARM, a warm start that has the environment's modules
  imported) it forks the test process first, before it reads the nonce, and that process runs CHILD in place of an
  exec once the supervisor, non-dumpable by then, has deleted nonce and harness and handed it its key. The nonce
  never exists in the test's process: only the supervisor prints the completion line
  `<nonce> <status> <exit code> <records>` after the test process is gone, so neither the answer nor a child it
  starts can print it, and killing the supervisor leaves no line (not completed).
- The test process installs an audit hook (PEP 578; it cannot be removed from Python) before anything else runs.
  The hook attributes import, open, exec, compile, frame and garbage-collector introspection, ctypes, signals, kill
  and process events to the answer's own lines (the spliced snippet's line range in its file) and writes each
  record to the supervisor at once, over a pipe, before the audited call returns: the first step of any route to
  the harness's state is out of the process before it can be used. An opened path is read as the file it names
  whatever its type (a str or bytes subclass through the base type's slot, a pathlib path through pathlib's own
  code), and a compile or exec a library raises for the answer (timeit, typing's forward references) counts when an
  answer line is on the stack, unless the library generates that code from names or a traced graph. The hook
  checks the pipe is still the genuine one (its inode) before writing, and ends the process if not. Calls into
  hidden modules (the reference copies) are
  announced by one audit event injected at the top of each of their functions, so a call made from the answer's
  lines is recorded even when the module was already imported; so is every read of such a module's attributes (its
  class becomes a module type that announces them), which catches `from reference import x` of a cached module.
- The test process tells the supervisor that the test finished with a per-run key it received on a pipe; the key
  lives only in the hook's closure (reachable through gc or frames, which the hook records first). The finish is
  accepted only when it is raised from the harness's own frame and process. Before finishing, the harness compares
  the test framework's assertion helpers (unittest, numpy.testing, torch.testing, builtins, the test's own classes)
  with what they were before the test and records every replacement.

- The harness counts the tests itself (FORMAT.md 7.5). Before the task's code runs, `unittest.main` becomes a
  TestProgram whose runTests uses a result object defined in the guard's closure (no framework name leads to it):
  it wraps each test's method on its instance to learn whether the body returned, and sends a record per test over
  the same pipe, keyed: `S id` as it starts, `E id outcome returned sub-tests detail` as it ends. The supervisor
  keeps them and prints them beside the guard's records; a test that started and never ended is `unfinished`.
  What a pass needs of them (the task's test manifest) is decided outside, in evaluation/outcomes.py. At every test
  boundary the framework and comparison libraries are compared with their snapshot, not only at the finish.
- The task's function (the innermost one the answer's lines are in) announces its inputs as it is entered, before
  any answer line ran, and every function of a hidden module announces what it received: an input of the answer's
  that reaches the hidden reference with other contents than it had (exact builtin containers, numpy arrays and
  torch tensors, fingerprinted by C code only) is a finding, so no spelling of an in-place write makes the
  reference compute on data the answer chose. The inputs are kept alive while watched (the last few hundred), so
  no other object can take one's id.

Once the answer may have run, the hook compares exact strings and identities only and calls no library code
(json, os.path, getattr on foreign objects): anything the answer planted there would run inside the hook, where the
hook's own events are not recorded.

What remains possible, and is left to the static audit (evaluation/audit.py) and to the maintainer who reviews
every flag: fooling the tests in ways no audit event shows (replacing an assertion helper and restoring it before
the test ends; a signal handler, which receives a frame without any event, running while the hook holds the key);
and in-process forgery after a recorded step (an answer that read the key through gc or /proc/self/mem can announce
a completion, but its records are already out, so the outcome is flagged, never passed). One route to memory has
no recorded step: once ctypes is loaded in the test process (numpy and torch load it; a warm start forks only when its
preloads did), its classes are reachable through `object.__subclasses__()` and a Union of an integer and a pointer
reads memory without any audit event. Only the static audit sees that walk (`__subclasses__`, `__closure__`,
`__globals__`, by attribute or by string).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass, field

from sandbox import programs

NONCE_FILE = ".rcb-nonce"
HARNESS_FILE = ".rcb-harness.py"
# Most records one run reports; the rest are counted, not kept.
RECORDS_MAX = 50
# Most tests one run reports (a row each, with a failing test's traceback tail); more end the run as not counted.
TESTS_MAX = 2000
# Most failing tests whose traceback tail a run reports (the rest are named, without it).
DETAILS_MAX = 20

# The test process: installs the guard, runs the entry point, reports the finish.
CHILD_SOURCE = programs.source("child")

# The supervisor: the only holder of the nonce; prints the completion line after the test process is gone.
SUPERVISOR_SOURCE = programs.source("supervisor")


HARNESS_SOURCE = (
    f"CHILD = {CHILD_SOURCE!r}\nRECORDS_MAX = {RECORDS_MAX}\nTESTS_MAX = {TESTS_MAX}\nDETAILS_MAX = {DETAILS_MAX}\n"
    + SUPERVISOR_SOURCE
)


@dataclass(frozen=True)
class GuardSpec:
    """What the runtime guard watches: the answer's lines in the spliced file, and what is hidden from it."""

    answer_file: str = ""
    first_line: int = 0
    last_line: int = -1
    hidden_modules: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()
    # Stop at the first failing test (unittest's failfast, whatever the entry point asks): a run that only needs to
    # know whether the tests fail (a mutant's) ends there instead of running the rest.
    failfast: bool = False
    # The modules the task's files import, anywhere in them (a function's lazy import too) but the answer's own
    # lines (sandbox.forkserver.preload_modules): imported before the guard's snapshot at the answer's start and
    # watched, so a module the answer imports first is not watched as the answer left it.
    imports: tuple[str, ...] = ()

    def as_json(self) -> str:
        return json.dumps(
            {
                "answer_file": self.answer_file,
                "first_line": self.first_line,
                "last_line": self.last_line,
                "hidden_modules": list(self.hidden_modules),
                "hidden_files": list(self.hidden_files),
                **({"failfast": True} if self.failfast else {}),
                **({"imports": list(self.imports)} if self.imports else {}),
            }
        )


@dataclass(frozen=True)
class CountedTest:
    """One test as the harness's own result object saw it: its id, outcome, whether its body returned normally,
    its sub-tests (passed, total) and, for a failing test, the tail of its traceback (a skip: the reason)."""

    id: str
    outcome: str  # passed, failed, error, skipped, expected failure, unexpected success, no outcome, unfinished
    returned: bool
    subtests: tuple[int, int] = (0, 0)
    detail: str = ""

    @property
    def clean(self) -> bool:
        """Passed with its body run to its end and every sub-test passed."""
        return self.outcome == "passed" and self.returned and self.subtests[0] == self.subtests[1]

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "returned": self.returned,
            "subtests": list(self.subtests),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class HarnessVerdict:
    """Whether the test reached its end, the output with the harness line removed, the guard's records, and the
    tests the harness counted (`test_runs`: how often the entry's unittest.main ran them; 0 for other entries)."""

    completed: bool
    stdout: str
    reason: str
    records: tuple[dict, ...] = field(default=())
    tests: tuple[CountedTest, ...] = field(default=())
    test_runs: int = 0


def nonce_new() -> str:
    return "rcb-done-" + secrets.token_hex(16)


def harness_files(nonce: str) -> dict[str, bytes]:
    return {NONCE_FILE: nonce.encode(), HARNESS_FILE: HARNESS_SOURCE.encode()}


def harness_command(python: str, entry_point: str, guard: GuardSpec | None = None) -> list[str]:
    return [python, "-B", HARNESS_FILE, entry_point, (guard or GuardSpec()).as_json()]


def answer_span(start_line: int, code: str) -> tuple[int, int]:
    """The 1-based lines the spliced `code` occupies after the start marker on `start_line` (empty: last < first)."""
    count = len(code.splitlines())
    return start_line + 1, start_line + count


def _records(blob: str) -> tuple[dict, ...]:
    """The guard's records, one line each: kind, event, line and detail separated by tabs."""
    try:
        text = base64.b64decode(blob, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ({"kind": "tampering", "event": "report", "line": None, "detail": "unreadable guard records"},)
    records = []
    for row in text.splitlines():
        fields = row.split("\t", 3)
        if len(fields) != 4:
            fields = ["tampering", "report", "", "unreadable guard record"]
        kind, event, line, detail = fields
        records.append({"kind": kind, "event": event, "line": int(line) if line.isdigit() else None, "detail": detail})
    return tuple(records)


def _unescape(text: str) -> str:
    return re.sub(r"\\([\\tn])", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), "\\"), text)


def _tests(blob: str) -> tuple[int, tuple[CountedTest, ...]] | None:
    """The supervisor's test rows (see SUPERVISOR_SOURCE); None when they cannot be read."""
    try:
        rows = base64.b64decode(blob, validate=True).decode("utf-8", "replace").split("\n")
    except (binascii.Error, ValueError):
        return None
    head, _, runs = rows[0].partition("\t")
    if head != "runs" or not runs.isdigit():
        return None
    tests = []
    for row in rows[1:]:
        fields = row.split("\t")
        if len(fields) != 5 or not re.fullmatch(r"\d+/\d+", fields[3]):
            return None
        passed, total = (int(n) for n in fields[3].split("/"))
        tests.append(
            CountedTest(_unescape(fields[0]), fields[1], fields[2] == "1", (passed, total), _unescape(fields[4]))
        )
    return int(runs), tuple(tests)


def _final_line(stdout: str, nonce: str) -> re.Match | None:
    """The last completion line in the output, if any."""
    lines = list(
        re.finditer(
            rf"\n{re.escape(nonce)} (\S+) (-?\d+) (\d+) ([A-Za-z0-9+/=]*) (\d+) ([A-Za-z0-9+/=]*)"
            r"(?=\n|$)",
            stdout,
        )
    )
    return lines[-1] if lines else None


_STATUS_LINE_RE = re.compile(r"^rcb-done-[0-9a-f]{32} \S+ -?\d+ \d+ .*(?:\n|$)", re.MULTILINE)


def status_lines_removed(text: str) -> str:
    """Output as a person may read it: any line of the harness's own status (and its encoded records) taken out;
    outcomes stored before the harness's line was removed at the source hold one."""
    return _STATUS_LINE_RE.sub("", text)


def harness_status(stdout: str, nonce: str) -> tuple[str, int] | None:
    """The supervisor's status and the test process's exit code (128 + signal when killed), or None."""
    match = _final_line(stdout, nonce)
    return (match.group(1), int(match.group(2))) if match else None


def harness_verdict(stdout: str, nonce: str) -> HarnessVerdict:
    """Find the supervisor's own last line; anything else means the test did not run to its end."""
    match = _final_line(stdout, nonce)
    if match is None:
        return HarnessVerdict(False, stdout, "the test did not run to its end (the process exited or was killed early)")
    cleaned = stdout[: match.start()] + stdout[match.end() :]
    if len(match.group(4)) != int(match.group(3)) or len(match.group(6)) != int(match.group(5)):
        return HarnessVerdict(False, cleaned, "the harness's verdict line was cut by another writer")
    records = _records(match.group(4)) if match.group(4) else ()
    counted = _tests(match.group(6))
    if counted is None:
        return HarnessVerdict(False, cleaned, "the harness's test records are unreadable", records)
    runs, tests = counted
    status = match.group(1)
    if status == "completed":
        return HarnessVerdict(True, cleaned, "", records, tests, runs)
    reasons = {
        "early-exit": "the code exited before the test finished",
        "incomplete": "the test did not run to its end (the process exited or was killed early)",
        "inconsistent": "the test process exited with another status than the one it reported",
    }
    return HarnessVerdict(False, cleaned, reasons.get(status, "the test did not run to its end"), records, tests, runs)
