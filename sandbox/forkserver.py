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
unpacked by a process of their own, so the nonce is never in the memory the test process is a copy of: tar, as on a
cold start, spawned by the item (pid 2, no capabilities, under its seccomp filter) without copying it (a fork of a
process holding the preloads cost 30-50 ms an item in page copies and a fresh `import tarfile`). The harness itself
is compiled once by the zygote, before any fork, from the text the worker sends (our own program, never the nonce,
which only the item's files carry): an item runs that code only when its harness file is that text byte for byte,
and its test process only when the supervisor's CHILD is that text too; any other harness runs as written. What the
zygote preloads is derived from the task's files minus the answer's own lines, and an item keeps loaded only what the
preloads brought, never the zygote's own tools (ctypes, socket, ...) nor a module of a task file's name: an import of
the answer's is audited exactly as on a cold start.

Forks stay cheaper however much the zygote preloads (torch, scipy and sympy: 220 MB of its own memory): it
collapses its heap into 2 MB pages (MADV_COLLAPSE, Linux 6.1+), so each of an item's four forks (set-up, reaper,
item, test process) copies a page-table entry per 2 MB.

Across a set's papers (one shared environment, items of twenty papers interleaved) the zygote is one per session and
its preloads only grow: every module an item of the session imported, and, announced at a run's first item
(`preload_expect`), every module the release's tasks in this environment import outside their snippets' bodies,
plus what the helpers their tests call import on first call (`helper_calls`, `lazy_imports`: torch.testing's
assert_close imports sympy). So it starts again at most once per import set not seen yet (none when announced), and
a start for new imports never counts towards ZYGOTE_RESTARTS, which only ends a session that keeps dying or meeting
other limits. A preload that starts a thread on import is left out (and imported by the items that need it).

What changes in the isolation argument: a fork no longer holds only what a cold start of *that* item has once its
test imported its modules, but what a cold start of it *could* have loaded: modules of the environment that another
task of the session imports. Nothing of an item's own or hidden code is among them (a task's own module names are
dropped from every fork as before), the answer's imports do not choose them (the answer's lines never count, and a
release's are announced without any snippet's body), and the imports the guard audits stay fresh imports: the task's
own modules are dropped by the fork and native ones (ctypes, mmap) by the harness at the answer's start. A `from
pkg import name` preloads the submodule pkg.name only when pkg holds no other attribute of that name (importing it
would replace the attribute for every item). What remains different from a cold start is import-time state of
modules the item never imports (a warnings filter, a registry); a preload that breaks an item shows as a crash in a
fork that a cold start has not, which turns the environment cold (see `run`), as before.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import functools
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
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from common.process import capped, stream_read
from sandbox import programs
from sandbox.base import ExecResult, Limits, SandboxError, Session
from sandbox.harness import (
    CHILD_SOURCE,
    HARNESS_FILE,
    HARNESS_SOURCE,
    NONCE_FILE,
    harness_status,
    harness_verdict,
)

logger = logging.getLogger(__name__)

START_SECONDS = 120
# The zygote's own processes (bwrap's monitor, its reaper, the zygote, a fresh fork) in its own pids cgroup.
ZYGOTE_PROCESSES = 8
# The fork's own processes in the item's pids cgroup: the child that set it up and the item's reaper (pid 1).
CHILD_OWN_PROCESSES = 2

ZYGOTE_SOURCE = programs.source("zygote")


# What the harness's test process imports before its audit hook is installed (a cold start has them loaded too).
HARNESS_PRELOAD = ("ast", "json", "types", "importlib.machinery", "unittest")


# What the sealed replay's programs import (judging/sealed.py), preloaded with the harness's: a replay never starts
# the zygote again, nor imports them per item. Not numpy.random, although the replayer imports it to restore its
# generator (20-40 ms a replay): every harness item would then hold objects a cold start has not, and an answer
# walking gc.get_objects() got another verdict warm than cold (test_forkserver_harness, a-gc-strings).
REPLAY_PRELOAD = ("pickle", "base64", "importlib.util")


def own_modules(files: Mapping[str, bytes]) -> list[str]:
    """The top-level names the task's own files and folders take (imported from the work folder, never preloaded)."""
    return sorted({PurePosixPath(name).parts[0].removesuffix(".py") for name in files})


def preload_modules(
    files: Mapping[str, bytes],
    *,
    answer: tuple[str, int, int] | None = None,
    skipped: Iterable[tuple[str, int, int]] = (),
) -> list[str]:
    """The modules the task's Python files import, minus the task's own modules (first-seen order), as imported:
    `scipy.linalg`, not only `scipy` (a package does not import its submodules; each would cost every item).

    The answer's own lines (`answer`: file, first and last line) and the harness files never count: what the fork
    server preloads does not depend on the answer, so an import of the answer's is audited as on a cold start.
    `skipped` spans (file, first, last) never count either (a release's snippets, whose bodies are hidden)."""
    spans = [*skipped, *([answer] if answer else [])]
    own = set(own_modules(files))
    names: list[str] = []
    for name, data in files.items():
        if not name.endswith(".py") or PurePosixPath(name).name.startswith(".rcb-"):
            continue
        for module, line in _imports_of(data):
            if any(name == file and first <= line <= last for file, first, last in spans):
                continue
            top = module.split(".")[0]
            if top not in own and module not in names and not top.startswith("_"):
                names.append(module)
    return names


@functools.lru_cache(maxsize=512)
def _imports_of(data: bytes) -> tuple[tuple[str, int], ...]:
    """(module, line) of every absolute import of a file, in walk order; parsed once per content (every item of a
    task has the same files but the answer's, so each item would otherwise parse the whole package again)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, node.lineno))
            # `from scipy import special` imports the submodule scipy.special too: a name that is no module (`from
            # numpy import array`) is one the zygote finds absent, as the import statement would not load it either.
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
    return tuple(found)


def helper_calls(files: Mapping[str, bytes], entry: str) -> list[str]:
    """The functions of the environment's modules the test entry point calls, as dotted names through its imports
    (`torch.testing.assert_close`): the zygote warms what their first call imports (their lazy imports). Derived
    from the test's own code, which never holds the answer."""
    return list(_helper_calls(files.get(entry, b""), frozenset(own_modules(files))))


@functools.lru_cache(maxsize=256)
def _helper_calls(test: bytes, own: frozenset[str]) -> tuple[str, ...]:
    """helper_calls of one test file's content (the same for every item of a task: parsed once)."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    calls: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts, func = [], node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id not in aliases:
            continue
        dotted = ".".join([aliases[func.id], *reversed(parts)])
        if dotted.split(".")[0] not in own and not dotted.startswith("_") and dotted not in calls:
            calls.append(dotted)
    return tuple(calls)


class ForkRefused(Exception):
    """The fork server cannot run this item (threads in the zygote, or it is gone): run it cold."""


class PreloadThreaded(Exception):
    """Importing this preload started a thread, which a fork would lose: the zygote starts again without it."""


def zygote_args(control: str, preload: Sequence[str], helpers: Sequence[str] = ()) -> list[str]:
    """The interpreter's arguments that make it a zygote: `control` is an inherited fd's number or a socket's path;
    `helpers` the functions the tests call whose first call imports more (see lazy_imports)."""
    return ["-B", "-c", ZYGOTE_SOURCE, control, ",".join(preload), ",".join(helpers)]


class Zygote:
    """A started zygote process: its control socket, whether it lives, and how to stop it (returns its stderr).

    `held` names the limits that hold the zygote itself (its own memory and pids cgroups, or its container's);
    `item_cgroups` makes an item's cgroups where its limits hold it."""

    control: socket.socket
    held: frozenset[str]

    def item_cgroups(self, limits: Limits, *, own: int):
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def stop(self) -> str:
        raise NotImplementedError


class ProcessZygote(Zygote):
    """The zygote as a child process of the worker (bwrap), its control socket inherited, in cgroups of its own."""

    def __init__(
        self, argv_for, *, preload: Sequence[str], limits: Limits, cgroups_for, preexec_for, helpers: Sequence[str] = ()
    ):
        self.control, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._cgroups_for = cgroups_for
        self.log = tempfile.TemporaryFile(prefix="rcb-zygote-")  # noqa: SIM115 (a file, so import chatter never blocks it)
        self.cgroups = cgroups_for(
            Limits(memory_bytes=limits.memory_bytes, processes=ZYGOTE_PROCESSES, cpus=limits.cpus)
        )
        self.held = frozenset(self.cgroups.folders)
        try:
            self.proc = subprocess.Popen(
                argv_for(zygote_args(str(inside.fileno()), preload, helpers)),
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.log,
                pass_fds=(inside.fileno(),),
                preexec_fn=preexec_for(self.cgroups),
                start_new_session=True,
            )
        except OSError as exc:
            self.cgroups.remove()
            self.log.close()
            self.control.close()
            raise SandboxError(f"the fork server could not start: {exc}") from exc
        finally:
            inside.close()

    def item_cgroups(self, limits: Limits, *, own: int):
        return self._cgroups_for(limits, own=own)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
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


class ForkServer:
    """The worker's end of one started zygote: checks what it preloaded, then `run` per item."""

    def __init__(self, zygote: Zygote, *, backend: str):
        self.zygote, self.control, self.backend = zygote, zygote.control, backend
        hello = self._receive(START_SECONDS)
        if hello is None:
            stderr = self.zygote.stop()
            raise ForkRefused(f"the fork server did not start: {stderr[-2000:]}")
        self.loaded, self.failed, threads = hello["loaded"], hello["failed"], hello["threads"]
        self.absent: list[str] = hello.get("absent", [])  # names of `from package import name` that are no module
        self.huge_pages: int = hello.get("huge_pages", 0)  # bytes of its memory in 2 MB pages (MADV_COLLAPSE)
        self.warmed: list[str] = hello.get("warmed", [])  # what the helpers the tests call import on first call
        # Whether the preloads themselves loaded ctypes (numpy and torch do): only then may an item see it loaded.
        self.native = hello["native"]
        # The limits it was started for (its own cgroups or container hold it by them): others need a new one.
        self.limits: tuple[float, int, int] | None = None
        self.helpers: frozenset[str] = frozenset()
        self.harness_sent = False  # whether the zygote has the harness compiled (see run)
        self.programs_sent: dict[str, str] = {}  # the platform programs it has compiled, by file (see run)
        if hello.get("threaded"):
            self.zygote.stop()
            raise PreloadThreaded(hello["threaded"])
        if threads > 1:
            self.zygote.stop()
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

    def run(
        self,
        *,
        archive: int,
        work: str,
        argv: Sequence[str],
        limits: Limits,
        rlimits: Mapping[str, int],
        own: Sequence[str] = (),
        warm_harness: bool = False,
        program: tuple[str, str] | None = None,
    ) -> tuple[ExecResult, bool]:
        """One item in a fresh fork; (result, oom killed). ForkRefused when the zygote cannot take it. `program`:
        the file and text of the platform program it runs (not the harness), compiled by the zygote once."""
        cgroups = self.zygote.item_cgroups(limits, own=CHILD_OWN_PROCESSES)
        missing = {"memory", "pids"} - set(cgroups.folders)
        if missing:
            # A cold start falls back on rlimits or its container for these; a fork has only the item's cgroups.
            cgroups.remove()
            raise ForkRefused(f"no {' or '.join(sorted(missing))} cgroup for an item of the fork server")
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        procs = [os.open(folder / "cgroup.procs", os.O_WRONLY) for folder in cgroups.folders.values()]
        request = {
            "work": work,
            "argv": list(argv),
            "disk_bytes": limits.disk_bytes,
            "rlimits": dict(rlimits),
            "own": list(own),
            "warm": warm_harness,
        }
        if warm_harness and not self.harness_sent:
            # Once per zygote: it compiles the harness before its forks, so no item compiles it again.
            request["harness"] = _harness_packed()
        if program is not None and self.programs_sent.get(program[0]) != program[1]:
            # Once per zygote and program text: an item runs that code only when its file is that text.
            request["program"] = {"file": program[0], "source": program[1]}
        start = time.monotonic()
        try:
            try:
                socket.send_fds(self.control, [json.dumps(request).encode()], [archive, out_write, err_write, *procs])
            except OSError as exc:
                raise ForkRefused(f"the fork server is gone: {exc}") from exc
            finally:
                for fd in (out_write, err_write, *procs):
                    os.close(fd)
            self.harness_sent = self.harness_sent or "harness" in request
            if program is not None:
                self.programs_sent[program[0]] = program[1]
            out: list[bytes] = []
            err: list[bytes] = []
            truncated = [False]
            readers = [
                threading.Thread(
                    target=stream_read,
                    args=(os.fdopen(fd, "rb"), capped(limits.output_bytes, sink, truncated)),
                    daemon=True,
                )
                for fd, sink in ((out_read, out), (err_read, err))
            ]
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
            if reply is None:  # timed out
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
        if not reply.get("ready"):
            stderr = b"".join(err).decode("utf-8", "replace")
            raise ForkRefused(f"a fork could not set up its sandbox: {stderr[-1500:]}")
        return ExecResult(
            exit_code=None if timed_out else code,
            stdout=b"".join(out).decode("utf-8", "replace"),
            stderr=b"".join(err).decode("utf-8", "replace"),
            timed_out=timed_out,
            duration=time.monotonic() - start,
            backend=self.backend,
            output_truncated=truncated[0],
        ), oom

    def alive(self) -> bool:
        return self.zygote.alive()

    def close(self) -> None:
        self.zygote.stop()


# A fork server that had to start again this often for one session for reasons other than new imports (it died, an
# item came with other limits) gives way to cold starts; new imports restart it as often as they come (a finite set).
ZYGOTE_RESTARTS = 8


# What a start whose preloads load no ctypes adds to its reason: it is closed at once and its items run cold.
NO_CTYPES = "closed at once, its items start cold: no preload loads ctypes (a fork would keep the fork server's own)"


@dataclass(frozen=True)
class ZygoteStart:
    """One start of a session's fork server and why: first, new imports (modules or a helper's lazy imports not
    preloaded yet), limits (an item with other limits), gone (the zygote died), threads (a preload started one)."""

    reason: str
    detail: str
    at: float = field(default_factory=time.time)

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


class ForkingSession(Session):
    """A session whose harness items run in forks of a warm zygote, and cold (`_cold_run`) when they cannot.

    What the zygote preloads only grows: every module an item of the session imported (and every module announced
    by `preload_expect`, the imports of every task a release runs in this environment), so items of twenty papers
    interleaved restart it at most once per import set not seen yet, and not at all when announced at the run's
    start. A backend supplies how its zygote starts (`_zygote_start`, with the environment a cold start has), its
    item archive (`_archive`) and work folder (`work_dir`); the rules of when to fork are all here."""

    work_dir: str

    def __init__(self, backend, environment, *, forkserver: bool):
        super().__init__(backend, environment)
        self._forkserver_on = self.forkserver_wanted = forkserver
        self._forkserver: ForkServer | None = None
        self._preloaded: list[str] = []  # every module tried so far, in order: what the next start preloads
        self._helpers: list[str] = []  # every helper whose lazy imports the next start warms
        self._threaded: dict[str, str] = {}  # preloads that start a thread on import, never preloaded again
        self._unforkable: frozenset[str] | None = None  # a preload set that loads no ctypes (items run cold)
        self._restarts = 0  # restarts that were not for new imports (see ZYGOTE_RESTARTS)
        self.starts: list[ZygoteStart] = []
        self.cold_reason = ""  # why the fork server is off for good, once it is
        self.items_warm = self.items_cold = 0

    def preload_expect(self, *, modules: Iterable[str], helpers: Iterable[str] = ()) -> None:
        """Announce what items of this session will import: the next start preloads it too (no restart for it)."""
        self._preloaded = list(dict.fromkeys([*self._preloaded, *modules]))
        self._helpers = list(dict.fromkeys([*self._helpers, *helpers]))

    def _zygote_start(self, preload: Sequence[str], limits: Limits, helpers: Sequence[str] = ()) -> Zygote:
        raise NotImplementedError

    def _cold_run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        raise NotImplementedError

    def _archive(self, files: Mapping[str, bytes]):
        """The item's files as a tar file, owned by the sandbox user."""
        raise NotImplementedError

    def _forkable(self, command: Sequence[str]) -> bool:
        """A Python script run by the environment's interpreter (the harness), which a fork can run as is."""
        return (
            self._forkserver_on
            and len(command) >= 3
            and command[0] == self.environment.python
            and command[1] == "-B"
            and not command[2].startswith("-")
        )

    def _restart_reason(
        self, server: ForkServer, wanted: Sequence[str], helpers: Sequence[str], limits: Limits
    ) -> tuple[str, str] | None:
        if not server.alive():
            return "gone", "the fork server exited"
        if server.limits != _zygote_key(limits):
            return "limits", f"an item with other limits ({_zygote_key(limits)} instead of {server.limits})"
        tried = {*server.loaded, *server.absent, *(f.split(":", 1)[0] for f in server.failed)}
        new = [name for name in wanted if name not in tried and not self._is_threaded(name)]
        if new:
            return "new imports", ", ".join(new[:8]) + (f" and {len(new) - 8} more" if len(new) > 8 else "")
        new = [name for name in helpers if name not in server.helpers]
        if new:
            return "new imports", "what " + ", ".join(new[:4]) + (
                " and more" if len(new) > 4 else ""
            ) + " import on first call"
        return None

    def _is_threaded(self, name: str) -> bool:
        """Whether importing `name` starts a thread: it, or a package it is in, did (`from pkg import a, b` lists
        pkg.a and pkg.b, which import pkg: one start finds it for all)."""
        parts = name.split(".")
        return any(".".join(parts[:end]) in self._threaded for end in range(1, len(parts) + 1))

    def _zygote(self, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ForkServer | None:
        """The warm fork server, (re)started when this item imports modules it has not tried yet; None when this
        item runs cold (the fork server is then off for good only if `cold_reason` says so)."""
        wanted = preload_modules(files, answer=_answer_lines(command))
        if harnessed(command) or _platform_program(command):
            wanted = [*HARNESS_PRELOAD, *REPLAY_PRELOAD, *wanted]
        helpers = helper_calls(files, _entry(command))
        server = self._forkserver
        reason = ("first", "") if server is None and not self.starts else None
        if server is not None:
            reason = self._restart_reason(server, wanted, helpers, limits)
            if reason is None:
                return server
            server.close()
            server = self._forkserver = None
            if reason[0] != "new imports":
                self._restarts += 1
        if self._restarts > ZYGOTE_RESTARTS:
            self._cold_only(f"it had to start again {self._restarts} times (the last: {reason[1] if reason else '?'})")
            return None
        self.preload_expect(modules=wanted, helpers=helpers)
        while True:
            preload = [name for name in self._preloaded if not self._is_threaded(name)]
            if self._unforkable is not None and frozenset(preload) <= self._unforkable:
                return None  # tried: these preloads load no ctypes; an item bringing more imports tries again
            try:
                server = ForkServer(self._zygote_start(preload, limits, self._helpers), backend=self.backend.name)
            except ForkRefused as exc:  # it did not start (a preload crashed it): this item cold, the next tries again
                self._restarts += 1
                self.starts.append(ZygoteStart("gone", str(exc)[:500]))
                if self._restarts > ZYGOTE_RESTARTS:
                    raise
                return None
            except PreloadThreaded as exc:
                name = str(exc)
                if any(p == name or p.startswith(name + ".") for p in preload):  # it, or the package of one
                    self._threaded[name] = name
                    self.starts.append(ZygoteStart("threads", f"importing {name} started a thread; not preloaded"))
                else:  # one of the helpers' lazy imports: this session warms none of them any more
                    self._helpers = []
                    self.starts.append(
                        ZygoteStart(
                            "threads", f"a helper's lazy import ({name}) started a thread; lazy imports are not warmed"
                        )
                    )
                continue
            break
        self.starts.append(ZygoteStart(*(reason or ("new imports", ""))))
        if not server.native:
            # The zygote's own ctypes stays reachable in every fork (its classes outlive sys.modules), which gives
            # an answer memory access no audit event shows. A cold start without numpy-like preloads has none,
            # and is cheap anyway: such items run cold, until an item brings more imports.
            server.close()
            self._unforkable = frozenset(preload)
            # Said with the start, so the run's page and manifest tell why this environment's items started cold.
            self.starts[-1] = replace(
                self.starts[-1],
                detail="; ".join(filter(None, [self.starts[-1].detail, NO_CTYPES])),
            )
            logger.info(
                "environment %s (%s): this item runs cold: no preload loads ctypes (%s)",
                self.environment.hash,
                self.backend.name,
                ", ".join(server.loaded) or "nothing",
            )
            return None
        missing = {"memory", "pids"} - set(server.zygote.held)
        if missing:
            # A cold start falls back on rlimits for these; a fork has only cgroups to hold it.
            server.close()
            raise ForkRefused(f"no {' or '.join(sorted(missing))} cgroup holds the fork server here")
        server.limits = _zygote_key(limits)
        server.helpers = frozenset(self._helpers)
        self._forkserver = server
        logger.info(
            "fork server for environment %s (%s): preloaded %s%s%s%s (start %d: %s)",
            self.environment.hash,
            self.backend.name,
            ", ".join(server.loaded) or "nothing",
            f" (not importable: {', '.join(server.failed)})" if server.failed else "",
            f"; warmed {len(server.warmed)} lazy import(s)" if server.warmed else "",
            f"; {server.huge_pages >> 20} MB in 2 MB pages" if server.huge_pages else "",
            len(self.starts),
            self.starts[-1],
        )
        return server

    def _cold_only(self, reason: str) -> None:
        logger.warning(
            "environment %s (%s): the fork server is off, every item starts cold: %s",
            self.environment.hash,
            self.backend.name,
            reason,
        )
        self._forkserver_on = False
        self.cold_reason = reason
        if self._forkserver is not None:
            self._forkserver.close()
            self._forkserver = None

    def _fork_run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult | None:
        """The item in a fork of the warm zygote; None when it must run cold."""
        try:
            server = self._zygote(files, command, limits)
            if server is None:
                return None
            with self._archive(files) as archive:
                result, oom = server.run(
                    archive=archive.fileno(),
                    work=self.work_dir,
                    argv=command[2:],
                    limits=limits,
                    rlimits=child_rlimits(limits),
                    own=own_modules(files),
                    warm_harness=harnessed(command),
                    program=_program(files, command),
                )
        except ForkRefused as exc:
            self._cold_only(str(exc))
            return None
        exit_code = None if oom and result.exit_code == 128 + signal.SIGKILL else result.exit_code
        return replace(result, exit_code=exit_code, oom_killed=oom)

    def run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        result = self._run(files=files, command=command, limits=limits)
        if self._forkable(command) or self.cold_reason:
            if result.forked:
                self.items_warm += 1
            else:
                self.items_cold += 1
        return result

    def _run(self, *, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ExecResult:
        if self._forkable(command):
            result = self._fork_run(files=files, command=command, limits=limits)
            if result is not None and not _crashed(result, files):
                return replace(result, forked=True)
            if result is not None and _recorded(result, files):
                # The answer left evidence before the crash: that decides (flagged); a cold rerun would give it a
                # second try without it.
                return replace(result, forked=True)
            if result is not None:
                cold = self._cold_run(files=files, command=command, limits=limits)
                if not _crashed(cold, files):
                    self._cold_only(
                        f"an item crashed in a fork ({_crash_code(result, files)}) but not when started cold"
                    )
                return cold
        return self._cold_run(files=files, command=command, limits=limits)

    @property
    def forking(self) -> bool:
        """Whether items of this session run in forks of a live fork server (False once it fell back to cold)."""
        return self._forkserver_on and self._forkserver is not None and self._forkserver.alive()

    def close(self) -> None:
        if self._forkserver is not None:
            self._forkserver.close()
            self._forkserver = None


@functools.cache
def _harness_packed() -> str:
    """The harness for the zygote, compressed: its text holds the test process's, which goes beside it, and the two
    outgrew one message within a socket's default send buffer (212,992 bytes: EMSGSIZE, and every item ran cold)."""
    sent = json.dumps({"file": HARNESS_FILE, "source": HARNESS_SOURCE, "child": CHILD_SOURCE}).encode()
    return base64.b64encode(zlib.compress(sent, 9)).decode("ascii")


def _zygote_key(limits: Limits) -> tuple[float, int, int]:
    return limits.cpus, limits.memory_bytes, limits.processes


def harnessed(command: Sequence[str]) -> bool:
    return len(command) >= 3 and command[2] == HARNESS_FILE


def _platform_program(command: Sequence[str]) -> bool:
    """A command running one of the platform's own programs (the harness, the sealed replay's recorder and
    replayer: `.rcb-*` files), whose first argument is the test entry point or its spec, and whose last is its spec."""
    return len(command) >= 4 and PurePosixPath(command[2]).name.startswith(".rcb-")


def _program(files: Mapping[str, bytes], command: Sequence[str]) -> tuple[str, str] | None:
    """The file and text of the platform program (not the harness) a command runs, for the zygote to compile once."""
    if not _platform_program(command) or harnessed(command):
        return None
    try:
        return command[2], files[command[2]].decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


def _entry(command: Sequence[str]) -> str:
    """The test entry point a command runs: a platform program's first argument, or the script itself."""
    return command[3] if _platform_program(command) else command[2] if len(command) >= 3 else ""


def _answer_lines(command: Sequence[str]) -> tuple[str, int, int] | None:
    """The answer's file and lines from a platform program's spec (None without one): the harness's guard spec, the
    replayer's spec."""
    if not _platform_program(command):
        return None
    try:
        spec = json.loads(command[-1])
        return (
            (str(spec["answer_file"]), int(spec["first_line"]), int(spec["last_line"]))
            if spec.get("answer_file")
            else None
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _crash_code(result: ExecResult, files: Mapping[str, bytes]) -> int | None:
    """The test process's exit status: the harness reports it (its own exit is 1 when the test did not complete)."""
    nonce = files.get(NONCE_FILE)
    if nonce is not None:
        status = harness_status(result.stdout, nonce.decode())
        return status[1] if status and status[0] == "incomplete" else None
    return result.exit_code


def _recorded(result: ExecResult, files: Mapping[str, bytes]) -> bool:
    """Whether the harness's guard recorded anything the answer did."""
    nonce = files.get(NONCE_FILE)
    return nonce is not None and bool(harness_verdict(result.stdout, nonce.decode()).records)


def _crashed(result: ExecResult, files: Mapping[str, bytes]) -> bool:
    """Killed by a signal it was not sent by a limit (a segfault or abort), as bwrap reports it: 128 + signal."""
    code = _crash_code(result, files)
    return code is not None and code > 128 and not result.timed_out and not result.oom_killed


def child_rlimits(limits: Limits) -> dict[str, int]:
    """The rlimits `process.rlimits` sets on a cold start, for a fork to set on itself (memory: its cgroup)."""
    return {"RLIMIT_FSIZE": limits.disk_bytes, "RLIMIT_CORE": 0, "RLIMIT_CPU": int(limits.wall_seconds) + 5}
