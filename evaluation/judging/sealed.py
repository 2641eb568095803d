"""Sealed verdicts: the answer judged where it cannot reach the reference or the comparison (DESIGN.md, Sandbox).

Once per task revision, beside its test manifest, the paper's tests run twice with the reference in place under the
recorder (programs/recorder.py), which records each call of every snippet's enclosing function (the innermost `def`
holding all its lines): the arguments at entry as a pickle that only a sandbox ever loads and the names of their dict
keys and attributes as plain data, and what the call returned and its arguments' state at exit as plain data
(programs/snapshot.py). Then the reference itself is replayed on those
inputs: a snippet is sealed only when its two recordings agree and its reference's replay agrees with them, so a
verdict never turns on what cannot be replayed. Everything else is unsealed, with the reason.

An answer of a sealed snippet is replayed alone (programs/replayer.py) in a work folder holding the task's files
minus the hidden ones (no test, no reference copy, no recorded output) with the answer spliced in; its output is
parsed strictly here, outside any sandbox (judging/compare.py), and compared with the recording.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from evaluation.judging.compare import AtEntry, SnapshotError, Value, compare, entry_parse, parse
from sandbox import Limits, Session, programs

# 2: a sealed function's entry keeps its calls' names at entry ("entries"); a version-1 recording has none, and its
# replays tolerate no extra state (compare.AtEntry).
RECORDING_VERSION = 2
RECORDER_FILE = ".rcb-record.py"
REPLAYER_FILE = ".rcb-replay.py"
INPUTS_FILE = ".rcb-replay-inputs.json"
# The attribute setter comes before both: the recorder's pickles name it and the replayer's unpickling finds it.
RECORDER_SOURCE = "\n".join(programs.source(name) for name in ("snapshot", "attributes", "recorder"))
REPLAYER_SOURCE = "\n".join(programs.source(name) for name in ("snapshot", "attributes", "replayer"))
# Calls and bytes of inputs recorded per function; the rest of its calls are counted, not recorded.
CALLS_MAX = 20
INPUT_BYTES_MAX = 8 * 1024 * 1024
# What one call's outputs may take as data: bigger values are cut where they pass it (a "truncated" node).
SNAPSHOT_CAPS = {"max_bytes": 4 * 1024 * 1024, "max_depth": 40, "max_items": 100_000}
REPORT_BYTES_MAX = 64 * 1024 * 1024
# The tolerance of floating values when the paper's assertions used none looser: numpy's allclose defaults.
RTOL_DEFAULT, ATOL_DEFAULT = 1e-5, 1e-8
# The least tolerance of each low-precision dtype (torch.testing.assert_close's defaults: its resolution): a correct
# answer that orders its bfloat16 arithmetic otherwise than the reference differs from the recording by that much.
LOW_PRECISION_LEAST = {"bfloat16": (1.6e-2, 1e-5), "float16": (1e-3, 1e-5)}


@dataclass(frozen=True)
class Target:
    """A function holding a snippet: where the recorder finds its calls and the replayer its definition."""

    key: str
    file: str
    qualname: str
    name: str
    line: int  # its code's first line: the first decorator's, or the def's

    def as_dict(self) -> dict:
        return {"key": self.key, "file": self.file, "qualname": self.qualname, "name": self.name, "line": self.line}


@dataclass(frozen=True)
class SnippetSpan:
    """A snippet as sealing needs it: its key, its file, and its marker lines."""

    key: str
    file: str
    start_line: int
    end_line: int


def snippet_key(file_path: str, position: int) -> str:
    return f"{file_path}#{position}"


def _functions(tree: ast.Module) -> Iterable[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, bool]]:
    """Every function of a module with its qualified name and whether it is defined inside another function."""

    def walk(node: ast.AST, prefix: str, nested: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, prefix + child.name, nested
                yield from walk(child, f"{prefix}{child.name}.<locals>.", True)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.", nested)
            else:
                yield from walk(child, prefix, nested)

    yield from walk(tree, "", False)


def _last_code_line(source: str, span: SnippetSpan) -> int:
    """The snippet's last line of code (its end marker and trailing comments are outside any function's lines)."""
    lines = source.splitlines()
    code = [
        number
        for number in range(span.start_line + 1, span.end_line)
        if number <= len(lines) and lines[number - 1].strip() and not lines[number - 1].strip().startswith("#")
    ]
    return max(code, default=span.start_line)


def snippet_target(source: str, span: SnippetSpan) -> Target | str:
    """The innermost function holding all of the snippet's lines, or why there is none to seal it by."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"its file does not parse: {exc}"
    last = _last_code_line(source, span)
    holding = [
        (node, qualname, nested)
        for node, qualname, nested in _functions(tree)
        if node.lineno < span.start_line and (node.end_lineno or 0) >= last
    ]
    if not holding:
        return "no function holds it (module or class level code)"
    node, qualname, nested = max(holding, key=lambda item: item[0].lineno)
    if nested:
        return f"its function {qualname} is defined inside another function (it cannot be called alone)"
    if isinstance(node, ast.AsyncFunctionDef) or _yields(node):
        return f"its function {qualname} is a generator or coroutine"
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return Target(f"{span.file}:{qualname}", span.file, qualname, node.name, first)


def _yields(function: ast.AST) -> bool:
    """Whether the function itself yields (a yield inside a function or lambda nested in it does not count)."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _marked(stdout: str, mark: str) -> str | None:
    """The program's one report line; None when there is none or more than one (the answer, which runs in the
    replay's process and can read its spec, wrote one of its own)."""
    found = re.findall(rf"(?:^|\n){re.escape(mark)} (.*?)(?=\n|$)", stdout)
    return found[0] if len(found) == 1 else None


# JSON's structural characters, and each string as a token (its escapes dropped first): what `_structure` counts.
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'"[]{},:'))
_STRINGS = re.compile(rb'"[^"]*"')


def _structure(data: bytes) -> int:
    """How many of JSON's structural characters (brackets, braces, commas, colons) lie outside its strings: every
    value past the first takes one, so this bounds how many objects json.loads makes of DATA."""
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    return len(_STRINGS.sub(b"", kept))


def _report(stdout: str, mark: str, *, max_bytes: int, max_values: int) -> dict | None:
    """The program's report, read as untrusted data: None for anything but one well-formed report of at most
    `max_bytes` bytes and `max_values` JSON values, each bound checked before what it bounds is decoded (a report
    of millions of empty objects would cost the worker gigabytes as Python objects)."""
    line = _marked(stdout, mark)
    longest = _base64_length(min(max_bytes, REPORT_BYTES_MAX))
    if line is None or len(line) > longest + 32:  # the recording's line has its exit status first
        return None
    blob = line.rsplit(" ", 1)[-1]
    if len(blob) > longest:
        return None
    try:
        data = base64.b64decode(blob, validate=True)
        if _structure(data) > max_values:
            return None
        report = json.loads(data.decode("utf-8"))  # UTF-8 only: json would take UTF-16 bytes, which count otherwise
    except (binascii.Error, ValueError, RecursionError):
        return None
    if not isinstance(report, dict) or report.get("v") != 1 or not isinstance(report.get("targets"), dict):
        return None
    return report


def _base64_length(size: int) -> int:
    return 4 * ((size + 2) // 3)


# Room in a report per call and per report for what is not a snapshot (keys, an error's text, the target's key).
_REPORT_SLACK = 8 * 1024


def _replay_report_bounds(outputs: Sequence[str], key: str) -> tuple[int, int]:
    """The most bytes and JSON values a replay's report of these recorded outputs can need: each call's outputs as
    long as `_differs` reads them (twice the recording's, plus 64 KiB), twice that as a JSON string (a snapshot's
    quotes are escaped), and about four values per call."""
    size = sum(2 * _replay_output_bound(text) + _REPORT_SLACK for text in outputs) + _REPORT_SLACK + 8 * len(key)
    return size, 8 * (len(outputs) + 4)


def _replay_output_bound(expected: str) -> int:
    """How long a replayed call's outputs may be: parsing costs time per byte, so within twice its recording's."""
    return 2 * len(expected) + 64 * 1024


def _recording_report_bounds(targets: int) -> tuple[int, int]:
    """The most bytes and JSON values a recording run's report of `targets` functions can need: per function its
    inputs (base64 of INPUT_BYTES_MAX) and CALLS_MAX calls' outputs (twice the snapshot's cap, as `_parse` reads
    them, escaped as a JSON string) and names at entry (within the snapshot's cap, escaped too) and its problems'
    text, a few values per call and per function."""
    per_target = _base64_length(INPUT_BYTES_MAX) + CALLS_MAX * (6 * SNAPSHOT_CAPS["max_bytes"] + _REPORT_SLACK)
    return min(REPORT_BYTES_MAX, targets * (per_target + 4 * _REPORT_SLACK) + _REPORT_SLACK), 32 + targets * (
        32 + 8 * CALLS_MAX
    )


def _parse(text: object, max_bytes: int = SNAPSHOT_CAPS["max_bytes"] * 2) -> Value:
    if not isinstance(text, str):
        raise SnapshotError("$", "not a snapshot")
    return parse(text.encode("ascii", "replace"), max_bytes=max_bytes, max_depth=200)


@dataclass(frozen=True)
class Tolerance:
    """How close a replayed floating value must be to the recorded one: `rtol` and `atol`, or by the dtype an array
    or tensor is stored in where `by_dtype` names it (dtype -> (rtol, atol), compare.compare's rule)."""

    rtol: float
    atol: float
    by_dtype: Mapping[str, tuple[float, float]] | None = None


def judging_tolerance(rtol: float, atol: float) -> Tolerance:
    """The tolerance a replay is judged at, from the loosest of the paper's own assertions (`rtol`, `atol`): those,
    and no less than its resolution for a low-precision array or tensor (LOW_PRECISION_LEAST)."""
    least = {dtype: (max(rtol, low), max(atol, high)) for dtype, (low, high) in LOW_PRECISION_LEAST.items()}
    return Tolerance(rtol, atol, least)


def recorded_tolerance(recording: Mapping) -> Tolerance:
    """The judging tolerance of a stored recording (it keeps the paper's loosest rtol and atol)."""
    return judging_tolerance(float(recording["tolerance"]["rtol"]), float(recording["tolerance"]["atol"]))


def _record_run(
    *, session: Session, files: Mapping[str, bytes], entry: str, targets: list[Target], hidden: Iterable[str], limits
):
    mark = "rcb-record-" + secrets.token_hex(12)
    spec = {
        "mark": mark,
        "targets": [t.as_dict() for t in targets],
        "hidden_modules": sorted({PurePosixPath(p).stem for p in hidden if p.endswith(".py")}),
        "max_calls": CALLS_MAX,
        "max_bytes": INPUT_BYTES_MAX,
        "snapshot": SNAPSHOT_CAPS,
    }
    result = session.run(
        files={**files, RECORDER_FILE: RECORDER_SOURCE.encode()},
        command=[session.environment.python, "-B", RECORDER_FILE, entry, json.dumps(spec)],
        limits=replace(limits, output_bytes=max(limits.output_bytes, REPORT_BYTES_MAX)),
    )
    line = _marked(result.stdout, mark)
    max_bytes, max_values = _recording_report_bounds(len(targets))
    report = _report(result.stdout, mark, max_bytes=max_bytes, max_values=max_values)
    if report is None or line is None:
        tail = (result.stderr or result.stdout)[-600:]
        return None, f"the recording run did not finish (exit {result.exit_code}): {tail}"
    return report, ""


def replay_files(files: Mapping[str, bytes], hidden: Iterable[str]) -> dict[str, bytes]:
    """What a replay's work folder holds: the task's files but the hidden ones."""
    hidden = set(hidden)
    return {path: data for path, data in files.items() if path not in hidden}


def _replay_run(
    *,
    session: Session,
    files: Mapping[str, bytes],
    target: Target,
    inputs: list[str],
    outputs: Sequence[str],
    limits: Limits,
    answer: tuple[int, int] | None = None,
    inputs_file: bytes | None = None,
) -> tuple[list[dict] | None, str, bool]:
    """The replay's calls, or None and why not; and whether it ran past its time limit. `outputs`: the recorded
    outputs (they bound what the replay's report may take); `inputs_file`: the inputs file's content when the caller
    has it made already (what `inputs` would make)."""
    mark = "rcb-replay-" + secrets.token_hex(12)
    max_bytes, max_values = _replay_report_bounds(outputs, target.key)
    spec: dict = {"mark": mark, "targets": [target.as_dict()], "inputs": INPUTS_FILE, "snapshot": SNAPSHOT_CAPS}
    if answer is not None:  # the fork server never preloads what the answer's own lines import
        spec.update(answer_file=target.file, first_line=answer[0], last_line=answer[1])
    result = session.run(
        files={
            **files,
            REPLAYER_FILE: REPLAYER_SOURCE.encode(),
            INPUTS_FILE: inputs_file if inputs_file is not None else json.dumps({target.key: inputs}).encode(),
        },
        command=[session.environment.python, "-B", REPLAYER_FILE, json.dumps(spec)],
        # What the answer may print, as in a test run, and the longest report line the recording can need.
        limits=replace(limits, output_bytes=limits.output_bytes + _base64_length(max_bytes) + 1024),
    )
    report = _report(result.stdout, mark, max_bytes=max_bytes, max_values=max_values)
    if report is None:
        why = "it timed out" if result.timed_out else f"exit {result.exit_code}"
        return (
            None,
            f"the replay gave no single readable report ({why}): {(result.stderr or result.stdout)[-400:]}",
            result.timed_out,
        )
    calls = report["targets"].get(target.key)
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        return None, "the replay reported no calls", False
    return calls, "", False


def _differs(
    recorded: list[str],
    replayed: list[dict],
    tolerance: Tolerance,
    parsed: Sequence[Value] | None = None,
    entries: Sequence[AtEntry | None] = (),
    notes: list[str] | None = None,
) -> str:
    """The first difference of a replay from the recording, named ('' when they agree); `parsed`: the recorded
    outputs already parsed (a recording is parsed once per worker, not per replay); `entries`: each call's names at
    entry (none: no extra state tolerated), what the answer added is appended to `notes`."""
    if len(replayed) != len(recorded):
        return f"the replay made {len(replayed)} of the {len(recorded)} recorded calls"
    for index, (expected, got) in enumerate(zip(recorded, replayed, strict=True)):
        if not isinstance(got, dict):
            return f"call {index + 1}: unreadable replay"
        if "error" in got:
            return f"call {index + 1}: {str(got['error'])[:300]}"
        added: list[str] = []
        try:
            difference = compare(
                parsed[index] if parsed is not None else _parse(expected),
                _parse(got.get("outputs"), _replay_output_bound(expected)),
                rtol=tolerance.rtol,
                atol=tolerance.atol,
                by_dtype=tolerance.by_dtype,
                entry=entries[index] if index < len(entries) else None,
                notes=added,
            )
        except SnapshotError as exc:
            return f"call {index + 1}: the replay's output was refused: {exc}"
        if difference is not None:
            return f"call {index + 1}: {difference.words()}"
        if notes is not None:
            notes.extend(f"call {index + 1}: {note}" for note in added)
    return ""


def _truncated(outputs: list[str]) -> str:
    """Where a recorded output was cut at the snapshot's caps ('' when none was, or unreadable: left to the replay)."""
    for index, text in enumerate(outputs):
        try:
            value = _parse(text)
        except SnapshotError:
            continue
        if value.truncated:
            return f"call {index + 1} at {value.truncated[0]}"
    return ""


def recording_make(
    *,
    session: Session,
    files: Mapping[str, bytes],
    test_entry_point: str,
    hidden: Iterable[str],
    snippets: Iterable[SnippetSpan],
    limits: Limits,
    store,
) -> dict:
    """Record the reference's calls of every snippet's function twice, replay the reference alone, and keep what
    agrees: the task revision's recording (`store(bytes) -> digest` keeps inputs and outputs content-addressed).
    Never raises for a snippet it cannot seal: it says why."""
    hidden = frozenset(hidden)
    snippets = list(snippets)
    by_snippet: dict[str, str] = {}
    reasons: dict[str, str] = {}
    targets: dict[str, Target] = {}
    for span in snippets:
        source = files.get(span.file, b"").decode("utf-8", "replace")
        found = snippet_target(source, span)
        if isinstance(found, str):
            reasons[span.key] = found
        else:
            targets.setdefault(found.key, found)
            by_snippet[span.key] = found.key
    recording: dict = {"v": RECORDING_VERSION, "targets": {}, "snippets": {}, "tolerance": {}}
    runs = []
    failure = ""
    if targets:
        for _ in range(2):
            report, failure = _record_run(
                session=session,
                files=files,
                entry=test_entry_point,
                targets=list(targets.values()),
                hidden=hidden,
                limits=limits,
            )
            if report is None:
                break
            runs.append(report)
    seen = [run.get("tolerance", {}) for run in runs]
    tolerance = judging_tolerance(
        max([RTOL_DEFAULT, *(float(t.get("rtol") or 0) for t in seen)]),
        max([ATOL_DEFAULT, *(float(t.get("atol") or 0) for t in seen)]),
    )
    recording["tolerance"] = {"rtol": tolerance.rtol, "atol": tolerance.atol}
    visible = replay_files(files, hidden)
    for key, target in targets.items():
        entry: dict = {**target.as_dict(), "sealed": False, "reason": "", "calls": 0, "called": 0}
        recording["targets"][key] = entry
        if len(runs) < 2:
            entry["reason"] = failure or "the recording run failed"
            continue
        first, second = (run.get("targets", {}).get(key, {}) for run in runs)
        calls, again = first.get("calls", []), second.get("calls", [])
        entry["called"] = int(first.get("called", 0))
        if not calls:
            problems = first.get("problems") or []
            entry["reason"] = problems[0] if problems else "the tests never call its function"
            continue
        nondeterministic = _differs(
            [c["outputs"] for c in calls], [{"outputs": c["outputs"]} for c in again], tolerance
        )
        if nondeterministic:
            entry["reason"] = f"nondeterministic: two reference runs differ ({nondeterministic})"
            continue
        inputs = [c["inputs"] for c in calls]
        outputs = [c["outputs"] for c in calls]
        cut = _truncated(outputs)
        if cut:
            entry["reason"] = (
                f"its recorded outputs pass the snapshot's caps ({cut}): a replay could not be compared whole"
            )
            continue
        replayed, problem, _ = _replay_run(
            session=session, files=visible, target=target, inputs=inputs, outputs=outputs, limits=limits
        )
        differs = problem or _differs(outputs, replayed or [], tolerance)
        if differs:
            entry["reason"] = f"the reference's own replay differs from its recording ({differs})"
            continue
        entry.update(
            sealed=True,
            calls=len(calls),
            inputs=store(json.dumps(inputs).encode()),
            outputs=store(json.dumps(outputs).encode()),
            entries=store(json.dumps([c.get("entry") for c in calls]).encode()),
        )
    for span in snippets:
        function = by_snippet.get(span.key)
        if function is None:
            recording["snippets"][span.key] = {"target": None, "sealed": False, "reason": reasons[span.key]}
        else:
            target_entry = recording["targets"][function]
            recording["snippets"][span.key] = {
                "target": function,
                "sealed": target_entry["sealed"],
                "reason": target_entry["reason"],
            }
    return recording


@dataclass(frozen=True)
class Replay:
    """A sealed snippet's answer replayed: `difference` names the first disagreement ('' when it agrees)."""

    sealed: bool
    difference: str = ""
    reason: str = ""  # why the snippet is unsealed
    timed_out: bool = False  # the replay ran past its time limit (its difference says so)
    also_difference: str | None = None  # the same replay under answer_replay's `also` tolerance (None: not asked)
    added_state: tuple[str, ...] = ()  # what the answer added to its arguments' state (compare.AtEntry): flagged

    @property
    def agrees(self) -> bool:
        return self.sealed and not self.difference


def recording_blobs(recording: Mapping | None) -> set[str]:
    """The blobs a recording keeps (each sealed function's inputs, outputs and names at entry), as their digests."""
    targets = (recording or {}).get("targets", {}).values()
    return {t[part] for t in targets if t.get("sealed") for part in ("inputs", "outputs", "entries") if part in t}


def snippet_sealing(recording: Mapping | None, key: str) -> tuple[bool, str]:
    """Whether the snippet is sealed in the recording, and why not."""
    if not recording:
        return False, "no recording"
    entry = recording.get("snippets", {}).get(key)
    if not entry:
        return False, "not in the recording"
    return bool(entry.get("sealed")), str(entry.get("reason", ""))


@dataclass(frozen=True)
class _Recorded:
    """What a sealed function's replays need of its recording, read and parsed once: the inputs file's content,
    the recorded outputs as text (their lengths bound a replay's) and parsed, and the calls' names at entry."""

    inputs_file: bytes
    outputs: list[str]
    parsed: tuple[Value, ...] | None  # None: an output was unreadable, left to _differs to say so
    size: int
    entries: tuple[AtEntry | None, ...] = ()  # none in a version-1 recording


# Recordings read and parsed, by their blobs' digests (content-addressed: never stale), at most this many bytes of
# their text kept: a worker replays the same few tasks' functions item after item.
RECORDED_CACHE_BYTES = 64 * 1024 * 1024
_recorded_cache: OrderedDict[tuple[str, str, str, str], _Recorded] = OrderedDict()
_recorded_lock = threading.Lock()


def _recorded(entry: Mapping, load: Callable[[str], bytes]) -> _Recorded:
    key = (entry["key"], entry["inputs"], entry["outputs"], entry.get("entries", ""))
    with _recorded_lock:
        found = _recorded_cache.get(key)
        if found is not None:
            _recorded_cache.move_to_end(key)
            return found
    inputs = json.loads(load(entry["inputs"]))
    outputs = json.loads(load(entry["outputs"]))
    try:
        parsed: tuple[Value, ...] | None = tuple(_parse(text) for text in outputs)
    except SnapshotError:
        parsed = None
    names = json.loads(load(entry["entries"])) if entry.get("entries") else []
    entries = tuple(entry_parse(text) for text in names) if isinstance(names, list) else ()
    inputs_file = json.dumps({entry["key"]: inputs}).encode()
    size = len(inputs_file) + sum(len(text) for text in outputs) + sum(len(t) for t in names if isinstance(t, str))
    found = _Recorded(inputs_file, outputs, parsed, size, entries)
    with _recorded_lock:
        _recorded_cache[key] = found
        while sum(r.size for r in _recorded_cache.values()) > RECORDED_CACHE_BYTES and len(_recorded_cache) > 1:
            _recorded_cache.popitem(last=False)
    return found


def answer_replay(
    *,
    session: Session,
    files: Mapping[str, bytes],
    hidden: Iterable[str],
    recording: Mapping,
    key: str,
    limits: Limits,
    load,
    answer: tuple[int, int],
    also: Tolerance | None = None,
) -> Replay:
    """Replay an answer (spliced into `files`) on its snippet's recorded inputs and compare (`load(digest) -> bytes`
    reads what the recording stored); with `also`, the same replay is compared again within that tolerance (what
    another judge of the recorded calls would say, such as the proposed tests' per-dtype table)."""
    sealed, reason = snippet_sealing(recording, key)
    if not sealed:
        return Replay(False, reason=reason)
    entry = recording["targets"][recording["snippets"][key]["target"]]
    target = Target(entry["key"], entry["file"], entry["qualname"], entry["name"], entry["line"])
    recorded = _recorded(entry, load)
    tolerance = recorded_tolerance(recording)
    replayed, problem, timed_out = _replay_run(
        session=session,
        files=replay_files(files, hidden),
        target=target,
        inputs=[],
        outputs=recorded.outputs,
        limits=limits,
        answer=answer,
        inputs_file=recorded.inputs_file,
    )
    notes: list[str] = []
    difference = problem or _differs(
        recorded.outputs, replayed or [], tolerance, recorded.parsed, recorded.entries, notes
    )
    also_difference = (
        None
        if also is None
        else problem or _differs(recorded.outputs, replayed or [], also, recorded.parsed, recorded.entries)
    )
    return Replay(
        True, difference=difference, timed_out=timed_out, also_difference=also_difference, added_state=tuple(notes)
    )
