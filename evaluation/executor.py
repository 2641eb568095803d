"""Run one item in the sandbox: splice the answer, run the tests under the harness, classify the outcome.

A worker process keeps its backend and one session per environment warm across items.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Protocol

from django.conf import settings
from django.db.models import Max

from benchmarks.models import BenchmarkVersion, Snippet, Task
from benchmarks.paper2code import AnnotatedFile, PackageError, splice
from benchmarks.paper2code.requirements import requirements_vetted
from benchmarks.services.blobs import blob_store
from common.text import storable
from evaluation.audit import answer_audit
from evaluation.judging.sealed import Replay, SnippetSpan, answer_replay, recording_make, snippet_key
from evaluation.judging.verdict import sealed_verdict, tests_verdict
from evaluation.outcomes import Verdict, manifest_made, outcome_classify, runtime_findings
from evaluation.taskfiles import blob_cached, task_annotated, task_files, task_hidden_files
from sandbox import EnvironmentBuildError, ExecResult, Limits, SandboxBackend, SandboxError, Session, backend_get
from sandbox.forkserver import ForkingSession, ZygoteStart, helper_calls, preload_modules
from sandbox.harness import (
    GuardSpec,
    answer_span,
    harness_command,
    harness_files,
    harness_verdict,
    nonce_new,
)

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_backend: SandboxBackend | None = None
_sessions: dict[str, Session] = {}
_locks: dict[str, dict] = {}  # environment hash -> what it held when this worker first used it
_announced: dict[str, set[int]] = {}  # environment hash -> tasks whose imports its session was told of
# (task content, environment, backend, blob cache) -> the recording made for it here, its blobs in that cache: a
# task revision's is the same wherever it is stored (a task imported again under another id or release).
_recordings: dict[tuple[str, str, str, str], dict] = {}


def limits_default() -> Limits:
    return Limits(
        wall_seconds=settings.SANDBOX_WALL_SECONDS,
        memory_bytes=settings.SANDBOX_MEMORY_MB * 1024 * 1024,
        processes=settings.SANDBOX_PROCESSES,
        cpus=settings.SANDBOX_CPUS,
        output_bytes=settings.SANDBOX_OUTPUT_KB * 1024,
        disk_bytes=settings.SANDBOX_DISK_MB * 1024 * 1024,
    )


def limits_for_release(version: BenchmarkVersion) -> Limits:
    """This worker's limits with the release's own time, memory and CPU limits, which a run on it must use."""
    limits = limits_default()
    return replace(
        limits,
        wall_seconds=float(version.time_limit_seconds or limits.wall_seconds),
        memory_bytes=version.memory_mb * 1024 * 1024 if version.memory_mb else limits.memory_bytes,
        cpus=version.cpus or limits.cpus,
    )


def backend_current() -> SandboxBackend:
    global _backend
    with _lock:
        if _backend is None:
            _backend = backend_get()
            if _backend.unsafe:
                logger.warning(
                    "sandbox backend %s isolates NOTHING: untrusted code runs as this worker's user on "
                    "this host; set SANDBOX_BACKEND=docker or bwrap outside development",
                    _backend.name,
                )
            _orphans_remove(_backend)
        return _backend


def _orphans_remove(backend: SandboxBackend) -> None:
    """Once per worker process: sandboxes of a worker killed mid-run would otherwise stay on the engine."""
    longest = BenchmarkVersion.objects.aggregate(longest=Max("time_limit_seconds"))["longest"] or 0
    try:
        removed = backend.orphans_remove(older_than=max(settings.SANDBOX_WALL_SECONDS, longest) + 60)
    except SandboxError as exc:
        logger.warning("could not look for orphaned sandboxes: %s", exc)
        return
    if removed:
        logger.info("removed %d orphaned sandbox(es)", removed)


class BuildFailures(Protocol):
    """Where failed builds are remembered (evaluation/environments.py keeps them in the database)."""

    def remembered(self, env_hash: str): ...  # the failure (message, failed_at, log) or None

    def failed(self, *, env_hash: str, requirements: str, backend: str, message: str, log: str) -> None: ...


def session_for(task_environment_hash: str, requirements: str, *, failures: BuildFailures | None = None) -> Session:
    """The warm session of this environment, building the environment the first time (EnvironmentBuildError).

    With `failures`, a failed build is reported to it (with its log) and one it remembers is not built again: until
    a maintainer retries it from the operations page, items needing the environment fail at once. The sandbox layer
    only reports; the caller's `failures` keeps them.
    """
    backend = backend_current()
    with _lock:
        session = _sessions.get(task_environment_hash)
        if session is not None and not backend.environment_kept(env_hash=task_environment_hash):
            session.close()  # the clean-up removed it since: build it again
            session = None
        if session is None:
            requirements = requirements_for_pip(requirements)
            failure = failures.remembered(task_environment_hash) if failures is not None else None
            if failure is not None:
                raise EnvironmentBuildError(
                    f"{failure.message} (failed on {failure.failed_at:%Y-%m-%d %H:%M} UTC and remembered; "
                    "a maintainer can retry it on the operations page)",
                    failure.log,
                )
            try:
                environment = backend.environment_build(env_hash=task_environment_hash, requirements=requirements)
            except EnvironmentBuildError as exc:
                if failures is not None:
                    failures.failed(
                        env_hash=task_environment_hash,
                        requirements=requirements,
                        backend=backend.name,
                        message=str(exc),
                        log=exc.log,
                    )
                raise
            lock = backend.environment_lock(environment)  # before caching: a failure here leaves no lockless session
            session = _sessions[task_environment_hash] = backend.session_open(environment)
            _locks[task_environment_hash] = lock
        backend.environment_used(env_hash=task_environment_hash)
        return session


def requirements_for_pip(requirements: str) -> str:
    """The last line of defence of the requirements policy: only vetted, canonical lines ever reach pip."""
    try:
        return requirements_vetted(requirements)
    except PackageError as exc:
        raise EnvironmentBuildError(f"requirements refused: {exc.problems[0]}", str(exc)) from exc


def sessions_close() -> None:
    with _lock:
        for session in _sessions.values():
            session.close()
        _sessions.clear()
        _locks.clear()
        _announced.clear()


def backend_use(backend: SandboxBackend | None) -> None:
    """Make `backend` the one this process runs items on, closing the sessions of the one before; None: the one
    SANDBOX_BACKEND names, chosen at the next use. For tests and tools that hold a backend of their own."""
    global _backend
    sessions_close()
    with _lock:
        _backend = backend


@dataclass(frozen=True)
class ItemRun:
    verdict: Verdict
    result: ExecResult | None
    backend: str
    limits: Limits | None = None  # None: refused before it ran
    environment_lock: dict | None = None
    # The tests this run completed, as a manifest (FORMAT.md 7.5), when it passed: a reference's run makes its task's.
    manifest: dict | None = None
    forked: bool | None = None  # in a fork of the warm fork server, or cold although it is on; None: there is none
    fork_starts: tuple[ZygoteStart, ...] = ()  # the fork server starts this item caused, with their reasons
    fork_cold: str = ""  # why this item turned the environment's fork server off for good


def package_test(
    *,
    files: dict[str, bytes],
    test_entry_point: str,
    environment_hash: str,
    requirements: str,
    limits: Limits | None = None,
    failures: BuildFailures | None = None,
    guard: GuardSpec | None = None,
) -> ItemRun:
    """Run a package's own test entry point under the harness in the sandbox and classify what happened."""
    session = session_for(environment_hash, requirements, failures=failures)
    return harness_run(session=session, files=files, test_entry_point=test_entry_point, limits=limits, guard=guard)


def harness_run(
    *,
    session: Session,
    files: dict[str, bytes],
    test_entry_point: str,
    limits: Limits | None = None,
    guard: GuardSpec | None = None,
    static_findings: list[dict] | None = None,
    manifest: dict | None = None,
    replay: Callable[[], Replay] | None = None,
) -> ItemRun:
    """One run under the harness: classify it against the task's test `manifest` (None: a reference's own run), and
    flag it when the audit found anything (static or runtime); with `replay`, an answer whose tests passed is also
    replayed alone and judged by the sealed verdict (judging.sealed_verdict)."""
    nonce = nonce_new()
    limits = limits or limits_default()
    before = _fork_state(session)
    result = session.run(
        files={**files, **harness_files(nonce)},
        command=harness_command(session.environment.python, test_entry_point, guard),
        limits=limits,
    )
    harness = harness_verdict(result.stdout, nonce)
    result = replace(result, stdout=harness.stdout)  # its status line is the harness's, not the test's output
    classified = outcome_classify(result=result, harness=harness, manifest=manifest)
    findings = [*(static_findings or []), *runtime_findings(harness.records)]
    if replay is not None and classified.status == "passed":
        verdict = sealed_verdict(classified, findings, replay())
    else:
        verdict = tests_verdict(classified, findings)
    events = _fork_events(session, before)
    fork = {"forked": result.forked, **events} if events else {}
    return ItemRun(
        verdict,
        result,
        session.backend.name,
        limits,
        _locks.get(session.environment.hash),
        manifest_made(harness) if verdict.status == "passed" else None,
        **fork,
    )


def answer_test(
    *,
    session: Session,
    files: dict[str, bytes],
    annotated: AnnotatedFile,
    position: int,
    code: str,
    test_entry_point: str,
    hidden_files: Iterable[str],
    limits: Limits | None = None,
    static_audit: bool = True,
    manifest: dict | None = None,
    recording: dict | None = None,
    load: Callable[[str], bytes] = blob_cached,
) -> ItemRun:
    """Splice `code` as the body of the snippet at `position` of `annotated` and test it against the task's test
    `manifest`, audited twice: statically here, and at run time by the harness's guard on the answer's own lines.
    Without a manifest (a task imported before there were manifests), it is made from the reference first. With the
    task's `recording` (judging/sealed.py), an answer whose tests pass is replayed alone on its snippet's recorded
    calls: a sealed snippet's verdict needs both."""
    if manifest is None:
        manifest = reference_manifest(session=session, files=files, test_entry_point=test_entry_point, limits=limits)
    marked = annotated.snippets[position]
    spliced = splice(annotated, marked, code)
    first, last = answer_span(marked.start_line, code)
    hidden = sorted(hidden_files)
    modules = tuple(sorted({PurePosixPath(path).stem for path in hidden if path.endswith(".py")}))
    answered = {**files, annotated.path: spliced.encode("utf-8")}
    guard = GuardSpec(
        answer_file=annotated.path,
        first_line=first,
        last_line=last,
        hidden_modules=modules,
        hidden_files=tuple(hidden),
        imports=tuple(preload_modules(answered, answer=(annotated.path, first, last))),
    )
    # The policy's context: the task's own files (the hidden ones are left out), the answer's file as spliced.
    context = {path: data.decode("utf-8", "replace") for path, data in files.items() if path.endswith(".py")}
    context[annotated.path] = spliced
    static = (
        [
            f.as_dict()
            for f in answer_audit(
                source=spliced,
                first_line=first,
                last_line=last,
                hidden_modules=modules,
                hidden_files=hidden,
                context_sources=context,
            )
        ]
        if static_audit
        else []
    )
    replay = None
    if recording is not None:

        def replay() -> Replay:
            return answer_replay(
                session=session,
                files=answered,
                hidden=hidden,
                recording=recording,
                key=snippet_key(annotated.path, position),
                limits=limits or limits_default(),
                load=load,
                answer=(first, last),
            )

    return harness_run(
        session=session,
        files=answered,
        test_entry_point=test_entry_point,
        limits=limits,
        guard=guard,
        static_findings=static,
        manifest=manifest,
        replay=replay,
    )


# A task whose reference does not pass now has no manifest to give: every test an answer runs must pass, no skip.
MANIFEST_STRICT = {"runner": "strict"}


def reference_manifest(
    *, session: Session, files: dict[str, bytes], test_entry_point: str, limits: Limits | None = None
) -> dict:
    """The test manifest of a package: what its reference (the files as they are) completes under the harness."""
    run = harness_run(session=session, files=files, test_entry_point=test_entry_point, limits=limits)
    return run.manifest or MANIFEST_STRICT


def task_manifest(*, task: Task, session: Session, limits: Limits | None = None) -> dict:
    """The task revision's test manifest; one made before (validation, import) or, the first time, from its
    reference now, stored (FORMAT.md 7.5: tasks imported before manifests existed get theirs on first use)."""
    if task.test_manifest is not None:
        return task.test_manifest
    return _task_reference_run(task=task, session=session, limits=limits).manifest or MANIFEST_STRICT


def _task_reference_run(*, task: Task, session: Session, limits: Limits | None) -> ItemRun:
    """Run the task's reference under the harness and store the manifest it makes; none is stored when it fails
    (a broken environment may pass next time)."""
    run = harness_run(session=session, files=task_files(task), test_entry_point=task.test_entry_point, limits=limits)
    if run.manifest is not None:
        Task.objects.filter(pk=task.pk, test_manifest__isnull=True).update(test_manifest=storable(run.manifest))
        task.test_manifest = run.manifest
    return run


def task_prepare(*, task: Task, limits: Limits | None = None, failures: BuildFailures | None = None) -> str:
    """Make and store the task revision's test manifest and recording now (a release's import, validation or
    publish, on a worker), so no run makes them on its first item: '' when both exist, else why they cannot be made
    (EnvironmentBuildError and SandboxError propagate: infrastructure)."""
    limits = replace(limits or limits_default(), gpu=task.needs_gpu)
    if task.test_manifest is not None and task.recording is not None:
        return ""
    session = session_for(task.environment_hash, task.requirements, failures=failures)
    release_preloads_announce(session=session, task=task)
    if task.test_manifest is None:
        run = _task_reference_run(task=task, session=session, limits=limits)
        if run.manifest is None:
            return f"its reference does not pass its own tests: {run.verdict.detail}"[:2000]
    task_recording(task=task, session=session, limits=limits)
    return ""


def task_recording(*, task: Task, session: Session, limits: Limits | None = None) -> dict | None:
    """The task revision's recording of its snippets' calls (judging/sealed.py), made with its manifest the first
    time and stored; None when its reference does not pass (nothing can be sealed on a failing reference)."""
    if task.recording is not None:
        return task.recording
    if task.test_manifest is None or task.test_manifest is MANIFEST_STRICT:
        return None
    known = (task.content_hash, task.environment_hash, session.backend.name, str(settings.SANDBOX_CACHE_DIR))
    recording = _recordings.get(known)
    if recording is None:
        recording = _recording_make(task=task, session=session, limits=limits)
        _recordings[known] = recording
    Task.objects.filter(pk=task.pk, recording__isnull=True).update(recording=storable(recording))
    task.recording = recording
    return recording


def _recording_store(content: bytes) -> str:
    """Keep a recording's blob in storage and in this worker's cache (what its replays read)."""
    digest = blob_store(content=content).sha256
    blob_cached(digest)
    return digest


def _recording_make(*, task: Task, session: Session, limits: Limits | None) -> dict:
    spans = [
        SnippetSpan(snippet_key(s.file_path, s.position), s.file_path, s.start_line, s.end_line)
        for s in task.snippets.all()
    ]
    return recording_make(
        session=session,
        files=task_files(task),
        test_entry_point=task.test_entry_point,
        hidden=task_hidden_files(task),
        snippets=spans,
        limits=limits or limits_default(),
        store=_recording_store,
    )


def release_preloads_announce(*, session: Session, task: Task) -> None:
    """Tell a fork server's session what every task of this task's releases in its environment imports (their
    files minus every snippet's body), once per task: its zygote then starts with all of them, instead of starting
    again for each paper whose imports it has not seen."""
    if not isinstance(session, ForkingSession):
        return
    with _lock:
        announced = _announced.setdefault(task.environment_hash, set())
        if task.pk in announced:
            return
        tasks = list(
            Task.objects.filter(versions__in=task.versions.all(), environment_hash=task.environment_hash)
            .exclude(pk__in=announced)
            .distinct()
            .prefetch_related("snippets")
        )
        announced.update({task.pk, *(t.pk for t in tasks)})
    modules: list[str] = []
    helpers: list[str] = []
    for other in tasks:
        files = {path: blob_cached(digest) if path.endswith(".py") else b"" for path, digest in other.files.items()}
        spans = [(s.file_path, s.start_line, s.end_line) for s in other.snippets.all()]
        modules += preload_modules(files, skipped=spans)
        helpers += helper_calls(files, other.test_entry_point)
    session.preload_expect(modules=modules, helpers=helpers)


def package_preloads_announce(
    *, session: Session, files: Mapping[str, bytes], skipped: Iterable[tuple[str, int, int]], test_entry_point: str
) -> None:
    """Tell a fork server's session what a package's tests import (its files minus the `skipped` spans: every
    snippet's body), before its first item: a snippet's mutants, replayed first on files without the tests, would
    otherwise start the zygote without the tests' imports, and their first survivor's test run start it again."""
    if isinstance(session, ForkingSession):
        session.preload_expect(
            modules=preload_modules(files, skipped=skipped), helpers=helper_calls(files, test_entry_point)
        )


def item_execute(
    *,
    snippet: Snippet,
    code: str,
    limits: Limits | None = None,
    static_audit: bool = True,
    failures: BuildFailures | None = None,
) -> ItemRun:
    """Test `code` as the body of `snippet` (SandboxError and EnvironmentBuildError propagate: infrastructure)."""
    task = snippet.task
    limits = replace(limits or limits_default(), gpu=task.needs_gpu)
    if limits.gpu and not (settings.SANDBOX_GPU and backend_current().gpu):
        raise SandboxError(
            f"{task.paper.slug} needs a GPU, and this worker has none (SANDBOX_GPU is off or its "
            f"{backend_current().name} backend cannot pass GPUs): its items belong on the `gpu` queue"
        )
    session = session_for(task.environment_hash, task.requirements, failures=failures)
    before = _fork_state(session)
    release_preloads_announce(session=session, task=task)
    manifest = task_manifest(task=task, session=session, limits=limits)
    recording = task_recording(task=task, session=session, limits=limits)
    item = answer_test(
        session=session,
        files=task_files(task),
        annotated=task_annotated(task, snippet.file_path),
        position=snippet.position,
        code=code,
        test_entry_point=task.test_entry_point,
        hidden_files=task_hidden_files(task),
        limits=limits,
        static_audit=static_audit,
        manifest=manifest,
        recording=recording,
    )
    # The task's first item made its manifest first: what the fork server did for that run counts for this item.
    events = _fork_events(session, before)
    return replace(item, **events) if events else item


def _fork_state(session: Session) -> tuple[int, str]:
    """Where the session's fork server stands: how many starts so far, and why it is off for good ('' if not)."""
    return (len(session.starts), session.cold_reason) if isinstance(session, ForkingSession) else (0, "")


def _fork_events(session: Session, before: tuple[int, str]) -> dict:
    """What the session's fork server did since `before` (_fork_state): its starts, and its turning cold for good;
    nothing for a session without a fork server."""
    if not (isinstance(session, ForkingSession) and session.forkserver_wanted):
        return {}
    starts, cold = before
    return {
        "fork_starts": tuple(session.starts[starts:]),
        "fork_cold": session.cold_reason if session.cold_reason != cold else "",
    }
