"""From a sandbox run to an outcome: the rcb-v1 pass rule, the completion guard, a failure category, and the flag."""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.paper2code import passes
from evaluation.models import Outcome
from evaluation.sandbox import ExecResult
from evaluation.sandbox.harness import HarnessVerdict

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


def outcome_flag(verdict: Verdict, findings: list[dict]) -> Verdict:
    """An answer with audit findings is neither passed nor failed until a maintainer reviews it."""
    if not findings or verdict.status == Outcome.Status.ERROR:
        return verdict
    kinds = sorted({f["kind"] for f in findings})
    detail = f"flagged for review ({', '.join(kinds)}); the test said: {verdict.status}"
    if verdict.detail:
        detail += f" ({verdict.detail})"
    return Verdict(Outcome.Status.FLAGGED, verdict.category, detail, tuple(findings), verdict.status)


def runtime_findings(records: tuple[dict, ...]) -> list[dict]:
    """The runtime guard's records as findings, duplicates folded."""
    seen: dict[tuple, dict] = {}
    for record in records:
        if record.get("kind") == "info":
            continue
        finding = {"kind": str(record.get("kind", "")), "line": record.get("line"),
                   "detail": str(record.get("detail", ""))[:500], "source": "runtime"}
        seen.setdefault((finding["kind"], finding["line"], finding["detail"]), finding)
    return list(seen.values())


def outcome_classify(*, result: ExecResult, harness: HarnessVerdict) -> Verdict:
    """Apply the pass rule (FORMAT.md 7.4) plus the harness's proof that the test ran to its end."""
    ran_through = passes(exit_code=result.exit_code, stdout=harness.stdout, stderr=result.stderr,
                         timed_out=result.timed_out)
    if ran_through and harness.completed:
        return Verdict(Outcome.Status.PASSED, Category.NONE, "")
    failed = Outcome.Status.FAILED
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
    if "AssertionError" in names or re.search(r"^FAIL: ", output, re.MULTILINE):
        return Verdict(failed, Category.WRONG_RESULT, "the tests' assertions failed")
    if not harness.completed:
        return Verdict(failed, Category.RUNTIME, harness.reason)
    if result.output_truncated and result.exit_code is None:
        return Verdict(failed, Category.RUNTIME, "killed after exceeding the output limit")
    if names:
        return Verdict(failed, Category.RUNTIME, ", ".join(sorted(names)))
    return Verdict(failed, Category.RUNTIME if result.exit_code else Category.WRONG_RESULT,
                   f"exit status {result.exit_code}" if result.exit_code else "the output reports a failure")


def tail(text: str) -> str:
    return text if len(text) <= TAIL else "…" + text[-TAIL:]
