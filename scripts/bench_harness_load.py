"""Correct reference answers scored in parallel on a loaded machine: every one must pass (issue 18 item 5).

Items are the reference bodies of the tinyformer package's snippets (tests/evaluation/packages/tinyformer), spliced
and run through `evaluation.executor.answer_test` with the guard and the task's test manifest, as production runs
them, by parallel workers each with its own sandbox session (and so its own fork server), with CPU hogs beside them.
Any outcome but passed is caused by the harness or the sandbox, since every answer is the reference: the script
prints each one and their count, the wall time and the load average.

Run: .venv/bin/python scripts/bench_harness_load.py [--items 2000] [--workers 2] [--hogs 2] [--backend bwrap]
     [--mode warm|cold]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PACKAGE = REPO / "tests" / "evaluation" / "packages" / "tinyformer"
HIDDEN = ("layers_ref.py", "paper2code_test.py")
HOG = "while True:\n    pass\n"


@dataclass(frozen=True)
class LoadResult:
    items: int
    wrong: list[tuple[int, str, str]]  # (item, status, detail) of every item that did not pass
    wall: float
    load: tuple[float, float, float]


def _limits():
    from sandbox import Limits

    return Limits(
        wall_seconds=120,
        memory_bytes=1024 * 1024 * 1024,
        processes=64,
        cpus=1.0,
        output_bytes=1024 * 1024,
        disk_bytes=64 * 1024 * 1024,
    )


def references_under_load(*, backend, items: int, workers: int, hogs: int) -> LoadResult:
    """Score `items` reference answers on `workers` sessions of `backend` with `hogs` CPU hogs running."""
    from benchmarks.paper2code import parse
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import answer_test, reference_manifest

    files = {path.name: path.read_bytes() for path in PACKAGE.iterdir() if path.is_file()}
    annotated = parse(files["layers.py"].decode(), "layers.py")
    lines = files["layers.py"].decode().splitlines(keepends=True)
    answers = [(s.index, "".join(lines[s.start_line : s.end_line - 1])) for s in annotated.snippets]
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    limits = _limits()
    queue = list(range(items))
    lock = threading.Lock()
    wrong: list[tuple[int, str, str]] = []

    def work() -> None:
        with backend.session(environment) as session:
            manifest = reference_manifest(
                session=session, files=files, test_entry_point="paper2code_test.py", limits=limits
            )
            while True:
                with lock:
                    if not queue:
                        return
                    item = queue.pop()
                position, code = answers[item % len(answers)]
                run = answer_test(
                    session=session,
                    files=files,
                    annotated=annotated,
                    position=position,
                    code=code,
                    test_entry_point="paper2code_test.py",
                    hidden_files=HIDDEN,
                    limits=limits,
                    manifest=manifest,
                )
                if run.verdict.status != "passed" or run.verdict.findings:
                    with lock:
                        wrong.append(
                            (
                                item,
                                str(run.verdict.status),
                                f"{run.verdict.detail} {run.result.stderr[-800:] if run.result else ''}",
                            )
                        )

    with tempfile.TemporaryDirectory(prefix="rcb-hog-") as folder:
        hog = Path(folder) / "hog.py"
        hog.write_text(HOG)
        burners = [subprocess.Popen([sys.executable, str(hog)]) for _ in range(hogs)]
        try:
            start = time.monotonic()
            threads = [threading.Thread(target=work) for _ in range(workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - start
            load = os.getloadavg()
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
    return LoadResult(items, wrong, wall, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2, help="CPU hogs running beside the workers")
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--mode", default="warm", choices=("warm", "cold"))
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from scripts.bench_forkserver import forking_backend

    cache = Path(os.environ.get("SANDBOX_CACHE_DIR_BENCH", str(REPO / "var" / "sandbox-bench")))
    backend = forking_backend(args.backend, cache, forkserver=args.mode == "warm")
    ok, why = backend.available()
    if not ok:
        sys.exit(f"{args.backend} is not available: {why}")
    result = references_under_load(backend=backend, items=args.items, workers=args.workers, hogs=args.hogs)
    for item, status, detail in result.wrong:
        print(f"item {item}: {status}: {detail}")
    print(
        f"{result.items} reference items on {args.backend} {args.mode}, {args.workers} workers, {args.hogs} CPU "
        f"hog(s), {os.cpu_count()} cores: {len(result.wrong)} not passed (harness-caused); "
        f"{result.wall:.1f} s wall, {1000 * result.wall / result.items:.0f} ms per item; load average "
        f"{' '.join(f'{x:.1f}' for x in result.load)}"
    )
    sys.exit(1 if result.wrong else 0)


if __name__ == "__main__":
    main()
