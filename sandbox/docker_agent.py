"""An agent's shell commands on the docker backend: one container per agent item, kept across its commands.

The container is a run's (docker.host_config: read-only root, no network, no capabilities, no-new-privileges,
Docker's default seccomp profile, memory, CPU and process limits, tmpfs folders) whose main process is a keeper
(`cat` of the attach stream, under docker-init) running as KEEPER_USER, another unprivileged uid than the commands'
SANDBOX_USER: a command cannot signal the keeper or the init, and the end of each command, `kill(-1)` with
SANDBOX_USER's uid as its effective uid from a process born root (END), kills everything the command left
(background jobs, `setsid`, double forks) while the container lives on; what it kills cannot stop, trace or signal
it. The container holds SETUID and SETGID for that step and the command server's switch of uid alone: it is created
as root (so that a root exec gets them) and its keeper drops to KEEPER_USER at once; docker-init stays root, out of
a command's reach too; non-root processes get no capabilities, and no-new-privileges keeps setuid files from
granting any. The workspace, /tmp and /dev/shm are tmpfs folders whose pages count against the container's memory:
together they hold at most the release's memory (`tmpfs_sizes`), so a command that fills them leaves the server's
own memory to it and to the end step (which empties /tmp and /dev/shm first), and a process of the command holding
the memory left is the one the container's out-of-memory killer picks when it is larger than the server (an OOM
score of -1000 for the server would hold against many small ones too, but needs SYS_RESOURCE, which not every
engine's host has). Many processes of the command each smaller than the server can make the killer take the server:
its channel closes, the end step cannot run, and the command is told it was killed for memory ("the container ran
out of memory"), its workspace changes not kept; the next command gets a new container, and the item goes on: the
command's failure, never the platform's. The server itself holds no more than a chunk of a command's output (it
reads at most 64 KiB at a time, drops what is past the job's cap and writes frames blocking, so a slow reader
stalls the command, not the server's memory) and PENDING_MAX of stdin. When the worker dies its attach stream
closes, the keeper reads EOF and the container (auto-removed) goes with it.

Each command's jobs (the copy-in with the command, then the end step) are spawned by the container's command
server (docker_channel.py, programs/command_server.py): one `docker exec -i` per container, started with it, runs
as root and forks each job with the uid, folder, variables and stdin a `docker exec` of its own would have had; the
end step starts as the command's shell exits (or at the deadline, at the worker's word) and runs in a fork of the
server's interpreter. A command costs one round trip on that channel and two forks in the container instead of two
`docker exec`s and a Python's start (about 100 ms on a 2-core worker, several times that loaded: the same run of
scripts/bench_docker_commands.py measures both). What a command starts cannot reach the server: its real and saved
uids are root's (no signal, no trace, no /proc/<pid>/fd), its pipes are the worker's exec stream and the jobs' own
(a job keeps nothing else of it), and it spawns only what the worker asks. The end step's `kill(-1)` must not reach
it either, so the killer's real uid is KILLER_UID, neither root's nor the command's: it reaches every process of
SANDBOX_USER (its effective uid) and neither the server, its spare, the keeper nor docker-init. The server keeps a
spare process forked before each command runs, which becomes that command's end step: a command holding every
process slot cannot keep its end step from starting (the container's process limit counts the server and its spare
on top of the release's). Closing the channel (the item's end, or a failed end step) ends the server; the
container's removal then kills whatever is left. A channel that closed on its own (the server killed by the
container's out-of-memory killer, say) gets its container replaced at the next command, counted and logged.

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
entries (files, folders, links) and the apparent size of its files, and refuses over the `AGENT_WORKSPACE_FILES` setting
entries or `disk_bytes` bytes: a sparse file (`truncate -s 50G`) holds nothing on the tmpfs but would be archived
and unpacked as 50 GB of zeros, so it is refused at once. A refused or stopped copy leaves the workspace as it was
before the command (the new copy is built beside it and only swapped in whole), and the tool output says why; the
command's duration counts the copy too.

At the deadline the kill is the end step's job, so what the command left may run for the spawn's latency past it
(milliseconds) before it dies; nothing of it outlives the end step.

Between commands the container keeps only /sandbox: /tmp, /dev/shm and the IPC objects are emptied at each end,
as a fresh bwrap sandbox has them empty.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from sandbox.base import Environment, ExecResult, Limits, SandboxError
from sandbox.config import setting
from sandbox.docker_channel import PYTHON_LAUNCHER, ROOT_PATH, CommandChannel, Job
from sandbox.docker_engine import (
    SANDBOX_USER,
    TMP_BYTES,
    WORKER_LABEL,
    CappedOutput,
    container_remove,
    engine_errors,
    host_config,
    run_environment,
)
from sandbox.workspace_copy import (
    COPY_SECONDS,
    copy_notes,
    over_reason,
    time_limit,
    workspace_pack,
    workspace_unpack,
)

if TYPE_CHECKING:
    from sandbox.docker import DockerBackend

AGENT_LABEL = "rcb.agent"
KEEPER_USER = "10002:10002"
# The container is created as root and its keeper drops to KEEPER_USER: an exec as root gets the container's
# capabilities only if its configured user is root (Docker gives a non-root container's processes none).
KEEPER_UID, KEEPER_GID = KEEPER_USER.split(":")
KEEPER = ["/usr/bin/setpriv", f"--reuid={KEEPER_UID}", f"--regid={KEEPER_GID}", "--clear-groups", "/bin/cat"]
# What runs as root is named by absolute paths, and the end step (root, then the copy-back's shell) has ROOT_PATH as
# its PATH: the image's starts with /opt/env/bin, which the environment's requirements wrote as uid 10001 (a planted
# `sh` there ran as root in the attack review).
WORK_DIR = "/sandbox"  # where bwrap has the workspace too: the agent's prompt and file tools name /sandbox
# docker-init, the keeper and the command server count against the container's pids limit, and so does the server's
# spare while the command runs; the command's tree gets the release's.
OWN_PROCESSES = 3
SPARE_PROCESSES = 1
# The server's memory (an isolated Python, ~10 MB, and its spare's few pages) on top of the release's limit.
OWN_MEMORY = 16 * 1024 * 1024
# Off only in a test, to show the attack: /tmp and /dev/shm at 64 MB each whatever the release's memory.
SERVER_MEMORY_KEPT = True


def tmpfs_sizes(limits: Limits) -> tuple[int, int]:
    """The sizes of /tmp and /dev/shm (each) and of the workspace: tmpfs pages count against the container's memory,
    so together they hold at most the release's memory and a command that fills them all leaves the server's
    OWN_MEMORY to it and the end step (which empties /tmp and /dev/shm first). Only a release whose memory is under
    its disk limit plus 2 x TMP_BYTES gets less than TMP_BYTES and its disk limit."""
    scratch = min(TMP_BYTES, limits.disk_bytes, limits.memory_bytes // 8)
    return scratch, min(limits.disk_bytes, limits.memory_bytes - 2 * scratch)


STARTED = "rcb-docker-started"
# Empty the workspace's tmpfs, unpack the worker's copy from stdin, then run the command (its stdin empty).
START = (
    # The command may have left a folder it made unreadable: its owner (10001, as this) opens every folder first.
    # Their warnings are dropped: one per file of the agent's (a future time stamp) would push the start line past the
    # output cap, turning every later command into an infrastructure error, never scored.
    f"chmod -R u+rwx {WORK_DIR} 2>/dev/null; find {WORK_DIR} -mindepth 1 -delete 2>/dev/null "
    f"&& tar -x -o -f - -C {WORK_DIR} 2>/dev/null "
    f'&& printf "%s\\n" {STARTED} >&2 && exec /bin/sh -c "$1" </dev/null'
)
# The end step is born root (END_USER) and so out of reach of what the command left: a process of uid 10001 can
# neither signal nor trace a process none of whose real and saved uids is 10001 (it has no capabilities). The image's
# own Python (PYTHON_LAUNCHER's; the command server runs it in a fork of itself) drops the supplementary groups and
# takes gid 10001, then real and saved uid KILLER_UID and effective uid 10001 (the container's SETUID and SETGID
# serve this switch; all of its capabilities go with it): kill(-1) then reaches every process of uid 10001 (a signal
# is allowed when the sender's effective or real uid is the target's real or saved uid) and neither the command
# server and its spare (root), the keeper (10002) nor docker-init (pid 1, which kill(-1) skips); a process of 10001
# cannot signal it back, nor trace it (its uids differ, and the switch made it non-dumpable). It kills until only
# docker-init, the keeper, the server and itself are left in /proc, zombies counted (the killed hold their process
# slots until they are reaped, and a process forked before that fails with the slots full), then takes uid 10001 for
# good, refuses a workspace over argv[1] entries or argv[2] bytes of files' apparent size (exit OVER_ENTRIES or
# OVER_BYTES at the first entry past; folders it cannot read count as one entry, as find's walk had them) and execs
# the rest as a shell: empty what a fresh sandbox has empty (folders the command made unreadable opened first), say
# TAR_STARTED on stderr and send the workspace back as a tar. Any failure before that exits without the marker
# (dash's own failures exit 2 too, which without the marker would read as tar's "a file was unreadable, the rest
# archived"): the container is removed.
ROOT = "0:0"
END_USER = ROOT
SANDBOX_UID = int(SANDBOX_USER.split(":")[0])
KILLER_UID = 10003  # no process of the container has it (KEEPER_USER is 10002)
OVER_ENTRIES, OVER_BYTES = 3, 4
TAR_STARTED = "rcb-docker-tar"
# The emptying runs only when there is something to empty, seen by the shell's builtins (a process each costs
# milliseconds): an IPC object is a line past the header of /proc/sysvipc's lists, a file in the folders a match of
# their globs (dot files too).
SCRATCH = " ".join(f"{folder}/* {folder}/.[!.]* {folder}/..?*" for folder in ("/tmp", "/dev/shm", "/dev/mqueue"))
END_REST = (
    "for f in /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem; do "
    'if ! [ -r "$f" ] || { read -r line; read -r line; } < "$f"; then ipc=1; fi; done; '
    '[ -z "$ipc" ] || ipcrm -a 2>/dev/null; '
    f'for f in {SCRATCH}; do if [ -e "$f" ] || [ -L "$f" ]; then used=1; fi; done; '
    '[ -z "$used" ] || { chmod -R u+rwx /tmp /dev/shm /dev/mqueue 2>/dev/null; '
    "find /tmp /dev/shm /dev/mqueue -mindepth 1 -delete 2>/dev/null; }; "
    f"printf '%s\\n' {TAR_STARTED} >&2; exec tar -c -f - -C {WORK_DIR} ."
)
END_KILL = f"""
import os, sys
os.setgroups([])
os.setresgid({SANDBOX_UID}, {SANDBOX_UID}, {SANDBOX_UID})
os.setresuid({KILLER_UID}, {SANDBOX_UID}, {KILLER_UID})
while True:
    try:
        os.kill(-1, 9)
    except ProcessLookupError:
        pass
    if sum(name.isdigit() for name in os.listdir("/proc")) <= {OWN_PROCESSES + 1}:
        break
os.setresuid({SANDBOX_UID}, {SANDBOX_UID}, {SANDBOX_UID})
entries, size, count, total, folders = int(sys.argv[1]), int(sys.argv[2]), 0, 0, ["{WORK_DIR}"]
while folders:
    try:
        listing = os.scandir(folders.pop())
    except OSError:
        continue
    with listing:
        for entry in listing:
            count += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                pass
            if count > entries:
                os._exit({OVER_ENTRIES})
            if total > size:
                os._exit({OVER_BYTES})
os.execv("/bin/sh", ["sh", "-c", {END_REST!r}, "rcb-end"])
"""
END = PYTHON_LAUNCHER  # $0 is END_KILL; the command server runs it in a fork of its own interpreter


class AgentContainer:
    """The kept container of one agent workspace (see the module's docstring)."""

    def __init__(self, backend: DockerBackend, environment: Environment, limits: Limits):
        self.api = backend.client().api
        self.key = container_key(limits)
        self.env = {**run_environment(limits), "HOME": WORK_DIR, "USER": "sandbox"}
        self.container: str | None = None
        self.keeper = None
        self.channel: CommandChannel | None = None
        self.oom_file: Path | None = None
        self.ooms_last = 0
        own = replace(
            limits,
            processes=limits.processes + OWN_PROCESSES + SPARE_PROCESSES,
            memory_bytes=limits.memory_bytes + OWN_MEMORY,
        )
        if SERVER_MEMORY_KEPT:
            scratch, work = tmpfs_sizes(limits)
            config = host_config(replace(own, disk_bytes=work), work=WORK_DIR, tmp_bytes=scratch)
            config["shm_size"] = scratch
        else:
            config = host_config(own, work=WORK_DIR)
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
                found = self.api.inspect_container(self.container)
                self.pid = int(found["State"]["Pid"])
            # A job's variables are those `docker exec` gives: the default PATH and the hostname, then the image's
            # and the container's, then the exec's own (self.env).
            self.base_env = {
                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOSTNAME": found["Config"]["Hostname"],
                **dict(variable.split("=", 1) for variable in found["Config"]["Env"] or [] if "=" in variable),
            }
            self.channel = CommandChannel(self.api, self.container)
        except BaseException:
            self.remove()
            raise
        self.oom_file = _oom_file(self.pid)

    def alive(self) -> bool:
        """Whether its command channel is open (it closes when the container goes)."""
        return self.container is not None and self.channel is not None and self.channel.alive()

    def lost(self) -> bool:
        """Whether its channel closed on its own (not by a removal: the item's end, a failed end step)."""
        return self.container is not None and not self.alive()

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        """Copy `workspace` in, run `command` until it ends or its deadline, kill what it left, copy the workspace
        back, all within the command's wall limit plus COPY_SECONDS; a copy refused or stopped leaves `workspace` as
        it was before the command (see the module's docstring). The duration is the whole call's."""
        ooms = self._ooms()
        start = time.monotonic()
        deadline = start + limits.wall_seconds + COPY_SECONDS
        with tempfile.TemporaryFile(prefix="rcb-agent-out-") as back:
            # The tmpfs holds at most disk_bytes (the end step counts apparent sizes); headers come on top.
            sink = _FileSink(back, cap=2 * limits.disk_bytes + (64 << 20))
            with tempfile.TemporaryFile(prefix="rcb-agent-in-") as archive:
                workspace_pack(workspace, archive, seconds=deadline - time.monotonic())
                output = CappedOutput(limits.output_bytes)
                run = self._spawn(
                    ["sh", "-c", START, "rcb-command", command], output=output, cap=limits.output_bytes, spare=True
                )
                end = self._end_spawn(sink, limits, after=run)
                command_deadline = time.monotonic() + limits.wall_seconds
                with contextlib.suppress(SandboxError):  # a channel gone now fails the end step, which says so
                    while chunk := archive.read(1 << 20):
                        run.write(chunk)
                    run.close_stdin()
            timed_out = self._wait(run, deadline=command_deadline)
            ended = None if timed_out else run.code
            refused = self._end(end, sink, limits, deadline=deadline, now=timed_out, ooms=ooms)
            copied = not refused
            run.done.wait(timeout=max(0.0, min(10.0, deadline - time.monotonic())))
            code = run.code if copied else ended
            stderr = output.text(2)
            head, found, rest = stderr.partition(STARTED + "\n")
            if not found and copied:
                raise SandboxError(f"the agent's command did not start (exit {code}): {stderr[-2000:]}")
            dropped: list[str] | None = None
            if copied:
                back.seek(0)
                dropped = workspace_unpack(
                    back,
                    workspace,
                    deadline=deadline,
                    max_bytes=limits.disk_bytes,
                    max_entries=setting("AGENT_WORKSPACE_FILES"),
                )
                if dropped is None:
                    refused = (
                        f"it was not unpacked within {time_limit(limits, COPY_SECONDS)}"
                        if time.monotonic() >= deadline
                        else "its archive is unreadable or over the workspace's limits"
                    )
            notes = copy_notes(refused, dropped)
        oom = self._ooms() > ooms
        killed = timed_out or (oom and code == 137)
        return ExecResult(
            exit_code=None if killed else code,
            stdout=output.text(1),
            stderr=head + rest + notes,
            timed_out=timed_out,
            duration=time.monotonic() - start,
            backend="docker",
            oom_killed=oom,
            output_truncated=output.truncated,
        )

    def _end_spawn(self, sink: _FileSink, limits: Limits, *, after: Job) -> Job | None:
        """The end step, spawned to start when the command's shell exits (or at `_end`'s word); None if the channel
        is gone."""
        argv = ["/bin/sh", "-c", END, END_KILL, str(setting("AGENT_WORKSPACE_FILES")), str(limits.disk_bytes)]
        try:
            return self._spawn(argv, output=sink, user=END_USER, cap=sink.cap, stdin=False, after=after)
        except SandboxError:
            return None

    def _end(self, end: Job | None, sink: _FileSink, limits: Limits, *, deadline: float, now: bool, ooms: int) -> str:
        """The end step: kill what the command left, empty /tmp, take the workspace back into `sink`; "" when done,
        else why not. `now`: start it before the command's shell exited (its deadline passed). When it could not
        (the workspace over its entries or bytes, a fork bomb holding every process slot, a tar over the cap or past
        the deadline, the command server killed by the container's out-of-memory killer: `ooms` is the count before
        the command) the container is removed with everything in it (its tar too), and the next command gets a
        new one."""
        entries = setting("AGENT_WORKSPACE_FILES")
        why = f"it did not end within {time_limit(limits, COPY_SECONDS)}"
        try:
            if end is None:
                raise SandboxError("the channel is gone")
            if now:
                end.start_now()
            if end.done.wait(timeout=max(0.0, deadline - time.monotonic())):
                code = end.code
                if code is None:  # the channel closed, or the server had no process to run it
                    raise SandboxError(end.failed)
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
            if self._ooms() > ooms:  # the command's processes held the memory and the killer took the server
                why = "the container ran out of memory (its command server was killed)"
        self.remove()
        return why

    def _spawn(self, argv: list[str], *, output, user: str = SANDBOX_USER, **job) -> Job:
        if self.channel is None:
            raise SandboxError("the agent's container is gone")
        environment = self.env if user == SANDBOX_USER else {**self.env, "PATH": ROOT_PATH}
        # Root holds no DAC capability here, so it cannot enter the workspace (0700, the sandbox user's); the end
        # step names every path in full.
        folder = WORK_DIR if user == SANDBOX_USER else "/"
        return self.channel.spawn(
            argv, user=user, env={**self.base_env, **environment}, cwd=folder, output=output, **job
        )

    @staticmethod
    def _wait(run: Job, *, deadline: float) -> bool:
        """Until the command's shell ended (what it left running still holds its pipes: the end step kills it) or
        its deadline passed; True for the deadline."""
        return not run.exited.wait(timeout=max(0.0, deadline - time.monotonic()))

    def _ooms(self) -> int:
        """The container's OOM kills so far (cgroup v1's counter), 0 where this worker cannot see its cgroup; once
        the container is removed, its last count (its cgroup went with it)."""
        if self.container is None:
            return self.ooms_last
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
            self.ooms_last = self._ooms()  # a command's OOM kill is still told after an end step's removal
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.container is not None:
            with contextlib.suppress(SandboxError):
                container_remove(self.api, self.container)
            self.container = None
        if self.keeper is not None:
            with contextlib.suppress(OSError):
                self.keeper.close()


class _FileSink:
    """Takes the end step's stdout (a tar) into a file, up to `cap` bytes; of stderr only whether the end step said
    TAR_STARTED (a marker split across frames is found through the previous frame's tail)."""

    def __init__(self, file: IO[bytes], *, cap: int):
        self.file, self.cap, self.kept, self.over = file, cap, 0, False
        self.tar_started, self._tail = False, b""

    def feed(self, number: int, data: bytes) -> None:
        marker = TAR_STARTED.encode()
        if number == 2 and not self.tar_started:
            self.tar_started = marker in self._tail + data
            self._tail = (self._tail + data)[-len(marker) :]
        if number != 1 or self.over:
            return
        if self.kept + len(data) > self.cap:
            self.over = True
            return
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
