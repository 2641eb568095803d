"""Whole problem sets checked as submissions are (FORMAT.md section 9): a folder (`validate_pset`) or a draft
version's tasks (its page), one Celery task per paper on the `sandbox` queue, or paper by paper inline.

Every check goes through `sandbox_checks`, the submissions' own validation code, so the untrusted tests of a set
run only in the sandbox, as a submission's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from benchmarks.paper2code import mask, noop, splice
from benchmarks.paper2code.markers import AnnotatedFile
from benchmarks.paper2code.mutation import Mutant, mutants_generate
from benchmarks.paper2code.pset import PaperPackage, tests_missing_problem
from benchmarks.selectors import blob_read, package_load, user_is_maintainer
from benchmarks.services.blobs import blob_store, environment_hash
from benchmarks.services.task_storage import package_store
from common.errors import ApplicationError
from evaluation.environments import build_failures
from evaluation.executor import ItemRun, limits_default, package_test, session_for
from evaluation.judging.sealed import SnippetSpan, recording_make, snippet_key, snippet_sealing
from evaluation.judging.step import package_answer_verdict
from evaluation.outcomes import Verdict
from evaluation.taskfiles import hidden_files
from operations.enqueue import enqueue
from operations.events import Kind, event_record
from sandbox import EnvironmentBuildError
from sandbox.base import Limits
from sandbox.harness import GuardSpec
from submissions.models import SetValidation, SetValidationPaper
from submissions.mutants import OUTCOME_WORDS, mutant_replayer, mutants_judge, mutation_result, proposed_kills
from submissions.proposed import EXAMPLE_RECORDING, FOLDER, proposed_tests_files

Status = SetValidation.Status
ACTIVE = [Status.PENDING, Status.RUNNING]
SET_PAPER_VALIDATE = "submissions.tasks.set_paper_validate"  # queued by name: that module imports this one
# How many times validation judges each snippet's reference as an answer: a verdict that changes between two runs of
# the same code is one evaluation cannot be trusted with.
REFERENCE_JUDGED_RUNS = 2


def mutation_score_min(*, version: BenchmarkVersion | None = None) -> float:
    """The score below which validation warns: the release's own, else the newest draft's (where a submission
    would enter), else the site's MUTATION_SCORE_MIN."""
    if version is None:
        version = (
            BenchmarkVersion.objects.filter(status=BenchmarkVersion.Status.DRAFT, mutation_score_min__isnull=False)
            .order_by("-created_at")
            .first()
        )
    if version is not None and version.mutation_score_min is not None:
        return version.mutation_score_min
    return settings.MUTATION_SCORE_MIN


@transaction.atomic
def pset_validation_create(
    *,
    packages: list[PaperPackage],
    source: str,
    environment: str | None = None,
    actor=None,
    mutants: int = 0,
    score_min: float | None = None,
) -> SetValidation:
    """A validation of problem-set packages read from a folder; their files go to storage, where workers read them.
    `environment`: requirements every paper runs in instead of its own (a legacy shared environment); `mutants`:
    per snippet, for its mutation score (0: none), warned about below `score_min` (default: `mutation_score_min`)."""
    score_min = mutation_score_min() if score_min is None else score_min
    validation = SetValidation.objects.create(source=source[:500], started_by=actor)
    rows = []
    for position, package in enumerate(packages):
        snippets = [
            {"file": path, "index": s.index, "name": s.name}
            for path in package.annotated_paths
            for s in package.annotated[path].snippets
        ]
        rows.append(
            SetValidationPaper(
                **package_store(package=package, requirements=environment),
                validation=validation,
                position=position,
                paper=package.id,
                snippets=snippets,
                mutants=mutants,
                mutation_score_min=score_min,
            )
        )
    SetValidationPaper.objects.bulk_create(rows)
    return validation


def version_validation_start(*, version: BenchmarkVersion, actor) -> SetValidation:
    """A maintainer validates a draft version's tasks on the workers: one validation at a time per version."""
    if actor is None or not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers may validate a release")
    try:
        with transaction.atomic():
            version = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
            if version.is_frozen:
                raise ApplicationError(f"release {version.name} is {version.status}; only drafts are validated here")
            running = version.validations.filter(status__in=ACTIVE).first()
            if running is not None:
                raise ApplicationError(
                    f"a validation of {version.name} is already running (started "
                    f"{running.created_at:%Y-%m-%d %H:%M} UTC); wait for it to finish"
                )
            tasks = list(version.tasks.select_related("paper").order_by("paper__slug"))
            if not tasks:
                raise ApplicationError(f"release {version.name} has no tasks to validate")
            validation = SetValidation.objects.create(
                version=version, source=f"version {version.name}", started_by=actor
            )
            rows = []
            for position, task in enumerate(tasks):
                order = {path: i for i, path in enumerate(task.annotated_paths)}
                snippets = sorted(
                    task.snippets.values_list("file_path", "position", "name"),
                    key=lambda s: (order.get(s[0], len(order)), s[1]),
                )
                rows.append(
                    SetValidationPaper(
                        **task.package_fields(),
                        validation=validation,
                        position=position,
                        paper=task.paper.slug,
                        snippets=[{"file": f, "index": i, "name": n} for f, i, n in snippets],
                        mutants=settings.SUBMISSION_MUTANTS,
                        mutation_score_min=mutation_score_min(version=version),
                    )
                )
            SetValidationPaper.objects.bulk_create(rows)
            transaction.on_commit(lambda: set_validation_dispatch(validation=validation))
    except IntegrityError as exc:  # two maintainers at once: the constraint keeps it to one
        raise ApplicationError(f"a validation of {version.name} is already running; wait for it to finish") from exc
    return validation


def dispatch_order(*, validation: SetValidation) -> list[int]:
    """The validation's papers (pks), the papers with the most snippets first, ties in their order in the set: each
    snippet is four runs of the tests, and a long paper queued last would keep one worker busy while the others
    idle."""
    rows = validation.papers.order_by("position").values_list("pk", "snippets")
    return [pk for pk, _ in sorted(rows, key=lambda row: -len(row[1]))]


def set_validation_dispatch(*, validation: SetValidation) -> None:
    """One task per paper on the `sandbox` queue, so the workers check papers in parallel (in `dispatch_order`);
    with the broker down, the validation stays stored and the watchdog queues its papers once the broker answers
    (their lost-work rule)."""
    SetValidation.objects.filter(pk=validation.pk).update(on_workers=True)
    papers = dispatch_order(validation=validation)
    for queued, paper_id in enumerate(papers):

        def refused(exc: Exception, queued: int = queued) -> str:
            return (
                f"the {validation}: the broker refused its papers ({exc}); {queued} of "
                f"{len(papers)} queued, the watchdog queues the others once the broker answers"
            )

        if not enqueue(SET_PAPER_VALIDATE, paper_id, subject=validation, refused=refused):
            return


def set_papers_unfinished() -> list[SetValidationPaper]:
    """Papers of set validations on the workers that have no result yet (the watchdog's to look after)."""
    return list(
        SetValidationPaper.objects.filter(status__in=ACTIVE, validation__status__in=ACTIVE, validation__on_workers=True)
        .select_related("validation")
        .defer("files", "checks")
    )


def set_paper_requeue(paper: SetValidationPaper, *, idle_seconds: float, worker: str = "") -> int:
    """Queue a paper again whose task was lost (no worker holds it, none waits), once the watchdog claimed it."""
    event_record(
        kind=Kind.VALIDATION_REDISPATCHED,
        subject=paper.validation,
        worker=worker,
        items=1,
        detail=f"paper {paper.paper} of the {paper.validation} was {paper.get_status_display().lower()} with no "
        f"queued or running task after {idle_seconds:.0f} s without progress; it was queued again",
    )
    enqueue(
        SET_PAPER_VALIDATE,
        paper.pk,
        subject=paper.validation,
        refused=lambda exc: (
            f"paper {paper.paper} of the {paper.validation} could not be queued again ({exc}); "
            f"the watchdog queues it once the broker answers"
        ),
    )
    return 1


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def set_paper_give_up(*, paper: SetValidationPaper, worker: str = "") -> bool:
    """End a paper the workers lost more than VALIDATION_REDISPATCH_MAX times, as an error of the platform, so its
    validation finishes and a maintainer can start another."""
    lost = (
        f"the workers lost this paper's task {_times(paper.redispatches + 1)} (a broker or worker failure); "
        "nothing is known about it: validate again"
    )
    if not set_paper_error(paper=paper, detail=lost):
        return False
    event_record(
        kind=Kind.VALIDATION_ABANDONED,
        subject=paper.validation,
        worker=worker,
        detail=f"paper {paper.paper} of the {paper.validation}: {lost}",
    )
    return True


def set_paper_run(*, paper: SetValidationPaper, on_check: Callable[[CheckResult], None] | None = None) -> str:
    """Run one paper's sandbox checks, saving each as it finishes; SandboxError propagates (infrastructure)."""
    now = timezone.now()
    SetValidationPaper.objects.filter(pk=paper.pk).update(status=Status.RUNNING, started_at=now, checks=[])
    SetValidation.objects.filter(pk=paper.validation_id, status=Status.PENDING).update(status=Status.RUNNING)
    package = package_load(paper)
    checks: list[dict] = []
    ok = True
    for check in sandbox_checks(
        files=dict(package.files),
        annotated=dict(package.annotated),
        requirements=paper.requirements,
        test_entry_point=paper.test_entry_point,
        mutants=paper.mutants,
        score_min=paper.mutation_score_min,
        judged_runs=settings.SET_VALIDATION_JUDGED_RUNS,
    ):
        checks.append(
            {
                "key": check.key,
                "status": check.status,
                "detail": check.detail[-4000:],
                "duration": check.duration,
                "blocks": check.blocks,
                "result": check.result,
                "warning": check.warning,
            }
        )
        changes: dict = {"checks": checks}
        if check.backend:
            changes["sandbox_backend"] = check.backend
        SetValidationPaper.objects.filter(pk=paper.pk).update(**changes)
        if check.manifest is not None or check.recording is not None:
            _version_task_prepared_store(paper=paper, manifest=check.manifest, recording=check.recording)
        ok = ok and check.status == Status.PASSED
        if on_check is not None:
            on_check(check)
    status = Status.PASSED if ok and len(checks) == paper.checks_total else Status.FAILED
    _paper_finish(paper=paper, status=status)
    return status


def _version_task_prepared_store(*, paper: SetValidationPaper, manifest: dict | None, recording: dict | None) -> None:
    """A draft version's validation records the test manifest and recording of the task it checked (the same
    files), so its runs need not make them (evaluation/preparation.py)."""
    version = paper.validation.version
    if version is None:
        return
    tasks = version.tasks.filter(paper__slug=paper.paper, files=paper.files)
    if manifest is not None:
        tasks.filter(test_manifest__isnull=True).update(test_manifest=manifest)
    if recording is not None:
        tasks.filter(recording__isnull=True).update(recording=recording)


def set_paper_error(*, paper: SetValidationPaper, detail: str) -> bool:
    """The platform failed on this paper (the sandbox after retries, a lost task, a fault of the platform's code):
    an error of the platform, not of the paper, which ends it. False when it had ended already."""
    return _paper_finish(
        paper=paper,
        status=Status.ERROR,
        checks=[
            {
                "key": "infrastructure",
                "status": Status.ERROR,
                "detail": detail,
                "duration": None,
                "blocks": "not run: the platform failed; nothing is known about this paper",
            }
        ],
    )


@transaction.atomic
def _paper_finish(*, paper: SetValidationPaper, status: str, checks: list[dict] | None = None) -> bool:
    changes = {"status": status, "finished_at": timezone.now(), **({"checks": checks} if checks is not None else {})}
    if not SetValidationPaper.objects.filter(pk=paper.pk, status__in=ACTIVE).update(**changes):
        return False  # a copy of its task, or the watchdog, ended it already
    validation = SetValidation.objects.select_for_update().get(pk=paper.validation_id)
    statuses = set(validation.papers.values_list("status", flat=True))
    if statuses & set(ACTIVE):
        return True
    validation.status = (
        Status.ERROR if Status.ERROR in statuses else Status.FAILED if Status.FAILED in statuses else Status.PASSED
    )
    validation.finished_at = timezone.now()
    validation.save(update_fields=["status", "finished_at"])
    return True


def _counted(manifest: dict | None) -> str:
    tests = (manifest or {}).get("tests")
    return f", completing the same {len(tests)} test(s) each time" if tests is not None else ""


def _output(run) -> str:
    if run.result is None:
        return run.verdict.detail
    return (
        f"{run.verdict.detail}\n--- stdout ---\n{run.result.stdout[-3000:]}"
        f"\n--- stderr ---\n{run.result.stderr[-3000:]}"
    )


@dataclass(frozen=True)
class CheckResult:
    """One finished sandbox check of a package (keys as in `checks_plan`)."""

    key: str
    status: str
    detail: str = ""
    duration: float | None = None
    backend: str = ""  # the sandbox backend, given with the requirements check
    blocks: str = ""  # a failure that stops the remaining checks: why they are not run
    manifest: dict | None = None  # with a passed reference check: the tests it completes (FORMAT.md 7.5)
    result: dict | None = None  # what the check measured: the reference's runs, a snippet's mutation score
    warning: str = ""  # worth the author's attention, never a failure (a mutation score below the minimum)
    recording: dict | None = None  # with the first sealing check: the reference's recording (judging/sealed.py)
    tests_made: dict[str, str] | None = None  # files validation added as the package's tests (path -> sha256)


def _reference_check(runs: list[ItemRun], *, test_entry_point: str, started: float) -> CheckResult:
    """The reference's runs as one check: passed only when every run passed and all completed the same tests (the
    passing check carries their manifest)."""
    reference = reference_runs_summary(runs)
    if reference["passed"] < reference["runs"]:
        first = next(i for i, run in enumerate(runs) if run.verdict.status != "passed")
        what = (
            f"flaky: passed {reference['passed']} of {reference['runs']} runs"
            if reference["flaky"]
            else f"failed all {reference['runs']} runs"
        )
        return CheckResult(
            "reference",
            Status.FAILED,
            f"{what}; run {first + 1}: {_output(runs[first])}",
            time.monotonic() - started,
            blocks="not run: the reference must pass every run first",
            result=reference,
        )
    manifests = [run.manifest for run in runs]
    if any(manifest != manifests[0] for manifest in manifests):
        return CheckResult(
            "reference",
            Status.FAILED,
            "the reference's runs did not complete the same tests: "
            + "; ".join(f"run {n}: {sorted((m or {}).get('tests', {}).items())}" for n, m in enumerate(manifests, 1))[
                :3000
            ],
            time.monotonic() - started,
            blocks="not run: the reference must pass the same tests first",
            result=reference,
        )
    return CheckResult(
        "reference",
        Status.PASSED,
        f"python {test_entry_point} passed {reference['runs']} times"
        f"{_counted(manifests[0])}; {_durations_text(reference)}",
        time.monotonic() - started,
        result=reference,
        manifest=manifests[0],
    )


def validation_limits() -> Limits:
    limits = limits_default()
    return type(limits)(**{**limits.__dict__, "wall_seconds": settings.SUBMISSION_TEST_SECONDS})


def sandbox_checks(
    *,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    requirements: str,
    test_entry_point: str,
    mutants: int = 0,
    score_min: float | None = None,
    example_script: str = "",
    paper: str = "this package",
    judged_runs: int = REFERENCE_JUDGED_RUNS,
) -> Iterator[CheckResult]:
    """FORMAT.md section 9 in the sandbox: the requirements install, the reference passes its tests
    SUBMISSION_REFERENCE_RUNS times (a reference passing some runs and failing others is flaky), each snippet is
    sealed (or says why not), its reference passes as an answer in evaluation's judging step `judged_runs` times
    (`judged_checks`), and masked, then replaced by a no-op, makes them fail; with `mutants`, up to that many
    mutants of each snippet's reference body run as answers would, and the share the tests kill is the snippet's
    mutation score (a warning below `score_min`, never a failure). With an `example_script`, its run with the
    reference is recorded too (the "example" check), kept in the recording for the proposed replay tests
    (submissions/proposed.py). A package with no test entry point of its own runs its example script first: the
    tests proposed from that run become its tests (`tests_from_example`), and every other check runs them; `paper`
    names it in their file.

    The one implementation for submissions and for whole problem sets (validate_pset)."""
    env_hash = environment_hash(requirements)
    started = time.monotonic()
    try:
        session = session_for(env_hash, requirements, failures=build_failures)
    except EnvironmentBuildError as exc:
        yield CheckResult(
            "requirements",
            Status.FAILED,
            f"{exc}\n{exc.log[-6000:]}",
            time.monotonic() - started,
            blocks="not run: the requirements must install first",
        )
        return
    yield CheckResult(
        "requirements",
        Status.PASSED,
        session.environment.build_log[-4000:],
        time.monotonic() - started,
        backend=session.backend.name,
    )

    limits = validation_limits()
    test = package_tester(test_entry_point=test_entry_point, requirements=requirements, limits=limits)

    example: dict | None = None
    if test_entry_point not in files:
        made = tests_from_example(
            session=session,
            files=files,
            annotated=annotated,
            script=example_script,
            test_entry_point=test_entry_point,
            paper=paper,
            limits=limits,
        )
        example, made = made.recording, replace(made, recording=None)
        yield made
        if made.blocks or made.tests_made is None:
            return
        files = {**files, **{path: blob_read(sha256=digest) for path, digest in made.tests_made.items()}}

    started = time.monotonic()
    runs = [test(files) for _ in range(settings.SUBMISSION_REFERENCE_RUNS)]
    checked = _reference_check(runs, test_entry_point=test_entry_point, started=started)
    yield checked
    if checked.status != Status.PASSED:
        return
    manifest = checked.manifest

    hidden = package_hidden(files=files, annotated=annotated, test_entry_point=test_entry_point)
    if example_script and example is None:
        check = example_check(
            session=session, files=files, annotated=annotated, script=example_script, hidden=hidden, limits=limits
        )
        example = check.recording
        yield replace(check, recording=None)  # kept with the tests' recording below
    recording: dict | None = None
    for check in sealing_checks(
        session=session,
        files=files,
        annotated=annotated,
        test_entry_point=test_entry_point,
        hidden=hidden,
        limits=limits,
    ):
        if check.recording is not None and example is not None:
            check = replace(check, recording={**check.recording, EXAMPLE_RECORDING: example})
        recording = check.recording or recording
        yield check
    yield from judged_checks(
        session=session,
        files=files,
        annotated=annotated,
        test_entry_point=test_entry_point,
        manifest=manifest,
        recording=recording,
        limits=limits,
        runs=judged_runs,
    )

    yield from variant_checks(files=files, annotated=annotated, test=test)

    if mutants <= 0:
        return
    slowest = max((checked.result or {}).get("durations", []), default=0.0)
    mutant_limits = mutation_limits(limits, slowest=slowest)
    for parsed in annotated.values():
        for s in parsed.snippets:
            yield mutation_check(
                session=session,
                files=files,
                hidden=hidden,
                recording=recording,
                parsed=parsed,
                position=s.index,
                mutants=mutants,
                limits=mutant_limits,
                test=test,
                score_min=score_min,
            )


def package_tester(*, test_entry_point: str, requirements: str, limits: Limits) -> Callable[..., ItemRun]:
    """How validation runs a package's tests on some files (the reference, a variant, a mutant), in the sandbox."""
    env_hash = environment_hash(requirements)

    def test(package_files: dict[str, bytes], run_limits=limits, guard: GuardSpec | None = None) -> ItemRun:
        return package_test(
            files=package_files,
            test_entry_point=test_entry_point,
            environment_hash=env_hash,
            requirements=requirements,
            limits=run_limits,
            failures=build_failures,
            guard=guard,
        )

    return test


def mutation_limits(limits: Limits, *, slowest: float) -> Limits:
    """A mutant's limits: its time limit a multiple of the reference's slowest run (at least MUTATION_MIN_SECONDS)."""
    return type(limits)(
        **{
            **limits.__dict__,
            "wall_seconds": min(
                limits.wall_seconds, max(settings.MUTATION_MIN_SECONDS, settings.MUTATION_TIME_FACTOR * slowest)
            ),
        }
    )


def mutation_check(
    *,
    session,
    files: dict[str, bytes],
    hidden: Iterable[str],
    recording: dict | None,
    parsed: AnnotatedFile,
    position: int,
    mutants: int,
    limits: Limits,
    test: Callable[[dict[str, bytes], Limits, GuardSpec | None], ItemRun],
    score_min: float | None,
) -> CheckResult:
    """One snippet's mutation score: up to `mutants` mutants of its reference body (MUTATION_SEED), each replayed on
    the recorded calls first, the tests (stopping at the first failure) only for those the replay cannot tell apart.
    The one step a validation's process runs per snippet in turn, or a worker runs for one snippet of a revision
    (submissions/mutation_spread.py)."""
    path, s = parsed.path, parsed.snippets[position]
    mutant_guard = GuardSpec(failfast=True)  # a mutant's tests only need to fail once
    started = time.monotonic()
    found = mutants_generate(s.code, limit=mutants, seed=settings.MUTATION_SEED)
    replay = mutant_replayer(
        session=session,
        files=files,
        hidden=hidden,
        recording=recording,
        annotated=parsed,
        position=s.index,
        limits=limits,
    )

    def mutant_test(mutant: Mutant) -> ItemRun:
        spliced = {**files, parsed.path: splice(parsed, s, mutant.body).encode("utf-8")}
        return test(spliced, limits, mutant_guard)

    result = mutation_result(
        mutants_judge(found, replay=replay, test=mutant_test, noop_body=noop(s)),
        seed=settings.MUTATION_SEED,
        limit=mutants,
        time_limit=limits.wall_seconds,
    )
    # The proposed replay tests (submissions/proposed.py) judge a body as the replay does.
    result["proposed"] = proposed_kills(result, sealed=snippet_sealing(recording, snippet_key(path, s.index))[0])
    warning = mutation_warning(name=s.name, score=result["score"], score_min=score_min)
    return CheckResult(
        f"mutation:{path}:{s.index}",
        Status.PASSED,
        mutation_text(result),
        time.monotonic() - started,
        result=result,
        warning=warning,
    )


def variant_checks(
    *,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    test: Callable[[dict[str, bytes], Limits, GuardSpec | None], ItemRun],
    limits: Limits | None = None,
) -> Iterator[CheckResult]:
    """Each snippet masked, then replaced by a no-op: the tests must fail (else they do not cover it). A variant's
    tests stop at their first failing test, which is all the check needs (the rest of its tests would only add
    time); a variant that passes runs every test, as before. The reported category is its first failure's."""
    limits = limits or validation_limits()
    variant_guard = GuardSpec(failfast=True)
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            for kind, text in (("masked", mask(parsed, s)), ("noop", splice(parsed, s, noop(s)))):
                started = time.monotonic()
                run = test({**files, path: text.encode("utf-8")}, limits, variant_guard)
                if run.verdict.status == "passed":
                    yield CheckResult(
                        f"{kind}:{path}:{s.index}",
                        Status.FAILED,
                        f'the tests still pass with "{s.name}" {"masked" if kind == "masked" else "replaced by pass"}:'
                        " they do not cover this snippet",
                        time.monotonic() - started,
                    )
                else:
                    yield CheckResult(
                        f"{kind}:{path}:{s.index}",
                        Status.PASSED,
                        f"failed as it should ({run.verdict.category})",
                        time.monotonic() - started,
                    )


def package_hidden(*, files: dict[str, bytes], annotated: Mapping[str, AnnotatedFile], test_entry_point: str):
    """What a package's answers may not see: its test entry point and every copy of a reference body."""
    return hidden_files(files, visible=set(annotated), annotated=annotated.values(), entry_point=test_entry_point)


def _spans(annotated: Mapping[str, AnnotatedFile]) -> list[SnippetSpan]:
    return [
        SnippetSpan(snippet_key(path, s.index), path, s.start_line, s.end_line)
        for path, parsed in annotated.items()
        for s in parsed.snippets
    ]


def example_check(
    *,
    session,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    script: str,
    hidden: Iterable[str],
    limits,
) -> CheckResult:
    """The example script runs with the reference in place (plain python in the paper's folder, as the tests do),
    then its calls of each snippet's function are recorded and replayed as the tests' are (judging/sealed.py): the
    recording the proposed replay tests are made from, with the check. A script that fails fails the check."""
    started = time.monotonic()
    run = session.run(files=files, command=[session.environment.python, "-B", script], limits=limits)
    if run.exit_code != 0 or run.timed_out:
        why = "ran past its time limit" if run.timed_out else f"exited with status {run.exit_code}"
        return CheckResult(
            "example",
            Status.FAILED,
            f"python {script} {why} with the reference in place: {(run.stderr or run.stdout)[-3000:] or 'no output'}",
            time.monotonic() - started,
        )
    recording = recording_make(
        session=session,
        files=files,
        test_entry_point=script,
        hidden=hidden,
        snippets=_spans(annotated),
        limits=limits,
        store=lambda content: blob_store(content=content).sha256,
    )
    recording["script"] = script
    targets = list(recording["targets"].values())
    recorded = [t for t in targets if t["sealed"]]
    said = [f"{t['qualname']}: {t['calls']} call(s)" for t in recorded]
    said += [f"{t['qualname']}: not recorded ({t['reason'][:300]})" for t in targets if not t["sealed"]]
    warning = (
        ""
        if recorded
        else f"python {script} ran, but no call of a snippet's function could be recorded and replayed: no test is "
        "proposed from it (each function's reason is in the detail)"
    )
    return CheckResult(
        "example",
        Status.PASSED,
        f"python {script} ran with the reference; "
        + (f"{len(recorded)} function(s) recorded for the proposed replay tests" if recorded else "nothing recorded")
        + ("\n" + "\n".join(said) if said else ""),
        time.monotonic() - started,
        result={"script": script, "recorded": [t["qualname"] for t in recorded]},
        warning=warning,
        recording=recording,
    )


def tests_from_example(
    *,
    session,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    script: str,
    test_entry_point: str,
    paper: str,
    limits,
) -> CheckResult:
    """A package without tests of its own: its example script's run with the reference is recorded (`example_check`)
    and the replay tests proposed from it (submissions/proposed.py) become its test entry point, with rcb_replay/
    beside it (its recorded calls, hidden files). The check carries them (`tests_made`, stored) and the example
    recording; it fails, blocking the rest, when there is no script, the script fails, or no call could be recorded."""
    started = time.monotonic()
    missing = tests_missing_problem(files, example_script=script or None, tests_proposed=True)
    if missing:
        return CheckResult("example", Status.FAILED, missing, 0.0, blocks="not run: the package has no tests to run")
    checked = example_check(
        session=session,
        files=files,
        annotated=annotated,
        script=script,
        hidden=package_hidden(files=files, annotated=annotated, test_entry_point=test_entry_point),
        limits=limits,
    )
    blocks = (
        f"not run: the package has no {test_entry_point} of its own, and no tests could be proposed from its example "
        f"script {script}"
    )
    if checked.status != Status.PASSED:
        return replace(checked, blocks=blocks)
    if not (checked.result or {}).get("recorded"):
        return replace(checked, status=Status.FAILED, blocks=blocks, warning="")
    recording = checked.recording or {}
    made = proposed_tests_files(recording=recording, paper=paper, test_file=test_entry_point)
    stored = {path: blob_store(content=data).sha256 for path, data in made.items()}
    return replace(
        checked,
        detail=f"{test_entry_point} was missing, so the tests proposed from your example script are the package's "
        f"tests: {test_entry_point} and {FOLDER}/ were made from the recorded calls of python {script} (proposed "
        f"tests, not yours; download them to read or change them).\n{checked.detail}",
        duration=time.monotonic() - started,
        result={**(checked.result or {}), "tests_made": sorted(stored)},
        recording=recording,
        tests_made=stored,
    )


def sealing_checks(
    *,
    session,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    test_entry_point: str,
    hidden: Iterable[str],
    limits,
) -> Iterator[CheckResult]:
    """Record the reference's calls of each snippet's function and replay the reference alone (what evaluation's
    sealed verdict needs, evaluation/judging/sealed.py): one check per snippet saying whether it is sealed and, if
    not, why (a warning: its answers keep the in-process guard), the recording with the first of them. `hidden`:
    the files a replay's folder leaves out (evaluation.taskfiles.hidden_files)."""
    started = time.monotonic()
    spans = _spans(annotated)
    recording = recording_make(
        session=session,
        files=files,
        test_entry_point=test_entry_point,
        hidden=hidden,
        snippets=spans,
        limits=limits,
        store=lambda content: blob_store(content=content).sha256,
    )
    each = (time.monotonic() - started) / max(1, len(spans))
    first = True
    for span in spans:
        sealing = recording["snippets"][span.key]
        target = recording["targets"].get(sealing["target"] or "", {})
        if sealing["sealed"]:
            detail = f"sealed: {target['calls']} recorded call(s) of {target['qualname']} replay as recorded"
        else:
            detail = f"unsealed: {sealing['reason']}"
        yield CheckResult(
            f"sealed:{span.file}:{span.key.rsplit('#', 1)[1]}",
            Status.PASSED,
            detail[:2000],
            each,
            result={"sealed": sealing["sealed"], "reason": sealing["reason"], "target": sealing["target"]},
            warning=""
            if sealing["sealed"]
            else f"not sealed ({sealing['reason'][:300]}): its answers keep the in-process guard only; "
            + unsealed_advice(sealing["reason"]),
            recording=recording if first else None,
        )
        first = False


# What would seal a snippet, by the start of the reason it is not (recording_make's, or snippet_target's when no
# function can be replayed); any other reason gets the general advice of unsealed_advice.
UNSEALED_ADVICE = (
    (
        "the reference's own replay differs",
        "its function, called alone on its recorded arguments, does not return what it did in the tests: it reads or "
        "changes state its arguments do not carry (a global, a file, a class attribute), or an argument does not "
        "come back whole from pickling; passing that state as an argument would seal it",
    ),
    ("nondeterministic", "two runs of the tests differ: seeding what its function draws from would seal it"),
    # snippet_target's reasons: no test can seal such a snippet, only moving its code can.
    ("no function holds it", "moving its code into a function of its own, called by the tests, would seal it"),
    (
        "its function ",
        "moving its code into a plain function at module level or a method, called by the tests, would seal it",
    ),
    ("its recorded outputs pass", "a test whose calls return smaller values would seal it"),
    ("its recorded inputs would pass", "a test that calls its function with smaller arguments would seal it"),
)


def unsealed_advice(reason: str) -> str:
    """What the author could change so that the snippet is sealed, for the reason it is not."""
    for start, advice in UNSEALED_ADVICE:
        if reason.startswith(start):
            return advice
    return "a test that calls its function with plain arguments would seal it"


def findings_text(findings) -> str:
    """Every finding of a verdict on a line of its own: where, the rule, what (and, for a note, that it is one)."""
    lines = []
    for f in findings:
        where = f"line {f['line']}" if f.get("line") else "the answer"
        rule = f.get("rule") or f.get("kind") or "finding"
        note = f" ({f['note']})" if f.get("note") else ""
        lines.append(f"{where}: [{rule}, {f.get('source', 'static')}] {f.get('detail', '')}{note}")
    return "\n".join(lines)


def judged_checks(
    *,
    session,
    files: dict[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    test_entry_point: str,
    manifest: dict | None,
    recording: dict | None,
    limits,
    runs: int = REFERENCE_JUDGED_RUNS,
) -> Iterator[CheckResult]:
    """Each snippet's reference, spliced in as an answer, judged by the step that judges a model's answer (the answer
    policy, the runtime guard, the sealed replay on `recording`), `runs` times on this backend: it
    fails when any run is not a pass (a flag included) or the runs' verdicts differ, since evaluation would then
    score the author's own code as wrong or as suspect. Every finding is shown, line by line, with its rule."""
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point=test_entry_point)
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            started = time.monotonic()
            verdicts = [
                package_answer_verdict(
                    session=session,
                    files=files,
                    annotated=parsed,
                    position=s.index,
                    code=s.code,
                    test_entry_point=test_entry_point,
                    hidden=hidden,
                    manifest=manifest,
                    recording=recording,
                    limits=limits,
                ).verdict
                for _ in range(runs)
            ]
            status, detail = reference_judgement(s.name, verdicts)
            yield CheckResult(
                f"judged:{path}:{s.index}",
                status,
                detail[:4000],
                time.monotonic() - started,
                result={
                    "runs": [
                        {"status": v.status, "category": v.category, "findings": list(v.findings)} for v in verdicts
                    ]
                },
            )


def reference_judgement(name: str, runs: list[Verdict]) -> tuple[str, str]:
    """A snippet's reference judged as an answer `runs` times: failed, with the reasons, when a run is not a pass
    (a flag included) or the runs disagree (status, category or findings); every run's findings listed by line."""
    reasons = [
        f"run {n}: {v.status}" + (f" ({v.detail[:600]})" if v.detail else "")
        for n, v in enumerate(runs, 1)
        if v.status != "passed"
    ]
    if len({(v.status, v.category, _finding_keys(v.findings)) for v in runs}) > 1:
        reasons.insert(
            0,
            "its verdict changed between runs of the same code: "
            + "; ".join(
                f"run {n}: {v.status}, {v.category}, {len(v.findings)} finding(s)" for n, v in enumerate(runs, 1)
            ),
        )
    listed = "\n".join(f"run {n} findings:\n{findings_text(v.findings)}" for n, v in enumerate(runs, 1) if v.findings)
    if reasons:
        detail = f'evaluation would not pass the reference of "{name}": ' + "\n".join(reasons)
        return Status.FAILED, detail + (f"\n{listed}" if listed else "")
    detail = f"judged as an answer {len(runs)} times: passed each time"
    return Status.PASSED, detail + (f"; its findings, kept as notes:\n{listed}" if listed else ", no finding")


def _finding_keys(findings) -> tuple:
    return tuple(sorted((str(f.get("kind")), str(f.get("line")), str(f.get("source"))) for f in findings))


def mutation_warning(*, name: str, score: float | None, score_min: float | None) -> str:
    """Why a snippet's mutation score needs the author's attention, or "": a score of 0 (the tests reject no wrong
    body) whatever the minimum, or one below the minimum."""
    if score is None:
        return ""
    if score_min is not None and score < score_min:
        return (
            f'mutation score {score:.0%} of "{name}" is below the minimum {score_min:.0%}: '
            "add a test that fails for the surviving mutants"
        )
    if score == 0:  # a minimum of 0 (or none) still never makes "no wrong body rejected" a pass
        return f'mutation score {score:.0%} of "{name}": its tests reject none of its mutants; add a test that does'
    return ""


def reference_runs_summary(runs) -> dict:
    """The reference's repeated runs: how many passed, flaky when some passed and some failed, and the spread of
    their durations (what the backend timed), so a time limit too tight for the slowest run shows."""
    durations = [round(run.result.duration, 3) for run in runs if run.result is not None]
    passed = sum(run.verdict.status == "passed" for run in runs)
    return {
        "runs": len(runs),
        "passed": passed,
        "flaky": 0 < passed < len(runs),
        "durations": durations,
        "spread": round(max(durations) - min(durations), 3) if durations else None,
    }


def _durations_text(reference: dict) -> str:
    durations = reference["durations"]
    if not durations:
        return "no durations measured"
    return (
        f"durations {min(durations):.2f}-{max(durations):.2f} s (spread {reference['spread']:.2f} s; time limit "
        f"{settings.SUBMISSION_TEST_SECONDS:g} s)"
    )


def mutation_text(result: dict) -> str:
    """A snippet's mutation score in words: what killed each mutant (the replay or the tests), each surviving
    mutant as a one-line diff, and the equivalent ones apart (never counted)."""
    if not result["generated"]:
        return "no mutants: the body offers no mutation site (or does not parse on its own)"
    counted = result.get("counted", result["generated"])
    by = result.get("killed_by") or {}
    score = f"score {result['score']:.0%}" if result["score"] is not None else "no score: every mutant is equivalent"
    lines = [
        f"{result['killed']} of {counted} mutants killed ({score})"
        + (
            f": {by.get('replay', 0)} by the sealed replay of recorded calls (before the tests ran), "
            f"{by.get('tests', 0)} needed the tests"
            if by
            else ""
        )
        + (f", {len(result['timeouts'])} by the time limit ({result['time_limit']:g} s)" if result["timeouts"] else "")
    ]
    if result.get("equivalent"):
        lines.append(
            f"{result['equivalent']} more equivalent on the recorded inputs (not counted): they agree with the "
            "reference on every recorded call and pass the tests"
        )
    if "mutants" in result:
        lines += [f"{OUTCOME_WORDS[m['outcome'], m['by']]}: {m['diff']}" for m in result["mutants"]]
    else:  # a score measured before each mutant's outcome was kept
        lines += [f"survived: {diff}" for diff in result["survivors"]]
        lines += [f"timed out: {diff}" for diff in result["timeouts"]]
    proposed = result.get("proposed")
    if proposed and proposed.get("score") is not None:
        lines.append(
            f"the proposed replay tests kill {proposed['killed']} of {counted} (score {proposed['score']:.0%}, "
            "within the tolerances their file states per dtype)"
        )
        lines += [f"only your tests kill: {diff}" for diff in proposed["only_tests"]]
        lines += [f"only the proposed tests kill: {diff}" for diff in proposed.get("only_proposed", [])]
    return "\n".join(lines)
