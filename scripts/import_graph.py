"""Imports between the project's apps, read with `ast`: per (importer, imported) pair, how many imports sit at
module level and how many inside functions (the usual way around a cycle), and which pairs import each other.

    python scripts/import_graph.py            # the table, then the cycles
    python scripts/import_graph.py --modules  # also each importing module, to find the ones to move

Migrations are left out: they name other apps' migrations by design. Tests are not an app.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("config", "operations", "benchmarks", "submissions", "evaluation")


def _app_of(module: str) -> str | None:
    head = module.split(".")[0]
    return head if head in APPS else None


def _imports(path: Path):
    """(imported module, inside a function?) for every import of `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))

    def walk(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, in_function
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.module, in_function
            yield from walk(child, nested)

    yield from walk(tree, False)


def graph() -> tuple[Counter, dict]:
    """Per (importer, imported, "module" or "function"): how many imports; within one app under (app, app, ...)."""
    counts: Counter = Counter()
    modules: dict = defaultdict(set)
    for app in APPS:
        base = ROOT / app
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for module, in_function in _imports(path):
                other = _app_of(module)
                if other is None:
                    continue
                counts[(app, other, "function" if in_function else "module")] += 1
                if other != app:
                    modules[(app, other)].add(str(path.relative_to(ROOT)))
    return counts, modules


def main() -> None:
    counts, modules = graph()
    within = sum(n for (a, b, where), n in counts.items() if a == b and where == "function")
    pairs = sorted({(a, b) for a, b, _ in counts if a != b})
    print(f"{'importer':<12} {'imported':<12} {'module-level':>12} {'in functions':>12}")
    for a, b in pairs:
        print(f"{a:<12} {b:<12} {counts[(a, b, 'module')]:>12} {counts[(a, b, 'function')]:>12}")
    apps = [a for a in APPS if a != "config"]  # config sits above the apps by design
    mutual = [(a, b) for i, a in enumerate(apps) for b in apps[i + 1 :] if (a, b) in pairs and (b, a) in pairs]
    print("\napps importing each other:", ", ".join(f"{a} <-> {b}" for a, b in mutual) or "none")
    below = [a for a, b in pairs if b == "config" and a != "config"]
    print("apps importing config:", ", ".join(sorted(set(below))) or "none")
    print("imports inside functions within one app (the other way around a cycle):", within)
    print("config imports:", ", ".join(sorted({b for a, b in pairs if a == "config"})) or "nothing")
    if "--modules" in sys.argv:
        for pair in pairs:
            print(f"\n{pair[0]} -> {pair[1]}:", ", ".join(sorted(modules[pair])))


if __name__ == "__main__":
    main()
