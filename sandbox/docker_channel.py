"""The worker's end of an agent container's command channel: one `docker exec -i` per container runs
programs/command_server.py as root in the image's own Python, and every job of the container's commands (the
copy-in and the command, the end step) is spawned through it instead of a `docker exec` of its own; a job costs a
fork in the container instead of an engine round trip (docker_agent.py's docstring holds the threat model).

A job has the `docker exec` it replaces: its argv (looked up on its variables' PATH), uid and gid (its gid its only
group), folder and variables; stdin from the worker, stdout and stderr demultiplexed into its `output`, its exit
status (128 + the signal for a killed one), and its end (`done`: nothing holds its pipes any more, as an exec's
stream closes only when the last process holding it has gone). A job whose argv is the image's Python launcher
(PYTHON_LAUNCHER's `sh -c` with the code after it) runs its code in a process forked from the server, which is
that very interpreter started the same way, without starting a new one.

When the channel closes (the container gone, the server dead, the worker's socket broken) every job ends with no
exit status and `alive()` is False: the agent container is then replaced, as one whose end step failed."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from typing import Any, Protocol

from docker.utils.socket import frames_iter

from sandbox import programs
from sandbox.base import SandboxError
from sandbox.docker_engine import engine_errors

SERVER_SOURCE = programs.source("command_server")
HEADER = struct.Struct(">cII")  # kind, job, length: programs/command_server.py's frames
NO_PYTHON = 5
# Runs `$0` in the image's Python (Debian's in the debootstrapped base, python:3.11-slim's in the connected one),
# isolated: no site, no variables, no imports from the working folder; never /opt/env's, which the environment's
# requirements built as the sandbox user.
PYTHON_LAUNCHER = (
    'for python in /usr/bin/python3 /usr/local/bin/python3; do [ -x "$python" ] && exec "$python" -I -S -c "$0" "$@"; '
    f"done; exit {NO_PYTHON}"
)
# What the server itself runs with: programs named by absolute paths, the image's /opt/env/bin left out.
ROOT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
FRAME_BYTES = 1 << 20
READY_SECONDS = 60.0


class Output(Protocol):
    def feed(self, number: int, data: bytes) -> None: ...


class Job:
    """One spawned job: `exited` once its exit status (`code`) is known, `done` once its output has all arrived;
    both are set with `code` None when the channel closes first, and `failed` says why a job never started."""

    def __init__(self, channel: CommandChannel, number: int, output: Output):
        self.channel, self.number, self.output = channel, number, output
        self.exited, self.done = threading.Event(), threading.Event()
        self.code: int | None = None
        self.failed = ""

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), FRAME_BYTES):
            self.channel.send(b"I", self.number, data[start : start + FRAME_BYTES])

    def close_stdin(self) -> None:
        self.channel.send(b"C", self.number)

    def start_now(self) -> None:
        """Start this job, spawned `after` another, now if that one has not exited yet."""
        self.channel.send(b"K", self.number)

    def ended(self) -> None:
        self.exited.set()
        self.done.set()


class CommandChannel:
    """The command server of one container (see the module's docstring)."""

    def __init__(self, api, container: str):
        self.jobs: dict[int, Job] = {}
        self.numbers = 0
        self.errors = b""  # the server's own stderr (its tail), for the error that says why it ended
        self.server_pid: int | None = None
        self.ready, self.lock, self.closed = threading.Event(), threading.Lock(), False
        with engine_errors("starting the agent container's command server"):
            exec_id = api.exec_create(
                container,
                ["/bin/sh", "-c", PYTHON_LAUNCHER, SERVER_SOURCE],
                stdin=True,
                user="0:0",
                environment={"PATH": ROOT_PATH},
                workdir="/",
            )["Id"]
            self.stream = api.exec_start(exec_id, socket=True)
        self.raw: Any = getattr(self.stream, "_sock", self.stream)
        self.reader = threading.Thread(target=self._read, daemon=True, name="rcb-command-channel")
        self.reader.start()
        if not self.ready.wait(READY_SECONDS) or self.server_pid is None:
            self.close()
            raise SandboxError(f"the agent container's command server did not start: {self.why()}")

    def alive(self) -> bool:
        return not self.closed and self.reader.is_alive()

    def why(self) -> str:
        return self.errors.decode(errors="replace")[-2000:] or "its channel closed"

    def spawn(
        self,
        argv: list[str],
        *,
        user: str,
        env: dict[str, str],
        cwd: str,
        output: Output,
        cap: int | None = None,
        spare: bool = False,
        stdin: bool = True,
        after: Job | None = None,
    ) -> Job:
        """Start `argv` as `user` ("uid:gid") in `cwd` with exactly `env`; its output into `output`, at most `cap`
        bytes of each stream and one more (so that a cut shows), all of it with None. `spare`: leave a process
        forked for the next root job before this one runs (the command's, so that its end step needs no free slot).
        `stdin` False: it reads EOF at once. `after`: the job starts when that one exits, or at `start_now`."""
        uid, gid = (int(part) for part in user.split(":"))
        spec: dict[str, Any] = {"argv": argv, "uid": uid, "gid": gid, "cwd": cwd, "env": env, "cap": cap}
        spec.update(spare=spare, stdin=stdin, after=None if after is None else after.number)
        if argv[:3] == ["/bin/sh", "-c", PYTHON_LAUNCHER] and len(argv) > 3:
            spec["code"], spec["argv"] = argv[3], argv[4:]
        with self.lock:
            self.numbers += 1
            job = self.jobs[self.numbers] = Job(self, self.numbers, output)
        self.send(b"S", job.number, json.dumps(spec).encode())
        return job

    def send(self, kind: bytes, number: int, data: bytes = b"") -> None:
        with self.lock:
            if self.closed:
                raise SandboxError(f"the agent container's command channel is closed: {self.why()}")
            try:
                self.raw.sendall(HEADER.pack(kind, number, len(data)) + data)
            except OSError as exc:
                raise SandboxError(f"the agent container's command channel broke: {exc}") from exc

    def close(self) -> None:
        """The server reads the end of its stdin and exits (a job it started lives on until the container goes)."""
        with self.lock:
            self.closed = True
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.stream.close()
        self.reader.join(timeout=5)

    def _read(self) -> None:
        received = bytearray()
        try:
            for number, data in frames_iter(self.stream, tty=False):
                if number == 2:
                    self.errors = (self.errors + data)[-4096:]
                    continue
                received += data
                while len(received) >= HEADER.size:
                    kind, job, length = HEADER.unpack_from(received)
                    if len(received) < HEADER.size + length:
                        break
                    self._frame(kind, job, bytes(received[HEADER.size : HEADER.size + length]))
                    del received[: HEADER.size + length]
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                self.closed = True
                jobs, self.jobs = list(self.jobs.values()), {}
            for job in jobs:
                job.ended()
            self.ready.set()

    def _frame(self, kind: bytes, number: int, data: bytes) -> None:
        if kind == b"R":
            self.server_pid = int(data)
            self.ready.set()
            return
        job = self.jobs.get(number)
        if job is None:
            return
        if kind == b"O":
            job.output.feed(1, data)
        elif kind == b"E":
            job.output.feed(2, data)
        elif kind == b"X":
            job.code = int(data)
            job.exited.set()
        elif kind in (b"D", b"F"):
            job.failed = data.decode(errors="replace")
            with self.lock:
                self.jobs.pop(number, None)
            job.ended()
