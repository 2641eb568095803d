"""A fresh release's first run against its second, with the tasks' test manifests and recordings made at import
(evaluation/preparation.py) and, as the baseline measured in the same script run, without (made by the first run on
its first items, as before).

What it does, in order:
1. A fresh PostgreSQL database (`rcb_bench_first_run`, dropped and created) or `--database sqlite`, a Redis broker
   database of its own (claimed as the test fixtures claim theirs), and `--workers` real Celery workers (queues
   sandbox and default, `--concurrency` each) on `--backend`.
2. A warm-up release (the demo set, prepared at import): the environment is built and the workers' fork servers
   start before anything is timed, as on a running platform that receives a new release.
3. Baseline: a copy of the demo set with new content (a comment added to each paper's test, so its tasks are new
   revisions with nothing made yet; the environment is the same) imported with `--no-prepare` and published; the
   reference model's first run, then its second.
4. Prepared: another such copy imported and published as `make run` does (its tasks prepared on the workers); the
   time until every task is prepared, then until the runs the publish itself starts (the calibration lines:
   reference and placeholder) are finished, since a first run timed beside them shares the workers with two other
   runs of the same size; then the first run and the second.
Steps 3 and 4 are repeated `--rounds` times (new copies each time); the medians of the ratios are the result.
Runs start with the platform's own `services.run_start`; a run's wall is from that call until it is completed.
The machine is shared: the load average is printed at the start, after each phase and at the end.

Run: .venv/bin/python scripts/bench_first_run.py [--backend bwrap|docker] [--workers 1] [--concurrency 2]
     [--database postgres|sqlite] [--cache DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_pipeline import (  # noqa: E402
    Worker,
    load,
    platform_environment,
    postgres_drop,
    postgres_recreate,
    run_wait,
)
from scripts.redis_claim import redis_database_claimed  # noqa: E402

POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/rcb_bench_first_run"
DEMO = REPO / "benchmarks" / "demo"
GOAL = 1.2


def demo_copy(tmp: Path, name: str) -> Path:
    """The demo set with new content (a comment in each paper's test file): new task revisions, same environment."""
    root = tmp / name
    shutil.copytree(DEMO, root)
    for test in root.glob("*/paper2code_test.py"):
        test.write_text(test.read_text() + f"\n# bench copy {name}\n")
    return root


def release_import(root: Path, name: str, *, prepare: bool):
    from django.core.management import call_command

    from benchmarks.models import BenchmarkVersion

    options = {} if prepare else {"prepare": False}
    call_command("import_pset", str(root), version=name, publish=True, verbosity=0, **options)
    return BenchmarkVersion.objects.get(name=name)


def prepared_wait(version, timeout: float, workers: list[Worker]) -> float:
    """Seconds until no task of `version` is queued or being prepared."""
    from evaluation.selectors.monitoring import release_preparation

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        state = release_preparation(version=version)
        if state is None:
            sys.exit(f"{version.name}: no preparation was queued (RELEASE_PREPARE off?)")
        if state.done:
            if state.failed:
                sys.exit(f"{version.name}: preparation failed: {state.failed}")
            return time.monotonic() - start
        for worker in workers:
            worker.ready()
        time.sleep(0.1)
    sys.exit(f"{version.name}: not prepared within {timeout:.0f} s")


def calibration_wait(version, timeout: float, workers: list[Worker]) -> float:
    """Seconds until the runs the publish itself started (evaluation.services.calibration_runs_start: the reference
    and placeholder lines) are finished: a first run timed while they run shares the workers with them."""
    from evaluation.models import EvaluationRun

    active = [EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]
    start = time.monotonic()
    while EvaluationRun.objects.filter(version=version, status__in=active).exists():
        if time.monotonic() - start > timeout:
            sys.exit(f"{version.name}: its calibration runs did not finish within {timeout:.0f} s")
        for worker in workers:
            worker.ready()
        time.sleep(0.1)
    return time.monotonic() - start


def run_timed(version, timeout: float, workers: list[Worker]) -> float:
    from evaluation import services
    from evaluation.models import EvaluationRun, ModelEntry, RunScore

    start = time.monotonic()
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    run_wait(run.pk, timeout, workers)
    wall = time.monotonic() - start
    score = RunScore.objects.get(run=run, paper=None, split="")
    if score.passed != score.items:
        sys.exit(f"run {run.pk} of the reference passed {score.passed} of {score.items} items")
    assert EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2, help="each worker's --concurrency")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "rcb-bench-first-run-cache", help="sandbox cache"
    )
    parser.add_argument("--rounds", type=int, default=3, help="fresh releases per way (medians are reported)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (worker logs) and database")
    args = parser.parse_args()
    args.cache = args.cache.resolve()
    args.cache.mkdir(parents=True, exist_ok=True)
    args.debug, args.forkserver = False, "on"

    tmp = Path(tempfile.mkdtemp(prefix="bench-first-run-"))
    print(f"load average (1, 5, 15 min) at the start: {load()}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()  # the Redis database claimed, released in the `finally` below
    broker = claim.enter_context(
        redis_database_claimed(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), wait_seconds=120, ttl_seconds=3600
        )
    )
    database = POSTGRES_URL if args.database == "postgres" else f"sqlite:///{tmp / 'db.sqlite3'}"
    workers: list[Worker] = []
    try:
        if args.database == "postgres":
            postgres_recreate(database)
        env = {**platform_environment(args, tmp, broker, database), "RELEASE_PREPARE": "true"}
        os.environ.clear()
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        workers = [Worker(n, env, tmp / f"worker{n}.log", concurrency=args.concurrency) for n in range(args.workers)]
        while not all(w.ready() for w in workers):
            time.sleep(0.2)
        print(
            f"database {args.database}, broker {broker}, backend {args.backend}, {args.workers} worker(s) x "
            f"{args.concurrency}",
            flush=True,
        )

        warm = release_import(demo_copy(tmp, "warm"), "demo-9.0.0", prepare=True)
        warm_prepared = prepared_wait(warm, args.timeout, workers)
        warm_run = run_timed(warm, args.timeout, workers)
        print(
            f"warm-up (environment built, fork servers started): prepared in {warm_prepared:.1f} s, "
            f"a run {warm_run:.1f} s; load {load()}",
            flush=True,
        )

        ratios: dict[str, list[float]] = {"baseline": [], "prepared": []}
        for round_ in range(args.rounds):
            lazy = release_import(demo_copy(tmp, f"lazy{round_}"), f"demo-9.{round_ + 1}.0", prepare=False)
            lazy_first = run_timed(lazy, args.timeout, workers)
            lazy_second = run_timed(lazy, args.timeout, workers)
            ratios["baseline"].append(lazy_first / lazy_second)
            print(
                f"round {round_ + 1}, baseline (made by the first run): first {lazy_first:.2f} s, second "
                f"{lazy_second:.2f} s, ratio {lazy_first / lazy_second:.2f}x; load {load()}",
                flush=True,
            )
            fresh = release_import(demo_copy(tmp, f"prepared{round_}"), f"demo-9.{round_ + 1}.1", prepare=True)
            prepared = prepared_wait(fresh, args.timeout, workers)
            calibrated = calibration_wait(fresh, args.timeout, workers)
            first = run_timed(fresh, args.timeout, workers)
            second = run_timed(fresh, args.timeout, workers)
            ratios["prepared"].append(first / second)
            print(
                f"round {round_ + 1}, prepared at import ({fresh.tasks.count()} tasks in {prepared:.2f} s on the "
                f"workers, its calibration runs done {calibrated:.2f} s later): "
                f"first {first:.2f} s, second {second:.2f} s, ratio {first / second:.2f}x; load {load()}",
                flush=True,
            )
        baseline, after = statistics.median(ratios["baseline"]), statistics.median(ratios["prepared"])
        print(
            f"median first/second over {args.rounds} round(s): before (made by the first run) {baseline:.2f}x, "
            f"after (prepared at import) {after:.2f}x (goal {GOAL}x: {'met' if after <= GOAL else 'NOT met'})",
            flush=True,
        )
        connections.close_all()
    finally:
        for worker in workers:
            worker.stop()
        print(f"load average at the end: {load()}", flush=True)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
            if args.database == "postgres":
                postgres_drop(database)
        claim.close()


if __name__ == "__main__":
    main()
