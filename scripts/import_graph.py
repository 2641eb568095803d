"""Imports between the project's apps, read with `ast`: per (importer, imported) pair, how many imports sit at
module level and how many inside functions (the usual way around a cycle), and which pairs import each other.

    python scripts/import_graph.py            # the table, then the cycles and the layering rules broken
    python scripts/import_graph.py --modules  # also each importing module, to find the ones to move

The layers, top to bottom: `config` (the project: settings, URLs, the Celery app), the apps (evaluation and
submissions build on benchmarks; agents, leaderboard and humans on evaluation, which finds the agent run mode in a
registry the agents app fills, evaluation/run_modes.py), `operations` (background work, imports no other app),
`sandbox` (runs untrusted code; imports only common, and no Django), `common` (helpers with no domain, imports
nothing of the project).
Within an app, no modules import each other, directly or round a loop (`module_cycles()`; imports for type checking
only do not count: they never run). `layering_problems()` lists what breaks either, and a test asserts it lists
nothing. Migrations are left out: they name other apps' migrations by
design. Tests are not an app.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("config", "operations", "benchmarks", "submissions", "evaluation", "agents", "leaderboard", "humans")
SANDBOX = "sandbox"  # running untrusted code: no Django, no app; the apps pass in what it reads (sandbox/config.py)
BOTTOM = "common"  # the plain package under every app (see common/__init__.py)
PACKAGES = (*APPS, SANDBOX, BOTTOM)


def _app_of(module: str, packages: tuple[str, ...]) -> str | None:
    head = module.split(".")[0]
    return head if head in packages else None


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


def graph(packages: tuple[str, ...] = APPS) -> tuple[Counter, dict]:
    """Per (importer, imported, "module" or "function"): how many imports; within one app under (app, app, ...).
    `packages` are the ones counted (the apps and config by default; PACKAGES adds the bottom layer)."""
    counts: Counter = Counter()
    modules: dict = defaultdict(set)
    for app in packages:
        base = ROOT / app
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for module, in_function in _imports(path):
                other = _app_of(module, packages)
                if other is None:
                    continue
                counts[(app, other, "function" if in_function else "module")] += 1
                if other != app:
                    modules[(app, other)].add(str(path.relative_to(ROOT)))
    return counts, modules


def _modules(packages: tuple[str, ...], root: Path) -> dict[str, Path]:
    """Every module of `packages` (migrations aside) by dotted name; a package by its own name."""
    found = {}
    for app in packages:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_imports(path: Path) -> Iterator[str]:
    """The dotted names `path` imports when it runs (`from a import b` as a.b: b may be a module), at any depth,
    leaving out what it imports under `if TYPE_CHECKING:`."""

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
                yield from (name for other in child.orelse for name in walk(ast.Module(body=[other], type_ignores=[])))
                continue
            if isinstance(child, ast.Import):
                yield from (alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield from (f"{child.module}.{alias.name}" for alias in child.names)
            yield from walk(child)

    yield from walk(ast.parse(path.read_text(), filename=str(path)))


def module_cycles(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> list[list[str]]:
    """Groups of modules of one app that import each other round a loop (module-level and function-level imports
    alike), each sorted; a module importing its own package's __init__ is not one (Python runs that first)."""
    modules = _modules(packages, root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in _runtime_imports(path):
            parts = imported.split(".")
            target = next(
                (".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules), None
            )
            if (
                target
                and target != name
                and target.split(".")[0] == name.split(".")[0]
                and not name.startswith(f"{target}.")
            ):
                edges[name].add(target)
    return [sorted(group) for group in _strongly_connected(edges) if len(group) > 1]


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (an app's modules may chain deeper than the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _mutual(pairs: set[tuple[str, str]]) -> list[tuple[str, str]]:
    apps = [a for a in PACKAGES if a != "config"]  # config sits above the apps by design
    return [(a, b) for i, a in enumerate(apps) for b in apps[i + 1 :] if (a, b) in pairs and (b, a) in pairs]


def _django_importers(package: str) -> list[str]:
    """The modules of `package` that import Django, at any depth."""
    return [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        if any(module.split(".")[0] == "django" for module, _ in _imports(path))
    ]


def _template_tag_importers() -> list[str]:
    """Modules outside a templatetags package that import one: a rule a page and the code share lives in a plain
    module (e.g. common/money.py), and the template tag is its thin wrapper."""
    found = []
    for app in PACKAGES:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "templatetags" in path.parts or "migrations" in path.parts:
                continue
            if any("templatetags" in module.split(".") for module, _ in _imports(path)):
                found.append(str(path.relative_to(ROOT)))
    return found


def layering_problems() -> list[str]:
    """Every import that breaks the layers (function-level imports included); empty when the house stands."""
    counts, modules = graph(PACKAGES)
    pairs = {(a, b) for a, b, _ in counts if a != b}
    problems = [f"{a} <-> {b}: apps importing each other" for a, b in _mutual(pairs)]
    problems += [
        f"{a} imports config, which sits above the apps: {', '.join(sorted(modules[(a, 'config')]))}"
        for a, b in sorted(pairs)
        if b == "config"
    ]
    problems += [
        f"{a} imports {b}, above it: {', '.join(sorted(modules[(a, b)]))}"
        for a, b in sorted(pairs)
        if (a == BOTTOM and b != BOTTOM)
        or (a == "operations" and b not in ("operations", BOTTOM))
        or (a == SANDBOX and b not in (SANDBOX, BOTTOM))
    ]
    problems += [f"sandbox imports Django, which the host passes in: {path}" for path in _django_importers(SANDBOX)]
    problems += [f"template tags imported outside templates: {path}" for path in _template_tag_importers()]
    problems += [
        f"modules of {group[0].split('.')[0]} importing each other: {', '.join(group)}" for group in module_cycles()
    ]
    return problems


def main() -> None:
    counts, modules = graph(PACKAGES)
    within = sum(n for (a, b, where), n in counts.items() if a == b and where == "function")
    pairs = sorted({(a, b) for a, b, _ in counts if a != b})
    print(f"{'importer':<12} {'imported':<12} {'module-level':>12} {'in functions':>12}")
    for a, b in pairs:
        print(f"{a:<12} {b:<12} {counts[(a, b, 'module')]:>12} {counts[(a, b, 'function')]:>12}")
    mutual = _mutual(set(pairs))
    print("\napps importing each other:", ", ".join(f"{a} <-> {b}" for a, b in mutual) or "none")
    below = [a for a, b in pairs if b == "config" and a != "config"]
    print("apps importing config:", ", ".join(sorted(set(below))) or "none")
    print("imports inside functions within one app (the other way around a cycle):", within)
    print("config imports:", ", ".join(sorted({b for a, b in pairs if a == "config"})) or "nothing")
    print(f"{BOTTOM} imports:", ", ".join(sorted({b for a, b in pairs if a == BOTTOM})) or "nothing of the project")
    problems = layering_problems()
    print("layering problems:", "\n  ".join(["", *problems]) if problems else "none")
    if "--modules" in sys.argv:
        for pair in pairs:
            print(f"\n{pair[0]} -> {pair[1]}:", ", ".join(sorted(modules[pair])))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
