"""The harness's cost per item: the tinyformer reference (tests/evaluation/packages/tinyformer) run in one bwrap
session under the harness, against the same test run bare (`python -B paper2code_test.py`, no harness) in the same
session, the two interleaved so that load on the machine weighs on both alike.

`--baseline FILE` also measures another version of sandbox/harness.py (e.g. the one before a change:
`git show REV:sandbox/harness.py > /tmp/old.py`), interleaved item by item with this tree's, so before
and after are compared under the same load. Prints ms per item (median) for the bare run and each harness, the
harness's cost (the difference) and the ratio to the bare run.
`--without-imports` also measures this tree's harness with no GuardSpec.imports (what it was before the guard
imported the task's imports at the answer's start), interleaved the same way.
`--package robustscale` runs that package's reference instead (its answer: the median absolute deviation, whose
helper imports statistics lazily; the guard imports what the task's files import at the answer's start).
Run: .venv/bin/python scripts/bench_harness_cost.py [--items 40] [--mode warm|cold] [--baseline FILE]
     [--package tinyformer|robustscale] [--without-imports]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PACKAGES = REPO / "tests" / "evaluation" / "packages"
# Per package: the answer's file and lines (the reference's own, left in place), the hidden files.
ANSWERS = {
    "tinyformer": ("layers.py", 56, 59, ("layers_ref.py", "paper2code_test.py")),
    "robustscale": ("robust.py", 26, 27, ("robust_ref.py", "paper2code_test.py")),
}


WITHOUT_IMPORTS = "this tree, no imports"


def harness_module(path: str | None):
    if path is None:
        from sandbox import harness

        return harness
    spec = importlib.util.spec_from_file_location("rcb_bench_harness", path)
    if spec is None or spec.loader is None:
        sys.exit(f"{path} is not a Python module that can be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--mode", default="warm", choices=("warm", "cold"))
    parser.add_argument("--baseline", help="another harness.py to measure beside this tree's")
    parser.add_argument("--package", default="tinyformer", choices=sorted(ANSWERS))
    parser.add_argument("--without-imports", action="store_true", help="also this tree's with no GuardSpec.imports")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from benchmarks.paper2code import passes
    from benchmarks.services.blobs import environment_hash
    from sandbox import Limits
    from sandbox.bwrap import BwrapBackend
    from sandbox.forkserver import ForkingSession, preload_modules

    harnesses = {"this tree": harness_module(None)}
    if args.baseline:
        harnesses[args.baseline] = harness_module(args.baseline)
    if args.without_imports:
        harnesses[WITHOUT_IMPORTS] = harnesses["this tree"]
    cache = Path(os.environ.get("SANDBOX_CACHE_DIR_BENCH", str(REPO / "var" / "sandbox-bench")))
    backend = BwrapBackend(cache, forkserver=args.mode == "warm")
    ok, why = backend.available()
    if not ok:
        sys.exit(f"bwrap is not available: {why}")
    answer_file, first, last, hidden = ANSWERS[args.package]
    files = {path.name: path.read_bytes() for path in (PACKAGES / args.package).iterdir() if path.is_file()}
    imports = tuple(preload_modules(files, answer=(answer_file, first, last)))
    limits = Limits(wall_seconds=120, memory_bytes=1024 * 1024 * 1024, processes=64, cpus=1.0)
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    times: dict[str, list[float]] = {"bare": [], **{name: [] for name in harnesses}}
    with backend.session(environment) as session:
        for index in range(args.items + 2):  # the first two start the fork server and fill the page cache
            for kind in times:
                harness = harnesses.get(kind, harnesses["this tree"])
                # A harness from before GuardSpec.imports (--baseline) imports nothing at the answer's start.
                fields = harness.GuardSpec.__dataclass_fields__
                known = {"imports": imports} if "imports" in fields and kind != WITHOUT_IMPORTS else {}
                guard = harness.GuardSpec(
                    answer_file=answer_file,
                    first_line=first,
                    last_line=last,
                    hidden_modules=tuple(name.removesuffix(".py") for name in hidden),
                    hidden_files=hidden,
                    **known,
                )
                nonce = harness.nonce_new()
                if kind == "bare":
                    run_files, command = files, [environment.python, "-B", "paper2code_test.py"]
                else:
                    run_files = {**files, **harness.harness_files(nonce)}
                    command = harness.harness_command(environment.python, "paper2code_test.py", guard)
                start = time.perf_counter()
                result = session.run(files=run_files, command=command, limits=limits)
                elapsed = time.perf_counter() - start
                good = passes(
                    exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr, timed_out=result.timed_out
                )
                if kind != "bare":
                    good = good and harness.harness_verdict(result.stdout, nonce).completed
                if not good:
                    sys.exit(f"the {kind} run did not pass: {result.stderr[-1500:]}")
                if index >= 2:
                    times[kind].append(elapsed)
        forking = isinstance(session, ForkingSession) and session.forking
    medians = {kind: 1000 * statistics.median(values) for kind, values in times.items()}
    print(
        f"{args.package} reference on bwrap {args.mode}{' (fork server)' if forking else ''}, {args.items} items "
        f"each, interleaved; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"bare test: {medians['bare']:7.1f} ms per item (median)")
    for kind in harnesses:
        print(
            f"{kind} harness: {medians[kind]:7.1f} ms per item; cost {medians[kind] - medians['bare']:6.1f} ms; "
            f"ratio {medians[kind] / medians['bare']:.2f}x the bare test"
        )


if __name__ == "__main__":
    main()
