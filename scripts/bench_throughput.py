"""Throughput of a big upload of the demo's answers through real workers, against the limit the tests themselves set
(issue 36, item 6): items per second, and the tests' own summed time over the cores.

`python scripts/bench_throughput.py [--backend bwrap|docker] [--uploads 31] [--samples 20] [--workers 2]
[--window SECONDS] [--database postgres://.../name] [--redis redis://.../N]`

In order:
1. A fresh database (`--database`, dropped and created), the Redis database `--redis` as the broker (emptied), the
   demo release (benchmarks/demo, 33 snippets in 3 papers) imported and published, and each of its tasks'
   environments built on the backend and on bwrap before anything is timed.
2. `--workers` real Celery workers (queues sandbox and default, `--concurrency` each); one reference run of the
   release warms them (fork servers, each task's manifest and recording if the import did not make them).
3. The tests' own time per item: each item's test (the reference spliced in) run `--repeat` times in a fresh copy
   and the bwrap environment's python outside any sandbox, numpy imported first, timed from the test file's start to
   its end (no interpreter start, no numpy import: what a warm fork server saves as well); the median per item.
4. The load: `--uploads` uploads of the reference answers in `--samples` samples (33 x samples items each; the
   default 31 x 660 = 20,460 answers, as bench_fairness.py's maintainer) by one maintainer, through
   `services.run_from_upload` as the API calls it. The wall is from the first upload to the last run's completion;
   with `--window S` the load is cancelled S seconds after the first upload and the items done by then count (the
   steady rate, for a machine that cannot spare the whole load's time).

Printed: items, wall, items/s; the limit (the done items' own time summed, over the cores: min(workers x concurrency,
cores)), its items/s and the ratio wall / limit; where the time of an item goes (own, the rest of the sandbox's
time, the task's time outside the sandbox, the time between tasks); the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_django import THREADS_ONE  # noqa: E402
from scripts.bench_pipeline import (  # noqa: E402
    Worker,
    broker_choose,
    cleanup,
    load,
    naive_items,
    platform_up,
    run_wait,
    workers_wait,
)

ITEM_TASK = "evaluation.tasks.item_evaluate"
# The test's own time: numpy imported first, then the test file run as a script (its exit caught).
OWN_WRAPPER = """import runpy, sys, time
import numpy
sys.argv = sys.argv[1:]  # unittest.main reads the test's own arguments: none
start = time.perf_counter()
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write(f"RCB-OWN {time.perf_counter() - start:.6f} {code}\\n")
"""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--forkserver", choices=["on", "off"], default="on")
    parser.add_argument("--uploads", type=int, default=31, help="uploads of one maintainer")
    parser.add_argument("--samples", type=int, default=20, help="samples per upload (33 items each; at most 20)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--concurrency", type=int, default=1, help="each worker's --concurrency")
    parser.add_argument("--window", type=float, help="cancel the load this many seconds after the first upload")
    parser.add_argument("--repeat", type=int, default=3, help="runs per item of the own-time measure (the median)")
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/rcb_benchthroughput")
    parser.add_argument(
        "--redis",
        default="claim",
        help="the broker's Redis database URL (emptied), or `claim`: one claimed as the test fixtures claim theirs",
    )
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-bench")
    parser.add_argument("--timeout", type=float, default=7200)
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs) and the database")
    args = parser.parse_args()
    args.cache = args.cache.resolve()
    return args


def environments_build(args, version) -> str:
    """Each task environment of the release built on the backend and on bwrap; the bwrap python with numpy."""
    from evaluation.executor import requirements_for_pip
    from sandbox import backend_get

    python = ""
    tasks = {t.environment_hash: t for t in version.tasks.all()}
    for name in dict.fromkeys([args.backend, "bwrap"]):
        backend = backend_get(name, cache_dir=args.cache)
        ok, why = backend.available()
        if not ok:
            sys.exit(f"the {name} backend is not available: {why}")
        for env_hash, task in tasks.items():
            requirements = requirements_for_pip(task.requirements)
            start = time.monotonic()
            built = backend.environment_build(env_hash=env_hash, requirements=requirements)
            print(f"  environment {env_hash[:12]} on {name}: ready in {time.monotonic() - start:.0f} s", flush=True)
            if name == "bwrap" and "numpy" in requirements:
                python = built.python
    if not python:
        sys.exit("no task environment of the demo holds numpy")
    return python


def own_times(python: str, run, repeat: int) -> dict[int, float]:
    """The median own time of each item's test, by snippet, run outside any sandbox (see the module's step 3)."""
    from evaluation.models import Outcome

    snippets = list(Outcome.objects.filter(run=run).order_by("pk").values_list("snippet_id", flat=True))
    env = {**os.environ, **THREADS_ONE}
    own: dict[int, float] = {}
    for snippet_id, (entry, files) in zip(snippets, naive_items(run), strict=True):
        seconds = []
        with tempfile.TemporaryDirectory(prefix="bench-own-") as folder:
            for name, data in files.items():
                Path(folder, name).parent.mkdir(parents=True, exist_ok=True)
                Path(folder, name).write_bytes(data)
            for _ in range(repeat):
                done = subprocess.run(
                    [python, "-B", "-c", OWN_WRAPPER, entry], cwd=folder, env=env, capture_output=True, text=True
                )
                line = [x for x in done.stderr.splitlines() if x.startswith("RCB-OWN ")]
                if not line or line[-1].split()[2] not in ("0", "None", "False"):
                    sys.exit(f"the own-time run of item {snippet_id} failed:\n{done.stderr[-2000:]}")
                seconds.append(float(line[-1].split()[1]))
        own[snippet_id] = statistics.median(seconds)
    return own


def main() -> None:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still stop the workers and drop the database
    tmp = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    load_start = load()
    print(f"load average (1, 5, 15 min) at the start: {load_start}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()  # the Redis database claimed, released by `cleanup`
    broker = broker_choose(args, claim)
    workers: list[Worker] = []
    try:
        # The warm-up run below is the one calibration.
        env = platform_up(args, tmp, broker, args.database, RELEASE_CALIBRATE_ON_PUBLISH="false")
        from django.contrib.auth.models import Group, User
        from django.db import connections

        from benchmarks.selectors import version_snippets
        from benchmarks.services.psets import pset_import
        from evaluation import services
        from evaluation.models import EvaluationRun, ModelEntry, Outcome

        version = pset_import(root=REPO / "benchmarks" / "demo", version_name="1.0.0", publish=True).version
        print("building the environments before timing ...", flush=True)
        python = environments_build(args, version)
        snippets = list(version_snippets(version=version))
        connections.close_all()
        workers = [Worker(i, env, tmp / f"worker{i}.log", concurrency=args.concurrency) for i in range(args.workers)]
        workers_wait(workers)
        start = time.monotonic()
        warm = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
        run_wait(warm.pk, args.timeout, workers)
        print(f"warm-up reference run: {len(snippets)} items in {time.monotonic() - start:.1f} s", flush=True)
        own = own_times(python, EvaluationRun.objects.get(pk=warm.pk), args.repeat)
        print(
            f"own time per item (median of {args.repeat}, outside any sandbox): "
            f"{1000 * statistics.mean(own.values()):.1f} ms mean, "
            f"{1000 * min(own.values()):.1f}-{1000 * max(own.values()):.1f} ms",
            flush=True,
        )

        uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
        data = "".join(
            json.dumps({"id": str(s.pk), "sample": k, "code": s.reference_code}) + "\n"
            for k in range(args.samples)
            for s in snippets
        ).encode()
        maintainer = User.objects.create_user("maintainer")
        maintainer.groups.add(Group.objects.get_or_create(name="maintainers")[0])
        done_before = {w.hostname: len(w.busy(ITEM_TASK)) for w in workers}
        load_before = load()
        print(f"uploading (load average {load_before}) ...", flush=True)
        start = time.monotonic()
        runs = [
            services.run_from_upload(model=uploader, version=version, data=data, user=maintainer)
            for _ in range(args.uploads)
        ]
        uploaded = time.monotonic() - start
        ids = [r.pk for r in runs]
        total = sum(r.total_items for r in runs)
        print(f"{len(runs)} uploads, {total} answers, stored in {uploaded:.1f} s", flush=True)
        deadline = start + (args.window or args.timeout)
        active = EvaluationRun.objects.filter(pk__in=ids, status__in=services.RUN_ACTIVE)
        while active.exists() and time.monotonic() < deadline:
            for worker in workers:
                worker.ready()  # exits when a worker died
            time.sleep(0.5)
        wall = time.monotonic() - start
        if active.exists():
            if not args.window:
                sys.exit(f"the load did not finish within {args.timeout:.0f} s")
            for run in active:
                services.run_cancel(run=run)
        load_end = load()
        outcomes = list(Outcome.objects.filter(run_id__in=ids).values("snippet_id", "status", "duration", "worker"))
        items = len(outcomes)
        bad = [o for o in outcomes if o["status"] != "passed"]
        time.sleep(3)  # the last tasks log their end just after their outcome is stored
        busy = [s for w in workers for s in w.busy(ITEM_TASK)[done_before[w.hostname] :]]
        own_sum = sum(own[o["snippet_id"]] for o in outcomes)
        sandbox = sum(o["duration"] or 0.0 for o in outcomes)
        slots = args.workers * args.concurrency
        cores = min(slots, os.cpu_count() or slots)
        limit = own_sum / cores

        print()
        print(
            f"load average (1, 5, 15 min): at the start {load_start}, before the load {load_before}, "
            f"at the end {load_end}"
        )
        print(
            f"backend {args.backend} (SANDBOX_FORKSERVER {args.forkserver}), {args.workers} worker(s) of concurrency "
            f"{args.concurrency} on {os.cpu_count()} cores; load: {args.uploads} uploads x {len(snippets)} x "
            f"{args.samples} = {total} answers{f', cancelled after {args.window:.0f} s' if args.window else ''}"
        )
        if bad:
            print(f"!! {len(bad)} item(s) did not pass, e.g. {bad[0]['status']}")
        print(f"items: {items} done; {len(busy)} item tasks in the worker logs (redeliveries and drops count there)")
        print(f"{'':44} {'s':>9} {'items/s':>9}")
        print(f"{'wall (first upload to last outcome)':44} {wall:9.1f} {items / wall:9.2f}")
        print(f"{'the limit: own time ' + f'{own_sum:.1f} s / {cores} cores':44} {limit:9.1f} {items / limit:9.2f}")
        print(
            f"wall / limit: {wall / limit:.2f}x ({limit / wall:.0%} of the limit's rate); "
            f"the uploads took {uploaded:.1f} s"
        )
        print("per item (ms):")
        print(f"  own (the test, outside any sandbox){'':9} {1000 * own_sum / items:8.1f}")
        print(f"  in the sandbox beyond own{'':19} {1000 * (sandbox - own_sum) / items:8.1f}  (Outcome.duration - own)")
        print(
            f"  in the task, outside the sandbox{'':12} {1000 * (sum(busy) - sandbox) / items:8.1f}  "
            "(worker busy - duration)"
        )
        print(f"  between tasks{'':31} {1000 * (slots * wall - sum(busy)) / items:8.1f}  ({slots} slots x wall - busy)")
        connections.close_all()
    finally:
        cleanup(args, workers, claim, args.database, tmp)


if __name__ == "__main__":
    main()
