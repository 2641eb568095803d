"""Celery entry points of releases: a published release's downloads, built by a worker after publishing."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from benchmarks.services import downloads


@shared_task(bind=True, max_retries=3)
def release_downloads_prepare(self, version_id: int) -> dict:
    """The `default` queue: build the problem-set zip and the items file of a release that has none yet."""
    try:
        return downloads.release_downloads_prepare(version_id=version_id)
    except Exception as exc:  # storage or database trouble may pass: try again, then say why on the release
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=settings.RELEASE_DOWNLOADS_RETRY_SECONDS) from exc
        downloads.release_downloads_fail(version_id=version_id, error=exc)
        raise
