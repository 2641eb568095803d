"""A Harbor job brought back as an agent upload run: each trial an item, its answer scored again by the platform.

What is taken from a job folder (Harbor 0.26: `<job>/<trial>/result.json`, `agent/trajectory.json`, `verifier/`,
`artifacts/`), and what is not trusted:
- the task: `result.json`'s `task_name`, which must be a public item of the release as export.py names it; a job
  naming any other (an unknown, another release's, a held-out one) is refused whole, every problem listed;
- the answer: the agent's final file as Harbor collected it (`artifacts/sandbox/<file>`), read by the platform's own
  rule (evaluation/item_files.answer_read: an edit outside the region is no answer), else the verifier's
  `answer.txt`; either way it is scored again on the platform's judging path, and Harbor's reward is kept beside it
  (`params.harbor.rewards`), never used;
- the trajectory: ATIF (`agent/trajectory.json`) converted to the upload schema and checked as every agent upload
  (agents/uploads.trajectory_check: usage that its steps do not add up to is refused);
- the scaffold: the agent's name and version (`agent_info`), and the model the importer names;
- a trial that errored (`exception_info`: Harbor could not finish it, e.g. its environment or agent crashed): its
  answer, if any, is kept but not tested, and it counts as not passed (category "reported error"): the platform cannot
  tell Harbor's crash from the agent's, and left out of the score it would let a job drop the items it failed.
Files are read from the job folder only: a symbolic link anywhere in it, or a job over JOB_BYTES_MAX, is refused.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.db import transaction

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.selectors import protocol_get
from common.intake import IntakeError, UploadLimits, archive_files
from common.sizes import size_text
from common.text import storable
from evaluation.harbor.export import WORKSPACE, harbor_task_name
from evaluation.harbor.rewards import reward_key
from evaluation.item_files import answer_read, workspace_files
from evaluation.models import EvaluationRun, Generation, ModelEntry
from evaluation.services.uploads import UPLOAD_MAX_BYTES, UploadError, run_from_upload
from evaluation.taskfiles import task_files, task_hidden_files

JOB_BYTES_MAX = 256 * 1000 * 1000
JOB_FILES_MAX = 200_000
FILE_BYTES_MAX = 16 * 1000 * 1000  # one result.json, trajectory or answer
ATIF_ROLES = {"system": "system", "user": "user", "agent": "assistant"}


@dataclass(frozen=True)
class Trial:
    folder: str
    task_name: str
    scaffold: tuple[str, str]
    model: str
    reward: dict
    error: str  # the exception Harbor recorded, as "Type: message" ("" when the trial ran through)
    final: str | None  # the agent's final file as collected, or None
    answer: str | None  # verifier/answer.txt, or None
    trajectory: dict | None  # ATIF, or None


def job_files_check(job_dir: Path) -> list[str]:
    """Every symbolic link or special file in the job, and its size past the caps, as problems."""
    problems: list[str] = []
    if job_dir.is_symlink() or not job_dir.is_dir():
        return [f"{job_dir}: not a folder"]
    total = files = 0
    for folder, names, filenames in os.walk(job_dir, followlinks=False):
        for name in names + filenames:
            path = Path(folder) / name
            info = path.lstat()
            relative = path.relative_to(job_dir)
            if stat.S_ISLNK(info.st_mode):
                problems.append(f"{relative}: a symbolic link (a job's files must be inside it)")
            elif not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                problems.append(f"{relative}: not a file or folder")
            total += info.st_size
            files += 1
        if total > JOB_BYTES_MAX or files > JOB_FILES_MAX:
            return [f"the job is over {size_text(JOB_BYTES_MAX)} or {JOB_FILES_MAX} files; nothing was read"]
    return problems


def _read(path: Path, what: str, problems: list[str]) -> str | None:
    if not path.is_file():
        return None
    if path.stat().st_size > FILE_BYTES_MAX:
        problems.append(f"{what}: over {size_text(FILE_BYTES_MAX)}")
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def _json(text: str | None, what: str, problems: list[str]) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        problems.append(f"{what}: not JSON")
        return None
    if not isinstance(value, dict):
        problems.append(f"{what}: not a JSON object")
        return None
    return value


def trials_read(job_dir: Path, *, answer_paths: dict[str, str]) -> tuple[list[Trial], list[str]]:
    """The job's trials (folders holding a result.json) and every problem found reading them."""
    problems = job_files_check(job_dir)
    if problems:
        return [], problems
    trials = []
    for folder in sorted(p for p in job_dir.iterdir() if p.is_dir() and (p / "result.json").is_file()):
        name = folder.name
        result = _json(_read(folder / "result.json", f"{name}/result.json", problems), f"{name}/result.json", problems)
        if result is None:
            continue
        task_name = result.get("task_name")
        agent = result.get("agent_info") or {}
        if not isinstance(task_name, str) or not isinstance(agent, dict):
            problems.append(f"{name}/result.json: no task_name or agent_info")
            continue
        model = (agent.get("model_info") or {}) if isinstance(agent.get("model_info"), dict) else {}
        reward = (result.get("verifier_result") or {}).get("rewards") or {}
        error = trial_error(result.get("exception_info"))
        path = answer_paths.get(task_name)
        final = (
            _read(folder / "artifacts" / WORKSPACE.strip("/") / path, f"{name}/artifacts", problems) if path else None
        )
        trials.append(
            Trial(
                folder=name,
                task_name=task_name,
                scaffold=(str(agent.get("name") or ""), str(agent.get("version") or "")),
                model=str(model.get("name") or ""),
                reward=reward if isinstance(reward, dict) else {},
                error=str(error),
                final=final,
                answer=_read(folder / "verifier" / "answer.txt", f"{name}/verifier/answer.txt", problems),
                trajectory=_json(
                    _read(folder / "agent" / "trajectory.json", f"{name}/agent/trajectory.json", problems),
                    f"{name}/agent/trajectory.json",
                    problems,
                ),
            )
        )
    if not trials and not problems:
        problems.append("the job holds no trial (no <trial>/result.json)")
    return trials, problems


ERROR_CHARS = 500  # of Harbor's exception message, kept on the item (its traceback is not)


def trial_error(info) -> str:
    """Harbor's `exception_info` of a trial as "Type: message", or "" when the trial has none."""
    if not info:
        return ""
    if not isinstance(info, dict):
        return "an exception Harbor recorded in a form it does not write"
    kind = str(info.get("exception_type") or "an exception")
    message = str(info.get("exception_message") or "").strip()
    return f"{kind}: {message[:ERROR_CHARS]}" if message else kind


def _text(message) -> str:
    """An ATIF message: a string, or content parts of which the text ones are kept."""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "\n".join(str(part.get("text", "")) for part in message if isinstance(part, dict))
    return ""


def atif_trajectory(atif: dict) -> dict:
    """An ATIF trajectory in the upload schema (docs/AGENT_RUNS.md), to be checked by trajectory_check; its
    final_metrics become the usage its steps must add up to."""
    steps: list[dict] = []
    for step in atif.get("steps") or []:
        if not isinstance(step, dict):
            steps.append({"role": "?"})  # trajectory_check names it
            continue
        source = str(step.get("source"))
        role = ATIF_ROLES.get(source, source)
        converted: dict = {"role": role, "content": _text(step.get("message"))}
        calls = {}
        if role == "assistant":
            metrics = step.get("metrics") or {}
            converted.update(
                prompt_tokens=metrics.get("prompt_tokens"),
                completion_tokens=metrics.get("completion_tokens"),
                cost=metrics.get("cost_usd"),
            )
            converted["tool_calls"] = [
                {
                    "id": call.get("tool_call_id"),
                    "name": call.get("function_name"),
                    "arguments": json.dumps(call.get("arguments", {})),
                }
                for call in step.get("tool_calls") or []
                if isinstance(call, dict)
            ]
            calls = {call["id"]: call["name"] for call in converted["tool_calls"]}
        steps.append(converted)
        for result in (step.get("observation") or {}).get("results") or []:
            call = result.get("source_call_id") if isinstance(result, dict) else None
            if call in calls:
                steps.append(
                    {
                        "role": "tool",
                        "tool_call_id": call,
                        "tool_name": calls[call],
                        "content": _text(result.get("content")),
                    }
                )
    trajectory: dict = {"format": "rcb-agent-trajectory/1", "ended_by": "submitted", "steps": steps}
    metrics = atif.get("final_metrics")
    if isinstance(metrics, dict):
        turns = sum(1 for step in steps if step.get("role") == "assistant")
        trajectory["usage"] = {
            "turns": turns,
            "prompt_tokens": metrics.get("total_prompt_tokens", 0),
            "completion_tokens": metrics.get("total_completion_tokens", 0),
            "cost": metrics.get("total_cost_usd"),
            "seconds": 0.0,
        }
    return trajectory


def _masked(snippet: Snippet, version: BenchmarkVersion):
    task = snippet.task
    protocol = protocol_get(name=version.protocol.name)
    return workspace_files(
        snippet=snippet, files=task_files(task), hidden=task_hidden_files(task), protocol=protocol, with_paper=True
    )[1]


@transaction.atomic
def harbor_job_import(
    *, job_dir: Path, version: BenchmarkVersion, model: ModelEntry, user=None, job_name: str = ""
) -> tuple[EvaluationRun, list[str]]:
    """Store a Harbor job as a self-reported agent run of `model` on `version`, every answer scored again by the
    platform; (the run, notes). Refused whole (UploadError listing every problem) when any trial or task is wrong."""
    items = {harbor_task_name(snippet): snippet for snippet in visibility.items_public(version=version)}
    trials, problems = trials_read(job_dir, answer_paths={name: s.file_path for name, s in items.items()})
    for trial in trials:
        if trial.task_name not in items:
            problems.append(f"{trial.folder}: task {trial.task_name!r} is not a public item of release {version.name}")
    named = {trial.task_name for trial in trials}
    problems += [f"task {name} has no trial in the job" for name in items if name not in named]
    scaffolds = sorted({trial.scaffold for trial in trials})
    if len(scaffolds) > 1:
        problems.append(f"the job mixes agents {', '.join('/'.join(s) for s in scaffolds)}: import one agent's trials")
    if problems:
        raise UploadError(problems)
    lines, notes, rewards = [], [], {}
    errored: list[tuple[Trial, tuple[int, int]]] = []
    samples: dict[str, int] = {}
    for trial in trials:
        snippet = items[trial.task_name]
        sample = samples[trial.task_name] = samples.get(trial.task_name, -1) + 1
        if trial.final is not None:
            body, problem = answer_read(final=trial.final, masked=_masked(snippet, version))
        else:
            body, problem = trial.answer, "" if trial.answer is not None else "the trial holds no answer"
        if problem:
            notes.append(f"{trial.folder}: {problem}; scored as no answer")
        if trial.error:
            notes.append(f"{trial.folder}: the trial ended in {trial.error}; scored as not passed (reported error)")
            errored.append((trial, (snippet.pk, sample)))
        line: dict = {"id": str(snippet.pk), "sample": sample, "code": body or ""}
        if trial.trajectory is not None:
            line["trajectory"] = {**atif_trajectory(trial.trajectory), "snippet": str(snippet.pk), "sample": sample}
        lines.append(json.dumps(line))
        rewards[reward_key(snippet.pk, sample)] = trial.reward.get("reward")
    data = ("\n".join(lines) + "\n").encode("utf-8")
    run = run_from_upload(model=model, version=version, data=data, user=user, mode="agent")
    # An errored trial is recorded with its error, never tested; being the job's own word, it counts as not passed.
    for trial, (snippet_id, sample) in errored:
        Generation.objects.filter(run=run, snippet_id=snippet_id, sample=sample).update(
            error=storable(f"the Harbor trial {trial.folder} ended in {trial.error}")
        )
    scaffold = scaffolds[0]
    run.params = {
        **run.params,
        "scaffold": {"name": scaffold[0], "version": scaffold[1]},
        "harbor": {
            "job": job_name or job_dir.name,
            "model": sorted({t.model for t in trials if t.model}),
            "rewards": rewards,
        },
    }
    run.save(update_fields=["params"])
    return run, notes


# An archived job (the API's and the model page's upload): read whole in memory by the submissions' safe reader, at
# most an upload's size packed and JOB_BYTES_MAX unpacked.
JOB_ARCHIVE_COMMAND = "tar czf job.tgz -C jobs <job>"
JOB_ARCHIVE = f"a .tar.gz (.tgz), .tar or .zip of the job's folder (`{JOB_ARCHIVE_COMMAND}`)"


def harbor_archive_import(
    *, data: bytes | BinaryIO, filename: str, version: BenchmarkVersion, model: ModelEntry, user=None
) -> tuple[EvaluationRun, list[str]]:
    """A Harbor job uploaded as an archive, imported as `harbor_job_import` imports its folder. An entry that
    leaves the archive (`..`, an absolute path, a link out of it), a device file or an archive past the limits is
    refused (UploadError) before anything is written; the files are then unpacked into a private temporary folder
    (regular files only) and read from there by the same rules as a job folder."""
    limits = UploadLimits(
        max_archive_bytes=UPLOAD_MAX_BYTES,
        max_unpacked_bytes=JOB_BYTES_MAX,
        max_files=JOB_FILES_MAX,
        max_file_bytes=JOB_BYTES_MAX,
    )
    try:
        files = archive_files(data, filename=filename, limits=limits)
    except IntakeError as exc:
        raise UploadError(
            [f"{exc}; a Harbor job is uploaded as the archive of its folder: {JOB_ARCHIVE_COMMAND}"]
        ) from exc
    name = re.sub(r"(\.tar\.gz|\.tgz|\.tar|\.zip)$", "", Path(filename).name) or "job"
    with tempfile.TemporaryDirectory(prefix="rcb-harbor-job-") as folder:
        job = Path(folder) / "job"
        for path, content in files.items():  # intake's paths: relative, normalized, never `..`
            target = job / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        return harbor_job_import(job_dir=job, version=version, model=model, user=user, job_name=name)
