"""Parse snippet markers in an annotated file (FORMAT.md 3) and count a snippet's lines of code (4)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.paper2code.problems import Problem, Severity

START_RE = re.compile(r'^\s*#\s*<paper2code\s+name="([^"]+)">\s*$')
END_RE = re.compile(r'^\s*#\s*</paper2code\s+name="([^"]+)">\s*$')

# Loose enough to catch typos (<paper2cod, <Paper2Code, paper_code) yet not every mention of paper2code_test.py.
_NEAR_MISS_RE = re.compile(r"<\s*/?\s*paper[\s_-]*2?[\s_-]*cod|paper2code\s+name\b", re.IGNORECASE)
_NAME_RE = re.compile(r"""name\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s>]+))""")
_EXPECTED = '# <paper2code name="...">'


def split_lines(text: str) -> list[str]:
    """Split on "\\n" only, keeping each line's terminator, so "".join(...) gives the text back.

    Not str.splitlines: it also breaks at \\f, \\x1c or \\u2028, which do not end a line of Python source.
    """
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def is_marker(line: str) -> bool:
    """Whether a line is a start or end marker."""
    return bool(START_RE.match(line) or END_RE.match(line))


def count_loc(code: str) -> int:
    """Lines of code: lines that, stripped, are non-empty and do not start with "#"."""
    return sum(1 for line in code.split("\n") if (s := line.strip()) and not s.startswith("#"))


def code_indent(code: str) -> str:
    """The indentation of the placeholder lines: the smallest space/tab indent of a non-blank code line."""
    widths = [len(line) - len(line.lstrip(" \t")) for line in split_lines(code) if line.strip()]
    return " " * min(widths, default=0)


def body_reindent(body: str, indent: str) -> str:
    """A snippet body given at any consistent indentation, moved to `indent` (the snippet's own indentation).

    Leading tabs count as Python reads them (to the next multiple of 8 columns), so a tab-indented or mixed body
    keeps the block structure Python gives it; the common indentation goes and `indent` takes its place. Blank
    lines stay blank; the lines' own relative indentation and everything after it are kept.
    """
    lines = split_lines(body)
    expanded = [_leading(line).expandtabs(8) + line.lstrip(" \t") if line.strip() else line for line in lines]
    widths = [len(line) - len(line.lstrip(" ")) for line in expanded if line.strip()]
    if not widths:
        return body
    common = min(widths)
    return "".join(indent + line[common:] if line.strip() else "\n" * line.endswith("\n") for line in expanded)


def indent_width(text: str) -> int:
    """Columns of a line's leading space/tab indentation, as Python counts them (a tab to the next multiple of 8)."""
    return len(text[: len(text) - len(text.lstrip(" \t"))].expandtabs(8))


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass(frozen=True)
class Snippet:
    """One annotated region of a file; lines are 1-based and point at the marker lines."""

    name: str
    file: str
    index: int
    start_line: int
    end_line: int
    indent: str
    parent: int | None
    depth: int
    code: str
    loc: int

    @property
    def code_indent(self) -> str:
        return code_indent(self.code)


@dataclass(frozen=True)
class AnnotatedFile:
    """A file's text with its snippets and the problems found in its markers."""

    path: str
    text: str
    snippets: tuple[Snippet, ...]
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def is_valid(self) -> bool:
        return not self.errors

    def snippet(self, name: str) -> Snippet:
        """The first snippet (by start line) with this name; KeyError if there is none."""
        for s in self.snippets:
            if s.name == name:
                return s
        raise KeyError(name)

    def children(self, snippet: Snippet) -> tuple[Snippet, ...]:
        return tuple(s for s in self.snippets if s.parent == snippet.index)


@dataclass
class _Open:
    name: str
    line: int
    indent: str
    crossed: bool = False


class _Scan:
    """One pass over a file's lines with a stack of open snippets, collecting pairs and problems."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self.closed: list[tuple[_Open, int]] = []
        self.stack: list[_Open] = []
        self.first_start: dict[str, int] = {}
        # Near-miss lines as (line, name or "", is an end, reason): a knock-on error names the line behind it.
        self.misses: list[tuple[int, str, bool, str]] = []

    def report(self, line: int, message: str, *names: str, severity: Severity = "error") -> None:
        self.problems.append(Problem(file=self.path, line=line, message=message, names=names, severity=severity))

    def start(self, n: int, name: str, indent: str) -> None:
        if name in self.first_start:
            self.report(n, f'duplicate snippet name "{name}" (lines {self.first_start[name]} and {n})', name)
        else:
            self.first_start[name] = n
        self.stack.append(_Open(name, n, indent))

    def _miss_behind(self, name: str, *, end: bool, before: int | None = None, after: int | None = None) -> str:
        """' ; line N looks like its start/end marker but is malformed (why)' for the near miss most likely behind
        an unmatched marker: one of that name, else the nearest of the right kind; "" when there is none."""
        kind = [
            m
            for m in self.misses
            if m[2] == end and (before is None or m[0] < before) and (after is None or m[0] > after)
        ]
        named = [m for m in kind if m[1] == name]
        pick = named or kind
        if not pick:
            return ""
        line, _, _, reason = pick[-1] if before is not None else pick[0]
        return f"; line {line} looks like its {'end' if end else 'start'} marker but is malformed ({reason})"

    def end(self, n: int, name: str, indent: str) -> None:
        if not self.stack:
            self.report(
                n,
                f'end marker for "{name}" has no matching start marker' + self._miss_behind(name, end=False, before=n),
                name,
            )
            return
        inner = self.stack[-1]
        if inner.name == name:
            self.stack.pop()
            if inner.indent != indent:
                self.report(
                    n,
                    f'end marker for "{name}" at line {n} is not indented like its start marker at line {inner.line}',
                    name,
                )
            if not inner.crossed:
                self.closed.append((inner, n))
            return
        at = next((i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i].name == name), None)
        if at is None:
            self.report(
                n,
                f'end marker for "{name}" has no matching start marker; the innermost open '
                f'snippet is "{inner.name}" (line {inner.line})' + self._miss_behind(name, end=False, before=n),
                name,
                inner.name,
            )
            return
        self.report(
            n,
            f'end marker for "{name}" (started at line {self.stack[at].line}) closes it while '
            f'"{inner.name}" (line {inner.line}) is still open; snippets must nest',
            name,
            inner.name,
        )
        for crossed in self.stack[at + 1 :]:
            crossed.crossed = True
        del self.stack[at]

    def near_miss(self, n: int, line: str) -> None:
        name = _NAME_RE.search(line)
        names = tuple(g for g in name.groups() if g)[:1] if name else ()
        reason = _near_miss_reason(line)
        self.misses.append(
            (n, names[0].rstrip("> ").strip("\"'") if names else "", bool(re.search(r"<\s*/", line)), reason)
        )
        self.report(
            n,
            f"looks like a snippet marker but is not one ({reason}); expected {_EXPECTED} or its </paper2code ...> end",
            *names,
            severity="warning",
        )

    def finish(self) -> None:
        for unclosed in self.stack:
            self.report(
                unclosed.line,
                f'start marker for "{unclosed.name}" is never closed'
                + self._miss_behind(unclosed.name, end=True, after=unclosed.line),
                unclosed.name,
            )
        self.problems.sort(key=lambda p: p.line)


def parse(text: str, path: str = "<string>") -> AnnotatedFile:
    """Find every snippet and marker problem in `text`; never raises.

    Every pair closed on the innermost open snippet is returned, even when the file has
    errors elsewhere, with an indentation mismatch or with a duplicate name. Pairs that
    cross (A opens, B opens, A closes) overlap instead of nesting, so both are reported
    once and neither is returned; the returned snippets therefore always form a tree.
    """
    lines = split_lines(text)
    scan = _Scan(path)
    for n, line in enumerate(lines, start=1):
        if m := START_RE.match(line):
            scan.start(n, m.group(1), _leading(line))
        elif m := END_RE.match(line):
            scan.end(n, m.group(1), _leading(line))
        elif _NEAR_MISS_RE.search(line):
            scan.near_miss(n, line)
    scan.finish()
    return AnnotatedFile(path=path, text=text, snippets=_build(scan.closed, lines, path), problems=tuple(scan.problems))


def _build(closed: list[tuple[_Open, int]], lines: list[str], path: str) -> tuple[Snippet, ...]:
    snippets: list[Snippet] = []
    enclosing: list[Snippet] = []
    for o, end in sorted(closed, key=lambda pair: pair[0].line):
        while enclosing and enclosing[-1].end_line < o.line:
            enclosing.pop()
        code = "".join(lines[o.line : end - 1])
        s = Snippet(
            name=o.name,
            file=path,
            index=len(snippets),
            start_line=o.line,
            end_line=end,
            indent=o.indent,
            parent=enclosing[-1].index if enclosing else None,
            depth=len(enclosing),
            code=code,
            loc=count_loc(code),
        )
        snippets.append(s)
        enclosing.append(s)
    return tuple(snippets)


def _near_miss_reason(line: str) -> str:
    """Say what keeps a marker-like line from matching START_RE or END_RE."""
    body = line.strip()
    reasons: list[str] = []
    if not body.startswith("#"):
        reasons.append('text before "#"' if "#" in body.split("<", 1)[0] else 'no "#" before the tag')
    if not re.search(r"</?paper2code(\s|>|$)", body):
        reasons.append('the tag is not spelled "<paper2code" or "</paper2code"')
    name = re.search(r'name\s*=\s*(")?([^"]*)(")?', body)
    if name is None:
        reasons.append('no name="..." attribute')
    elif name.group(1) is None:
        reasons.append("the name is not in double quotes")
    elif not name.group(3):
        reasons.append("the name's closing quote is missing")
    elif not name.group(2):
        reasons.append("the name is empty")
    elif not re.search(r'name="', body):
        reasons.append('no spaces are allowed around "=" in name="..."')
    elif (tail := re.search(r'name="[^"]*"(\s*)(>?)(.*)$', body)) is not None:
        if not tail.group(2):
            reasons.append('no ">" right after the name')
        elif tail.group(1):
            reasons.append('a space before ">"')
        if tail.group(3).strip():
            reasons.append(f"unexpected text at the end: {tail.group(3).strip()!r}")
    return "; ".join(reasons) or "unexpected spacing or characters"
