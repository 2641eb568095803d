"""The static audit of an answer: what a genuine snippet has no reason to do, found in its syntax tree (no Django).

The answer is audited where it runs, inside the spliced file: names bound outside the snippet (`import numpy as
np` at the top of the file) resolve, and only nodes on the snippet's own lines are judged. Where a name is computed
(an import, an attribute or a path built at run time), the computed access itself is the finding: the audit cannot
know what it will reach, and a genuine snippet has no reason to hide it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Finding:
    """One thing the answer should not do: `kind` groups them (introspection, hidden, exec, tampering, exit,
    process, native, memory), `line` is the line in the spliced file."""

    kind: str
    line: int | None
    detail: str
    source: str = "static"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "line": self.line, "detail": self.detail, "source": self.source}


# Fully qualified callables and attributes, by kind.
QUALIFIED = {
    "introspection": {
        "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.monitoring",
        "sys._getframemodulename", "inspect.currentframe", "inspect.stack", "inspect.trace",
        "inspect.getouterframes", "inspect.getinnerframes", "inspect.getframeinfo", "traceback.walk_stack",
        "traceback.walk_tb", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.garbage",
        "threading.settrace", "threading.setprofile", "sys.exc_info", "sys.last_traceback", "sys.exception",
        "_thread._local",
    },
    "exec": {
        "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "builtins.globals",
        "builtins.breakpoint", "types.FunctionType", "types.CodeType", "code.interact",
        "code.InteractiveInterpreter", "marshal.loads", "pickle.loads", "runpy.run_path", "runpy.run_module",
        "importlib.import_module", "importlib.__import__", "importlib.reload", "importlib.util.spec_from_file_location",
        "importlib.util.module_from_spec", "importlib.machinery.SourceFileLoader", "imp.load_source",
        "zipimport.zipimporter",
    },
    "exit": {
        "os._exit", "os.kill", "os.killpg", "os.abort", "sys.exit", "builtins.exit", "builtins.quit",
        "_thread.interrupt_main", "signal.signal", "signal.alarm", "signal.setitimer", "signal.raise_signal",
        "signal.pthread_kill", "atexit.register", "faulthandler.dump_traceback_later",
    },
    "process": {
        "os.fork", "os.forkpty", "os.system", "os.popen", "os.execv", "os.execve", "os.execl", "os.execlp",
        "os.execvp", "os.execvpe", "os.execle", "os.execlpe", "os.spawnv", "os.spawnl", "os.posix_spawn",
        "os.posix_spawnp", "pty.spawn", "os.dup2", "os.close", "os.closerange", "os.write",
    },
    "tampering": {"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.addaudithook", "sys.audit",
                  "unittest.mock", "builtins.setattr", "builtins.delattr"},
}
# Modules whose mere import is the finding.
MODULES = {
    "ctypes": "native", "_ctypes": "native", "cffi": "native", "_cffi_backend": "native", "mmap": "native",
    "gc": None, "inspect": None, "signal": "exit", "subprocess": "process", "multiprocessing": None,
    "pty": "process", "runpy": "exec", "importlib": None, "imp": "exec", "marshal": "exec", "code": "exec",
    "codeop": "exec", "__main__": "tampering", "builtins": None, "unittest.mock": "tampering", "_thread": None,
    "posix": "process",  # os's own back end: _exit, kill, write on any descriptor without going through os
}
# Attribute names that reach frames, code or closures whatever the object.
FRAME_ATTRIBUTES = {
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame",
    "cr_frame", "ag_frame", "gi_code", "cr_code", "__code__", "__closure__", "cell_contents", "__globals__",
    "__builtins__", "__subclasses__", "__self__", "__func__", "co_consts",
}
# Roots of the test framework and its assertion helpers: assigning into them is tampering.
FRAMEWORK = ("unittest", "numpy.testing", "torch.testing", "pytest", "builtins", "sys", "os", "__main__",
             "numpy.testing._private", "doctest")
# Members of unittest's TestCase and TestResult an answer could replace through an alias the audit cannot resolve.
FRAMEWORK_MEMBERS = {
    "addFailure", "addError", "addSubTest", "addSuccess", "addSkip", "addExpectedFailure", "addUnexpectedSuccess",
    "wasSuccessful", "failureException", "failures", "errors", "fail", "startTest", "stopTest", "printErrors",
    "shouldStop", "testsRun", "_outcome", "_feedErrorsToResult", "runTests", "parseArgs", "createTests",
}
SENSITIVE_MODULES = {"sys", "gc", "inspect", "builtins", "os", "importlib", "ctypes", "unittest", "numpy.testing",
                     "torch.testing", "pytest", "signal", "traceback", "types", "runpy", "marshal"}
# What a computed attribute of these modules can reach.
COMPUTED_KIND = {"gc": "introspection", "inspect": "introspection", "sys": "introspection", "traceback": "introspection",
                 "builtins": "exec", "types": "exec", "runpy": "exec", "marshal": "exec", "importlib": "hidden",
                 "ctypes": "native", "os": "process", "signal": "exit"}
OPENERS = {"builtins.open", "io.open", "os.open", "codecs.open", "io.FileIO", "os.fdopen", "pathlib.Path.open",
           "tokenize.open", "linecache.getline", "linecache.getlines"}
PATH_READERS = {"read_text", "read_bytes", "open"}


class _Audit(ast.NodeVisitor):
    def __init__(self, *, first: int, last: int, hidden_modules: frozenset[str], hidden_names: frozenset[str]):
        self.first, self.last = first, last
        self.hidden_modules = hidden_modules
        self.hidden_names = hidden_names
        self.aliases: dict[str, str] = {}
        self.findings: list[Finding] = []

    # -- helpers

    def inside(self, node: ast.AST) -> bool:
        line = getattr(node, "lineno", None)
        return line is not None and self.first <= line <= self.last

    def flag(self, node: ast.AST, kind: str, detail: str) -> None:
        if self.inside(node):
            self.findings.append(Finding(kind, node.lineno, detail))

    def qualified(self, node: ast.AST) -> str | None:
        """`np.testing.assert_allclose` -> "numpy.testing.assert_allclose" through the file's imports."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in BUILTIN_NAMES:
                return f"builtins.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def hidden_import(self, node: ast.AST, module: str) -> None:
        parts = set(module.split("."))
        if parts & self.hidden_modules:
            self.flag(node, "hidden", f"imports {module!r}, which holds the hidden tests or reference code")

    # -- bindings (collected over the whole file first)

    def collect(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".", 1)[0]
                    self.aliases[local] = alias.name if alias.asname else alias.name.split(".", 1)[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    # -- visitors

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.import_checked(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self.import_checked(node, module)
        for alias in node.names:
            self.import_checked(node, f"{module}.{alias.name}" if module else alias.name)
            full = f"{module}.{alias.name}"
            for kind, names in QUALIFIED.items():
                if full in names:
                    self.flag(node, kind, f"imports {full}")

    def import_checked(self, node: ast.AST, module: str) -> None:
        self.hidden_import(node, module)
        for name in (module, module.split(".", 1)[0]):
            kind = MODULES.get(name)
            if kind:
                self.flag(node, kind, f"imports {name}")
                return

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FRAME_ATTRIBUTES:
            self.flag(node, "introspection", f"reaches {node.attr!r}, frames or closures a snippet has no use for")
        self.check_qualified(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.hidden_modules:
            self.flag(node, "hidden", f"names {node.id!r}, which holds the hidden tests or reference code")
        if node.id == "__builtins__":
            self.flag(node, "tampering", "reaches __builtins__")
        if node.id.startswith("__rcb"):
            self.flag(node, "tampering", f"names the harness's {node.id}")
        if node.id in BUILTIN_NAMES and node.id not in self.aliases:
            self.check_qualified(node)

    def check_qualified(self, node: ast.AST) -> None:
        name = self.qualified(node)
        if name is None:
            return
        for kind, names in QUALIFIED.items():
            if name in names or any(name.startswith(f"{q}.") for q in names if q in ("sys.modules", "unittest.mock")):
                self.flag(node, kind, f"uses {name}")
                return

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)):
            text = node.value.decode("utf-8", "replace") if isinstance(node.value, bytes) else node.value
            for name in self.hidden_names:
                if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
                    self.flag(node, "hidden", f"a string names {name!r}, which holds the hidden tests or reference code")
                    break
            # /dev/fd and /dev/std* are links into /proc/self: the same memory and descriptors by another name.
            if re.search(r"/proc\b|/dev/(fd|std)", text):
                self.flag(node, "memory", f"a string names {text[:80]!r}")
            if text in FRAME_ATTRIBUTES and text.startswith("__"):  # vars(type)["__subclasses__"] and the like
                self.flag(node, "introspection", f"a string names the attribute {text!r}")
            if "rcb-" in text or "paper2code_test" in text:
                self.flag(node, "tampering", f"a string names harness or test files: {text[:80]!r}")

    def visit_Call(self, node: ast.Call) -> None:
        name = self.qualified(node.func)
        literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
        if name in ("builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr") and node.args:
            target = self.qualified(node.args[0])
            attribute = node.args[1] if len(node.args) > 1 else None
            constant = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
            if constant and attribute.value in FRAME_ATTRIBUTES:  # type: ignore[union-attr]
                self.flag(node, "introspection", f"{name.split('.')[1]} of {attribute.value!r}")  # type: ignore
            if target and (target in SENSITIVE_MODULES or target.split(".", 1)[0] in SENSITIVE_MODULES):
                if name != "builtins.getattr" or not constant:
                    kind = COMPUTED_KIND.get(target.split(".", 1)[0], "tampering")
                    self.flag(node, kind, f"{name.split('.')[1]} on {target} with a computed or changed name")
            if name != "builtins.getattr" and name != "builtins.hasattr" and target and _framework(target):
                self.flag(node, "tampering", f"changes {target} with {name.split('.')[1]}")
        if name in OPENERS or (isinstance(node.func, ast.Attribute) and node.func.attr in PATH_READERS
                               and self.qualified(node.func.value) is None and _path_call(node.func.value)):
            if name in OPENERS and not literal:
                self.flag(node, "hidden", f"{name} of a computed path")
        if name in ("builtins.__import__", "importlib.import_module") and not literal:
            self.flag(node, "hidden", f"{name} of a computed module name")
        if name in ("builtins.__import__", "importlib.import_module") and literal:
            self.hidden_import(node, str(node.args[0].value))  # type: ignore[attr-defined]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("__setattr__", "__delattr__", "__setitem__"):
            self.flag(node, "tampering", f"calls {node.func.attr} directly")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.assigned(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assigned(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.assigned(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.assigned(target, node)
        self.generic_visit(node)

    def assigned(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assigned(element, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = self.qualified(target.value)
            if root and _framework(root):
                self.flag(node, "tampering", f"replaces part of {root}, the test framework or its assertion helpers")
            elif isinstance(target, ast.Attribute) and root is None and (
                    target.attr.startswith("assert") or target.attr in FRAMEWORK_MEMBERS) \
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                self.flag(node, "tampering", f"replaces {target.attr!r}, a part of the test framework")
            elif isinstance(target, ast.Attribute) and target.attr in ("__class__", "__dict__", "__code__",
                                                                      "__bases__", "__globals__"):
                self.flag(node, "tampering", f"assigns {target.attr}")


def _framework(name: str) -> bool:
    return any(name == root or name.startswith(f"{root}.") for root in FRAMEWORK)


def _path_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Path"


BUILTIN_NAMES = frozenset({
    "exec", "eval", "compile", "__import__", "globals", "open", "getattr", "setattr", "delattr",
    "hasattr", "exit", "quit", "breakpoint",
})


def answer_audit(*, source: str, first_line: int, last_line: int, hidden_modules: Iterable[str] = (),
                 hidden_files: Iterable[str] = ()) -> list[Finding]:
    """Findings on lines first_line..last_line of the spliced file `source`; a file that does not parse has none
    (its test fails on the syntax error)."""
    if last_line < first_line:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    except (RecursionError, MemoryError):
        return [Finding("tampering", first_line, "the answer is nested too deeply to be audited")]
    modules = frozenset(hidden_modules)
    names = frozenset(modules | {PurePosixPath(path).name for path in hidden_files})
    audit = _Audit(first=first_line, last=last_line, hidden_modules=modules, hidden_names=names)
    audit.collect(tree)
    try:
        audit.visit(tree)
    except RecursionError:
        # An unauditable answer must not become an infrastructure error (never scored): it is flagged instead.
        return [Finding("tampering", first_line, "the answer is nested too deeply to be audited")]
    unique: dict[tuple, Finding] = {}
    for finding in audit.findings:
        unique.setdefault((finding.kind, finding.line, finding.detail), finding)
    return sorted(unique.values(), key=lambda f: (f.line or 0, f.kind, f.detail))
