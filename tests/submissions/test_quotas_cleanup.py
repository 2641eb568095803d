"""A submission exists from its first save; per-author limits on stored bytes and environments; the clean-up of
abandoned drafts and of environments no run used for a while, on real sandbox backends."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from evaluation import executor
from submissions import services
from submissions.models import Submission
from submissions.quotas import QuotaExceeded
from tests.conftest import sandbox_backend_or_missing
from tests.submissions.conftest import demo_files, fill_draft
from tests.submissions.test_pages import zip_of

pytestmark = pytest.mark.django_db


def test_opening_the_form_creates_nothing_and_the_first_save_creates_the_submission(client, author):
    client.force_login(author)
    page = client.get(reverse("submission-list")).content.decode()
    assert f'href="{reverse("submission-new")}"' in page
    for _ in range(3):
        assert client.get(reverse("submission-new")).status_code == 200
    assert client.post(reverse("submission-new"), {"venue": "X"}).status_code == 200, "the title is missing"
    assert not Submission.objects.exists()

    response = client.post(reverse("submission-new"), {"title": "DampNest", "venue": "DEMO2025"})
    submission = Submission.objects.get()
    assert response.url == reverse("submission-step", args=[submission.pk, "paper"])
    assert submission.author == author and submission.title == "DampNest"
    assert submission.draft["metadata"]["venue"] == "DEMO2025" and submission.draft["metadata"]["id"] == "dampnest"


def test_stored_bytes_over_the_author_limit_are_refused_before_storing(
    client, author, other_author, settings, media_root
):
    from benchmarks.models import Blob

    files = demo_files()
    total = sum(len(data) for data in files.values())
    settings.SUBMISSION_USER_MAX_BYTES = total + 50  # room for the demo package once, not for more code
    first = fill_draft(services.submission_create(author=author), author)  # the whole demo package, once
    client.force_login(author)
    second = services.submission_create(author=author, values={"metadata": {"title": "Another"}})
    other_code = {name: data + b"\n# changed\n" for name, data in files.items() if name.endswith(".py")}
    blobs_before = Blob.objects.count()
    response = client.post(
        reverse("submission-step", args=[second.pk, "code"]), {"source": "archive", "archive": zip_of(other_code)}
    )
    page = " ".join(response.content.decode().split())
    assert response.status_code == 200 and "your submissions would keep" in page and "over the limit of" in page
    assert Blob.objects.count() == blobs_before, "nothing was stored"
    second.refresh_from_db()
    assert not second.draft.get("files")

    same_code = {name: data for name, data in files.items() if name.endswith(".py")}
    second = services.draft_code_save(submission=second, actor=author, files=same_code, source={"kind": "archive"})
    assert set(second.draft["files"].values()) <= set(first.draft["files"].values()), "stored once, counted once"
    services.draft_code_save(
        submission=services.submission_create(author=other_author),
        actor=other_author,
        files=other_code,
        source={"kind": "archive"},
    )  # the limit is per author


def test_environments_over_the_author_limit_are_refused_at_submit(author, settings, media_root, maintainer):
    settings.SUBMISSION_USER_MAX_ENVIRONMENTS = 2
    drafts = [
        fill_draft(services.submission_create(author=author), author, requirements=f"numpy=={v}\n")
        for v in ("1.26.0", "1.26.1", "1.26.2")
    ]
    services.submission_submit(submission=drafts[0], actor=author)
    services.submission_submit(submission=drafts[1], actor=author)
    with pytest.raises(QuotaExceeded, match=r"already need 2 different environments .*the limit per author is 2"):
        services.submission_submit(submission=drafts[2], actor=author)
    assert Submission.objects.get(pk=drafts[2].pk).state == Submission.State.DRAFT
    again = fill_draft(services.submission_create(author=author), author, requirements="numpy==1.26.1\n")
    services.submission_submit(submission=again, actor=author)  # an environment it already needs is free
    none = fill_draft(services.submission_create(author=author), author, requirements="")
    services.submission_submit(submission=none, actor=author)  # so is the base environment
    own = fill_draft(services.submission_create(author=maintainer), maintainer, requirements="torch\n")
    services.submission_submit(submission=own, actor=maintainer)  # maintainers are not limited


def test_the_refusal_at_submit_is_shown_on_the_page(client, author, settings, media_root):
    settings.SUBMISSION_USER_MAX_ENVIRONMENTS = 0
    draft = fill_draft(services.submission_create(author=author), author)
    client.force_login(author)
    response = client.post(reverse("submission-action", args=[draft.pk, "submit"]), follow=True)
    assert "different environments" in response.content.decode()


def test_cleanup_deletes_only_abandoned_empty_drafts(author, media_root, settings):
    settings.SUBMISSION_DRAFT_ABANDONED_DAYS = 30
    old = timezone.now() - timedelta(days=31)
    empty_old = services.submission_create(author=author, values={"metadata": {"title": "Left"}})
    empty_new = services.submission_create(author=author)
    with_files = fill_draft(services.submission_create(author=author), author)
    submitted = fill_draft(services.submission_create(author=author), author)
    services.submission_submit(submission=submitted, actor=author)
    Submission.objects.filter(pk__in=[empty_old.pk, with_files.pk, submitted.pk]).update(updated_at=old)
    call_command("cleanup", "--no-environments")
    assert set(Submission.objects.values_list("pk", flat=True)) == {empty_new.pk, with_files.pk, submitted.pk}


def test_the_periodic_task_deletes_them_too(author, settings):
    from submissions.tasks import drafts_prune

    services.submission_create(author=author)
    Submission.objects.update(updated_at=timezone.now() - timedelta(days=settings.SUBMISSION_DRAFT_ABANDONED_DAYS + 1))
    assert drafts_prune() == 1 and not Submission.objects.exists()


@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
def test_environments_unused_for_the_configured_time_are_removed_and_rebuilt_when_needed(
    backend_name, tmp_path, settings, executor_backend
):
    backend = sandbox_backend_or_missing(backend_name, tmp_path / "cache")
    env_hash = f"{int(time.time() * 1000):x}".rjust(64, "c")  # an environment of its own (no requirements)
    executor_backend(backend)
    try:
        session = executor.session_for(env_hash, "")
        location = session.environment.location
        assert _exists(backend, location)
        assert backend.environments_prune(unused_seconds=3600) == [], "used just now"

        marker = tmp_path / "cache" / "used" / env_hash
        stale = time.time() - 2 * 86400
        os.utime(marker, (stale, stale))
        settings.SANDBOX_CACHE_DIR, settings.SANDBOX_BACKEND, settings.SANDBOX_ENVIRONMENT_UNUSED_DAYS = (
            tmp_path / "cache",
            backend_name,
            1,
        )
        call_command("cleanup")
        assert not _exists(backend, location) and not marker.exists()

        again = executor.session_for(env_hash, "")  # the warm session notices and builds it again
        assert again is not session and _exists(backend, again.environment.location) and marker.exists()
    finally:
        executor.backend_use(None)  # its sessions closed before its environment goes
        backend.environment_remove(env_hash=env_hash)


def _exists(backend, location: str) -> bool:
    if backend.name == "docker":
        import docker

        try:
            backend.client().images.get(location)
            return True
        except docker.errors.ImageNotFound:
            return False
    return os.path.exists(location)
