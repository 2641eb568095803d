"""Files stored by content hash (`Blob`), and the hashes that name a task's environment."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage

from benchmarks.models import (
    Blob,
)


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def environment_hash(requirements: str) -> str:
    """Hash of the requirement lines that matter, so reordering or comments don't rebuild an environment."""
    lines = sorted({ln.strip() for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("#")})
    return sha256_hex("\n".join(lines))


def blob_store(*, content: bytes) -> Blob:
    """Store content once under its sha256 (idempotent)."""
    return _blob_save(sha256_hex(content), len(content), ContentFile(content))


def blob_store_file(*, file: BinaryIO) -> Blob:
    """Store an open file's content once under its sha256, reading it in chunks (never whole in memory)."""
    digest, size = hashlib.sha256(), 0
    file.seek(0)
    for chunk in iter(lambda: file.read(1024 * 1024), b""):
        digest.update(chunk)
        size += len(chunk)
    file.seek(0)
    return _blob_save(digest.hexdigest(), size, File(file))


def _blob_save(digest: str, size: int, content: File) -> Blob:
    blob, created = Blob.objects.get_or_create(sha256=digest, defaults={"size": size})
    if created or not default_storage.exists(blob.storage_name):
        if default_storage.exists(blob.storage_name):
            default_storage.delete(blob.storage_name)
        default_storage.save(blob.storage_name, content)
    return blob
