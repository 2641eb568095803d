"""The static answer policy's false-flag rate on real code (issue 33, item 7): function bodies from the installed
source of widely used ML libraries, each spliced as the answer of its own function, before and after sealed
verdicts.

What it does, in order:
1. The corpus: every function (`def`, methods and nested ones) of LIBRARIES' installed source files whose body is
   more than a docstring, `pass`, `...` or `raise NotImplementedError` and starts on a line of its own; at most
   `--per-library` of each library, drawn with a fixed seed from its files taken in a seeded order, so a rerun
   measures the same bodies. Read from the files only (nothing is imported): a library that is not installed is
   named and left out.
2. Each body becomes a snippet: paper2code markers are put around its lines, the file is parsed as an annotated file
   and spliced with the body as its answer (paper2code.splice, harness.answer_span: what answer_test does), and the
   policy (evaluation.audit.answer_audit) judges it with the function's file as the source and the other .py files
   of its folder as the task's context, paths relative to site-packages as a package's are to its root.
3. Before: the share of bodies with any finding (each one is a flag today). After: the share still flagged under
   sealed verdicts (judging.verdict.sealed_verdict: a static finding on a sealed snippet whose replay agrees is a
   note). A library function has no tests to record, so its sealing is ESTIMATED: a body counts as sealed when
   judging.sealed.snippet_target finds a function to seal it by (plain, not nested, not a generator or coroutine),
   which is what the platform would seal once a paper's tests call it, and the replay is assumed to agree (the
   body is the reference itself). Per library, per rule (bodies with at least one finding of the rule) and
   `--examples` findings per rule.

4. `--runtime` (bwrap, warm: items fork from the environment's fork server): the runtime guard on the torch.optim
   bodies a real workload runs. Each torch.optim file of the corpus that defines optimizers is copied as a task file
   (its relative imports made absolute, its lines where they were) beside a unittest entry point that builds every
   optimizer it defines on a small model and steps it three times (a closure, so LBFGS runs too), by default and
   with foreach=True; the harness runs it with the guard watching the whole file as the answer's lines, and the
   test reports which of the file's functions ran. A runtime finding on a line of a body that ran counts for that
   body (runtime findings always flag: before and after alike). What a body of the corpus does when no test runs it
   is not measured; the environment is bench_pipeline's (numpy, scipy, torch==2.13.0), built once in `--cache`.

These are measurements, not a test: the numbers change with the policy and the libraries' versions, which it
prints.

Install (source only: the files are read, never imported, so no dependency of theirs is needed), into a folder of
its own rather than the shared venv, found through PYTHONPATH (nothing of the platform imports them):
    .venv/bin/pip install --no-deps --target /tmp/calib-site torch==2.13.0 timm==1.0.31 diffusers==0.42.1 \
        transformers==5.23.0 scipy==1.17.1   # scipy 1.18 needs Python 3.12
    PYTHONPATH=/tmp/calib-site nice -n 10 .venv/bin/python scripts/calibrate_policy.py --per-library 400 --runtime
Run: .venv/bin/python scripts/calibrate_policy.py [--per-library 600] [--examples 10] [--seed 33]
     [--findings FILE] [--runtime [--cache DIR]]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# library: (distribution, folder under site-packages, file-name prefix or "" for every .py file)
LIBRARIES: dict[str, tuple[str, str, str]] = {
    "torch.optim": ("torch", "torch/optim", ""),
    "torch.nn.modules": ("torch", "torch/nn/modules", ""),
    "timm": ("timm", "timm", ""),
    "diffusers": ("diffusers", "diffusers/models", ""),
    "transformers": ("transformers", "transformers/models", "modeling_"),
    "scipy": ("scipy", "scipy", ""),
}
MARKER_NAME = "calibrated body"
SKIPPED_PARTS = frozenset({"tests", "test", "testing", "_vendor", "vendored", "__pycache__"})
ESTIMATE = (
    "ESTIMATED: library functions have no tests to record, so 'sealed' here means judging.sealed.snippet_target "
    "finds a function to seal the body by (a plain, non-nested, non-generator function or method): what the "
    "platform seals once a paper's tests call it; the replay is assumed to agree (the body is the reference)."
)


@dataclass(frozen=True)
class Body:
    """One function body of a library file: its lines (1-based, inclusive) and where it is."""

    library: str
    path: str  # relative to site-packages
    qualname: str
    first_line: int
    last_line: int


@dataclass
class Judged:
    body: Body
    findings: list[dict]
    sealed: bool
    unsealed_reason: str
    flagged_after: bool


@dataclass
class Corpus:
    bodies: list[Body] = field(default_factory=list)
    trivial: int = 0  # functions left out: a docstring, pass, ... or raise NotImplementedError alone
    one_line: int = 0  # left out: the body starts on the def's line (no marker can go around it)
    unparsable: int = 0  # files that do not parse on this Python
    missing: dict[str, str] = field(default_factory=dict)  # library: why it is left out


def _trivial(body: list[ast.stmt]) -> bool:
    statements = [
        s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s is body[0])
    ]
    if not statements:
        return True
    if len(statements) > 1:
        return False
    only = statements[0]
    if isinstance(only, ast.Pass) or (isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant)):
        return True
    if isinstance(only, ast.Raise) and only.exc is not None:
        raised = only.exc.func if isinstance(only.exc, ast.Call) else only.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


def file_bodies(library: str, path: str, source: str, corpus: Corpus) -> Iterator[Body]:
    """The bodies of every function of one file worth calling a snippet (the others are counted in `corpus`)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        corpus.unparsable += 1
        return

    def walk(node: ast.AST, prefix: str) -> Iterator[Body]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + child.name
                if _trivial(child.body):
                    corpus.trivial += 1
                elif child.body[0].lineno <= _signature_end(child):
                    corpus.one_line += 1
                else:
                    yield Body(library, path, qualname, child.body[0].lineno, child.end_lineno or child.lineno)
                yield from walk(child, f"{qualname}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _signature_end(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The last line of the def's signature (its returns annotation or last argument), at least the def's line."""
    ends = [function.lineno]
    if function.returns is not None:
        ends.append(function.returns.end_lineno or 0)
    for argument in ast.walk(function.args):
        ends.append(getattr(argument, "end_lineno", 0) or 0)
    return max(ends)


def library_root(distribution: str) -> Path | None:
    """The site-packages folder a distribution is installed in, without importing it."""
    try:
        return Path(str(metadata.distribution(distribution).locate_file("")))
    except metadata.PackageNotFoundError:
        return None


def library_files(root: Path, folder: str, prefix: str) -> list[Path]:
    return sorted(
        path
        for path in (root / folder).rglob("*.py")
        if path.name.startswith(prefix) and not SKIPPED_PARTS & set(path.relative_to(root).parts)
    )


def corpus_collect(
    libraries: Mapping[str, tuple[Path | None, str, str]], *, per_library: int, seed: int
) -> tuple[Corpus, dict[str, str]]:
    """The corpus and its texts (path: source) of `libraries` (name: site-packages folder or None when it is not
    installed, folder under it, file-name prefix), at most `per_library` bodies of each, drawn with `seed`."""
    corpus = Corpus()
    texts: dict[str, str] = {}
    for library, (root, folder, prefix) in libraries.items():
        if root is None or not (root / folder).is_dir():
            corpus.missing[library] = "not installed"
            continue
        found: list[Body] = []
        files = library_files(root, folder, prefix)
        # Files in a seeded order until three times the bodies wanted are found: a draw from every file of
        # transformers' 400 models would parse them all.
        random.Random(f"{seed}:{library}:files").shuffle(files)
        for file in files:
            if len(found) >= 3 * per_library:
                break
            for sibling in file.parent.glob("*.py"):  # the body's context: its folder's files
                texts.setdefault(sibling.relative_to(root).as_posix(), sibling.read_text("utf-8", errors="replace"))
            path = file.relative_to(root).as_posix()
            found.extend(file_bodies(library, path, texts[path], corpus))
        if len(found) > per_library:
            found = sorted(random.Random(f"{seed}:{library}").sample(found, per_library), key=_order)
        corpus.bodies.extend(found)
    return corpus, texts


def _order(body: Body) -> tuple:
    return body.path, body.first_line


def body_judge(body: Body, source: str, context: dict[str, str]) -> Judged:
    """Splice the body as the answer of its own function and judge it as answer_test does, then as sealed."""
    from benchmarks.paper2code import parse, splice
    from evaluation.audit import answer_audit
    from evaluation.judging.sealed import Replay, SnippetSpan, snippet_target
    from evaluation.judging.verdict import sealed_verdict
    from evaluation.models import Outcome
    from evaluation.outcomes import Verdict
    from sandbox.harness import answer_span

    lines = source.splitlines(keepends=True)
    first = lines[body.first_line - 1]
    indent = first[: len(first) - len(first.lstrip())]
    marked = "".join(
        [
            *lines[: body.first_line - 1],
            f'{indent}# <paper2code name="{MARKER_NAME}">\n',
            *lines[body.first_line - 1 : body.last_line],
            f'{indent}# </paper2code name="{MARKER_NAME}">\n',
            *lines[body.last_line :],
        ]
    )
    annotated = parse(marked, body.path)
    snippet = annotated.snippet(MARKER_NAME)
    code = "".join(lines[body.first_line - 1 : body.last_line])
    spliced = splice(annotated, snippet, code)
    answer_first, answer_last = answer_span(snippet.start_line, code)
    # A finding's line as the library file numbers it (the marked file has the start marker above the body).
    findings = [
        {**f.as_dict(), "line": f.line - 1 if f.line else f.line}
        for f in answer_audit(
            source=spliced,
            first_line=answer_first,
            last_line=answer_last,
            context_sources={**context, body.path: spliced},
        )
    ]
    target = snippet_target(spliced, SnippetSpan(body.path, body.path, snippet.start_line, snippet.end_line))
    sealed = not isinstance(target, str)
    passed = Verdict(Outcome.Status.PASSED, "", "")
    after = sealed_verdict(passed, findings, Replay(sealed=sealed, reason="" if sealed else str(target)))
    return Judged(body, findings, sealed, "" if sealed else str(target), after.status == Outcome.Status.FLAGGED)


def corpus_judge(corpus: Corpus, texts: dict[str, str]) -> list[Judged]:
    contexts: dict[str, dict[str, str]] = {}
    judged = []
    for body in corpus.bodies:
        folder = body.path.rsplit("/", 1)[0]
        if folder not in contexts:
            contexts[folder] = {p: t for p, t in texts.items() if p.rsplit("/", 1)[0] == folder}
        judged.append(body_judge(body, texts[body.path], contexts[folder]))
    return judged


# The workload of --runtime: every optimizer a copied torch.optim file defines, built on a small model and stepped
# three times, by default and with foreach=True; prints which of the file's functions ran (their first lines).
RUNTIME_TEST = """import sys
import unittest

import torch

import {module} as library

RAN = set()


def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.endswith("{module}.py"):
        RAN.add(frame.f_code.co_firstlineno)


class TestOptimizers(unittest.TestCase):
    def test_steps(self):
        built = 0
        for name, cls in sorted(vars(library).items()):
            if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
                continue
            if cls.__module__ != library.__name__:
                continue
            for options in ({{}}, {{"foreach": True}}):
                torch.manual_seed(0)
                model = torch.nn.Linear(4, 3)
                x = torch.randn(8, 4)
                try:
                    sys.setprofile(profile)
                    optimizer = cls([model.weight], **options)

                    def closure():
                        optimizer.zero_grad()
                        loss = model(x).pow(2).sum()
                        loss.backward()
                        return loss

                    for _ in range(3):
                        optimizer.step(closure)
                    built += 1
                except (TypeError, ValueError, RuntimeError, NotImplementedError) as exc:
                    print("RCB-SKIPPED", name, options, type(exc).__name__, str(exc)[:100])
                finally:
                    sys.setprofile(None)
        print("RCB-RAN", " ".join(str(line) for line in sorted(RAN)))
        self.assertGreater(built, 0)


if __name__ == "__main__":
    unittest.main()
"""
RUNTIME_REQUIREMENTS = "numpy\nscipy\ntorch==2.13.0\n"  # bench_pipeline's environment
RUNTIME_FOLDER = "torch/optim/"
CONTROL = ("torch/optim/sgd.py", "_single_tensor_sgd")  # where the control's line is planted
RELATIVE = re.compile(r"^(\s*)from \.(\w*)( import )", re.MULTILINE)


@dataclass
class RuntimeJudged:
    """The runtime stage of one torch.optim file: the bodies that ran, and the runtime findings on each."""

    path: str
    ran: list[Body]
    findings: dict[Body, list[dict]]
    skipped: list[str]
    problem: str = ""


def _absolute_imports(source: str) -> str:
    """`from .optimizer import X` -> `from torch.optim.optimizer import X`, `from . import m` -> `from torch.optim
    import m`, each on its own line (the file's lines stay where they were)."""

    def absolute(match: re.Match) -> str:
        indent, module, rest = match.groups()
        return f"{indent}from torch.optim{'.' + module if module else ''}{rest}"

    return RELATIVE.sub(absolute, source)


def runtime_judge(corpus: Corpus, texts: dict[str, str], *, cache: Path) -> list[RuntimeJudged]:
    """The runtime guard on the corpus's torch.optim bodies that the workload runs (see the module's docstring)."""
    from benchmarks.paper2code.requirements import requirements_vetted
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import harness_run
    from sandbox import Limits, backend_get
    from sandbox.bwrap import BwrapBackend
    from sandbox.harness import GuardSpec

    bodies: dict[str, list[Body]] = defaultdict(list)
    for body in corpus.bodies:
        if body.library == "torch.optim" and body.path.startswith(RUNTIME_FOLDER):
            bodies[body.path].append(body)
    files = [path for path in sorted(bodies) if re.search(r"^class \w+\((Optimizer|\w+Optimizer)\)", texts[path], re.M)]
    backend = backend_get("bwrap", cache_dir=cache.resolve())
    if not isinstance(backend, BwrapBackend):
        raise SystemExit("--runtime needs the bwrap backend")
    backend.forkserver = True  # warm: the environment's fork server, as the platform runs items
    requirements = requirements_vetted(RUNTIME_REQUIREMENTS)  # as bench_sealed builds it: one environment for both
    environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
    limits = Limits(wall_seconds=240, memory_bytes=4 * 1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
    judged = []
    with backend.session(environment) as session:

        def guarded(path: str, source: str):
            module = "calibrated_" + Path(path).stem.lstrip("_")
            task = {f"{module}.py": source.encode(), "paper2code_test.py": RUNTIME_TEST.format(module=module).encode()}
            guard = GuardSpec(
                answer_file=f"{module}.py",
                first_line=1,
                last_line=source.count("\n") + 1,
                hidden_modules=("paper2code_test",),
                hidden_files=("paper2code_test.py",),
            )
            return harness_run(
                session=session, files=task, test_entry_point="paper2code_test.py", limits=limits, guard=guard
            )

        for path in files:
            run = guarded(path, _absolute_imports(texts[path]))
            ran_lines = {int(n) for n in _printed(run.result.stdout, "RCB-RAN")}
            skipped = [line for line in run.result.stdout.splitlines() if line.startswith("RCB-SKIPPED")]
            ran = [b for b in bodies[path] if _def_line(texts[path], b) in ran_lines]
            found: dict[Body, list[dict]] = defaultdict(list)
            for finding in run.verdict.findings:
                if finding.get("source") != "runtime" or not finding.get("line"):
                    continue
                holder = _innermost(ran, finding["line"])
                if holder is not None:
                    found[holder].append(finding)
            problem = "" if ran_lines else f"the workload did not run: {run.verdict.status} {run.verdict.detail[:300]}"
            judged.append(RuntimeJudged(path, ran, dict(found), skipped, problem))
            print(f"  runtime: {path}: {len(ran)} bodies ran, {len(found)} with a runtime finding", flush=True)
        # The control: a line that walks the garbage collector, planted in SGD's step, is a runtime finding there.
        source = _absolute_imports(texts[CONTROL[0]])
        lines = source.splitlines(keepends=True)
        function = next(
            n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == CONTROL[1]
        )
        at = function.body[-1].lineno - 1  # before its last statement, which every call reaches
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        planted = "".join([*lines[:at], f"{indent}__import__('gc').get_objects()\n", *lines[at:]])
        control = guarded(CONTROL[0], planted)
        caught = [f for f in control.verdict.findings if f.get("source") == "runtime" and f.get("line") == at + 1]
        print(
            f"  runtime control (gc.get_objects() planted on line {at + 1} of {CONTROL[0]}): "
            f"{'found: ' + caught[0]['detail'][:120] if caught else 'NOT FOUND, the stage measures nothing'}"
        )
    return judged


def _printed(stdout: str, mark: str) -> list[str]:
    for line in stdout.splitlines():
        if line.startswith(mark + " ") or line == mark:
            return line.split()[1:]
    return []


def _def_line(source: str, body: Body) -> int:
    """The first line of a body's code object (its first decorator's, or its def's)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.body[0].lineno == body.first_line:
            return min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return -1


def _innermost(bodies: list[Body], line: int) -> Body | None:
    holding = [b for b in bodies if b.first_line <= line <= b.last_line]
    return min(holding, key=lambda b: b.last_line - b.first_line) if holding else None


def runtime_report(judged: list[RuntimeJudged], static: list[Judged]) -> Iterable[str]:
    ran = [body for j in judged for body in j.ran]
    flagged = {body for j in judged for body in j.findings}
    static_flagged = {j.body for j in static if j.findings}
    static_after = {j.body for j in static if j.flagged_after}
    yield ""
    before, after = flagged | (static_flagged & set(ran)), flagged | (static_after & set(ran))
    yield f"runtime guard (bwrap, warm) on the torch.optim bodies a workload ran: {len(ran)} of {len(judged)} files"
    yield f"  runtime finding (a flag before and after): {_share(len(flagged), len(ran))}"
    yield f"  flagged BEFORE (static or runtime): {_share(len(before), len(ran))}"
    yield f"  flagged AFTER (runtime, or a static finding that stays a flag): {_share(len(after), len(ran))}"
    for j in judged:
        if j.problem:
            yield f"  {j.path}: {j.problem}"
        for body, findings in j.findings.items():
            for finding in findings[:3]:
                yield f"  {body.path}:{finding['line']} {body.qualname}: {finding['kind']}: {finding['detail'][:160]}"
        for line in j.skipped[:3]:
            yield f"  {j.path}: {line}"


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "0/0"


def _reason_kind(reason: str) -> str:
    """An unsealed reason without its function's name, so reasons of one kind count together."""
    if "defined inside another function" in reason:
        return "nested function"
    if "generator or coroutine" in reason:
        return "generator or coroutine"
    return reason


def report(corpus: Corpus, judged: list[Judged], *, examples: int) -> Iterable[str]:
    total = len(judged)
    before = sum(bool(j.findings) for j in judged)
    after = sum(j.flagged_after for j in judged)
    sealed = sum(j.sealed for j in judged)
    yield f"corpus: {total} function bodies"
    yield (
        f"  left out: {corpus.trivial} trivial bodies (docstring, pass, ..., raise NotImplementedError alone), "
        f"{corpus.one_line} one-line defs, {corpus.unparsable} unparsable files"
    )
    for library, why in corpus.missing.items():
        yield f"  NOT MEASURED: {library} ({why})"
    yield f"flagged BEFORE (today's policy: any static finding is a flag): {_share(before, total)}"
    yield f"sealed (estimate): {_share(sealed, total)}"
    yield f"flagged AFTER (static findings on sealed bodies are notes): {_share(after, total)}"
    yield f"  {ESTIMATE}"
    unsealed = Counter(_reason_kind(j.unsealed_reason) for j in judged if not j.sealed)
    for reason, count in unsealed.most_common():
        yield f"  unsealed: {count} {reason}"
    yield ""
    yield f"{'library':<18}{'bodies':>8}{'before':>18}{'sealed':>18}{'after':>18}"
    by_library: dict[str, list[Judged]] = defaultdict(list)
    for j in judged:
        by_library[j.body.library].append(j)
    for library, rows in by_library.items():
        n = len(rows)
        yield (
            f"{library:<18}{n:>8}{_share(sum(bool(j.findings) for j in rows), n):>18}"
            f"{_share(sum(j.sealed for j in rows), n):>18}{_share(sum(j.flagged_after for j in rows), n):>18}"
        )
    yield ""
    rules: dict[str, list[tuple[Judged, dict]]] = defaultdict(list)
    for j in judged:
        for finding in j.findings:
            rules[finding.get("rule") or finding["kind"]].append((j, finding))
    yield f"{'rule':<26}{'bodies before':>18}{'bodies after':>18}"
    for rule, hits in sorted(rules.items(), key=lambda item: -len({id(j) for j, _ in item[1]})):
        bodies = {id(j): j for j, _ in hits}
        still = sum(j.flagged_after for j in bodies.values())
        yield f"{rule:<26}{_share(len(bodies), total):>18}{_share(still, total):>18}"
    for rule, hits in sorted(rules.items()):
        yield ""
        yield f"examples of {rule}:"
        seen: set[int] = set()
        shown = 0
        for j, finding in hits:
            if id(j) in seen or shown >= examples:
                continue
            seen.add(id(j))
            shown += 1
            state = (
                f"unsealed ({_reason_kind(j.unsealed_reason)}): a flag"
                if not j.sealed
                else "sealed: a note after"
                if _demoted(finding)
                else "sealed: still a flag after"
            )
            yield f"  {j.body.path}:{finding['line']} {j.body.qualname}: {finding['detail'][:160]} [{state}]"


def _demoted(finding: dict) -> bool:
    """Whether the finding is a note on a sealed body whose replay agrees (judging.verdict's rule)."""
    from evaluation.judging.verdict import DEMOTABLE_RULES

    return finding.get("source") == "static" and finding.get("rule") in DEMOTABLE_RULES


def findings_write(judged: list[Judged], path: Path) -> None:
    """Every finding as a JSON line (library, file, line, function, rule, detail, sealed, still a flag after)."""
    with path.open("w") as out:
        for j in judged:
            for finding in j.findings:
                row = {
                    "library": j.body.library,
                    "path": j.body.path,
                    "qualname": j.body.qualname,
                    "line": finding["line"],
                    "rule": finding.get("rule") or finding["kind"],
                    "detail": finding["detail"],
                    "sealed": j.sealed,
                    "flag_after": not (j.sealed and _demoted(finding)),
                }
                out.write(json.dumps(row) + "\n")


def versions(libraries: dict[str, tuple[str, str, str]]) -> str:
    found = []
    for distribution in sorted({d for d, _, _ in libraries.values()}):
        try:
            found.append(f"{distribution}=={metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            found.append(f"{distribution} (not installed)")
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=600)
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--findings", type=Path, help="also write every finding as a JSON line to this file")
    parser.add_argument("--runtime", action="store_true", help="also the runtime guard on torch.optim (bwrap)")
    parser.add_argument("--cache", type=Path, default=REPO / "var" / "sandbox-measure", help="--runtime's cache")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    print(f"libraries: {versions(LIBRARIES)}; at most {args.per_library} bodies each, seed {args.seed}", flush=True)
    roots = {library: (library_root(d), folder, prefix) for library, (d, folder, prefix) in LIBRARIES.items()}
    corpus, texts = corpus_collect(roots, per_library=args.per_library, seed=args.seed)
    judged = corpus_judge(corpus, texts)
    for line in report(corpus, judged, examples=args.examples):
        print(line)
    if args.findings:
        findings_write(judged, args.findings)
    if args.runtime:
        for line in runtime_report(runtime_judge(corpus, texts, cache=args.cache), judged):
            print(line)


if __name__ == "__main__":
    main()
