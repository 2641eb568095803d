"""The runtime guard's module-rebinding check, its cost per item (docs/EVALUATING.md, Module rebinding at runtime).

In this interpreter, with PACKAGES imported (e.g. numpy, or torch and torch.optim from a --target folder on
PYTHONPATH), the operations sandbox/programs/child.py runs: the baseline at the answer's start (each watched module's
namespace copied and its values held) and one check (every watched namespace's values compared by identity), the
check both as the guard does it (operator.is_ over one chained list: one C loop) and as a list of ids per module
(the first version, kept as the baseline of this measure). Every module loaded is watched (the guard watches only
the packages the task's code imports: an upper bound). Prints ms (median of --repeat) and the ratio, with the load.
An item pays one baseline and one check per test boundary and per call of the reference that follows the answer's.

--lazy MODULE...: modules the task imports only inside a function, which the guard now imports at the answer's start
(GuardSpec.imports) so that they are watched: their import's cost (paid once by a cold item that would not have
imported them before the answer; a warm item finds them preloaded by the fork server) and the baseline and check
with them watched too. With numpy loaded, the read and comparison of numpy's error state (np.seterr and
np.seterrcall) that each check adds. Last, under an audit hook that returns at once as the guard's does for a
read it is inside of (reading `__kwdefaults__` is audited), the keyword defaults of every function kept: read once
per item, and compared at each check (attack13: a defaults dict changed in place).

Run: PYTHONPATH=/tmp/calib-site .venv/bin/python scripts/bench_module_rebinding.py torch torch.optim [--repeat 200]
     .venv/bin/python scripts/bench_module_rebinding.py numpy --lazy scipy.special statistics
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from itertools import chain, compress, repeat
from operator import is_
from types import FunctionType, ModuleType

UNWATCHED = {"builtins", "sys", "os", "unittest", "warnings", "__main__", "__mp_main__"}


def functions_walk(spaces: list[dict]) -> dict[int, object]:
    """The functions child.py keeps by identity (its functions_keep, the same C loops): bound in a namespace, or
    one step from it (a numpy dispatcher's `_implementation`, a function's own function attributes, the methods of
    a class defined in the package)."""
    dispatcher = getattr(sys.modules.get("numpy._core._multiarray_umath"), "_ArrayFunctionDispatcher", None)
    kept: dict[int, object] = {}

    others = frozenset((staticmethod, classmethod, property, dispatcher, type))

    def keep(values: list, top: str | None) -> None:
        reached = list(compress(values, map(is_, map(type, values), repeat(FunctionType))))
        with_attributes = compress(reached, map(len, map(vars, reached)))
        reached.extend([v for f in with_attributes for v in list(vars(f).values())])
        for value in compress(values, map(others.__contains__, map(type, values))):
            kind = type(value)
            if kind is staticmethod or kind is classmethod:
                reached.append(value.__func__)
            elif kind is property:
                reached.extend((value.fget, value.fset, value.fdel))
            elif kind is dispatcher:
                reached.append(value._implementation)
            elif kind is type and top is not None and id(value) not in kept:
                kept[id(value)] = value
                owner = vars(value).get("__module__")
                if type(owner) is str and owner.partition(".")[0] == top:
                    keep(list(vars(value).values()), None)
        functions = list(compress(reached, map(is_, map(type, reached), repeat(FunctionType))))
        kept.update(zip(map(id, functions), functions, strict=True))

    for space in spaces:
        keep(list(space.values()), str(space.get("__name__", "")).partition(".")[0])
    return kept


def median_ms(run, repeat: int, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        run()
        times.append(clock() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=["numpy"])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--lazy", nargs="*", default=[], help="modules the task imports only inside a function")
    args = parser.parse_args()
    for name in args.packages:
        importlib.import_module(name)
    functions = measure(args.packages, args.repeat)
    if args.lazy:
        start = time.perf_counter()
        for name in args.lazy:
            importlib.import_module(name)
        print(f"\nimporting {' '.join(args.lazy)} at the answer's start: {1000 * (time.perf_counter() - start):.1f} ms")
        functions = measure([*args.packages, *args.lazy], args.repeat)
    if "numpy" in sys.modules:
        from numpy._core._multiarray_umath import _get_extobj_dict  # type: ignore[import-not-found]

        baseline = tuple(_get_extobj_dict().items())

        def error_state_unchanged():
            now = dict(_get_extobj_dict().items())
            return all(now.get(key) is value or now.get(key) == value for key, value in baseline)

        assert error_state_unchanged()
        print(f"numpy error state, read and compared: {1000 * median_ms(error_state_unchanged, args.repeat):7.2f} us")
    kwdefaults_measure(functions, args.repeat)


def kwdefaults_measure(functions: dict[int, object], repeat: int) -> None:
    """The keyword defaults of the functions kept, read (each read audited) and compared as child.py does."""
    watched, inside = frozenset(("object.__getattr__", "object.__setattr__")), {0}

    def hook(event, args):  # the guard's own first steps before it returns for a read it is inside of
        if type(event) is not str or event not in watched:
            return
        if 0 in inside:
            return

    sys.addaudithook(hook)
    read = vars(FunctionType)["__kwdefaults__"].__get__
    kept = [f for f in functions.values() if type(f) is FunctionType]
    held = [d for d in map(read, kept) if type(d) is dict]
    keys = list(chain.from_iterable(map(dict.keys, held)))
    values = list(chain.from_iterable(map(dict.values, held)))

    def compare():
        return (
            sum(map(len, held)) == len(values)
            and all(map(is_, chain.from_iterable(map(dict.values, held)), values))
            and all(map(is_, chain.from_iterable(map(dict.keys, held)), keys))
        )

    assert compare()
    reading, reading_cpu = (
        median_ms(lambda: list(map(read, kept)), repeat, clock=c) for c in (time.perf_counter, time.process_time)
    )
    print(f"keyword defaults: {len(held)} of {len(kept)} functions have them, {len(values)} values held")
    print(f"  read (once per item, audited):     {reading:7.2f} ms ({reading_cpu:.2f} ms of CPU)")
    print(f"  compare (each check):              {1000 * median_ms(compare, repeat):7.2f} us")


def measure(packages: list[str], repeat: int) -> dict[int, object]:
    namespace_of = vars(ModuleType)["__dict__"].__get__
    spaces = [
        namespace_of(module)
        for name, module in list(sys.modules.items())
        if isinstance(module, ModuleType) and name.partition(".")[0] not in UNWATCHED
    ]

    def baseline():
        return [(dict.copy(space), list(dict.values(space))) for space in spaces]

    held = [values for _, values in baseline()]
    ids = [list(map(id, values)) for values in held]
    flat = list(chain.from_iterable(held))

    def check_ids():
        return all(len(s) == len(i) and list(map(id, dict.values(s))) == i for s, i in zip(spaces, ids, strict=True))

    def check_identity():
        return sum(map(len, spaces)) == len(flat) and all(map(is_, chain.from_iterable(map(dict.values, spaces)), flat))

    assert check_ids() and check_identity()
    base, by_ids, by_identity = (median_ms(run, repeat) for run in (baseline, check_ids, check_identity))
    functions = functions_walk(spaces)
    walk = median_ms(lambda: functions_walk(spaces), repeat)
    # On a loaded machine a walk of some ms is descheduled midway: its CPU time is the cost it adds.
    walk_cpu = median_ms(lambda: functions_walk(spaces), repeat, clock=time.process_time)
    print(
        f"{' '.join(packages)}: {len(spaces)} modules, {len(flat)} names watched; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"baseline (once per item):            {base:7.2f} ms")
    print(f"check, a list of ids per module:     {by_ids:7.2f} ms")
    print(f"check, identity in one C loop:       {by_identity:7.2f} ms ({by_ids / by_identity:.1f}x cheaper)")
    count = sum(type(f) is FunctionType for f in functions.values())
    print(f"function state: {count} functions kept by identity (code and defaults compared as assigned)")
    print(
        f"  walk (once per item):              {walk:7.2f} ms ({walk_cpu:.2f} ms of CPU); "
        "an assignment: one dict look-up in the hook"
    )
    return functions


if __name__ == "__main__":
    main()
