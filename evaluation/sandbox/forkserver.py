"""A warm fork server (zygote) per environment inside a long-lived bwrap sandbox: it imports the heavy modules once
and forks one child per item, so an item pays neither interpreter start nor `import torch`.

The zygote runs as uid 65534 with no capabilities and no_new_privs, like every item; it only imports (the modules
the task's files import and the environment provides, never the task's own), then forks. Each child moves itself
into the item's own cgroups (fds opened by the worker), then unshares a user, mount, pid, network, IPC and UTS
namespace (unprivileged: uid 65534 maps to itself), mounts a fresh size-limited tmpfs on the work folder, /tmp and
/dev/shm, drops every capability of its new namespace and runs the harness exactly as `python -B harness entry`
would, as pid 2 under a reaper, so nothing it starts outlives it. The zygote is not dumpable and lives outside the
item's pid namespace: an item cannot name it to signal or trace it, nor read its memory or environment.

Under the harness the fork runs it warm (RCB_WARM): the supervisor forks the test process before it reads the nonce,
and that process runs the harness's test code in place instead of exec'ing a fresh interpreter. The files are
unpacked by a process of their own, so the nonce is never in the memory the test process is a copy of. What the
zygote preloads is derived from the task's files minus the answer's own lines, and an item keeps loaded only what the
preloads brought (what a cold start has too once the test imported them), never the zygote's own tools (ctypes,
socket, ...) nor a module of a task file's name: an import of the answer's is audited exactly as on a cold start.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from evaluation.sandbox.base import ExecResult, Limits, SandboxError
from evaluation.sandbox.process import _drain

logger = logging.getLogger(__name__)

START_SECONDS = 120
# The zygote's own processes (bwrap's monitor, its reaper, the zygote, a fresh fork) in its own pids cgroup.
ZYGOTE_PROCESSES = 8
# The fork's own processes in the item's pids cgroup: the child that set it up and the item's reaper (pid 1).
CHILD_OWN_PROCESSES = 2

ZYGOTE_SOURCE = r'''
import sys
# The preloads come first, before any tool of the fork server's own: what they import is what an item keeps loaded
# (a cold start has it too once the test imported them); the rest (ctypes, socket, ...) is dropped in every item.
loaded, failed = [], []
for name in filter(None, sys.argv[2].split(",")):
    try:
        __import__(name)
        loaded.append(name)
    except BaseException as exc:
        failed.append(f"{name}: {type(exc).__name__}")
kept = frozenset(sys.modules)
import ctypes, json, os, signal, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no item may read our memory or environ, or trace us
ctl = socket.socket(fileno=int(sys.argv[1]))
base_path = list(sys.path)


def threads():
    return len(os.listdir("/proc/self/task"))


ctl.send(json.dumps({"loaded": loaded, "failed": failed, "threads": threads(), "native": "_ctypes" in kept}).encode())

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_BIND = 16384, 1 << 18, 2, 4, 4096


def check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def status_code(status):
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def mounts_below(folder):
    """The mounts under `folder` (a venv bound below /tmp), held open so they can be bound again on a fresh tmpfs."""
    import re
    points = []
    with open("/proc/self/mountinfo", "rb") as info:
        for line in info:
            # The kernel writes space, tab, newline and backslash of a path as octal escapes (\040).
            point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), line.split()[4]))
            if point.startswith(folder + "/") and not any(point == p or point.startswith(p + "/") for p in points):
                points.append(point)
    return [(point, os.open(point, os.O_PATH)) for point in points]


def caps_drop():
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (stops at the first unknown one, harmlessly)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    check(libc.capset(header, data), "capset")
    check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS


def unpack(archive):
    """In a process of its own, so no byte of the files (the harness nonce) is ever in the item's memory."""
    unpacker = os.fork()
    if unpacker == 0:
        try:
            import tarfile
            with os.fdopen(archive, "rb") as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
                tar.extractall(".")
            os._exit(0)
        except BaseException as exc:
            os.write(2, f"rcb-fork: unpacking the item's files: {exc}\n".encode())
            os._exit(125)
    os.close(archive)
    _, status = os.waitpid(unpacker, 0)
    if status != 0:
        os._exit(125)


def item(request, archive):
    """pid 2 of the item's namespaces, no capabilities: unpack, then the harness exactly as a cold start."""
    import random
    os.chdir(request["work"])
    unpack(archive)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    sys.path[:] = [request["work"], *base_path[1:]]
    sys.dont_write_bytecode = True
    threads_allowed = int(request["threads"])
    random.seed()
    # Only generators the zygote already created need a fresh seed; one imported later seeds itself.
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(threads_allowed)
        torch.manual_seed(torch.initial_seed())
    import runpy
    # Loaded as a cold start would have it: the interpreter's start and the preloads, never a tool of ours, and no
    # module of the task's own names (the task's files, the hidden reference among them, are imported from here).
    own = frozenset(request["own"])
    for name in list(sys.modules):
        if name not in kept or name.split(".", 1)[0] in own:
            del sys.modules[name]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__", init_globals={"RCB_WARM": True} if request["warm"] else None)
    except SystemExit as exc:
        code = exc.code
        code = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    else:
        code = 0
    # What the item printed is still buffered (stdout is a pipe): an exit without flushing, as here, would lose it.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def child(request, fds):
    """Between fork and the item: own cgroups, own namespaces, fresh tmpfs folders, limits, no capabilities."""
    archive, out, err, *cgroups = fds
    for fd in cgroups:
        try:
            os.write(fd, b"0")
        except OSError as exc:
            raise OSError(exc.errno, f"joining the item's cgroup: {exc.strerror}") from None
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    # 0-2 are open in the zygote, so every received fd is above them: keep the archive, close all else.
    os.closerange(3, archive)
    os.closerange(archive + 1, 65536)
    uid, gid = os.getuid(), os.getgid()
    # Dumpable again (like a cold start): /proc/self of a non-dumpable process is root's, so no uid_map either.
    libc.prctl(4, 1, 0, 0, 0)
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
          "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    # Not dumpable once the maps are written: an item must not trace or read this fork outside its pid namespace.
    libc.prctl(4, 0, 0, 0, 0)
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount private")
    size = int(request["disk_bytes"])
    for folder, mode in ((request["work"], "0777"), ("/tmp", "1777"), ("/dev/shm", "1777")):
        if os.path.isdir(folder):
            below = mounts_below(folder)
            check(libc.mount(b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                             f"size={size},mode={mode}".encode()), f"mount {folder}")
            for point, fd in below:
                os.makedirs(point, exist_ok=True)
                check(libc.mount(f"/proc/self/fd/{fd}".encode(), point.encode(), None, MS_BIND | MS_REC, None),
                      f"bind {point}")
                os.close(fd)
    libc.sethostname(b"sandbox", 7)
    import resource
    for limit, value in request["rlimits"].items():
        resource.setrlimit(getattr(resource, limit), (value, value))
    reaper = os.fork()
    if reaper:
        os.close(archive)
        _, status = os.waitpid(reaper, 0)
        os._exit(status_code(status))
    # pid 1 of the new pid namespace: reaps, and its exit kills whatever the item left running.
    libc.prctl(4, 1, 0, 0, 0)  # the item is dumpable as on a cold start (for its own debugging tools)
    caps_drop()
    os.setsid()
    pid = os.fork()
    if pid == 0:
        item(request, archive)
    os.close(archive)
    while True:
        done, status = os.wait()
        if done == pid:
            os._exit(status_code(status))


while True:
    message, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 16)
    if not message:
        break
    request = json.loads(message)
    count = threads()
    if count > 1:
        for fd in fds:
            os.close(fd)
        ctl.send(json.dumps({"refused": f"{count} threads in the fork server"}).encode())
        continue
    pid = os.fork()
    if pid == 0:
        try:
            ctl.close()
            child(request, fds)
        except BaseException as exc:
            import traceback; os.write(2, f"rcb-fork: {exc} {traceback.format_exc()}\n".encode())
        os._exit(125)
    for fd in fds:
        os.close(fd)
    ctl.send(json.dumps({"started": True}).encode())
    _, status = os.waitpid(pid, 0)
    ctl.send(json.dumps({"status": status_code(status)}).encode())
'''


# What the harness's test process imports before its audit hook is installed (a cold start has them loaded too).
HARNESS_PRELOAD = ("ast", "json", "types", "importlib.machinery", "unittest")


def own_modules(files: Mapping[str, bytes]) -> list[str]:
    """The top-level names the task's own files and folders take (imported from the work folder, never preloaded)."""
    return sorted({PurePosixPath(name).parts[0].removesuffix(".py") for name in files})


def preload_modules(files: Mapping[str, bytes], *, answer: tuple[str, int, int] | None = None) -> list[str]:
    """Top-level modules the task's Python files import, minus the task's own modules (first-seen order).

    The answer's own lines (`answer`: file, first and last line) and the harness files never count: what the fork
    server preloads does not depend on the answer, so an import of the answer's is audited as on a cold start."""
    own = set(own_modules(files))
    names: list[str] = []
    for name, data in files.items():
        if not name.endswith(".py") or PurePosixPath(name).name.startswith(".rcb-"):
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [node.module]
            else:
                continue
            if answer and name == answer[0] and answer[1] <= node.lineno <= answer[2]:
                continue
            for module in found:
                top = module.split(".")[0]
                if top not in own and top not in names and not top.startswith("_"):
                    names.append(top)
    return names


class ForkRefused(Exception):
    """The fork server cannot run this item (threads in the zygote, or it is gone): run it cold."""


class ForkServer:
    """The worker's end of one zygote: started with a bwrap argv, then `run` per item."""

    def __init__(self, argv_for, *, preload: Sequence[str], limits: Limits, cgroups_for, preexec_for):
        self._cgroups_for = cgroups_for
        self.control, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile(prefix="rcb-zygote-")  # a file, so import chatter never blocks it
        self.cgroups = cgroups_for(Limits(memory_bytes=limits.memory_bytes, processes=ZYGOTE_PROCESSES,
                                          cpus=limits.cpus))
        argv = argv_for(["-B", "-c", ZYGOTE_SOURCE, str(inside.fileno()), ",".join(preload)])
        try:
            self.proc = subprocess.Popen(argv, cwd="/", env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self.log,
                                         pass_fds=(inside.fileno(),), preexec_fn=preexec_for(self.cgroups),
                                         start_new_session=True)
        except OSError as exc:
            self.cgroups.remove()
            self.log.close()
            raise SandboxError(f"the fork server could not start: {exc}") from exc
        finally:
            inside.close()
        hello = self._receive(START_SECONDS)
        if hello is None:
            stderr = self._stop()
            raise ForkRefused(f"the fork server did not start: {stderr[-2000:]}")
        self.loaded, self.failed, threads = hello["loaded"], hello["failed"], hello["threads"]
        # Whether the preloads themselves loaded ctypes (numpy and torch do): only then may an item see it loaded.
        self.native = hello["native"]
        if threads > 1:
            self._stop()
            raise ForkRefused(f"importing {', '.join(self.loaded)} started {threads - 1} thread(s)")

    def _receive(self, timeout: float) -> dict | None:
        ready, _, _ = select.select([self.control], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            message = self.control.recv(65536)
        except OSError:
            return None
        return json.loads(message) if message else None

    def run(self, *, archive: int, work: str, argv: Sequence[str], env: Mapping[str, str], limits: Limits,
            rlimits: Mapping[str, int], own: Sequence[str] = (), warm_harness: bool = False) -> tuple[ExecResult, bool]:
        """One item in a fresh fork; (result, oom killed). ForkRefused when the zygote cannot take it."""
        cgroups = self._cgroups_for(limits, own=CHILD_OWN_PROCESSES)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        procs = [os.open(folder / "cgroup.procs", os.O_WRONLY) for folder in cgroups.folders.values()]
        request = {"work": work, "argv": list(argv), "env": dict(env), "disk_bytes": limits.disk_bytes,
                   "threads": env.get("OMP_NUM_THREADS", "1"), "rlimits": dict(rlimits),
                   "own": list(own), "warm": warm_harness}
        start = time.monotonic()
        try:
            try:
                socket.send_fds(self.control, [json.dumps(request).encode()], [archive, out_write, err_write, *procs])
            except OSError as exc:
                raise ForkRefused(f"the fork server is gone: {exc}") from exc
            finally:
                for fd in (out_write, err_write, *procs):
                    os.close(fd)
            out: list[bytes] = []
            err: list[bytes] = []
            truncated = [False]
            readers = [threading.Thread(target=_drain, args=(os.fdopen(fd, "rb"), limits.output_bytes, sink, truncated),
                                        daemon=True) for fd, sink in ((out_read, out), (err_read, err))]
            out_read = err_read = -1
            for reader in readers:
                reader.start()
            reply = self._receive(START_SECONDS)
            if reply is None or "refused" in reply:
                raise ForkRefused(reply["refused"] if reply else "the fork server did not answer")
            reply = self._receive(limits.wall_seconds - (time.monotonic() - start))
            timed_out = reply is None
            oom = cgroups.oom_killed()
            # Whatever happened, nothing the item started may outlive it: empty and remove its cgroups.
            cgroups.remove()
            if timed_out:
                reply = self._receive(10)
                if reply is None:
                    raise SandboxError("the fork server lost an item it had started")
            for reader in readers:
                reader.join(timeout=5)
        finally:
            cgroups.remove()
            for fd in (out_read, err_read):
                if fd >= 0:
                    os.close(fd)
        code = reply["status"]
        return ExecResult(exit_code=None if timed_out else code, stdout=b"".join(out).decode("utf-8", "replace"),
                          stderr=b"".join(err).decode("utf-8", "replace"), timed_out=timed_out,
                          duration=time.monotonic() - start, backend="bwrap",
                          output_truncated=truncated[0]), oom

    def _stop(self) -> str:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.cgroups.remove()
        self.log.seek(0)
        stderr = self.log.read().decode("utf-8", "replace")
        self.log.close()
        return stderr

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self._stop()
