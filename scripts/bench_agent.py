"""What an agent's command and an agent run cost on bwrap and docker, against baselines measured in the same run.

1. Per backend, the median (and 95th percentile) of `--commands` agent commands through the session's
   `command_run` in a workspace of the demo's first task (the files an agent starts with): `true` (the sandbox's
   own cost) and `python -c pass` (plus an interpreter's start). Baseline: a cold item run (`Session.run` of `true`
   with the fork server off: on docker a container's create, start and removal, which is what a container per
   command would cost).
2. Per backend, the wall time of the calibration agents (`reference`, which reads, edits, runs one command and
   submits, and `placeholder`, which submits at once) over the demo release through one real Celery worker
   (concurrency 1, the `llm` and `sandbox` queues, as the calibration test starts one), each against the
   single-shot `reference` run of the same release on the same backend and worker, and the pass rates (100% and 0%
   expected).
3. Per backend, items in flight (issue 23's shape): a scripted agent of `--turns` turns on each of the demo's
   snippets, answered by a local OpenAI-compatible server that takes `--latency` seconds per turn (it reads the
   masked file, puts the reference body in, then runs small commands, `python3 -c pass` and `ls`, until its last turn
   submits), on 2 workers: one for the `llm` queue (`--llm-slots` concurrency: each slot is an item thinking) and one
   for `sandbox,default` (concurrency 2, one per core). Reported: items in flight (an item from its first to its last
   step: the most at once and the time-weighted mean), the tool commands' latency as the model saw it (the tool
   steps' durations), and the wall time against the ideal, turns x latency / llm slots (the model's own time).

It uses a database of its own (PostgreSQL `rcb_benchagent`, dropped and created: one run of this script at a time)
and a Redis database claimed as the test fixtures claim theirs.
Run: .venv/bin/python scripts/bench_agent.py [--backends bwrap,docker] [--commands 20] [--no-runs]
     [--turns 20] [--latency 1] [--llm-slots 24] [--no-fleet]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
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
    from agents.workspace import Workspace
    from sandbox import Limits, backend_get

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
    # Both queues: an agent's turns are tasks on llm, its tools on sandbox (a sandbox-only worker waits forever).
    worker = Worker(
        0, {**env, "SANDBOX_BACKEND": backend_name}, tmp / f"worker-{backend_name}.log", queues="llm,sandbox,default"
    )
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


class FleetAgent:
    """The local model of part 3: per item, read the masked file, write the reference body with edit_file, run small
    commands until the last turn, which submits; each answer after `latency` seconds."""

    def __init__(self, version, *, turns: int, latency: float):
        from benchmarks.models import Snippet

        self.snippets = {s.name: s for s in Snippet.objects.filter(task__versions=version)}
        self.turns, self.latency = turns, latency

    def __call__(self, prompt: str, body: dict) -> dict:
        import json
        import re

        time.sleep(self.latency)
        messages = body["messages"]
        named = re.search(r'the block "([^"]+)"', messages[0]["content"])
        if named is None:
            raise ValueError("the first message names no block")
        snippet = self.snippets[named.group(1)]
        turn = sum(1 for m in messages if m["role"] == "assistant")

        def call(name: str, **arguments) -> dict:
            return {
                "content": f"turn {turn}",
                "tool_calls": [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }

        if turn == 0:
            return call("read_file", path=snippet.file_path)
        if turn == 1:
            text = next(m["content"] for m in messages if m["role"] == "tool")
            start = text.rfind("\n", 0, text.index(f'# TODO: Implement block "{snippet.name}"')) + 1
            end = text.index("line(s) of code.", start) + len("line(s) of code.\n")
            return call(
                "edit_file", path=snippet.file_path, old_string=text[start:end], new_string=snippet.reference_code
            )
        if turn >= self.turns - 1:
            return call("submit")
        return call("run", command="python3 -c pass" if turn % 2 else "ls")


def fleet_measure(backend_name: str, *, env: dict[str, str], tmp: Path, version, args) -> dict[str, float]:
    """Part 3 (see the module's docstring): items in flight, tool latency and wall against the ideal."""
    from django.db import connections

    from agents.models import AgentStep
    from evaluation import services
    from evaluation.models import EvaluationRun, RunScore
    from scripts.bench_pipeline import run_wait

    # The tests' local model server, loaded by name: a test helper, not application code for the type check.
    openai_server = importlib.import_module("tests.evaluation.openai_server").openai_server

    connections.close_all()
    backend_env = {**env, "SANDBOX_BACKEND": backend_name}
    with openai_server(responder=FleetAgent(version, turns=args.turns, latency=args.latency)) as server:
        model = services.model_register(
            name=f"fleet-{backend_name}",
            display_name=f"Fleet {backend_name}",
            litellm_model="openai/fleet",
            api_base=server.base_url,
            api_key="k",
        )
        workers = [
            Worker(1, backend_env, tmp / f"fleet-llm-{backend_name}.log", queues="llm", concurrency=args.llm_slots),
            Worker(2, backend_env, tmp / f"fleet-sandbox-{backend_name}.log", queues="sandbox,default", concurrency=2),
        ]
        try:
            deadline = time.monotonic() + 180
            while not all(w.ready() for w in workers):
                if time.monotonic() > deadline:
                    sys.exit(f"the workers did not start:\n{workers[0].output()[-3000:]}")
                time.sleep(0.2)
            start = time.monotonic()
            run = services.run_start(model=model, version=version, mode="agent", budget={"turns": args.turns})
            run_wait(run.pk, args.timeout, workers)
            wall = time.monotonic() - start
        finally:
            for worker in workers:
                worker.stop()
    assert EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED
    score = RunScore.objects.get(run=run, paper=None, split="")
    steps = list(
        AgentStep.objects.filter(trajectory__run=run).values_list(
            "trajectory", "created_at", "role", "tool_name", "duration"
        )
    )
    spans: dict[int, list] = {}
    for trajectory, at, *_ in steps:
        span = spans.setdefault(trajectory, [at, at])
        span[0], span[1] = min(span[0], at), max(span[1], at)
    edges = sorted([(a.timestamp(), 1) for a, _ in spans.values()] + [(b.timestamp(), -1) for _, b in spans.values()])
    in_flight = most = 0
    weighted, last = 0.0, edges[0][0]
    for at, change in edges:
        weighted += in_flight * (at - last)
        in_flight, last = in_flight + change, at
        most = max(most, in_flight)
    mean_in_flight = weighted / max(1e-9, edges[-1][0] - edges[0][0])
    commands = [d for _, _, role, tool, d in steps if role == "tool" and tool == "run" and d is not None]
    turns = sum(1 for _, _, role, _, _ in steps if role == "assistant")
    ideal = turns * args.latency / args.llm_slots
    print(
        f"  {backend_name:6} {score.items} items, {turns} turns of {args.latency:g} s: wall {wall:.1f} s, ideal "
        f"{ideal:.1f} s ({wall / ideal:.2f}x); items in flight: at most {most}, mean {mean_in_flight:.1f}; "
        f"tool commands as the model saw them: {percentiles(commands)} over {len(commands)}; "
        f"pass rate {score.scaled_pass_rate:.0f}%",
        flush=True,
    )
    return {"wall": wall, "ideal": ideal, "most": most, "mean": mean_in_flight, "command": statistics.median(commands)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="bwrap,docker")
    parser.add_argument("--commands", type=int, default=20, help="commands timed per kind")
    parser.add_argument("--no-runs", action="store_true", help="only the command costs (no database or worker)")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox", help="sandbox cache")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for each run")
    parser.add_argument("--turns", type=int, default=20, help="part 3: the scripted agent's turns per item")
    parser.add_argument("--latency", type=float, default=1.0, help="part 3: the local model's seconds per turn")
    parser.add_argument("--llm-slots", type=int, default=24, help="part 3: the llm worker's concurrency")
    parser.add_argument("--no-fleet", action="store_true", help="skip part 3")
    parser.add_argument("--no-calibration", action="store_true", help="skip part 2")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    args.cache = args.cache.resolve()
    args.backend, args.forkserver, args.debug = backends[0], "off", False  # what platform_environment reads
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
        runs: dict = {}
        fleets: dict = {}
        if not args.no_runs:
            call_command("migrate", verbosity=0)
            call_command("import_pset", str(DEMO), version="bench-agent-1.0.0", publish=True, verbosity=0)
            from benchmarks.models import BenchmarkVersion

            version = BenchmarkVersion.objects.get(name="bench-agent-1.0.0")
            if not args.no_calibration:
                print("2. calibration agents over the demo release, one worker", flush=True)
                runs = {b: runs_measure(b, env=env, tmp=tmp, version=version, timeout=args.timeout) for b in backends}
            if not args.no_fleet:
                print(
                    f"3. a {args.turns}-turn scripted agent per item, {args.latency:g} s per model turn, "
                    f"an llm worker of {args.llm_slots} slots and a sandbox worker of 2",
                    flush=True,
                )
                fleets = {b: fleet_measure(b, env=env, tmp=tmp, version=version, args=args) for b in backends}
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
            if name in fleets:
                f = fleets[name]
                print(
                    f"  {name:6} {args.turns}-turn agents: {f['most']} items in flight at most (mean {f['mean']:.1f}), "
                    f"wall {f['wall']:.1f} s = {f['wall'] / f['ideal']:.2f}x the ideal; tool command median "
                    f"{1000 * f['command']:.0f} ms"
                )
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
