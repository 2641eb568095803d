"""The harness that runs a task's test entry point in every sandbox, proves the test ran to its end, and audits the answer.

Threat model. The answer is spliced into a file the test imports, so it runs in the test's own process with the
same rights as any code there: it can read that process's memory (frames, the garbage collector, ctypes,
/proc/self/mem), replace functions, write to any file descriptor and end the process. No proof made inside that
process is unforgeable, so the harness splits the run in two and makes cheating leave evidence:

- The supervisor (this file, started by the sandbox) reads a one-time nonce from a file it deletes, makes itself
  non-dumpable (so no other process of the same user can read its memory or /proc files) and starts the test in a
  fresh interpreter. Under the fork server (RCB_WARM, a warm start that has the environment's modules imported) it
  forks the test process first, before it reads the nonce, and that process runs CHILD in place of an exec once
  the supervisor, non-dumpable by then, has deleted nonce and harness and handed it its key. The nonce never exists in the test's process: only the supervisor prints the completion line
  `<nonce> <status> <exit code> <records>` after the test process is gone, so neither the answer nor a child it
  starts can print it, and killing the supervisor leaves no line (not completed).
- The test process installs an audit hook (PEP 578; it cannot be removed from Python) before anything else runs.
  The hook attributes import, open, exec, compile, frame and garbage-collector introspection, ctypes, signals, kill
  and process events to the answer's own lines (the spliced snippet's line range in its file) and writes each
  record to the supervisor at once, over a pipe, before the audited call returns: the first step of any route to
  the harness's state is out of the process before it can be used. The hook checks the pipe is still the genuine one
  (its inode) before writing, and ends the process if not. Calls into hidden modules (the reference copies) are
  announced by one audit event injected at the top of each of their functions, so a call made from the answer's
  lines is recorded even when the module was already imported; so is every read of such a module's attributes (its
  class becomes a module type that announces them), which catches `from reference import x` of a cached module.
- The test process tells the supervisor that the test finished with a per-run key it received on a pipe; the key
  lives only in the hook's closure (reachable through gc or frames, which the hook records first). The finish is
  accepted only when it is raised from the harness's own frame and process. Before finishing, the harness compares
  the test framework's assertion helpers (unittest, numpy.testing, torch.testing, builtins, the test's own classes)
  with what they were before the test and records every replacement.

Once the answer may have run, the hook compares exact strings and identities only and calls no library code
(json, os.path, getattr on foreign objects): anything the answer planted there would run inside the hook, where the
hook's own events are not recorded.

What remains possible, and is left to the static audit (evaluation/audit.py) and to the maintainer who reviews
every flag: fooling the tests in ways no audit event shows (replacing an assertion helper and restoring it before
the test ends; a signal handler, which receives a frame without any event, running while the hook holds the key);
and in-process forgery after a recorded step (an answer that read the key through gc or /proc/self/mem can announce
a completion, but its records are already out, so the outcome is flagged, never passed). One route to memory has
no recorded step: once ctypes is loaded in the test process (numpy and torch load it; a warm start forks only when its
preloads did), its classes are reachable through `object.__subclasses__()` and a Union of an integer and a pointer
reads memory without any audit event. Only the static audit sees that walk (`__subclasses__`, `__closure__`,
`__globals__`, by attribute or by string).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass, field

NONCE_FILE = ".rcb-nonce"
HARNESS_FILE = ".rcb-harness.py"
# Most records one run reports; the rest are counted, not kept.
RECORDS_MAX = 50

# The test process: installs the guard, runs the entry point, reports the finish.
CHILD_SOURCE = r'''
def _rcb_guard(spec, key, report_fd, main_frame, entry):
    import sys, os, ast, json
    from types import CodeType, FunctionType, ModuleType
    from importlib.machinery import PathFinder, SourceFileLoader
    module_get = ModuleType.__getattribute__
    audit, getframe, write, fstat, getpid, exit_now = sys.audit, sys._getframe, os.write, os.fstat, os.getpid, os._exit
    realpath, join, stat, get_ident = os.path.realpath, os.path.join, os.stat, __import__("_thread").get_ident
    str_, bytes_, int_, type_, len_, vars_, list_, callable_ = str, bytes, int, type, len, vars, list, callable
    modules = sys.modules
    cwd = os.getcwd()
    answer = realpath(join(cwd, spec["answer_file"])) if spec.get("answer_file") else None
    first, last = spec.get("first_line", 0), spec.get("last_line", -1)
    hidden_modules = frozenset(spec.get("hidden_modules", ()))
    hidden_inodes = set()
    for path in spec.get("hidden_files", ()):
        try:
            info = stat(join(cwd, path))
            hidden_inodes.add((info.st_dev, info.st_ino))
        except OSError:
            pass
    try:  # every path that resolves into procfs (/proc/self/mem, //proc/.., /dev/fd/../mem) has this device
        proc_device = stat("/proc/self").st_dev
    except OSError:
        proc_device = None
    channel = fstat(report_fd)
    channel = (channel.st_dev, channel.st_ino)
    pid = getpid()
    main_thread = get_ident()
    task_folder = cwd.rstrip("/") + "/"

    def spellings(relative):
        # Filenames are compared as exact strings: no library code runs inside the hook once the answer has run.
        return frozenset((relative, "./" + relative, join(cwd, relative), realpath(join(cwd, relative))))

    entry_names = spellings(entry)
    answer_names = spellings(spec["answer_file"]) if answer else frozenset()
    answer_files = {}
    inside = set()
    state = {"finished": False, "started": False, "sent": 0, "test_globals": None}
    # (holder, label, attribute) -> value of the assertion helpers and framework parts, before the answer ran.
    protected = {}
    missing = object()
    snapshotted = set()
    prefix = ("\n" + key + " ").encode()
    # Wrappers whose only job is to hand the caller a frame, a process or a file: look through them.
    wrappers = ("/inspect.py", "/traceback.py", "/subprocess.py", "/os.py", "/ctypes/__init__.py", "/pathlib.py",
                "/runpy.py", "/importlib/__init__.py", "/shutil.py", "/codecs.py", "/pty.py", "/signal.py",
                "/multiprocessing/popen_fork.py", "<frozen importlib._bootstrap>",
                "<frozen importlib._bootstrap_external>", "<frozen os>")
    # Events the answer's own line must raise itself (a library doing them for it is no evidence).
    strict = frozenset(("exec", "compile", "marshal.loads", "code.__new__", "function.__new__"))
    through = frozenset((
        "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "os.kill", "os.killpg", "signal.pthread_kill", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
        "os.spawn", "os.fork", "os.forkpty", "pty.spawn", "os.link", "os.symlink",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at",
        "ctypes.addressof", "ctypes.call_function", "ctypes.PyObj_FromPtr",
    ))
    frame_attributes = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "ag_code"))
    native = frozenset(("ctypes", "_ctypes", "cffi", "_cffi_backend", "mmap"))
    kinds = {"exec": "exec", "compile": "exec", "code.__new__": "exec", "function.__new__": "exec",
             "marshal.loads": "exec", "os.kill": "exit", "os.killpg": "exit", "signal.pthread_kill": "exit",
             "os.link": "hidden", "os.symlink": "hidden", "object.__setattr__": "tampering"}
    watched = strict | through | {"open", "import", "object.__getattr__", "object.__setattr__", "sys.addaudithook",
                                  "rcb.hidden.call", "rcb.harness.finish", "rcb.answer.start"}
    answer_stem = os.path.splitext(os.path.basename(answer))[0] if answer else None
    import_module = __import__("importlib").import_module
    framework = (("builtins", None), ("unittest", None), ("unittest.case", None), ("unittest.result", None),
                 ("unittest.runner", None), ("unittest.main", None), ("unittest.suite", None),
                 ("unittest.loader", None), ("numpy.testing", None), ("numpy.testing._private.utils", None),
                 ("torch.testing", None), ("torch.testing._comparison", None), ("pytest", None),
                 ("sys", ("exit", "audit", "excepthook")), ("os", ("_exit", "write", "kill", "abort")))

    def snapshot(tops=None):
        for name, only in framework:
            module = modules.get(name)
            if type_(module) is not ModuleType or name in snapshotted:
                continue
            if tops is not None and name.split(".", 1)[0] not in tops:
                continue
            snapshotted.add(name)
            # The namespaces themselves are kept: looking them up again later could run the answer's code.
            namespace = vars_(module)
            for attribute, value in list_(namespace.items()):
                if (only is not None and attribute not in only) or not behaviour(value):
                    continue
                protected[(id(namespace), name, attribute)] = (namespace, value)
                owner = vars_(value).get("__module__") if type_(value) is type_ else None
                if only is None and type_(owner) is str_ and str_.startswith(owner, name.split(".", 1)[0]):
                    members = vars_(value)
                    for member, inner in list_(members.items()):
                        if behaviour(inner):
                            protected[(id(members), name + "." + attribute, member)] = (members, inner)

    def behaviour(value):
        # Settings such as TestCase.maxDiff are the test's to change; functions and classes decide outcomes.
        return callable_(value) or type_(value) in (staticmethod, classmethod, property)

    def from_test(value):
        # Only plain functions are asked for their code: any other object could run the answer's code here.
        return type_(value) is FunctionType and str_.__str__(value.__code__.co_filename) in entry_names

    def replaced():
        if answer is None:
            return []
        changed = set()
        for (_, label, attribute), (holder, value) in list_(protected.items()):
            now = holder.get(attribute, missing)
            if now is not value and not from_test(now):
                changed.add(label + "." + attribute)
        test_globals = state["test_globals"] or {}
        for name, value in list_(test_globals.items()):
            if type_(name) is not str_:
                changed.add("the test's globals (a key that is not a name)")
                continue
            name = str_.__str__(name)
            if type_(value) is type_ and vars_(value).get("__module__") == "__main__":
                for member, inner in list_(vars_(value).items()):
                    if type_(inner) is FunctionType and not from_test(inner):
                        changed.add("the test's " + name + "." + (member if type_(member) is str_ else "?"))
            elif (type_(value) is FunctionType and str_.__str__(value.__name__) != name
                  and file_is_answer(value.__code__.co_filename)):
                changed.add("the test's global " + name)
        return sorted(changed)

    def file_is_answer(name):
        return str_.__str__(name) in answer_names

    def is_answer(frame):
        return first <= frame.f_lineno <= last and file_is_answer(frame.f_code.co_filename)

    def answer_line_direct(frame, look_through=True):
        while look_through and frame is not None and str_.endswith(str_.__str__(frame.f_code.co_filename), wrappers):
            frame = frame.f_back
        return frame.f_lineno if frame is not None and is_answer(frame) else None

    def answer_line_anywhere(frame):
        while frame is not None:
            if is_answer(frame):
                return frame.f_lineno
            frame = frame.f_back
        return None

    def on_answer_thread(frame):
        """Another thread than the test's, running no task code, once the answer started: only the answer can have
        handed it the work (a C function given to a thread pool leaves no frame of its own), so it is the answer's."""
        if not state["started"] or get_ident() == main_thread:
            return False
        while frame is not None:
            name = str_.__str__(frame.f_code.co_filename)
            if str_.startswith(name, task_folder) or not str_.startswith(name, ("/", "<")):
                return False
            frame = frame.f_back
        return True

    def text(value):
        kind = type_(value)
        if kind is str_:
            return str_.__repr__(value)[:300]
        if kind is bytes_:
            return bytes_.__repr__(value)[:300]
        if kind is int_:
            return int_.__repr__(value)
        return "<object>"

    def send(payload):
        try:
            now = fstat(report_fd)
            if (now.st_dev, now.st_ino) != channel:
                raise OSError("the report pipe was replaced")
            write(report_fd, prefix + payload.encode() + b"\n")
        except OSError:
            # Nobody hears this process any more: it must not go on to a completion.
            exit_now(70)

    def record(kind, event, line, detail):
        state["sent"] += 1
        if state["sent"] <= 200:
            fields = (kind, event, "" if line is None else int_.__repr__(line), detail[:500])
            send("R " + "\t".join(str_.replace(str_.replace(f, "\t", " "), "\n", " ") for f in fields))

    def opened_hidden(path):
        if type_(path) not in (str_, bytes_):
            return None
        try:  # resolved as open() resolves it: from the current folder, through every symlink
            info = stat(path)
        except (OSError, ValueError):
            return None
        if info.st_dev == proc_device:
            return "process memory"
        return "hidden file" if (info.st_dev, info.st_ino) in hidden_inodes else None

    def finish(args):
        caller = getframe(2)
        if caller is not main_frame or getpid() != pid or state["finished"]:
            record("tampering", "rcb.harness.finish", answer_line_anywhere(caller),
                   "a completion announced by code other than the harness")
            return
        state["finished"] = True
        for name in replaced():
            record("tampering", "replaced", None, name + " was replaced during the test")
        status, code = args
        send("F " + str_(status) + " " + int_.__repr__(code) + " " + int_.__repr__(pid))

    def on_exec(code):
        if type_(code) is not CodeType:
            return
        filename = str_.__str__(code.co_filename)
        if state["test_globals"] is None and filename in entry_names:
            state["test_globals"] = vars_(modules["__main__"])
        if not state["started"] and str_.__str__(code.co_name) == "<module>" and filename in answer_names:
            snapshot()

    def answer_start():
        # A native module the test (or a warm start's preloads) already imported would make the answer's import of
        # it a silent cache hit: dropped, so that import is seen as on a fresh interpreter.
        for name in list_(modules):
            if name.split(".", 1)[0] in ("ctypes", "_ctypes", "mmap"):
                del modules[name]
        # Lazily imported assertion modules (numpy.testing in numpy 2) are loaded now, so they are snapshotted too.
        for package, testing in (("numpy", "numpy.testing"), ("torch", "torch.testing")):
            if package in modules and testing not in modules:
                try:
                    import_module(testing)
                except Exception:
                    pass
        snapshot()

    def hook(event, args):
        # An event name of another type could run the answer's code on hashing: sys.audit takes only str.
        if type_(event) is not str_ or event not in watched or (event == "rcb.answer.start" and state["started"]):
            return
        thread = get_ident()
        if thread in inside:
            return
        inside.add(thread)
        try:
            frame = getframe(1)
            if event == "rcb.harness.finish":
                finish(args)
            elif event == "rcb.answer.start":
                state["started"] = True
                answer_start()
            elif event == "sys.addaudithook":
                line = answer_line_direct(frame)
                if line is not None:
                    record("tampering", event, line, "adds an audit hook")
                raise RuntimeError("no audit hooks besides the harness's")
            elif event == "open":
                what = opened_hidden(args[0])
                line = answer_line_anywhere(frame) if what else None
                if what and line is None and on_answer_thread(frame):
                    line = first
                if line is not None:
                    record("memory" if what == "process memory" else "hidden", event, line,
                           "opens " + text(args[0]) + " (" + what + ")")
            elif event == "import":
                name = args[0] if type_(args[0]) is str_ else ""
                if name in hidden_modules or name.rsplit(".", 1)[-1] in hidden_modules:
                    line = answer_line_anywhere(frame)
                    if line is None and on_answer_thread(frame):
                        line = first
                    if line is not None:
                        record("hidden", event, line, "imports the hidden module " + text(name))
                elif name.split(".", 1)[0] in native:
                    line = answer_line_direct(frame)
                    if line is not None:
                        record("native", event, line, "imports " + text(name))
            elif event == "rcb.hidden.call":
                caller = frame.f_back
                line = answer_line_direct(caller) if caller is not None else None
                if line is None and on_answer_thread(frame):
                    line = first
                if line is not None:
                    what = ("reads " + text(args[1]) + " of") if len_(args) > 1 else "calls hidden code in"
                    record("hidden", event, line, what + " " + text(args[0]))
            else:
                if event == "exec":
                    on_exec(args[0])
                if event in ("object.__getattr__", "object.__setattr__"):
                    name = args[1] if len_(args) > 1 and type_(args[1]) is str_ else ""
                    if name not in frame_attributes and name != "__code__":
                        return
                    line = answer_line_direct(frame, look_through=name != "__code__")
                else:
                    line = answer_line_direct(frame, look_through=event not in strict)
                    # A library's own threads take frames (logging) and compile (dataclasses); never these.
                    if line is None and event in through and event != "sys._getframe" and on_answer_thread(frame):
                        line = first
                if line is None:
                    return
                kind = kinds.get(event) or ("native" if event.startswith("ctypes.") else
                                            "process" if event.startswith(("os.", "subprocess", "pty")) else
                                            "introspection")
                record(kind, event, line, event + "(" + ", ".join(text(a) for a in args[:3]) + ")")
        except RuntimeError:
            raise
        except Exception as exc:
            line = answer_line_anywhere(getframe(1))
            if line is not None:
                record("tampering", event, line, "the guard could not inspect this event")
        finally:
            inside.discard(thread)

    class HiddenLoader(SourceFileLoader):
        """Hidden modules get one audit event at the top of every function, naming the module."""

        def get_code(self, fullname):
            path = self.get_filename(fullname)
            tree = ast.parse(self.get_data(path), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                    call = ast.Expr(ast.Call(ast.Name("__rcb_audit__", ast.Load()),
                                             [ast.Constant("rcb.hidden.call"), ast.Constant(fullname)], []))
                    node.body.insert(0, ast.fix_missing_locations(ast.copy_location(call, node.body[0])))
            return compile(tree, path, "exec", dont_inherit=True)

        def exec_module(self, module):
            module.__dict__["__rcb_audit__"] = audit
            super().exec_module(module)
            module.__class__ = WatchedModule

    class WatchedModule(ModuleType):
        """A hidden module that announces every attribute read, so `from ref import x` is seen when it is cached."""

        def __getattribute__(self, name):
            audit("rcb.hidden.call", module_get(self, "__name__"), name)
            return module_get(self, name)

    class AnswerLoader(SourceFileLoader):
        """The answer's file announces the start of the answer, so the framework is snapshotted before it runs."""

        def get_code(self, fullname):
            path = self.get_filename(fullname)
            tree = ast.parse(self.get_data(path), path)
            place = None
            for node in ast.walk(tree):
                for name in ("body", "orelse", "finalbody"):
                    block = getattr(node, name, None)
                    if not isinstance(block, list):
                        continue
                    for index, statement in enumerate(block):
                        line = getattr(statement, "lineno", 0)
                        if first <= line <= last and (place is None or line < place[2]):
                            place = (block, index, line)
            if place is not None:
                block, index, _ = place
                call = ast.Expr(ast.Call(ast.Name("__rcb_audit__", ast.Load()), [ast.Constant("rcb.answer.start")], []))
                block.insert(index, ast.fix_missing_locations(ast.copy_location(call, block[index])))
            return compile(tree, path, "exec", dont_inherit=True)

        def exec_module(self, module):
            module.__dict__["__rcb_audit__"] = audit
            super().exec_module(module)

    class HiddenFinder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            stem = name.rsplit(".", 1)[-1]
            if stem not in hidden_modules and stem != answer_stem:
                return None
            found = PathFinder.find_spec(name, path, target)
            if found is None or not found.origin or not found.origin.endswith(".py"):
                return found
            if stem in hidden_modules:
                found.loader = HiddenLoader(found.name, found.origin)
            elif realpath(found.origin) == answer:
                found.loader = AnswerLoader(found.name, found.origin)
            return found

    sys.meta_path.insert(0, HiddenFinder)
    import unittest  # noqa: the framework is in its original state here, before anything of the task ran
    # Only what a fresh interpreter has loaded now: a warm start's preloads are snapshotted when a cold one would.
    snapshot(("builtins", "unittest", "sys", "os"))
    sys.addaudithook(hook)


def _rcb_main():
    import sys, os, json
    entry, spec, report_fd, key_fd = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    key = os.read(key_fd, 256).decode()
    os.close(key_fd)
    if len(key) != 48:  # no key: the supervisor is gone, and the test must not run without it
        os._exit(70)
    _rcb_guard(spec, key, report_fd, sys._getframe(0), entry)
    del key
    import runpy, traceback
    sys.argv = [entry]
    sys.path.insert(0, os.getcwd())
    status, code = "completed", 0
    try:
        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exc:
        tb, origin = exc.__traceback__, None
        while tb is not None:
            origin, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
        normal = origin is None or os.path.basename(origin) == os.path.basename(entry) or origin.endswith(
            os.path.join("unittest", "main.py"))
        if not normal:
            status = "early-exit"
            print(f"Early exit: SystemExit({exc.code!r}) raised in {origin}, before the test finished", file=sys.stderr)
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    sys.audit("rcb.harness.finish", status, code)
    os._exit(code)


_rcb_main()
'''

# The supervisor: the only holder of the nonce; prints the completion line after the test process is gone.
SUPERVISOR_SOURCE = r'''
import base64, os, select, sys


def nondumpable():
    """No process of the same user may read this one's memory or /proc files (ptrace access needs dumpable)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception as exc:
        print(f"rcb-harness: cannot make the supervisor non-dumpable: {exc}", file=sys.stderr)


def child_in_process(entry, spec, report_w, key_r):
    """The test process of a warm start: CHILD run here as a fresh interpreter would run it, with the same argv."""
    sys.argv = ["-c", entry, spec, str(report_w), str(key_r)]
    code = 1
    try:
        exec(compile(CHILD, "<string>", "exec", dont_inherit=True), {"__name__": "__main__", "__builtins__": __builtins__})
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def main():
    entry, spec = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}"
    report_r, report_w = os.pipe()
    key_r, key_w = os.pipe()
    if globals().get("RCB_WARM"):
        # A warm start (a fork of the fork server, with its imports): the test process is a fork of this one, so it
        # is made before the nonce is read and waits for its key, which it gets once nonce and harness are gone.
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            os.close(key_w)
            child_in_process(entry, spec, report_w, key_r)
        try:
            nondumpable()
            nonce = open(".rcb-nonce").read().strip()
            os.remove(".rcb-nonce")
            os.remove(".rcb-harness.py")
            key = os.urandom(24).hex()
            os.write(key_w, key.encode())
            os.close(key_w)
        except BaseException:
            os.kill(pid, 9)
            raise
    else:
        nonce = open(".rcb-nonce").read().strip()
        os.remove(".rcb-nonce")
        os.remove(".rcb-harness.py")
        nondumpable()
        key = os.urandom(24).hex()
        os.write(key_w, key.encode())
        os.close(key_w)
        pid = os.fork()
        if pid == 0:  # a fresh interpreter: nothing of this process's memory (the nonce) reaches the test
            try:
                os.close(report_r)
                os.set_inheritable(report_w, True)
                os.set_inheritable(key_r, True)
                os.execv(sys.executable, [sys.executable, "-B", "-c", CHILD, entry, spec, str(report_w), str(key_r)])
            finally:
                os._exit(127)
    os.close(report_w)
    os.close(key_r)
    marker = b"\n" + key.encode() + b" "
    buffer, records, dropped, finish, wait_status = b"", [], 0, None, None
    while True:
        ready, _, _ = select.select([report_r], [], [], 0.05)
        chunk = os.read(report_r, 65536) if ready else b""
        buffer += chunk
        while (start := buffer.find(marker)) >= 0 and (end := buffer.find(b"\n", start + len(marker))) >= 0:
            kind, _, body = buffer[start + len(marker):end].decode("utf-8", "replace").partition(" ")
            if kind == "R":
                if len(records) < RECORDS_MAX:
                    records.append(body)
                else:
                    dropped += 1
            elif kind == "F":
                parts = body.split()
                if len(parts) == 3 and finish is None and parts[2] == str(pid) and parts[1].lstrip("-").isdigit():
                    finish = (parts[0], int(parts[1]))
            buffer = buffer[end:]
        buffer = buffer[start:][-65536:] if start >= 0 else buffer[-len(marker):]
        if wait_status is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            wait_status = status if done else None
        if ready and not chunk:  # every writer is gone
            if wait_status is None:
                wait_status = os.waitpid(pid, 0)[1]
            break
        if wait_status is not None and not ready:
            break
    os.close(report_r)
    code = os.waitstatus_to_exitcode(wait_status)
    code = code if code >= 0 else 128 - code
    if finish is None:
        status = "incomplete"
    elif finish[1] != code:
        status = "inconsistent"
    else:
        status = finish[0]
    if dropped:
        records.append(f"info\t\t\t{dropped} more record(s) dropped")
    blob = base64.b64encode("\n".join(records).encode()).decode()
    sys.stdout.flush()
    sys.stderr.flush()
    # The blob's length goes first: a line another writer cut into (over PIPE_BUF a write is not atomic) is refused.
    os.write(1, f"\n{nonce} {status} {code} {len(blob)} {blob}\n".encode())
    os._exit(code if status == "completed" else 1)


main()
'''


HARNESS_SOURCE = f"CHILD = {CHILD_SOURCE!r}\nRECORDS_MAX = {RECORDS_MAX}\n" + SUPERVISOR_SOURCE


@dataclass(frozen=True)
class GuardSpec:
    """What the runtime guard watches: the answer's lines in the spliced file, and what is hidden from it."""

    answer_file: str = ""
    first_line: int = 0
    last_line: int = -1
    hidden_modules: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()

    def as_json(self) -> str:
        return json.dumps({"answer_file": self.answer_file, "first_line": self.first_line,
                           "last_line": self.last_line, "hidden_modules": list(self.hidden_modules),
                           "hidden_files": list(self.hidden_files)})


@dataclass(frozen=True)
class HarnessVerdict:
    """Whether the test reached its end, the output with the harness line removed, and the guard's records."""

    completed: bool
    stdout: str
    reason: str
    records: tuple[dict, ...] = field(default=())


def nonce_new() -> str:
    return "rcb-done-" + secrets.token_hex(16)


def harness_files(nonce: str) -> dict[str, bytes]:
    return {NONCE_FILE: nonce.encode(), HARNESS_FILE: HARNESS_SOURCE.encode()}


def harness_command(python: str, entry_point: str, guard: GuardSpec | None = None) -> list[str]:
    return [python, "-B", HARNESS_FILE, entry_point, (guard or GuardSpec()).as_json()]


def answer_span(start_line: int, code: str) -> tuple[int, int]:
    """The 1-based lines the spliced `code` occupies after the start marker on `start_line` (empty: last < first)."""
    count = len(code.splitlines())
    return start_line + 1, start_line + count


def _records(blob: str) -> tuple[dict, ...]:
    """The guard's records, one line each: kind, event, line and detail separated by tabs."""
    try:
        text = base64.b64decode(blob, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ({"kind": "tampering", "event": "report", "line": None, "detail": "unreadable guard records"},)
    records = []
    for row in text.splitlines():
        fields = row.split("\t", 3)
        if len(fields) != 4:
            fields = ["tampering", "report", "", "unreadable guard record"]
        kind, event, line, detail = fields
        records.append({"kind": kind, "event": event, "line": int(line) if line.isdigit() else None, "detail": detail})
    return tuple(records)


def _final_line(stdout: str, nonce: str) -> re.Match | None:
    match = None
    for match in re.finditer(rf"\n{re.escape(nonce)} (\S+) (-?\d+) (\d+) ([A-Za-z0-9+/=]*)(?=\n|$)", stdout):
        pass
    return match


def harness_status(stdout: str, nonce: str) -> tuple[str, int] | None:
    """The supervisor's status and the test process's exit code (128 + signal when killed), or None."""
    match = _final_line(stdout, nonce)
    return (match.group(1), int(match.group(2))) if match else None


def harness_verdict(stdout: str, nonce: str) -> HarnessVerdict:
    """Find the supervisor's own last line; anything else means the test did not run to its end."""
    match = _final_line(stdout, nonce)
    if match is None:
        return HarnessVerdict(False, stdout, "the test did not run to its end (the process exited or was killed early)")
    cleaned = stdout[: match.start()] + stdout[match.end():]
    if len(match.group(4)) != int(match.group(3)):
        return HarnessVerdict(False, cleaned, "the harness's verdict line was cut by another writer")
    records = _records(match.group(4)) if match.group(4) else ()
    status = match.group(1)
    if status == "completed":
        return HarnessVerdict(True, cleaned, "", records)
    reasons = {"early-exit": "the code exited before the test finished",
               "incomplete": "the test did not run to its end (the process exited or was killed early)",
               "inconsistent": "the test process exited with another status than the one it reported"}
    return HarnessVerdict(False, cleaned, reasons.get(status, "the test did not run to its end"), records)
