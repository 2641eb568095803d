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
np.seterrcall) that each check adds.

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
from itertools import chain
from operator import is_
from types import ModuleType

UNWATCHED = {"builtins", "sys", "os", "unittest", "warnings", "__main__", "__mp_main__"}


def median_ms(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=["numpy"])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--lazy", nargs="*", default=[], help="modules the task imports only inside a function")
    args = parser.parse_args()
    for name in args.packages:
        importlib.import_module(name)
    measure(args.packages, args.repeat)
    if args.lazy:
        start = time.perf_counter()
        for name in args.lazy:
            importlib.import_module(name)
        print(f"\nimporting {' '.join(args.lazy)} at the answer's start: {1000 * (time.perf_counter() - start):.1f} ms")
        measure([*args.packages, *args.lazy], args.repeat)
    if "numpy" in sys.modules:
        from numpy._core._multiarray_umath import _get_extobj_dict  # type: ignore[import-not-found]

        baseline = tuple(_get_extobj_dict().items())

        def error_state_unchanged():
            now = dict(_get_extobj_dict().items())
            return all(now.get(key) is value or now.get(key) == value for key, value in baseline)

        assert error_state_unchanged()
        print(f"numpy error state, read and compared: {1000 * median_ms(error_state_unchanged, args.repeat):7.2f} us")


def measure(packages: list[str], repeat: int) -> None:
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
    print(
        f"{' '.join(packages)}: {len(spaces)} modules, {len(flat)} names watched; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"baseline (once per item):            {base:7.2f} ms")
    print(f"check, a list of ids per module:     {by_ids:7.2f} ms")
    print(f"check, identity in one C loop:       {by_identity:7.2f} ms ({by_ids / by_identity:.1f}x cheaper)")


if __name__ == "__main__":
    main()
