"""Mutation testing of bench_pipeline's heavy set (torch, numpy, scipy tests on the CPU) through the fork server,
against the baseline of running the reference once per mutant in a fresh interpreter, measured in the same run.

1. A database of its own (SQLite in a temporary folder); the heavy environment built on bwrap before timing.
2. bench_pipeline's heavy set (`--papers`, `--snippets`), `--mutants` mutants per snippet (paper2code.mutation).
3. Mutation: every mutant spliced as an answer and tested by `package_test` (what validation runs) in bwrap with
   SANDBOX_FORKSERVER on: wall time, killed, timed out.
4. Baseline: bench_django.naive (sequential, a fresh copy of the files and a fresh interpreter, no sandbox) runs the
   reference of each mutant's paper once per mutant.

Run: .venv/bin/python scripts/bench_mutation.py [--papers 20] [--snippets 212] [--mutants 10] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_django import THREADS_ONE, naive  # noqa: E402
from scripts.bench_pipeline import CALIBRATE, environments_build, load, papers_plan, pset_heavy_generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--snippets", type=int, default=212)
    parser.add_argument("--mutants", type=int, default=10)
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-bench")
    args = parser.parse_args()
    args.cache, args.backend = args.cache.resolve(), "bwrap"
    tmp = Path(tempfile.mkdtemp(prefix="bench-mutation-"))
    print(f"load average at the start: {load()}; {os.cpu_count()} cores; folder {tmp}", flush=True)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
            "SANDBOX_BACKEND": "bwrap",
            "SANDBOX_CACHE_DIR": str(args.cache),
            "SANDBOX_FORKSERVER": "true",
            "MEDIA_ROOT": str(tmp / "media"),
            "CELERY_BROKER_URL": "memory://",
            **THREADS_ONE,
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks.paper2code import splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.paper2code.pset import read_pset
    from benchmarks.paper2code.requirements import requirements_vetted
    from evaluation.executor import limits_default, package_test, session_for
    from scripts.bench_pipeline import REQUIREMENTS

    call_command("migrate", verbosity=0)
    env_hash, python = environments_build(args)
    per_second = float(
        subprocess.run(
            [python, "-c", CALIBRATE], capture_output=True, text=True, check=True, env={**os.environ, **THREADS_ONE}
        ).stdout.strip()
    )
    root = tmp / "pset"
    pset_heavy_generate(root, papers_plan(args.papers, args.snippets), per_second=per_second, paper_bytes=20_000)
    requirements = requirements_vetted(REQUIREMENTS)
    items = []  # (package, mutated files)
    for package in read_pset(root):
        for path in package.annotated_paths:
            parsed = package.annotated[path]
            for snippet in parsed.snippets:
                for mutant in mutants_generate(snippet.code, limit=args.mutants):
                    items.append((package, {**package.files, path: splice(parsed, snippet, mutant.body).encode()}))
    print(f"{len(items)} mutants of {args.snippets} snippets in {args.papers} papers", flush=True)

    session = session_for(env_hash, requirements)
    limits = limits_default()
    start = time.monotonic()
    killed = timeouts = 0
    for package, files in items:
        run = package_test(
            files=files,
            test_entry_point=package.test_entry_point,
            environment_hash=env_hash,
            requirements=requirements,
            limits=limits,
        )
        killed += run.verdict.status != "passed"
        timeouts += run.verdict.category == "timeout"
    forked = time.monotonic() - start
    mode = "forked from the warm fork server" if getattr(session, "forking", False) else "COLD (the fork server is off)"
    print(
        f"mutation through the sandbox: {forked:.1f} s for {len(items)} mutants ({forked / len(items):.3f} s each, "
        f"{mode}); killed {killed}, of them {timeouts} by the time limit; score {killed / len(items):.0%}",
        flush=True,
    )

    baseline, _ = naive(python, [(package.test_entry_point, package.files) for package, _ in items])
    print(
        f"baseline, the reference once per mutant in a fresh interpreter: {baseline:.1f} s "
        f"({baseline / len(items):.3f} s each)"
    )
    print(f"ratio baseline / mutation: {baseline / forked:.2f}x (goal: at least 5x)")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
