"""Whole problem sets checked as submissions are (FORMAT.md section 9): a folder (`validate_pset`) or a draft
version's tasks (its page), one Celery task per paper on the `sandbox` queue, or paper by paper inline.

Every check goes through `sandbox_checks`, the submissions' own validation code, so the untrusted tests of a set
run only in the sandbox, as a submission's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from benchmarks.paper2code import mask, noop, parse, splice
from benchmarks.paper2code.pset import PaperPackage
from benchmarks.selectors import blob_read, user_is_maintainer
from benchmarks.services import blob_store, environment_hash
from evaluation.executor import limits_default, package_test, session_for
from evaluation.sandbox import EnvironmentBuildError
from submissions.models import SetValidation, SetValidationPaper

Status = SetValidation.Status
ACTIVE = [Status.PENDING, Status.RUNNING]


def _paper_row(*, validation: SetValidation, position: int, paper: str, files: dict[str, str],
               annotated_paths: Iterable[str], requirements: str, test_entry_point: str,
               snippets: list[dict]) -> SetValidationPaper:
    return SetValidationPaper(validation=validation, position=position, paper=paper, files=files,
                              annotated_paths=list(annotated_paths), requirements=requirements,
                              test_entry_point=test_entry_point, snippets=snippets)


@transaction.atomic
def pset_validation_create(*, packages: list[PaperPackage], source: str, environment: str | None = None,
                           actor=None) -> SetValidation:
    """A validation of problem-set packages read from a folder; their files go to storage, where workers read them.
    `environment`: requirements every paper runs in instead of its own (a legacy shared environment)."""
    validation = SetValidation.objects.create(source=source[:500], started_by=actor)
    rows = []
    for position, package in enumerate(packages):
        files = {path: blob_store(content=data).sha256 for path, data in sorted(package.files.items())}
        snippets = [{"file": path, "index": s.index, "name": s.name}
                    for path in package.annotated_paths for s in package.annotated[path].snippets]
        rows.append(_paper_row(validation=validation, position=position, paper=package.id, files=files,
                               annotated_paths=package.annotated_paths, test_entry_point=package.test_entry_point,
                               requirements=package.requirements if environment is None else environment,
                               snippets=snippets))
    SetValidationPaper.objects.bulk_create(rows)
    return validation


def version_validation_start(*, version: BenchmarkVersion, actor) -> SetValidation:
    """A maintainer validates a draft version's tasks on the workers: one validation at a time per version."""
    if actor is None or not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers may validate a version")
    try:
        with transaction.atomic():
            version = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
            if version.is_frozen:
                raise ValueError(f"version {version.name} is {version.status}; only drafts are validated here")
            running = version.validations.filter(status__in=ACTIVE).first()
            if running is not None:
                raise ValueError(f"a validation of {version.name} is already running (started "
                                 f"{running.created_at:%Y-%m-%d %H:%M} UTC); wait for it to finish")
            tasks = list(version.tasks.select_related("paper").order_by("paper__slug"))
            if not tasks:
                raise ValueError(f"version {version.name} has no tasks to validate")
            validation = SetValidation.objects.create(version=version, source=f"version {version.name}",
                                                      started_by=actor)
            rows = []
            for position, task in enumerate(tasks):
                order = {path: i for i, path in enumerate(task.annotated_paths)}
                snippets = sorted(task.snippets.values_list("file_path", "position", "name"),
                                  key=lambda s: (order.get(s[0], len(order)), s[1]))
                rows.append(_paper_row(
                    validation=validation, position=position, paper=task.paper.slug, files=task.files,
                    annotated_paths=task.annotated_paths, requirements=task.requirements,
                    test_entry_point=task.test_entry_point,
                    snippets=[{"file": f, "index": i, "name": n} for f, i, n in snippets]))
            SetValidationPaper.objects.bulk_create(rows)
            transaction.on_commit(lambda: set_validation_dispatch(validation=validation))
    except IntegrityError as exc:  # two maintainers at once: the constraint keeps it to one
        raise ValueError(f"a validation of {version.name} is already running; wait for it to finish") from exc
    return validation


def set_validation_dispatch(*, validation: SetValidation) -> None:
    """One task per paper on the `sandbox` queue, so the workers check papers in parallel."""
    from submissions.tasks import set_paper_validate

    SetValidation.objects.filter(pk=validation.pk).update(on_workers=True)
    for paper_id in validation.papers.values_list("pk", flat=True):
        set_paper_validate.delay(paper_id)


def set_papers_unfinished() -> list[SetValidationPaper]:
    """Papers of set validations on the workers that have no result yet (the watchdog's to look after)."""
    return list(SetValidationPaper.objects.filter(status__in=ACTIVE, validation__status__in=ACTIVE,
                                                  validation__on_workers=True)
                .select_related("validation").defer("files", "checks"))


def set_paper_redispatch_lost(*, paper: SetValidationPaper, idle_seconds: float, worker: str = "") -> int:
    """Queue a paper again whose task was lost (no worker holds it, none waits); one watchdog wins."""
    from evaluation import services as evaluation_services
    from evaluation.models import OperationsEvent
    from submissions.tasks import set_paper_validate

    claimed = SetValidationPaper.objects.filter(pk=paper.pk, status__in=ACTIVE, redispatched_at=paper.redispatched_at)
    if not claimed.update(redispatched_at=timezone.now(), redispatches=F("redispatches") + 1):
        return 0
    evaluation_services.event_record(
        kind=OperationsEvent.Kind.VALIDATION_REDISPATCHED, set_validation=paper.validation, worker=worker, items=1,
        detail=f"paper {paper.paper} of the {paper.validation} was {paper.get_status_display().lower()} with no "
               f"queued or running task after {idle_seconds:.0f} s without progress; it was queued again")
    set_paper_validate.delay(paper.pk)
    return 1


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def set_paper_give_up(*, paper: SetValidationPaper, worker: str = "") -> bool:
    """End a paper the workers lost more than VALIDATION_REDISPATCH_MAX times, as an error of the platform, so its
    validation finishes and a maintainer can start another."""
    from evaluation import services as evaluation_services
    from evaluation.models import OperationsEvent

    lost = (f"the workers lost this paper's task {_times(paper.redispatches + 1)} (a broker or worker failure); "
            "nothing is known about it: validate again")
    if not set_paper_error(paper=paper, detail=lost):
        return False
    evaluation_services.event_record(kind=OperationsEvent.Kind.VALIDATION_ABANDONED, set_validation=paper.validation,
                                     worker=worker, detail=f"paper {paper.paper} of the {paper.validation}: {lost}")
    return True


def set_paper_run(*, paper: SetValidationPaper, on_check: Callable[[CheckResult], None] | None = None) -> str:
    """Run one paper's sandbox checks, saving each as it finishes; SandboxError propagates (infrastructure)."""
    now = timezone.now()
    SetValidationPaper.objects.filter(pk=paper.pk).update(status=Status.RUNNING, started_at=now, checks=[])
    SetValidation.objects.filter(pk=paper.validation_id, status=Status.PENDING).update(status=Status.RUNNING)
    files = {path: blob_read(sha256=digest) for path, digest in paper.files.items()}
    annotated = {path: parse(files[path].decode("utf-8", "replace"), path) for path in paper.annotated_paths}
    checks: list[dict] = []
    ok = True
    for check in sandbox_checks(files=files, annotated=annotated, requirements=paper.requirements,
                                test_entry_point=paper.test_entry_point):
        checks.append({"key": check.key, "status": check.status, "detail": check.detail[-4000:],
                       "duration": check.duration, "blocks": check.blocks})
        changes: dict = {"checks": checks}
        if check.backend:
            changes["sandbox_backend"] = check.backend
        SetValidationPaper.objects.filter(pk=paper.pk).update(**changes)
        if check.manifest is not None:
            _version_task_manifest_store(paper=paper, manifest=check.manifest)
        ok = ok and check.status == Status.PASSED
        if on_check is not None:
            on_check(check)
    status = Status.PASSED if ok and len(checks) == paper.checks_total else Status.FAILED
    _paper_finish(paper=paper, status=status)
    return status


def _version_task_manifest_store(*, paper: SetValidationPaper, manifest: dict) -> None:
    """A draft version's validation records the test manifest of the task it checked (the same files)."""
    version = paper.validation.version
    if version is not None:
        version.tasks.filter(paper__slug=paper.paper, files=paper.files, test_manifest__isnull=True).update(
            test_manifest=manifest)


def set_paper_error(*, paper: SetValidationPaper, detail: str) -> bool:
    """The platform failed on this paper (the sandbox after retries, a lost task, a fault of the platform's code):
    an error of the platform, not of the paper, which ends it. False when it had ended already."""
    return _paper_finish(paper=paper, status=Status.ERROR, checks=[{
        "key": "infrastructure", "status": Status.ERROR, "detail": detail, "duration": None,
        "blocks": "not run: the platform failed; nothing is known about this paper"}])


@transaction.atomic
def _paper_finish(*, paper: SetValidationPaper, status: str, checks: list[dict] | None = None) -> bool:
    changes = {"status": status, "finished_at": timezone.now(), **({"checks": checks} if checks is not None else {})}
    if not SetValidationPaper.objects.filter(pk=paper.pk, status__in=ACTIVE).update(**changes):
        return False  # a copy of its task, or the watchdog, ended it already
    validation = SetValidation.objects.select_for_update().get(pk=paper.validation_id)
    statuses = set(validation.papers.values_list("status", flat=True))
    if statuses & set(ACTIVE):
        return True
    validation.status = (Status.ERROR if Status.ERROR in statuses else
                         Status.FAILED if Status.FAILED in statuses else Status.PASSED)
    validation.finished_at = timezone.now()
    validation.save(update_fields=["status", "finished_at"])
    return True


def _counted(manifest: dict | None) -> str:
    tests = (manifest or {}).get("tests")
    return f", completing the same {len(tests)} test(s) each time" if tests is not None else ""


def _output(run) -> str:
    if run.result is None:
        return run.verdict.detail
    return f"{run.verdict.detail}\n--- stdout ---\n{run.result.stdout[-3000:]}\n--- stderr ---\n{run.result.stderr[-3000:]}"


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


def sandbox_checks(*, files: dict[str, bytes], annotated: dict, requirements: str,
                   test_entry_point: str) -> Iterator[CheckResult]:
    """FORMAT.md section 9 in the sandbox: the requirements install, the reference passes its tests
    SUBMISSION_REFERENCE_RUNS times, and each snippet masked, then replaced by a no-op, makes them fail.

    The one implementation for submissions and for whole problem sets (validate_pset)."""
    env_hash = environment_hash(requirements)
    started = time.monotonic()
    try:
        session = session_for(env_hash, requirements)
    except EnvironmentBuildError as exc:
        yield CheckResult("requirements", Status.FAILED, f"{exc}\n{exc.log[-6000:]}", time.monotonic() - started,
                          blocks="not run: the requirements must install first")
        return
    yield CheckResult("requirements", Status.PASSED, session.environment.build_log[-4000:],
                      time.monotonic() - started, backend=session.backend.name)

    limits = limits_default()
    limits = type(limits)(**{**limits.__dict__, "wall_seconds": settings.SUBMISSION_TEST_SECONDS})

    def test(package_files: dict[str, bytes]):
        return package_test(files=package_files, test_entry_point=test_entry_point,
                            environment_hash=env_hash, requirements=requirements, limits=limits)

    started = time.monotonic()
    manifests = []
    for attempt in range(1, settings.SUBMISSION_REFERENCE_RUNS + 1):
        run = test(files)
        if run.verdict.status != "passed":
            yield CheckResult("reference", Status.FAILED, f"run {attempt} failed: {_output(run)}",
                              time.monotonic() - started, blocks="not run: the reference must pass first")
            return
        manifests.append(run.manifest)
    if any(manifest != manifests[0] for manifest in manifests):
        yield CheckResult("reference", Status.FAILED, "the reference's runs did not complete the same tests: "
                          + "; ".join(f"run {n}: {sorted((m or {}).get('tests', {}).items())}"
                                      for n, m in enumerate(manifests, 1))[:3000],
                          time.monotonic() - started, blocks="not run: the reference must pass the same tests first")
        return
    yield CheckResult("reference", Status.PASSED, f"python {test_entry_point} passed "
                      f"{settings.SUBMISSION_REFERENCE_RUNS} times{_counted(manifests[0])}",
                      time.monotonic() - started, manifest=manifests[0])

    for path, parsed in annotated.items():
        for s in parsed.snippets:
            for kind, text in (("masked", mask(parsed, s)), ("noop", splice(parsed, s, noop(s)))):
                started = time.monotonic()
                run = test({**files, path: text.encode("utf-8")})
                if run.verdict.status == "passed":
                    yield CheckResult(
                        f"{kind}:{path}:{s.index}", Status.FAILED,
                        f'the tests still pass with "{s.name}" {"masked" if kind == "masked" else "replaced by pass"}:'
                        " they do not cover this snippet", time.monotonic() - started)
                else:
                    yield CheckResult(f"{kind}:{path}:{s.index}", Status.PASSED,
                                      f"failed as it should ({run.verdict.category})", time.monotonic() - started)
