"""An agent's shell commands on the docker backend: one container per agent item, kept across its commands.

The container is a run's (docker.host_config: read-only root, no network, no capabilities, no-new-privileges,
Docker's default seccomp profile, memory, CPU and process limits, tmpfs folders) whose main process is a keeper
(`cat` of the attach stream, under docker-init) running as KEEPER_USER, another unprivileged uid than the
commands' SANDBOX_USER: a command cannot signal the keeper or the init, and the end of each command,
`kill -9 -1` as SANDBOX_USER, kills everything the command left (background jobs, `setsid`, double forks) while
the container lives on. A command then costs two `docker exec`s instead of a container's create, start and
removal. When the worker dies its attach stream closes, the keeper reads EOF and the container (auto-removed)
goes with it.

The workspace is copied in and back per command, never bind-mounted. A bind mount would hand the worker's disk to
the agent: no size limit but the host disk's (the workspace's tmpfs here is the release's disk limit, enforced),
setuid files and FIFOs of uid 10001 left on the worker's filesystem between turns, and it needs the engine to see
the worker's folders (a worker in a container talking to the host's engine does not). Copied in, the worker's
workspace arrives as a tar (links archived as links, never followed) into the container's /sandbox tmpfs, emptied
first; copied back, the container's tar is unpacked by Python's `data` filter, member by member, into a new folder
that then replaces the workspace: a link pointing out of the workspace (absolute, or `..` past its top), a device
or FIFO, an absolute or `..` name are dropped (and said in the command's output), setuid/setgid/sticky and
group/other write bits are cleared, and every file belongs to the worker. What the scoring reads (`answer_read`,
through Workspace.resolve) is a plain file of that folder.

Between commands the container keeps only /sandbox: /tmp, /dev/shm and the IPC objects are emptied at each end,
as a fresh bwrap sandbox has them empty.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from docker.utils.socket import frames_iter

from evaluation.sandbox.base import Environment, ExecResult, Limits, SandboxError
from evaluation.sandbox.docker import (
    SANDBOX_USER,
    WORKER_LABEL,
    CappedOutput,
    container_remove,
    engine_errors,
    host_config,
    run_environment,
)

if TYPE_CHECKING:
    from evaluation.sandbox.docker import DockerBackend

AGENT_LABEL = "rcb.agent"
KEEPER_USER = "10002:10002"
WORK_DIR = "/sandbox"  # where bwrap has the workspace too: the agent's prompt and file tools name /sandbox
# docker-init and the keeper count against the container's pids limit; the command's tree gets the release's.
OWN_PROCESSES = 2
STARTED = "rcb-docker-started"
# Empty the workspace's tmpfs, unpack the worker's copy from stdin, then run the command (its stdin empty).
START = (
    f"find {WORK_DIR} -mindepth 1 -delete && tar -x -o -f - -C {WORK_DIR} "
    f'&& printf "%s\\n" {STARTED} >&2 && exec /bin/sh -c "$1" </dev/null'
)
# Kill whatever the command left (every process of its uid but this shell; twice, for one forked meanwhile),
# empty what a fresh sandbox has empty, and send the workspace back as a tar on stdout.
END = (
    "kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null; ipcrm -a 2>/dev/null; "
    "find /tmp /dev/shm -mindepth 1 -delete 2>/dev/null; "
    f"exec tar -c -f - -C {WORK_DIR} ."
)
POLL_SECONDS = 0.2
NOT_COPIED = "\n[the workspace could not be copied back: it stays as it was before this command]"


@dataclass
class _Exec:
    """One `docker exec` with its output read in a thread."""

    id: str
    stream: Any
    output: Any
    reader: threading.Thread


class AgentContainer:
    """The kept container of one agent workspace (see the module's docstring)."""

    def __init__(self, backend: DockerBackend, environment: Environment, limits: Limits):
        self.api = backend.client().api
        self.user = SANDBOX_USER
        self.key = container_key(limits)
        self.env = {**run_environment(limits), "HOME": WORK_DIR, "USER": "sandbox"}
        self.container: str | None = None
        self.keeper = None
        config = host_config(replace(limits, processes=limits.processes + OWN_PROCESSES), work=WORK_DIR)
        config["auto_remove"] = True
        try:
            with engine_errors("creating the agent's container"):
                self.container = self.api.create_container(
                    environment.location,
                    ["cat"],
                    user=KEEPER_USER,
                    working_dir="/",
                    hostname="sandbox",
                    stdin_open=True,
                    network_disabled=True,
                    environment=run_environment(limits),
                    labels={AGENT_LABEL: "1", "rcb.env": environment.hash, WORKER_LABEL: _worker()},
                    host_config=self.api.create_host_config(**config),
                )["Id"]
                # Held open for the container's life: the keeper reads EOF when this worker goes, and so it ends.
                self.keeper = self.api.attach_socket(self.container, params={"stdin": 1, "stream": 1})
                self.api.start(self.container)
                self.pid = int(self.api.inspect_container(self.container)["State"]["Pid"])
        except BaseException:
            self.remove()
            raise
        self.oom_file = _oom_file(self.pid)

    def alive(self) -> bool:
        if self.container is None:
            return False
        try:
            with engine_errors("inspecting the agent's container"):
                return bool(self.api.inspect_container(self.container)["State"]["Running"])
        except SandboxError:
            return False

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        """Copy `workspace` in, run `command` until it ends or its deadline, kill what it left, copy the workspace
        back (see the module's docstring)."""
        ooms = self._ooms()
        with tempfile.TemporaryFile(prefix="rcb-agent-in-") as archive:
            workspace_pack(workspace, archive)
            start = time.monotonic()
            run = self._exec(["sh", "-c", START, "rcb-command", command], output=CappedOutput(limits.output_bytes))
            with contextlib.suppress(OSError):
                raw = getattr(run.stream, "_sock", run.stream)
                while chunk := archive.read(1 << 20):
                    raw.sendall(chunk)
                raw.shutdown(socket.SHUT_WR)
        timed_out = self._wait(run, deadline=start + limits.wall_seconds)
        duration = time.monotonic() - start
        with tempfile.TemporaryFile(prefix="rcb-agent-out-") as back:
            # The tmpfs holds at most disk_bytes; headers of many small files come on top.
            sink = _FileSink(back, cap=2 * limits.disk_bytes + (64 << 20))
            copied = self._end(sink, limits)
            run.reader.join(timeout=10)
            with contextlib.suppress(OSError):
                run.stream.close()
            code = self._exit_code(run) if copied else None
            stderr = run.output.text(2)
            head, found, rest = stderr.partition(STARTED + "\n")
            if not found and copied:
                raise SandboxError(f"the agent's command did not start (exit {code}): {stderr[-2000:]}")
            notes = ""
            if copied:
                back.seek(0)
                dropped = workspace_unpack(back, workspace)
                if dropped is None:
                    notes = NOT_COPIED
                elif dropped:
                    notes = (
                        f"\n[not kept in the workspace: {len(dropped)} entries (links out of it, devices, FIFOs), "
                        f"e.g. {', '.join(dropped[:5])}]"
                    )
            else:
                notes = NOT_COPIED
        oom = self._ooms() > ooms
        killed = timed_out or (oom and code == 137)
        return ExecResult(
            exit_code=None if killed else code,
            stdout=run.output.text(1),
            stderr=head + rest + notes,
            timed_out=timed_out,
            duration=duration,
            backend="docker",
            oom_killed=oom,
            output_truncated=run.output.truncated,
        )

    def _end(self, sink: _FileSink, limits: Limits) -> bool:
        """The end step: kill what the command left, empty /tmp, take the workspace back into `sink`. False when it
        could not (a fork bomb holding every process slot, a workspace tar over the cap): then the container is
        removed with everything in it, and the next command gets a new one."""
        try:
            end = self._exec(["sh", "-c", END], output=sink)
            with contextlib.suppress(OSError):
                raw = getattr(end.stream, "_sock", end.stream)
                raw.shutdown(socket.SHUT_WR)
            end.reader.join(timeout=max(60.0, limits.wall_seconds))
            with contextlib.suppress(OSError):
                end.stream.close()
            # tar: 1 for a file changed while read, 2 for one it could not read (left out, the rest archived).
            if not end.reader.is_alive() and not sink.over and self._exit_code(end) in (0, 1, 2):
                return True
        except SandboxError:
            pass
        self.remove()
        return False

    def _exec(self, argv: list[str], *, output) -> _Exec:
        with engine_errors("starting the agent's command"):
            exec_id = self.api.exec_create(
                self.container, argv, stdin=True, user=self.user, environment=self.env, workdir=WORK_DIR
            )["Id"]
            stream = self.api.exec_start(exec_id, socket=True)
        reader = threading.Thread(target=output.read, args=(stream,), daemon=True)
        reader.start()
        return _Exec(id=exec_id, stream=stream, output=output, reader=reader)

    def _wait(self, run: _Exec, *, deadline: float) -> bool:
        """Until the command's shell ended (what it left running still holds the stream: the end step kills it) or
        its deadline passed; True for the deadline."""
        poll = 0.005
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            run.reader.join(timeout=min(poll, remaining))
            if not run.reader.is_alive():
                return False
            with engine_errors("waiting for the agent's command"):
                if not self.api.exec_inspect(run.id)["Running"]:
                    return False
            poll = min(2 * poll, POLL_SECONDS)

    def _exit_code(self, run: _Exec) -> int | None:
        with engine_errors("inspecting the agent's command"):
            code = self.api.exec_inspect(run.id)["ExitCode"]
        return None if code is None else int(code)

    def _ooms(self) -> int:
        """The container's OOM kills so far (cgroup v1's counter), 0 where this worker cannot see its cgroup."""
        if self.oom_file is None:
            return 0
        try:
            lines = self.oom_file.read_text().splitlines()
        except OSError:
            return 0
        counters = dict(line.split() for line in lines if len(line.split()) == 2)
        return int(counters.get("oom_kill", "0"))

    def remove(self) -> None:
        if self.container is not None:
            with contextlib.suppress(SandboxError):
                container_remove(self.api, self.container)
            self.container = None
        if self.keeper is not None:
            with contextlib.suppress(OSError):
                self.keeper.close()


class _FileSink:
    """Reads an exec's stdout (a tar) into a file, up to `cap` bytes; stderr is dropped."""

    def __init__(self, file: IO[bytes], *, cap: int):
        self.file, self.cap, self.kept, self.over = file, cap, 0, False

    def read(self, stream) -> None:
        with contextlib.suppress(OSError, ValueError):
            for number, data in frames_iter(stream, tty=False):
                if number != 1 or self.over:
                    continue
                if self.kept + len(data) > self.cap:
                    self.over = True
                    continue
                self.file.write(data)
                self.kept += len(data)


def container_key(limits: Limits) -> tuple:
    """What a container is made with: a command with other limits than these gets a new one."""
    return limits.memory_bytes, limits.cpus, limits.processes, limits.disk_bytes, limits.gpu


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _oom_file(pid: int) -> Path | None:
    """The container's memory cgroup's oom_control, found through its main process (cgroup v1)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            found = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.oom_control"
            return found if found.exists() else None
    return None


def workspace_pack(workspace: Path, archive: IO[bytes]) -> None:
    """The worker's workspace as a tar owned by the sandbox user; GNU tar walks any depth, links not followed."""
    proc = subprocess.run(
        ["tar", "-c", "-f", "-", "-C", str(workspace), "--owner=10001", "--group=10001", "--numeric-owner", "."],
        stdout=archive,
        stderr=subprocess.PIPE,
        timeout=600,
        check=False,
    )
    if proc.returncode not in (0, 1):  # 1: a file changed while read, which nothing does between commands
        raise SandboxError(f"packing the agent's workspace failed: {proc.stderr.decode(errors='replace')[-500:]}")
    archive.flush()
    archive.seek(0)


def workspace_unpack(archive: IO[bytes], workspace: Path) -> list[str] | None:
    """Replace `workspace` by the container's copy in `archive`, through the `data` filter; the names it dropped,
    None (and the workspace untouched) if the archive is unreadable."""
    dropped: list[str] = []
    fresh = workspace.with_name(workspace.name + ".rcb-new")
    old = workspace.with_name(workspace.name + ".rcb-old")
    for stale in (fresh, old):
        _remove(stale)
    fresh.mkdir(mode=0o700)

    def kept(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError:
            dropped.append(member.name)
            return None

    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            tar.errorlevel = 0  # a member the worker cannot create (too long a path) is left out, not fatal
            tar.extractall(fresh, filter=kept)
    except (tarfile.TarError, OSError):
        _remove(fresh)
        return None
    os.rename(workspace, old)
    os.rename(fresh, workspace)
    _remove(old)
    return [name.removeprefix("./") for name in dropped]


def _remove(folder: Path) -> None:
    """`rm -rf` walks any depth the agent made (shutil.rmtree recurses)."""
    if os.path.lexists(folder):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], capture_output=True, check=False)
