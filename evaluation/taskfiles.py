"""A task's files on a worker: fetched from storage by content hash into a local cache, shared by all items."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from benchmarks.models import Task
from benchmarks.paper2code import AnnotatedFile, parse
from benchmarks.paper2code.hidden import package_references, recorded_calls, reference_copies
from benchmarks.selectors import blob_read
from sandbox.base import SandboxError


class TaskFilesUnavailable(SandboxError):
    """A task file could not be read from storage, or came back altered: infrastructure, retried, never scored."""


def blob_cached(sha256: str) -> bytes:
    """Blob bytes from the worker's cache, fetched from storage once; the hash is checked on the way in."""
    path = Path(settings.SANDBOX_CACHE_DIR) / "blobs" / sha256[:2] / sha256
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    try:
        data = blob_read(sha256=sha256)
    except Exception as exc:  # each storage backend fails its own way (OSError, botocore errors)
        raise TaskFilesUnavailable(f"task file {sha256} cannot be read from storage: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise TaskFilesUnavailable(f"task file {sha256} read from storage has other content; not cached")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)
    return data


@functools.lru_cache(maxsize=64)
def _task_files(task_id: int, content_hash: str) -> dict[str, bytes]:
    task = Task.objects.get(pk=task_id)
    return {path: blob_cached(digest) for path, digest in task.files.items()}


def task_files(task: Task) -> dict[str, bytes]:
    """Every file of the task package (a fresh dict; the bytes are shared)."""
    return dict(_task_files(task.pk, task.content_hash))


def task_annotated(task: Task, path: str) -> AnnotatedFile:
    return _task_annotated(task.pk, task.content_hash, path)


@functools.lru_cache(maxsize=256)
def _task_annotated(task_id: int, content_hash: str, path: str) -> AnnotatedFile:
    return parse(_task_files(task_id, content_hash)[path].decode("utf-8"), path)


def task_hidden_files(task: Task) -> frozenset[str]:
    """Paths of the task's hidden files: the test entry point, every text file holding a copy of reference code,
    compared without whitespace (a copy with other line ends or indentation is a copy), and the reference's recorded
    calls (its proposed tests' inputs and outputs)."""
    return _task_hidden_files(task.pk, task.content_hash)


@functools.lru_cache(maxsize=64)
def _task_hidden_files(task_id: int, content_hash: str) -> frozenset[str]:
    task = Task.objects.get(pk=task_id)
    visible = set(task.annotated_paths) | set(task.context_paths) | {task.paper_path}  # all in the prompt anyway
    return hidden_files(
        _task_files(task_id, content_hash),
        visible=visible,
        annotated=[_task_annotated(task_id, content_hash, path) for path in task.annotated_paths],
        entry_point=task.test_entry_point,
    )


def hidden_files(
    files: dict[str, bytes], *, visible: set[str], annotated: Iterable[AnnotatedFile], entry_point: str
) -> frozenset[str]:
    """The test entry point, every file outside `visible` holding a copy of a reference body (a one-line one with
    its neighbouring line of code: paper2code.hidden.package_references), and every file of the reference's recorded
    calls (paper2code.hidden's rule): for a task, and for a package under validation."""
    outside = {path: data for path, data in files.items() if path not in visible}
    return frozenset({entry_point, *reference_copies(outside, package_references(annotated)), *recorded_calls(outside)})
