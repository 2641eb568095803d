"""A heavy problem set (tests that import torch and numpy on the CPU, a spread of test durations) evaluated under the
harness on bwrap and docker by parallel workers, warm (fork server) and cold (a fresh sandbox and interpreter per
item), against the naive baseline measured in the same run: sequential, a fresh copy and a fresh interpreter per
item, no sandbox.

Each worker is a process with its own bwrap session (so its own fork server), as a Celery worker of concurrency 1
has; the items go through `evaluation.executor.harness_run` with the answer's guard, as production runs them. The
Celery pipeline around it (queueing, database, scoring) is not measured here (issue 14 item 2).

Prints wall time, the sum of the tests' own time (each test measures its body, without interpreter start and
imports), the limit (own time / workers), the ratio to the limit and the ratio against the naive baseline.
Run: .venv/bin/python scripts/bench_forkserver.py [--papers 20] [--snippets 10] [--workers 2] [--backends bwrap,docker]
      [--modes cold,warm]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_django import OWN, naive  # noqa: E402

if TYPE_CHECKING:  # imported where used, after django.setup()
    from sandbox.bwrap import BwrapBackend
    from sandbox.docker import DockerBackend

REQUIREMENTS = "numpy\ntorch==2.13.0\n"
ENTRY = """import time
import unittest

import numpy as np
import torch

import model


class TestSnippet(unittest.TestCase):
    def test_snippet(self):
        start = time.perf_counter()
        out = model.forward({iterations})
        self.assertTrue(bool(torch.isfinite(out).all()))
        self.assertEqual(np.asarray(out.shape).tolist(), [64, 64])
        print(f"RCB-OWN {{time.perf_counter() - start:.4f}}")


if __name__ == "__main__":
    unittest.main()
"""
MODEL = """import torch


def forward(iterations):
    # paper2code snippet start
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 64, generator=generator)
    w = torch.randn(64, 64, generator=generator) / 8
    for _ in range(iterations):
        x = torch.tanh(x @ w)
    return x
    # paper2code snippet end
"""
ANSWER_LINES = (6, 11)  # the snippet's body in model.py, watched by the guard as an answer's
CALIBRATE = """import time, torch
torch.set_num_threads(1)
x, w = torch.randn(64, 64), torch.randn(64, 64) / 8
start = time.perf_counter()
for _ in range(20000):
    x = torch.tanh(x @ w)
print(20000 / (time.perf_counter() - start))
"""


def durations(papers: int, snippets: int) -> list[float]:
    """Seconds of test body per item: most under 0.5 s, some about 1 s, a few several seconds (fixed seed)."""
    rng = random.Random(14)
    spread = []
    for _ in range(papers * snippets):
        draw = rng.random()
        spread.append(
            rng.uniform(0.02, 0.5) if draw < 0.85 else rng.uniform(0.5, 1.5) if draw < 0.97 else rng.uniform(2.0, 4.0)
        )
    return spread


def items_for(seconds: list[float], per_second: float) -> list[dict[str, bytes]]:
    return [
        {
            "paper2code_test.py": ENTRY.format(iterations=max(1, int(s * per_second))).encode(),
            "model.py": MODEL.encode(),
        }
        for s in seconds
    ]


def limits():
    from sandbox import Limits

    return Limits(wall_seconds=120, memory_bytes=2048 * 1024 * 1024, processes=64, cpus=1.0)


def forking_backend(name: str, cache: Path, *, forkserver: bool) -> BwrapBackend | DockerBackend:
    """The backend named, with its fork server on or off: bwrap and docker are the backends that have one."""
    from sandbox.bwrap import BwrapBackend
    from sandbox.docker import DockerBackend

    backends: dict[str, type[BwrapBackend | DockerBackend]] = {"bwrap": BwrapBackend, "docker": DockerBackend}
    if name not in backends:
        sys.exit(f"the {name} backend has no fork server; choose {' or '.join(backends)}")
    return backends[name](cache, forkserver=forkserver)


def worker(name: str, cache: str, forkserver: bool, items: list[dict[str, bytes]], queue, results) -> None:
    import django

    django.setup()
    from evaluation.executor import harness_run
    from sandbox.forkserver import ForkingSession
    from sandbox.harness import GuardSpec

    backend = forking_backend(name, Path(cache), forkserver=forkserver)
    environment = backend.environment_build(env_hash="bench-torch", requirements=REQUIREMENTS)
    guard = GuardSpec(answer_file="model.py", first_line=ANSWER_LINES[0], last_line=ANSWER_LINES[1])
    with backend.session(environment) as session:
        while (index := queue.get()) is not None:
            run = harness_run(
                session=session, files=items[index], test_entry_point="paper2code_test.py", limits=limits(), guard=guard
            )
            own = OWN.search(run.result.stdout if run.result else "")
            results.put(
                (
                    index,
                    str(run.verdict.status),
                    float(own.group(1)) if own else None,
                    run.result.stderr[-1500:] if run.result else "",
                )
            )
        results.put(("forking", isinstance(session, ForkingSession) and session.forking if forkserver else None))


def sandboxed(
    name: str, cache: Path, items: list[dict[str, bytes]], *, forkserver: bool, workers: int
) -> tuple[float, list]:
    context = multiprocessing.get_context("fork")
    queue, results = context.Queue(), context.Queue()
    for index in range(len(items)):
        queue.put(index)
    for _ in range(workers):
        queue.put(None)
    start = time.monotonic()
    processes = [
        context.Process(target=worker, args=(name, str(cache), forkserver, items, queue, results))
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    outcomes: list[tuple] = []  # (item, status, own seconds, stderr's end)
    forking: list[tuple] = []  # ("forking", whether the worker's session forked)
    while len(forking) < workers:
        message = results.get(timeout=3600)
        (forking if message[0] == "forking" else outcomes).append(message)
    wall = time.monotonic() - start
    for process in processes:
        process.join()
    failed = [o for o in outcomes if o[1] != "passed"]
    if failed:
        sys.exit(f"{len(failed)} item(s) did not pass, e.g. {failed[0]}")
    if forkserver and not all(f[1] for f in forking):
        sys.exit("a worker's fork server fell back to cold starts (see the log)")
    return wall, [o[2] for o in outcomes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--snippets", type=int, default=10, help="items per paper")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--backends", default="bwrap,docker", help="comma-separated; bwrap also builds the naive venv")
    parser.add_argument("--modes", default="cold,warm", help="cold, warm or both")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from sandbox.bwrap import BwrapBackend

    cache = Path(os.environ.get("SANDBOX_CACHE_DIR_BENCH", str(REPO / "var" / "sandbox-bench")))
    backend = BwrapBackend(cache, forkserver=False)
    ok, why = backend.available()
    if not ok:
        sys.exit(f"bwrap is not available: {why}")
    print("building the environment (numpy, torch) once ...", flush=True)
    environment = backend.environment_build(env_hash="bench-torch", requirements=REQUIREMENTS)
    calibrate = subprocess.run(
        [environment.python, "-c", CALIBRATE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    per_second = float(calibrate.stdout.strip())
    seconds = durations(args.papers, args.snippets)
    items = items_for(seconds, per_second)
    entries = [("paper2code_test.py", files) for files in items]
    print(
        f"{len(items)} items ({args.papers} papers x {args.snippets}), tests import torch and numpy; "
        f"{args.workers} workers on {os.cpu_count()} cores",
        flush=True,
    )
    start_load = os.getloadavg()
    naive(environment.python, entries[:1])  # the page cache holds torch for every mode alike
    rows = {}
    print("naive baseline ...", flush=True)
    rows["naive (sequential, fresh interpreter, no sandbox)"] = naive(environment.python, entries)
    labels = {"cold": "cold (fresh sandbox and interpreter per item)", "warm": "warm (fork server per worker)"}
    for name in args.backends.split(","):
        other = forking_backend(name, cache, forkserver=False)
        ok, why = other.available()
        if not ok:
            sys.exit(f"{name} is not available: {why}")
        print(f"building the {name} environment once ...", flush=True)
        other.environment_build(env_hash="bench-torch", requirements=REQUIREMENTS)
        for mode in args.modes.split(","):
            print(f"{name} {mode} ...", flush=True)
            rows[f"{name} {labels[mode]}"] = sandboxed(
                name, cache, items, forkserver=mode == "warm", workers=args.workers
            )
    base_wall, base_own = rows["naive (sequential, fresh interpreter, no sandbox)"]
    limit = sum(base_own) / args.workers
    print(
        f"\nload average (1, 5, 15 min) at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
        f"(at the start: {' '.join(f'{x:.1f}' for x in start_load)}); other work on the machine inflates every row"
    )
    print(
        f"the tests' own time: {sum(base_own):.1f} s (the naive run's, one item at a time); "
        f"the limit: {limit:.1f} s (own time / {args.workers} cores)"
    )
    print(f"{'':52} {'wall s':>8} {'own s':>8} {'/limit':>7} {'/naive':>7}")
    for label, (wall, own) in rows.items():
        print(f"{label:52} {wall:8.1f} {sum(own):8.1f} {wall / limit:6.2f}x {wall / base_wall:6.2f}x")
    for mode in ("cold", "warm"):
        docker_row, bwrap_row = (rows.get(f"{name} {labels[mode]}") for name in ("docker", "bwrap"))
        if docker_row and bwrap_row:
            print(f"docker {mode} / bwrap {mode}: {docker_row[0] / bwrap_row[0]:.2f}x")
    print(
        "own s: the tests' own time summed in that mode (each test measures its body, without interpreter start "
        "and imports)"
    )


if __name__ == "__main__":
    main()
