"""Where a snippet's mutants task (`revision_mutants`: submissions/mutation_spread.py) spends its seconds, for
bench_mutation.py's `--profile`: each step it takes is timed by wrapping the function that does it, exclusive of the
steps inside it (a test run's sandbox start counts as sandbox start, not as a test run), and the SQL by Django's
execute wrapper. A tool for measuring, never imported by the platform.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

# The steps, in the order the table prints them.
STEPS = (
    "DB (every SQL statement)",
    "package load (files from storage, parse)",
    "environment resolution (session_for)",
    "hidden files (package_hidden)",
    "mutants generated",
    "replayer set up (recording, tolerances)",
    "fork server: start or check its preloads",
    "files archived for the sandbox",
    "replay batch: sandboxed process",
    "replay alone: sandboxed process (no-op, fallbacks)",
    "replay: parse and compare with the recording",
    "test run of a survivor: sandboxed process",
    "test run: files, verdict",
    "other (the task's own code)",
)


class CpuClock:
    """CPU seconds of this process and of everything it started (bwrap, the fork server and its forks, the
    baseline's interpreters): its own and its reaped children's from getrusage, and each live descendant's own and
    reaped children's from /proc (a fork server's items are its reaped children). In clock ticks (10 ms)."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        processes: dict[int, tuple[int, float]] = {}  # pid: (parent, its own and reaped children's seconds)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    # state ppid ... utime stime cutime cstime (fields 4, 14-17 of proc(5))
                    processes[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / self.tick)
        ours, added = {os.getpid()}, True
        while added:
            added = False
            for pid, (parent, _) in processes.items():
                if parent in ours and pid not in ours:
                    ours.add(pid)
                    added = True
        return total + sum(processes[pid][1] for pid in ours if pid != os.getpid() and pid in processes)

    def close(self) -> None:
        """Nothing to undo (kept for the callers that close it)."""


class StepClock:
    """Exclusive time per step: a wrapped call's time less the wrapped calls inside it."""

    def __init__(self, cpu: CpuClock) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu_seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.cpu = cpu
        self._inner: list[tuple[float, float]] = []
        self._undo: list[Callable[[], None]] = []

    def _timed(self, label: str, call: Callable[[], object]):
        with self._step(label):
            return call()

    @contextmanager
    def _step(self, label: str) -> Iterator[None]:
        start, cpu = time.perf_counter(), self.cpu.seconds() or 0.0
        self._inner.append((0.0, 0.0))
        try:
            yield
        finally:
            elapsed, used = time.perf_counter() - start, (self.cpu.seconds() or 0.0) - cpu
            inner, inner_cpu = self._inner.pop()
            self.seconds[label] += elapsed - inner
            self.cpu_seconds[label] += used - inner_cpu
            self.calls[label] += 1
            if self._inner:
                self._inner[-1] = (self._inner[-1][0] + elapsed, self._inner[-1][1] + used)

    def wrap(self, owner, name: str, label: str | Callable[..., str]) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def wrapper(*args, **kwargs):
            step = label(*args, **kwargs) if callable(label) else label
            return self._timed(step, lambda: original(*args, **kwargs))

        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def sql(self, execute, sql, params, many, context):
        return self._timed(STEPS[0], lambda: execute(sql, params, many, context))

    @contextmanager
    def task(self) -> Iterator[None]:
        """One task's wall time, whatever no wrapped step holds counted as the task's own code."""
        start, cpu = time.perf_counter(), self.cpu.seconds() or 0.0
        with self._step(STEPS[-1]):
            yield
        self.seconds["wall"] += time.perf_counter() - start
        self.cpu_seconds["wall"] += (self.cpu.seconds() or 0.0) - cpu
        self.calls[STEPS[-1]] -= 1

    def undo(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def clock_installed(cpu: CpuClock) -> StepClock:
    """A StepClock wrapped around every step a snippet's mutants task takes."""
    from evaluation import executor
    from evaluation.judging import replay_batch, sealed
    from sandbox import forkserver
    from sandbox.bwrap import BwrapSession
    from submissions import mutants, mutation_spread, validation

    clock = StepClock(cpu)
    programs = {replay_batch.BATCH_FILE: STEPS[8], sealed.REPLAYER_FILE: STEPS[9]}

    def run_label(session, *, files, command, limits):
        return programs.get(PurePosixPath(command[2]).name if len(command) > 2 else "", STEPS[11])

    clock.wrap(mutation_spread, "package_load", STEPS[1])
    clock.wrap(mutation_spread, "session_for", STEPS[2])
    clock.wrap(executor, "session_for", STEPS[2])
    clock.wrap(mutation_spread, "package_hidden", STEPS[3])
    clock.wrap(validation, "mutants_generate", STEPS[4])
    clock.wrap(validation, "mutant_replayer", STEPS[5])
    clock.wrap(forkserver.ForkingSession, "_zygote", STEPS[6])
    clock.wrap(BwrapSession, "_archive", STEPS[7])
    clock.wrap(forkserver.ForkingSession, "run", run_label)
    clock.wrap(mutants, "answers_replay", STEPS[10])
    clock.wrap(replay_batch, "answer_replay", STEPS[10])
    clock.wrap(mutants, "answer_replay", STEPS[10])
    clock.wrap(validation, "package_test", STEPS[12])
    return clock


def breakdown(clock: StepClock, tasks: int) -> str:
    """The table: each step's seconds, share of the wall and calls."""
    wall, cpu = clock.seconds["wall"] or 1e-9, clock.cpu_seconds["wall"] or 1e-9
    lines = [
        f"  {'step':52} {'seconds':>8} {'share':>6} {'CPU s':>7} {'share':>6} {'calls':>6} {'s/task':>7}"
        f" {'CPU/task':>8}"
    ]
    for step in [*STEPS, "wall"]:
        seconds, used = clock.seconds.get(step, 0.0), clock.cpu_seconds.get(step, 0.0)
        calls = tasks if step == "wall" else clock.calls.get(step, 0)
        lines.append(
            f"  {'all tasks' if step == 'wall' else step:52} {seconds:8.2f} {seconds / wall:6.0%} {used:7.2f}"
            f" {used / cpu:6.0%} {calls if calls else '':>6} {seconds / tasks:7.3f} {used / tasks:8.3f}"
        )
    return "\n".join(lines)
