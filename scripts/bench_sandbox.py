"""Evaluate the `reference` model on the demo benchmark with each available sandbox backend, against a naive baseline.

For every backend: items per second (sequential, one warm session as a worker keeps it) and the median per-item
overhead above the test's own run time. The naive baseline, measured in the same process, copies the whole task
folder and starts a fresh interpreter per item, with no sandbox. The test's own run time is a direct run of the
same spliced test in an already prepared folder.
Run: .venv/bin/python scripts/bench_sandbox.py [--repeat N]
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="passes over the 33 demo items per measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(
            VAR_DIR=tmp, SANDBOX_CACHE_DIR=os.environ.get("SANDBOX_CACHE_DIR", str(REPO / "var" / "sandbox"))
        )
        os.environ.pop("DATABASE_URL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        import logging

        from django.conf import settings
        from django.core.management import call_command

        from benchmarks.models import Snippet
        from benchmarks.paper2code import passes, splice
        from benchmarks.services.psets import pset_import
        from evaluation import executor
        from evaluation.taskfiles import task_annotated, task_files
        from sandbox import backend_class

        logging.disable(logging.WARNING)  # the local backend's per-run warning would drown the table
        call_command("migrate", verbosity=0)
        version = pset_import(root=REPO / "benchmarks" / "demo", version_name="bench-1.0.0", publish=True).version
        snippets = list(Snippet.objects.filter(task__versions=version).select_related("task").order_by("pk"))
        items = snippets * args.repeat

        def prepared(snippet: Snippet, folder: Path) -> Path:
            annotated = task_annotated(snippet.task, snippet.file_path)
            for path, data in task_files(snippet.task).items():
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                (folder / path).write_bytes(data)
            spliced = splice(annotated, annotated.snippets[snippet.position], snippet.reference_code)
            (folder / snippet.file_path).write_text(spliced)
            return folder

        local = backend_class("local")(Path(settings.SANDBOX_CACHE_DIR))
        python = {
            s.task.environment_hash: local.environment_build(
                env_hash=s.task.environment_hash, requirements=s.task.requirements
            ).python
            for s in snippets
        }

        # The test's own run time: a direct run in a folder prepared beforehand, best of three.
        own: dict[int, float] = {}
        for snippet in snippets:
            with tempfile.TemporaryDirectory() as work:
                folder = prepared(snippet, Path(work))
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    subprocess.run(
                        [python[snippet.task.environment_hash], "paper2code_test.py"],
                        cwd=folder,
                        capture_output=True,
                        check=True,
                    )
                    times.append(time.perf_counter() - start)
                own[snippet.pk] = min(times)

        def naive() -> tuple[float, list[float], int]:
            overheads, passed = [], 0
            start = time.perf_counter()
            for snippet in items:
                item_start = time.perf_counter()
                with tempfile.TemporaryDirectory() as work:
                    folder = prepared(snippet, Path(work) / "task")
                    proc = subprocess.run(
                        [python[snippet.task.environment_hash], "paper2code_test.py"],
                        cwd=folder,
                        capture_output=True,
                        text=True,
                    )
                    passed += passes(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr, timed_out=False)
                overheads.append(time.perf_counter() - item_start - own[snippet.pk])
            return time.perf_counter() - start, overheads, passed

        def backend_run(name: str) -> tuple[float, list[float], int]:
            executor._backend, executor._sessions = backend_class(name)(Path(settings.SANDBOX_CACHE_DIR)), {}
            for snippet in snippets[:1]:  # build environments and warm the session before timing
                executor.item_execute(snippet=snippet, code=snippet.reference_code)
            for snippet in snippets:
                executor.session_for(snippet.task.environment_hash, snippet.task.requirements)
            overheads, passed = [], 0
            start = time.perf_counter()
            for snippet in items:
                item_start = time.perf_counter()
                run = executor.item_execute(snippet=snippet, code=snippet.reference_code)
                overheads.append(time.perf_counter() - item_start - own[snippet.pk])
                passed += run.verdict.status == "passed"
            elapsed = time.perf_counter() - start
            executor.sessions_close()
            return elapsed, overheads, passed

        rows = [("naive baseline", *naive())]
        for name in ("local", "bwrap", "docker"):
            backend = backend_class(name)(Path(settings.SANDBOX_CACHE_DIR))
            ok, reason = backend.available()
            if not ok:
                print(f"{name}: not available here ({reason})")
                continue
            rows.append((name, *backend_run(name)))

        base_rate = len(items) / rows[0][1]
        print(
            f"{len(items)} items ({len(snippets)} demo snippets x {args.repeat}); "
            f"median test's own run time {statistics.median(own.values()) * 1000:.0f} ms"
        )
        print(f"{'mode':<16} {'items/s':>8} {'vs naive':>9} {'median overhead/item':>21} {'passed':>7}")
        for name, elapsed, overheads, passed in rows:
            rate = len(items) / elapsed
            print(
                f"{name:<16} {rate:>8.2f} {rate / base_rate:>8.2f}x {statistics.median(overheads) * 1000:>18.0f} ms"
                f" {passed:>4}/{len(items)}"
            )
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
