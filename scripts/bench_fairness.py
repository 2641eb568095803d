"""A person's small run behind many runs of other people, against its time alone, on a real worker (issue 36 item 5).

`python scripts/bench_fairness.py [--samples 20] [--runs 31] [--people 11] [--concurrency 2]
[--database postgres://.../dbname]`. Runs on a PostgreSQL database of its own (dropped and created again), a
redis-server of its own on a free port, the demo release (33 snippets) and the local sandbox backend, with one worker
of `--concurrency` processes. The small run is a person's upload of the reference answers (33 items); the load is
uploads of the reference answers in `--samples` samples (33 x samples items each): `--runs` runs of one maintainer
(31 x 660 = 20,460 answers), then `--people` people's 3 runs each (11 x 3 x 660 = 21,780). The small run is started
once the load's runs are all running and their first items done; the load is cancelled after each phase.

Prints the small run's time alone (after a warm-up run, and again after the loads: the ratios are to their mean),
behind each load, their ratios, the load's items done meanwhile and the load average. The issue's measure before
this feeder: 117-120 s behind 11 people's 33 uploads and 165-194 s behind one maintainer's 31, against 7.25 s alone
(16x and 23-27x).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def database_fresh(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=20, help="samples per run of the load (33 items each)")
    parser.add_argument("--runs", type=int, default=31, help="the maintainer's runs")
    parser.add_argument("--people", type=int, default=11, help="people with 3 runs each")
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's processes")
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/rcb_bench_fairness")
    args = parser.parse_args()

    from scripts.bench_pipeline import Worker

    database_fresh(args.database)
    tmp = Path(tempfile.mkdtemp(prefix="bench-fairness-"))
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_RESULT_BACKEND", "REDIS_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": args.database,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
            "MEDIA_ROOT": str(tmp / "media"),
            "SANDBOX_BACKEND": "local",
            "SANDBOX_CACHE_DIR": str(tmp / "sandbox"),
            "RELEASE_CALIBRATE_ON_PUBLISH": "false",
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchmarks.selectors import version_snippets
    from benchmarks.services.psets import pset_import
    from evaluation import services
    from evaluation.models import EvaluationRun, ModelEntry, Outcome
    from operations.slots import queue_slots

    version = pset_import(root=REPO / "benchmarks" / "demo", version_name="1.0.0", publish=True).version
    uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
    snippets = list(version_snippets(version=version))

    def answers(samples: int) -> bytes:
        return "".join(
            json.dumps({"id": str(s.pk), "sample": k, "code": s.reference_code}) + "\n"
            for k in range(samples)
            for s in snippets
        ).encode()

    big, small = answers(args.samples), answers(1)
    maintainer = User.objects.create_user("maintainer")
    maintainer.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    people = [User.objects.create_user(f"person{n}") for n in range(args.people)]
    worker = Worker(0, env, tmp / "worker.log", queues="sandbox,default", concurrency=args.concurrency)

    def small_run_seconds(name: str) -> float:
        start = time.monotonic()
        run = services.run_from_upload(
            model=uploader, version=version, data=small, user=User.objects.get_or_create(username=name)[0]
        )
        until(
            lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=3600,
            what=f"the small run {run.pk}",
        )
        return time.monotonic() - start

    def behind(label: str, owners: list) -> dict[str, float]:
        started = time.monotonic()
        load = [services.run_from_upload(model=uploader, version=version, data=big, user=user) for user in owners]
        ids = [run.pk for run in load]
        print(
            f"{label}: {len(load)} runs, {sum(r.total_items for r in load)} answers uploaded in "
            f"{time.monotonic() - started:.1f} s",
            flush=True,
        )
        running = EvaluationRun.objects.filter(pk__in=ids, status=EvaluationRun.Status.RUNNING)
        until(lambda: running.count() == len(ids), timeout=600, what="the load's dispatch")
        until(lambda: Outcome.objects.filter(run_id__in=ids).count() >= 10, timeout=600, what="the load's items")
        done_before = Outcome.objects.filter(run_id__in=ids).count()
        seconds = small_run_seconds(f"small-{label}")
        done = Outcome.objects.filter(run_id__in=ids).count() - done_before
        for run in EvaluationRun.objects.filter(pk__in=ids, status__in=services.RUN_ACTIVE):
            services.run_cancel(run=run)
        time.sleep(3)  # the cancelled runs' items in flight are dropped as they reach the worker
        return {"seconds": seconds, "load_items": done}

    try:
        until(worker.ready, timeout=120, what="the worker")
        until(lambda: queue_slots("sandbox") == args.concurrency, timeout=60, what="the worker's slots")
        warm = small_run_seconds("warm-up")
        first = small_run_seconds("alone")
        print(f"small run (33 items) alone: {first:.2f} s (warm-up {warm:.2f} s)", flush=True)
        results = {
            f"one maintainer's {args.runs} runs": behind("maintainer", [maintainer] * args.runs),
            f"{args.people} people's {3 * args.people} runs": behind("people", [p for p in people for _ in range(3)]),
        }
        last = small_run_seconds("alone-again")
        alone = (first + last) / 2  # the machine's load drifts: the mean of the alone-times before and after
        load = os.getloadavg()
        print(f"small run alone again after the loads: {last:.2f} s; alone, the mean: {alone:.2f} s")
        for label, result in results.items():
            print(
                f"behind {label} ({33 * args.samples} answers each): {result['seconds']:.2f} s, "
                f"ratio {result['seconds'] / alone:.2f} (goal 2); the load did {result['load_items']} items meanwhile"
            )
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    finally:
        worker.stop()
        redis.terminate()
        redis.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
