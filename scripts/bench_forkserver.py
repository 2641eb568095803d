"""Cold start against the warm fork server on bwrap, for items whose tests import numpy (and torch if the
environment has it), against the naive baseline (a fresh interpreter per item, no sandbox) in the same run.

The items run their entry point directly, not through the harness: the harness now execs a fresh interpreter for
the test, which the fork server does not run yet (SANDBOX_FORKSERVER stays off by default).
Run: .venv/bin/python scripts/bench_forkserver.py [--items N] [--torch]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ENTRY = '''
import {modules}
import model
x = numpy.arange(1000, dtype=float)
assert abs(float((x * x).sum()) - model.expected()) < 1e-6
'''
MODEL = "def expected():\n    return float(sum(i * i for i in range(1000)))\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--torch", action="store_true", help="the environment also installs and imports torch")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from evaluation.sandbox import Limits
    from evaluation.sandbox.bwrap import BwrapBackend

    cache = Path(os.environ.get("SANDBOX_CACHE_DIR", str(REPO / "var" / "sandbox-bench")))
    modules = "numpy, torch" if args.torch else "numpy"
    requirements = "numpy\ntorch==2.13.0\n" if args.torch else "numpy\n"
    files = {"paper2code_test.py": ENTRY.format(modules=modules).encode(), "model.py": MODEL.encode()}
    limits = Limits(wall_seconds=60, memory_bytes=2048 * 1024 * 1024)
    timings: dict[str, list[float]] = {}
    for label, forkserver in (("bwrap cold", False), ("bwrap fork server", True)):
        backend = BwrapBackend(cache, forkserver=forkserver)
        ok, why = backend.available()
        if not ok:
            sys.exit(f"bwrap is not available: {why}")
        environment = backend.environment_build(env_hash=f"bench-{'torch' if args.torch else 'numpy'}",
                                                requirements=requirements)
        with backend.session(environment) as session:
            times = []
            for _ in range(args.items + 1):
                start = time.monotonic()
                result = session.run(files=files, command=[environment.python, "-B", "paper2code_test.py"],
                                     limits=limits)
                times.append(time.monotonic() - start)
                if result.exit_code != 0:
                    sys.exit(f"{label}: an item failed: {result.stderr[-2000:]}")
            if forkserver and not session.forking:
                sys.exit("the fork server fell back to cold starts (see the log)")
            timings[label] = times[1:]  # the first item starts the fork server / warms the page cache
            python = environment.python
    naive = []
    for _ in range(args.items):
        with tempfile.TemporaryDirectory() as folder:
            for name, data in files.items():
                Path(folder, name).write_bytes(data)
            start = time.monotonic()
            subprocess.run([python, "-B", "paper2code_test.py"], cwd=folder, check=True)
            naive.append(time.monotonic() - start)
    timings = {"naive (fresh interpreter, no sandbox)": naive, **timings}
    base = statistics.median(naive)
    print(f"{args.items} items importing {modules}")
    print(f"{'':40} {'median s':>9} {'mean s':>8} {'vs naive':>9}")
    for label, times in timings.items():
        print(f"{label:40} {statistics.median(times):9.3f} {statistics.mean(times):8.3f} "
              f"{statistics.median(times) / base:8.2f}x")
    print("per item (s):")
    for label, times in timings.items():
        print(f"  {label}: {' '.join(f'{t:.3f}' for t in times)}")


if __name__ == "__main__":
    main()
