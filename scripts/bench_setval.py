"""Whole-set validation (`validate_pset --workers`) against one warm reference run of the same set, in one script run
on the same workers (issue 36, item 3).

The set is `scripts/bench_pipeline.py`'s (real code: tests that import torch, numpy, scipy and, with `--set
heterogeneous`, two real modules of the environment each, a spread of test durations, nested snippets), with one
shared environment (numpy, scipy, torch) as the published set has. In order:
1. A fresh database (`--database`, dropped and created) and a Redis database as the broker (`--redis URL`, or one
   claimed as the test fixtures claim theirs), emptied;
   the environment built before anything is timed; the set generated and imported with `import_pset --publish`.
2. `--workers` real Celery workers (queues sandbox and default). They run the two runs `import_pset --publish`
   starts (each task's test manifest is made then, their fork servers warm up); then the reference model runs the
   set again (`--warm-run`: twice): that warm run is the baseline (its wall from `run_start` to its completion).
3. `validate_pset --workers --environment <the shared requirements>` on the same folder, through the same workers
   (their fork servers warm): its wall from the command's start to its end.
Printed: both walls, their ratio (the issue's goal: 2.5x), the load average at the start and the end, the test runs
validation made by kind with the seconds its checks took, and the fork servers' starts in the workers' logs.
`--json OUT` writes validate_pset's report (what a before/after comparison of the reports reads).

Run: .venv/bin/python scripts/bench_setval.py [--papers 20] [--snippets 212] [--set heterogeneous] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_django import THREADS_ONE  # noqa: E402
from scripts.bench_pipeline import (  # noqa: E402
    CALIBRATE,
    REQUIREMENTS,
    VERSION,
    Worker,
    broker_choose,
    cleanup,
    environments_build,
    first_run,
    load,
    papers_plan,
    platform_up,
    pset_heavy_generate,
    run_wait,
    workers_wait,
)

TASK = "submissions.tasks.set_paper_validate"
RECEIVED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] received")
ENDED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] (?:succeeded|raised|failed|retry)")


def workers_idle(workers: list[Worker], timeout: float) -> None:
    """Wait until every task the workers received has ended (the runs and the dataset the import started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = [w.output() for w in workers]
        if all(set(RECEIVED.findall(log)) <= set(ENDED.findall(log)) for log in logs):
            return
        time.sleep(1)
    sys.exit("the workers did not become idle")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--snippets", type=int, default=212, help="snippets of the whole set (spread over papers)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="Celery workers (concurrency 1)")
    parser.add_argument("--set", choices=["homogeneous", "heterogeneous"], default="heterogeneous", dest="kind")
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--forkserver", choices=["on", "off"], default="on")
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/rcb_benchsetval")
    parser.add_argument(
        "--redis",
        default="claim",
        help="the broker's Redis database URL (emptied), or `claim`: one claimed as the test fixtures claim theirs",
    )
    parser.add_argument("--paper-kb", type=int, default=290)
    parser.add_argument("--steps-per-second", type=float, help="the workload's calibration, to compare runs")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-bench")
    parser.add_argument("--timeout", type=float, default=7200)
    parser.add_argument("--json", type=Path, dest="json_out", help="write validate_pset's report here")
    parser.add_argument("--warm-run", action="store_true", help="one more reference run before the measured one")
    parser.add_argument("--skip-reference", action="store_true", help="validation only (no ratio): for profiling")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, set) and database")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    args.cache = args.cache.resolve()
    args.concurrency = 1
    return args


def main() -> None:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still stop the workers and drop the database
    tmp = Path(tempfile.mkdtemp(prefix="bench-setval-"))
    load_start = load()
    print(f"load average (1, 5, 15 min) at the start: {load_start}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()  # the Redis database claimed, released by `cleanup`
    broker = broker_choose(args, claim)
    workers: list[Worker] = []
    try:
        env = platform_up(args, tmp, broker, args.database)
        from django.core.management import call_command
        from django.db import connections

        print("building the environment before timing ...", flush=True)
        _env_hash, python = environments_build(args)
        per_second = args.steps_per_second or float(
            subprocess.run(
                [python, "-c", CALIBRATE], capture_output=True, text=True, check=True, env={**os.environ, **THREADS_ONE}
            ).stdout.strip()
        )
        plans = papers_plan(args.papers, args.snippets, heterogeneous=args.kind == "heterogeneous")
        root = tmp / "pset"
        pset_heavy_generate(root, plans, per_second=per_second, paper_bytes=args.paper_kb * 1000)
        requirements = tmp / "requirements.txt"
        requirements.write_text(REQUIREMENTS, encoding="utf-8")
        call_command("import_pset", str(root), version=VERSION, publish=True, verbosity=0)
        print(
            f"set: {len(plans)} papers, {sum(p.snippets for p in plans)} snippets ({args.kind}), test bodies "
            f"{sum(p.seconds for p in plans):.1f} s over the papers (workload {per_second:.0f} steps/s)",
            flush=True,
        )

        from benchmarks.models import BenchmarkVersion
        from evaluation import services
        from evaluation.models import EvaluationRun, ModelEntry, Outcome
        from submissions.models import SetValidation

        connections.close_all()
        workers = [Worker(i, env, tmp / f"worker{i}.log") for i in range(args.workers)]
        workers_wait(workers)
        version = BenchmarkVersion.objects.get(name=VERSION)
        reference = None
        workers_idle(workers, args.timeout)  # the runs `import_pset --publish` started
        if not args.skip_reference:
            if args.warm_run:  # the publish's two runs warmed the workers and made the manifests already
                first_run(version, workers, timeout=args.timeout)
                workers_idle(workers, args.timeout)
            start = time.monotonic()
            run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
            run_wait(run.pk, args.timeout, workers)
            reference = time.monotonic() - start
            items = Outcome.objects.filter(run=EvaluationRun.objects.get(pk=run.pk))
            passed = items.filter(status="passed").count()
            print(f"warm reference run: {items.count()} items ({passed} passed) in {reference:.1f} s", flush=True)

        workers_idle(workers, args.timeout)
        print(f"validate_pset --workers ... (load average {load()})", flush=True)
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        failed = ""
        try:
            call_command(
                "validate_pset",
                str(root),
                environment=requirements,
                workers=True,
                timeout=args.timeout,
                json_out=args.json_out,
                stdout=out,
                stderr=err,
            )
        except Exception as exc:  # a failing set still has its time and report
            failed = f"{type(exc).__name__}: {exc}"
        validation = time.monotonic() - start
        run_of = SetValidation.objects.order_by("-pk").first()
        load_end = load()

        print()
        print(f"load average (1, 5, 15 min): at the start {load_start}, at the end {load_end}")
        print(f"validate_pset: {out.getvalue().strip().splitlines()[-1] if out.getvalue().strip() else failed}")
        if failed:
            print(f"!! validate_pset: {failed}\n{out.getvalue()[-3000:]}")
        by_kind: dict[str, list[float]] = {}
        for paper in run_of.papers.all() if run_of else []:
            for check in paper.checks:
                by_kind.setdefault(check["key"].split(":", 1)[0], []).append(check["duration"] or 0.0)
        print("validation's checks (count, seconds summed over the workers, seconds per check):")
        for kind, durations in by_kind.items():
            print(f"  {kind:12} {len(durations):5d} {sum(durations):9.1f} {sum(durations) / len(durations):7.2f}")
        for worker in workers:
            starts = worker.fork_starts()
            print(f"  {worker.hostname}: {len(worker.busy(TASK))} paper task(s), {len(starts)} fork server start(s)")
        print(f"{'':36} {'wall s':>8} {'ratio':>7}")
        if reference is not None:
            print(f"{'one warm reference run':36} {reference:8.1f} {1:6.2f}x")
            print(f"{'validate_pset --workers':36} {validation:8.1f} {validation / reference:6.2f}x")
        else:
            print(f"{'validate_pset --workers':36} {validation:8.1f}")
        connections.close_all()
    finally:
        cleanup(args, workers, claim, args.database, tmp)


if __name__ == "__main__":
    main()
