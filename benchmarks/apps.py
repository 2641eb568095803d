from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from django.urls import reverse

        from benchmarks.models import BenchmarkVersion
        from benchmarks.services.downloads import release_downloads_requeue, releases_downloads_pending
        from operations.events import Subject, subjects_register
        from operations.watchdog import WorkKind, work_register

        # A release's downloads are built by a worker after publishing: lost work the watchdog looks after.
        work_register(
            WorkKind(
                name="release downloads",
                model=BenchmarkVersion,
                tasks=frozenset({"benchmarks.tasks.release_downloads_prepare"}),
                unfinished=releases_downloads_pending,
                moved_at=lambda version: (version.published_at, version.downloads_queued_at),
                requeue=release_downloads_requeue,
            )
        )
        subjects_register(
            BenchmarkVersion,
            lambda ids: {
                pk: Subject(f"release {name}", reverse("version-detail", args=[name]))
                for pk, name in BenchmarkVersion.objects.filter(pk__in=ids).values_list("pk", "name")
            },
        )
