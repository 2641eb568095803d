"""A release's public split as a Harbor dataset, a download of the release built once (evaluation/harbor/dataset.py):
served from the release page, holding no held-out task, each of its tasks passing `harbor lint` with no finding, an
environment's wheels stored once however many tasks bundle them.

Harbor (0.26.0, Python 3.12) lives in an environment of its own: HARBOR_BIN names its executable (as for
test_harbor_roundtrip.py)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import tomllib

import pytest
from django.urls import reverse

from benchmarks import visibility
from benchmarks.models import BenchmarkVersion, VersionTask
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation.harbor.dataset import KIND, harbor_dataset_prepare
from evaluation.harbor.export import harbor_task_name
from tests.conftest import DEMO_PSET, download_body
from tests.evaluation.test_harbor_roundtrip import harbor  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(media_root, maintainer):
    """The demo with trimmed-infonce held out."""
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    held = draft.tasks.get(paper__slug="trimmed-infonce")
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    return version_publish(version=draft, actor=maintainer, downloads_inline=True)


@pytest.mark.docker
@pytest.mark.slow
def test_the_release_page_downloads_its_public_split_as_a_harbor_dataset_that_harbor_lints_clean(
    release,
    client,
    tmp_path,
    harbor,  # noqa: F811
):
    assert KIND not in release.downloads  # not built in the publishing request: a sandbox worker builds it
    entry = harbor_dataset_prepare(version_id=release.pk)
    assert harbor_dataset_prepare(version_id=release.pk) == entry  # built once: a second task builds nothing
    assert BenchmarkVersion.objects.get(pk=release.pk).downloads_status == "ready"
    page = client.get(reverse("version-detail", args=[release.name])).content.decode()
    url = reverse("version-download", args=[release.name, KIND])
    assert url in page and entry["filename"] in page
    body = download_body(client.get(url))
    assert hashlib.sha256(body).hexdigest() == entry["sha256"] and len(body) == entry["size"]

    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        members = archive.getmembers()
        archive.extractall(tmp_path, filter="data")
    root = tmp_path / f"{release.name}-harbor"
    tasks = sorted(p for p in root.iterdir() if p.is_dir())
    names = {tomllib.loads((task / "task.toml").read_text())["task"]["name"] for task in tasks}
    public = {harbor_task_name(s) for s in visibility.items_public(version=release)}
    assert names == public and not any("trimmed-infonce" in name for name in names)  # held-out never in it
    assert {tomllib.loads((t / "task.toml").read_text())["metadata"]["split"] for t in tasks} == {"public"}
    wheels = [m for m in members if "/environment/wheels/" in m.name]
    assert wheels and any(m.islnk() for m in wheels)  # every task bundles its wheels...
    stored = [m for m in wheels if m.isfile()]
    assert len({m.name.rsplit("/", 1)[1] for m in stored}) == len(stored)  # ...each stored once
    lint = subprocess.run([harbor, "lint", *map(str, tasks)], capture_output=True, text=True)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout[-3000:]


def test_publishing_queues_the_build_on_the_sandbox_queue(
    media_root, maintainer, settings, fresh_broker, django_capture_on_commit_callbacks
):
    import json

    import redis

    settings.HARBOR_DATASET_DOWNLOAD = True  # the suite's default is off (tests/conftest.py)
    broker = redis.Redis.from_url(fresh_broker)
    before = broker.llen("sandbox")
    draft = pset_import(root=DEMO_PSET, version_name="1.0.0").version
    with django_capture_on_commit_callbacks(execute=True):
        version_publish(version=draft, actor=maintainer, downloads_inline=True)
    raw = broker.lrange("sandbox", 0, broker.llen("sandbox") - before - 1)  # the broker pushes at the head
    ours = [m for m in raw if json.loads(m)["headers"]["task"] == "evaluation.tasks.harbor_dataset_prepare"]
    for message in ours:  # no sandbox worker of a later test is to build it
        broker.lrem("sandbox", 1, message)
    assert [json.loads(m)["headers"]["argsrepr"] for m in ours] == [f"({draft.pk},)"]
