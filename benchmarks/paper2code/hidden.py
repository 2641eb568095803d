"""Which files of a package give an answer away: the test entry point, every copy of a snippet's reference code, and
recorded calls of the reference (the proposed tests' inputs and outputs: what the reference returned is the answer).

One rule for two uses: such files are hidden from answers at run time (the workspace, the guard) and can never be
context files, which every prompt shows whole (FORMAT.md 5); a context file is also refused for a long one-line
reference alone (REFERENCE_LINE_MIN_TOKENS), which run time does not hide (an honest answer may import the module).
"""

from __future__ import annotations

import ast
import base64
import bisect
import contextlib
import io
import json
import math
import posixpath
import re
import struct
import textwrap
import tokenize
import warnings
from collections.abc import Iterable, Iterator, Mapping

import yaml

from benchmarks.paper2code.markers import AnnotatedFile, Snippet, count_loc, split_lines
from benchmarks.paper2code.masking import strip_markers

# A reference of one line of code is too common to be a copy (`return x`): it is looked for with the nearest line of
# code before or after it in its file, so what marks a copy always has this many lines of code.
REFERENCE_COPY_MIN_LOC = 2
# ...except in a context file, shown whole in every prompt, where a one-line reference of this many Python tokens is
# distinctive enough to mark a copy alone (`max_trim = int(math.floor(trim_frac * (n - 1)))` has 17, `return x * 2.5`
# 4): the file would give that answer away wherever the line stands, and a refusal costs its author one context file.
REFERENCE_LINE_MIN_TOKENS = 12
# The proposed tests' folder (submissions/proposed.py) and its subfolders holding the reference's recorded calls.
RECORDED_FOLDER = "rcb_replay"
RECORDED_PARTS = ("inputs", "outputs")
# Bounds that keep the content rules cheap: the bytes of a file decoded or searched (a recording is capped far below),
# the JSON lines tried as a document's start past leading comment lines, and the values walked in one file.
SCAN_BYTES = 4 << 20
_JSON_STARTS = 8
_WALK_NODES = 200_000
# A recorded value distinctive enough that finding it elsewhere means a copy: arrays' data from this many bytes with
# this many distinct byte values (a run of zeros is everywhere), numbers of this many significant digits, and, as
# numbers of one value are sometimes a constant of the code (pi), this many of them (or all there are).
RAW_NEEDLE_BYTES = 48
RAW_DISTINCT_BYTES = 8
NUMBER_DIGITS = 6
NUMBERS_FOUND = 3
_NUMBERS_PER_ARRAY = 4096
_NUMBER_RE = re.compile(rb"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d{1,4})?")
_FLOAT_FORMATS = {"float64": ("<d", 8), "float32": ("<f", 4)}  # low precision holds too few digits to be distinctive


def _normalised(text: str) -> str:
    """`text` as a copy is compared: its code alone, without whitespace (nor other line ends or indentation), without
    comments (a copy that lacks or adds a comment beside a reference is a copy), without a doctest's or an IPython
    session's prompts (`>>> `, `... `, `In [1]: `), with statements joined by `;` read as lines, and with a defined
    function's name left out (a copy in a function of another name is a copy)."""
    text = _DEF_NAME_RE.sub("def", _PROMPT_RE.sub("", text.replace("\r", "\n")))  # whole text: cheaper than by line
    return re.sub(r"\s+", "", "\n".join(_code_of(line) for line in text.splitlines()))


_PROMPT_RE = re.compile(r"^[ \t]*(?:>>>|\.\.\.:?|In \[\d*\]:)(?: |$)", re.M)
_DEF_NAME_RE = re.compile(r"def\s+[^\W\d]\w*")  # no `\b` before: a literal start is searched fast (`undef x` alike)


def _code_of(line: str) -> str:
    """`line` up to its `#` comment, and with a space for each `;`: a `#` or `;` outside the
    string literals that open and close on the line (a line is read alone, so a mark and the file holding it drop
    the same text of the same lines). Python allows `;` only between statements, never inside brackets."""
    if "#" not in line and ";" not in line:
        return line
    quote, index, code = "", 0, []
    while index < len(line):
        char = line[index]
        if quote:
            if char == "\\":
                code.append(line[index : index + 2])
                index += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            break
        elif char == ";":
            char = " "
        code.append(char)
        index += 1
    return "".join(code)


def _json_strings(text: str) -> str:
    """The strings of `text` read as a JSON document, in order, one after another on lines of their own, or "" when
    it is none: a Jupyter notebook holds its cells' code as JSON strings (one per line, quoted and escaped)."""
    if text.lstrip()[:1] not in ("{", "["):
        return ""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
        return ""
    strings, stack, budget = [], [value], _WALK_NODES
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, str):
            strings.append(node)
        elif isinstance(node, list):
            stack += reversed(node)
        elif isinstance(node, dict):
            stack += reversed(node.values())
    return "\n".join(strings)


_PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
_YAML_SUFFIXES = (".yaml", ".yml")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _literal_strings(path: str, text: str) -> str:
    """The strings a Python or YAML file (by its name) holds, decoded, one after another on lines of their own, or
    "": a reference inside a string literal (`\\n` escapes on one line, lines concatenated, a quoted YAML scalar or a
    list of its lines) is a copy as its raw text is not."""
    name = path.lower()
    if name.endswith(_PYTHON_SUFFIXES):
        return "\n".join(_python_strings(text[:SCAN_BYTES]))
    if name.endswith(_YAML_SUFFIXES):
        return "\n".join(_yaml_strings(text[:SCAN_BYTES]))
    return ""


def _python_strings(text: str) -> Iterator[str]:
    """The values of a Python file's string and bytes literals (an f-string's text parts), in order: from its syntax
    tree (fast), or, for a file that does not compile, as tokenize reads them up to where it cannot."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape sequence warns
            tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # ValueError: a null byte
        yield from _tokenized_strings(text)
        return
    literals = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))]
    for node in sorted(literals, key=lambda n: (n.lineno, n.col_offset)):  # as written: ast.walk goes by depth
        value = node.value
        yield value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _tokenized_strings(text: str) -> Iterator[str]:
    middle = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python 3.12 splits an f-string into parts
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == middle:
                yield token.string
            elif token.type == tokenize.STRING:
                quote = min(i for i in (token.string.find("'"), token.string.find('"')) if i >= 0)
                prefix = token.string[:quote].lower().replace("f", "")  # an f-string's braces read as text
                with (
                    contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError),
                    warnings.catch_warnings(),
                ):
                    warnings.simplefilter("ignore")
                    value = ast.literal_eval(prefix + token.string[quote:])
                    yield value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        return


# libyaml's scanner takes time in the square of a flow collection's nesting (`[[[...]]]`: 40,000 levels in 7 s, 4 MB
# at 100 levels in 13 s): a file nested deeper is read by `_yaml_flat` instead, in one pass.
YAML_FLOW_DEPTH_MAX = 32
_YAML_FLOW_RE = re.compile(r"[\[\]{}]")
_YAML_QUOTED_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'', re.S)


def _yaml_strings(text: str) -> Iterator[str]:
    """The string keys and scalar values of a YAML file's documents, in order, read as the parser's events: no
    document is composed (libyaml's composer recurses in C, and a deeply nested file crashes the process), and an
    alias is its name, never expanded."""
    if _yaml_flow_depth(text) > YAML_FLOW_DEPTH_MAX:
        yield from _yaml_flat(text)
        return
    loader = _YAML_LOADER(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.ScalarEvent):
                yield event.value
    except (yaml.YAMLError, RecursionError):
        return
    finally:
        loader.dispose()


def _yaml_flow_depth(text: str) -> int:
    """The deepest nesting of `[` and `{` (counted in quoted scalars too: a file is read one way or the other)."""
    depth = deepest = 0
    for mark in _YAML_FLOW_RE.findall(text):
        depth = depth + 1 if mark in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def _yaml_flat(text: str) -> Iterator[str]:
    """A YAML file's quoted scalars, each decoded alone, and between them its other text with the flow indicators
    (`[]{},`) as line ends, in order: what the events would give for the forms that escape or split a copy."""
    at = 0
    for quoted in _YAML_QUOTED_RE.finditer(text):
        yield re.sub(r"[\[\]{},]", "\n", text[at : quoted.start()])
        scalar = quoted.group()
        if scalar[0] == "'" or "\\" not in scalar:  # no escapes: its text as written (whitespace is not compared)
            yield scalar[1:-1].replace("''", "'") if scalar[0] == "'" else scalar[1:-1]
        else:
            try:
                yield str(yaml.load(scalar, Loader=_YAML_LOADER))  # noqa: S506 (a safe loader)
            except yaml.YAMLError:
                yield scalar
        at = quoted.end()
    yield re.sub(r"[\[\]{},]", "\n", text[at:])


def reference_copies(files: Mapping[str, bytes], references: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """The text files holding a copy of a reference, compared without whitespace (a copy with other line ends or
    indentation is a copy), as its raw text and as the strings it holds (a JSON document's, a Python or YAML file's
    literals): path -> the names of the references found in it. `references`: name -> the texts that mark a copy of
    it (package_references)."""
    wanted = {
        name: [m for mark in marks if (m := _normalised(strip_markers(mark)))] for name, marks in references.items()
    }
    found: dict[str, list[str]] = {}
    for path, data in files.items():
        if b"\x00" in data[:8192]:  # binary: not a text copy
            continue
        text = data.decode("utf-8", "replace")
        strings = [held for held in (_json_strings(text), _literal_strings(path, text)) if held]
        texts = [_normalised(text), *(_normalised(held) for held in strings)]
        names = [name for name, marks in wanted.items() if any(mark in t for mark in marks for t in texts)]
        if names:
            found[path] = names
    return found


def recorded_folder(path: str) -> bool:
    """Whether `path` lies in the inputs/ or outputs/ folder of a proposed tests' rcb_replay/ folder (wherever)."""
    folders = path.split("/")[:-1]
    return any(folder == RECORDED_FOLDER and folders[i + 1] in RECORDED_PARTS for i, folder in enumerate(folders[:-1]))


def recorded_calls(files: Mapping[str, bytes], among: Iterable[str] | None = None) -> set[str]:
    """The files (of `among`, by default all) holding recorded calls of the reference: any file in the inputs/ or
    outputs/ folder of a proposed tests' rcb_replay/ folder, any file holding recorded outputs in any JSON encoding
    (snapshot documents found by decoding it, after leading comment lines, also inside JSON strings), and any file
    holding the values of the package's own recorded outputs (`files`' recordings) in another form: an array's data
    as base64 or raw bytes, or its distinctive numbers as text."""
    documents: list[dict] = []
    found = set()
    for path, data in files.items():
        in_folder = recorded_folder(path)
        held = _recorded_documents(data) if in_folder or _may_hold_documents(data) else []
        documents += held
        if in_folder or held:
            found.add(path)
    wanted = set(files) if among is None else set(among) & set(files)
    needles, numbers = _recorded_values(documents)
    ordered = sorted(numbers)
    for path in wanted - found:
        if _holds_values(files[path][:SCAN_BYTES], needles, ordered):
            found.add(path)
    return found & wanted


def _may_hold_documents(data: bytes) -> bool:
    """Cheap look before decoding: a snapshot document names its roots (a JSON string escapes the quotes)."""
    head = data[:SCAN_BYTES]
    return b"roots" in head and b"\x00" not in head[:8192]


def _recorded_documents(data: bytes) -> list[dict]:
    """The snapshot documents ({"v": N, "roots": {...}}) a file holds once decoded as JSON, from its start or from
    one of its first lines that opens a JSON value (past comment lines), walking nested values and JSON strings."""
    text = data[:SCAN_BYTES].decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    starts = [len(text) - len(text.lstrip())]
    starts += [m.end() for m in re.finditer(r"^[ \t]*(?=[\[{])", text, re.M)][:_JSON_STARTS]
    for start in dict.fromkeys(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
            continue
        if held := _documents_walk(value):
            return held
    return []


def _documents_walk(value: object) -> list[dict]:
    found, stack, budget = [], [value], _WALK_NODES
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("v"), int) and isinstance(node.get("roots"), (dict, list)):
                found.append(node)
            else:
                stack += node.values()
        elif isinstance(node, list):
            stack += node
        elif isinstance(node, str) and "roots" in node and node.lstrip()[:1] in ("{", "["):
            with contextlib.suppress(ValueError, RecursionError):
                stack.append(json.loads(node))
    return found


def _recorded_values(documents: list[dict]) -> tuple[set[bytes], set[float]]:
    """The distinctive values of recorded outputs: the first bytes of each array's data (raw, and as the base64
    text stored), and the floats with at least NUMBER_DIGITS significant digits (float32 ones as float32 values)."""
    needles: set[bytes] = set()
    numbers: set[float] = set()
    stack: list[object] = [d["roots"] for d in documents]
    budget = _WALK_NODES
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, float) and _distinctive(node, 15):
            numbers.add(node)
        elif isinstance(node, list):
            stack += node
        elif isinstance(node, dict):
            stack += node.values()
            if isinstance(b64 := node.get("b64"), str):
                _array_values(b64, str(node.get("dtype", "")), needles, numbers)
    return needles, numbers


def _array_values(b64: str, dtype: str, needles: set[bytes], numbers: set[float]) -> None:
    try:
        raw = base64.b64decode(b64[: (RAW_NEEDLE_BYTES + _NUMBERS_PER_ARRAY * 8) // 3 * 4], validate=True)
    except ValueError:
        return
    head = raw[:RAW_NEEDLE_BYTES]
    if len(set(head)) >= RAW_DISTINCT_BYTES:
        needles.add(head)
        needles.add(base64.b64encode(head))  # 48 bytes: a whole number of base64 groups, a prefix of the stored text
    if dtype in _FLOAT_FORMATS:
        fmt, size = _FLOAT_FORMATS[dtype]
        for (x,) in struct.iter_unpack(fmt, raw[: len(raw) // size * size][: _NUMBERS_PER_ARRAY * size]):
            if _distinctive(x, 15 if size == 8 else 6):
                numbers.add(x)


def _distinctive(x: float, precision: int) -> bool:
    """At least NUMBER_DIGITS significant digits within its dtype's precision: 0.19999999999999996 (linspace's 0.2)
    is a short number and rounding noise, found in many files."""
    return math.isfinite(x) and _digits(f"{x:.{precision}g}") >= NUMBER_DIGITS


def _digits(shown: str) -> int:
    """Significant digits of a number as written."""
    mantissa = re.split(r"[eE]", shown)[0]
    return len(mantissa.replace("-", "").replace("+", "").replace(".", "").strip("0"))


def _holds_values(data: bytes, needles: set[bytes], numbers: list[float]) -> bool:
    """Whether `data` holds an array's data of the recordings, or NUMBERS_FOUND of their distinctive numbers (all of
    them when fewer) written as text, each exactly or rounded to the digits written (7 digits of a float64 leak it)."""
    if any(needle in data for needle in needles):
        return True
    if not numbers or b"\x00" in data[:8192]:
        return False
    seen: set[float] = set()
    for token in _NUMBER_RE.findall(data):
        if _digits(token.decode()) < NUMBER_DIGITS:
            continue
        x, half = float(token), _half_unit(token)
        at = bisect.bisect_left(numbers, x - half)
        if at < len(numbers) and numbers[at] <= x + half:
            seen.add(numbers[at])
            if len(seen) >= min(NUMBERS_FOUND, len(numbers)):
                return True
    return False


def _half_unit(token: bytes) -> float:
    """Half a unit of the last digit written: how far the number written may be from the value it rounds."""
    mantissa, _, exponent = token.lower().partition(b"e")
    power = int(exponent or 0) - len(mantissa.partition(b".")[2])
    return 0.5 * 10.0 ** max(-400, min(power, 308))  # past 1e308 a float overflows


def package_references(annotated: Iterable[AnnotatedFile], *, lines_alone: bool = False) -> dict[str, tuple[str, ...]]:
    """What marks a copy of each snippet's reference code, by `file: "name"`: its code, or, for a snippet shorter than
    REFERENCE_COPY_MIN_LOC, its code with the lines of its file before it up to the lines of code it lacks, and with
    those after it (two marks): a module holding the reference file's code is a copy whatever its snippets' size.
    `lines_alone` (context files): a one-line reference of REFERENCE_LINE_MIN_TOKENS marks a copy alone."""
    return {
        f'{snippet.file}: "{snippet.name}"': marks
        for parsed in annotated
        for snippet in parsed.snippets
        if (marks := _copy_marks(parsed, snippet, lines_alone=lines_alone))
    }


def _copy_marks(parsed: AnnotatedFile, snippet: Snippet, *, lines_alone: bool) -> tuple[str, ...]:
    if snippet.loc >= REFERENCE_COPY_MIN_LOC or not snippet.loc:
        return (snippet.code,) if snippet.loc else ()
    if lines_alone and _tokens(snippet.code) >= REFERENCE_LINE_MIN_TOKENS:
        return (snippet.code,)
    lines = split_lines(parsed.text)
    # 0-based: the start marker is line start_line - 1, the end marker line end_line - 1.
    need = REFERENCE_COPY_MIN_LOC - snippet.loc
    before = _to_code((lines[index] for index in range(snippet.start_line - 2, -1, -1)), need)
    after = _to_code((lines[index] for index in range(snippet.end_line, len(lines))), need)
    marks = ([f"{''.join(reversed(before))}\n{snippet.code}"] if before else []) + (
        [f"{snippet.code}\n{''.join(after)}"] if after else []
    )
    return tuple(marks) or (snippet.code,)  # its file holds too few lines of code: its code alone


def _tokens(code: str) -> int:
    """Python tokens of `code` (names, operators, numbers, strings; not comments, line ends or indentation)."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(textwrap.dedent(code)).readline)
        return sum(token.type not in _LAYOUT_TOKENS for token in tokens)
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError; count as a reader would
        return len(re.findall(r"\w+|[^\w\s]", "\n".join(_code_of(line) for line in code.splitlines())))


_LAYOUT_TOKENS = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def _to_code(lines: Iterable[str], need: int) -> list[str]:
    """The lines up to and with the `need`-th that holds code (markers and comments between), or none if fewer do."""
    taken = []
    for line in lines:
        taken.append(line)
        need -= bool(count_loc(line))
        if not need:
            return taken
    return []


def test_module(path: str) -> bool:
    """A file named as a test (pytest's names: test_*.py, *_test.py, conftest.py, or any file in a tests/ or test/
    folder): it holds the checks and the values they expect, so it is never shown to a model as context."""
    *folders, name = path.split("/")
    stem = name[:-3] if name.endswith(".py") else ""
    return (
        any(folder in ("tests", "test") for folder in folders)
        or stem.startswith("test_")
        or stem.endswith("_test")
        or name == "conftest.py"
    )


# The paper's text in a package (pset.py reads the first found); here as a context file must never be one of them.
PAPER_TEXT_NAMES = ("paper2code_paper.tex", "paper2code_paper.md")  # first wins


def context_refusals(
    *,
    context_paths: Iterable[str],
    files: Mapping[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    test_entry_point: str,
) -> dict[str, str]:
    """Why each context file that would give the answer away cannot be one: path -> the reason, in an author's words.
    A context file is shown whole in every prompt, so the test entry point or another test file, an annotated file, a
    file holding a snippet's reference code or the reference's recorded calls would put the answer (or the tests that
    know it) in front of the model."""
    refusals: dict[str, str] = {}
    copies = reference_copies(
        {path: files[path] for path in context_paths if path in files and path not in annotated},
        package_references(annotated.values(), lines_alone=True),
    )
    recorded = recorded_calls(files, among=context_paths)
    for path in context_paths:
        if path == test_entry_point:
            refusals[path] = (
                "is the test entry point: a context file is shown to the model whole, and the tests (and the "
                "reference they compare with) must stay hidden"
            )
        elif posixpath.basename(path) in PAPER_TEXT_NAMES:
            refusals[path] = (
                "is the paper's text: the prompts with the paper give it once, but a context file is in every prompt, "
                "so the runs without the paper (the ablation) would have it too"
            )
        elif path in annotated:
            refusals[path] = "is an annotated file: shown whole as context, it would give every snippet's code away"
        elif test_module(path):
            refusals[path] = (
                "is a test file: a context file is shown to the model whole, and the tests (and the values they "
                "expect from the reference) must stay hidden"
            )
        elif path in copies:
            names = copies[path]
            refusals[path] = (
                f"holds the reference code of {names[0]}"
                + (f" and {len(names) - 1} more snippet(s)" if len(names) > 1 else "")
                + ": a context file is shown to the model whole, so the answer would be in every prompt; leave it "
                "out of the context files (the tests can still import it)"
            )
        elif path in recorded:
            refusals[path] = (
                "holds recorded calls of the reference (the proposed tests' inputs and outputs): a context file is "
                "shown to the model whole, so what the reference returned would be in every prompt; it stays "
                "beside the tests, hidden, as the test entry point does"
            )
    return refusals
