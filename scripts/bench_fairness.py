"""A small run's latency behind a big one, against its time alone, on real workers: with the feeder (a share of each
run's items in flight) and without it (every item queued at once, as run_dispatch did before).

`python scripts/bench_fairness.py [--samples 20] [--workers 2] [--database postgres://.../dbname]`. Runs on a
PostgreSQL database of its own (dropped and created again), a redis-server of its own on a free port, the demo
release and the local sandbox backend; the big run is an upload of the reference code in `--samples` samples, the
small run the `reference` calibration run (33 items). Prints each latency and the ratio to the alone-time.
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
        time.sleep(0.25)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/rcb_bench_fairness")
    args = parser.parse_args()

    from scripts.bench_manifest import database_fresh
    from scripts.bench_pipeline import Worker

    database_fresh(args.database)
    tmp = Path(tempfile.mkdtemp(prefix="bench-fairness-"))
    port = free_port()
    redis = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp),
        ],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    broker = f"redis://127.0.0.1:{port}/0"
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_RESULT_BACKEND", "REDIS_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": args.database,
            "CELERY_BROKER_URL": broker,
            "MEDIA_ROOT": str(tmp / "media"),
            "SANDBOX_BACKEND": "local",
            "SANDBOX_CACHE_DIR": str(tmp / "sandbox"),
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchmarks.selectors import version_snippets
    from benchmarks.services import pset_import
    from evaluation import services
    from evaluation.models import EvaluationRun, ModelEntry, Outcome

    version = pset_import(root=REPO / "benchmarks" / "demo", version_name="1.0.0", publish=True).version
    uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
    upload = "".join(
        json.dumps({"id": str(s.pk), "sample": k, "code": s.reference_code}) + "\n"
        for k in range(args.samples)
        for s in version_snippets(version=version)
    ).encode()

    def completed(run) -> bool:
        return EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED

    def phase(label: str, in_flight: int) -> dict[str, float]:
        settings.RUN_ITEMS_IN_FLIGHT = in_flight
        workers = [
            Worker(n, {**env, "RUN_ITEMS_IN_FLIGHT": str(in_flight)}, tmp / f"{label}-worker{n}.log")
            for n in range(args.workers)
        ]
        try:
            until(lambda: all(w.ready() for w in workers), timeout=120, what="the workers")
            start = time.monotonic()
            alone = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
            until(lambda: completed(alone), timeout=1800, what="the run alone")
            alone_seconds = time.monotonic() - start
            big = services.run_from_upload(model=uploader, version=version, data=upload)
            until(lambda: Outcome.objects.filter(run=big).exists(), timeout=600, what="the big run's first outcome")
            start = time.monotonic()
            small = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
            until(lambda: completed(small), timeout=3600, what="the small run behind the big one")
            behind = time.monotonic() - start
            big_done = Outcome.objects.filter(run=big).count()
            print(
                f"{label}: small run alone {alone_seconds:.1f} s, behind a {big.total_items}-item run "
                f"{behind:.1f} s (ratio {behind / alone_seconds:.2f}); the big run had {big_done} of "
                f"{big.total_items} items done then"
            )
            if EvaluationRun.objects.get(pk=big.pk).is_active:
                services.run_cancel(run=big)
            return {"alone": alone_seconds, "behind": behind}
        finally:
            for worker in workers:
                worker.stop()

    try:
        fed = phase("feeder", in_flight=8)
        unfed = phase("everything queued at once (before)", in_flight=10**6)
        print(
            f"ratio behind/alone: feeder {fed['behind'] / fed['alone']:.2f}, "
            f"before {unfed['behind'] / unfed['alone']:.2f}"
        )
    finally:
        redis.terminate()
        redis.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
