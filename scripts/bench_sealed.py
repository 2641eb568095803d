"""The sealed replay's cost per item, the sealed share of a set, and (--mutants) mutants through the replay (issue 33).

What it does, per set (the demo set, benchmarks/demo; bench_pipeline's heavy set, `--papers`/`--snippets`) and per
backend (bwrap; docker when its engine answers) and mode (warm: items fork from the fork server; cold: a fresh
interpreter per run):
1. One session per task's environment; the task's test manifest from its reference (not timed), then its recording
   (judging.sealed.recording_make: two recording runs and the reference's own replay), timed per task. What the
   recordings store goes to an in-memory blob store, as tests/evaluation/test_sealed.py does.
2. Per item (every snippet, answered with its reference body), `answer_test` alone (the harness run and the audit,
   today's item) and `answer_test(..., recording=)` (the same plus the sealed replay when the tests pass), one after
   the other, `--repeat` times: the medians of each, their ratio and the median replay cost (with minus without).
   The load average is printed beside each line: the machine is shared, only ratios of one run compare.
3. The sealed share: sealed snippets of all, the unsealed ones counted by reason.

--mutants (demo set, bwrap, warm): per snippet, benchmarks/paper2code/mutation.py's mutants of its reference body,
each spliced and judged twice: by the paper's tests (answer_test without recording and without the static audit:
killed when the tests do not pass) and by the replay alone (judging.sealed.answer_replay: killed when it disagrees
with the recording). Per snippet: mutants, killed by tests, killed by replay, killed by tests only, by replay only.

Run: .venv/bin/python scripts/bench_sealed.py [--sets demo,heavy] [--backends bwrap,docker] [--modes warm,cold]
     [--papers 4] [--snippets 13] [--repeat 1] [--cache DIR]
     .venv/bin/python scripts/bench_sealed.py --mutants [--limit 10]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.paper2code.pset import PaperPackage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEMO = REPO / "benchmarks" / "demo"
DEMO_REQUIREMENTS = "numpy"  # the demo's papers need numpy alone (tests/evaluation/test_sealed.py builds the same)


@dataclass
class Blobs:
    """What recordings store, by sha256: the platform's blob storage in memory."""

    data: dict[str, bytes] = field(default_factory=dict)

    def put(self, content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        self.data[digest] = content
        return digest

    def get(self, digest: str) -> bytes:
        return self.data[digest]


def package_hidden(package) -> frozenset[str]:
    """The files a task hides, by the platform's rule (benchmarks/paper2code/hidden.py, as evaluation.taskfiles
    applies it): the test entry point, every file outside the prompt holding a copy of a snippet's reference code,
    and the reference's recorded calls."""
    from benchmarks.paper2code.hidden import package_references, recorded_calls, reference_copies

    visible = set(package.annotated_paths) | set(package.context_paths) | {package.paper_path}
    outside = {path: data for path, data in package.files.items() if path not in visible}
    annotated = [package.annotated[path] for path in package.annotated_paths]
    return frozenset(
        {package.test_entry_point, *reference_copies(outside, package_references(annotated)), *recorded_calls(outside)}
    )


def package_items(package: PaperPackage, items_max: int | None = None) -> list:
    """(path, annotated file, snippet) of every item of a package, or of its first `items_max`."""
    found = [(path, annotated, s) for path, annotated in package.annotated.items() for s in annotated.snippets]
    return found[:items_max]


def package_spans(package) -> list:
    from evaluation.judging.sealed import SnippetSpan, snippet_key

    return [
        SnippetSpan(snippet_key(path, snippet.index), path, snippet.start_line, snippet.end_line)
        for path, annotated in package.annotated.items()
        for snippet in annotated.snippets
    ]


def sealed_share(recordings: Iterable[Mapping]) -> tuple[int, int, Counter[str]]:
    """Sealed snippets, all snippets, and the unsealed ones counted by reason (function names left out)."""
    sealed = total = 0
    reasons: Counter[str] = Counter()
    for recording in recordings:
        for entry in recording["snippets"].values():
            total += 1
            if entry["sealed"]:
                sealed += 1
            else:
                reasons[reason_kind(entry["reason"])] += 1
    return sealed, total, reasons


def reason_kind(reason: str) -> str:
    """An unsealed reason as a kind: without the function's name and the run's own output."""
    reason = re.sub(r"its function \S+ ", "its function ", reason)
    return reason.split(":", 1)[0][:120] if len(reason) > 120 else reason


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class Task:
    """A package as the bench runs it: its hidden files, manifest and recording, made once per session."""

    package: PaperPackage
    hidden: frozenset[str]
    manifest: dict
    recording: dict
    record_seconds: float


def reference_body(package, path: str, snippet) -> str:
    lines = package.files[path].decode().splitlines(keepends=True)
    return "".join(lines[snippet.start_line : snippet.end_line - 1])


def task_prepare(*, session, package, limits, blobs: Blobs) -> Task:
    from evaluation.executor import reference_manifest
    from evaluation.judging.sealed import recording_make

    hidden = package_hidden(package)
    files = dict(package.files)
    manifest = reference_manifest(
        session=session, files=files, test_entry_point=package.test_entry_point, limits=limits
    )
    start = time.monotonic()
    recording = recording_make(
        session=session,
        files=files,
        test_entry_point=package.test_entry_point,
        hidden=hidden,
        snippets=package_spans(package),
        limits=limits,
        store=blobs.put,
    )
    return Task(package, hidden, manifest, recording, time.monotonic() - start)


def item_run(*, session, task: Task, path: str, snippet, code: str, limits, blobs: Blobs, recorded: bool, audit=True):
    from evaluation.executor import answer_test

    package = task.package
    return answer_test(
        session=session,
        files=dict(package.files),
        annotated=package.annotated[path],
        position=snippet.index,
        code=code,
        test_entry_point=package.test_entry_point,
        hidden_files=task.hidden,
        limits=limits,
        static_audit=audit,
        manifest=task.manifest,
        recording=task.recording if recorded else None,
        load=blobs.get,
    )


def cost_measure(
    *, backend, mode: str, packages, requirements: str, limits, repeat: int, items_max: int | None = None
) -> tuple[list, list]:
    """Per task its recording time; per item (time without, time with the replay, both verdicts); `items_max`: the
    first items of each package only."""
    from benchmarks.services.blobs import environment_hash

    backend.forkserver = mode == "warm"
    environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
    blobs = Blobs()
    tasks, items = [], []
    with backend.session(environment) as session:
        for package in packages:
            task = task_prepare(session=session, package=package, limits=limits, blobs=blobs)
            tasks.append(task)
            for path, _annotated, snippet in package_items(package, items_max):
                code = reference_body(package, path, snippet)
                for _ in range(repeat):
                    timed = []
                    for recorded in (False, True):
                        start = time.monotonic()
                        run = item_run(
                            session=session,
                            task=task,
                            path=path,
                            snippet=snippet,
                            code=code,
                            limits=limits,
                            blobs=blobs,
                            recorded=recorded,
                        )
                        timed.append((time.monotonic() - start, run.verdict))
                    items.append((f"{package.id}/{snippet.name}", *timed[0], *timed[1]))
    return tasks, items


def cost_report(set_name: str, backend: str, mode: str, tasks, items) -> Iterable[str]:
    records = [t.record_seconds for t in tasks]
    alone = [i[1] for i in items]
    replayed = [i[3] for i in items]
    extra = [i[3] - i[1] for i in items]
    yield (
        f"{set_name} on {backend}, {mode}: recording per task median {median(records):.2f} s "
        f"(min {min(records):.2f}, max {max(records):.2f}, {len(records)} tasks); load {load()}"
    )
    yield (
        f"  per item ({len(items)} runs): harness alone median {median(alone):.2f} s, harness + replay median "
        f"{median(replayed):.2f} s, ratio {median(replayed) / median(alone):.2f}x, replay's own cost median "
        f"{median(extra):.2f} s; load {load()}"
    )
    odd = [
        (name, a.status, b.status, b.findings) for name, _, a, _, b in items if (a.status, b.status) != ("passed",) * 2
    ]
    for name, a, b, findings in odd:
        yield f"  NOT PASSED: {name}: alone {a}, with the replay {b} {list(findings)[:2]}"
    sealed, total, reasons = sealed_share(t.recording for t in tasks)
    yield f"  sealed share: {sealed}/{total} snippets ({100 * sealed / max(total, 1):.1f}%)"
    for reason, count in reasons.most_common():
        yield f"    unsealed: {count} {reason}"


def mutants_measure(
    *, backend, packages, requirements: str, limits, limit: int, items_max: int | None = None
) -> Iterable[str]:
    from benchmarks.paper2code import splice
    from benchmarks.paper2code.mutation import mutants_generate
    from benchmarks.services.blobs import environment_hash
    from evaluation.judging.sealed import answer_replay, snippet_key
    from sandbox.harness import answer_span

    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
    blobs = Blobs()
    totals: Counter[str] = Counter()
    yield f"{'snippet':<62}{'mutants':>8}{'tests':>7}{'replay':>7}{'tests only':>11}{'replay only':>12}"
    with backend.session(environment) as session:
        for package in packages:
            task = task_prepare(session=session, package=package, limits=limits, blobs=blobs)
            for path, annotated, snippet in package_items(package, items_max):
                key = snippet_key(path, snippet.index)
                sealed = task.recording["snippets"][key]["sealed"]
                row: Counter[str] = Counter()
                for mutant in mutants_generate(reference_body(package, path, snippet), limit=limit):
                    run = item_run(
                        session=session,
                        task=task,
                        path=path,
                        snippet=snippet,
                        code=mutant.body,
                        limits=limits,
                        blobs=blobs,
                        recorded=False,
                        audit=False,
                    )
                    by_tests = (run.verdict.measured or run.verdict.status) != "passed"
                    by_replay = False
                    if sealed:
                        spliced = splice(annotated, snippet, mutant.body)
                        replay = answer_replay(
                            session=session,
                            files={**package.files, path: spliced.encode()},
                            hidden=task.hidden,
                            recording=task.recording,
                            key=key,
                            limits=limits,
                            load=blobs.get,
                            answer=answer_span(snippet.start_line, mutant.body),
                        )
                        by_replay = bool(replay.difference)
                    row.update(
                        mutants=1,
                        tests=by_tests,
                        replay=by_replay,
                        tests_only=by_tests and not by_replay,
                        replay_only=by_replay and not by_tests,
                    )
                totals.update(row)
                name = f"{package.id}/{snippet.name}" + ("" if sealed else " (UNSEALED)")
                yield (
                    f"{name[:61]:<62}{row['mutants']:>8}{row['tests']:>7}{row['replay']:>7}"
                    f"{row['tests_only']:>11}{row['replay_only']:>12}"
                )
    yield (
        f"{'all':<62}{totals['mutants']:>8}{totals['tests']:>7}{totals['replay']:>7}"
        f"{totals['tests_only']:>11}{totals['replay_only']:>12}; load {load()}"
    )


def heavy_set(root: Path, papers: int, snippets: int, python: str) -> list:
    from benchmarks.paper2code.pset import read_pset
    from scripts.bench_django import THREADS_ONE
    from scripts.bench_pipeline import CALIBRATE, papers_plan, pset_heavy_generate

    per_second = float(
        subprocess.run(
            [python, "-c", CALIBRATE], capture_output=True, text=True, check=True, env={**os.environ, **THREADS_ONE}
        ).stdout.strip()
    )
    pset_heavy_generate(root, papers_plan(papers, snippets), per_second=per_second, paper_bytes=3000)
    return read_pset(root, shared_environment=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="demo,heavy")
    parser.add_argument("--backends", default="bwrap,docker")
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument("--papers", type=int, default=4)
    parser.add_argument("--snippets", type=int, default=13)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--items", type=int, default=None, help="the first items of each paper only")
    parser.add_argument("--mutants", action="store_true")
    parser.add_argument("--limit", type=int, default=10, help="mutants per snippet")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-measure")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from benchmarks.paper2code.pset import read_pset
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import limits_default
    from sandbox import backend_get
    from scripts.bench_pipeline import REQUIREMENTS

    limits = limits_default()
    print(f"load average at the start: {load()}; {os.cpu_count()} cores", flush=True)
    demo = read_pset(DEMO)
    if args.mutants:
        backend = backend_get("bwrap", cache_dir=args.cache.resolve())
        for line in mutants_measure(
            backend=backend, packages=demo, requirements=DEMO_REQUIREMENTS, limits=limits, limit=args.limit
        ):
            print(line, flush=True)
        return
    for backend_name in args.backends.split(","):
        backend = backend_get(backend_name, cache_dir=args.cache.resolve())
        ok, why = backend.available()
        if not ok:
            print(f"{backend_name}: not measured, the backend is not available: {why}", flush=True)
            continue
        for set_name in args.sets.split(","):
            if set_name == "demo":
                packages, requirements = demo, DEMO_REQUIREMENTS
            else:
                requirements = requirements_vetted(REQUIREMENTS)
                python = backend_get("bwrap", cache_dir=args.cache.resolve())
                python_path = python.environment_build(
                    env_hash=environment_hash(requirements), requirements=requirements
                ).python
                packages = heavy_set(
                    Path(tempfile.mkdtemp(prefix="bench-sealed-")), args.papers, args.snippets, python_path
                )
            for mode in args.modes.split(","):
                tasks, items = cost_measure(
                    backend=backend,
                    mode=mode,
                    packages=packages,
                    requirements=requirements,
                    limits=limits,
                    repeat=args.repeat,
                    items_max=args.items,
                )
                for line in cost_report(set_name, backend_name, mode, tasks, items):
                    print(line, flush=True)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
