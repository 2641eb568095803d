# The sealed replay's recorder (evaluation/judging/sealed.py): runs a task's tests with its reference in place and
# records every call of each snippet's enclosing function: its arguments at entry (pickled, with the global
# generators' states, and the names of their dict keys and attributes as data: snapshot.entry_names), and what it
# returned and its arguments' state at exit (as data, snapshot.py's format). A program run inside the sandbox after
# snapshot.py's source, never imported. Standard library only.

import base64, copyreg, io, json, pickle, pickletools, random, sys, threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # snapshot.py's and attributes.py's sources come before this program's in the sandbox
    from sandbox.programs.attributes import attributes_set
    from sandbox.programs.snapshot import dumps, entry_names, snapshot_roots

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08
CO_UNREPLAYABLE = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator


def rng_state():
    """The global generators' states: Python's, and numpy's and torch's when the task loaded them."""
    state = {"random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        state["torch"] = torch.get_rng_state()
    return state


class InputPickler(pickle.Pickler):
    """Pickles a call's inputs as the standard pickler does, except where a library's own reduction leaves out what
    the reference's objects hold: a torch tensor keeps its gradient (torch drops `.grad`, which an optimizer's step
    reads: a replay would see None), and an object whose class has its own __getstate__ or __setstate__ keeps its
    whole attribute dict, set back as it was (torch's Optimizer drops a warn-once flag in __getstate__ and adds a
    "differentiable" default in __setstate__: the reference's own replay never agreed with its recording)."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor):
            return tensor_with_grad(torch, obj)
        return attributes_whole(obj)


def tensor_with_grad(torch, obj):
    if getattr(obj, "grad", None) is None:
        return NotImplemented
    if isinstance(obj, torch.nn.Parameter):  # torch's own rebuilder: the state is set as attributes
        return (torch._utils._rebuild_parameter_with_state, (obj.data, obj.requires_grad, {}, {"grad": obj.grad}))
    rebuild, arguments = obj.detach().requires_grad_(obj.requires_grad).__reduce_ex__(4)[:2]
    return (torch._tensor._rebuild_from_type_v2, (rebuild, type(obj), arguments, {"grad": obj.grad}))


def attributes_whole(obj):
    """The standard reduction of an object whose class has its own __getstate__ or __setstate__ (and neither its own
    __reduce__ nor slots), its state its whole attribute dict, set by attributes.py's setter instead of the class's
    __setstate__; NotImplemented (the standard reduction) for any other object, and for one holding an attribute its
    __getstate__ left out that cannot be pickled (a lock it makes afresh on unpickling)."""
    cls: Any = type(obj)  # its own or object's methods, compared by identity
    if (
        isinstance(obj, type)
        or cls in copyreg.dispatch_table
        or cls.__reduce_ex__ is not object.__reduce_ex__
        or cls.__reduce__ is not object.__reduce__
        or (cls.__getstate__ is object.__getstate__ and not hasattr(cls, "__setstate__"))
        or not isinstance(getattr(obj, "__dict__", None), dict)
        or copyreg._slotnames(cls)  # type: ignore[attr-defined]  # slots hold state the dict does not
    ):
        return NotImplemented
    reduced = obj.__reduce_ex__(4)
    if not isinstance(reduced, tuple) or len(reduced) < 2:
        return NotImplemented
    attributes = dict(vars(obj))
    state = reduced[2] if len(reduced) > 2 and isinstance(reduced[2], dict) else {}
    try:
        for name, value in attributes.items():
            if name not in state or state[name] is not value:
                InputPickler(io.BytesIO(), protocol=4).dump(value)
    except Exception:
        return NotImplemented
    rest = (*reduced[3:5], None, None)[:2]
    return (reduced[0], reduced[1], attributes, *rest, attributes_set)


def inputs_pickle(value):
    buffer = io.BytesIO()
    InputPickler(buffer, protocol=4).dump(value)
    return buffer.getvalue()


def call_arguments(frame):
    """The arguments a function was called with, from its frame at entry: (positional, keyword)."""
    code, local = frame.f_code, frame.f_locals
    names, count, kwonly = code.co_varnames, code.co_argcount, code.co_kwonlyargcount
    positional = [local[name] for name in names[:count]]
    keyword = {name: local[name] for name in names[count : count + kwonly]}
    at = count + kwonly
    if code.co_flags & CO_VARARGS:
        positional += list(local[names[at]])
        at += 1
    if code.co_flags & CO_VARKEYWORDS:
        keyword.update(local[names[at]])
    return positional, keyword


def pickled_modules(blob):
    """The modules a pickle's classes and functions come from."""
    modules, strings = set(), []
    for opcode, arg, _ in pickletools.genops(blob):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
            modules.add(strings[-2])
        elif opcode.name in ("GLOBAL", "INST") and isinstance(arg, str):
            modules.add(arg.split(" ", 1)[0])
    return modules


class Recorder:
    def __init__(self, spec):
        self.spec = spec
        self.by_line: dict[int, list[dict[str, Any]]] = {}
        for target in spec["targets"]:
            self.by_line.setdefault(target["line"], []).append(target)
        self.hidden = set(spec["hidden_modules"])
        self.caps = spec["snapshot"]
        self.records: dict[str, dict[str, Any]] = {
            t["key"]: {"calls": [], "called": 0, "bytes": 0, "problems": []} for t in spec["targets"]
        }
        self.tolerance = {"rtol": 0.0, "atol": 0.0, "seen": 0}
        self.lock = threading.Lock()

    def target_of(self, code):
        for target in self.by_line.get(code.co_firstlineno, ()):
            filename = code.co_filename.replace("\\", "/")
            if code.co_name == target["name"] and (
                filename == target["file"] or filename.endswith("/" + target["file"])
            ):
                return target
        return None

    def trace(self, frame, event, arg):
        target = self.target_of(frame.f_code)
        if target is None:
            return None
        return self.entered(frame, target)

    def entered(self, frame, target):
        record = self.records[target["key"]]
        with self.lock:
            record["called"] += 1
            if len(record["calls"]) >= self.spec["max_calls"]:
                return None
        if frame.f_code.co_flags & CO_UNREPLAYABLE:
            record["problems"].append("its function is a generator or coroutine")
            return None
        positional, keyword = call_arguments(frame)
        try:
            blob = inputs_pickle((positional, keyword, rng_state()))
        except Exception as exc:
            record["problems"].append(f"its arguments cannot be recorded: {type(exc).__name__}: {exc}"[:300])
            return None
        reached = sorted(m for m in pickled_modules(blob) if m.split(".")[0] in self.hidden or m == "__main__")
        if reached:
            record["problems"].append(f"an input reaches a hidden module ({', '.join(reached)})")
            return None
        if record["bytes"] + len(blob) > self.spec["max_bytes"]:
            record["problems"].append(f"its recorded inputs would pass {self.spec['max_bytes']} bytes")
            return None
        record["bytes"] += len(blob)
        try:
            names = entry_names({"args": positional, "kwargs": keyword}, **self.caps)
        except Exception:
            names = None  # no names: the replay tolerates no extra entry of this call
        entry = None if names is None else json.dumps(names, separators=(",", ":"), ensure_ascii=True)
        call: dict[str, Any] = {"inputs": blob, "raised": False, "entry": entry}
        record["calls"].append(call)
        frame.f_trace_lines = False  # only this frame's exception and return events

        def local(frame, event, arg):
            if event == "exception":
                call["raised"] = True  # perhaps caught inside: such a call is not replayed
            elif event == "return":
                roots = {"return": arg, "args": positional, "kwargs": keyword}
                call["outputs"] = dumps(snapshot_roots(roots, **self.caps)).decode("ascii")
            return local

        return local

    def tolerance_seen(self, rtol, atol):
        with self.lock:
            self.tolerance["rtol"] = max(self.tolerance["rtol"], float(rtol or 0.0))
            self.tolerance["atol"] = max(self.tolerance["atol"], float(atol or 0.0))
            self.tolerance["seen"] += 1

    def report(self):
        out: dict[str, Any] = {"v": 1, "tolerance": self.tolerance, "targets": {}}
        for key, record in self.records.items():
            calls = [
                {"inputs": base64.b64encode(c["inputs"]).decode("ascii"), "outputs": c["outputs"], "entry": c["entry"]}
                for c in record["calls"]
                if "outputs" in c and not c["raised"]
            ]
            out["targets"][key] = {"calls": calls, "called": record["called"], "problems": record["problems"][:5]}
        return out


def tolerances_watch(recorder):
    """Record the loosest tolerance the paper's own assertions use (explicit arguments, else each helper's default)."""
    import math, unittest

    def wrap(owner, name, defaults, positions=()):
        original = getattr(owner, name, None)
        if original is None:
            return

        def watched(*args, **kwargs):
            values = dict(defaults)
            for index, key in positions:
                if len(args) > index:
                    values[key] = args[index]
            values.update({k: v for k, v in kwargs.items() if k in ("rtol", "atol", "rel_tol", "abs_tol")})
            try:
                rtol, atol = values.get("rtol", values.get("rel_tol")), values.get("atol", values.get("abs_tol"))
                recorder.tolerance_seen(rtol, atol)
            except (TypeError, ValueError):
                pass
            return original(*args, **kwargs)

        try:
            setattr(owner, name, watched)
        except (AttributeError, TypeError):
            pass

    wrap(math, "isclose", {"rel_tol": 1e-9, "abs_tol": 0.0})

    def almost(self, first, second, places=None, msg=None, delta=None):
        recorder.tolerance_seen(0.0, delta if delta is not None else 0.5 * 10.0 ** -(7 if places is None else places))
        return original_almost(self, first, second, places=places, msg=msg, delta=delta)

    original_almost = unittest.TestCase.assertAlmostEqual
    unittest.TestCase.assertAlmostEqual = almost  # type: ignore[method-assign]  # recording its tolerance
    try:
        import numpy, numpy.testing
    except ImportError:
        pass
    else:
        wrap(numpy.testing, "assert_allclose", {"rtol": 1e-7, "atol": 0.0}, [(2, "rtol"), (3, "atol")])
        wrap(numpy, "allclose", {"rtol": 1e-5, "atol": 1e-8}, [(2, "rtol"), (3, "atol")])
        wrap(numpy, "isclose", {"rtol": 1e-5, "atol": 1e-8}, [(2, "rtol"), (3, "atol")])
    try:
        import torch, torch.testing
    except ImportError:
        pass
    else:
        wrap(torch, "allclose", {"rtol": 1e-5, "atol": 1e-8}, [(2, "rtol"), (3, "atol")])
        wrap(torch, "isclose", {"rtol": 1e-5, "atol": 1e-8}, [(2, "rtol"), (3, "atol")])
        close = torch.testing.assert_close
        # assert_close's defaults follow the dtype: bfloat16 allows 1.6e-2 where float32 allows 1.3e-6.
        by_dtype: dict[Any, tuple[float, float]] = {
            torch.float16: (1e-3, 1e-5),
            torch.bfloat16: (1.6e-2, 1e-5),
            torch.float32: (1.3e-6, 1e-5),
            torch.float64: (1e-7, 1e-7),
        }

        def assert_close(actual, expected, *args, **kwargs):
            rtol, atol = by_dtype.get(getattr(actual, "dtype", None), (1.3e-6, 1e-5))
            recorder.tolerance_seen(kwargs.get("rtol", rtol), kwargs.get("atol", atol))
            return close(actual, expected, *args, **kwargs)

        torch.testing.assert_close = assert_close


def main():
    entry, spec = sys.argv[1], json.loads(sys.argv[2])
    recorder = Recorder(spec)
    tolerances_watch(recorder)
    sys.argv = [entry]
    sys.path.insert(0, ".")
    threading.settrace(recorder.trace)
    sys.settrace(recorder.trace)
    code = 0
    try:
        import runpy

        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.settrace(None)
        threading.settrace(None)
    report = base64.b64encode(json.dumps(recorder.report()).encode()).decode("ascii")
    sys.stdout.flush()
    sys.stdout.write(f"\n{spec['mark']} {code} {report}\n")
    sys.stdout.flush()


main()
