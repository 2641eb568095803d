"""Mutation testing of bench_pipeline's heavy set (torch, numpy, scipy tests on the CPU) through the fork server,
against the baseline of running the reference once per mutant in a fresh interpreter, measured in the same run.

1. A database of its own (SQLite in a temporary folder); the heavy environment built on bwrap before timing.
2. bench_pipeline's heavy set (`--papers`, `--snippets`), `--mutants` mutants per snippet (paper2code.mutation).
3. The recording of each paper (judging/sealed.py: what a validation's sealing checks make once per revision),
   timed apart.
4. Mutation as validation judges it (submissions/mutants.py), in bwrap with SANDBOX_FORKSERVER on: each mutant of a
   sealed snippet replayed on its recorded calls first, the paper's tests (stopping at the first failure) only for
   a mutant the replay cannot tell apart; a snippet's mutants replayed in one sandboxed process, each in a fork of its
   own (judging/replay_batch.py); with `--compare`, first with each mutant replayed alone (the way before batches),
   and the ratio of the two with whether their verdicts are identical; with `--tests-only`, as before replays: every
   mutant runs the whole test. Wall time, killed (by the replay, by the tests), equivalent, survived, test runs,
   replay batches.
5. Baseline: bench_django.naive (sequential, a fresh copy of the files and a fresh interpreter, no sandbox) runs the
   reference of each mutant's paper once per mutant.

Run: .venv/bin/python scripts/bench_mutation.py [--papers 20] [--snippets 212] [--mutants 10] [--cache DIR]
     [--tests-only] [--compare] [--no-baseline]
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
    parser.add_argument(
        "--tests-only", action="store_true", help="every mutant runs the whole test, no replay (the way before it)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also judge the mutants with each replayed alone (the way before batches) and print the ratio",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the fresh interpreters (a quick check)")
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

    from benchmarks.paper2code import noop, splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.paper2code.pset import read_pset
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import blob_store
    from evaluation.executor import limits_default, package_test, session_for
    from evaluation.judging.replay_batch import BatchStats
    from evaluation.judging.sealed import SnippetSpan, recording_make, snippet_key
    from evaluation.taskfiles import hidden_files
    from sandbox.harness import GuardSpec
    from scripts.bench_pipeline import REQUIREMENTS
    from submissions.mutants import mutant_replayer, mutants_judge, mutation_result

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
    packages = list(read_pset(root))
    mutants = {
        (package.id, path, snippet.index): mutants_generate(snippet.code, limit=args.mutants)
        for package in packages
        for path in package.annotated_paths
        for snippet in package.annotated[path].snippets
    }
    count = sum(len(found) for found in mutants.values())
    print(f"{count} mutants of {args.snippets} snippets in {args.papers} papers", flush=True)

    session = session_for(env_hash, requirements)
    limits = limits_default()
    start = time.monotonic()
    recordings, hidden = {}, {}
    for package in packages:
        annotated = {path: package.annotated[path] for path in package.annotated_paths}
        references = [s.code for parsed in annotated.values() for s in parsed.snippets]
        hidden[package.id] = hidden_files(
            dict(package.files), visible=set(annotated), references=references, entry_point=package.test_entry_point
        )
        recordings[package.id] = (
            None
            if args.tests_only
            else recording_make(
                session=session,
                files=package.files,
                test_entry_point=package.test_entry_point,
                hidden=hidden[package.id],
                snippets=[
                    SnippetSpan(snippet_key(path, s.index), path, s.start_line, s.end_line)
                    for path, parsed in annotated.items()
                    for s in parsed.snippets
                ],
                limits=limits,
                store=lambda content: blob_store(content=content).sha256,
            )
        )
    recorded = time.monotonic() - start
    sealed = sum(
        entry["sealed"] for recording in recordings.values() if recording for entry in recording["snippets"].values()
    )
    if not args.tests_only:
        print(f"recordings of {len(packages)} papers: {recorded:.1f} s; {sealed} of {len(mutants)} snippets sealed")

    guard = GuardSpec(failfast=not args.tests_only)

    def judge(batched: bool) -> tuple[float, list[dict], BatchStats]:
        stats = BatchStats()
        start = time.monotonic()
        results = []
        for package in packages:
            for path in package.annotated_paths:
                parsed = package.annotated[path]
                for snippet in parsed.snippets:

                    def test(mutant, parsed=parsed, snippet=snippet, package=package):
                        return package_test(
                            files={**package.files, parsed.path: splice(parsed, snippet, mutant.body).encode()},
                            test_entry_point=package.test_entry_point,
                            environment_hash=env_hash,
                            requirements=requirements,
                            limits=limits,
                            guard=guard,
                        )

                    replay = mutant_replayer(
                        session=session,
                        files=package.files,
                        hidden=hidden[package.id],
                        recording=recordings[package.id],
                        annotated=parsed,
                        position=snippet.index,
                        limits=limits,
                        batched=batched,
                        stats=stats,
                    )
                    found = mutants[package.id, path, snippet.index]
                    results.append(
                        mutation_result(mutants_judge(found, replay=replay, test=test, noop_body=noop(snippet)))
                    )
        return time.monotonic() - start, results, stats

    def summary(judged: float, results: list[dict], how: str) -> None:
        total = {
            key: sum(r[key] for r in results)
            for key in ("generated", "counted", "killed", "survived", "equivalent", "test_runs")
        }
        by_replay = sum(r["killed_by"]["replay"] for r in results)
        timeouts = sum(len(r["timeouts"]) for r in results)
        mode = (
            "forked from the warm fork server"
            if getattr(session, "forking", False)
            else "COLD (the fork server is off)"
        )
        print(
            f"mutation through the sandbox, {how}: {judged:.1f} s for {count} mutants ({judged / count:.3f} s each, "
            f"{mode}); killed {total['killed']} of {total['counted']} ({by_replay} by the replay, "
            f"{total['killed'] - by_replay} by the tests, {timeouts} by the time limit), {total['survived']} "
            f"survived, {total['equivalent']} equivalent on the recorded inputs; {total['test_runs']} test runs; "
            f"score {total['killed'] / max(1, total['counted']):.0%}",
            flush=True,
        )

    verdicts = lambda results: [(m["diff"], m["outcome"], m["by"]) for r in results for m in r["mutants"]]  # noqa: E731
    alone = None
    if args.compare and not args.tests_only:
        alone = judge(batched=False)
        summary(alone[0], alone[1], "replay first, each mutant replayed alone (the way before batches)")
        print(f"load average after it: {load()}", flush=True)
    judged, results, stats = judge(batched=not args.tests_only)
    how = (
        "every mutant runs the whole test (--tests-only)"
        if args.tests_only
        else "replay first, a snippet's mutants replayed in one sandboxed process"
    )
    summary(judged, results, how)
    if not args.tests_only:
        print(
            f"replay batches: {stats.batches}, {stats.batched} mutants judged in a batch, {stats.alone} replayed alone"
            + (f"; batches that relayed nothing, the last: {stats.failures[-1]!r}" if stats.failures else ""),
            flush=True,
        )
    if alone is not None:
        same = verdicts(alone[1]) == verdicts(results)
        print(
            f"ratio each alone / batched: {alone[0] / judged:.2f}x; verdicts " + ("identical" if same else "DIFFER"),
            flush=True,
        )
    print(f"load average after the mutation: {load()}", flush=True)
    if args.no_baseline:
        return

    items = [
        (package.test_entry_point, package.files)
        for package in packages
        for path in package.annotated_paths
        for snippet in package.annotated[path].snippets
        for _ in mutants[package.id, path, snippet.index]
    ]
    baseline, _ = naive(python, items)
    print(
        f"baseline, the reference once per mutant in a fresh interpreter: {baseline:.1f} s "
        f"({baseline / len(items):.3f} s each)"
    )
    print(f"ratio baseline / mutation: {baseline / judged:.2f}x (goal: at least 10x)")
    if not args.tests_only:
        print(f"ratio baseline / (recordings + mutation): {baseline / (recorded + judged):.2f}x")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
