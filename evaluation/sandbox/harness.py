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

- The harness counts the tests itself (FORMAT.md 7.5). Before the task's code runs, `unittest.main` becomes a
  TestProgram whose runTests uses a result object defined in the guard's closure (no framework name leads to it):
  it wraps each test's method on its instance to learn whether the body returned, and sends a record per test over
  the same pipe, keyed: `S id` as it starts, `E id outcome returned sub-tests detail` as it ends. The supervisor
  keeps them and prints them beside the guard's records; a test that started and never ended is `unfinished`.
  What a pass needs of them (the task's test manifest) is decided outside, in evaluation/outcomes.py. At every test
  boundary the framework and comparison libraries are compared with their snapshot, not only at the finish.

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
# Most tests one run reports (a row each, with a failing test's traceback tail); more end the run as not counted.
TESTS_MAX = 2000
# Most failing tests whose traceback tail a run reports (the rest are named, without it).
DETAILS_MAX = 20

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
    state = {"finished": False, "started": False, "sent": 0, "test_globals": None, "reported": set()}
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
                 # What the assertion helpers call: numpy's core and linear algebra, torch's functions.
                 ("numpy", None), ("numpy._core.numeric", None), ("numpy.core.numeric", None),
                 ("numpy._core.fromnumeric", None), ("numpy.linalg", None), ("torch", None),
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
        # logging.currentframe is `lambda: sys._getframe(1)`: called by the answer it hands the answer a frame; called
        # by logging's own findCaller (an answer that logs) the next frame is logging's, which is no evidence.
        if look_through and frame is not None and frame.f_code.co_name == "<lambda>" \
                and str_.endswith(str_.__str__(frame.f_code.co_filename), "/logging/__init__.py"):
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
            if name not in state["reported"]:
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
    import unittest.case, unittest.suite, unittest.runner, traceback, time, warnings
    from types import MethodType
    # The harness counts the tests itself (FORMAT.md 7.5): the entry's unittest.main runs them with the result object
    # below, which lives only in this closure (no framework name leads to it), was made before the answer ran, and
    # reports every test over the guarded channel as it starts and as it ends.
    TestProgram, TextTestResult, Writeln = unittest.main, unittest.runner.TextTestResult, unittest.runner._WritelnDecorator
    SubTest, ErrorHolder = unittest.case._SubTest, unittest.suite._ErrorHolder
    format_exception, perf_counter, object_get, type_get = (traceback.format_exception, time.perf_counter,
                                                            object.__getattribute__, type.__getattribute__)
    catch_warnings, simplefilter, filterwarnings = warnings.catch_warnings, warnings.simplefilter, warnings.filterwarnings
    tests = {}
    DETAIL_MAX = 1500
    # Worst first: a test's outcome is the worst of what happened to it (setUp, body, sub-tests, tearDown).
    OUTCOMES = ("error", "failed", "unexpected success", "skipped", "expected failure", "passed")

    def field(value, limit=500):
        value = value if type_(value) is str_ else "?"
        value = value[-limit:]
        return str_.replace(str_.replace(str_.replace(value, "\\", "\\\\"), "\t", "\\t"), "\n", "\\n")

    def test_name(test):
        kind = type_(test)
        if kind is ErrorHolder:  # a setUpClass/setUpModule failure, which has no test of its own
            return "fixture " + field(object_get(test, "description"))
        if kind is SubTest:
            test = object_get(test, "test_case")
            kind = type_(test)
        module, name = vars_(kind).get("__module__"), object_get(test, "_testMethodName")
        return ".".join((field(module), field(type_get(kind, "__qualname__")), field(name)))

    def entry_of(test):
        name = test_name(test)
        entry = tests.get(name)
        if entry is None:
            entry = tests[name] = {"events": [], "returned": False, "subtests": [0, 0], "detail": "", "runs": 0}
        return name, entry

    def outcome_of(entry):
        return next((kind for kind in OUTCOMES if kind in entry["events"]), "no outcome")

    def clean(entry):
        return (outcome_of(entry) in ("skipped", "expected failure") or
                (outcome_of(entry) == "passed" and entry["returned"] and entry["subtests"][0] == entry["subtests"][1]))

    def report(name, entry):
        passed, total = entry["subtests"]
        send("T E\t" + "\t".join((name, outcome_of(entry), "1" if entry["returned"] else "0",
                                   int_.__repr__(passed) + "/" + int_.__repr__(total), field(entry["detail"], DETAIL_MAX))))

    def explain(err):
        try:
            return "".join(format_exception(*err))[-DETAIL_MAX:]
        except BaseException:
            return "(the exception could not be formatted)"

    def boundary(where):
        """The framework and comparison libraries compared with their snapshot at every test boundary: a helper
        replaced for some tests and put back before the finish is seen at the first boundary it outlives."""
        for name in replaced():
            if name not in state["reported"]:
                state["reported"].add(name)
                record("tampering", "replaced", None, name + " was replaced (seen at " + where + ")")

    def watch_body(test, entry):
        """The test's method, wrapped on its instance: only a body that returns sets `returned`."""
        try:
            name = object_get(test, "_testMethodName")
            original = getattr(test, name)
        except Exception:
            return  # TestCase.run meets the same problem and reports it as the test's error
        function = original.__func__ if type_(original) is MethodType else None
        if type_(function) is FunctionType and function.__code__.co_flags & 0x80:  # CO_COROUTINE: an async test
            async def body(*args, **kwargs):
                value = await original(*args, **kwargs)
                entry["returned"] = True
                return value
        else:
            def body(*args, **kwargs):
                value = original(*args, **kwargs)
                entry["returned"] = True
                return value
        for attribute in ("__unittest_skip__", "__unittest_skip_why__", "__unittest_expecting_failure__"):
            try:
                setattr(body, attribute, getattr(original, attribute))
            except AttributeError:
                pass
        vars_(test)[name] = body

    class Counted:
        """The result object of the harness's own; it forwards to a TextTestResult only to print as unittest does.
        Its slots are the fields unittest sets: a method replaced on the instance (`result.addFailure = ...`) has no
        place to go, and one replaced on the class is seen against `counted_methods` at the finish."""

        __slots__ = ("printer", "failfast", "shouldStop", "buffer", "tb_locals", "_testRunEntered",
                     "_previousTestClass", "_moduleSetUpFailed", "testsRun")

        def __init__(self, printer, failfast):
            self.printer, self.failfast, self.shouldStop, self.buffer, self.tb_locals = printer, failfast, False, False, False
            self._testRunEntered, self._previousTestClass, self._moduleSetUpFailed = False, None, False
            self.testsRun = 0

        def forward(self, method, *args):
            try:
                getattr(self.printer, method)(*args)
            except Exception:
                pass  # the printed text only; the records decide

        def note(self, test, event, detail=""):
            name, entry = entry_of(test)
            entry["events"].append(event)
            if detail and not entry["detail"]:
                entry["detail"] = detail
            if type_(test) is ErrorHolder:
                report(name, entry)

        def startTest(self, test):
            self.testsRun += 1
            name, entry = entry_of(test)
            entry["runs"] += 1
            entry["returned"] = False
            send("T S\t" + name)
            boundary("the start of " + name)
            watch_body(test, entry)
            self.forward("startTest", test)

        def stopTest(self, test):
            name, entry = entry_of(test)
            report(name, entry)
            boundary("the end of " + name)
            self.forward("stopTest", test)

        def addSuccess(self, test):
            self.note(test, "passed")
            self.forward("addSuccess", test)

        def addFailure(self, test, err):
            self.note(test, "failed", explain(err))
            self.shouldStop = self.shouldStop or self.failfast
            self.forward("addFailure", test, err)

        def addError(self, test, err):
            self.note(test, "error", explain(err))
            self.shouldStop = self.shouldStop or self.failfast
            self.forward("addError", test, err)

        def addSkip(self, test, reason):
            self.note(test, "skipped", "skipped: " + field(reason if type_(reason) is str_ else "?"))
            self.forward("addSkip", test, reason)

        def addExpectedFailure(self, test, err):
            self.note(test, "expected failure")
            self.forward("addExpectedFailure", test, err)

        def addUnexpectedSuccess(self, test):
            self.note(test, "unexpected success")
            self.shouldStop = self.shouldStop or self.failfast
            self.forward("addUnexpectedSuccess", test)

        def addSubTest(self, test, subtest, err):
            _, entry = entry_of(test)
            entry["subtests"][1] += 1
            if err is None:
                entry["subtests"][0] += 1
            else:
                failure = type_(err[0]) is type_ and issubclass(err[0], object_get(test, "failureException"))
                self.note(test, "failed" if failure else "error", explain(err))
                self.shouldStop = self.shouldStop or self.failfast
            self.forward("addSubTest", test, subtest, err)

        def addDuration(self, test, elapsed):
            self.forward("addDuration", test, elapsed)

        def stop(self):
            self.shouldStop = True

        def wasSuccessful(self):
            return all(clean(entry) and entry["runs"] <= 1 for entry in tests.values())

    counted_methods = dict(vars_(Counted))

    def tests_run(program):
        """TextTestRunner.run's work and output, with the harness's own result object."""
        send("T P")
        verbosity = program.verbosity if type_(program.verbosity) is int_ else 1
        stream = Writeln(sys.stderr)
        printer = TextTestResult(stream, True, verbosity)
        result = Counted(printer, bool(program.failfast))
        with catch_warnings():
            if program.warnings:
                simplefilter(program.warnings)
                if program.warnings in ("default", "always"):
                    filterwarnings("module", category=DeprecationWarning, message=r"Please use assert\w+ instead.")
            started = perf_counter()
            program.test(result)
            taken = perf_counter() - started
        for name in sorted(set(counted_methods) | set(vars_(Counted))):
            if vars_(Counted).get(name, missing) is not counted_methods.get(name, missing):
                record("tampering", "replaced", None, "the harness's result object's " + name + " was replaced")
        result.forward("printErrors")
        stream.writeln(TextTestResult.separator2)
        stream.writeln("Ran %d test%s in %.3fs" % (result.testsRun, result.testsRun != 1 and "s" or "", taken))
        stream.writeln()
        counts = [(label, len_(getattr(printer, name, ()))) for label, name in (
            ("failures", "failures"), ("errors", "errors"), ("skipped", "skipped"),
            ("expected failures", "expectedFailures"), ("unexpected successes", "unexpectedSuccesses"))]
        ok = result.wasSuccessful()
        infos = ", ".join(f"{label}={count}" for label, count in counts if count)
        stream.write("OK" if ok else "FAILED")
        stream.writeln(f" ({infos})" if infos else "")
        stream.flush()
        program.result = result
        if program.exit:
            raise SystemExit(not ok)

    class Program(TestProgram):
        """unittest.main as the entry point calls it: parses and loads as unittest does, runs with the count above."""

        def runTests(self):
            tests_run(self)

    unittest.main = Program
    # Only what a fresh interpreter has loaded now: a warm start's preloads are snapshotted when a cold one would.
    snapshot(("builtins", "unittest", "sys", "os"))
    sys.addaudithook(hook)
    return tests_run.__code__


def _rcb_main():
    import sys, os, json
    entry, spec, report_fd, key_fd = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    key = os.read(key_fd, 256).decode()
    os.close(key_fd)
    if len(key) != 48:  # no key: the supervisor is gone, and the test must not run without it
        os._exit(70)
    counted = _rcb_guard(spec, key, report_fd, sys._getframe(0), entry)
    del key
    import runpy, traceback
    sys.argv = [entry]
    sys.path.insert(0, os.getcwd())
    status, code = "completed", 0
    try:
        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exc:
        tb, origin, code_object = exc.__traceback__, None, None
        while tb is not None:
            code_object, tb = tb.tb_frame.f_code, tb.tb_next
            origin = code_object.co_filename
        normal = origin is None or code_object is counted or os.path.basename(origin) == os.path.basename(entry) or (
            origin.endswith(os.path.join("unittest", "main.py")))
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
    state = {"buffer": b"", "finish": None, "dropped": 0, "programs": 0, "details": 0}
    records, tests, started = [], {}, []

    def parse():
        buffer = state["buffer"]
        while (start := buffer.find(marker)) >= 0 and (end := buffer.find(b"\n", start + len(marker))) >= 0:
            kind, _, body = buffer[start + len(marker):end].decode("utf-8", "replace").partition(" ")
            if kind == "R":
                if len(records) < RECORDS_MAX:
                    records.append(body)
                else:
                    state["dropped"] += 1
            elif kind == "T":
                test_message(body)
            elif kind == "F":
                parts = body.split()
                if len(parts) == 3 and state["finish"] is None and parts[2] == str(pid) and parts[1].lstrip("-").isdigit():
                    state["finish"] = (parts[0], int(parts[1]))
            buffer = buffer[end:]
        state["buffer"] = buffer[start:][-65536:] if start >= 0 else buffer[-len(marker):]

    def test_message(body):
        what, _, rest = body.partition("\t")
        if what == "P":
            state["programs"] += 1
        elif what == "S" and rest not in tests and len(started) < TESTS_MAX:
            started.append(rest)
            tests[rest] = None
        elif what == "E" and rest.count("\t") == 4 and (rest.partition("\t")[0] in tests or len(started) < TESTS_MAX):
            name = rest.partition("\t")[0]
            if name not in tests:
                started.append(name)
            if not rest.endswith("\t"):  # a detail: kept for the first DETAILS_MAX tests that have one
                state["details"] += 1
                if state["details"] > DETAILS_MAX:
                    rest = rest[:rest.rindex("\t") + 1]
            tests[name] = rest

    def read():
        chunk = os.read(report_r, 65536)
        state["buffer"] += chunk
        parse()
        return chunk

    # Until every writer is gone, or the test process is reaped and a look at the pipe after that finds nothing:
    # what it wrote before it exited is in the pipe by then, so its finish record is always read before deciding.
    wait_status = None
    while True:
        ready, _, _ = select.select([report_r], [], [], 0.05)
        if ready and not read():
            if wait_status is None:
                wait_status = os.waitpid(pid, 0)[1]
            break
        if wait_status is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            wait_status = status if done else None
        elif not ready:
            break
    os.close(report_r)
    finish = state["finish"]
    code = os.waitstatus_to_exitcode(wait_status)
    code = code if code >= 0 else 128 - code
    if finish is None:
        status = "incomplete"
    elif finish[1] != code:
        status = "inconsistent"
    else:
        status = finish[0]
    if state["dropped"]:
        records.append(f"info\t\t\t{state['dropped']} more record(s) dropped")
    blob = base64.b64encode("\n".join(records).encode()).decode()
    # One row per test: id, outcome, body returned (1/0), sub-tests passed/total, detail; a test that started and
    # never ended (the process exited during it) is "unfinished".
    rows = [f"runs\t{state['programs']}"] + [tests[name] or f"{name}\tunfinished\t0\t0/0\t" for name in started]
    counted = base64.b64encode("\n".join(rows).encode()).decode()
    sys.stdout.flush()
    sys.stderr.flush()
    # Each blob's length goes first: a line another writer cut into (over PIPE_BUF a write is not atomic) is refused.
    os.write(1, f"\n{nonce} {status} {code} {len(blob)} {blob} {len(counted)} {counted}\n".encode())
    os._exit(code if status == "completed" else 1)


main()
'''


HARNESS_SOURCE = f"CHILD = {CHILD_SOURCE!r}\nRECORDS_MAX = {RECORDS_MAX}\nTESTS_MAX = {TESTS_MAX}\nDETAILS_MAX = {DETAILS_MAX}\n" + SUPERVISOR_SOURCE


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
class CountedTest:
    """One test as the harness's own result object saw it: its id, outcome, whether its body returned normally,
    its sub-tests (passed, total) and, for a failing test, the tail of its traceback (a skip: the reason)."""

    id: str
    outcome: str  # passed, failed, error, skipped, expected failure, unexpected success, no outcome, unfinished
    returned: bool
    subtests: tuple[int, int] = (0, 0)
    detail: str = ""

    @property
    def clean(self) -> bool:
        """Passed with its body run to its end and every sub-test passed."""
        return self.outcome == "passed" and self.returned and self.subtests[0] == self.subtests[1]

    def as_dict(self) -> dict:
        return {"id": self.id, "outcome": self.outcome, "returned": self.returned, "subtests": list(self.subtests),
                "detail": self.detail}


@dataclass(frozen=True)
class HarnessVerdict:
    """Whether the test reached its end, the output with the harness line removed, the guard's records, and the
    tests the harness counted (`test_runs`: how often the entry's unittest.main ran them; 0 for other entries)."""

    completed: bool
    stdout: str
    reason: str
    records: tuple[dict, ...] = field(default=())
    tests: tuple[CountedTest, ...] = field(default=())
    test_runs: int = 0


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


def _unescape(text: str) -> str:
    return re.sub(r"\\([\\tn])", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), "\\"), text)


def _tests(blob: str) -> tuple[int, tuple[CountedTest, ...]] | None:
    """The supervisor's test rows (see SUPERVISOR_SOURCE); None when they cannot be read."""
    try:
        rows = base64.b64decode(blob, validate=True).decode("utf-8", "replace").split("\n")
    except (binascii.Error, ValueError):
        return None
    head, _, runs = rows[0].partition("\t")
    if head != "runs" or not runs.isdigit():
        return None
    tests = []
    for row in rows[1:]:
        fields = row.split("\t")
        if len(fields) != 5 or not re.fullmatch(r"\d+/\d+", fields[3]):
            return None
        passed, total = (int(n) for n in fields[3].split("/"))
        tests.append(CountedTest(_unescape(fields[0]), fields[1], fields[2] == "1", (passed, total),
                                _unescape(fields[4])))
    return int(runs), tuple(tests)


def _final_line(stdout: str, nonce: str) -> re.Match | None:
    match = None
    for match in re.finditer(rf"\n{re.escape(nonce)} (\S+) (-?\d+) (\d+) ([A-Za-z0-9+/=]*) (\d+) ([A-Za-z0-9+/=]*)"
                             r"(?=\n|$)", stdout):
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
    if len(match.group(4)) != int(match.group(3)) or len(match.group(6)) != int(match.group(5)):
        return HarnessVerdict(False, cleaned, "the harness's verdict line was cut by another writer")
    records = _records(match.group(4)) if match.group(4) else ()
    counted = _tests(match.group(6))
    if counted is None:
        return HarnessVerdict(False, cleaned, "the harness's test records are unreadable", records)
    runs, tests = counted
    status = match.group(1)
    if status == "completed":
        return HarnessVerdict(True, cleaned, "", records, tests, runs)
    reasons = {"early-exit": "the code exited before the test finished",
               "incomplete": "the test did not run to its end (the process exited or was killed early)",
               "inconsistent": "the test process exited with another status than the one it reported"}
    return HarnessVerdict(False, cleaned, reasons.get(status, "the test did not run to its end"), records, tests, runs)
