"""What the harness adds to a warm item: the tinyformer package's reference (tests/evaluation/packages/tinyformer,
numpy) in forks of one bwrap fork server, run alternately under the harness with the answer's guard (as production
runs an item: `executor.answer_test`) and as its bare test entry point (`python -B paper2code_test.py`, the same
files, no harness); the difference of the medians is the harness's own cost per warm item.

Run: .venv/bin/python scripts/bench_harness_cost.py [--items 30] [--backend bwrap]
The machine may be shared: the load average is printed; compare only numbers of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PACKAGE = REPO / "tests" / "evaluation" / "packages" / "tinyformer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30, help="items of each kind")
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-bench")
    args = parser.parse_args()
    from scripts.bench_django import django_fresh

    django_fresh("bench-harness-", test_environment=False)
    from benchmarks.paper2code import parse
    from benchmarks.services import environment_hash
    from evaluation.executor import answer_test
    from evaluation.sandbox import Limits, backend_get

    files = {p.name: p.read_bytes() for p in sorted(PACKAGE.iterdir()) if p.is_file()}
    annotated = parse(files["layers.py"].decode(), "layers.py")
    backend = backend_get(args.backend, cache_dir=args.cache.resolve())
    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    limits = Limits(wall_seconds=60, memory_bytes=1 << 30, processes=64, cpus=1.0, output_bytes=1 << 20,
                    disk_bytes=64 << 20)
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    harnessed, bare = [], []
    with backend.session(environment) as session:
        for number in range(args.items + 2):  # the first two start the fork server: not counted
            snippet = annotated.snippets[number % len(annotated.snippets)]
            start = time.monotonic()
            item = answer_test(session=session, files=files, annotated=annotated, position=snippet.index,
                               code=snippet.code, test_entry_point="paper2code_test.py",
                               hidden_files=["layers_ref.py"], limits=limits, static_audit=True)
            harness_wall = time.monotonic() - start
            assert item.verdict.status == "passed", item.verdict.detail
            start = time.monotonic()
            result = session.run(files=files, command=[environment.python, "-B", "paper2code_test.py"],
                                 limits=limits)
            bare_wall = time.monotonic() - start
            assert result.exit_code == 0 and result.forked, result.stderr[-2000:]
            if number >= 2:
                harnessed.append((harness_wall, item.result.duration))
                bare.append((bare_wall, result.duration))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; all items forked: "
          f"{session.items_cold == 0}")
    for label, index in (("wall per item (worker's view)", 0), ("in the sandbox (ExecResult.duration)", 1)):
        h = statistics.median(x[index] for x in harnessed)
        b = statistics.median(x[index] for x in bare)
        print(f"{label:38} harness {1000 * h:7.1f} ms  bare {1000 * b:7.1f} ms  harness adds {1000 * (h - b):6.1f} ms")


if __name__ == "__main__":
    main()
