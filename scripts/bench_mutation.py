"""Mutation testing of bench_pipeline's heavy set (torch, numpy, scipy tests on the CPU) through the fork server,
against the baseline of running the reference once per mutant in a fresh interpreter, measured in the same run.

1. A database of its own (SQLite in a temporary folder); the heavy environment built on bwrap before timing.
2. bench_pipeline's heavy set (`--papers`, `--snippets`), `--mutants` mutants per snippet (paper2code.mutation).
3. The recording of each paper (judging/sealed.py: what a validation's sealing checks make once per revision),
   timed apart.
4. Mutation as validation judges it (submissions/mutants.py), in bwrap with SANDBOX_FORKSERVER on: each mutant of a
   sealed snippet replayed on its recorded calls first, the paper's tests (stopping at the first failure) only for
   a mutant the replay cannot tell apart; a snippet's mutants replayed in one sandboxed process, each in a fork of its
   own (judging/replay_batch.py); with `--compare`, first with each mutant replayed alone (the way before batches),
   and the ratio of the two with whether their verdicts are identical; with `--warm-compare`, batches that import
   nothing for their answers (the way before replay_batch's inputs_warm) alternating `--rounds` times with the way
   now, the ratio of the sums and whether each snippet's verdicts are identical; with `--tests-only`, as before
   replays: every mutant runs the whole test. Wall time and CPU seconds, killed (by the replay, by the tests),
   equivalent, survived, test runs, replay batches.
5. Baseline: bench_django.naive (sequential, a fresh copy of the files and a fresh interpreter, no sandbox) runs the
   reference of each mutant's paper once per mutant; the ratios of wall time and of CPU seconds.

CPU seconds count this process and everything it started, the fork server's items included
(scripts/mutation_profile.py's CpuClock): on a machine other work shares, wall time moves with their load (a
mutant's replay is a few short processes, each waiting for a core), CPU seconds much less.

`--profile` (issue 36 item 1: where a snippet's mutants task spends its seconds) submits one paper of the heavy set
(`--paper`, chosen as below), validates it in this process, then runs each snippet's mutants task again as a worker
runs it (submissions/mutation_spread.py's snippet_mutation_run), first on a new session (its fork server not
started), then `--rounds` times warm, and prints the wall and CPU seconds of each step (scripts/mutation_profile.py:
the database, the package's load, the environment's resolution, the fork server's start, the replay batch's sandboxed
process, replays alone, the comparison with the recording, the survivors' test runs); the verdicts must be the
validation's.

`--workers-compare` (issue 36 item 1: mutants on every worker) times a revision's mutation testing on real Celery
workers instead (`celery -A config worker --concurrency 1`, as the tests start them; a Redis database of its own
claimed as the tests claim theirs; PostgreSQL `--postgres-url`, dropped and created; bwrap, the fork server on):
1. The heavy set as above; one paper of it (`--paper`, default the one with the most snippets among those whose test
   lasts under 1.5 s) submitted by an author, validated by two workers (the warm-up: every check, both workers'
   fork servers started, the recording stored).
2. The same revision's mutation testing run again from its stored checks (its mutation checks pending again, queued
   as validation queues them: one task per snippet), first with both workers, then with one:
   the wall from the queueing to the report's end, which workers ran the snippets, and the ratio of the two; the
   verdicts of the two runs and of the warm-up must be identical (the same seed). The second worker stops taking
   from the queue for the one-process runs (Celery's cancel_consumer) and takes again after, so it stays warm;
   `--rounds` pairs alternate, the ratio is of the sums.

Run: .venv/bin/python scripts/bench_mutation.py [--papers 20] [--snippets 212] [--mutants 10] [--cache DIR]
     [--tests-only] [--compare] [--warm-compare [--rounds 2]] [--no-baseline]
     .venv/bin/python scripts/bench_mutation.py --profile [--papers 20] [--snippets 212] [--mutants 10] [--paper ID]
     [--rounds 1]
     .venv/bin/python scripts/bench_mutation.py --workers-compare [--papers 20] [--snippets 212] [--mutants 10]
     [--paper ID] [--rounds 2] [--postgres-url URL] [--cache DIR]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/rcb_benchmutation"

from scripts.bench_django import THREADS_ONE, naive  # noqa: E402
from scripts.bench_pipeline import CALIBRATE, environments_build, load, papers_plan, pset_heavy_generate  # noqa: E402
from scripts.mutation_profile import CpuClock  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--snippets", type=int, default=212)
    parser.add_argument("--mutants", type=int, default=10)
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-bench")
    parser.add_argument(
        "--tests-only", action="store_true", help="every mutant runs the whole test, no replay (the way before it)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also judge the mutants with each replayed alone (the way before batches) and print the ratio",
    )
    parser.add_argument(
        "--warm-compare",
        action="store_true",
        help="also judge the mutants with batches that import nothing for their answers (the way before "
        "inputs_warm), alternating with the way now for --rounds rounds, and print the ratio and per-snippet verdicts",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the fresh interpreters (a quick check)")
    parser.add_argument(
        "--workers-compare",
        action="store_true",
        help="time one revision's mutation testing on real workers, two worker processes against one",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="where one snippet's mutants task spends its seconds, step by step, on one paper (in this process)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --workers-compare: rounds of 2 then 1 process")
    parser.add_argument("--paper", default="", help="with --workers-compare: the paper submitted (default: see above)")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help=f"with --workers-compare (default {POSTGRES_URL})")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.workers_compare:
        workers_compare(args)
        return
    if args.profile:
        profile(args)
        return
    args.cache, args.backend = args.cache.resolve(), "bwrap"
    clock = CpuClock()
    atexit.register(clock.close)
    tmp = Path(tempfile.mkdtemp(prefix="bench-mutation-"))
    print(f"load average at the start: {load()}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
            "SANDBOX_BACKEND": "bwrap",
            "SANDBOX_CACHE_DIR": str(args.cache),
            "SANDBOX_FORKSERVER": "true",
            "MEDIA_ROOT": str(tmp / "media"),
            "CELERY_BROKER_URL": "memory://",
            **THREADS_ONE,
        }
    )
    import django

    django.setup()

    from benchmarks.paper2code import noop, splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.paper2code.pset import read_pset
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import blob_store
    from evaluation.executor import limits_default, package_test, session_for
    from evaluation.judging.replay_batch import BatchStats
    from evaluation.judging.sealed import SnippetSpan, recording_make, snippet_key
    from evaluation.taskfiles import hidden_files
    from sandbox.harness import GuardSpec
    from scripts.bench_pipeline import REQUIREMENTS
    from submissions.mutants import mutant_replayer, mutants_judge, mutation_result

    env_hash, python, per_second = migrated_and_calibrated(args)
    root = tmp / "pset"
    pset_heavy_generate(root, papers_plan(args.papers, args.snippets), per_second=per_second, paper_bytes=20_000)
    requirements = requirements_vetted(REQUIREMENTS)
    packages = list(read_pset(root))
    mutants = {
        (package.id, path, snippet.index): mutants_generate(snippet.code, limit=args.mutants)
        for package in packages
        for path in package.annotated_paths
        for snippet in package.annotated[path].snippets
    }
    count = sum(len(found) for found in mutants.values())
    print(f"{count} mutants of {args.snippets} snippets in {args.papers} papers", flush=True)

    session = session_for(env_hash, requirements)
    limits = limits_default()
    start = time.monotonic()
    recordings, hidden = {}, {}
    for package in packages:
        annotated = {path: package.annotated[path] for path in package.annotated_paths}
        hidden[package.id] = hidden_files(
            dict(package.files),
            visible=set(annotated),
            annotated=annotated.values(),
            entry_point=package.test_entry_point,
        )
        recordings[package.id] = (
            None
            if args.tests_only
            else recording_make(
                session=session,
                files=package.files,
                test_entry_point=package.test_entry_point,
                hidden=hidden[package.id],
                snippets=[
                    SnippetSpan(snippet_key(path, s.index), path, s.start_line, s.end_line)
                    for path, parsed in annotated.items()
                    for s in parsed.snippets
                ],
                limits=limits,
                store=lambda content: blob_store(content=content).sha256,
            )
        )
    recorded = time.monotonic() - start
    sealed = sum(
        entry["sealed"] for recording in recordings.values() if recording for entry in recording["snippets"].values()
    )
    if not args.tests_only:
        print(f"recordings of {len(packages)} papers: {recorded:.1f} s; {sealed} of {len(mutants)} snippets sealed")

    guard = GuardSpec(failfast=not args.tests_only)

    def judge(batched: bool, warm: bool = True) -> tuple[float, list[dict], BatchStats, float | None]:
        stats = BatchStats()
        start, cpu = time.monotonic(), clock.seconds()
        results = []
        for package in packages:
            for path in package.annotated_paths:
                parsed = package.annotated[path]
                for snippet in parsed.snippets:

                    def test(mutant, parsed=parsed, snippet=snippet, package=package):
                        return package_test(
                            files={**package.files, parsed.path: splice(parsed, snippet, mutant.body).encode()},
                            test_entry_point=package.test_entry_point,
                            environment_hash=env_hash,
                            requirements=requirements,
                            limits=limits,
                            guard=guard,
                        )

                    replay = mutant_replayer(
                        session=session,
                        files=package.files,
                        hidden=hidden[package.id],
                        recording=recordings[package.id],
                        annotated=parsed,
                        position=snippet.index,
                        limits=limits,
                        batched=batched,
                        stats=stats,
                        warm=warm,
                    )
                    found = mutants[package.id, path, snippet.index]
                    results.append(
                        mutation_result(mutants_judge(found, replay=replay, test=test, noop_body=noop(snippet)))
                    )
        used = clock.seconds()
        return time.monotonic() - start, results, stats, None if cpu is None or used is None else used - cpu

    def summary(judged: float, results: list[dict], how: str, cpu: float | None = None) -> None:
        total = {
            key: sum(r[key] for r in results)
            for key in ("generated", "counted", "killed", "survived", "equivalent", "test_runs")
        }
        by_replay = sum(r["killed_by"]["replay"] for r in results)
        timeouts = sum(len(r["timeouts"]) for r in results)
        mode = (
            "forked from the warm fork server"
            if getattr(session, "forking", False)
            else "COLD (the fork server is off)"
        )
        print(
            f"mutation through the sandbox, {how}: {judged:.1f} s ({cpu_text(cpu)}) for {count} mutants "
            f"({judged / count:.3f} s each, "
            f"{mode}); killed {total['killed']} of {total['counted']} ({by_replay} by the replay, "
            f"{total['killed'] - by_replay} by the tests, {timeouts} by the time limit), {total['survived']} "
            f"survived, {total['equivalent']} equivalent on the recorded inputs; {total['test_runs']} test runs; "
            f"score {total['killed'] / max(1, total['counted']):.0%}",
            flush=True,
        )

    verdicts = lambda results: [(m["diff"], m["outcome"], m["by"]) for r in results for m in r["mutants"]]  # noqa: E731
    alone = None
    if args.compare and not args.tests_only:
        alone = judge(batched=False)
        summary(alone[0], alone[1], "replay first, each mutant replayed alone (the way before batches)", alone[3])
        print(f"load average after it: {load()}", flush=True)
    if args.warm_compare and not args.tests_only:
        warm_compare(judge, summary, verdicts, args.rounds)
    judged, results, stats, judged_cpu = judge(batched=not args.tests_only)
    how = (
        "every mutant runs the whole test (--tests-only)"
        if args.tests_only
        else "replay first, a snippet's mutants replayed in one sandboxed process"
    )
    summary(judged, results, how, judged_cpu)
    if not args.tests_only:
        print(
            f"replay batches: {stats.batches}, {stats.batched} mutants judged in a batch, {stats.alone} replayed alone"
            + (f"; batches that relayed nothing, the last: {stats.failures[-1]!r}" if stats.failures else ""),
            flush=True,
        )
    if alone is not None:
        same = verdicts(alone[1]) == verdicts(results)
        print(
            f"ratio each alone / batched: {alone[0] / judged:.2f}x; verdicts " + ("identical" if same else "DIFFER"),
            flush=True,
        )
    print(f"load average after the mutation: {load()}", flush=True)
    baseline_print(python, packages, mutants, clock, judged=judged, cpu=judged_cpu, recorded=recorded, args=args)


def migrated_and_calibrated(args) -> tuple[str, str, float]:
    """The database migrated, the environments built, and this machine's speed for the heavy set's tests."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    env_hash, python = environments_build(args)
    per_second = float(
        subprocess.run(
            [python, "-c", CALIBRATE], capture_output=True, text=True, check=True, env={**os.environ, **THREADS_ONE}
        ).stdout.strip()
    )
    return env_hash, python, per_second


def paper_chosen(args):
    """The heavy set's plans, and the paper a workers' comparison or a profile runs (--paper, or the one with most
    snippets among those whose test takes under 1.5 s)."""
    plans = papers_plan(args.papers, args.snippets)
    plan = (
        next(p for p in plans if p.paper_id == args.paper)
        if args.paper
        else max((p for p in plans if p.seconds < 1.5), key=lambda p: p.snippets)
    )
    return plans, plan


def baseline_print(python, packages, mutants, clock, *, judged: float, cpu: float | None, recorded: float, args):
    """The baseline (the reference once per mutant in a fresh interpreter) and its ratios to the mutation's; none
    with --no-baseline."""
    if args.no_baseline:
        return
    judged_cpu = cpu
    items = [
        (package.test_entry_point, package.files)
        for package in packages
        for path in package.annotated_paths
        for snippet in package.annotated[path].snippets
        for _ in mutants[package.id, path, snippet.index]
    ]
    cpu = clock.seconds()
    baseline, _ = naive(python, items)
    baseline_cpu = None if cpu is None else (clock.seconds() or 0.0) - cpu
    print(
        f"baseline, the reference once per mutant in a fresh interpreter: {baseline:.1f} s ({cpu_text(baseline_cpu)}) "
        f"({baseline / len(items):.3f} s each)"
    )
    print(f"ratio baseline / mutation: {baseline / judged:.2f}x (goal: at least 10x)")
    if baseline_cpu is not None and judged_cpu:
        print(f"ratio of CPU seconds, baseline / mutation: {baseline_cpu / judged_cpu:.2f}x")
    if not args.tests_only:
        print(f"ratio baseline / (recordings + mutation): {baseline / (recorded + judged):.2f}x")
    print(f"load average at the end: {load()}")


def cpu_text(seconds: float | None) -> str:
    return "CPU n/a" if seconds is None else f"{seconds:.1f} CPU s"


def warm_compare(judge, summary, verdicts, rounds: int) -> None:
    """Batches that import nothing for their answers (before) against batches that import once what each answer's
    replay imports first (now: replay_batch.inputs_warm), alternating, the same mutants; the ratio of the sums."""
    timed: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    seen: dict[bool, list] = {}
    for round_ in range(rounds):
        for warm in (False, True):
            print(f"load average before round {round_ + 1}, {'now' if warm else 'before'}: {load()}", flush=True)
            judged, results, _, cpu = judge(batched=True, warm=warm)
            how = "batches import once for their answers (now)" if warm else "batches import nothing (before)"
            summary(judged, results, f"round {round_ + 1}, {how}", cpu)
            timed[warm].append(judged)
            cpus[warm].append(cpu or 0.0)
            found = [verdicts([r]) for r in results]  # per snippet
            if seen.setdefault(warm, found) != found:
                print(f"verdicts of round {round_ + 1} differ from round 1's ({'now' if warm else 'before'})")
    same = seen[False] == seen[True]
    differing = sum(a != b for a, b in zip(seen[False], seen[True], strict=True))
    print(
        f"ratio before / now: {sum(timed[False]) / sum(timed[True]):.2f}x ({sum(timed[False]):.1f} s / "
        f"{sum(timed[True]):.1f} s over {rounds} round(s)); of CPU seconds: "
        f"{sum(cpus[False]) / max(1e-9, sum(cpus[True])):.2f}x ({sum(cpus[False]):.1f} / {sum(cpus[True]):.1f}); "
        "per-snippet verdicts " + ("identical" if same else f"DIFFER for {differing} snippets"),
        flush=True,
    )


def workers_compare(args) -> None:
    """A revision's mutation testing on real workers: two worker processes against one (see the module's docstring)."""

    from scripts.bench_pipeline import Worker, platform_environment, postgres_drop, postgres_recreate, workers_wait
    from scripts.redis_claim import redis_database_claimed

    args.cache, args.backend, args.forkserver, args.debug = args.cache.resolve(), "bwrap", "on", False
    tmp = Path(tempfile.mkdtemp(prefix="bench-mutation-workers-"))
    print(f"load average at the start: {load()}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()
    broker = claim.enter_context(
        redis_database_claimed(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), wait_seconds=120, ttl_seconds=3 * 3600
        )
    )
    workers: list = []
    try:
        postgres_recreate(args.postgres_url)
        env = {
            **platform_environment(args, tmp, broker, args.postgres_url),
            "SUBMISSION_MUTANTS": str(args.mutants),
            **THREADS_ONE,
        }
        os.environ.clear()
        os.environ.update(env)
        import django

        django.setup()
        from django.db import connections

        env_hash, python, per_second = migrated_and_calibrated(args)
        plans, plan = paper_chosen(args)
        root = tmp / "pset"
        pset_heavy_generate(root, plans, per_second=per_second, paper_bytes=20_000)
        print(
            f"paper {plan.paper_id}: {plan.snippets} snippets, its test's own time {plan.seconds:.2f} s, "
            f"{args.mutants} mutants per snippet; broker {broker}",
            flush=True,
        )
        connections.close_all()
        workers = [Worker(i, env, tmp / f"worker{i}.log", queues="sandbox") for i in range(2)]
        workers_wait(workers)
        start = time.monotonic()
        report = revision_submitted(root / plan.paper_id)
        warm_up = report_wait(report, workers)
        print(
            f"warm-up: the revision's whole validation on 2 workers: {time.monotonic() - start:.1f} s, "
            f"{warm_up['status']}; its mutation checks ended {warm_up['mutation_wall']:.1f} s after the others",
            flush=True,
        )
        if warm_up["status"] != "passed":
            sys.exit(f"the validation did not pass: {warm_up['failed']}")
        from config.celery import app

        timed: dict[int, list[dict]] = {1: [], 2: []}
        for round_ in range(args.rounds):
            for count in (2, 1):
                # One process: the other worker stops taking from the queue (and starts again), staying warm.
                control = app.control.add_consumer if count == 2 else app.control.cancel_consumer
                control("sandbox", destination=[workers[1].hostname], reply=True)
                print(f"load average before {count} worker process(es): {load()}", flush=True)
                t = mutation_rerun(report, workers)
                timed[count].append(t)
                print(
                    f"round {round_ + 1}, {count} worker process(es): the revision's mutation testing took "
                    f"{t['wall']:.1f} s ({t['snippets']} snippets, {t['mutants']} mutants: killed {t['killed']} of "
                    f"{t['counted']}, {t['by_replay']} by the replay, {t['test_runs']} test runs; score "
                    f"{t['score']:.0%}); snippets per worker process: {t['by_worker']}",
                    flush=True,
                )
        one, two = (sum(t["wall"] for t in timed[n]) for n in (1, 2))
        same = all(t["verdicts"] == warm_up["verdicts"] for n in (1, 2) for t in timed[n])
        print(
            f"ratio 1 worker process / 2: {one / two:.2f}x ({one:.1f} s / {two:.1f} s over {args.rounds} round(s)); "
            "verdicts " + ("identical" if same else "DIFFER"),
            flush=True,
        )
        print(f"load average at the end: {load()}", flush=True)
    finally:
        for worker in workers:
            worker.stop()
        claim.close()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass
        postgres_drop(args.postgres_url)


def profile(args) -> None:
    """Each snippet's mutants task of one paper, as a worker runs it (`snippet_mutation_run`), step by step
    (scripts/mutation_profile.py): the paper submitted and validated in this process first (SQLite, bwrap, the fork
    server on), then its mutation checks run again from the stored ones, first as on a worker whose session is new
    (its fork server not started), then `--rounds` times warm; the verdicts must be those of the validation."""
    from scripts.mutation_profile import breakdown, clock_installed

    args.cache = args.cache.resolve()
    cpu = CpuClock()
    atexit.register(cpu.close)
    tmp = Path(tempfile.mkdtemp(prefix="bench-mutation-profile-"))
    print(f"load average at the start: {load()}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
            "SANDBOX_BACKEND": "bwrap",
            "SANDBOX_CACHE_DIR": str(args.cache),
            "SANDBOX_FORKSERVER": "true",
            "MEDIA_ROOT": str(tmp / "media"),
            "CELERY_BROKER_URL": "memory://",
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
            "SUBMISSION_MUTANTS": str(args.mutants),
            **THREADS_ONE,
        }
    )
    import django

    django.setup()
    from django.db import connection

    from evaluation import executor
    from submissions.mutation_spread import snippet_mutation_run
    from submissions.tasks import revision_validate

    args.backend = "bwrap"
    env_hash, python, per_second = migrated_and_calibrated(args)
    plans, plan = paper_chosen(args)
    root = tmp / "pset"
    pset_heavy_generate(root, plans, per_second=per_second, paper_bytes=20_000)
    print(
        f"paper {plan.paper_id}: {plan.snippets} snippets, its test's own time {plan.seconds:.2f} s, "
        f"{args.mutants} mutants per snippet",
        flush=True,
    )
    report = revision_submitted(root / plan.paper_id)
    start = time.monotonic()
    revision_validate.apply(args=(report.pk,))
    report.refresh_from_db()
    checks = report.checks.filter(key__startswith="mutation:").order_by("position")
    keys = list(checks.values_list("key", flat=True))
    before = {c.key: c.result for c in checks}
    print(
        f"validation in this process: {time.monotonic() - start:.1f} s, {report.status}; {len(keys)} mutation checks",
        flush=True,
    )

    def rerun(clock) -> dict:
        report.checks.filter(key__startswith="mutation:").update(status="pending", result=None)
        found = {}
        with connection.execute_wrapper(clock.sql):
            for key in keys:
                with clock.task():
                    snippet_mutation_run(report=report, key=key)
                found[key] = report.checks.get(key=key).result
        return found

    same = True
    for round_ in range(args.rounds + 1):
        cold = round_ == 0
        if cold:  # a worker's first task in this environment: its session new, its fork server not started
            with executor._lock:
                for session in executor._sessions.values():
                    session.close()
                executor._sessions.clear()
        clock = clock_installed(cpu)
        print(f"load average before: {load()}", flush=True)
        try:
            found = rerun(clock)
        finally:
            clock.undo()
        same = same and all(mutant_verdicts(found[k]) == mutant_verdicts(before[k]) for k in keys)
        mutants = sum(r["generated"] for r in found.values())
        print(
            f"{'first tasks on a new session' if cold else f'warm round {round_}'}: {len(keys)} snippets' mutants "
            f"tasks, {mutants} mutants, {sum(r['test_runs'] for r in found.values())} test runs, killed "
            f"{sum(r['killed_by']['replay'] for r in found.values())} by the replay",
            flush=True,
        )
        print(breakdown(clock, len(keys)), flush=True)
    print(f"verdicts as the validation's: {'identical' if same else 'DIFFER'}; load average at the end: {load()}")


def mutant_verdicts(result: dict) -> list[tuple[str, str, str]]:
    return [(m["diff"], m["outcome"], m["by"]) for m in result["mutants"]]


def revision_submitted(folder: Path):
    """The paper's package submitted by an author, as the site's wizard ends; its validation report."""
    import yaml
    from django.contrib.auth.models import User

    from submissions import services

    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    entry = next(e for e in yaml.safe_load((folder.parent / "papers.yaml").read_text()) if e["id"] == folder.name)
    metadata = {key: str(entry[key]) for key in ("title", "venue", "arxiv_abs", "github_url", "arxiv_date")}
    author = User.objects.create_user("bench-author", email="author@example.org")
    values = {
        "metadata": {**metadata, "id": f"{folder.name}-submitted"},
        "files": services.draft_files_store(files),
        "paper_path": "paper2code_paper.tex",
        "annotated_paths": ["model.py"],
        "context_paths": ["utils.py"],
        "source": {"kind": "archive", "name": f"{folder.name}.zip"},
    }
    submission = services.draft_update(
        submission=services.submission_create(author=author), actor=author, values=values
    )
    return services.submission_submit(submission=submission, actor=author).report


def report_wait(report, workers, *, timeout: float = 3600) -> dict:
    """Wait for the report to end, noting when its mutation checks were all that was left; what it measured."""
    from submissions.models import ValidationReport

    deadline, others_done = time.monotonic() + timeout, None
    while True:
        status = ValidationReport.objects.filter(pk=report.pk).values_list("status", flat=True).get()
        active = report.checks.filter(status__in=["pending", "running"])
        if (
            others_done is None
            and report.checks.exists()  # planned by the validation's task, which a worker may not have taken yet
            and not active.exclude(key__startswith="mutation:").exists()
        ):
            others_done = time.monotonic()
        if status not in ("pending", "running"):
            break
        if time.monotonic() > deadline:
            sys.exit(f"report {report.pk} did not end within {timeout:.0f} s:\n{workers[0].output()[-3000:]}")
        for worker in workers:
            worker.ready()  # exits when a worker died
        time.sleep(0.05)
    ended = time.monotonic()
    checks = list(report.checks.order_by("position"))
    results = [c.result for c in checks if c.key.startswith("mutation:")]
    by_worker: dict[str, int] = {}
    for result in results:
        by_worker[result.get("worker", "?")] = by_worker.get(result.get("worker", "?"), 0) + 1
    return {
        "status": status,
        "failed": [f"{c.key}: {c.status} {c.detail[:300]}" for c in checks if c.status != "passed"],
        "mutation_wall": ended - (others_done or ended),
        "snippets": len(results),
        "mutants": sum(r["generated"] for r in results),
        "counted": sum(r["counted"] for r in results),
        "killed": sum(r["killed"] for r in results),
        "by_replay": sum(r["killed_by"]["replay"] for r in results),
        "test_runs": sum(r["test_runs"] for r in results),
        "score": sum(r["killed"] for r in results) / max(1, sum(r["counted"] for r in results)),
        "by_worker": by_worker,
        "verdicts": [(m["diff"], m["outcome"], m["by"]) for r in results for m in r["mutants"]],
    }


def mutation_rerun(report, workers) -> dict:
    """The revision's mutation testing again from its stored checks: its mutation checks pending, the report and
    its submission back to validating, and its snippets queued as validation queues them (mutation_spread)."""
    from submissions.models import Submission, ValidationReport
    from submissions.mutation_spread import mutation_dispatch

    report.checks.filter(key__startswith="mutation:").update(status="pending", result=None, detail="", warning="")
    ValidationReport.objects.filter(pk=report.pk).update(status="running", finished_at=None)
    Submission.objects.filter(pk=report.revision.submission_id).update(state=Submission.State.VALIDATING)
    start = time.monotonic()
    mutation_dispatch(report=report)
    measured = report_wait(report, workers)
    return {**measured, "wall": time.monotonic() - start}


if __name__ == "__main__":
    main()
