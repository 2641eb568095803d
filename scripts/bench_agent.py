"""What an agent's command and an agent run cost on bwrap and docker, against baselines measured in the same run.

1. Per backend, the median (and 95th percentile) of `--commands` agent commands through the session's
   `command_run` in a workspace of the demo's first task (the files an agent starts with): `true` (the sandbox's
   own cost) and `python -c pass` (plus an interpreter's start). Baseline: a cold item run (`Session.run` of `true`
   with the fork server off: on docker a container's create, start and removal, which is what a container per
   command would cost).
2. Per backend, the wall time of the calibration agents (`reference`, which reads, edits, runs one command and
   submits, and `placeholder`, which submits at once) over the demo release through one real Celery worker
   (concurrency 1, the `sandbox` queue, as tests/conftest.py starts one), each against the single-shot `reference`
   run of the same release on the same backend and worker, and the pass rates (100% and 0% expected).

It uses a database of its own (PostgreSQL `rcb_benchagent`, dropped and created: one run of this script at a time)
and a Redis database claimed as the test fixtures claim theirs.
Run: .venv/bin/python scripts/bench_agent.py [--backends bwrap,docker] [--commands 20] [--no-runs]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_pipeline import Worker, platform_environment, postgres_drop, postgres_recreate  # noqa: E402
from scripts.redis_claim import redis_database_claimed  # noqa: E402

POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/rcb_benchagent"
DEMO = REPO / "benchmarks" / "demo"
MB = 1024 * 1024


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {1000 * statistics.median(ordered):7.1f} ms, p95 {1000 * p95:7.1f} ms"


def commands_measure(backend_name: str, *, count: int, cache: Path, files: dict[str, bytes]) -> dict[str, float]:
    """Median seconds of `true` and `python -c pass` as agent commands, and of a cold item run of `true`."""
    from evaluation.agents.workspace import Workspace
    from evaluation.sandbox import Limits, backend_get

    limits = Limits(wall_seconds=30, memory_bytes=512 * MB, processes=64, cpus=1.0, output_bytes=64 * 1024)
    backend = backend_get(backend_name, cache_dir=cache)
    ok, why = backend.available()
    if not ok:
        sys.exit(f"the {backend_name} backend is not available: {why}")
    backend.forkserver = False  # type: ignore[attr-defined]
    environment = backend.environment_build(env_hash=hashlib.sha256(b"").hexdigest(), requirements="")
    session = backend.session_open(environment)
    workspace = Workspace.create(name=f"bench-{backend_name}-{os.getpid()}", files=files)
    medians = {}
    try:
        for label, command in (("true", "true"), ("python -c pass", "python3 -c pass")):
            session.command_run(workspace=workspace.root, command=command, limits=limits)  # warm-up (first container)
            samples = []
            for _ in range(count):
                workspace.owned_by_sandbox()  # as the agent's `run` tool does before each command
                start = time.monotonic()
                result = session.command_run(workspace=workspace.root, command=command, limits=limits)
                samples.append(time.monotonic() - start)
                if result.exit_code != 0:
                    sys.exit(f"{backend_name}: {command!r} failed: {result}")
            medians[label] = statistics.median(samples)
            print(f"  {backend_name:6} agent command {label:15} {percentiles(samples)}", flush=True)
        samples = []
        for _ in range(count):
            start = time.monotonic()
            session.run(files={"model.py": b"x = 1\n"}, command=["true"], limits=limits)
            samples.append(time.monotonic() - start)
        medians["cold run"] = statistics.median(samples)
        print(f"  {backend_name:6} cold item run   true            {percentiles(samples)}", flush=True)
    finally:
        session.workspace_close(workspace=workspace.root)
        session.close()
        workspace.remove()
    return medians


def runs_measure(backend_name: str, *, env: dict[str, str], tmp: Path, version, timeout: float) -> dict[str, tuple]:
    """(wall seconds, scaled pass rate) of the single-shot reference run and the two calibration agents."""
    from django.db import connections

    from evaluation import services
    from evaluation.models import EvaluationRun, ModelEntry, RunScore
    from scripts.bench_pipeline import run_wait

    connections.close_all()
    worker = Worker(0, {**env, "SANDBOX_BACKEND": backend_name}, tmp / f"worker-{backend_name}.log", queues="sandbox")
    try:
        deadline = time.monotonic() + 120
        while not worker.ready():
            if time.monotonic() > deadline:
                sys.exit(f"the worker did not start:\n{worker.output()[-3000:]}")
            time.sleep(0.2)
        results = {}
        for label, model, mode in (
            ("single-shot reference", "reference", "single"),
            ("agent reference", "reference", "agent"),
            ("agent placeholder", "placeholder", "agent"),
        ):
            start = time.monotonic()
            run = services.run_start(
                model=ModelEntry.objects.get(name=model),
                version=version,
                mode=mode,
                budget={"turns": 6} if mode == "agent" else None,
            )
            run_wait(run.pk, timeout, [worker])
            wall = time.monotonic() - start
            score = RunScore.objects.get(run=run, paper=None, split="")
            assert EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED
            results[label] = (wall, score.scaled_pass_rate, score.items)
            print(
                f"  {backend_name:6} {label:22} {wall:7.1f} s for {score.items} items "
                f"({wall / score.items:5.2f} s/item), pass rate {score.scaled_pass_rate:.0f}%",
                flush=True,
            )
    finally:
        worker.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="bwrap,docker")
    parser.add_argument("--commands", type=int, default=20, help="commands timed per kind")
    parser.add_argument("--no-runs", action="store_true", help="only the command costs (no database or worker)")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox", help="sandbox cache")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for each run")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    args.cache = args.cache.resolve()
    args.backend, args.forkserver = backends[0], "off"  # what platform_environment reads
    tmp = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; folder {tmp}", flush=True)
    claim = contextlib.ExitStack()
    try:
        broker = claim.enter_context(
            redis_database_claimed(
                os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), wait_seconds=120, ttl_seconds=3 * 3600
            )
        )
        if not args.no_runs:
            postgres_recreate(POSTGRES_URL)
        env = platform_environment(args, tmp, broker, POSTGRES_URL)
        env["AGENT_WORKSPACE_DIR"] = str(tmp / "workspaces")
        os.environ.clear()
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        files = {
            str(path.relative_to(folder)): path.read_bytes()
            for folder in sorted(p for p in DEMO.iterdir() if p.is_dir())[:1]
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        print(f"1. agent commands ({args.commands} each, a workspace of {len(files)} files)", flush=True)
        costs = {b: commands_measure(b, count=args.commands, cache=args.cache, files=files) for b in backends}
        runs = {}
        if not args.no_runs:
            call_command("migrate", verbosity=0)
            call_command("import_pset", str(DEMO), version="bench-agent-1.0.0", publish=True, verbosity=0)
            from benchmarks.models import BenchmarkVersion

            version = BenchmarkVersion.objects.get(name="bench-agent-1.0.0")
            print("2. calibration agents over the demo release, one worker", flush=True)
            runs = {b: runs_measure(b, env=env, tmp=tmp, version=version, timeout=args.timeout) for b in backends}
        print("\nsummary (ratios against the baseline measured above)")
        for name in backends:
            cost = costs[name]
            print(
                f"  {name:6} command `true` {1000 * cost['true']:.0f} ms, `python -c pass` "
                f"{1000 * cost['python -c pass']:.0f} ms; a cold item run {1000 * cost['cold run']:.0f} ms "
                f"(command / cold run: {cost['true'] / cost['cold run']:.2f})"
            )
            if name in runs:
                single = runs[name]["single-shot reference"][0]
                for label in ("agent reference", "agent placeholder"):
                    wall, rate, _ = runs[name][label]
                    print(f"  {name:6} {label}: {wall:.1f} s, {wall / single:.2f}x the single-shot run, {rate:.0f}%")
    finally:
        claim.close()
        if not args.no_runs:
            with contextlib.suppress(Exception):
                from django.db import connections

                connections.close_all()
                postgres_drop(POSTGRES_URL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
