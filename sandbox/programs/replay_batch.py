# The sealed replay of many answers of one snippet in one sandboxed process (evaluation/judging/replay_batch.py:
# a snippet's mutants). Each answer runs the replayer (replayer.py, compiled once here) exactly as a replay alone
# would, in a fork of its own, in a work folder written afresh from what this process read at its start, with /tmp
# and /dev/shm emptied and every process the fork left killed before the next answer starts; so one answer cannot
# change the next one's files, processes or memory. A fork writes only to its own pipes: this process is not
# dumpable (no fork can open its stdout through /proc), and it relays what each fork printed, base64-encoded, on
# one line of its own, which the worker parses as strictly as a replay alone's output. A program run inside the
# sandbox, never imported.

import base64, json, os, re, select, signal, stat, sys, time

PR_SET_DUMPABLE = 4
STDERR_KEPT = 4096  # the end of a fork's stderr, for the reason the worker gives when it printed no report
# What this process reads before the first fork: the program and the answers never lie in an answer's folder.
OWN_FILES = (".rcb-replay-batch.py", ".rcb-replay-batch.json")
TEMPORARY = ("/tmp", "/dev/shm")
# What every answer's replayer imports first (replayer.py and snapshot.py): imported once here, not in each fork
# (and what unpickling its inputs and restoring the generators import: `inputs_warm`).
REPLAYER_IMPORTS = ("_io", "base64", "dataclasses", "importlib.util", "itertools", "json", "pickle", "random", "types")


def threads():
    return len(os.listdir("/proc/self/task"))


def line_write(mark, *fields):
    sys.stdout.write(f"\n{mark} " + " ".join(str(field) for field in fields) + "\n")
    sys.stdout.flush()


def refuse(mark, why):
    """No answer is replayed here: the worker replays each alone."""
    line_write(mark, "refused", base64.b64encode(why.encode()[:500]).decode("ascii"))
    sys.exit(0)


def undumpable():
    """Not dumpable: a fork (same uid, no capability) can then neither open this process's stdout through
    /proc/<pid>/fd nor trace it. Each fork makes itself dumpable again, as a replay alone is."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")
    return libc


def tree_read(root, skipped=()):
    """What lies under `root` on its own file system, by path: ("dir", mode), ("file", mode, bytes) or ("link",
    target); `root` itself is "". Mounts below it (a venv bound under /tmp) are left out, and so never emptied."""
    device = os.lstat(root).st_dev
    tree: dict[str, tuple] = {"": ("dir", os.lstat(root).st_mode & 0o7777)}
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(os.path.join(root, relative)) as entries:
            for entry in entries:
                path = os.path.join(relative, entry.name)
                info = entry.stat(follow_symlinks=False)
                if info.st_dev != device or path in skipped:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    tree[path] = ("dir", info.st_mode & 0o7777)
                    pending.append(path)
                elif stat.S_ISLNK(info.st_mode):
                    tree[path] = ("link", os.readlink(entry.path))
                elif stat.S_ISREG(info.st_mode):
                    with open(entry.path, "rb") as handle:
                        tree[path] = ("file", info.st_mode & 0o7777, handle.read())
    return tree


def tree_restore(root, tree, overrides=None):
    """`root` as `tree` says, whatever a fork did to it: every file and link removed and written again, every
    folder not in `tree` removed (opened again first if it was made unreadable), the folders' modes set back;
    `overrides` ({path: bytes}) replace files' contents. Walked by descriptors: no path grows too long to open."""
    device = os.lstat(root).st_dev
    kept = {path for path, entry in tree.items() if entry[0] == "dir"}

    def empty(fd, prefix):
        with os.scandir(fd) as entries:
            found = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
        for name, info in found:
            if info.st_dev != device:
                continue
            path = os.path.join(prefix, name)
            if stat.S_ISDIR(info.st_mode):
                if info.st_uid == os.getuid():  # one of ours a fork may have closed (another's it could not)
                    os.chmod(name, 0o700, dir_fd=fd)
                below = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    empty(below, path)
                finally:
                    os.close(below)
                if path not in kept:
                    os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)

    if os.lstat(root).st_uid == os.getuid():
        os.chmod(root, 0o700)
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        empty(top, "")
    finally:
        os.close(top)
    for relative, entry in sorted(tree.items()):
        path = os.path.join(root, relative)
        if entry[0] == "dir":
            os.makedirs(path, exist_ok=True)
        elif entry[0] == "link":
            os.symlink(entry[1], path)
        else:
            with open(path, "wb") as handle:
                handle.write((overrides or {}).get(relative, entry[2]))
            os.chmod(path, entry[1])
    for relative, entry in sorted(tree.items(), reverse=True):  # the folders' own modes last: a 0555 one is full
        path = os.path.join(root, relative)
        if entry[0] == "dir" and os.lstat(path).st_uid == os.getuid():
            os.chmod(path, entry[1])


def tmpfs(folder):
    """Whether `folder` lies on a tmpfs (the sandbox's own, fresh for each run): the only kind emptied here."""
    real, best, kind = os.path.realpath(folder), "", ""
    with open("/proc/self/mountinfo", "rb") as info:
        for line in info:
            fields = line.split()
            point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4]))
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[fields.index(b"-") + 1].decode()
    return kind == "tmpfs"


def answer_run(libc, code, spec, out, err):
    """In the fork: the replayer as a replay alone runs it, printing to this answer's own pipes; never returns."""
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, 65536)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    sys.argv = [spec["replayer"], *spec.get("argv", [json.dumps(spec["spec"])])]
    main = type(sys)("__main__")
    main.__file__ = spec["replayer"]
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(code, vars(main))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(status)


def others_kill():
    """SIGKILL to every process of this pid namespace but its init and this one (what the last fork left)."""
    for _ in range(10):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return


def children_reap():
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def answer_fork(libc, code, spec, seconds, cap):
    """One answer in a fork: (state, exit status, stdout, the end of stderr); state is "done", "timeout" (killed at
    `seconds`) or "over" (it printed more than `cap` bytes)."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_read)
        os.close(err_read)
        answer_run(libc, code, spec, out_write, err_write)
    os.close(out_write)
    os.close(err_write)
    ended = os.pidfd_open(pid)
    deadline = time.monotonic() + seconds
    printed = {out_read: bytearray(), err_read: bytearray()}
    reading, over = {out_read, err_read}, False

    def read(fd):
        nonlocal over
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            reading.discard(fd)
        elif fd == err_read:
            printed[fd] = (printed[fd] + chunk)[-STDERR_KEPT:]
        elif not over:
            over = len(printed[fd]) + len(chunk) > cap
            printed[fd] += b"" if over else chunk

    timed_out = exited = False
    while not exited:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        for fd in select.select([ended, *reading], [], [], remaining)[0]:
            if fd == ended:
                exited = True
            else:
                read(fd)
    status = os.waitpid(pid, 0)[1]
    os.close(ended)
    others_kill()
    children_reap()
    while reading:  # every writer is gone now: what is left is read to its end
        read(next(iter(reading)))
    os.close(out_read)
    os.close(err_read)
    code = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    state = "timeout" if timed_out else "over" if over else "done"
    return state, code, bytes(printed[out_read]), bytes(printed[err_read])


# What a probe fork runs (`inputs_warm`): the recorded inputs unpickled and the generators restored as each answer's
# replayer does before the answer's first line, the task's own modules never imported (their classes read as a
# stand-in), and the modules that loaded printed.
PROBE = """
import base64, io, json, pickle, random, sys, types
own = set(json.loads(sys.argv[1]))
class Refused:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in own:
            raise ImportError(name)
sys.meta_path.insert(0, Refused())
class StandIn:
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)
    def __init__(self, *args, **kwargs):
        pass
    def __setstate__(self, state):
        pass
class Probe(pickle.Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] in own:
            return StandIn
        if module == "rcb_sealed_attributes":  # attributes.py's setter, which each answer's replayer registers
            return lambda obj, state: None
        return super().find_class(module, name)
before = set(sys.modules)
with open(json.loads(sys.argv[2]), "rb") as handle:
    inputs = json.load(handle)
for blobs in inputs.values():
    for blob in blobs:
        try:
            positional, keyword, state = Probe(io.BytesIO(base64.b64decode(blob))).load()
            random.setstate(state["random"])
            if "numpy" in state:
                sys.modules["numpy"].random.set_state(state["numpy"])
            if "torch" in state:
                sys.modules["torch"].set_rng_state(state["torch"])
        except BaseException:
            pass
print(json.dumps(sorted(set(sys.modules) - before)))
"""
MODULE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def inputs_warm(libc, inputs, own, seconds):
    """Import here, once for every answer, what each answer's replayer imports before the answer's first line runs:
    what unpickling its recorded inputs and restoring the generators load (a tensor's torch.utils.serialization, 7
    ms a fork; numpy.random, 20-40 ms). A probe fork does that work once (the task's own modules refused) and names
    what loaded; this process imports those of packages it has loaded already, never one of the task's own: nothing
    an answer's replay would not have loaded itself before the answer ran. The probe's output is untrusted, and
    whatever it left is emptied and killed before the first answer, as any answer's is."""
    import importlib

    spec = {"replayer": "<probe>", "spec": None}
    code = compile(PROBE, "<probe>", "exec", dont_inherit=True)
    probe = dict(spec, argv=[json.dumps(sorted(own)), json.dumps(inputs)])
    state, _, out, _ = answer_fork(libc, code, probe, seconds, 1 << 20)
    try:
        named = json.loads(out.decode("utf-8").strip().splitlines()[-1]) if state == "done" else []
    except (ValueError, IndexError, UnicodeDecodeError):
        named = []
    for name in named if isinstance(named, list) else []:
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name) or name in sys.modules:
            continue
        top = name.split(".")[0]
        if top in own or top not in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except BaseException:
            pass


def main():
    batch = json.loads(sys.argv[1])
    mark = batch["mark"]
    # Killing what a fork left (kill -1) is safe only as the first process of a pid namespace of our own.
    if os.getpid() > 2:
        refuse(mark, f"not in a pid namespace of its own (pid {os.getpid()})")
    try:
        libc = undumpable()
    except (ImportError, OSError, AttributeError) as exc:
        refuse(mark, f"cannot stop being dumpable: {exc}")
    with open(batch["answers"], "rb") as handle:
        answers = json.load(handle)
    for name in REPLAYER_IMPORTS:
        __import__(name)
    with open(batch["replayer"], "rb") as handle:
        code = compile(handle.read(), batch["replayer"], "exec", dont_inherit=True)
    work = os.getcwd()
    folders = [work, *(folder for folder in TEMPORARY if os.path.isdir(folder))]
    if not all(tmpfs(folder) for folder in folders):  # what is emptied between answers is the sandbox's own
        refuse(mark, f"not every one of {', '.join(folders)} is a tmpfs")
    # Each folder a fork can write, as it was before the first: a replay alone has them fresh.
    trees = {folder: tree_read(folder, OWN_FILES if folder == work else ()) for folder in folders}
    if answers and batch.get("warm", True):
        own = {name.removesuffix(".py") for name in os.listdir(work)}
        inputs_warm(libc, answers[0]["spec"]["inputs"], own, float(batch["seconds"]))
        if threads() > 1:  # a fork would lose it: each answer is replayed alone instead
            refuse(mark, "an import for the inputs started a thread")
    for index, answer in enumerate(answers):
        for folder, tree in trees.items():
            tree_restore(
                folder,
                tree,
                {path: text.encode("utf-8") for path, text in answer["files"].items()} if folder == work else None,
            )
        spec = {"replayer": batch["replayer"], "spec": answer["spec"]}
        state, status, out, err = answer_fork(libc, code, spec, float(batch["seconds"]), int(batch["output_bytes"]))
        line_write(
            mark,
            index,
            state,
            status,
            base64.b64encode(out).decode("ascii"),
            base64.b64encode(err).decode("ascii"),
        )
    line_write(mark, "end", len(answers))


main()
