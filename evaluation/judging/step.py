"""The single judging step: an item's answer in, its verdict out and recorded once (outcome, per-test rows, audit
findings, fork-server events). Infrastructure failures of the sandbox (SandboxError) propagate to the caller, whose
retry policy they are; a failed environment build is the item's error, recorded here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from benchmarks.models import Snippet
from benchmarks.paper2code.markers import AnnotatedFile
from evaluation import services
from evaluation.environments import ENVIRONMENT_FAILED, build_failures
from evaluation.executor import ItemRun, answer_test, item_execute, limits_for_release
from evaluation.models import EvaluationRun, Generation, Outcome
from evaluation.outcomes import Verdict
from sandbox import EnvironmentBuildError, Limits, Session


def answer_verdict(*, snippet: Snippet, code: str, limits: Limits | None = None) -> ItemRun:
    """`code`'s verdict as the body of `snippet`, stored nowhere (what reproduction and tools ask); raises
    EnvironmentBuildError and SandboxError."""
    return item_execute(snippet=snippet, code=code, limits=limits, failures=build_failures)


def package_answer_verdict(
    *,
    session: Session,
    files: dict[str, bytes],
    annotated: AnnotatedFile,
    position: int,
    code: str,
    test_entry_point: str,
    hidden: Iterable[str],
    manifest: dict | None,
    recording: dict | None,
    limits: Limits,
) -> ItemRun:
    """`code`'s verdict as the body of snippet `position` of `annotated` in a package that is not a task yet (a
    revision under validation, an author's tried answer): what `answer_verdict` does for a task's snippet, the answer
    policy, the runtime guard and the sealed replay on `recording`, with the package's own manifest."""
    return answer_test(
        session=session,
        files=files,
        annotated=annotated,
        position=position,
        code=code,
        test_entry_point=test_entry_point,
        hidden_files=hidden,
        limits=limits,
        manifest=manifest,
        recording=recording,
    )


def environment_failed(snippet: Snippet, exc: EnvironmentBuildError) -> Verdict:
    """The verdict of an item whose task's environment did not build: an infrastructure error, never scored."""
    return Verdict(
        Outcome.Status.ERROR,
        Outcome.Category.INFRASTRUCTURE,
        f"{ENVIRONMENT_FAILED} (task {snippet.task}): {exc}\n{exc.log[-1500:]}",
    )


def ended_detail(ended: str, detail: str) -> str:
    """An agent item's outcome detail: what ended the agent, then what the test said (if it said anything)."""
    return f"{ended}; {detail}" if detail.strip() else f"{ended}."


def item_judge(
    *,
    run: EvaluationRun,
    snippet: Snippet,
    sample: int,
    generation: Generation,
    worker: str,
    limits: Limits | None = None,
    ended: str | None = None,
) -> Outcome:
    """Judge the item's stored answer and record its verdict, once (a second delivery finds the first's outcome).

    `ended` (agent items) says what ended the agent; the outcome's detail begins with it."""
    try:
        item_run = answer_verdict(
            snippet=snippet, code=generation.extracted_code, limits=limits or limits_for_release(run.version)
        )
    except EnvironmentBuildError as exc:
        outcome, _ = services.outcome_record(
            run=run, snippet=snippet, sample=sample, verdict=environment_failed(snippet, exc), generation=generation
        )
        return outcome
    verdict = item_run.verdict
    if ended is not None:
        verdict = replace(verdict, detail=ended_detail(ended, verdict.detail))
    outcome, _ = services.outcome_record(
        run=run,
        snippet=snippet,
        sample=sample,
        verdict=verdict,
        generation=generation,
        result=item_run.result,
        backend=item_run.backend,
        worker=worker,
        limits=item_run.limits,
        environment_lock=item_run.environment_lock,
        forked=item_run.forked,
    )
    if item_run.fork_starts or item_run.fork_cold:
        services.forkserver_events_record(
            run=run,
            worker=worker,
            environment_hash=snippet.task.environment_hash,
            backend=item_run.backend,
            starts=item_run.fork_starts,
            cold=item_run.fork_cold,
        )
    return outcome
