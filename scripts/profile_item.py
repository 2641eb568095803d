"""Where an item's time goes: one task package's item run N times in-process through the sandbox's item path (a
session of the chosen backend, the fork server warm, the harness and its guard as the pipeline runs them), split
into phases by timing the worker's own steps and by running variants of the same item in the same session,
interleaved so that load on the machine weighs on all alike:

- empty: `python -B empty.py` (a script that does nothing) in a fork: sandbox start and fork (the fork, its cgroups,
  namespaces, tmpfs folders, unpacking, result collection);
- harness, empty entry: the same under the harness (supervisor, test process, guard installed, nothing tested);
- bare test: the task's test entry point without harness (the test's own body plus the empty run);
- item: the test under the harness with the answer's guard, as the pipeline runs it.

Phases (medians, ms): preparation (worker side before the sandbox: preload lists, archive, cgroups), sandbox start
+ fork (empty run minus preparation), harness start (harness on an empty entry minus the empty run), test body
(bare minus empty), audit (item minus harness-empty minus test body: the guard's cost while the test runs),
teardown (cgroups removal, counted in preparation's column apart), and an agent's command (`true`) on bwrap.
Recording the outcome is the pipeline's database work: scripts/bench_item_overhead.py measures it.

`--compare TREE` runs the same measurement with another checkout's evaluation package (e.g. `git worktree add
/tmp/base main`) in a child process, alternating rounds with this tree's, and prints both side by side.
`--cprofile N` prints the worker-side top N functions by cumulative time.

Run as root (bwrap): .venv/bin/python scripts/profile_item.py [--items 30] [--backend bwrap|docker]
[--venv PATH] [--package DIR] [--compare TREE] [--cprofile 25]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(os.environ.get("RCB_PROFILE_TREE") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(REPO))

PACKAGE = Path(__file__).resolve().parents[1] / "tests" / "evaluation" / "packages" / "tinyformer"
WARMUP = 2


class Timers:
    """Wall time spent in named worker-side functions, per item (functions wrapped in place)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)
        spent = self.spent

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - start

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        taken = dict(self.spent)
        self.spent.clear()
        return taken


def measure(args) -> dict[str, list[float]]:
    """{phase or variant: [ms per item]} for this process's evaluation package."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from sandbox import Environment, Limits, backend_class, bwrap, cgroups, docker, forkserver, harness

    timers = Timers()
    timers.wrap(forkserver, "preload_modules", "prepare")
    timers.wrap(forkserver, "helper_calls", "prepare")
    timers.wrap(bwrap, "_archive", "prepare")
    timers.wrap(docker, "work_archive", "prepare")
    timers.wrap(cgroups.RunCgroups, "__init__", "prepare")
    timers.wrap(cgroups.RunCgroups, "remove", "teardown")
    cache = Path(os.environ.get("SANDBOX_CACHE_DIR") or REPO / "var" / "sandbox")
    backend_type: Any = backend_class(args.backend)
    backend = backend_type(cache, forkserver=True)
    ok, why = backend.available()
    if not ok:
        sys.exit(f"{args.backend} is not available: {why}")
    if args.venv:
        python = str(Path(args.venv) / "bin" / "python")
        environment = Environment(hash="profile", backend=args.backend, location=args.venv, python=python)
    else:
        from benchmarks.services.blobs import environment_hash

        environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    package = Path(args.package)
    files = {path.name: path.read_bytes() for path in package.iterdir() if path.is_file()}
    files["empty.py"] = b""
    guard = harness.GuardSpec(
        answer_file=args.answer_file,
        first_line=args.first_line,
        last_line=args.last_line,
        hidden_modules=tuple(args.hidden),
        hidden_files=tuple(f"{name}.py" for name in args.hidden),
    )
    limits = Limits(wall_seconds=120, memory_bytes=1024 * 1024 * 1024, processes=64, cpus=1.0)
    variants = {
        "empty": (False, "empty.py"),
        "harness_empty": (True, "empty.py"),
        "bare": (False, args.entry),
        "item": (True, args.entry),
    }
    times: dict[str, list[float]] = defaultdict(list)
    profiler = None
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile()
    workspace = Path(tempfile.mkdtemp(prefix="rcb-profile-"))
    os.chown(workspace, 65534, 65534)
    try:
        with backend.session(environment) as session:
            for index in range(args.items + WARMUP):
                for variant, (harnessed, entry) in variants.items():
                    elapsed, spent = _variant_run(
                        session,
                        variant=variant,
                        harnessed=harnessed,
                        entry=entry,
                        files=files,
                        guard=guard,
                        limits=limits,
                        timers=timers,
                        profiler=profiler,
                        profiled=variant == "item" and index >= WARMUP,
                    )
                    if index >= WARMUP:
                        times[variant].append(1000 * elapsed)
                        if variant == "item":
                            times["prepare"].append(1000 * spent.get("prepare", 0.0))
                            times["teardown"].append(1000 * spent.get("teardown", 0.0))
                if args.backend == "bwrap":
                    start = time.perf_counter()
                    result = session.command_run(workspace=workspace, command="true", limits=limits)
                    if result.exit_code != 0:
                        sys.exit(f"the command failed: {result.stderr[-1500:]}")
                    if index >= WARMUP:
                        times["command"].append(1000 * (time.perf_counter() - start))
    finally:
        os.rmdir(workspace)
    if profiler:
        import pstats

        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(args.cprofile)
    return dict(times)


def _variant_run(
    session,
    *,
    variant: str,
    harnessed: bool,
    entry: str,
    files,
    guard,
    limits,
    timers: Timers,
    profiler,
    profiled: bool,
) -> tuple[float, dict[str, float]]:
    """One warm run of a variant: the seconds it took and the timers' phases; exits unless it ran warm and passed."""
    from sandbox import harness

    python = session.environment.python
    nonce = harness.nonce_new()
    if harnessed:
        run_files = {**files, **harness.harness_files(nonce)}
        command = harness.harness_command(python, entry, guard)
    else:
        run_files, command = files, [python, "-B", entry]
    timers.take()
    if profiler and profiled:
        profiler.enable()
    start = time.perf_counter()
    result = session.run(files=run_files, command=command, limits=limits)
    elapsed = time.perf_counter() - start
    if profiler:
        profiler.disable()
    spent = timers.take()
    good = result.exit_code == 0 and result.forked
    if harnessed:
        good = good and harness.harness_verdict(result.stdout, nonce).completed
    if not good:
        sys.exit(f"{variant} did not run warm and pass: {result.exit_code} {result.stderr[-1500:]}")
    return elapsed, spent


def phases(times: dict[str, list[float]]) -> dict[str, float]:
    m = {name: statistics.median(values) for name, values in times.items()}
    body = m["bare"] - m["empty"]
    out = {
        "preparation (worker, before the sandbox)": m["prepare"],
        "sandbox start + fork + collection (empty run)": m["empty"] - m["prepare"] - m["teardown"],
        "cgroups removal": m["teardown"],
        "harness start (harness on an empty entry - empty)": m["harness_empty"] - m["empty"],
        "test body (bare - empty)": body,
        "audit (item - harness on empty - body)": m["item"] - m["harness_empty"] - body,
        "item, whole (harness, guard, test)": m["item"],
        "harness's own cost (item - bare)": m["item"] - m["bare"],
    }
    if "command" in m:
        out["agent command `true` (bwrap)"] = m["command"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--backend", default="bwrap", choices=("bwrap", "docker"))
    parser.add_argument("--venv", help="an existing venv to run in (default: build the numpy environment)")
    parser.add_argument("--package", default=str(PACKAGE), help="a task package folder (default: tinyformer)")
    parser.add_argument("--entry", default="paper2code_test.py")
    parser.add_argument("--answer-file", default="layers.py")
    parser.add_argument("--first-line", type=int, default=56)
    parser.add_argument("--last-line", type=int, default=59)
    parser.add_argument("--hidden", nargs="*", default=["layers_ref", "paper2code_test"])
    parser.add_argument("--compare", help="another checkout of the repository, measured alternately with this one")
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: alternations of the two trees")
    parser.add_argument("--cprofile", type=int, default=0, help="print the worker side's top N functions")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child of --compare
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args)))
        return
    if not args.compare:
        results = {"this tree": measure(args)}
    else:
        results = {"baseline": defaultdict(list), "this tree": defaultdict(list)}
        trees = {"baseline": args.compare, "this tree": str(REPO)}
        child = [a for a in sys.argv[1:] if not a.startswith("--compare") and a != args.compare]
        per_round = max(1, args.items // args.rounds)
        for _ in range(args.rounds):
            for name, tree in trees.items():
                out = subprocess.run(
                    [sys.executable, __file__, *child, "--items", str(per_round), "--json"],
                    env={**os.environ, "RCB_PROFILE_TREE": tree},
                    cwd=tree,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    sys.exit(f"{name} ({tree}) failed: {out.stderr[-3000:]}")
                for key, values in json.loads(out.stdout.splitlines()[-1]).items():
                    results[name][key] += values
    table = {name: phases(times) for name, times in results.items()}
    count = len(next(iter(results.values()))["item"])
    print(f"{args.backend}, {Path(args.package).name}, {count} items per tree; load {os.getloadavg()[0]:.1f}")
    names = list(table)
    print(f"{'phase (median ms per item)':52}" + "".join(f"{name:>12}" for name in names))
    for phase in table[names[0]]:
        print(f"{phase:52}" + "".join(f"{table[name].get(phase, float('nan')):12.1f}" for name in names))


if __name__ == "__main__":
    main()
