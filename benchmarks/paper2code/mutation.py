"""Mutants of a snippet's reference body (issue 24): small AST changes that keep the code valid, each a wrong body
the snippet's tests should reject, so the share they reject (the mutation score) says how much the tests prove.

A mutant replaces exactly one node's source text (or one statement by `pass`), so everything else of the body, its
comments and nested markers included, stays as the author wrote it. Mutants whose bytecode equals the reference's
or another mutant's (after the compiler's constant folding) are dropped as equivalent, and so is swapping the
arguments of a function that commutes (np.minimum, max, ...: `_SYMMETRIC`); the rest are chosen
deterministically from a seed, spread over the operators, so a score is reproducible.
"""

from __future__ import annotations

import ast
import builtins
import copy
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from benchmarks.paper2code.markers import split_lines

MUTANTS_DEFAULT = 10
SEED_DEFAULT = 24

# Each operator's name, as reports and tests spell it.
OPERATORS = (
    "arithmetic",
    "comparison",
    "constant",
    "sign",
    "argument",
    "statement",
    "return",
    "condition",
    "index",
    "axis",
)

_ARITHMETIC: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.MatMult: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
_COMPARISON: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_AXIS_KEYWORDS = frozenset({"axis", "dim"})
# Reductions whose first positional argument is the axis when called as a method (`x.sum(1)`).
_REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "max",
        "min",
        "prod",
        "std",
        "var",
        "softmax",
        "log_softmax",
        "logsumexp",
        "argmax",
        "argmin",
        "cumsum",
        "cumprod",
        "all",
        "any",
        "norm",
        "median",
        "amax",
        "amin",
        "nansum",
        "nanmean",
        "squeeze",
        "unsqueeze",
        "flip",
        "sort",
        "argsort",
        "topk",
    }
)


@dataclass(frozen=True)
class Mutant:
    """One wrong body: which operator made it, its full text, and what changed as one line."""

    operator: str
    body: str
    line: int  # of the change, 1-based within the body
    diff: str  # "line 3: y = a + b  ->  y = a - b"

    def as_dict(self) -> dict:
        return {"operator": self.operator, "line": self.line, "diff": self.diff}


@dataclass(frozen=True)
class _Site:
    """A candidate change: replace the text of `node` (or of the statement, by `pass`) with `replacement`."""

    operator: str
    node: ast.stmt | ast.expr
    replacement: ast.AST | None  # None: the statement is removed (becomes `pass`)


# Candidates tried per mutant wanted: each try parses and compiles the whole body, and a body of many sites that all
# compile alike (dead code) would otherwise be tried site by site, its cost growing with the square of its size.
TRIES_PER_MUTANT = 5


def mutants_generate(body: str, *, limit: int = MUTANTS_DEFAULT, seed: int = SEED_DEFAULT) -> list[Mutant]:
    """At most `limit` non-equivalent mutants of `body` (a snippet's code, at its own indentation), the same for the
    same body, limit and seed; [] when the body does not parse on its own (a fragment of a statement) or nests too
    deeply to be copied (the check then says it has no mutants)."""
    try:
        return _mutants(body, limit=limit, seed=seed)
    except RecursionError:
        return []


def _mutants(body: str, *, limit: int, seed: int) -> list[Mutant]:
    parsed = _parse(body)
    if parsed is None or limit <= 0:
        return []
    tree, offset = parsed
    sites = list(_sites(tree))
    rng = random.Random(f"{seed}:{body}")
    by_operator: dict[str, list[_Site]] = {}
    for site in sites:
        by_operator.setdefault(site.operator, []).append(site)
    for group in by_operator.values():
        rng.shuffle(group)
    order = [op for op in OPERATORS if op in by_operator]
    rng.shuffle(order)
    seen = {_fingerprint(tree)}
    chosen: list[Mutant] = []
    tries = TRIES_PER_MUTANT * limit
    # Round-robin over the operators, so a body of many constants does not get only constant mutants.
    while order and len(chosen) < limit and tries > 0:
        for operator in list(order):
            group = by_operator[operator]
            if not group:
                order.remove(operator)
                continue
            if tries == 0:
                break
            tries -= 1
            mutant = _apply(body, offset, group.pop(), seen)
            if mutant is not None:
                chosen.append(mutant)
                if len(chosen) == limit:
                    break
    return chosen


def _parse(body: str) -> tuple[ast.Module, int] | None:
    """The body's tree and how many lines were put before it: an indented body parses under `if True:`."""
    code = [line for line in split_lines(body) if line.strip() and not line.lstrip().startswith("#")]
    indented = bool(code) and code[0][0] in " \t"
    source, offset = (f"if True:\n{body}", 1) if indented else (body, 0)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    if offset and isinstance(tree.body[0], ast.If):  # the `if True:` put before it
        tree = ast.Module(body=tree.body[0].body, type_ignores=[])
    return tree, offset


def _fingerprint(module: ast.Module) -> object:
    """What the compiler makes of the tree, without line numbers: equal for equivalent spellings (x * 1 + 0 folded,
    parentheses); the AST's dump when the body does not compile on its own (e.g. `nonlocal`)."""
    wrapper = ast.parse("async def _snippet():\n    pass\n")
    wrapper.body[0].body = copy.deepcopy(module.body) or [ast.Pass()]  # type: ignore[attr-defined]
    ast.fix_missing_locations(wrapper)
    try:
        code = compile(ast.parse(ast.unparse(wrapper)), "<mutant>", "exec")
    except (SyntaxError, ValueError, TypeError):
        return ast.dump(module)
    return _code_key(code)


def _code_key(code) -> tuple:
    consts = tuple(_code_key(c) if hasattr(c, "co_code") else (type(c).__name__, repr(c)) for c in code.co_consts)
    return code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars


def _apply(body: str, offset: int, site: _Site, seen: set) -> Mutant | None:
    lines = split_lines(body)
    node = site.node
    if node.end_lineno is None or node.end_col_offset is None:
        return None  # a node with no place in the text (sites are parsed nodes, which all have one)
    first, last = node.lineno - 1 - offset, node.end_lineno - 1 - offset
    start = sum(len(line) for line in lines[:first]) + _char_offset(lines[first], node.col_offset)
    end = sum(len(line) for line in lines[:last]) + _char_offset(lines[last], node.end_col_offset)
    if site.replacement is None:
        text = "pass"
    else:
        text = ast.unparse(site.replacement)
        if (
            isinstance(site.replacement, ast.expr)
            and not isinstance(site.replacement, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))
            and (_int_value(site.replacement) is None)
        ):
            text = f"({text})"  # the node's context keeps its meaning whatever the precedence around it
    mutated = body[:start] + text + body[end:]
    parsed = _parse(mutated)
    if parsed is None:
        return None
    key = _fingerprint(parsed[0])
    if key in seen:
        return None  # equivalent to the reference or to a mutant already chosen
    seen.add(key)
    return Mutant(site.operator, mutated, first + 1, _diff_line(body, mutated, first, last))


def _char_offset(line: str, col: int) -> int:
    """AST columns count UTF-8 bytes; the text is indexed by characters."""
    return len(line.encode("utf-8")[:col].decode("utf-8", "replace"))


def _diff_line(body: str, mutated: str, first: int, last: int) -> str:
    """The changed lines of the body before and after, each joined into one line."""
    before, after = split_lines(body), split_lines(mutated)
    tail = len(before) - 1 - last
    old = " ".join(line.strip() for line in before[first : last + 1])
    new = " ".join(line.strip() for line in after[first : len(after) - tail])
    where = f"line {first + 1}" if first == last else f"lines {first + 1}-{last + 1}"
    return f"{where}: {old}  ->  {new}"


def _sites(tree: ast.Module) -> Iterator[_Site]:
    inputs = _inputs(tree)
    axis_constants: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            axis_constants.update(id(a) for a in _axis_arguments(node))
    index_constants = {
        id(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript)
        for n in _index_parts(n.slice)
        if isinstance(n, ast.Constant)
    }
    for node in ast.walk(tree):
        for make in _MAKERS:
            yield from make(node, inputs=inputs, skip=axis_constants | index_constants)


def _inputs(tree: ast.Module) -> list[str]:
    """Names the body reads and never binds, other than as a namespace (`np.`, `self.`): its inputs."""
    bound = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    namespaces = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    read: dict[str, bool] = {}  # name -> read other than as a namespace
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            read[node.id] = read.get(node.id, False) or id(node) not in namespaces
    return [name for name, plain in read.items() if plain and name not in _BUILTINS]


_BUILTINS = frozenset(dir(builtins))


def _replace(node: ast.AST, **changes) -> ast.AST:
    new = copy.copy(node)
    for key, value in changes.items():
        setattr(new, key, value)
    return new


def _arithmetic(node, **_) -> Iterator[_Site]:
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC:
        yield _Site("arithmetic", node, _replace(node, op=_ARITHMETIC[type(node.op)]()))


def _comparison(node, **_) -> Iterator[_Site]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARISON:
                ops = list(node.ops)
                ops[i] = _COMPARISON[type(op)]()
                yield _Site("comparison", node, _replace(node, ops=ops))


def _nudged(value) -> list:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return {0: [1], 1: [0, 2]}.get(value, [value + 1, value - 1])
    if isinstance(value, float):
        return [1.0] if value == 0 else [value * 1.5, value / 2]
    return []


def _constant(node, *, skip, **_) -> Iterator[_Site]:
    if isinstance(node, ast.Constant) and id(node) not in skip:
        for value in _nudged(node.value):
            yield _Site("constant", node, ast.Constant(value))


def _sign(node, **_) -> Iterator[_Site]:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield _Site("sign", node, node.operand)
    elif isinstance(node, ast.Assign | ast.Return) and isinstance(node.value, ast.BinOp | ast.Call | ast.Name):
        yield _Site("sign", node.value, ast.UnaryOp(ast.USub(), node.value))


def _argument(node, **_) -> Iterator[_Site]:
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return
    args = node.args
    if len(args) >= 2:
        for i in range(len(args)):
            yield _Site("argument", node, _replace(node, args=args[:i] + args[i + 1 :]))
        for i in range(len(args) - 1):
            if ast.dump(args[i]) != ast.dump(args[i + 1]) and not _symmetric(node):
                swapped = list(args)
                swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
                yield _Site("argument", node, _replace(node, args=swapped))
    for i, keyword in enumerate(node.keywords):
        if keyword.arg is not None and keyword.arg not in _AXIS_KEYWORDS:
            yield _Site("argument", node, _replace(node, keywords=node.keywords[:i] + node.keywords[i + 1 :]))


def _statement(node, **_) -> Iterator[_Site]:
    if (
        isinstance(node, ast.stmt)
        and not isinstance(node, ast.Pass | ast.Global | ast.Nonlocal)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ):
        yield _Site("statement", node, None)


def _return(node, *, inputs, **_) -> Iterator[_Site]:
    """The snippet's result replaced by one of its inputs: a returned value, or a value assigned to a name."""
    target = node.value if isinstance(node, ast.Return) else None
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name | ast.Subscript)
    ):
        target = node.value
    if target is None:
        return
    for name in inputs:
        if not (isinstance(target, ast.Name) and target.id == name):
            yield _Site("return", target, ast.Name(name, ast.Load()))


def _condition(node, **_) -> Iterator[_Site]:
    if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
        yield _Site("condition", node.test, ast.UnaryOp(ast.Not(), node.test))
    elif isinstance(node, ast.BoolOp):
        yield _Site("condition", node, _replace(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And()))


def _index_parts(index: ast.expr) -> list[ast.expr]:
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    out: list[ast.expr] = []
    for part in parts:
        if isinstance(part, ast.Slice):
            out.extend(p for p in (part.lower, part.upper) if p is not None)
        else:
            out.append(part)
    return out


def _index(node, **_) -> Iterator[_Site]:
    if not isinstance(node, ast.Subscript):
        return
    for part in _index_parts(node.slice):
        if isinstance(part, ast.Constant) and type(part.value) is int:
            yield _Site("index", part, ast.Constant(part.value + 1))
        elif (
            isinstance(part, ast.UnaryOp)
            and isinstance(part.op, ast.USub)
            and isinstance(part.operand, ast.Constant)
            and type(part.operand.value) is int
        ):
            yield _Site("index", part, ast.Constant(1 - part.operand.value))  # x[-1] -> x[0]
        elif isinstance(part, ast.Name):
            yield _Site("index", part, ast.BinOp(part, ast.Add(), ast.Constant(1)))


def _axis_arguments(call: ast.Call) -> list[ast.expr]:
    found = [k.value for k in call.keywords if k.arg in _AXIS_KEYWORDS]
    if (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in _REDUCTIONS
        and len(call.args) == 1
        and (_int_value(call.args[0]) is not None)
        and not _is_module(call.func.value)
    ):
        found.append(call.args[0])  # x.sum(1), not np.sum(x)
    return [a for a in found if _int_value(a) is not None]


# Functions whose two arguments commute: swapping them computes the same value, an equivalent mutant that no test can
# kill. Only those whose every call of two positional arguments is symmetric (torch.max(x, 1) is a reduction, so no).
_SYMMETRIC = {
    "min",
    "max",
    "minimum",
    "maximum",
    "fmin",
    "fmax",
    "add",
    "multiply",
    "mul",
    "hypot",
    "logical_and",
    "logical_or",
    "logical_xor",
    "equal",
    "not_equal",
}  # not isclose/allclose: their tolerance is relative to the second argument


def _symmetric(call: ast.Call) -> bool:
    """A call of a built-in min/max or a numeric library's commuting function with exactly two positional
    arguments."""
    if len(call.args) != 2:
        return False
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in {"min", "max"}
    return isinstance(func, ast.Attribute) and func.attr in _SYMMETRIC - {"min", "max"} and _is_module(func.value)


def _is_module(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in {"np", "numpy", "torch", "jnp", "F", "scipy", "math", "tf"}


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _axis(node, **_) -> Iterator[_Site]:
    if isinstance(node, ast.Call):
        for argument in _axis_arguments(node):
            axis = _int_value(argument)
            assert axis is not None
            other = axis - 1 if axis != 0 else 1  # dim=-1 -> -2, dim=1 -> 0, dim=0 -> 1
            yield _Site(
                "axis", argument, ast.Constant(other) if other >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-other))
            )


_MAKERS: tuple[Callable[..., Iterator[_Site]], ...] = (
    _arithmetic,
    _comparison,
    _constant,
    _sign,
    _argument,
    _statement,
    _return,
    _condition,
    _index,
    _axis,
)
