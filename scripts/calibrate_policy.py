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

These are measurements, not a test: the numbers change with the policy and the libraries' versions, which it
prints.

Install (source only: the files are read, never imported, so no dependency of theirs is needed):
    .venv/bin/pip install --no-deps timm==1.0.31 diffusers==0.42.1 transformers==5.23.0
    .venv/bin/pip install --no-deps scipy==1.17.1   # 1.18 needs Python 3.12; torch==2.13.0 is in the venv
Run: .venv/bin/python scripts/calibrate_policy.py [--per-library 600] [--examples 10] [--seed 33]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
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
    from evaluation.sandbox.harness import answer_span

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


if __name__ == "__main__":
    main()
