"""STORAGE_BACKEND=s3 end to end against moto's standalone S3 server over real HTTP: blobs, workers, health,
releases."""

from __future__ import annotations

import hashlib
import io
import os
import runpy
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from benchmarks.models import Blob, Task
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from tests.conftest import DEMO_PSET, REPO, _tcp_open, demo_papers, download_body, free_port, service_missing

pytestmark = pytest.mark.django_db
PAPER = "topk-attention-pool"  # the demo paper a worker evaluates an item of


@dataclass
class S3Server:
    process: subprocess.Popen
    env: dict[str, str]  # the settings' environment variables for this server, as a worker gets them
    client: object  # a boto3 S3 client, to look into the bucket without going through the platform

    def keys(self) -> set[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.env["S3_BUCKET"])
        return {item["Key"] for page in pages for item in page.get("Contents", [])}

    def blob_key(self, sha256: str) -> str:
        return f"{self.env['S3_PREFIX']}/{Blob(sha256=sha256, size=0).storage_name}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture
def s3(media_root, tmp_path):
    """A fresh moto S3 server with a bucket; Django's default storage is that bucket for the test."""
    import boto3

    moto_server = Path(sys.executable).with_name("moto_server")
    if not moto_server.exists():
        service_missing("moto S3 server", f"{moto_server} not found (pip install 'moto[server]')")
    port = free_port()
    env = {
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": "rcb-test",
        "S3_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "S3_REGION": "us-east-1",
        "S3_ACCESS_KEY_ID": "test-key",
        "S3_SECRET_ACCESS_KEY": "test-secret",
        "S3_PREFIX": "platform",
    }
    log = tmp_path / "moto.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(moto_server), "-H", "127.0.0.1", "-p", str(port)], stdout=output, stderr=subprocess.STDOUT
        )
    client = boto3.client(
        "s3",
        endpoint_url=env["S3_ENDPOINT_URL"],
        region_name=env["S3_REGION"],
        aws_access_key_id=env["S3_ACCESS_KEY_ID"],
        aws_secret_access_key=env["S3_SECRET_ACCESS_KEY"],
    )
    server = S3Server(process=process, env=env, client=client)
    try:
        deadline = time.monotonic() + 20
        while not _tcp_open("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto_server did not start on port {port}:\n{log.read_text()}")
            time.sleep(0.1)
        client.create_bucket(Bucket=env["S3_BUCKET"])
        # The STORAGES that config/settings.py builds from these variables; the setting_changed signal resets
        # django.core.files.storage.storages and default_storage on entering and leaving.
        with mock.patch.dict(os.environ, env):
            storages = runpy.run_path(str(REPO / "config" / "settings.py"))["STORAGES"]
        with override_settings(STORAGES=storages):
            yield server
    finally:
        server.stop()
        client.close()


def test_default_storage_is_the_bucket_and_importing_the_demo_set_fills_it(s3, media_root):
    from django.core.files.storage import default_storage, storages
    from storages.backends.s3 import S3Storage

    assert isinstance(storages["default"], S3Storage) and default_storage.bucket_name == s3.env["S3_BUCKET"]

    call_command("import_pset", str(DEMO_PSET), "--version", "s3-1.0.0", stdout=io.StringIO())

    hashes = {digest for task in Task.objects.all() for digest in task.files.values()}
    assert len(hashes) > 10 and set(Blob.objects.values_list("sha256", flat=True)) == hashes
    assert s3.keys() == {s3.blob_key(h) for h in hashes}
    stored = s3.client.get_object(Bucket=s3.env["S3_BUCKET"], Key=s3.blob_key(min(hashes)))["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == min(hashes)
    assert files_under(media_root) == []


def test_a_worker_fetches_task_files_from_the_bucket_into_an_empty_cache(s3, settings, tmp_path):
    from evaluation import taskfiles

    settings.SANDBOX_CACHE_DIR = cache = tmp_path / "worker-cache"
    task = pset_import(root=DEMO_PSET, version_name="s3-1.0.0").tasks_created[0]
    taskfiles._task_files.cache_clear()  # another test may have read a task with the same id and hash

    files = taskfiles.task_files(task)

    assert set(files) == set(task.files)
    assert {path: hashlib.sha256(data).hexdigest() for path, data in files.items()} == task.files
    cached = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files_under(cache / "blobs")}
    assert cached == {digest: digest for digest in task.files.values()}

    tampered = sorted(task.files.values())[0]
    (cache / "blobs" / tampered[:2] / tampered).unlink()
    s3.client.put_object(Bucket=s3.env["S3_BUCKET"], Key=s3.blob_key(tampered), Body=b"not the original")
    with pytest.raises(taskfiles.TaskFilesUnavailable, match="other content"):
        taskfiles.blob_cached(tampered)
    assert not (cache / "blobs" / tampered[:2] / tampered).exists(), "a corrupt object is never cached"


def test_healthz_checks_the_bucket_and_is_503_naming_storage_once_the_server_is_gone(s3, client, maintainer):
    client.force_login(maintainer)  # the checks' details are for maintainers
    healthy = client.get("/healthz")
    assert healthy.status_code == 200 and healthy.json()["checks"]["storage"]["ok"], healthy.json()
    assert s3.keys() == set(), "the probe object is deleted again"

    s3.stop()
    started = time.monotonic()
    response = client.get("/healthz")
    elapsed = time.monotonic() - started

    body = response.json()
    assert response.status_code == 503 and not body["healthy"]
    assert body["checks"]["storage"]["ok"] is False and body["checks"]["database"]["ok"] is True
    assert "127.0.0.1" in body["checks"]["storage"]["error"], body
    assert elapsed < 30, f"/healthz took {elapsed:.1f} s with the S3 server down"


def test_publishing_builds_the_downloads_in_the_bucket_and_both_download_views_serve_them(
    s3, client, maintainer, media_root
):
    draft = pset_import(root=DEMO_PSET, version_name="s3-1.0.0").version
    release = version_publish(version=draft, actor=maintainer, downloads_inline=True)

    keys = s3.keys()
    for kind, entry in release.downloads.items():
        assert s3.blob_key(entry["sha256"]) in keys
        for url in (
            reverse("version-download", args=[release.name, kind]),
            f"/api/v1/releases/{release.name}/downloads/{kind}/",
        ):
            response = client.get(url)
            assert response.status_code == 200, url
            body = download_body(response)
            assert hashlib.sha256(body).hexdigest() == entry["sha256"] == response["X-Content-SHA256"]
            assert len(body) == entry["size"]
    archive = download_body(client.get(reverse("version-download", args=[release.name, "pset"])))
    assert "s3-1.0.0/papers.yaml" in zipfile.ZipFile(io.BytesIO(archive)).namelist()
    assert files_under(media_root) == []


def test_an_archive_uploaded_to_a_submission_is_stored_in_the_bucket(s3, client, author, media_root):
    from submissions.models import Submission
    from tests.submissions.conftest import demo_files
    from tests.submissions.test_pages import zip_of

    files = demo_files()
    client.force_login(author)
    client.post(reverse("submission-new"), {"title": "DampNest"})
    submission = Submission.objects.get(author=author)
    response = client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": zip_of(files)}
    )

    assert response.status_code == 302
    submission.refresh_from_db()
    assert {s3.blob_key(d) for d in submission.draft["files"].values()} <= s3.keys()
    assert submission.draft["files"] == {p: hashlib.sha256(d).hexdigest() for p, d in files.items()}
    assert files_under(media_root) == []


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_celery_worker_configured_by_environment_evaluates_an_item_from_the_bucket(
    s3, celery_worker_factory, sandbox_cache, tmp_path, media_root
):
    from evaluation import services, tasks
    from evaluation.judging.sealed import recording_blobs
    from evaluation.models import ModelEntry, Outcome
    from tests.conftest import polled

    # The demo's paper with the fastest preparation: the item's first use records its task's reference calls.
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="s3-1.0.0", publish=True).version
    # An empty blob cache proves the worker read the bucket; the environments stay shared, built once per session.
    cache = tmp_path / "worker-cache"
    cache.mkdir()
    (sandbox_cache / "venvs").mkdir(exist_ok=True)
    (cache / "venvs").symlink_to(sandbox_cache / "venvs")
    worker = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="local", SANDBOX_CACHE_DIR=str(cache), **s3.env)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version, dispatch=False)
    snippet = version.tasks.get(paper__slug=PAPER).snippets.order_by("pk").first()

    tasks.item_evaluate.delay(run.pk, snippet.pk, 0)

    polled(lambda: Outcome.objects.filter(run=run).exists(), timeout=300, worker=worker, what="the item's outcome")
    outcome = Outcome.objects.get(run=run)
    assert (outcome.snippet, outcome.status) == (snippet, "passed"), outcome.detail
    cached = {p.name for p in files_under(cache / "blobs")}
    # The task's files, and the blobs of the recording its first use made (the sealed replay reads them).
    snippet.task.refresh_from_db()
    assert cached == set(snippet.task.files.values()) | recording_blobs(snippet.task.recording)
    assert files_under(media_root) == []
