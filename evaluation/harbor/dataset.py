"""A release's public split as a Harbor dataset: its download, built once per release like the release's other
downloads (benchmarks.services.downloads.release_downloads_build), by a sandbox worker after publishing (the export
runs the base image's interpreter on the Docker engine to choose the environment's files).

The archive is a .tar.gz of `<release>-harbor/<task>/...` (export.release_export's folders, split "public" only: a
held-out task is never in it). The tasks of one environment bundle the same pinned distributions; each is stored
once and every further copy is a hard link to it (`tar xzf` makes them files again), so the archive holds an
environment's wheels once, not once per task.
"""

from __future__ import annotations

import hashlib
import logging
import tarfile
import tempfile
from pathlib import Path

from django.db import transaction

from benchmarks.models import BenchmarkVersion
from benchmarks.services.blobs import blob_store_file
from evaluation.harbor.export import release_export

logger = logging.getLogger(__name__)

KIND = "harbor"  # the release's downloads key
CONTENT_TYPE = "application/gzip"


def harbor_dataset_filename(version: BenchmarkVersion) -> str:
    return f"{version.name}-harbor-dataset.tar.gz"


def harbor_dataset_write(*, version: BenchmarkVersion, out) -> list[str]:
    """Write the release's public split as Harbor tasks, archived (tar.gz, identical files stored once), to `out`;
    the task names."""
    top = f"{version.name}-harbor"
    with tempfile.TemporaryDirectory(prefix="rcb-harbor-dataset-") as folder:
        root = Path(folder) / top
        names = release_export(version=version, root=root, split="public")
        seen: dict[str, str] = {}  # content sha256 -> the archive name of its first copy
        with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(root.rglob("*")):
                name = f"{top}/{path.relative_to(root).as_posix()}"
                info = tar.gettarinfo(str(path), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = int(version.published_at.timestamp()) if version.published_at else 0
                if not path.is_file():
                    tar.addfile(info)
                    continue
                digest = _sha256(path)
                if digest in seen:
                    info.type, info.linkname, info.size = tarfile.LNKTYPE, seen[digest], 0
                    tar.addfile(info)
                    continue
                seen[digest] = name
                with path.open("rb") as data:
                    tar.addfile(info, data)
    return names


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def harbor_dataset_prepare(*, version_id: int) -> dict | None:
    """Build and keep a published release's Harbor dataset unless it exists (a redelivered task builds nothing);
    its entry in the release's downloads."""
    version = BenchmarkVersion.objects.get(pk=version_id)
    if KIND in version.downloads or not version.is_frozen:
        return version.downloads.get(KIND)
    with tempfile.TemporaryFile() as out:
        harbor_dataset_write(version=version, out=out)
        blob = blob_store_file(file=out)
    entry = {"filename": harbor_dataset_filename(version), "sha256": blob.sha256, "size": blob.size}
    with transaction.atomic():  # the release's other downloads may be stored meanwhile: add to them
        locked = BenchmarkVersion.objects.select_for_update().get(pk=version_id)
        locked.downloads = {**locked.downloads, KIND: entry}
        locked.save(update_fields=["downloads"])
    return entry
