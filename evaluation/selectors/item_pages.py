"""A run's items as its pages show them: outcomes, their tests, tracebacks with the worker's paths shortened."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from django.core.paginator import Page, Paginator
from django.db.models import (
    Q,
    QuerySet,
)

from benchmarks import visibility
from benchmarks.paper2code.markers import is_marker, split_lines
from benchmarks.paper2code.pset import TEST_ENTRY_POINT
from benchmarks.permissions import user_may_change
from benchmarks.selectors import (
    snippet_sealing,
    tasks_as_released,
    user_is_maintainer,
)
from common.highlight import answer_diff
from evaluation.harbor.rewards import NO_REWARD, harbor_reward
from evaluation.judging.verdict import REPLAY_DISAGREES
from evaluation.models import (
    EvaluationRun,
    Outcome,
)
from evaluation.selectors.runs import outcomes_visible
from sandbox.harness import CHILD_SOURCE, status_lines_removed


def outcome_tests(*, outcome: Outcome, task_visible: bool) -> list[dict]:
    """The tests the harness counted for a visible outcome: id, outcome, passed, why not; each failing test's
    traceback tail only where the viewer may see the task's files (it quotes them), as for the reference code."""
    return [
        {
            "id": row.get("id", ""),
            "outcome": row.get("outcome", ""),
            "passed": bool(row.get("passed")),
            "problem": row.get("problem", ""),
            "subtests": dict(zip(("passed", "run"), row.get("subtests", [0, 0]), strict=True)),
            "detail": row.get("detail", "") if task_visible else "",
        }
        for row in outcome.tests
    ]


_FRAME_PATH = re.compile(r'File "(/[^"]+)"')


# The harness's test process runs compiled from a string (sandbox/programs/child.py): its frames read
# `File "<string>", line N, in called_body`, the harness's own wrapping and nothing of the answer's or the paper's.
_HARNESS_FUNCTIONS = frozenset(re.findall(r"^\s*(?:async\s+)?def (\w+)", CHILD_SOURCE, re.MULTILINE))


_STRING_FRAME = re.compile(r'^ *File "<string>", line \d+, in (\w+)\n', re.MULTILINE)


# Installed packages and the standard library, wherever the environment or the interpreter lives.
_PACKAGES = re.compile(r'"/[^"]*/(?:site|dist)-packages/')


_STDLIB = re.compile(r'"/[^"]*/lib/python3\.\d+/')


def paths_shown(text: str, *, file_path: str) -> str:
    """A traceback as a reader of the paper's code needs it: the paper's files relative to its folder, installed
    packages under <env>/, the standard library under <python>/ and anything else (the harness, the sandbox's and
    the host's folders) as <harness>/ and its file name: where the platform keeps things is nobody's business. The
    frames of the harness's test process, compiled from a string, are left out: they are none of the test's."""
    own = tuple("/" + name.lstrip("/") for name in (file_path, TEST_ENTRY_POINT))
    roots = {path[: -len(end)] for path in _FRAME_PATH.findall(text) for end in own if path.endswith(end)}
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(root + "/", "")
    text = _STDLIB.sub('"<python>/', _PACKAGES.sub('"<env>/', text))
    text = _STRING_FRAME.sub(lambda m: "" if m[1] in _HARNESS_FUNCTIONS else m[0], text)
    return _FRAME_PATH.sub(lambda m: f'File "<harness>/{m[1].rsplit("/", 1)[-1]}"', text)


# What a flag's finding is, said without its evidence: a runtime guard's record or a replay's difference can quote
# the hidden tests (their calls, their values), so the item page names only its kind and this.
FINDING_SOURCES = {
    "static": "the static policy found this in the answer's code",
    "runtime": "the platform's runtime guard caught something the answer did while the tests ran",
    "replay": "the answer's replay on the recorded calls differed from the reference's, although the tests passed",
    "agent": "an infrastructure error after the agent's commands (what the agent did may have caused it)",
}


def flag_findings_shown(*, outcome: Outcome, task_visible: bool) -> list[dict]:
    """A flag's findings as the run's owner may read them: a static finding's rule and line (the answer is the
    owner's own code), its detail where the owner may see the task (it can name the file's own names); any other
    finding's kind and what its source means, never its evidence. Notes kept beside a pass are not flags."""
    shown = []
    for finding in outcome.findings:
        if finding.get("note"):
            continue
        source = str(finding.get("source", ""))
        static = source == "static"
        shown.append(
            {
                "kind": finding.get("kind", ""),
                "rule": finding.get("rule", "") if static else "",
                "line": finding.get("line") if static else None,
                "detail": finding.get("detail", "") if static and task_visible else "",
                "said": FINDING_SOURCES.get(source, "an audit finding"),
            }
        )
    return shown


# What the sealed replay said of an answer, read back from its outcome (evaluation/judging/verdict.py): it runs only
# once the paper's tests passed, on a sealed snippet, and a disagreement is stored as a finding of its own kind.
REPLAY_SAID = {
    "agreed": "ran and agreed with the reference on every recorded call",
    "disagreed": "ran and disagreed with the reference, although the tests passed: not passed",
    "no_answer": "not run: there was no answer to test (the model call failed)",
    "tests_failed": "not run: the paper's tests did not pass",
    "no_verdict": "not run: the tests did not finish (an error is never scored)",
    "unsealed": "not run: the snippet is not sealed, so its verdict is the tests' and the guard's alone",
    "not_judged": "not run: a reported result, not judged by the platform",
}


# The model call failed, so there was no answer: neither the tests nor the replay ran.
NO_ANSWER_CATEGORIES = frozenset({Outcome.Category.MODEL_CALL, Outcome.Category.OWNER_ENDPOINT})


def outcome_replay(*, outcome: Outcome, sealed: bool) -> str:
    """Which of REPLAY_SAID holds for `outcome` of a snippet `sealed` (or not) in its task's recording."""
    if outcome.run.provenance == EvaluationRun.Provenance.REPORTED:
        return "not_judged"
    if any(isinstance(f, dict) and f.get("kind") == REPLAY_DISAGREES for f in outcome.findings):
        return "disagreed"
    if outcome.category in NO_ANSWER_CATEGORIES:
        return "no_answer"
    tests_said = outcome.measured_status or outcome.status
    if tests_said == Outcome.Status.FAILED:
        return "tests_failed"
    if tests_said != Outcome.Status.PASSED:
        return "no_verdict"
    return "agreed" if sealed else "unsealed"


@dataclass
class RunItem:
    outcome: Outcome
    show_reference: bool
    answer_label: str = "model's answer"  # whose code the diff's "+++" side is: a person's attempt names its person
    show_findings: bool = False  # the run's owner and maintainers read what a flag found (`flag_findings_shown`)
    show_evidence: bool = False  # maintainers read a flag's evidence (a replay's difference can quote recorded values)

    @property
    def reviewable(self) -> bool:
        """A maintainer reviews a flagged item here (or reads its review), with the evidence."""
        return self.show_evidence and (self.outcome.status == Outcome.Status.FLAGGED or bool(self.outcome.review))

    @cached_property  # read by the page and by `replay`: the recording is read once
    def sealing(self) -> dict | None:
        """Whether the snippet is sealed in its task's recording, and why not (None: no recording yet), for a viewer
        who may see the task (as its paper page says it)."""
        if not self.show_reference:
            return None
        return snippet_sealing(task=self.outcome.snippet.task, snippet=self.outcome.snippet)

    @property
    def replay(self) -> dict | None:
        """What the sealed replay said ({"result", "said", "difference"}), for whoever reads what a flag found; its
        difference for maintainers only. None for anyone else, or when the viewer may not see the task."""
        if not self.show_findings or not self.show_reference:
            return None
        result = outcome_replay(outcome=self.outcome, sealed=bool((self.sealing or {}).get("sealed")))
        finding: dict = next((f for f in self.outcome.findings if f.get("kind") == REPLAY_DISAGREES), {})
        difference = str(finding.get("detail", "")) if self.show_evidence else ""
        return {"result": result, "said": REPLAY_SAID[result], "difference": difference}

    @property
    def findings(self) -> list[dict]:
        if not self.show_findings or not self.outcome.was_flagged:
            return []
        return flag_findings_shown(outcome=self.outcome, task_visible=self.show_reference)

    @property
    def tests(self) -> list[dict]:
        tests = outcome_tests(outcome=self.outcome, task_visible=self.show_reference)
        return [{**test, "detail": self._paths(test["detail"])} for test in tests]

    def _paths(self, text: str) -> str:
        return paths_shown(text, file_path=self.outcome.snippet.file_path)

    @property
    def harbor_reward(self) -> dict | None:
        """An imported Harbor trial's own reward ({"value": a number or None}), to show beside the platform's
        verdict (never used for it); None for any other run."""
        value = harbor_reward(
            params=self.outcome.run.params, snippet_id=self.outcome.snippet_id, sample=self.outcome.sample
        )
        return None if value is NO_REWARD else {"value": value}

    @property
    def no_answer(self) -> bool:
        """The model call failed: there is no answer, so nothing was extracted or tested."""
        return self.outcome.category in NO_ANSWER_CATEGORIES

    @property
    def code(self) -> str | None:
        """The code the test ran: extracted from the answer, or uploaded as is (None without a stored answer)."""
        return self.outcome.generation.extracted_code if self.outcome.generation else None

    @property
    def diff(self) -> str:
        """Reference to the answer's code, for a viewer who may see the reference; "" otherwise or when equal."""
        if not self.show_reference or self.code is None:
            return ""
        # Nested snippets' markers are comments the reference carries and an answer need not: not a difference.
        reference, answer = (
            ("".join(line for line in split_lines(text) if not is_marker(line)))
            for text in (self.outcome.snippet.reference_code, self.code)
        )
        return answer_diff(reference=reference, answer=answer, labels=("reference", self.answer_label))

    @property
    def traceback_tail(self) -> str:
        """The last traceback the test printed (stderr, else stdout), for a viewer who may see the task's tests;
        "" when none or when the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        for text in (self.outcome.stderr_tail, status_lines_removed(self.outcome.stdout_tail)):
            if (start := text.rfind("Traceback (most recent call last)")) >= 0:
                return _last_lines(self._paths(text[start:]), OUTPUT_TAIL_LINES)
        return ""

    @property
    def error_line(self) -> int | None:
        """The line of the snippet's file the last traceback frame in it names (a syntax error's line too), for a
        viewer who may see the traceback; None when there is none."""
        path = "/" + self.outcome.snippet.file_path.lstrip("/")
        lines = [
            int(line)
            for file, line in re.findall(r'File "([^"]+)", line (\d+)', self.traceback_tail or self.output_tail)
            if ("/" + file.lstrip("/")).endswith(path)
        ]
        return lines[-1] if lines else None

    @property
    def output_tail(self) -> str:
        """The last lines of what the test printed (stdout and stderr), for a viewer who may see the task's tests;
        "" when it printed nothing or the outcome passed."""
        if not self.show_reference or self.outcome.status == Outcome.Status.PASSED:
            return ""
        printed = (status_lines_removed(self.outcome.stdout_tail), self.outcome.stderr_tail)
        parts = [text.rstrip() for text in printed if text.strip()]
        if not parts:  # nothing printed (no answer was tested): no empty output box
            return ""
        return _last_lines(self._paths("\n".join(parts)), OUTPUT_TAIL_LINES)


OUTPUT_TAIL_LINES = 40


def _last_lines(text: str, count: int) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join((["…"] if len(lines) > count else []) + lines[-count:]) + "\n"


RUN_PAGE_ITEMS = 100


def run_outcomes_ordered(*, run: EvaluationRun, user) -> QuerySet[Outcome]:
    """The run's outcomes the user may see, in item order, read along the (run, snippet, sample) unique index: a
    page costs its own rows, not a sort of the whole run (snippet ids follow the order items were imported in)."""
    return outcomes_visible(run=run, user=user).order_by("snippet_id", "sample")


def run_item_page(*, run: EvaluationRun, user, page: str | int | None) -> Page:
    """One page of the items the user may see with the model's answer, and reference code where the user may see
    the task."""
    visible_tasks = set(visibility.tasks_visible(version=run.version, user=user).values_list("pk", flat=True))
    outcomes = run_outcomes_ordered(run=run, user=user).select_related("snippet__task__paper", "generation")
    current = Paginator(outcomes, RUN_PAGE_ITEMS).get_page(page)
    # The ignore: the page keeps its paginator's counts of outcomes and shows each one as a RunItem.
    current.object_list = [
        RunItem(outcome=o, show_reference=o.snippet.task_id in visible_tasks)  # type: ignore[misc]
        for o in current.object_list
    ]
    return current


def run_item(*, run: EvaluationRun, outcome_pk: int, user) -> RunItem | None:
    """One item of a run with its answer (and the reference where the user may see the task), or None when the
    user may not see that outcome: the same rule as the run page's list."""
    outcome = (
        outcomes_visible(run=run, user=user)
        .filter(pk=outcome_pk)
        .select_related("snippet__task__paper", "generation")
        .first()
    )
    if outcome is None:
        return None
    tasks_as_released(version=run.version, tasks=[outcome.snippet.task])
    return RunItem(
        outcome=outcome,
        show_reference=visibility.task_visible(version=run.version, task=outcome.snippet.task, user=user),
        show_findings=user_may_change(user=user, owner_id=run.created_by_id),
        # The evidence can quote hidden files and recorded values: maintainers only, as on the run page's flags.
        show_evidence=user_is_maintainer(user=user),
    )


def run_flags(*, run: EvaluationRun) -> list[Outcome]:
    """Outcomes of the run the audit flagged, awaiting review or reviewed, with their evidence (for maintainers)."""
    return list(
        Outcome.objects.filter(Q(status=Outcome.Status.FLAGGED) | ~Q(review=""), run=run)
        .select_related("snippet__task__paper", "generation", "reviewed_by")
        .order_by("snippet__task__paper__slug", "snippet__file_path", "snippet__position", "sample")
    )
