"""A release's downloads are built by a real Celery worker (the `default` queue) after the publish commits, not in
the maintainer's request: until they exist the page says they are being prepared and the API answers 409 with
Retry-After; a build that fails for good says why (503) and a maintainer has it prepared again; a build the broker
lost (a Redis of the test's own, restarted) is queued again by the watchdog; the embedded default (filesystem broker,
no Redis) builds them too."""

from __future__ import annotations

import hashlib
import tempfile

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import BenchmarkVersion, Blob
from benchmarks.selectors import blob_read
from benchmarks.services.blobs import blob_store
from benchmarks.services.downloads import release_items_write, release_pset_zip_write
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from tests.conftest import DEMO_PSET, download_body, polled
from tests.outages import WATCH

# Their tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
ITEMS = "/api/v1/releases/1.0.0/downloads/items/"


def ready(version: BenchmarkVersion) -> bool:
    return BenchmarkVersion.objects.get(pk=version.pk).downloads_status == "ready"


def sha256_of(write, version: BenchmarkVersion, **kw) -> str:
    with tempfile.TemporaryFile() as out:
        write(version=version, out=out, **kw)
        out.seek(0)
        return hashlib.sha256(out.read()).hexdigest()


def test_publishing_queues_the_downloads_and_a_worker_builds_them(
    celery_worker_factory, media_root, client, maintainer
):
    from benchmarks.selectors import protocol_get

    draft = pset_import(root=DEMO_PSET, version_name="1.0.0").version
    client.force_login(maintainer)
    response = client.post(
        reverse("version-publish", args=["1.0.0"]), {"notes": "First.", "confirm": "yes"}, follow=True
    )
    assert "Its downloads are being prepared by a worker." in response.content.decode()
    version = BenchmarkVersion.objects.get(pk=draft.pk)
    assert version.status == "published" and version.downloads == {} and version.downloads_status == "preparing"

    page = client.get(reverse("version-detail", args=["1.0.0"])).content.decode()
    assert "Downloads are being prepared" in page and 'hx-trigger="every 3s"' in page
    assert client.get(reverse("version-download", args=["1.0.0", "items"])).status_code == 409
    api = APIClient()
    waiting = api.get(ITEMS)
    assert waiting.status_code == 409 and waiting["Retry-After"] == "10"
    assert waiting.json()["error"]["code"] == "downloads_preparing"
    assert api.get("/api/v1/releases/1.0.0/").json()["downloads_status"] == "preparing"

    worker = celery_worker_factory(queues="default")
    polled(lambda: ready(version), timeout=180, what="the worker to build the downloads", worker=worker)
    assert "release_downloads_prepare" in worker.output()
    version.refresh_from_db()
    assert version.downloads["items"]["sha256"] == sha256_of(
        release_items_write, version, protocol=protocol_get(name=version.protocol_id)
    )
    assert version.downloads["pset"]["sha256"] == sha256_of(release_pset_zip_write, version)
    page = client.get(reverse("version-detail", args=["1.0.0"])).content.decode()
    assert "being prepared" not in page and version.downloads["items"]["filename"] in page
    served = api.get(ITEMS)
    assert served.status_code == 200
    assert hashlib.sha256(download_body(served)).hexdigest() == version.downloads["items"]["sha256"]
    assert api.get("/api/v1/releases/1.0.0/").json()["downloads_status"] == "ready"


def test_a_build_that_fails_for_good_says_why_and_a_maintainer_has_it_prepared_again(
    celery_worker_factory, media_root, client, maintainer
):
    draft = pset_import(root=DEMO_PSET, version_name="1.0.0").version
    task = draft.tasks.get(paper__slug="dampnest")
    lost = task.files[task.paper_path]
    content = blob_read(sha256=lost)
    default_storage.delete(Blob(sha256=lost, size=0).storage_name)  # storage lost a file the build needs
    worker = celery_worker_factory(queues="default", RELEASE_DOWNLOADS_RETRY_SECONDS="1")
    version = version_publish(version=draft, actor=maintainer)

    polled(
        lambda: BenchmarkVersion.objects.get(pk=version.pk).downloads_status == "failed",
        timeout=180,
        what="the build to fail after its retries",
        worker=worker,
    )
    version.refresh_from_db()
    assert "FileNotFoundError" in version.downloads_failed and version.downloads == {}
    failed = APIClient().get(ITEMS)
    assert failed.status_code == 503 and failed.json()["error"]["code"] == "downloads_failed"
    client.force_login(maintainer)
    page = client.get(reverse("version-detail", args=["1.0.0"])).content.decode()
    assert "The downloads could not be built: FileNotFoundError" in page and 'hx-trigger="every 3s"' not in page
    assert "Prepare the downloads again" in page

    blob_store(content=content)  # the file is back
    again = client.post(reverse("version-downloads-retry", args=["1.0.0"]), follow=True).content.decode()
    assert "being prepared again" in again
    polled(lambda: ready(version), timeout=180, what="the downloads to be built again", worker=worker)
    assert APIClient().get(ITEMS).status_code == 200
    refused = client.post(reverse("version-downloads-retry", args=["1.0.0"]), follow=True).content.decode()
    assert "only failed ones are prepared again" in refused


def test_a_build_the_broker_lost_is_queued_again_by_the_watchdog(
    own_redis, celery_worker_factory, media_root, maintainer, client
):
    from operations.models import OperationsEvent

    version = version_publish(version=pset_import(root=DEMO_PSET, version_name="1.0.0").version, actor=maintainer)
    own_redis.kill()  # no worker has taken the build yet: its message is gone with the broker
    own_redis.start()
    worker = celery_worker_factory(queues="default", **WATCH)
    polled(lambda: ready(version), timeout=180, what="the watchdog to queue the build again", worker=worker)
    event = OperationsEvent.objects.get(kind=OperationsEvent.Kind.DOWNLOADS_REDISPATCHED)
    assert "release 1.0.0" in event.detail and event.worker
    client.force_login(maintainer)
    operations = client.get("/operations/").content.decode()
    assert f'data-event="{event.pk}"' in operations and "Downloads re-dispatched" in operations


def test_the_embedded_default_builds_the_downloads_too(media_root, sandbox_cache, tmp_path, maintainer):
    """kombu's filesystem broker and a worker on every queue, as `make run` starts them."""
    from tests.conftest import embedded_worker

    with embedded_worker(
        tmp_path,
        queues="default,llm,sandbox",
        env={"MEDIA_ROOT": str(media_root), "SANDBOX_CACHE_DIR": str(sandbox_cache)},
    ) as (worker, _):
        draft = pset_import(root=DEMO_PSET, version_name="1.0.0").version
        version = version_publish(version=draft, actor=maintainer)
        polled(lambda: ready(version), timeout=180, what="the embedded worker to build the downloads", worker=worker)
        assert APIClient().get(ITEMS).status_code == 200
