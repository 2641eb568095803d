"""What an agent's command costs on docker through the container's command channel, against the per-command
`docker exec`s it replaced, both measured in this run.

Each round runs one agent command (`true`, then `python3 -c pass`) in a workspace of the demo's first task (the files
an agent starts with) through the current AgentContainer (one `docker exec` per container: the command server
spawns the copy-in with the command and the end step) and through the baseline's (the AgentContainer of
BASELINE, a commit before the channel: two `docker exec`s per command, the end step a fresh Python), alternately, so
that both see the same load. Printed: median and 95th percentile of each, their ratio, and the load average before
and after (the machine is shared). Goal (issue 36): `true` under 50 ms median and 100 ms at the 95th percentile.

Run: .venv/bin/python scripts/bench_docker_commands.py [--commands 40] [--baseline COMMIT] [--cache var/sandbox]
(root, with a Docker engine; no database: the containers and workspaces are its own and removed at the end).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# main's last commit with a `docker exec` per job (the copy-in with the command, then the end step)
BASELINE = "1e63f49c257076425668fd5dabcc2c232aeab09c"
DEMO = REPO / "benchmarks" / "demo"
MB = 1024 * 1024


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def baseline_module(commit: str):
    """The baseline's docker_agent.py, loaded from git beside the current one (it imports only what still exists:
    the sandbox package was evaluation/sandbox/ then, its names the same)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:evaluation/sandbox/docker_agent.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("evaluation.sandbox.", "sandbox.")
    spec = importlib.util.spec_from_loader("rcb_baseline_docker_agent", loader=None)
    assert spec is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    exec(compile(source, f"{commit[:12]}:docker_agent.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=40, help="commands timed per kind and path")
    parser.add_argument("--baseline", default=BASELINE, help="the commit whose AgentContainer is the baseline")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox", help="sandbox cache")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    from agents.workspace import Workspace
    from sandbox import Limits, backend_get, docker_agent

    folder = Path(tempfile.mkdtemp(prefix="bench-docker-commands-"))
    settings.AGENT_WORKSPACE_DIR = folder
    limits = Limits(
        wall_seconds=30, memory_bytes=512 * MB, processes=64, cpus=1.0, output_bytes=64 * 1024, disk_bytes=64 * MB
    )
    backend = backend_get("docker", cache_dir=args.cache.resolve())
    ok, why = backend.available()
    if not ok:
        sys.exit(f"the docker backend is not available: {why}")
    environment = backend.environment_build(env_hash=hashlib.sha256(b"").hexdigest(), requirements="")
    files = {
        str(path.relative_to(task)): path.read_bytes()
        for task in sorted(p for p in DEMO.iterdir() if p.is_dir())[:1]
        for path in sorted(task.rglob("*"))
        if path.is_file()
    }
    paths = {"channel": docker_agent, "exec per job": baseline_module(args.baseline)}
    print(f"load average at the start: {load()}; {len(files)} files in the workspace", flush=True)
    samples: dict[tuple[str, str], list[float]] = {}
    containers, workspaces = {}, {}
    try:
        for name, module in paths.items():
            workspaces[name] = Workspace.create(name=name.replace(" ", "-"), files=files)
            containers[name] = module.AgentContainer(backend, environment, limits)
        for command in ("true", "python3 -c pass"):
            for round_ in range(args.commands + 1):
                for name in paths:
                    workspace = workspaces[name]
                    workspace.owned_by_sandbox()  # as the agent's `run` tool does before each command
                    start = time.monotonic()
                    result = containers[name].command_run(workspace=workspace.root, command=command, limits=limits)
                    took = time.monotonic() - start
                    if result.exit_code != 0 or "not copied back" in result.stderr:
                        sys.exit(f"{name}: {command!r} failed: {result}")
                    if round_:  # the first is a warm-up
                        samples.setdefault((name, command), []).append(took)
    finally:
        for container in containers.values():
            container.remove()
        for workspace in workspaces.values():
            workspace.remove()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average at the end: {load()}")
    for command in ("true", "python3 -c pass"):
        medians = {}
        for name in paths:
            median, p95 = percentiles(samples[(name, command)])
            medians[name] = median
            print(f"  {name:13} {command:16} median {1000 * median:6.1f} ms, p95 {1000 * p95:6.1f} ms")
        ratio = medians["exec per job"] / medians["channel"]
        print(f"  {'':13} {command:16} the channel is {ratio:.2f}x as fast (median)")


if __name__ == "__main__":
    main()
