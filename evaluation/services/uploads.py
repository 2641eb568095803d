"""The upload format: a JSONL file of generations made elsewhere, parsed, checked and stored as a run."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import transaction

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code import body_reindent, code_indent, extract_code, has_code_block, indent_width, prompt_hash
from benchmarks.selectors import protocol_get, snippet_prompt
from common.errors import ApplicationError
from common.text import storable
from evaluation.models import EvaluationRun, Generation, ModelEntry
from evaluation.routing import RUN_DISPATCH
from evaluation.run_modes import upload_line_parser, uploads_store
from evaluation.services.models import EvaluationError
from evaluation.services.runs import MAX_SAMPLES, run_protocol, run_quota_check
from evaluation.taskfiles import task_annotated, task_files
from operations.enqueue import enqueue


class UploadError(ApplicationError):
    """A generations file that cannot be taken; `problems` lists its bad lines as 'line N: ...' (the first
    UPLOAD_PROBLEMS_MAX of them, then how many lines were left unchecked)."""

    code = "invalid_upload"
    summary = "the upload was rejected; nothing was stored"

    def __init__(self, problems: list[str]):
        self.problems = self.details = problems
        super().__init__("; ".join(problems[:20]) + (f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""))


MAX_ANSWER_CHARS = 200_000
UPLOAD_FIELDS = ("answer", "code")
# A release's worth of answers at the longest answer allowed is far below this; a bigger file is not an upload.
UPLOAD_MAX_BYTES = 64 * 1000 * 1000
# A file with a bad line is refused whole; the first these many bad lines are named, the rest only counted.
UPLOAD_PROBLEMS_MAX = 100
UPLOAD_FORMAT = (
    'JSONL, one object per line: {"id": item id, "sample": 0, "answer": "..."} or {"id": ..., "sample": ..., '
    '"code": "..."}. Exactly one of the two: "answer" is a raw model response, from which the run\'s protocol '
    "extracts the last fenced python block (```python ... ```) and splices it into the file unchanged, as the "
    "original harness did, so its lines must carry the file's indentation (the indentation of the item's TODO "
    'lines in masked_code); a line whose answer is indented less is stored and warned about. "code" is the '
    "snippet body given directly, at any consistent indentation: it is re-indented to the snippet's "
    "indentation (tabs count as Python reads them, to the next multiple of 8 columns). "
    'An "answer" with no fenced python block is refused with its line number (it would extract nothing and '
    "score 0). Every item of the release needs a line for each sample; a file with any bad line is refused "
    "whole and nothing is stored."
)
# The agent part of the upload format; {schema} names where the trajectory schema is documented (the guide page:
# a link on the site's form, its address in the API's description).
UPLOAD_FORMAT_AGENT_TEMPLATE = (
    ' Mode "agent" (an agent run made elsewhere): each line gives the final snippet body as "code" (never "answer") '
    'and may add "trajectory", the agent\'s steps in the schema {schema} documents '
    '("format": "rcb-agent-trajectory/1"; no "run"; "snippet" and "sample", if given, the line\'s own).'
)
AGENT_RUNS_GUIDE = "/guides/agent-runs/"  # config.guides serves docs/AGENT_RUNS.md there
UPLOAD_FORMAT_AGENT = UPLOAD_FORMAT_AGENT_TEMPLATE.format(schema=f"the agent-runs guide ({AGENT_RUNS_GUIDE})")
UPLOAD_FORMAT_AGENT_HTML = UPLOAD_FORMAT_AGENT_TEMPLATE.format(
    schema=f'the <a href="{AGENT_RUNS_GUIDE}">agent-runs guide</a>'
)


def upload_bytes(file) -> bytes:
    """The content of an uploaded generations file (page or API), refused before reading when it is too big."""
    if file.size > UPLOAD_MAX_BYTES:
        from common.sizes import size_text

        raise UploadError([f"the file is {size_text(file.size)}; at most {size_text(UPLOAD_MAX_BYTES)}"])
    return file.read()


@dataclass(frozen=True)
class UploadedAnswer:
    snippet: Snippet
    sample: int
    answer: str  # the raw model response ("" when the line gave `code`)
    code: str | None  # the snippet body re-indented to the snippet's indentation, or None: extract it from `answer`
    warning: str = ""  # what will likely go wrong with an answer that is stored anyway
    trajectory: dict | None = None  # agent uploads: the line's checked trajectory (agents/uploads.py)


def answer_indent_warning(*, answer: str, snippet: Snippet, protocol: str) -> str:
    """Why an answer's extracted code will likely fail: lines indented less than the snippet, which the protocol
    splices unchanged (FORMAT.md 7); "" when every line is at the snippet's indentation or deeper."""
    depth = indent_width(code_indent(snippet.reference_code))
    short = [
        n
        for n, line in enumerate(extract_code(answer).split("\n"), start=1)
        if line.strip() and indent_width(line) < depth
    ]
    if not depth or not short:
        return ""
    lines = ", ".join(map(str, short[:5])) + (f" and {len(short) - 5} more" if len(short) > 5 else "")
    return (
        f"item {snippet.pk}: the answer's code is indented less than the snippet ({depth} columns) on its "
        f"line(s) {lines}; protocol {protocol} splices an answer unchanged, so it will likely fail with an "
        'IndentationError. Indent the code as it stands in the file, or send the snippet body as "code", '
        "which is re-indented"
    )


def upload_line_parse(
    row, *, snippets: dict[str, Snippet], version: BenchmarkVersion, protocol: str
) -> UploadedAnswer | str:
    """One JSONL line of an upload, or what is wrong with it (the caller adds the line number).

    A line gives exactly one of `answer` (a raw model response, from which the run's protocol extracts the last
    fenced python block, spliced unchanged) or `code` (the snippet body, re-indented to the snippet's indentation).
    An `answer` without a fenced python block is refused rather than scored: extraction would find nothing and the
    item would silently fail. An answer indented less than the snippet is taken with a warning: the protocol's
    treatment of answers is the benchmark's, not the upload's to change.
    """
    if not isinstance(row, dict):
        return 'expected an object with "id", "sample" and one of "answer" or "code"'
    item, sample = str(row.get("id", "")), row.get("sample", 0)
    if item not in snippets:
        return f"unknown item id {item!r} in release {version.name}"
    if not isinstance(sample, int) or isinstance(sample, bool) or not 0 <= sample < MAX_SAMPLES:
        return f"sample must be an integer from 0 to {MAX_SAMPLES - 1}"
    given = [field for field in UPLOAD_FIELDS if field in row]
    if len(given) != 1:
        return (
            'give either "answer" (a raw model response) or "code" (the snippet body), not both'
            if given
            else 'no "answer" (a raw model response) or "code" (the snippet body)'
        )
    field, text = given[0], row[given[0]]
    if not isinstance(text, str):
        return f"{field} must be a string"
    if len(text) > MAX_ANSWER_CHARS:
        return f"{field} is {len(text)} characters; at most {MAX_ANSWER_CHARS}"
    if storable(text) is not text:  # stored in bulk, the database would refuse the whole upload
        return (
            f"{field} holds a NUL character (\\u0000) or a lone surrogate (\\ud800-\\udfff), which no Python "
            "source holds"
        )
    if field == "answer" and not has_code_block(text):
        return (
            f"answer has no fenced python block (```python ... ```), so protocol {protocol} would extract "
            'nothing; wrap the code in one, or send the snippet body as "code"'
        )
    snippet = snippets[item]
    if field == "code":
        return UploadedAnswer(
            snippet=snippet, sample=sample, answer="", code=body_reindent(text, code_indent(snippet.reference_code))
        )
    return UploadedAnswer(
        snippet=snippet,
        sample=sample,
        answer=text,
        code=None,
        warning=answer_indent_warning(answer=text, snippet=snippet, protocol=protocol),
    )


LINE = re.compile(r"[^\r\n]+")


def _line_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    """How many lines end in text[start:end], at \n, \r\n or \r as str.splitlines() ends them in JSONL."""
    return text.count("\n", start, end) + text.count("\r", start, end) - text.count("\r\n", start, end)


def upload_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """The file's lines that hold anything, one at a time (a list of a 64 MB file's tiny lines would take GBs):
    (line number, offset, text). A U+2028 in a JSON string ends no line here, unlike str.splitlines()."""
    number, end = 1, 0
    for match in LINE.finditer(text):
        number += _line_breaks(text, end, match.start())
        end = match.end()
        yield number, match.start(), match.group()


def upload_line_read(line: str, *, line_parse, **context) -> UploadedAnswer | str:
    """One JSONL line parsed by the mode's line parser, or what is wrong with it; of errors, only those of reading
    JSON are caught here."""
    try:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg})"
        except ValueError:  # Python's int-string limit: no line of ours has a number that long
            return f"a number of more than {sys.get_int_max_str_digits()} digits; no line of generations has one"
        return line_parse(row, **context)
    except RecursionError:  # nested deeper than the parser (or a repr of the value) goes: no line of ours is
        return "nested too deeply to be a line of generations"


@transaction.atomic
def run_from_upload(
    *,
    model: ModelEntry,
    version: BenchmarkVersion,
    data: bytes,
    user=None,
    with_paper: bool = True,
    protocol: str | None = None,
    mode: str = "single",
) -> EvaluationRun:
    """Score uploaded generations (JSONL, see `upload_line_parse`) like the platform's own; all or nothing.

    An upload answers the public split only: held-out prompts never leave the platform, so nobody could answer
    them honestly, and a held-out id is as unknown here as any other. The returned run's `upload_warnings` lists,
    as 'line N: ...', what will likely fail in lines that were taken (answers indented less than their snippet).
    """
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise EvaluationError(f"release {version.name} is a draft; uploads are scored on published releases")
    if model.kind in (ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        # A reference line must stay what the platform made it, never someone's file.
        raise EvaluationError(f"model {model.name} is a calibration model: the platform makes its answers")
    if model.kind == ModelEntry.Kind.HUMAN:
        raise EvaluationError(f"model {model.name} stands for people's attempts: each is made on its attempt's page")
    run_quota_check(user=user)
    protocol = run_protocol(version=version, protocol=protocol)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UploadError([f"the file is not UTF-8 text (byte {exc.start})"]) from exc
    snippets = {str(s.pk): s for s in visibility.items_public(version=version)}
    # agent: the line's trajectory checked too
    line_parse = upload_line_parser(mode=mode, version=version, parse=upload_line_parse)
    problems: list[str] = []
    rows: list[UploadedAnswer] = []
    warnings: list[str] = []
    seen: set[tuple[str, int]] = set()
    for number, start, line in upload_lines(text):
        if not line.strip():
            continue
        if len(problems) == UPLOAD_PROBLEMS_MAX:  # refused already: the rest is counted, not parsed
            unchecked = _line_breaks(text, start) + (not text.endswith(("\n", "\r")))
            problems.append(
                f"and {unchecked} more line(s) not checked: the file is refused at {UPLOAD_PROBLEMS_MAX} bad lines"
            )
            break
        parsed = upload_line_read(line, line_parse=line_parse, snippets=snippets, version=version, protocol=protocol)
        if isinstance(parsed, str):
            problems.append(f"line {number}: {parsed}")
        elif (str(parsed.snippet.pk), parsed.sample) in seen:
            problems.append(f"line {number}: item {parsed.snippet.pk} sample {parsed.sample} appears twice")
        else:
            seen.add((str(parsed.snippet.pk), parsed.sample))
            rows.append(parsed)
            if parsed.warning:
                warnings.append(f"line {number}: {parsed.warning}")
    if not rows and not problems:
        problems.append("the file holds no generations")
    samples = 1 + max((row.sample for row in rows), default=0)
    missing = [f"{i}/{s}" for i in snippets for s in range(samples) if (i, s) not in seen]
    if missing and not problems:
        problems.append(f"{len(missing)} item(s) have no answer, e.g. {', '.join(missing[:5])}")
    if problems:
        raise UploadError(problems)
    run = EvaluationRun.objects.create(
        model=model,
        version=version,
        with_paper=with_paper,
        samples=samples,
        created_by=user,
        total_items=len(rows),
        params={"uploaded": True},
        protocol=protocol,
        provenance=EvaluationRun.Provenance.SELF_REPORTED,
        mode=mode,
    )
    upload_generations_store(run=run, rows=rows)
    uploads_store(run=run, rows=rows)
    transaction.on_commit(lambda: run_dispatch_later(run=run))
    run.upload_warnings = warnings
    return run


UPLOAD_BATCH = 1000


def upload_generations_store(*, run: EvaluationRun, rows: list[UploadedAnswer]) -> None:
    """Store an upload's answers in bulk; each snippet's prompt is built (and hashed) once for all its samples."""
    protocol = protocol_get(name=run.protocol)
    hashes: dict[int, str] = {}
    generations = []
    for row in rows:
        if row.snippet.pk not in hashes:
            prompt = snippet_prompt(
                snippet=row.snippet,
                files=task_files(row.snippet.task),
                with_paper=run.with_paper,
                protocol=protocol,
                annotated=task_annotated(row.snippet.task, row.snippet.file_path),
            )
            hashes[row.snippet.pk] = prompt_hash(prompt)
        generations.append(
            Generation(
                run=run,
                snippet=row.snippet,
                sample=row.sample,
                prompt_hash=hashes[row.snippet.pk],
                raw_answer=row.answer,
                extracted_code=extract_code(row.answer) if row.code is None else row.code,
                latency=0.0,
                cost=None,
                attempts=1,
            )
        )  # what the uploader paid is unknown, not zero
    Generation.objects.bulk_create(generations, batch_size=UPLOAD_BATCH)


def run_dispatch_later(*, run: EvaluationRun) -> None:
    """Queue the run's items from a worker (Celery task `run_dispatch`), not inside the web request."""
    # Stored already: the watchdog dispatches the queued run once the broker answers.
    enqueue(
        RUN_DISPATCH,
        run.pk,
        subject=run,
        refused=lambda exc: (
            f"run {run.pk}: the broker refused its dispatch ({exc}); the watchdog dispatches it once the broker answers"
        ),
    )
