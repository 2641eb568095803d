# The fork server's zygote (sandbox/forkserver.py, whose docstring holds the isolation argument): it
# imports the environment's modules once and forks one item at a time. A program, not a module to import: it
# runs as `python -B -c <this text>`. Standard library only.

import os, sys


def threads():
    return len(os.listdir("/proc/self/task"))


os.chdir("/")  # read-only: nothing an item writes can lie where the zygote's own imports look ("" on sys.path)
# The preloads come first, before any tool of the fork server's own: what they import is what an item keeps loaded
# (a cold start has it too once the test imported them); the rest (ctypes, socket, ...) is dropped in every item.
loaded, failed, absent, threaded = [], [], [], ""
for name in filter(None, sys.argv[2].split(",")):
    parent, _, leaf = name.rpartition(".")
    held = None
    try:
        if parent:
            __import__(parent)
            if threads() > 1:  # a fork would lose them: the worker starts us again without it
                threaded = parent
                break
            held = getattr(sys.modules[parent], leaf, None)
        if held is not None and not isinstance(held, type(sys)):
            # An attribute (`from numpy import array`, `from curses import has_key`): the import statement takes
            # it, and importing a submodule of that name would replace it for every item.
            absent.append(name)
        else:
            __import__(name)
            loaded.append(name)
    except ModuleNotFoundError as exc:
        if exc.name == name and parent in sys.modules:
            absent.append(name)  # no attribute and no module of that name: the item's import fails as it would cold
        else:
            failed.append(f"{name}: {type(exc).__name__}")
    except BaseException as exc:
        failed.append(f"{name}: {type(exc).__name__}")
    if threads() > 1:  # a fork would lose them: the worker starts us again without it
        threaded = name
        break


def lazy_imports(helpers, limit=400):
    """The imports inside the functions the test calls (`helpers`, dotted names), and inside the functions of their
    own package those call, three levels down: what a first call of, say, torch.testing.assert_close imports."""
    import dis, importlib.util

    module_type = type(sys)
    found: list[tuple[str, str]] = []
    seen: set[int] = set()
    queue: list[tuple[object, int]] = []
    obj: object
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
            consts: list[object] = []
            module = None
            for instruction in dis.get_instructions(current):
                op, arg = instruction.opname, instruction.argval
                if op == "LOAD_CONST":
                    consts = (consts + [arg])[-2:]
                    continue
                if op == "IMPORT_NAME":
                    level, fromlist = consts if len(consts) == 2 else (0, None)
                    try:
                        name = (
                            importlib.util.resolve_name("." * level + arg, package)
                            if isinstance(level, int) and level
                            else arg
                        )
                    except (ImportError, ValueError, TypeError):
                        name = ""
                    if name:
                        found.append((name, ""))
                        found += [
                            (name, item)
                            for item in (fromlist if isinstance(fromlist, tuple) else ())
                            if isinstance(item, str) and item != "*"
                        ]
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
    for name, member in lazy_imports_found(sys.argv[3].split(",")):
        if (f"{name}.{member}" if member else name) in sys.modules:
            continue
        try:
            module = __import__(name, fromlist=[member] if member else [])
        except BaseException:
            continue
        if member and isinstance(getattr(module, member, None), type(sys)):
            warmed.append(f"{name}.{member}")
        elif not member:
            warmed.append(name)
        if threads() > 1:
            threaded = f"{name}.{member}" if member else name
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


def huge_pages():
    """The preloads' memory (the malloc heap and anonymous mappings) collapsed into 2 MB pages (MADV_COLLAPSE, Linux
    6.1+; elsewhere it fails and nothing changes): each fork copies a page-table entry per 2 MB instead of per 4 KB
    (the preloads of torch, scipy and sympy: 220 MB, 56,000 entries, 7 ms a fork and as much at its exit, and an
    item is four forks). A fork that writes to such a page still copies only the 4 KB it writes. Only 2 MB ranges
    already nearly all resident are collapsed: collapsing makes every page of the range resident, and a sparse
    mapping (a reserved arena) would grow up to 512 times."""
    libc.madvise.argtypes = libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    huge, page, collapsed = 2 << 20, os.sysconf("SC_PAGE_SIZE"), 0
    vector = ctypes.create_string_buffer(huge // page)
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        for start in range(-(-low // huge) * huge, high // huge * huge, huge):
            if libc.mincore(start, huge, vector) != 0:
                continue
            resident = sum(byte & 1 for byte in vector.raw)
            if resident * 10 >= 9 * len(vector.raw) and libc.madvise(start, huge, 25) == 0:  # MADV_COLLAPSE
                collapsed += huge
    return collapsed


huge = huge_pages()


ctl.send(
    json.dumps(
        {
            "loaded": loaded,
            "failed": failed,
            "threads": threads(),
            "native": "_ctypes" in kept,
            "threaded": threaded,
            "warmed": warmed,
            "absent": absent,
            "huge_pages": huge,
        }
    ).encode()
)

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

    points: list[str] = []
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
SECCOMP = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56,
            "clone3": 435,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "clone": 220,
            "clone3": 435,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
        },
    ),
}
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET


def namespaces_refuse():
    """A seccomp filter (after no_new_privs): EPERM for the calls above, for other ABIs, and for a clone into new
    namespaces."""
    import platform, struct

    arch, numbers = SECCOMP[platform.machine()]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    program = [
        (load, 0, 0, 4),
        (jeq, 1, 0, arch),
        (ret, 0, 0, deny),
        (load, 0, 0, 0),
        (jge, 0, 1, 0x40000000),
        (ret, 0, 0, deny),
    ]  # x32 numbers
    for name, number in numbers.items():
        if name not in ("clone", "clone3"):
            program += [(jeq, 0, 1, number), (ret, 0, 0, deny)]
    program += [
        (jeq, 0, 1, numbers["clone3"]),
        (ret, 0, 0, enosys),
        (jeq, 0, 3, numbers["clone"]),
        (load, 0, 0, 16),
        (jset, 0, 1, NAMESPACE_FLAGS),
        (ret, 0, 0, deny),
        (ret, 0, 0, allow),
    ]
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    check(libc.prctl(22, 2, ctypes.byref(Program(len(program), ctypes.addressof(buffer))), 0, 0), "seccomp")


# The unpacker, as a cold start's: tar spawned without copying this process (a fork copies the page tables of every
# preload, then pays a fault per page it touches, and the fork would import tarfile afresh: 30-50 ms an item).
TAR = next((path for path in ("/usr/bin/tar", "/bin/tar") if os.access(path, os.X_OK)), None)


def unpack(archive):
    """In a process of its own, so no byte of the files (the harness nonce) is ever in the item's memory."""
    if TAR is not None:
        try:
            unpacker = os.posix_spawn(
                TAR, [TAR, "-x", "-o", "-f", "-"], base_env, file_actions=[(os.POSIX_SPAWN_DUP2, archive, 0)]
            )
        except OSError as exc:
            os.write(2, f"rcb-fork: unpacking the item's files: {exc}\n".encode())
            os._exit(125)
    else:
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


# The harness the worker sent (its file name, source, code, and its test process's source and code), compiled once
# by the zygote before any fork: our own program, the same text an item's harness file holds (checked per item).
harness: tuple | None = None


def harness_unpacked(packed):
    """The harness as the worker sends it: its JSON compressed (forkserver._harness_packed), else None."""
    import binascii, zlib  # ours: dropped from every fork's modules with the other tools (`kept`)

    try:
        return json.loads(zlib.decompress(binascii.a2b_base64(packed)))
    except (ValueError, TypeError, zlib.error, binascii.Error):
        return None


def harness_compile(sent):
    global harness
    if type(sent) is not dict:  # not readable: every item runs its harness file as a cold start does
        harness = None
        return
    if harness is not None and harness[1] == sent["source"].encode():
        return
    try:
        source = sent["source"].encode()
        code = compile(source, sent["file"], "exec", dont_inherit=True)
        child = (sent["child"], compile(sent["child"], "<string>", "exec", dont_inherit=True))
    except (SyntaxError, ValueError, KeyError, TypeError, AttributeError):
        harness = None
        return
    harness = (sent["file"], source, code, child)


def harness_compiled(file):
    """Whether the item's harness file is the one compiled here (any other runs as run_path compiles it)."""
    if harness is None or file != harness[0]:
        return False
    try:
        with open(file, "rb") as f:
            return f.read() == harness[1]
    except OSError:
        return False


# The platform's other programs the worker sent (the sealed replay's replayer and recorder: file name -> source and
# code), compiled once here like the harness, and run only for an item whose file is that text byte for byte.
programs: dict = {}


def program_compile(sent):
    try:
        file, source = sent["file"], sent["source"].encode()
        if file not in programs or programs[file][0] != source:
            programs[file] = (source, compile(source, file, "exec", dont_inherit=True))
    except (SyntaxError, ValueError, KeyError, TypeError, AttributeError):
        programs.pop(sent.get("file"), None)


def program_compiled(file):
    """The code compiled here for the item's program file, when the file is that text (None: run_path compiles it)."""
    held = programs.get(file)
    if held is None:
        return None
    try:
        with open(file, "rb") as f:
            return held[1] if f.read() == held[0] else None
    except OSError:
        return None


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
        if request["warm"] and harness is not None and harness_compiled(sys.argv[0]):
            # The harness compiled once here, not per item (20-60 ms): run as run_path runs a file's code.
            _, source, code, child = harness
            init: dict | None = {"RCB_WARM": True, "RCB_CHILD": child}
            # run_path's own runner, private to runpy (typeshed does not list it): it runs a compiled code object.
            runpy._run_module_code(code, init, "__main__", pkg_name="", script_name=sys.argv[0])  # type: ignore[attr-defined]
        elif not request["warm"] and (program := program_compiled(sys.argv[0])) is not None:
            # A platform program compiled once here (the replayer: 10-40 ms a replay), run as run_path would.
            runpy._run_module_code(program, None, "__main__", pkg_name="", script_name=sys.argv[0])  # type: ignore[attr-defined]
        else:
            init = {"RCB_WARM": True} if request["warm"] else None
            runpy.run_path(sys.argv[0], run_name="__main__", init_globals=init)
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
    check(
        libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare"
    )
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
            check(
                libc.mount(
                    b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}".encode()
                ),
                f"mount {folder}",
            )
            for point, fd in below:
                os.makedirs(point, exist_ok=True)
                check(
                    libc.mount(f"/proc/self/fd/{fd}".encode(), point.encode(), None, MS_BIND | MS_REC, None),
                    f"bind {point}",
                )
                os.close(fd)
    if os.path.isdir("/dev/mqueue"):  # the new IPC namespace's own message queues, not the container's
        check(
            libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
            "mount /dev/mqueue",
        )
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
    message, fds = socket.recv_fds(ctl, 1 << 20, 16)[:2]
    if not message:
        break
    request = json.loads(message)
    if "harness" in request:
        harness_compile(harness_unpacked(request.pop("harness")))
    if "program" in request:
        program_compile(request.pop("program"))
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
            import traceback

            os.write(2, f"rcb-fork: {exc} {traceback.format_exc()}\n".encode())
        os._exit(125)
    for fd in (*fds, ready):
        os.close(fd)
    ctl.send(json.dumps({"started": True}).encode())
    # Waiting on the item and on the worker at once: a worker gone mid-item (EOF) ends the zygote, and with it
    # its sandbox (bwrap's, or the container whose init it is the child of) and the item.
    ended = os.pidfd_open(pid)
    while not select.select([ended, ctl.fileno()], [], [])[0].count(ended):
        if not ctl.recv(1, socket.MSG_PEEK):
            os._exit(0)
    os.close(ended)
    status = os.waitpid(pid, 0)[1]
    # Every holder of `ready` is gone with the fork (the item closed its end before the answer ran).
    set_up = os.read(ready_read, 1) == b"R"
    os.close(ready_read)
    ctl.send(json.dumps({"status": status_code(status), "ready": set_up}).encode())
