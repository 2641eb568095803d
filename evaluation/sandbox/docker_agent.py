"""An agent's shell commands on the docker backend: one container per agent item, kept across its commands.

The container is a run's (docker.host_config: read-only root, no network, no capabilities, no-new-privileges,
Docker's default seccomp profile, memory, CPU and process limits, tmpfs folders) whose main process is a keeper
(`cat` of the attach stream, under docker-init) running as KEEPER_USER, another unprivileged uid than the
commands' SANDBOX_USER: a command cannot signal the keeper or the init, and the end of each command, `kill(-1)`
with SANDBOX_USER's uid as its effective uid from a process born root (END), kills everything the command left
(background jobs, `setsid`, double forks) while the container lives on; what it kills cannot stop, trace or
signal it. The container holds SETUID and SETGID for that step alone: it is created as root (so that a root exec
gets them) and its keeper drops to KEEPER_USER at once; docker-init stays root, out of a command's reach too;
non-root processes get no capabilities, and no-new-privileges keeps setuid files from granting any. A command
then costs two `docker exec`s instead of a container's create, start and removal. When the worker dies its attach
stream closes, the keeper reads EOF and the container (auto-removed) goes with it.

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

The copy is bounded like the command (an agent's cheap command must not hold a sandbox slot and the worker's CPU
and disk for minutes while its tool output shows seconds): one deadline, the command's wall limit plus
COPY_SECONDS, covers packing, the command and unpacking; past it the copy is stopped (the container, with its tar,
removed; the unpacking folder deleted). Before the container's tar starts, the end step counts the workspace's
entries (files, folders, links) and the apparent size of its files, and refuses over `settings.AGENT_WORKSPACE_FILES`
entries or `disk_bytes` bytes: a sparse file (`truncate -s 50G`) holds nothing on the tmpfs but would be archived
and unpacked as 50 GB of zeros, so it is refused at once. A refused or stopped copy leaves the workspace as it was
before the command (the new copy is built beside it and only swapped in whole), and the tool output says why; the
command's duration counts the copy too.

At the deadline the kill is the end step's `docker exec`, so what the command left may run for that call's latency
past it (milliseconds; a few hundred under load) before it dies; nothing of it outlives the end step.

Between commands the container keeps only /sandbox: /tmp, /dev/shm and the IPC objects are emptied at each end,
as a fresh bwrap sandbox has them empty.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings
from docker.utils.socket import frames_iter

from evaluation.sandbox.base import Environment, ExecResult, Limits, SandboxError
from evaluation.sandbox.docker_engine import (
    SANDBOX_USER,
    WORKER_LABEL,
    CappedOutput,
    container_remove,
    engine_errors,
    host_config,
    run_environment,
)
from evaluation.sandbox.workspace_copy import (
    COPY_SECONDS,
    copy_notes,
    over_reason,
    time_limit,
    workspace_pack,
    workspace_unpack,
)

if TYPE_CHECKING:
    from evaluation.sandbox.docker import DockerBackend

AGENT_LABEL = "rcb.agent"
KEEPER_USER = "10002:10002"
# The container is created as root and its keeper drops to KEEPER_USER: an exec as root gets the container's
# capabilities only if its configured user is root (Docker gives a non-root container's processes none).
KEEPER_UID, KEEPER_GID = KEEPER_USER.split(":")
KEEPER = ["/usr/bin/setpriv", f"--reuid={KEEPER_UID}", f"--regid={KEEPER_GID}", "--clear-groups", "/bin/cat"]
# What runs as root is named by absolute paths, and the end step's exec (root, then the copy-back's shell) has this
# PATH: the image's starts with /opt/env/bin, which the environment's requirements wrote as uid 10001 (a planted `sh`
# there ran as root in the attack review).
ROOT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
WORK_DIR = "/sandbox"  # where bwrap has the workspace too: the agent's prompt and file tools name /sandbox
# docker-init and the keeper count against the container's pids limit; the command's tree gets the release's.
OWN_PROCESSES = 2
STARTED = "rcb-docker-started"
# Empty the workspace's tmpfs, unpack the worker's copy from stdin, then run the command (its stdin empty).
START = (
    f"find {WORK_DIR} -mindepth 1 -delete && tar -x -o -f - -C {WORK_DIR} "
    f'&& printf "%s\\n" {STARTED} >&2 && exec /bin/sh -c "$1" </dev/null'
)
# The end step is born root (END_USER) and so out of reach of what the command left: a process of uid 10001 can
# neither signal nor trace a process whose real and saved uids are 0 (it has no capabilities). The image's own Python
# (never /opt/env's, which the environment's requirements built; isolated: no site, no variables, no imports from the
# working folder) sets only its effective uid to the command's: kill(-1) then reaches every process of uid 10001 (a
# signal is allowed when the sender's effective uid is the target's real uid) and neither the keeper nor docker-init.
# It kills until only docker-init, the keeper and itself are left in /proc, zombies counted (the killed hold their
# process slots until docker-init reaps them, and a `find` forked before that fails with the slots full), then takes
# uid and gid 10001 for good (the only use of the container's SETUID and SETGID) and execs the rest as a shell: empty
# what a fresh sandbox has empty (folders the command made unreadable opened first), refuse a workspace over $1
# entries or $2 bytes of files' apparent size (exit OVER_ENTRIES or OVER_BYTES; find stops at the first entry past),
# say TAR_STARTED on stderr and send the workspace back as a tar. Any failure before that exits without the marker
# (dash's own failures exit 2 too, which without the marker would read as tar's "a file was unreadable, the rest
# archived"): the container is removed.
ROOT = "0:0"
END_USER = ROOT
SANDBOX_UID = int(SANDBOX_USER.split(":")[0])
OVER_ENTRIES, OVER_BYTES, NO_PYTHON = 3, 4, 5
TAR_STARTED = "rcb-docker-tar"
END_REST = (
    "ipcrm -a 2>/dev/null; "
    "chmod -R u+rwx /tmp /dev/shm /dev/mqueue 2>/dev/null; "
    "find /tmp /dev/shm /dev/mqueue -mindepth 1 -delete 2>/dev/null; "
    f"find {WORK_DIR} -mindepth 1 \\( -type f -printf '%s\\n' \\) -o -printf '0\\n' | awk -v entries=\"$1\" "
    f"-v bytes=\"$2\" '{{ n++; s += $1; if (n > entries) exit {OVER_ENTRIES}; if (s > bytes) exit {OVER_BYTES} }}' "
    f"|| exit $?; printf '%s\\n' {TAR_STARTED} >&2; exec tar -c -f - -C {WORK_DIR} ."
)
END_KILL = f"""
import os, sys
os.setresuid(0, {SANDBOX_UID}, 0)
while True:
    try:
        os.kill(-1, 9)
    except ProcessLookupError:
        pass
    if sum(name.isdigit() for name in os.listdir("/proc")) <= {OWN_PROCESSES + 1}:
        break
os.setresuid(0, 0, 0)
os.setgroups([])
os.setresgid({SANDBOX_UID}, {SANDBOX_UID}, {SANDBOX_UID})
os.setresuid({SANDBOX_UID}, {SANDBOX_UID}, {SANDBOX_UID})
os.execv("/bin/sh", ["sh", "-c", {END_REST!r}, "rcb-end", *sys.argv[1:]])
"""
# The image's Python: Debian's in the debootstrapped base, python:3.11-slim's in the connected one ($0 is END_KILL).
END = (
    'for python in /usr/bin/python3 /usr/local/bin/python3; do [ -x "$python" ] && exec "$python" -I -S -c "$0" "$@"; '
    f"done; exit {NO_PYTHON}"
)
POLL_SECONDS = 0.2


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
        self.key = container_key(limits)
        self.env = {**run_environment(limits), "HOME": WORK_DIR, "USER": "sandbox"}
        self.container: str | None = None
        self.keeper = None
        config = host_config(replace(limits, processes=limits.processes + OWN_PROCESSES), work=WORK_DIR)
        config["auto_remove"] = True
        config["cap_add"] = ["SETUID", "SETGID"]  # the end step's and the keeper's switch of uid (the docstring)
        try:
            with engine_errors("creating the agent's container"):
                self.container = self.api.create_container(
                    environment.location,
                    KEEPER,
                    user=ROOT,
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
        back, all within the command's wall limit plus COPY_SECONDS; a copy refused or stopped leaves `workspace` as
        it was before the command (see the module's docstring). The duration is the whole call's."""
        ooms = self._ooms()
        start = time.monotonic()
        deadline = start + limits.wall_seconds + COPY_SECONDS
        with tempfile.TemporaryFile(prefix="rcb-agent-in-") as archive:
            workspace_pack(workspace, archive, seconds=deadline - time.monotonic())
            run = self._exec(["sh", "-c", START, "rcb-command", command], output=CappedOutput(limits.output_bytes))
            command_deadline = time.monotonic() + limits.wall_seconds
            with contextlib.suppress(OSError):
                raw = getattr(run.stream, "_sock", run.stream)
                while chunk := archive.read(1 << 20):
                    raw.sendall(chunk)
                raw.shutdown(socket.SHUT_WR)
        timed_out = self._wait(run, deadline=command_deadline)
        ended = None if timed_out else self._exit_code(run)  # the container may be gone after the end step
        with tempfile.TemporaryFile(prefix="rcb-agent-out-") as back:
            # The tmpfs holds at most disk_bytes (the end step counts apparent sizes); headers come on top.
            sink = _FileSink(back, cap=2 * limits.disk_bytes + (64 << 20))
            refused = self._end(sink, limits, deadline=deadline)
            copied = not refused
            run.reader.join(timeout=max(0.0, min(10.0, deadline - time.monotonic())))
            with contextlib.suppress(OSError):
                run.stream.close()
            code = self._exit_code(run) if copied else ended
            stderr = run.output.text(2)
            head, found, rest = stderr.partition(STARTED + "\n")
            if not found and copied:
                raise SandboxError(f"the agent's command did not start (exit {code}): {stderr[-2000:]}")
            dropped: list[str] | None = None
            if copied:
                back.seek(0)
                dropped = workspace_unpack(back, workspace, deadline=deadline)
                if dropped is None:
                    refused = (
                        f"it was not unpacked within {time_limit(limits)}"
                        if time.monotonic() >= deadline
                        else "its archive is unreadable"
                    )
            notes = copy_notes(refused, dropped)
        oom = self._ooms() > ooms
        killed = timed_out or (oom and code == 137)
        return ExecResult(
            exit_code=None if killed else code,
            stdout=run.output.text(1),
            stderr=head + rest + notes,
            timed_out=timed_out,
            duration=time.monotonic() - start,
            backend="docker",
            oom_killed=oom,
            output_truncated=run.output.truncated,
        )

    def _end(self, sink: _FileSink, limits: Limits, *, deadline: float) -> str:
        """The end step: kill what the command left, empty /tmp, take the workspace back into `sink`; "" when done,
        else why not. When it could not (the workspace over its entries or bytes, a fork bomb holding every
        process slot, a tar over the cap or past the deadline) the container is removed with everything in it
        (its tar too), and the next command gets a new one."""
        entries = settings.AGENT_WORKSPACE_FILES
        why = f"it did not end within {time_limit(limits)}"
        try:
            end = self._exec(
                ["/bin/sh", "-c", END, END_KILL, str(entries), str(limits.disk_bytes)], output=sink, user=END_USER
            )
            with contextlib.suppress(OSError):
                raw = getattr(end.stream, "_sock", end.stream)
                raw.shutdown(socket.SHUT_WR)
            end.reader.join(timeout=max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(OSError):
                end.stream.close()
            if not end.reader.is_alive():
                code = self._exit_code(end)
                # tar: 1 for a file changed while read, 2 for one it could not read (left out, the rest archived).
                if not sink.over and sink.tar_started and code in (0, 1, 2):
                    return ""
                if code in (OVER_ENTRIES, OVER_BYTES):
                    state = "entries" if code == OVER_ENTRIES else "bytes"
                    why = over_reason(state, entries=entries, disk_bytes=limits.disk_bytes)
                else:
                    why = f"its archive is over {sink.cap} bytes" if sink.over else f"the end step failed ({code})"
        except SandboxError:
            why = "the container could not run its end step"
        self.remove()
        return why

    def _exec(self, argv: list[str], *, output, user: str = SANDBOX_USER) -> _Exec:
        environment = self.env if user == SANDBOX_USER else {**self.env, "PATH": ROOT_PATH}
        with engine_errors("starting the agent's command"):
            exec_id = self.api.exec_create(
                self.container, argv, stdin=True, user=user, environment=environment, workdir=WORK_DIR
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
    """Reads an exec's stdout (a tar) into a file, up to `cap` bytes; of stderr only whether the end step said
    TAR_STARTED (a marker split across frames is found through the previous frame's tail)."""

    def __init__(self, file: IO[bytes], *, cap: int):
        self.file, self.cap, self.kept, self.over = file, cap, 0, False
        self.tar_started, self._tail = False, b""

    def read(self, stream) -> None:
        marker = TAR_STARTED.encode()
        with contextlib.suppress(OSError, ValueError):
            for number, data in frames_iter(stream, tty=False):
                if number == 2 and not self.tar_started:
                    self.tar_started = marker in self._tail + data
                    self._tail = (self._tail + data)[-len(marker) :]
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
