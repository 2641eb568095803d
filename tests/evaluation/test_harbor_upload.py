"""A Harbor job imported through the API (POST /api/v1/runs/harbor/) and the model page's form: one service
(evaluation/harbor/imports.harbor_archive_import) behind both, so the run is re-scored by the platform and a hostile
job is refused whole, every problem listed, nothing stored. The job folder's own rules are test_harbor_import.py's."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks import visibility
from benchmarks.models import VersionTask
from benchmarks.services.curation import version_draft_create, version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services
from evaluation.harbor.export import harbor_task_name
from evaluation.models import EvaluationRun, Generation
from tests.conftest import DEMO_PSET, client_for, page_text
from tests.evaluation.test_harbor_import import _trial, job_write

pytestmark = pytest.mark.django_db
API = "/api/v1/runs/harbor/"


@pytest.fixture
def version(media_root):
    return pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version


@pytest.fixture
def model(author):
    return services.model_register(name="harbor-agent", display_name="Harbor agent", kind="uploaded", owner=author)


def archive(job: Path, *, extra: dict[str, bytes] | None = None) -> bytes:
    """The job's folder as `tar czf job.tgz -C <parent> <job>` makes it, plus `extra` entries named as given."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.add(job, arcname=job.name)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _api(user, data: bytes, release: str = "1.0.0", name: str = "oracle.tgz"):
    return client_for(user).post(
        API,
        {"file": SimpleUploadedFile(name, data), "model": "harbor-agent", "release": release},
        format="multipart",
    )


def _nothing_stored():
    assert not EvaluationRun.objects.exists() and not Generation.objects.exists()


def test_the_api_imports_a_job_as_a_self_reported_agent_run_scored_again(tmp_path, version, model, author):
    response = _api(author, archive(job_write(tmp_path / "oracle", version)))
    assert response.status_code == 201, response.content
    body = response.json()
    run = EvaluationRun.objects.get(pk=body["id"])
    assert (run.mode, run.provenance, run.created_by, run.scaffold) == (
        "agent",
        "self_reported",
        author,
        "oracle 1.0.0",
    )
    assert run.total_items == visibility.items_public(version=version).count() == run.generations.count()
    assert run.params["harbor"]["job"] == "oracle" and body["notes"] == []
    assert body["follow"]["page"].endswith(reverse("run-detail", args=[run.pk]))


def test_a_path_leaving_the_job_is_refused_by_the_api_and_nothing_is_written_or_stored(
    tmp_path, version, model, author
):
    job = job_write(tmp_path / "jobs" / "oracle", version)
    hostile = archive(job, extra={"oracle/../../escaped.txt": b"written outside the job\n"})
    unguarded = tmp_path / "unguarded" / "jobs"
    unguarded.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(hostile)) as tar:  # no guard: a plain extraction writes outside the job
        tar.extractall(unguarded, filter="fully_trusted")
    assert (tmp_path / "unguarded" / "escaped.txt").is_file()
    response = _api(author, hostile)
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert len(details) == 1 and "contains '..' and could leave the package folder" in details[0]
    _nothing_stored()


def test_held_out_tasks_are_refused_for_a_non_maintainer_every_one_listed(tmp_path, media_root, maintainer, author):
    public = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    draft = version_draft_create(name="1.1.0", actor=maintainer)
    held = draft.tasks.get(paper__slug="trimmed-infonce")
    version_task_set(version=draft, task=held, split=VersionTask.Split.HELD_OUT, actor=maintainer)
    version_publish(version=draft, actor=maintainer)
    services.model_register(name="harbor-agent", display_name="Harbor agent", kind="uploaded", owner=author)
    job = job_write(tmp_path / "oracle", public)  # 1.0.0's items, trimmed-infonce's among them
    response = _api(author, archive(job), release="1.1.0")
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    named = [
        harbor_task_name(s) for s in visibility.items_public(version=public) if s.task.paper.slug == "trimmed-infonce"
    ]
    assert named and all(
        any(repr(name) in p and "is not a public item of release 1.1.0" in p for p in details) for name in named
    )
    _nothing_stored()


def test_only_the_models_owner_or_a_maintainer_imports_its_runs(tmp_path, version, model, other_author):
    response = _api(other_author, archive(job_write(tmp_path / "oracle", version)))
    assert response.status_code == 403
    _nothing_stored()


def test_the_model_pages_form_imports_a_job_and_lists_every_problem_of_a_refused_one(
    client, tmp_path, version, model, author
):
    client.force_login(author)
    page = client.get(reverse("model-detail", args=["harbor-agent"])).content.decode()
    assert 'id="harbor"' in page and reverse("run-harbor-import", args=["harbor-agent"]) in page
    job = job_write(tmp_path / "oracle", version)
    first, second = list(visibility.items_public(version=version))[:2]
    result = _trial(job, first) / "result.json"
    result.write_text(result.read_text().replace(harbor_task_name(first), "researchcodebench/elsewhere.x.0"))
    (_trial(job, second) / "result.json").write_text("{not json")

    def post(data: bytes):
        return client.post(
            reverse("run-harbor-import", args=["harbor-agent"]),
            {"file": SimpleUploadedFile("oracle.tgz", data), "release": "1.0.0"},
        )

    refused = post(archive(job))
    assert refused.status_code == 400
    shown = page_text(refused.content.decode().split('id="harbor-problems"')[1].split("</div>")[0])
    api = _api(author, archive(job)).json()["error"]["details"]  # one service, one set of problems
    assert len(api) == 4 and all(problem in shown for problem in api)
    assert "'researchcodebench/elsewhere.x.0' is not a public item" in shown and "result.json: not JSON" in shown
    _nothing_stored()
    good = job_write(tmp_path / "again", version)
    response = post(archive(good))
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("run-detail", args=[run.pk])
    assert run.scaffold == "oracle 1.0.0" and run.created_by == author and run.params["harbor"]["job"] == "oracle"
