"""A release's downloads (the problem-set zip, the items JSONL) built by a worker after publishing, and their
lost builds queued again."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import zipfile
from typing import BinaryIO

from django.db import transaction
from django.utils import timezone

from benchmarks.errors import CurationError
from benchmarks.models import (
    BenchmarkVersion,
    Blob,
)
from benchmarks.paper2code import Protocol, parse, prompt_template
from benchmarks.paper2code.pset import PAPERS_YAML, papers_yaml_dump
from benchmarks.selectors import (
    blob_open,
    blob_read,
    package_load,
    protocol_get,
    snippet_masked,
)
from benchmarks.services.blobs import blob_store_file
from benchmarks.services.maintainers import maintainer_require
from benchmarks.visibility import items_public, tasks_public
from operations.enqueue import enqueue
from operations.events import Kind, event_record

logger = logging.getLogger(__name__)


DOWNLOADS_PREPARE = "benchmarks.tasks.release_downloads_prepare"  # queued by name: that module imports this one


def release_downloads_queue(*, version: BenchmarkVersion) -> None:
    """Have a worker build a release's downloads (the `default` queue). A broker that refuses, or loses the task,
    leaves it to the workers' watchdog, which queues it again (operations/watchdog.py)."""
    BenchmarkVersion.objects.filter(pk=version.pk).update(downloads_queued_at=timezone.now())
    enqueue(
        DOWNLOADS_PREPARE,
        version.pk,
        subject=version,
        refused=lambda exc: (
            f"the downloads of release {version.name} could not be queued ({exc}); the watchdog "
            f"queues them once the broker answers"
        ),
    )


def releases_downloads_pending() -> list[BenchmarkVersion]:
    """Published or deprecated releases whose downloads are neither built nor failed (being prepared)."""
    return [
        v
        for v in BenchmarkVersion.objects.exclude(status=BenchmarkVersion.Status.DRAFT).only(
            "pk",
            "name",
            "status",
            "downloads",
            "downloads_failed",
            "published_at",
            "downloads_queued_at",
            "redispatched_at",
            "redispatches",
        )
        if v.downloads_status == "preparing"
    ]


def release_downloads_requeue(version: BenchmarkVersion, *, idle_seconds: float, worker: str = "") -> int:
    """Queue again the build of downloads whose task was lost (no worker holds it, none waits), once the watchdog
    claimed it."""
    event_record(
        kind=Kind.DOWNLOADS_REDISPATCHED,
        subject=version,
        worker=worker,
        detail=f"the downloads of release {version.name} were being prepared with no queued or running task "
        f"after {idle_seconds:.0f} s; their build was queued again",
    )
    enqueue(
        DOWNLOADS_PREPARE,
        version.pk,
        subject=version,
        refused=lambda exc: (
            f"the downloads of release {version.name} could not be queued again ({exc}); the "
            f"watchdog queues them once the broker answers"
        ),
    )
    return 1


def release_downloads_prepare(*, version_id: int) -> dict:
    """Build and keep a published release's downloads unless they exist (a redelivered task builds nothing)."""
    version = BenchmarkVersion.objects.get(pk=version_id)
    if version.downloads_status == "ready" or not version.is_frozen:
        return version.downloads
    downloads = release_downloads_build(version=version)
    with transaction.atomic():  # another app's download (the Harbor dataset) may be stored meanwhile: keep it
        locked = BenchmarkVersion.objects.select_for_update().get(pk=version.pk)
        locked.downloads = {**locked.downloads, **downloads}
        locked.downloads_failed = ""
        locked.save(update_fields=["downloads", "downloads_failed"])
    return locked.downloads


def release_downloads_fail(*, version_id: int, error: Exception) -> None:
    """The build failed for good (after the task's retries): the release's page and API say why."""
    logger.error("the downloads of release %s could not be built: %s", version_id, error)
    if BenchmarkVersion.objects.get(pk=version_id).downloads_status != "ready":
        BenchmarkVersion.objects.filter(pk=version_id).update(
            downloads_failed=f"{type(error).__name__}: {error}"[:2000]
        )


def release_downloads_retry(*, version: BenchmarkVersion, actor) -> None:
    """A maintainer has the downloads whose build failed prepared again."""
    maintainer_require(actor)
    if version.downloads_status != "failed":
        raise CurationError(
            f"the downloads of {version.name} are {version.downloads_status or 'not built for a draft'}; "
            "only failed ones are prepared again"
        )
    BenchmarkVersion.objects.filter(pk=version.pk).update(downloads_failed="")
    release_downloads_queue(version=version)


DOWNLOAD_CHUNK = 1024 * 1024


def release_downloads_build(*, version: BenchmarkVersion) -> dict:
    """The public problem set as a zip and its live items as JSONL (masked prompt only), stored with their hashes;
    held-out tasks are in neither. Both are written to temporary files a file and a line at a time."""
    downloads = {}
    builds = (
        ("pset", f"{version.name}-problem-set.zip", lambda out: release_pset_zip_write(version=version, out=out)),
        (
            "items",
            f"{version.name}-items.jsonl",
            lambda out: release_items_write(
                version=version, protocol=protocol_get(name=version.protocol_name), out=out
            ),
        ),
    )
    for kind, name, write in builds:
        with tempfile.TemporaryFile() as out:
            write(out)
            blob = blob_store_file(file=out)
        downloads[kind] = {"filename": name, "sha256": blob.sha256, "size": blob.size}
    return downloads


def release_pset_zip_write(*, version: BenchmarkVersion, out: BinaryIO) -> None:
    """The public tasks in the problem-set layout (FORMAT.md) as a zip, under a folder named after the version;
    each file is copied from storage in chunks, never all at once."""
    tasks = list(tasks_public(version=version))
    members = {
        f"{version.name}/{task.paper.slug}/{path}": digest for task in tasks for path, digest in task.files.items()
    }
    listing = f"{version.name}/{PAPERS_YAML}"
    papers_yaml = papers_yaml_dump(package_load(t, with_files=False) for t in tasks).encode("utf-8")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted([*members, listing]):
            info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))  # equal content, equal bytes
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o600 << 16
            with archive.open(info, "w") as member:
                if name == listing:
                    member.write(papers_yaml)
                    continue
                with blob_open(sha256=members[name]) as source:
                    shutil.copyfileobj(source, member, DOWNLOAD_CHUNK)


def release_items_write(*, version: BenchmarkVersion, protocol: Protocol, out: BinaryIO) -> None:
    """Every live public item as JSON lines, in `protocol`, never reference code; held-out items never leave the
    platform. What a paper's items share is written once, in a `paper` line before them: its text and its
    `prompt_template` (the protocol's template with the paper's context files laid out); an item line holds its
    masked file and fields once, and its prompt is `prompt_fill(prompt_template, {**paper, **item})`
    (benchmarks.paper2code.items, docs/LEADERBOARD.md). One task's files are in memory at a time."""
    task_id, files, annotated = None, {}, {}
    for snippet in items_public(version=version).iterator(chunk_size=500):
        task = snippet.task
        if task.pk != task_id:  # items come paper by paper: only the current task's files are kept
            task_id = task.pk
            files = {p: blob_read(sha256=d) for p, d in task.files.items()}
            annotated = {p: parse(files[p].decode("utf-8"), p) for p in task.annotated_paths}
            template = prompt_template(
                protocol=protocol, context_files=[(p, files[p].decode("utf-8")) for p in task.context_paths]
            )
            _json_line(
                out,
                {
                    "type": "paper",
                    "paper": task.paper.slug,
                    "paper_text": files[task.paper_path].decode("utf-8"),
                    "prompt_template": template,
                },
            )
        masked = snippet_masked(snippet=snippet, files=files, protocol=protocol, annotated=annotated[snippet.file_path])
        _json_line(
            out,
            {
                "type": "item",
                "id": str(snippet.pk),
                "paper": task.paper.slug,
                "file": snippet.file_path,
                "snippet": snippet.name,
                "loc": snippet.loc,
                "protocol": protocol.name,
                "masked_code": masked,
            },
        )


def _json_line(out: BinaryIO, record: dict) -> None:
    out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")


def release_items_in_protocol(*, version: BenchmarkVersion, protocol: Protocol) -> str:
    """The sha256 of the release's items JSONL in another protocol, built once: releases and protocols never change."""
    from django.core.cache import cache

    key = f"release-items-public:{version.pk}:{version.manifest_hash}:{protocol.name}"  # never an older key's file
    digest = cache.get(key)
    if digest is None or not Blob.objects.filter(sha256=digest).exists():
        with tempfile.TemporaryFile() as out:
            release_items_write(version=version, protocol=protocol, out=out)
            digest = blob_store_file(file=out).sha256
        cache.set(key, digest, timeout=None)
    return digest
