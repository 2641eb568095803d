# The sealed replay's replayer (evaluation/judging/sealed.py): in a work folder that holds the task's files minus
# the hidden ones (no test, no reference copy, no recorded output) and the answer spliced into its file, calls each
# recorded call's function on its recorded inputs and writes what it returned and its arguments' state as data
# (snapshot.py's format). A program run inside the sandbox after snapshot.py's source, never imported.

import base64, importlib, importlib.util, json, pickle, random, sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # snapshot.py's source comes before this program's in the sandbox
    from sandbox.programs.snapshot import dumps, snapshot_roots


def rng_restore(state):
    random.setstate(state["random"])
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])
    if "torch" in state:
        sys.modules["torch"].set_rng_state(state["torch"])


def module_load(path):
    """The module of a task file, imported as the task's own code imports it (a dotted name from the work folder),
    else from its path."""
    name = path[:-3].replace("/", ".")
    if name.endswith(".__init__"):
        name = name[: -len(".__init__")]
    try:
        return importlib.import_module(name)
    except ImportError:
        spec = importlib.util.spec_from_file_location(name.rsplit(".", 1)[-1], path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


def function_find(module, qualname):
    """The function a qualified name names, as its class holds it (a static or class method's own function)."""
    owner, parts = module, qualname.split(".")
    for part in parts[:-1]:
        owner = vars(owner)[part]
    found = vars(owner)[parts[-1]]
    return found.__func__ if isinstance(found, (staticmethod, classmethod)) else found


def main():
    spec = json.loads(sys.argv[1])
    sys.path.insert(0, ".")
    with open(spec["inputs"], "rb") as handle:
        inputs = json.load(handle)
    caps = spec["snapshot"]
    report: dict[str, Any] = {"v": 1, "targets": {}}
    for target in spec["targets"]:
        key, results = target["key"], []  # type: tuple[str, list[dict[str, str]]]
        report["targets"][key] = results
        try:
            function = function_find(module_load(target["file"]), target["qualname"])
        except BaseException as exc:
            results.append({"error": f"cannot load {target['qualname']}: {type(exc).__name__}: {exc}"[:500]})
            continue
        for blob in inputs.get(key, ()):
            try:
                positional, keyword, state = pickle.loads(base64.b64decode(blob))
                rng_restore(state)
            except BaseException as exc:
                results.append({"error": f"cannot load the recorded inputs: {type(exc).__name__}: {exc}"[:500]})
                continue
            try:
                returned = function(*positional, **keyword)
            except BaseException as exc:
                results.append({"error": f"raised {type(exc).__name__}: {exc}"[:500]})
                continue
            roots = {"return": returned, "args": positional, "kwargs": keyword}
            results.append({"outputs": dumps(snapshot_roots(roots, **caps)).decode("ascii")})
    encoded = base64.b64encode(json.dumps(report).encode()).decode("ascii")
    sys.stdout.flush()
    sys.stdout.write(f"\n{spec['mark']} {encoded}\n")
    sys.stdout.flush()


main()
