"""Celery entry points of the evaluation pipeline: `llm` queue generates, `sandbox` queue tests.

Every task is idempotent (results are unique per run, snippet and sample), so a redelivery after a worker died
(late acknowledgement) only finishes what is missing.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from evaluation import pipeline, services
from evaluation.models import EvaluationRun
from evaluation.pipeline import SANDBOX_RETRIES
from operations.watchdog import database_outage_outlasted
from sandbox import SandboxError

logger = logging.getLogger(__name__)


@shared_task(bind=True, max_retries=None)
@database_outage_outlasted
def item_generate(self, run_id: int, snippet_id: int, sample: int, epoch: int | None = None) -> None:
    """Ask the model for one item, store the answer, and hand the item to the sandbox queue (pipeline.generate)."""
    pipeline.generate(self, run_id, snippet_id, sample, epoch)


@shared_task(bind=True, max_retries=SANDBOX_RETRIES)
@database_outage_outlasted
def item_evaluate(self, run_id: int, snippet_id: int, sample: int, epoch: int | None = None) -> None:
    """Test one item's answer in the sandbox and record its outcome, once (pipeline.evaluate)."""
    pipeline.evaluate(self, run_id, snippet_id, sample, epoch)


@shared_task(bind=True, max_retries=None)
@database_outage_outlasted
def run_dispatch(self, run_id: int) -> int:
    """Start feeding a run's items (a large upload's items leave the web request here)."""
    run = EvaluationRun.objects.select_related("model", "version").filter(pk=run_id).first()
    if run is None or not run.is_active:
        return 0
    return services.run_dispatch(run=run)


@shared_task(bind=True, max_retries=SANDBOX_RETRIES)
@database_outage_outlasted
def task_prepare(self, preparation_id: int) -> str:
    """Make one task revision's test manifest and recording for a release being imported, validated or published
    (evaluation/preparation.py), so its runs do not."""
    from evaluation.preparation import preparation_fail, preparation_run

    try:
        return preparation_run(preparation_id=preparation_id)
    except SandboxError as exc:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5) from exc
        logger.exception("the preparation %s failed on the sandbox", preparation_id)
        preparation_fail(preparation_id=preparation_id, detail=f"the sandbox failed: {exc}")
    except (OperationalError, InterfaceError):
        raise  # the database is away: the decorator waits for it, past that the watchdog queues it again
    except Exception as exc:  # a fault of the platform's: the page says so; runs make the manifest themselves
        logger.exception("the preparation %s failed", preparation_id)
        preparation_fail(preparation_id=preparation_id, detail=f"{type(exc).__name__}: {exc}")
    return "failed"


@shared_task
def environments_prune() -> list[str]:
    """Periodic (CELERY_BEAT_SCHEDULE, queue sandbox): remove the environments of the worker host that takes it which
    no run used for SANDBOX_ENVIRONMENT_UNUSED_DAYS (with several hosts, run `manage.py cleanup` on each)."""
    from evaluation.executor import backend_current

    removed = backend_current().environments_prune(unused_seconds=settings.SANDBOX_ENVIRONMENT_UNUSED_DAYS * 86400)
    logger.info("removed %d unused environment(s): %s", len(removed), ", ".join(h[:12] for h in removed))
    return removed


@shared_task(bind=True, max_retries=3)
def harbor_dataset_prepare(self, version_id: int) -> dict | None:
    """The `sandbox` queue (the export runs the base image on the Docker engine): build a published release's
    Harbor dataset download unless it has one (evaluation/harbor/dataset.py)."""
    from evaluation.harbor.dataset import harbor_dataset_prepare as prepare

    try:
        return prepare(version_id=version_id)
    except Exception as exc:  # the engine or storage may come back: try again, then leave it to the log
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=settings.RELEASE_DOWNLOADS_RETRY_SECONDS) from exc
        logger.error("the Harbor dataset of release %s could not be built: %s", version_id, exc)
        raise


def harbor_dataset_queue(sender=None, *, version, **kwargs) -> None:
    """On publishing (benchmarks.services.publishing.version_published): have a sandbox worker build the Harbor
    dataset, unless HARBOR_DATASET_DOWNLOAD is off."""
    from operations.enqueue import enqueue

    if not settings.HARBOR_DATASET_DOWNLOAD:
        return

    enqueue(
        harbor_dataset_prepare,
        version.pk,
        subject=version,
        refused=lambda exc: f"the Harbor dataset of release {version.name} could not be queued ({exc})",
    )
