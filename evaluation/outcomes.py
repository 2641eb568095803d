"""From a sandbox run to an outcome: the rcb-v1 pass rule, the completion guard, a failure category, and the flag."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from benchmarks.paper2code import passes
from evaluation.models import EvaluationRun, Outcome
from sandbox import ExecResult
from sandbox.harness import CountedTest, HarnessVerdict

Category = Outcome.Category
_EXCEPTION_RE = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Warning|Exit))\b", re.MULTILINE)
SYNTAX = {"SyntaxError", "IndentationError", "TabError"}
NAME_IMPORT = {"NameError", "UnboundLocalError", "ImportError", "ModuleNotFoundError"}
TAIL = 4000


@dataclass(frozen=True)
class Verdict:
    status: str
    category: str
    detail: str
    # Audit findings (dicts: kind, line, detail, source); with any, `status` is flagged and `measured` the test's word.
    findings: tuple[dict, ...] = ()
    measured: str = ""
    # The tests the harness counted, one row each (see `test_rows`), stored on the outcome.
    tests: tuple[dict, ...] = ()


OWNER_ENDPOINT_SAID = "the model's own endpoint failed: counted as not passed"


def model_call_failed(error: str, *, run: EvaluationRun) -> Verdict:
    """An item whose model could not be called (single-shot or agent): no answer. At a provider the platform
    configures, an error never scored, said to be the model's or its provider's failure (its key, an outage), not the
    platform's. At an endpoint the model's owner runs, failed: that endpoint can fail (an HTTP error, a timeout, a
    refused connection) exactly the items its model cannot solve, and an error would take them out of the model's
    denominator, as a flag once did."""
    if run.calls_owner_endpoint:
        return Verdict(
            Outcome.Status.FAILED, Outcome.Category.OWNER_ENDPOINT, f"{OWNER_ENDPOINT_SAID} (no answer: {error})"
        )
    return Verdict(Outcome.Status.ERROR, Outcome.Category.MODEL_CALL, f"no answer: {error}")


def outcome_flag(verdict: Verdict, findings: list[dict]) -> Verdict:
    """An answer with audit findings is neither passed nor failed until a maintainer reviews it; one whose tests
    failed awaits no review (models.AWAITING_REVIEW), so its detail does not say it is held for one."""
    if not findings or verdict.status == Outcome.Status.ERROR:
        return verdict
    kinds = sorted({f["kind"] for f in findings})
    held = "" if verdict.status == Outcome.Status.FAILED else " for review"
    detail = f"flagged{held} ({', '.join(kinds)}); the test said: {verdict.status}"
    if verdict.detail:
        detail += f" ({verdict.detail})"
    return replace(
        verdict, status=Outcome.Status.FLAGGED, detail=detail, findings=tuple(findings), measured=verdict.status
    )


# The finding that holds an agent item's infrastructure error for review (`agent_error_held`).
ERROR_AFTER_AGENT = "error-after-agent-commands"
ERROR_AFTER_AGENT_SAID = "error after the agent's commands: counted as not passed until a maintainer reviews it"


def agent_error_held(verdict: Verdict, *, agent_acted: bool) -> Verdict:
    """An agent item's infrastructure error once its agent ran a command or edited a file counts as not passed, held
    for a maintainer's review (who may set it aside as the platform's own error): what the agent did (its workspace,
    processes, output, disk, what it left for the end step) can cause such an error, and an error left out of the
    score would take an item the agent is failing out of its denominator. An error before the agent acted (its
    environment's build, a held-out prompt withdrawn, a model call that failed) is left as it is; a sandbox that does
    not start for the agent's first command is held too, since that command's text, or one called before it in the
    same turn, may be why."""
    if not agent_acted or verdict.status != Outcome.Status.ERROR or verdict.category != Category.INFRASTRUCTURE:
        return verdict
    finding = {"kind": ERROR_AFTER_AGENT, "line": None, "detail": verdict.detail[:500], "source": "agent"}
    return replace(
        verdict,
        status=Outcome.Status.FLAGGED,
        detail=f"{ERROR_AFTER_AGENT_SAID} ({verdict.detail})",
        findings=(finding,),
        measured=Outcome.Status.ERROR,
    )


# The platform could not judge or record an answer (anything but a sandbox failure or a database outage): held as not
# passed for review, never retried forever nor left out of the score (an answer that makes its own recording fail
# would otherwise take its item out of the denominator, or hold a worker slot for good: attack9's NUL).
UNJUDGED = "unjudged"
UNJUDGED_SAID = "the platform could not judge or record this answer"


def judging_failed(exc: BaseException) -> Verdict:
    """The verdict of an item whose judging or recording raised `exc`: flagged, counted as not passed until a
    maintainer counts it (the answer's doing) or sets it aside (the platform's error), as an agent's held error."""
    said = f"{type(exc).__name__}: {str(exc)[:300]}"
    finding = {"kind": UNJUDGED, "line": None, "detail": said, "source": "platform"}
    return Verdict(
        Outcome.Status.FLAGGED,
        Category.INFRASTRUCTURE,
        f"{UNJUDGED_SAID} ({said})",
        findings=(finding,),
        measured=Outcome.Status.ERROR,
    )


def runtime_findings(records: tuple[dict, ...]) -> list[dict]:
    """The runtime guard's records as findings, duplicates folded."""
    seen: dict[tuple, dict] = {}
    for record in records:
        if record.get("kind") == "info":
            continue
        finding = {
            "kind": str(record.get("kind", "")),
            "line": record.get("line"),
            "detail": str(record.get("detail", ""))[:500],
            "source": "runtime",
        }
        seen.setdefault((finding["kind"], finding["line"], finding["detail"]), finding)
    return list(seen.values())


# FORMAT.md 7.5: what the harness's count requires of a test, by what the reference's run did with it.
PASSED, SKIPPED, EXPECTED_FAILURE = "passed", "skipped", "expected failure"


def manifest_made(harness: HarnessVerdict) -> dict:
    """The tests a passing reference run completes, as a task revision stores them: with the outcome each had.

    An entry point that never runs unittest.main (a plain script, pytest) counts no tests: its runner is "script",
    and the pass rule of 7.4 with the completion proof is all there is for it."""
    if not harness.test_runs:
        return {"runner": "script"}
    made = {"runner": "unittest", "runs": harness.test_runs, "tests": {t.id: t.outcome for t in harness.tests}}
    # How many sub-tests each test ran: a sub-test that vanishes (a stop raised inside subTest) is then a shortfall.
    subtests = {t.id: t.subtests[1] for t in harness.tests if t.subtests[1]}
    return {**made, "subtests": subtests} if subtests else made


def _test_passes(record: CountedTest, expected: str | None) -> bool:
    """One counted test against what the reference did with it (None: no manifest; the reference's own run)."""
    if record.clean:
        return True
    if expected is None:
        return record.outcome in (SKIPPED, EXPECTED_FAILURE)
    if expected == SKIPPED:
        return record.outcome == SKIPPED
    return expected == EXPECTED_FAILURE and record.outcome == EXPECTED_FAILURE


def _test_problem(record: CountedTest) -> str:
    if record.outcome == "unfinished":
        return "did not run to its end (the process ended during it)"
    if record.outcome == PASSED and not record.returned:
        return "was reported passed, but its body did not return (a swallowed exception or control flow)"
    if record.outcome == PASSED:
        return f"passed only {record.subtests[0]} of {record.subtests[1]} sub-tests"
    if record.outcome == SKIPPED:
        return f"was skipped ({record.detail.removeprefix('skipped: ')[:200]}); the reference runs it"
    return {"failed": "failed", "error": "raised an error"}.get(record.outcome, f"ended as {record.outcome}")


def test_rows(*, harness: HarnessVerdict, manifest: dict | None) -> list[dict]:
    """Every counted test, and every test of the manifest that did not run, with whether it passed (FORMAT.md 7.5)."""
    manifest = manifest or {}
    listed = manifest.get("runner") == "unittest"
    expected = manifest["tests"] if listed else {}
    strict = manifest.get("runner") == "strict"
    seen = {record.id for record in harness.tests}
    rows = [
        {
            **record.as_dict(),
            "passed": _test_passes(record, PASSED if strict else expected.get(record.id) if listed else None),
            "problem": "",
        }
        for record in harness.tests
    ]
    for row, record in zip(rows, harness.tests, strict=False):
        if listed and record.id not in expected:
            row["passed"], row["problem"] = False, "is not a test of this task's manifest"
        elif listed and record.subtests[1] < manifest.get("subtests", {}).get(record.id, 0):
            row["passed"], row["problem"] = (
                False,
                (f"ran {record.subtests[1]} of the reference's {manifest['subtests'][record.id]} sub-tests"),
            )
        elif not row["passed"]:
            row["problem"] = _test_problem(record)
    rows += [
        {
            "id": test,
            "outcome": "not run",
            "returned": False,
            "subtests": [0, 0],
            "detail": "",
            "passed": False,
            "problem": "did not run",
        }
        for test in expected
        if test not in seen
    ]
    return rows


def tests_problem(*, harness: HarnessVerdict, manifest: dict | None, rows: list[dict]) -> str:
    """Why the harness's count does not make a pass, naming the tests; "" when it does."""
    manifest = manifest or {}
    runner = manifest.get("runner")
    if runner == "script":
        return "" if not harness.test_runs else "the tests ran through unittest.main, which the reference's do not"
    if runner == "unittest" and harness.test_runs != manifest.get("runs", 1):
        return (
            "unittest.main never ran the tests"
            if not harness.test_runs
            else f"the tests ran {harness.test_runs} times (the reference's: {manifest.get('runs', 1)})"
        )
    failing = [row for row in rows if not row["passed"]]
    if not failing:
        return ""
    named = "; ".join(f"{row['id']} {row['problem']}" for row in failing[:3])
    return named + (f"; and {len(failing) - 3} more" if len(failing) > 3 else "")


def outcome_classify(*, result: ExecResult, harness: HarnessVerdict, manifest: dict | None = None) -> Verdict:
    """Apply the pass rule (FORMAT.md 7.4), the harness's proof that the test ran to its end, and its count of the
    tests against the task's manifest (7.5): `manifest` None only for a reference's own run, which makes one."""
    rows = test_rows(harness=harness, manifest=manifest)
    verdict = _classified(result=result, harness=harness, manifest=manifest, rows=rows)
    problem = tests_problem(harness=harness, manifest=manifest, rows=rows) if harness.test_runs else ""
    if verdict.status == Outcome.Status.FAILED and problem and problem not in verdict.detail:
        verdict = replace(verdict, detail=f"{verdict.detail}: {problem}" if verdict.detail else problem)
    return replace(verdict, tests=tuple(rows))


def _classified(*, result: ExecResult, harness: HarnessVerdict, manifest: dict | None, rows: list[dict]) -> Verdict:
    ran_through = passes(
        exit_code=result.exit_code, stdout=harness.stdout, stderr=result.stderr, timed_out=result.timed_out
    )
    failed = Outcome.Status.FAILED
    if ran_through and harness.completed:
        problem = tests_problem(harness=harness, manifest=manifest, rows=rows)
        return (
            Verdict(failed, Category.RUNTIME, problem) if problem else Verdict(Outcome.Status.PASSED, Category.NONE, "")
        )
    if result.timed_out:
        return Verdict(failed, Category.TIMEOUT, f"no result within the time limit ({result.duration:.0f} s)")
    output = f"{harness.stdout}\n{result.stderr}"
    names = set(_EXCEPTION_RE.findall(output))
    if result.oom_killed or "MemoryError" in names:
        return Verdict(failed, Category.MEMORY, "the memory limit was reached")
    if names & SYNTAX:
        return Verdict(failed, Category.SYNTAX, ", ".join(sorted(names & SYNTAX)))
    if names & NAME_IMPORT:
        return Verdict(failed, Category.NAME_IMPORT, ", ".join(sorted(names & NAME_IMPORT)))
    errors = sum(row["outcome"] == "error" for row in rows)
    if errors > sum(row["outcome"] == "failed" for row in rows):  # most failing tests raised, not asserted
        raised = sorted(names - {"AssertionError"})
        return Verdict(
            failed,
            Category.RUNTIME,
            f"{errors} test{'' if errors == 1 else 's'} raised an error"
            + (f" ({', '.join(raised)})" if raised else ""),
        )
    if "AssertionError" in names or re.search(r"^FAIL: ", output, re.MULTILINE):
        return Verdict(failed, Category.WRONG_RESULT, "the tests' assertions failed")
    if not harness.completed:
        cut = [row["id"] for row in rows if row["outcome"] in ("unfinished", "not run")]
        return Verdict(
            failed,
            Category.RUNTIME,
            harness.reason
            + (
                f"; {cut[0]} did not run to its end"
                + (f" ({len(cut) - 1} more did not either)" if len(cut) > 1 else "")
                if cut
                else ""
            ),
        )
    if result.output_truncated and result.exit_code is None:
        return Verdict(failed, Category.RUNTIME, "killed after exceeding the output limit")
    if names:
        return Verdict(failed, Category.RUNTIME, ", ".join(sorted(names)))
    return Verdict(
        failed,
        Category.RUNTIME if result.exit_code else Category.WRONG_RESULT,
        f"exit status {result.exit_code}" if result.exit_code else "the output reports a failure",
    )


def tail(text: str) -> str:
    return text if len(text) <= TAIL else "…" + text[-TAIL:]


def failure_said(detail: str, limit: int = 600) -> str:
    """What a failed test's exception said (its traceback's last lines after the last frame: "AssertionError: ..."),
    for a list of tests that names each one's reason beside it; '' when the detail holds no traceback."""
    lines = detail.rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  ")]
    if not frames:
        return ""
    said = "\n".join(lines[frames[-1] + 1 :]).strip()
    return said if len(said) <= limit else said[: limit - 1] + "…"
