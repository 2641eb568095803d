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
preloads brought, never the zygote's own tools (ctypes, socket, ...) nor a module of a task file's name: an import of
the answer's is audited exactly as on a cold start.

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
own modules are dropped by the fork and native ones (ctypes, mmap) by the harness at the answer's start. What remains
different from a cold start is import-time state of modules the item never imports (a warnings filter, a
registry); a preload that breaks an item shows as a crash in a fork that a cold start has not, which turns the
environment cold (see `run`), as before.
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from evaluation.sandbox.base import ExecResult, Limits, SandboxError, Session
from evaluation.sandbox.harness import HARNESS_FILE, NONCE_FILE, harness_status, harness_verdict
from evaluation.sandbox.process import _drain

logger = logging.getLogger(__name__)

START_SECONDS = 120
# The zygote's own processes (bwrap's monitor, its reaper, the zygote, a fresh fork) in its own pids cgroup.
ZYGOTE_PROCESSES = 8
# The fork's own processes in the item's pids cgroup: the child that set it up and the item's reaper (pid 1).
CHILD_OWN_PROCESSES = 2

ZYGOTE_SOURCE = r'''
import os, sys
os.chdir("/")  # read-only: nothing an item writes can lie where the zygote's own imports look ("" on sys.path)
# The preloads come first, before any tool of the fork server's own: what they import is what an item keeps loaded
# (a cold start has it too once the test imported them); the rest (ctypes, socket, ...) is dropped in every item.
loaded, failed, threaded = [], [], ""
for name in filter(None, sys.argv[2].split(",")):
    try:
        __import__(name)
        loaded.append(name)
    except BaseException as exc:
        failed.append(f"{name}: {type(exc).__name__}")
    if len(os.listdir("/proc/self/task")) > 1:  # a fork would lose them: the worker starts us again without it
        threaded = name
        break


def lazy_imports(helpers, limit=400):
    """The imports inside the functions the test calls (`helpers`, dotted names), and inside the functions of their
    own package those call, three levels down: what a first call of, say, torch.testing.assert_close imports."""
    import dis, importlib.util
    module_type = type(sys)
    found, seen, queue = [], set(), []
    for dotted in helpers:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):  # the longest prefix the preloads imported, then its attributes
            obj = sys.modules.get(".".join(parts[:end]))
            if obj is not None:
                for part in parts[end:]:
                    obj = getattr(obj, part, None)
                if obj is not None:
                    queue.append((obj, 0))
                break
    while queue and len(seen) < limit:
        obj, depth = queue.pop(0)
        if isinstance(obj, type):
            queue += [(vars(obj)[m], depth) for m in ("__init__", "__call__") if m in vars(obj)]
            continue
        function = getattr(obj, "__func__", obj)
        code, names = getattr(function, "__code__", None), getattr(function, "__globals__", None)
        if code is None or not isinstance(names, dict) or id(code) in seen:
            continue
        seen.add(id(code))
        package, top = names.get("__package__") or "", str(names.get("__name__") or "").split(".")[0]
        codes = [code]
        while codes:
            current = codes.pop()
            codes += [c for c in current.co_consts if hasattr(c, "co_code")]
            consts, module = [], None
            for instruction in dis.get_instructions(current):
                op, arg = instruction.opname, instruction.argval
                if op == "LOAD_CONST":
                    consts = (consts + [arg])[-2:]
                    continue
                if op == "IMPORT_NAME":
                    level, fromlist = consts if len(consts) == 2 else (0, None)
                    try:
                        name = importlib.util.resolve_name("." * level + arg, package) if isinstance(level, int) \
                            and level else arg
                    except (ImportError, ValueError, TypeError):
                        name = ""
                    if name:
                        found.append((name, ""))
                        found += [(name, item) for item in (fromlist if isinstance(fromlist, tuple) else ())
                                  if isinstance(item, str) and item != "*"]
                elif op in ("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD") and depth < 3:
                    source = names if op == "LOAD_GLOBAL" else vars(module) if module is not None else {}
                    target = source.get(arg) if isinstance(arg, str) else None
                    owner = getattr(target, "__name__" if isinstance(target, module_type) else "__module__", "")
                    if target is not None and isinstance(owner, str) and owner.split(".")[0] == top:
                        if isinstance(target, module_type):
                            module = target  # its attribute, read next, is followed too
                            continue
                        queue.append((target, depth + 1))
                module = None
    return list(dict.fromkeys(found))


def lazy_imports_found(helpers):
    """lazy_imports in a fork of ours, so its own tools (dis, ...) are never loaded here, where items would see them."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.write(write, "".join(f"{name}\t{item}\n" for name, item in lazy_imports(helpers)).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return [tuple(line.split("\t", 1)) for line in b"".join(chunks).decode().splitlines() if "\t" in line]


warmed = []
if not threaded and len(sys.argv) > 3 and sys.argv[3]:
    for name, item in lazy_imports_found(sys.argv[3].split(",")):
        if (f"{name}.{item}" if item else name) in sys.modules:
            continue
        try:
            module = __import__(name, fromlist=[item] if item else [])
        except BaseException:
            continue
        if item and isinstance(getattr(module, item, None), type(sys)):
            warmed.append(f"{name}.{item}")
        elif not item:
            warmed.append(name)
        if len(os.listdir("/proc/self/task")) > 1:
            threaded = f"{name}.{item}" if item else name
            break
kept = frozenset(sys.modules)
import ctypes, json, os, select, signal, socket
base_env = dict(os.environ)  # exactly what a cold start of this backend gets, which every item gets back
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no item may read our memory or environ, or trace us
if sys.argv[1].startswith("/"):  # a socket the worker listens on (docker: bound into the container)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctl.connect(sys.argv[1])
else:  # inherited (bwrap)
    ctl = socket.socket(fileno=int(sys.argv[1]))
base_path = list(sys.path)


def threads():
    return len(os.listdir("/proc/self/task"))


ctl.send(json.dumps({"loaded": loaded, "failed": failed, "threads": threads(), "native": "_ctypes" in kept,
                     "threaded": threaded, "warmed": warmed}).encode())

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 16384, 1 << 18, 2, 4, 8, 4096


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


# What an item may never do again although its fork needed it (Docker's default profile refuses the same): make
# namespaces, join them, mount. clone3 says ENOSYS, so the C library falls back to clone, whose flags are checked.
SECCOMP = {"x86_64": (0xC000003E, {"clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "mount": 165,
                                   "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429,
                                   "fsopen": 430, "fsmount": 432, "fspick": 433, "mount_setattr": 442}),
           "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "mount": 40,
                                    "umount2": 39, "pivot_root": 41, "open_tree": 428, "move_mount": 429,
                                    "fsopen": 430, "fsmount": 432, "fspick": 433, "mount_setattr": 442})}
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET


def namespaces_refuse():
    """A seccomp filter (after no_new_privs): EPERM for the calls above, for other ABIs, and for a clone into new
    namespaces."""
    import platform, struct
    arch, numbers = SECCOMP[platform.machine()]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    program = [(load, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny),
               (load, 0, 0, 0), (jge, 0, 1, 0x40000000), (ret, 0, 0, deny)]  # x32 numbers
    for name, number in numbers.items():
        if name not in ("clone", "clone3"):
            program += [(jeq, 0, 1, number), (ret, 0, 0, deny)]
    program += [(jeq, 0, 1, numbers["clone3"]), (ret, 0, 0, enosys),
                (jeq, 0, 3, numbers["clone"]), (load, 0, 0, 16), (jset, 0, 1, NAMESPACE_FLAGS), (ret, 0, 0, deny),
                (ret, 0, 0, allow)]
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    check(libc.prctl(22, 2, ctypes.byref(Program(len(program), ctypes.addressof(buffer))), 0, 0), "seccomp")


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


def item(request, archive, ready):
    """pid 2 of the item's namespaces, no capabilities: unpack, say the sandbox is ready, then the harness exactly as
    a cold start. Only this says the fork's set-up succeeded: nothing of the item's can say it failed."""
    import random
    libc.prctl(4, 1, 0, 0, 0)  # dumpable as on a cold start (for its own debugging tools); its reaper is not
    os.chdir(request["work"])
    unpack(archive)
    os.write(ready, b"R")
    os.close(ready)
    os.environ.clear()
    os.environ.update(base_env)
    sys.argv = list(request["argv"])
    sys.path[:] = [request["work"], *base_path[1:]]
    sys.dont_write_bytecode = True
    threads_allowed = int(base_env.get("OMP_NUM_THREADS", "1"))
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


def child(request, fds, ready):
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
    # 0-2 are open in the zygote, so every received fd is above them: keep the archive and `ready`, close all else.
    low = 3
    for kept_fd in sorted((archive, ready)):
        os.closerange(low, kept_fd)
        low = kept_fd + 1
    os.closerange(low, 65536)
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
    if os.path.isdir("/dev/mqueue"):  # the new IPC namespace's own message queues, not the container's
        check(libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
              "mount /dev/mqueue")
    # The zygote's folder lies under the fresh work folder now; a process kept there would hold it open for items.
    os.chdir(request["work"])
    libc.sethostname(b"sandbox", 7)
    import resource
    for limit, value in request["rlimits"].items():
        resource.setrlimit(getattr(resource, limit), (value, value))
    reaper = os.fork()
    if reaper:
        os.close(archive)
        os.close(ready)
        _, status = os.waitpid(reaper, 0)
        os._exit(status_code(status))
    # pid 1 of the new pid namespace, not dumpable (an item may not trace it nor open what it has open): reaps, and
    # its exit kills whatever the item left running.
    caps_drop()
    namespaces_refuse()
    os.setsid()
    pid = os.fork()
    if pid == 0:
        item(request, archive, ready)
    os.close(archive)
    os.close(ready)
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
    ready_read, ready = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ctl.close()
            os.close(ready_read)
            child(request, fds, ready)
        except BaseException as exc:
            import traceback; os.write(2, f"rcb-fork: {exc} {traceback.format_exc()}\n".encode())
        os._exit(125)
    for fd in (*fds, ready):
        os.close(fd)
    ctl.send(json.dumps({"started": True}).encode())
    # Waiting on the item and on the worker at once: a worker gone mid-item (EOF) ends the zygote, and with it
    # its sandbox (bwrap's, or the container whose init it is the child of) and the item.
    ended = os.pidfd_open(pid)
    while not select.select([ended, ctl], [], [])[0].count(ended):
        if not ctl.recv(1, socket.MSG_PEEK):
            os._exit(0)
    os.close(ended)
    _, status = os.waitpid(pid, 0)
    # Every holder of `ready` is gone with the fork (the item closed its end before the answer ran).
    set_up = os.read(ready_read, 1) == b"R"
    os.close(ready_read)
    ctl.send(json.dumps({"status": status_code(status), "ready": set_up}).encode())
'''


# What the harness's test process imports before its audit hook is installed (a cold start has them loaded too).
HARNESS_PRELOAD = ("ast", "json", "types", "importlib.machinery", "unittest")


def own_modules(files: Mapping[str, bytes]) -> list[str]:
    """The top-level names the task's own files and folders take (imported from the work folder, never preloaded)."""
    return sorted({PurePosixPath(name).parts[0].removesuffix(".py") for name in files})


def preload_modules(files: Mapping[str, bytes], *, answer: tuple[str, int, int] | None = None,
                    skipped: Iterable[tuple[str, int, int]] = ()) -> list[str]:
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
            if any(name == file and first <= node.lineno <= last for file, first, last in spans):
                continue
            for module in found:
                top = module.split(".")[0]
                if top not in own and module not in names and not top.startswith("_"):
                    names.append(module)
    return names


def helper_calls(files: Mapping[str, bytes], entry: str) -> list[str]:
    """The functions of the environment's modules the test entry point calls, as dotted names through its imports
    (`torch.testing.assert_close`): the zygote warms what their first call imports (their lazy imports). Derived
    from the test's own code, which never holds the answer."""
    try:
        tree = ast.parse(files.get(entry, b""))
    except (SyntaxError, ValueError):
        return []
    own = set(own_modules(files))
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
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
    return calls


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

    def __init__(self, argv_for, *, preload: Sequence[str], limits: Limits, cgroups_for, preexec_for,
                 helpers: Sequence[str] = ()):
        self.control, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._cgroups_for = cgroups_for
        self.log = tempfile.TemporaryFile(prefix="rcb-zygote-")  # a file, so import chatter never blocks it
        self.cgroups = cgroups_for(Limits(memory_bytes=limits.memory_bytes, processes=ZYGOTE_PROCESSES,
                                          cpus=limits.cpus))
        self.held = frozenset(self.cgroups.folders)
        try:
            self.proc = subprocess.Popen(argv_for(zygote_args(str(inside.fileno()), preload, helpers)), cwd="/",
                                         env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self.log, pass_fds=(inside.fileno(),),
                                         preexec_fn=preexec_for(self.cgroups), start_new_session=True)
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
        self.warmed: list[str] = hello.get("warmed", [])  # what the helpers the tests call import on first call
        # Whether the preloads themselves loaded ctypes (numpy and torch do): only then may an item see it loaded.
        self.native = hello["native"]
        # The limits it was started for (its own cgroups or container hold it by them): others need a new one.
        self.limits: tuple[float, int, int] | None = None
        self.helpers: frozenset[str] = frozenset()
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

    def run(self, *, archive: int, work: str, argv: Sequence[str], limits: Limits, rlimits: Mapping[str, int], own: Sequence[str] = (), warm_harness: bool = False) -> tuple[ExecResult, bool]:
        """One item in a fresh fork; (result, oom killed). ForkRefused when the zygote cannot take it."""
        cgroups = self.zygote.item_cgroups(limits, own=CHILD_OWN_PROCESSES)
        missing = {"memory", "pids"} - set(cgroups.folders)
        if missing:
            # A cold start falls back on rlimits or its container for these; a fork has only the item's cgroups.
            cgroups.remove()
            raise ForkRefused(f"no {' or '.join(sorted(missing))} cgroup for an item of the fork server")
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        procs = [os.open(folder / "cgroup.procs", os.O_WRONLY) for folder in cgroups.folders.values()]
        request = {"work": work, "argv": list(argv), "disk_bytes": limits.disk_bytes, "rlimits": dict(rlimits),
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
        if not reply.get("ready"):
            stderr = b"".join(err).decode("utf-8", "replace")
            raise ForkRefused(f"a fork could not set up its sandbox: {stderr[-1500:]}")
        return ExecResult(exit_code=None if timed_out else code, stdout=b"".join(out).decode("utf-8", "replace"),
                          stderr=b"".join(err).decode("utf-8", "replace"), timed_out=timed_out,
                          duration=time.monotonic() - start, backend=self.backend,
                          output_truncated=truncated[0]), oom

    def alive(self) -> bool:
        return self.zygote.alive()

    def close(self) -> None:
        self.zygote.stop()


# A fork server that had to start again this often for one session for reasons other than new imports (it died, an
# item came with other limits) gives way to cold starts; new imports restart it as often as they come (a finite set).
ZYGOTE_RESTARTS = 8


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
        return (self._forkserver_on and len(command) >= 3 and command[0] == self.environment.python
                and command[1] == "-B" and not command[2].startswith("-"))

    def _restart_reason(self, server: ForkServer, wanted: Sequence[str], helpers: Sequence[str],
                        limits: Limits) -> tuple[str, str] | None:
        if not server.alive():
            return "gone", "the fork server exited"
        if server.limits != _zygote_key(limits):
            return "limits", f"an item with other limits ({_zygote_key(limits)} instead of {server.limits})"
        tried = {*server.loaded, *(f.split(":", 1)[0] for f in server.failed), *self._threaded}
        new = [name for name in wanted if name not in tried]
        if new:
            return "new imports", ", ".join(new[:8]) + (f" and {len(new) - 8} more" if len(new) > 8 else "")
        new = [name for name in helpers if name not in server.helpers]
        if new:
            return "new imports", "what " + ", ".join(new[:4]) + (" and more" if len(new) > 4 else "") + \
                " import on first call"
        return None

    def _zygote(self, files: Mapping[str, bytes], command: Sequence[str], limits: Limits) -> ForkServer | None:
        """The warm fork server, (re)started when this item imports modules it has not tried yet; None when this
        item runs cold (the fork server is then off for good only if `cold_reason` says so)."""
        wanted = preload_modules(files, answer=_answer_lines(command))
        if harnessed(command):
            wanted = [*HARNESS_PRELOAD, *wanted]
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
            preload = [name for name in self._preloaded if name not in self._threaded]
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
                if name in preload:
                    self._threaded[name] = name
                    self.starts.append(ZygoteStart("threads", f"importing {name} started a thread; not preloaded"))
                else:  # one of the helpers' lazy imports: this session warms none of them any more
                    self._helpers = []
                    self.starts.append(ZygoteStart("threads", f"a helper's lazy import ({name}) started a thread; "
                                                              "lazy imports are not warmed"))
                continue
            break
        self.starts.append(ZygoteStart(*(reason or ("new imports", ""))))
        if not server.native:
            # The zygote's own ctypes stays reachable in every fork (its classes outlive sys.modules), which gives
            # an answer memory access no audit event shows. A cold start without numpy-like preloads has none,
            # and is cheap anyway: such items run cold, until an item brings more imports.
            server.close()
            self._unforkable = frozenset(preload)
            logger.info("environment %s (%s): this item runs cold: no preload loads ctypes (%s)", self.environment.hash,
                        self.backend.name, ", ".join(server.loaded) or "nothing")
            return None
        missing = {"memory", "pids"} - set(server.zygote.held)
        if missing:
            # A cold start falls back on rlimits for these; a fork has only cgroups to hold it.
            server.close()
            raise ForkRefused(f"no {' or '.join(sorted(missing))} cgroup holds the fork server here")
        server.limits = _zygote_key(limits)
        server.helpers = frozenset(self._helpers)
        self._forkserver = server
        logger.info("fork server for environment %s (%s): preloaded %s%s%s (start %d: %s)", self.environment.hash,
                    self.backend.name, ", ".join(server.loaded) or "nothing",
                    f" (not importable: {', '.join(server.failed)})" if server.failed else "",
                    f"; warmed {len(server.warmed)} lazy import(s)" if server.warmed else "",
                    len(self.starts), self.starts[-1])
        return server

    def _cold_only(self, reason: str) -> None:
        logger.warning("environment %s (%s): the fork server is off, every item starts cold: %s",
                       self.environment.hash, self.backend.name, reason)
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
                result, oom = server.run(archive=archive.fileno(), work=self.work_dir, argv=command[2:], limits=limits,
                                         rlimits=child_rlimits(limits),
                                         own=own_modules(files), warm_harness=harnessed(command))
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
                    self._cold_only(f"an item crashed in a fork ({_crash_code(result, files)}) but not when "
                                    "started cold")
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


def _zygote_key(limits: Limits) -> tuple[float, int, int]:
    return limits.cpus, limits.memory_bytes, limits.processes


def harnessed(command: Sequence[str]) -> bool:
    return len(command) >= 3 and command[2] == HARNESS_FILE


def _entry(command: Sequence[str]) -> str:
    """The test entry point a command runs: the harness's first argument, or the script itself."""
    return command[3] if harnessed(command) and len(command) >= 4 else command[2] if len(command) >= 3 else ""


def _answer_lines(command: Sequence[str]) -> tuple[str, int, int] | None:
    """The answer's file and lines from a harness command's guard spec (None without one)."""
    if not harnessed(command) or len(command) < 5:
        return None
    try:
        spec = json.loads(command[4])
        return (str(spec["answer_file"]), int(spec["first_line"]), int(spec["last_line"])) if spec.get(
            "answer_file") else None
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
