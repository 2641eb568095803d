"""Run a host process under limits with capped output and a wall-clock timeout (for the local and bwrap backends),
by the capped-subprocess helper intake uses too (common.process)."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from common.process import capped, process_supervise
from sandbox.base import ExecResult, Limits


def files_write(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write a task's files into a work folder, refusing paths that would leave it."""
    root = folder.resolve()
    for relative, data in files.items():
        target = (root / relative).resolve()
        if root not in target.parents:
            raise ValueError(f"{relative}: path leaves the work folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def rlimits(limits: Limits, *, address_space: bool = True) -> Callable[[], None]:
    """A preexec function applying the run's limits to the child (and everything it starts)."""

    def apply() -> None:
        os.setsid()
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_bytes, limits.disk_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = int(limits.wall_seconds) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    return apply


def process_run(
    argv: Sequence[str],
    *,
    cwd: Path,
    limits: Limits,
    backend: str,
    env: Mapping[str, str],
    preexec: Callable[[], None] | None,
    stdin: int | None = None,
    pass_fds: Sequence[int] = (),
) -> ExecResult:
    """Start `argv` in its own session, keep at most `limits.output_bytes` per stream, kill the group on timeout.

    Without `preexec` (its own session is then made by the start itself) the worker is not forked: a fork copies
    the page tables of the whole worker (about 100 ms for a 400 MB worker here), a vfork does not."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
        start_new_session=preexec is None,
        close_fds=True,
        pass_fds=tuple(pass_fds),
    )
    out: list[bytes] = []
    err: list[bytes] = []
    truncated = [False]
    timed_out = process_supervise(
        proc,
        stdout=capped(limits.output_bytes, out, truncated),
        stderr=capped(limits.output_bytes, err, truncated),
        timeout=limits.wall_seconds,
    )
    code = proc.returncode
    return ExecResult(
        exit_code=None if timed_out or code < 0 else code,
        stdout=b"".join(out).decode("utf-8", "replace"),
        stderr=b"".join(err).decode("utf-8", "replace"),
        timed_out=timed_out,
        duration=time.monotonic() - start,
        backend=backend,
        oom_killed=False,
        output_truncated=truncated[0],
    )
