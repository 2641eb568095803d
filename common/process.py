"""A child process in a session of its own, its output read as it comes and capped, ended with everything it started:
the one capped-subprocess helper of git intake (`common.intake`) and the local sandboxes (`sandbox`).

Standard library only: the sandbox's host side uses it, and nothing here may depend on the web application.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

CHUNK = 65536
# A reader still running this long after the process group was killed holds a pipe some escaped process keeps open.
READER_JOIN_SECONDS = 5

Take = Callable[[bytes], None]


def capped(cap: int, sink: list[bytes], truncated: list[bool]) -> Take:
    """A taker keeping the first `cap` bytes in `sink`; any byte it drops sets `truncated[0]`."""
    kept = 0

    def take(chunk: bytes) -> None:
        nonlocal kept
        part = chunk[: cap - kept]
        if part:
            sink.append(part)
            kept += len(part)
        if len(part) < len(chunk):
            truncated[0] = True

    return take


def tail(keep: int, buffer: bytearray) -> Take:
    """A taker keeping the last `keep` bytes in `buffer` (a server can send endless progress lines)."""

    def take(chunk: bytes) -> None:
        buffer.extend(chunk)
        del buffer[:-keep]

    return take


def stream_read(stream: BinaryIO, take: Take) -> None:
    """Read `stream` to its end, each chunk to `take`, then close it: reading goes on past any cap, so the child
    never blocks on a full pipe."""
    try:
        while chunk := stream.read1(CHUNK):  # type: ignore[attr-defined]
            take(chunk)
    finally:
        stream.close()


def group_end(process: subprocess.Popen) -> None:
    """Kill the process's session (it and everything it started), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def process_ended(process: subprocess.Popen, timeout: float) -> bool:
    """Wait until the process ends or `timeout` passes (False), without reaping it: blocked on a pidfd, since
    Popen.wait(timeout) polls with sleeps that grow to 50 ms (20 ms lost on a 40 ms command)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # a kernel without pidfds, or the process already reaped
        try:
            process.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        return bool(select.select([pidfd], [], [], max(0.0, timeout))[0])
    finally:
        os.close(pidfd)


def process_supervise(
    process: subprocess.Popen,
    *,
    stdout: Take,
    stderr: Take,
    timeout: float | None = None,
    check: Callable[[], BaseException | None] | None = None,
    poll_seconds: float = 0.5,
) -> bool:
    """Read the output of `process` (started in a session of its own) until it exits; True when it ran past
    `timeout` seconds. `check` is asked every `poll_seconds` and may return an error that stops the process; that
    error, or one a taker raised, is raised once the process is gone. Whatever happens, nothing the process started
    outlives this call."""
    deadline = None if timeout is None else time.monotonic() + timeout
    failures: list[BaseException] = []

    def read(stream: BinaryIO, take: Take) -> None:
        try:
            stream_read(stream, take)
        except Exception as exc:  # handed to the caller below, once the process is ended
            failures.append(exc)

    readers = [
        threading.Thread(target=read, args=(process.stdout, stdout), daemon=True),
        threading.Thread(target=read, args=(process.stderr, stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        while not failures:
            step = poll_seconds if deadline is None else min(poll_seconds, deadline - time.monotonic())
            if step <= 0:
                timed_out = True
                break
            if process_ended(process, step):
                break
            if check and (verdict := check()):
                failures.append(verdict)
    finally:
        group_end(process)
        for reader in readers:
            reader.join(timeout=READER_JOIN_SECONDS)
    if failures:
        raise failures[0]
    return timed_out
