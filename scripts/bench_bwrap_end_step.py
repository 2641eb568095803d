"""What bwrap's root end step costs an agent's command, against the end step as the command's own uid (as it was,
`bwrap.END_STEP_ROOT` off), both measured in this run.

Each round runs one agent command (`true`, then `python3 -c pass`) through `BwrapSession.command_run` in a workspace
holding one small file, with the end step as root (the guard: two more setpriv execs, for the unpack and the copy-back)
and as the sandbox user, alternately, so that both see the same load. Printed: median and 95th percentile of each,
their ratio, and the load average before and after (the machine is shared).

Run: .venv/bin/python scripts/bench_bwrap_end_step.py [--commands 40] [--cache var/sandbox]
(root, with bwrap; no database: the workspace is its own and removed at the end).
"""

from __future__ import annotations

import argparse
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
MB = 1024 * 1024


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=40, help="commands timed per kind and path")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox", help="sandbox cache")
    args = parser.parse_args()
    from sandbox import Limits, bwrap

    limits = Limits(
        wall_seconds=30, memory_bytes=512 * MB, processes=64, cpus=1.0, output_bytes=64 * 1024, disk_bytes=64 * MB
    )
    backend = bwrap.BwrapBackend(args.cache, forkserver=False)
    ok, why = backend.available()
    if not ok:
        sys.exit(f"bwrap is not available: {why}")
    environment = backend.environment_build(env_hash=hashlib.sha256(b"").hexdigest(), requirements="")
    session = backend.session_open(environment)
    workspace = Path(tempfile.mkdtemp(prefix="bench-bwrap-end-step-"))
    (workspace / "model.py").write_text("x = 1\n")
    print(f"load average before: {os.getloadavg()}")
    times: dict[tuple[str, bool], list[float]] = {}
    try:
        for command in ("true", "python3 -c pass"):
            for _ in range(args.commands):
                for root in (True, False):
                    bwrap.END_STEP_ROOT = root
                    begun = time.monotonic()
                    result = session.command_run(workspace=workspace, command=command, limits=limits)
                    times.setdefault((command, root), []).append(time.monotonic() - begun)
                    assert result.exit_code == 0, result.stderr
    finally:
        bwrap.END_STEP_ROOT = True
        session.close()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    for command in ("true", "python3 -c pass"):
        guarded, baseline = percentiles(times[(command, True)]), percentiles(times[(command, False)])
        print(
            f"{command!r}: root end step median {guarded[0] * 1000:.1f} ms (p95 {guarded[1] * 1000:.1f}), "
            f"as the sandbox user {baseline[0] * 1000:.1f} ms (p95 {baseline[1] * 1000:.1f}), "
            f"ratio {guarded[0] / baseline[0]:.2f}x"
        )


if __name__ == "__main__":
    main()
