"""Items files of releases published before held-out items became private listed held-out prompts: rewrite each
such file without the held-out papers' lines (stored under its new sha256, like every release file)."""

import hashlib
import json

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import migrations


def _storage_name(sha256: str) -> str:
    return f"blobs/{sha256[:2]}/{sha256}"


def forwards(apps, schema_editor):
    BenchmarkVersion = apps.get_model("benchmarks", "BenchmarkVersion")
    Blob = apps.get_model("benchmarks", "Blob")
    VersionTask = apps.get_model("benchmarks", "VersionTask")
    for version in BenchmarkVersion.objects.exclude(status="draft"):
        held_out = set(VersionTask.objects.filter(version=version, split="held_out")
                       .values_list("task__paper__slug", flat=True))
        entry = (version.downloads or {}).get("items")
        if not held_out or not entry:
            continue
        with default_storage.open(_storage_name(entry["sha256"]), "rb") as handle:
            lines = handle.read().decode("utf-8").splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line)["paper"] not in held_out]
        data = ("\n".join(kept) + "\n").encode()  # as release_downloads_build writes it
        digest = hashlib.sha256(data).hexdigest()
        Blob.objects.get_or_create(sha256=digest, defaults={"size": len(data)})
        if not default_storage.exists(_storage_name(digest)):
            default_storage.save(_storage_name(digest), ContentFile(data))
        version.downloads = {**version.downloads, "items": {**entry, "sha256": digest, "size": len(data)}}
        version.save(update_fields=["downloads"])


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0003_link_fields_http_only"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
