"""Many answers of one sealed snippet replayed in one sandboxed process (a snippet's mutants, issue 36 item 1).

A replay alone (judging/sealed.py) pays a sandboxed process per answer; here one process (programs/replay_batch.py)
reads the replay's files once and runs the replayer for each answer in a fork of its own, with its work folder,
/tmp and /dev/shm written afresh and every process the last answer left killed first: one answer cannot change what
the next one finds. Each fork prints only to its own pipes; the batch relays that output per answer, base64-encoded,
and it is parsed here exactly as a replay alone's output is (`_report` with the answer's own mark, then compared
with the recording), never unpickled.

Verdicts are a replay alone's: an answer whose fork printed no single readable report (it crashed, exited early,
printed past its share of the output) or that the batch never reached (it died, refused to run outside a pid
namespace of its own) is replayed alone; one that ran past its time limit is a timed-out replay, as alone.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from evaluation.judging.sealed import (
    INPUTS_FILE,
    REPLAYER_FILE,
    REPLAYER_SOURCE,
    REPORT_BYTES_MAX,
    SNAPSHOT_CAPS,
    Replay,
    Target,
    Tolerance,
    _differs,
    _Recorded,
    _recorded,
    _replay_report_bounds,
    _report,
    answer_replay,
    recorded_tolerance,
    replay_files,
    snippet_sealing,
)
from sandbox import Limits, Session, programs

BATCH_FILE = ".rcb-replay-batch.py"
ANSWERS_FILE = ".rcb-replay-batch.json"
BATCH_SOURCE = programs.source("replay_batch")
# Below this many answers a batch saves nothing over replaying them alone.
BATCH_MIN = 2


@dataclass(frozen=True)
class BatchAnswer:
    """One answer of a batch: its file spliced in (`path`, `text`) and its lines there."""

    path: str
    text: str
    answer: tuple[int, int]


@dataclass
class BatchStats:
    """What batches did: how many ran, the answers judged by one, the answers replayed alone (none left to batch,
    or a batch could not tell), and the end of the output of each batch that relayed nothing."""

    batches: int = 0
    batched: int = 0
    alone: int = 0
    failures: list[str] = field(default_factory=list)


def _relayed(stdout: str, mark: str, count: int) -> dict[int, tuple[str, int, str, str]]:
    """Each answer's line of the batch's output: (state, exit status, stdout, stderr), read as untrusted data; an
    answer whose line is missing, repeated or malformed is left out (replayed alone)."""
    found: dict[int, list[tuple[str, int, str, str]]] = {}
    pattern = rf"(?m)^{re.escape(mark)} (\d+) (done|timeout|over) (-?\d+) ([A-Za-z0-9+/=]*) ([A-Za-z0-9+/=]*)$"
    for match in re.finditer(pattern, stdout):
        index = int(match.group(1))
        if index >= count:
            continue
        try:
            out, err = (base64.b64decode(match.group(n), validate=True).decode("utf-8", "replace") for n in (4, 5))
        except (binascii.Error, ValueError):
            continue
        found.setdefault(index, []).append((match.group(2), int(match.group(3)), out, err))
    return {index: lines[0] for index, lines in found.items() if len(lines) == 1}


def answers_replay(
    *,
    session: Session,
    files: Mapping[str, bytes],
    hidden: Iterable[str],
    recording: Mapping,
    key: str,
    limits: Limits,
    load,
    answers: Sequence[BatchAnswer],
    stats: BatchStats | None = None,
    also: Tolerance | None = None,
    warm: bool = True,
) -> list[Replay]:
    """Replay `answers` of the snippet `key` (each spliced into its file of `files`) on the recorded inputs, in one
    sandboxed process, and compare each with the recording (and within `also` too): the Replay of each, as
    `answer_replay` gives it. `warm`: the process imports once what every answer's unpickling of its inputs and
    restore of the generators import (`inputs_warm`); off only to measure what that saves."""
    sealed, reason = snippet_sealing(recording, key)
    if not sealed:
        return [Replay(False, reason=reason) for _ in answers]

    def alone(index: int) -> Replay:
        if stats is not None:
            stats.alone += 1
        answer = answers[index]
        return answer_replay(
            session=session,
            files={**files, answer.path: answer.text.encode("utf-8")},
            hidden=hidden,
            recording=recording,
            key=key,
            limits=limits,
            load=load,
            answer=answer.answer,
            also=also,
        )

    if len(answers) < BATCH_MIN or session.backend.unsafe:  # `kill -1` needs a pid namespace of its own
        return [alone(index) for index in range(len(answers))]
    entry = recording["targets"][recording["snippets"][key]["target"]]
    target = Target(entry["key"], entry["file"], entry["qualname"], entry["name"], entry["line"])
    recorded = _recorded(entry, load)
    tolerance = recorded_tolerance(recording)
    marks = ["rcb-replay-" + secrets.token_hex(12) for _ in answers]
    specs = [
        {
            "mark": mark,
            "targets": [target.as_dict()],
            "inputs": INPUTS_FILE,
            "snapshot": SNAPSHOT_CAPS,
            "answer_file": target.file,
            "first_line": answer.answer[0],
            "last_line": answer.answer[1],
        }
        for mark, answer in zip(marks, answers, strict=True)
    ]
    batch_mark = "rcb-batch-" + secrets.token_hex(12)
    share = REPORT_BYTES_MAX // (2 * len(answers))  # base64 takes a third more: the whole stays within the cap
    first = answers[0]
    result = session.run(
        files={
            **replay_files({**files, first.path: first.text.encode("utf-8")}, hidden),
            REPLAYER_FILE: REPLAYER_SOURCE.encode(),
            INPUTS_FILE: recorded.inputs_file,
            BATCH_FILE: BATCH_SOURCE.encode(),
            ANSWERS_FILE: json.dumps(
                [{"files": {a.path: a.text}, "spec": spec} for a, spec in zip(answers, specs, strict=True)]
            ).encode(),
        },
        command=[
            session.environment.python,
            "-B",
            BATCH_FILE,
            json.dumps(
                {
                    "mark": batch_mark,
                    "answers": ANSWERS_FILE,
                    "replayer": REPLAYER_FILE,
                    "seconds": limits.wall_seconds,
                    "output_bytes": share,
                    "warm": warm,
                    # The fork server never preloads what the first answer's own lines import (as alone).
                    "answer_file": first.path,
                    "first_line": first.answer[0],
                    "last_line": first.answer[1],
                }
            ),
        ],
        limits=replace(
            limits,
            wall_seconds=limits.wall_seconds * (len(answers) + 1),
            output_bytes=max(limits.output_bytes, REPORT_BYTES_MAX),
        ),
    )
    relayed = _relayed(result.stdout, batch_mark, len(answers))
    if stats is not None:
        stats.batches += 1
        if not relayed:
            stats.failures.append((result.stderr or result.stdout)[-300:])
    replays: list[Replay] = []
    for index, mark in enumerate(marks):
        line = relayed.get(index)
        replayed = _judged(line, mark, target, recorded, tolerance, also)
        if replayed is None:
            replays.append(alone(index))
            continue
        if stats is not None:
            stats.batched += 1
        replays.append(replayed)
    return replays


def _judged(
    line: tuple[str, int, str, str] | None,
    mark: str,
    target: Target,
    recorded: _Recorded,
    tolerance: Tolerance,
    also: Tolerance | None,
) -> Replay | None:
    """An answer's Replay from its relayed output, as `_replay_run` and `answer_replay` judge a replay alone's;
    None when only a replay alone can tell."""
    if line is None:
        return None
    state, _, out, err = line
    if state == "timeout":
        tail = (err or out)[-400:]
        problem = f"the replay gave no single readable report (it timed out): {tail}"
        return Replay(True, difference=problem, timed_out=True, also_difference=None if also is None else problem)
    if state != "done":
        return None
    max_bytes, max_values = _replay_report_bounds(recorded.outputs, target.key)
    report = _report(out, mark, max_bytes=max_bytes, max_values=max_values)
    if report is None:
        return None
    calls = report["targets"].get(target.key)
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        problem = "the replay reported no calls"
        return Replay(True, difference=problem, also_difference=None if also is None else problem)
    notes: list[str] = []
    return Replay(
        True,
        difference=_differs(recorded.outputs, calls, tolerance, recorded.parsed, recorded.entries, notes),
        also_difference=None
        if also is None
        else _differs(recorded.outputs, calls, also, recorded.parsed, recorded.entries),
        added_state=tuple(notes),
    )
