"""Try an answer (issue 35): an author or a maintainer tries an alternative body for one snippet of a validated
revision and gets evaluation's verdict for it (pass, fail or flag, with each test's result), from the very judging
step that scores a model's answer (evaluation/judging/step.py), in the sandbox, on a `sandbox` worker. The tried
answers stay with the revision: its reviewers see which correct alternatives its tests accept."""

from __future__ import annotations

import ast
from dataclasses import replace

from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from benchmarks.paper2code import body_reindent
from benchmarks.selectors import package_load, user_is_maintainer
from benchmarks.services.blobs import environment_hash
from common.errors import ApplicationError
from evaluation.environments import build_failures
from evaluation.executor import limits_default, session_for
from evaluation.judging.step import package_answer_verdict
from operations.enqueue import enqueue
from sandbox import EnvironmentBuildError
from submissions.models import Revision, Submission, TriedAnswer
from submissions.quotas import answer_try_quota_check
from submissions.validation import package_hidden

# An answer is a snippet's body: far below this; anything longer is not one.
ANSWER_CHARS_MAX = 50_000


def answer_tryer_check(*, submission: Submission, user) -> None:
    """Only the submission's author and maintainers try answers on it; to anyone else it does not exist (404)."""
    if not user.is_authenticated or (user.pk != submission.author_id and not user_is_maintainer(user=user)):
        raise Http404("no such submission")


def _indentation_problem(code: str) -> str:
    """Why Python cannot read `code`'s lines as blocks ('' when it can; any other syntax error is the answer's own)."""
    try:
        ast.parse(code)
    except IndentationError as exc:  # TabError too
        return f"line {exc.lineno}: {exc.msg}"
    except SyntaxError:
        return ""
    return ""


CONTROL_NAMES = {"\r": "carriage return", "\f": "form feed", "\v": "vertical tab"}


def answer_body_place(*, body: str, indent: str) -> tuple[str, str]:
    """A pasted body at the snippet's indentation `indent`, as an uploaded body is placed (`body_reindent`: any
    consistent indentation, tabs as Python reads them), and what was done, in a sentence ('' for nothing). A body whose
    first line starts at column 0 and the rest deeper, which Python cannot read as it is, is what a copy begun
    mid-line gives: its other lines are moved on their own. Other unreadable indentation is refused, saying where."""
    body = body.replace("\r\n", "\n")  # a browser's textarea sends CRLF
    for number, line in enumerate(body.split("\n"), start=1):
        # Python reads a lone CR as a line break and a form feed as a reset of the indentation to column 0, so a
        # body holding one could leave its function whatever indentation it is given.
        if control := next((c for c in ("\r", "\f", "\v") if c in line), None):
            raise ApplicationError(
                f"line {number} of the body holds a {CONTROL_NAMES[control]}, which Python reads as a line break or "
                "an indentation reset: paste plain lines"
            )
    placed = body_reindent(body, indent)
    problem = _indentation_problem(body_reindent(body, ""))
    if not problem:
        return (
            placed,
            "" if placed == body else f"Its lines were moved to the snippet's indentation ({len(indent)} columns).",
        )
    lines = body.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip())
    rest = "".join(lines[first + 1 :])
    if lines[first][:1] not in (" ", "\t") and rest.strip():
        joined = lines[first] + body_reindent(rest, "")
        if not _indentation_problem(joined):
            return body_reindent(joined, indent), (
                "Its first line started at column 0 and the others deeper, as a copy begun mid-line gives: "
                f"they were moved together to the snippet's indentation ({len(indent)} columns)."
            )
    raise ApplicationError(
        f"the body's indentation does not make blocks Python can read ({problem}): paste the snippet's lines with "
        "their indentation relative to each other as in the file (at any common indentation, tabs or spaces)"
    )


def placed_said(*, body: str, placed: str) -> str:
    """What the tried answers' list keeps saying about a placed body's indentation ('' when it was used as pasted)."""
    if placed == body:
        return ""
    return "reindented to the snippet's indentation" + (" (tabs expanded)" if "\t" in body else "")


def answer_try(*, revision: Revision, actor, snippet_file: str, snippet_index: int, code: str, note: str = ""):
    """Store an answer to try on `revision`'s snippet, at the snippet's indentation (`answer_body_place`), and queue
    its judging; refused (ApplicationError, saying why) for a revision whose reference has not passed validation, an
    unknown snippet, an empty or oversized body, a body whose indentation Python cannot read, or a user over their
    run quota. The stored answer's `placed` says what was done to the body's indentation."""
    answer_tryer_check(submission=revision.submission, user=actor)
    if revision.test_manifest is None:
        raise ApplicationError(
            f"revision r{revision.number} has no validated reference yet: answers are tried once its reference "
            "passed validation (they are judged against the tests it completed)"
        )
    if not code.strip():
        raise ApplicationError("the answer is empty: paste the body to try in place of the snippet's")
    if len(code) > ANSWER_CHARS_MAX:
        raise ApplicationError(f"the answer has {len(code)} characters, over the {ANSWER_CHARS_MAX} a body may have")
    if snippet_file not in revision.annotated_paths:
        raise ApplicationError(f"{snippet_file} is not an annotated file of revision r{revision.number}")
    annotated = package_load(revision).annotated[snippet_file]
    snippet = next((s for s in annotated.snippets if s.index == snippet_index), None)
    if snippet is None:
        raise ApplicationError(f"{snippet_file} has no snippet {snippet_index}")
    pasted = code
    code, placed = answer_body_place(body=code, indent=snippet.code_indent)
    with transaction.atomic():
        answer_try_quota_check(user=actor)
        tried = TriedAnswer.objects.create(
            revision=revision,
            snippet_file=snippet_file,
            snippet_index=snippet_index,
            snippet_name=snippet.name,
            code=code,
            note=note.strip()[:300],
            reindented=placed_said(body=pasted.replace("\r\n", "\n"), placed=code),
            tried_by=actor,
        )
        transaction.on_commit(lambda: _answer_queue(tried))
    tried.placed = placed
    return tried


def _answer_queue(tried: TriedAnswer) -> None:
    def refused(exc: Exception) -> str:
        detail = f"the broker refused this answer's judging ({exc}); nothing was run: try it again"
        TriedAnswer.objects.filter(pk=tried.pk, status=TriedAnswer.Status.PENDING).update(
            status=TriedAnswer.Status.ERROR, detail=detail, finished_at=timezone.now()
        )
        return detail

    enqueue("submissions.tasks.tried_answer_judge", tried.pk, subject=tried, refused=refused)


def tried_answer_judge_run(*, tried: TriedAnswer) -> str:
    """Judge a tried answer in the sandbox as evaluation judges a model's (SandboxError propagates: the task's retry
    policy); its verdict, per-test rows and findings stored on it."""
    if not TriedAnswer.objects.filter(pk=tried.pk, status__in=TriedAnswer.ACTIVE).update(
        status=TriedAnswer.Status.RUNNING
    ):
        return TriedAnswer.objects.get(pk=tried.pk).status  # a redelivered copy: judged already
    revision = tried.revision
    package = package_load(revision)
    files, annotated = dict(package.files), package.annotated
    limits = replace(limits_default(), wall_seconds=settings.SUBMISSION_TEST_SECONDS)
    try:
        session = session_for(environment_hash(package.requirements), package.requirements, failures=build_failures)
    except EnvironmentBuildError as exc:
        return _finish(tried, TriedAnswer.Status.ERROR, "environment", f"the requirements did not install: {exc}")
    run = package_answer_verdict(
        session=session,
        files=files,
        annotated=annotated[tried.snippet_file],
        position=tried.snippet_index,
        code=tried.code,
        test_entry_point=package.test_entry_point,
        hidden=package_hidden(files=files, annotated=annotated, test_entry_point=package.test_entry_point),
        manifest=revision.test_manifest,
        recording=revision.recording,
        limits=limits,
    )
    verdict = run.verdict
    return _finish(
        tried,
        verdict.status,
        verdict.category,
        verdict.detail,
        tests=list(verdict.tests),
        findings=list(verdict.findings),
        backend=run.backend,
    )


def tried_answer_error(*, tried: TriedAnswer, detail: str) -> str:
    return _finish(tried, TriedAnswer.Status.ERROR, "infrastructure", detail)


def _finish(
    tried: TriedAnswer,
    status: str,
    category: str,
    detail: str,
    *,
    tests: list | None = None,
    findings: list | None = None,
    backend: str = "",
) -> str:
    TriedAnswer.objects.filter(pk=tried.pk, status__in=TriedAnswer.ACTIVE).update(
        status=status,
        category=category,
        detail=detail[-8000:],
        tests=tests or [],
        findings=findings or [],
        sandbox_backend=backend,
        finished_at=timezone.now(),
    )
    return status
