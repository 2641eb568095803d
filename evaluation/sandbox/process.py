"""Run a host process under limits with capped output and a wall-clock timeout (for the local and bwrap backends)."""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from evaluation.sandbox.base import ExecResult, Limits

CHUNK = 65536


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


def _drain(stream, cap: int, sink: list[bytes], truncated: list[bool]) -> None:
    kept = 0
    # Keep reading past the cap so the child never blocks on a full pipe; only dropped bytes mark truncation.
    while chunk := stream.read1(CHUNK):
        taken = chunk[: cap - kept]
        if taken:
            sink.append(taken)
            kept += len(taken)
        if len(taken) < len(chunk):
            truncated[0] = True
    stream.close()


def _ended(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until the process ends or `timeout` passes (False): blocked on a pidfd, since Popen.wait(timeout) polls
    with sleeps that grow to 50 ms (20 ms lost on a 40 ms command)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # a kernel without pidfds
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        return bool(select.select([pidfd], [], [], max(0.0, timeout))[0])
    finally:
        os.close(pidfd)


def process_run(
    argv: Sequence[str],
    *,
    cwd: Path,
    limits: Limits,
    backend: str,
    env: Mapping[str, str],
    preexec: Callable[[], None] | None,
    stdin: int | None = None,
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
    )
    out: list[bytes] = []
    err: list[bytes] = []
    truncated = [False]
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, limits.output_bytes, out, truncated), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, limits.output_bytes, err, truncated), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        timed_out = not _ended(proc, limits.wall_seconds)
    finally:
        # Whatever happened, nothing the run started may outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for reader in readers:
        reader.join(timeout=5)
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
