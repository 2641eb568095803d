"""Delete abandoned empty drafts and remove this host's environments that no run used for a while."""

from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand

from sandbox import SandboxError, backend_get
from submissions.services import drafts_abandoned_remove


class Command(BaseCommand):
    help = (
        "Delete drafts never submitted that hold no files, untouched for SUBMISSION_DRAFT_ABANDONED_DAYS, and "
        "remove this host's environments unused for SANDBOX_ENVIRONMENT_UNUSED_DAYS (run it on each worker "
        "host, e.g. daily from cron; the Celery tasks of CELERY_BEAT_SCHEDULE do the same)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-environments", action="store_true", help="only the drafts (a host with no sandbox)")

    def handle(self, *args, **options) -> None:
        drafts = drafts_abandoned_remove(older_than=timedelta(days=settings.SUBMISSION_DRAFT_ABANDONED_DAYS))
        self.stdout.write(f"deleted {drafts} abandoned empty draft(s)")
        if options["no_environments"]:
            return
        try:
            backend = backend_get()
        except SandboxError as exc:
            self.stderr.write(f"environments not pruned: {exc}")
            return
        removed = backend.environments_prune(unused_seconds=settings.SANDBOX_ENVIRONMENT_UNUSED_DAYS * 86400)
        self.stdout.write(
            f"removed {len(removed)} {backend.name} environment(s) unused for "
            f"{settings.SANDBOX_ENVIRONMENT_UNUSED_DAYS} days" + "".join(f"\n  {env_hash}" for env_hash in removed)
        )
