"""The `bwrap` backend: bubblewrap namespaces, uid 65534, cgroup v1 limits and a size-limited tmpfs work folder.

bwrap runs as root (no user namespace: one made by root maps the sandbox user to host root, which owns the
bound /dev nodes and could chmod them), keeps only the capabilities setpriv needs to become uid/gid 65534,
and setpriv drops them all before anything of the task runs. The task's files reach the tmpfs as a tar
archive on stdin, so no copy of them (the harness nonce included) stays visible to the test.

An agent's command gets the same size-limited tmpfs work folder, its workspace copied in (a tar on stdin) and back
(a tar on a pipe, through the `data` filter into a new folder: workspace_copy.py), never bound: a bound folder of the
worker's disk had no limit but the disk's, so one command could fill it. A write past the release's disk limit fails
with ENOSPC inside the sandbox, and the command's output says the workspace is full. The end step that holds the
copy-back pipe runs as the sandbox's root until every process of the command is dead (COMMAND), as docker's is born
root: a process the command left cannot take the pipe (pidfd_getfd, ptrace) and write a copy-back of its own.

A cold item or an agent's command starts without forking the worker (a fork copies the page tables of the whole
worker: about 100 ms for a 400 MB worker here, where the command itself takes 40): prlimit sets the run's rlimits and
a shell joins the run's cgroups as itself, each exec'ing the next, so the same limits hold bwrap and everything below
it before bwrap starts, as a preexec function did; a cgroup that cannot be joined ends the start before bwrap runs.
"""

from __future__ import annotations

import functools
import io
import logging
import math
import os
import resource
import shlex
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import IO

from sandbox.base import Environment, ExecResult, Limits, SandboxBackend, SandboxError, Session
from sandbox.cgroups import RunCgroups
from sandbox.config import setting
from sandbox.forkserver import ForkingSession, ProcessZygote
from sandbox.install import INPUTS
from sandbox.process import process_run, rlimits
from sandbox.venv import pip_package, venv_build, venv_remove
from sandbox.workspace_copy import (
    COPY_SECONDS,
    copy_notes,
    over_reason,
    time_limit,
    workspace_pack,
    workspace_unpack,
)

logger = logging.getLogger(__name__)

SANDBOX_UID = SANDBOX_GID = 65534
WORK_DIR = "/sandbox"
# Printed by the sandbox once its files are unpacked: without it bwrap, setpriv or tar failed (infrastructure).
STARTED = "rcb-bwrap-started"
PROBE_TIMEOUT = 20
SETPRIV = "/usr/bin/setpriv"
# Where a build step sees the worker's pip package (alone, so nothing else of the worker is importable).
PIP_DIR = "/rcb-pip"

TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FROM_HOST = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")
ETC_OWN = {
    "passwd": f"root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:{SANDBOX_UID}:{SANDBOX_GID}::{WORK_DIR}:/bin/sh\n",
    "group": f"root:x:0:\nsandbox:x:{SANDBOX_GID}:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
}


def _setpriv() -> list[str]:
    return [
        SETPRIV,
        f"--reuid={SANDBOX_UID}",
        f"--regid={SANDBOX_GID}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _system_binds(etc_dir: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Links for /bin and friends, and the read-only binds of /usr, a few host /etc files and our own passwd etc."""
    links: list[str] = []
    binds = [("/usr", "/usr")]
    for name in TOP_LEVEL:
        path = Path("/") / name
        if path.is_symlink():
            links += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            binds.append((str(path), str(path)))
    binds += [(f"/etc/{name}", f"/etc/{name}") for name in ETC_FROM_HOST if os.path.lexists(f"/etc/{name}")]
    binds += [(str(etc_dir / name), f"/etc/{name}") for name in ETC_OWN]
    return links, binds


def _ro_binds(binds: Sequence[tuple[str, str]], writable: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Read-only binds, then writable ones; missing parents are made 0755 (bwrap would copy modes like /root's 0700)."""
    args: list[str] = []
    exists = {"/", "/tmp", WORK_DIR}
    bound: list[PurePosixPath] = []
    for (source, dest), flag in [*((b, "--ro-bind") for b in binds), *((b, "--bind") for b in writable)]:
        target = PurePosixPath(dest)
        if not any(mount == target or mount in target.parents for mount in bound):
            for parent in reversed(target.parents):
                if str(parent) not in exists:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    exists.add(str(parent))
        args += [flag, source, dest]
        bound.append(target)
    return args


def _sandbox_args(limits: Limits, *, kill: bool = False) -> list[str]:
    """Namespaces, a fresh /proc and /dev, and size-limited tmpfs folders for the work folder and /tmp; `kill`: root
    may signal the sandbox user's processes (an agent command's end step)."""
    work = ["--perms", "0777", "--size", str(limits.disk_bytes), "--tmpfs", WORK_DIR]
    return [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(limits.disk_bytes),
        "--tmpfs",
        "/tmp",
        *work,
        "--chdir",
        WORK_DIR,
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
        "--cap-add",
        "CAP_SETPCAP",
        *(["--cap-add", "CAP_KILL"] if kill else []),
    ]


def _interpreter_prefixes(venv: Path) -> list[Path]:
    """The base interpreter's installation that the venv's python links to (pyvenv.cfg `home`, the real path)."""
    prefixes: list[Path] = []
    config = venv / "pyvenv.cfg"
    if config.exists():
        for line in config.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                home = Path(value.strip())
                prefixes.append(home.parent if home.name == "bin" else home)
    real = Path(os.path.realpath(venv / "bin" / "python"))
    prefixes.append(real.parent.parent)
    roots = [Path("/usr"), *(Path("/") / name for name in TOP_LEVEL)]
    kept: list[Path] = []
    for prefix in prefixes:
        covered = any(prefix == root or root in prefix.parents for root in [*roots, *kept])
        if not covered and prefix.is_dir():
            kept.append(prefix)
    return kept


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _probe(etc_dir: Path) -> tuple[bool, str]:
    """Start one empty sandbox with the flags every run uses; the answer holds for the life of the process."""
    if os.geteuid() != 0:
        return False, (
            "the bwrap backend runs bwrap as root and drops to uid 65534 with setpriv; "
            "run the worker as root or use docker"
        )
    bwrap = _bwrap()
    if bwrap is None:
        return False, "bwrap is not installed (apt-get install bubblewrap)"
    if not os.path.exists(SETPRIV) or shutil.which("tar", path="/usr/bin:/bin") is None:
        return False, f"{SETPRIV} and tar are needed inside the sandbox (apt-get install util-linux tar)"
    links, binds = _system_binds(etc_dir)
    command = [
        bwrap,
        *_sandbox_args(Limits()),
        *links,
        *_ro_binds(binds),
        "--clearenv",
        "--",
        *_setpriv(),
        "/bin/sh",
        "-c",
        f'test "$(id -u)" = {SANDBOX_UID}',
    ]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not start: {exc}"
    if proc.returncode != 0:
        return False, f"bwrap cannot create its sandbox here: {proc.stderr.strip() or f'exit {proc.returncode}'}"
    return True, version.stdout.strip()


def _archive(files: Mapping[str, bytes]) -> IO[bytes]:
    """The task's files as an unlinked tar file, owned by the sandbox user, written from memory (no staging folder:
    every item's archive would otherwise write the whole package to disk and read it back)."""
    entries: dict[PurePosixPath, bytes | None] = {}  # None: a folder
    for relative, data in files.items():
        path = PurePosixPath(relative)
        if path.is_absolute() or ".." in path.parts or not path.parts or "." in path.parts:
            raise ValueError(f"{relative}: path leaves the work folder")
        for parent in list(path.parents)[:-1]:
            if entries.get(parent) is not None:
                raise ValueError(f"{relative}: {parent} is a file")
            entries[parent] = None
        if path in entries:
            raise ValueError(f"{relative}: a folder of another file")
        entries[path] = data
    archive = tempfile.TemporaryFile(prefix="rcb-bwrap-")  # noqa: SIM115 (handed to the caller, who closes it)
    now = time.time()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries, key=lambda p: p.parts):
            content = entries[path]
            info = tarfile.TarInfo(str(path))
            info.uid, info.gid, info.mtime = SANDBOX_UID, SANDBOX_GID, now
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
    archive.seek(0)
    return archive


def _preexec(limits: Limits, cgroups: RunCgroups, stdin_fd: int) -> Callable[[], None]:
    """The run's limits on bwrap and everything below it; rlimits stand in for the controllers that are missing."""
    apply = rlimits(limits, address_space="memory" not in cgroups.folders)

    def preexec() -> None:
        cgroups.attach()
        apply()
        if "pids" not in cgroups.folders:
            # Counts every process of uid 65534 on the host, so only a fallback for the pids cgroup.
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        os.dup2(stdin_fd, 0)

    return preexec


PRLIMIT = "/usr/bin/prlimit"
FULL_BYTES = 1 << 20
COMMAND_SHELL = "/bin/bash"
OWN_PROCESSES = 2  # that bash and timeout(1) count against the pids cgroup; the command's tree gets the release's
# The copy-back of an agent's command, by bash as the sandbox user once nothing of the command is left ($1 entries
# and $2 bytes at most, $3 the command's exit status, the pipe on fd 9): a line `rcb-copy STATE` (kept; full: the
# tmpfs has under FULL_BYTES left; entries or bytes: over $1 entries or $2 bytes of files' apparent size, a sparse
# file counted whole, and no tar follows) and the workspace's tar. Its exit status is the command's.
END_STEP = (
    "state=kept; [ $(($(/usr/bin/stat -f -c '%a * %S' .))) -lt " + str(FULL_BYTES) + " ] && state=full; "
    "/usr/bin/find . -mindepth 1 \\( -type f -printf '%s\\n' \\) -o -printf '0\\n' | /usr/bin/awk -v entries=\"$1\" "
    "-v bytes=\"$2\" '{ n++; s += $1; if (n > entries) exit 3; if (s > bytes) exit 4 }'; "
    "case $? in 3) state=entries ;; 4) state=bytes ;; esac; "
    "printf 'rcb-copy %s\\n' \"$state\" >&9; "
    'case $state in entries | bytes) ;; *) /usr/bin/tar -c -f - . >&9 ;; esac; exit "$3"'
)
# As the sandbox user: the workspace unpacked from stdin into the work folder (the archive's top folder left out:
# the tmpfs's belongs to root), then the command ($1) run with its stdin empty within its wall limit ($2 s). tar's
# warnings are dropped: the workspace is the agent's, and a warning per file (a future time stamp) would push the
# start line past the output cap, turning every later command into an infrastructure error, never scored.
START = (
    '/usr/bin/tar -x -o --strip-components=1 -f - 2>/dev/null && printf "%s\\n" ' + STARTED + " >&2 || exit 125; "
    'exec /usr/bin/timeout -s KILL "$2" /bin/sh -c "$1" </dev/null'
)
# An agent's command ($1), run by bash (dash takes no descriptor past 9, and the pipe's is the worker's) as the
# sandbox's root, which holds the copy-back pipe ($5, moved to fd 9) from the start: what it runs as the sandbox user
# (the setpriv of ${@:6}) can neither signal nor trace it nor take a descriptor of it (pidfd_getfd, ptrace and
# /proc/PID/fd ask for the same uid or CAP_SYS_PTRACE, and bwrap leaves root only SETUID, SETGID, SETPCAP and KILL).
# The workspace unpacked and the command run (START, without fd 9), then every other process of the sandbox killed
# (kill(-1) skips bwrap's init, pid 1), and only then the end step takes the sandbox uid for good (exec, fd 9 kept; no
# process is left to reach it) and copies back (END_STEP). The system's tools are named by absolute paths: the
# environment's bin comes first on the command's PATH.
COMMAND = (
    'eval "exec 9>&$5 $5>&-"; drop=("${@:6}"); '
    '"${drop[@]}" ' + COMMAND_SHELL + " -c " + shlex.quote(START) + ' rcb-start "$1" "$2" 9>&-; status=$?; '
    'n=0; while kill -9 -1 2>/dev/null && [ "$n" -lt 100000 ]; do n=$((n + 1)); done; '
    'exec "${drop[@]}" ' + COMMAND_SHELL + " -c " + shlex.quote(END_STEP) + ' rcb-end "$3" "$4" "$status"'
)
# Off only in a test, to show the attack: the whole command, its end step included, as the sandbox user.
END_STEP_ROOT = True
# Run by a shell between prlimit and bwrap: joins the run's cgroups (their cgroup.procs files, $1 of them) as itself,
# then execs bwrap; a cgroup it cannot join ends the run before bwrap starts (exit 125, no start line).
ATTACH = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; n=$((n - 1)); shift; done; exec "$@"'


def _limited(argv: list[str], limits: Limits, cgroups: RunCgroups) -> list[str] | None:
    """`argv` started under the run's limits by exec'd helpers instead of a preexec function (which forks the whole
    worker): prlimit sets the rlimits `_preexec` sets, a shell joins the cgroups, then bwrap; None without prlimit."""
    if not os.access(PRLIMIT, os.X_OK):
        return None
    procs = [str(folder / "cgroup.procs") for folder in cgroups.folders.values()]
    cpu = int(limits.wall_seconds) + 5
    flags = [f"--fsize={limits.disk_bytes}", "--core=0", f"--cpu={cpu}"]
    if "memory" not in cgroups.folders:
        flags.append(f"--as={limits.memory_bytes}")
    if "pids" not in cgroups.folders:
        # Counts every process of uid 65534 on the host, so only a fallback for the pids cgroup.
        flags.append(f"--nproc={limits.processes}")
    return [PRLIMIT, *flags, "--", "/bin/sh", "-c", ATTACH, "rcb-attach", str(len(procs)), *procs, *argv]


class BwrapSession(ForkingSession):
    """Runs in the environment's venv bound read-only; a build (`building`) binds it writable, with its inputs."""

    work_dir = WORK_DIR

    def __init__(
        self,
        backend: BwrapBackend,
        environment: Environment,
        *,
        building: Sequence[tuple[str, str]] = (),
        env: Mapping[str, str] | None = None,
    ):
        super().__init__(backend, environment, forkserver=backend.forkserver and not building)
        venv = Path(environment.location)
        links, binds = _system_binds(backend.etc_dir)
        binds += [(str(path), str(path)) for path in _interpreter_prefixes(venv)]
        venv_bind = [(str(venv), str(venv))]
        self._mounts = links + (_ro_binds([*binds, *building], venv_bind) if building else _ro_binds(venv_bind + binds))
        self._path = f"{venv}/bin:/usr/local/bin:/usr/bin:/bin"
        self._env = dict(env or {})

    def _env_for(self, limits: Limits) -> dict[str, str]:
        threads = str(max(1, math.ceil(limits.cpus)))
        return {
            "PATH": self._path,
            "HOME": WORK_DIR,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "USER": "sandbox",
            "PYTHONDONTWRITEBYTECODE": "1",
            # Thread pools default to one thread per host core; each thread counts against the pids limit.
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            **self._env,
        }

    def _archive(self, files: Mapping[str, bytes]) -> IO[bytes]:
        return _archive(files)

    def _zygote_start(self, preload: Sequence[str], limits: Limits, helpers: Sequence[str] = ()) -> ProcessZygote:
        env = self._env_for(limits)
        setenv = [arg for key, value in env.items() for arg in ("--setenv", key, value)]

        def argv_for(python_args: list[str]) -> list[str]:
            return [
                _bwrap() or "bwrap",
                *_sandbox_args(limits),
                *self._mounts,
                "--clearenv",
                *setenv,
                "--",
                *_setpriv(),
                self.environment.python,
                *python_args,
            ]

        def preexec_for(cgroups: RunCgroups) -> Callable[[], None]:
            def preexec() -> None:
                cgroups.attach()
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

            return preexec

        return ProcessZygote(
            argv_for, preload=preload, limits=limits, cgroups_for=RunCgroups, preexec_for=preexec_for, helpers=helpers
        )

    def _cold_run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        unpack = f'PATH=/usr/bin:/bin tar -x -o -f - && printf "%s\\n" {STARTED} >&2 && exec "$@" </dev/null'
        with _archive(files) as archive:
            return self._sandboxed(
                script=unpack, name="rcb-unpack", args=command, limits=limits, stdin_fd=archive.fileno()
            )

    def command_run(self, *, workspace: Path, command: str, limits: Limits) -> ExecResult:
        """An agent's shell command in a copy of `workspace` on the size-limited work folder, no network and the
        run's limits; whatever it started dies when it ends. Its workspace comes back through the `data` filter
        within the command's wall limit plus COPY_SECONDS, or not at all (the workspace as it was, said in the
        output), as on docker (docker_agent.py). The duration is the whole call's."""
        start = time.monotonic()
        deadline = start + limits.wall_seconds + COPY_SECONDS
        entries = setting("AGENT_WORKSPACE_FILES")
        read_end, write_end = os.pipe()
        with (
            tempfile.TemporaryFile(prefix="rcb-agent-in-") as archive,
            tempfile.TemporaryFile(prefix="rcb-agent-out-") as back,
        ):
            # The tmpfs holds at most disk_bytes (the end step counts apparent sizes); headers come on top.
            drain = _Drain(read_end, back, cap=2 * limits.disk_bytes + (64 << 20))
            try:
                workspace_pack(workspace, archive, seconds=deadline - time.monotonic())
                result = self._sandboxed(
                    script=COMMAND,
                    name="rcb-command",
                    args=[
                        command,
                        f"{limits.wall_seconds:g}",
                        str(entries),
                        str(limits.disk_bytes),
                        str(write_end),
                        *(_setpriv() if END_STEP_ROOT else []),
                    ],
                    limits=replace(
                        limits,
                        wall_seconds=limits.wall_seconds + COPY_SECONDS,
                        processes=limits.processes + OWN_PROCESSES,
                    ),
                    stdin_fd=archive.fileno(),
                    pass_fds=(write_end,),
                    shell=COMMAND_SHELL,
                    as_root=END_STEP_ROOT,
                )
            finally:
                os.close(write_end)
                drain.join(deadline - time.monotonic())
            back.seek(0)
            header = back.readline(64)
            state = header[len(b"rcb-copy ") :].strip().decode() if header.startswith(b"rcb-copy ") else ""
            dropped: list[str] | None = None
            if state in ("entries", "bytes"):
                refused = over_reason(state, entries=entries, disk_bytes=limits.disk_bytes)
            elif state not in ("kept", "full") or drain.over:
                refused = (
                    f"its archive is over {drain.cap} bytes"
                    if drain.over
                    else f"it did not end within {time_limit(limits, COPY_SECONDS)}"
                    if result.timed_out
                    else "its end step did not finish"
                )
            else:
                dropped = workspace_unpack(
                    back,
                    workspace,
                    deadline=deadline,
                    max_bytes=limits.disk_bytes,
                    max_entries=setting("AGENT_WORKSPACE_FILES"),
                )
                refused = (
                    ""
                    if dropped is not None
                    else f"it was not unpacked within {time_limit(limits, COPY_SECONDS)}"
                    if time.monotonic() >= deadline
                    else "its archive is unreadable or over the workspace's limits"
                )
        notes = copy_notes(refused, dropped)
        if state == "full":
            notes += (
                f"\n[the workspace is full: a command's files may hold at most {limits.disk_bytes} bytes (the "
                f"release's disk limit); writes past it failed with 'No space left on device']"
            )
        # timeout(1)'s KILL at the command's wall limit: 137 once the limit has passed.
        timed_out = result.timed_out or (result.exit_code == 137 and time.monotonic() - start >= limits.wall_seconds)
        return replace(
            result,
            exit_code=None if timed_out else result.exit_code,
            stderr=result.stderr + notes,
            timed_out=timed_out,
            duration=time.monotonic() - start,
        )

    def _sandboxed(
        self,
        *,
        script: str,
        name: str,
        args: Sequence[str],
        limits: Limits,
        stdin_fd: int,
        pass_fds: Sequence[int] = (),
        shell: str = "/bin/sh",
        as_root: bool = False,
    ) -> ExecResult:
        """`/bin/sh -c script name *args` in a fresh bwrap sandbox as the sandbox user (`as_root`: as the sandbox's
        root, allowed to kill, which drops to the sandbox user itself), under the run's limits and its own cgroups;
        the one way a cold item and an agent's command start."""
        env = self._env_for(limits)
        setenv = [arg for key, value in env.items() for arg in ("--setenv", key, value)]
        # The tmpfs folders come first: a venv under /tmp (as in tests) is bound on top of the new /tmp.
        argv = [
            _bwrap() or "bwrap",
            *_sandbox_args(limits, kill=as_root),
            *self._mounts,
            "--clearenv",
            *setenv,
            "--",
            *([] if as_root else _setpriv()),
            shell,
            "-c",
            script,
            name,
            *args,
        ]
        cgroups = RunCgroups(limits)
        try:
            limited = _limited(argv, limits, cgroups)
            try:
                result = process_run(
                    limited or argv,
                    cwd=Path("/"),
                    limits=limits,
                    backend="bwrap",
                    env={"PATH": "/usr/bin:/bin"},
                    preexec=None if limited else _preexec(limits, cgroups, stdin_fd),
                    stdin=stdin_fd,
                    pass_fds=pass_fds,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxError(f"bwrap could not start: {exc}") from exc
            oom = cgroups.oom_killed()
        finally:
            cgroups.remove()
        return _started(result, oom)


class _Drain:
    """Reads the copy-back pipe into `file` in a thread, up to `cap` bytes (the rest is read and dropped, `over`)."""

    def __init__(self, fd: int, file: IO[bytes], *, cap: int):
        self.fd, self.file, self.cap, self.kept, self.over = fd, file, cap, 0, False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 20):
                room = self.cap - self.kept
                if len(chunk) > room:
                    self.over = True
                self.file.write(chunk[: max(0, room)])
                self.kept += min(len(chunk), max(0, room))
        finally:
            os.close(self.fd)

    def join(self, seconds: float) -> None:
        """Wait for the pipe's end (every writer gone with the sandbox); past `seconds` the copy counts as over."""
        self.thread.join(timeout=max(0.1, seconds))
        if self.thread.is_alive():
            self.over = True


def _started(result: ExecResult, oom: bool) -> ExecResult:
    """Strip the start line from stderr; a run without it never reached the task's command."""
    head, found, rest = result.stderr.partition(STARTED + "\n")
    if not found:
        how = "timed out" if result.timed_out else f"exit {result.exit_code}"
        raise SandboxError(f"the bwrap sandbox did not start ({how}): {result.stderr[-2000:]}")
    # bwrap reports a child killed by a signal as 128 + signal; an OOM kill of the test is a kill, not an exit.
    exit_code = None if oom and result.exit_code == 128 + signal.SIGKILL else result.exit_code
    return replace(result, stderr=head + rest, exit_code=exit_code, oom_killed=oom)


class BwrapBuild:
    """The build sandbox of a venv: a run of its own, with the venv writable and the worker's pip on PYTHONPATH."""

    def __init__(self, backend: BwrapBackend, venv: Path):
        self.backend, self.venv = backend, venv
        self.python = str(venv / "bin" / "python")
        self.interpreter = os.path.realpath(self.python)

    def inputs_at(self, inputs: Path) -> str:
        return INPUTS

    def run(self, command: Sequence[str], *, inputs: Path, env: Mapping[str, str], limits: Limits) -> ExecResult:
        environment = Environment(hash="build", backend=BwrapBackend.name, location=str(self.venv), python=self.python)
        building = [(str(inputs), INPUTS), (str(pip_package()), f"{PIP_DIR}/pip")]
        session = BwrapSession(self.backend, environment, building=building, env={**env, "PYTHONPATH": PIP_DIR})
        return session.run(files={}, command=command, limits=limits)


class BwrapBackend(SandboxBackend):
    name = "bwrap"

    def __init__(self, cache_dir: Path, *, forkserver: bool | None = None):
        super().__init__(cache_dir)
        self.etc_dir = self.cache_dir / "bwrap-etc"
        if forkserver is None:
            forkserver = setting("SANDBOX_FORKSERVER")
        # Items of a session fork from a warm zygote that has the environment's heavy modules imported.
        self.forkserver = forkserver

    def _etc_write(self) -> None:
        self.etc_dir.mkdir(parents=True, exist_ok=True)
        for name, text in ETC_OWN.items():
            path = self.etc_dir / name
            if not path.exists() or path.read_text() != text:
                # Replaced whole, so a concurrent worker never binds a half-written file.
                staging = path.with_name(f".{name}.{os.getpid()}")
                staging.write_text(text)
                staging.replace(path)

    def available(self) -> tuple[bool, str]:
        try:
            self._etc_write()
        except OSError as exc:
            return False, f"cannot write {self.etc_dir}: {exc}"
        return _probe(self.etc_dir)

    def environment_build(self, *, env_hash: str, requirements: str) -> Environment:
        self._etc_write()
        return venv_build(
            cache_dir=self.cache_dir / "venvs",
            backend=self.name,
            env_hash=env_hash,
            requirements=requirements,
            sandbox_for=lambda venv: BwrapBuild(self, venv),
            build_uid=SANDBOX_UID,
        )

    def environment_remove(self, *, env_hash: str) -> bool:
        return venv_remove(cache_dir=self.cache_dir / "venvs", env_hash=env_hash)

    def session_open(self, environment: Environment) -> Session:
        self._etc_write()
        return BwrapSession(self, environment)
